"""A run on a terminal: what ``bench run``, ``tasks validate``, ``bundle run`` and the demo share.

:func:`run_suite` prepares and executes a run with a progress bar on stderr, :func:`print_report`
scores it and prints its tables, :func:`suite_backend` is the backend a command uses when given
none. Not a command's module, so that the command modules (and :mod:`webfreeze.demo`) import it
rather than each other.
"""

from __future__ import annotations

import click

from webfreeze.eval.infrastructure import infrastructure_phrase
from webfreeze.eval.replay_provenance import summary_line
from webfreeze.eval.report import personalisation_markdown, summary_table, unshown_start_warning, write_report
from webfreeze.eval.tasks import load_suite
from webfreeze.runs.execute import execute
from webfreeze.runs.live import live_error_warning
from webfreeze.runs.prepare import prepare
from webfreeze.runs.spec import build_run


def console():
    """A console for tables on stdout (140 columns wide when stdout is not a terminal)."""
    from rich.console import Console

    out = Console()
    return out if out.is_terminal else Console(width=140)


def run_suite(suite, archive, agent, out, *, quiet=False, **settings) -> dict:
    """Prepare and execute a run with a progress bar on stderr; returns the manifest. ``settings``
    are the run's (:func:`webfreeze.runs.spec.build_run`)."""
    from rich.console import Console  # (late, as the other rich imports: only runs draw a bar)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    prep = prepare(*build_run(suite, agent, out, archive=archive, **settings))
    err = Console(stderr=True)
    if prep.manifest["archive_matches_suite"] is False:
        click.echo(f"warning: {prep.archive} is not the archive the suite was made for (digest differs)", err=True)
    if prep.done and not quiet:
        click.echo(f"resuming {out}: {len(prep.done)} of {len(prep.suite.tasks)} tasks already ran", err=True)
    ends: dict[str, int] = {}
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        TextColumn("{task.fields[ends]}"), console=err, transient=True,
                        disable=quiet or not err.is_terminal)
    label = f"{agent} (oracle: {prep.manifest['agent']['label']})" if prep.manifest["agent"]["oracle"] else agent
    bar = progress.add_task(f"{label} on {prep.suite.name} ({prep.spec.backend})", total=len(prep.suite.tasks),
                            completed=len(prep.done), ends="")

    def advance(summary: dict) -> None:
        ends[summary["end"]] = ends.get(summary["end"], 0) + 1
        progress.update(bar, advance=1, ends=" ".join(f"{k} {v}" for k, v in sorted(ends.items())))
        if not progress.console.is_terminal and not quiet:
            steps = f"{summary['steps']} step" + ("" if summary["steps"] == 1 else "s")
            click.echo(f"  {summary['task_id']}: {summary['end']} after {steps}", err=True)

    with progress:
        manifest = execute(prep, progress=advance)
    return manifest


DEFAULT_BACKEND = "browser"


def suite_backend(suite) -> str:
    """The backend ``bench run`` and ``tasks validate`` use when given none: the one the suite's
    manifest names, else browser (the same for both commands, so that a task validated is a task
    that runs)."""
    return getattr(load_suite(suite), "backend", None) or DEFAULT_BACKEND


def print_report(run_dir) -> dict:
    report = write_report(run_dir)
    console().print(summary_table(report))
    if report.get("personalisation"):
        click.echo(personalisation_markdown(report["personalisation"]))
    for w in report["warnings"] + [w for w in (unshown_start_warning(run_dir), live_error_warning(run_dir)) if w]:
        click.echo(f"warning: {w}", err=True)
    if report.get("replay"):
        more = f" (which: webfreeze replay coverage {run_dir})" if report["replay"]["compromised"] else ""
        click.echo(summary_line(report["replay"]) + more, err=True)
    infra = report["summary"]["overall"].get("infrastructure_errors")
    if infra:
        click.echo(f"warning: {infra} of {report['summary']['overall']['tasks']} episode(s) "
                   f"{infrastructure_phrase(report['summary']['overall'])} (not the agent's failure; "
                   "run the same command again to retry them)", err=True)
    click.echo(f"wrote {run_dir}/report.json and {run_dir}/report.html", err=True)
    return report
