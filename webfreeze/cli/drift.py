"""The ``drift`` command: a thin command line over :mod:`webfreeze.checks.drift`.

Registered on the main CLI in ``webfreeze/cli/__init__.py``.
"""

from __future__ import annotations

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from webfreeze.common.files import json_text
from webfreeze.simulator.backends import BACKENDS


@click.command("drift")
@click.argument("old", metavar="OLD.wfz", type=click.Path(dir_okay=False))
@click.argument("new", metavar="NEW.wfz", type=click.Path(dir_okay=False))
@click.option("--suite", type=click.Path(), help="Also replay this suite's reference trajectories on both archives "
                                                 "and say which tasks stay valid, expired or became ambiguous.")
@click.option("--report", "report_dir", type=click.Path(file_okay=False),
              help="Write report.json, report.md and report.html here (replacing an earlier drift report).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON instead of the table.")
@click.option("--backend", type=click.Choice(BACKENDS), default=None,
              help="Backend of the reference replays [default: the suite manifest's, else browser].")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--tasks", "task_globs", multiple=True, metavar="GLOB", help="Only tasks whose id matches (repeatable).")
@click.option("--limit", type=click.IntRange(1), help="Only the first N tasks (after --tasks).")
def drift_command(old, new, suite, report_dir, as_json, backend, workers, task_globs, limit):
    """Measure how a site drifted between two archives of it: pages compared (text similarity and
    pixel difference), pages added and removed; with --suite, each task's reference replayed on
    both: the tasks still valid, those that expired (changed on the site) or became ambiguous,
    those NEW did not capture whole (incomplete capture), and the answers whose evidence is gone.

    Exit status 1 when a task expired or NEW's capture of it is incomplete (a broken task's too),
    0 otherwise.
    """
    from webfreeze.checks.drift import drift, print_tables, summary_line  # (the sim extra: where it runs)

    err = Console(stderr=True)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   console=err, transient=True, disable=not err.is_terminal)
    bars: dict[str, int] = {}

    def progress(what: str, done: int, total: int) -> None:
        if what not in bars:
            bars[what] = bar.add_task(what, total=total)
        bar.update(bars[what], completed=done)

    with bar:
        report = drift(old, new, suite=suite, backend=backend, workers=workers, tasks=task_globs, limit=limit,
                       report_dir=report_dir, progress=progress)
    if as_json:
        click.echo(json_text(report), nl=False)
    else:
        print_tables(report)
        click.echo(summary_line(report))
        if report_dir:
            click.echo(f"report in {report_dir}/report.html", err=True)
    suite_counts = report.get("suite", {})
    new_incomplete = any(r.get("verdict") == "broken" and (r.get("new") or {}).get("misses")
                         for r in report.get("tasks") or [])
    raise SystemExit(1 if suite_counts.get("expired") or suite_counts.get("incomplete") or new_incomplete else 0)
