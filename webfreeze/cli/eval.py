"""The ``eval`` command group (scoring runs, exporting their HAR files).

Registered on the main CLI in ``webfreeze/cli/__init__.py``.
"""

from __future__ import annotations

from pathlib import Path

import click

from webfreeze.eval.llm_judge import open_llm_judge
from webfreeze.eval.replay_provenance import summary_line
from webfreeze.eval.report import (
    personalisation_markdown,
    report_json,
    summary_table,
    unshown_start_warning,
    write_report,
)
from webfreeze.runs.live import live_error_warning


@click.group("eval")
def eval_group() -> None:
    """Score runs against their tasks' ground truth and write reports."""


@eval_group.command("report")
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print report.json instead of the summary table.")
@click.option("--judge", "judge_kind", type=click.Choice(["rules", "llm"]), default="rules", show_default=True,
              help="Who decides what rules cannot: rules (rubric items by rules only; semantic key nodes by the "
                   "token-overlap stand-in) or llm (a language model, through a cassette).")
@click.option("--judge-llm", default="local", show_default=True, metavar="local|MODEL@BASE_URL",
              help="The judge's model: the embedded local model or an OpenAI-compatible endpoint.")
@click.option("--judge-key-env", metavar="NAME", help="Environment variable holding the endpoint's API key.")
@click.option("--judge-cassette", type=click.Path(dir_okay=False),
              help="The judge's LLM cassette (default: RUN_DIR/judge-cassette.sqlite).")
@click.option("--judge-cassette-mode", type=click.Choice(["record", "replay", "auto"]), default="auto",
              show_default=True, help="replay: judge only from the cassette (a request not in it is an error).")
@click.option("--strict-replay", is_flag=True,
              help="Count episodes that touched a fuzzy main document, a fuzzy XHR answer or a replay miss as "
                   "replay-compromised, apart from success and failure.")
def eval_report(run_dir, as_json, judge_kind, judge_llm, judge_key_env, judge_cassette, judge_cassette_mode,
                strict_replay):
    """Score every trajectory of RUN_DIR; write RUN_DIR/report.json and RUN_DIR/report.html.

    Prints a summary table per category and overall, and for personalised tasks Persona2Web's
    table (P_web, P_pref, P_avg, Intent, SR per scheme and level), retrieval Hit@k and ranking
    Hit@1/Hit@5. The report names the judge and who decided each rubric item.
    """

    ctx = click.get_current_context()
    if judge_kind == "rules":  # the LLM judge's settings would be silently ignored: say so
        given = [f"--{name.replace('_', '-')}" for name in ("judge_llm", "judge_key_env", "judge_cassette",
                                                             "judge_cassette_mode")
                 if ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT]
        if given:
            raise click.UsageError(f"{', '.join(given)} only go with --judge llm (the rules judge uses no model)",
                                   ctx)

    if not Path(run_dir).is_dir():
        raise click.ClickException(f"{run_dir}: not a run directory (no such directory)")
    if judge_kind == "llm":
        with open_llm_judge(run_dir, llm=judge_llm, key_env=judge_key_env, cassette=judge_cassette,
                            mode=judge_cassette_mode) as judge:
            report = write_report(run_dir, judge, strict_replay=strict_replay)
    else:
        report = write_report(run_dir, strict_replay=strict_replay)
    if as_json:
        click.echo(report_json(report), nl=False)
        return
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # piped or captured: don't squeeze the table into 80 columns
        console = Console(width=140)
    console.print(summary_table(report))
    if report.get("personalisation"):
        click.echo(personalisation_markdown(report["personalisation"]))
    replay = report.get("replay")
    if replay:
        click.echo(summary_line(replay) + "".join(f"\n  {e['task_id']}" for e in replay["episodes_compromised"]))
    strict = report.get("strict_replay")
    if strict:
        rate = "-" if strict["success_rate"] is None else f"{strict['success_rate'] * 100:.1f}%"
        click.echo(f"strict replay: {strict['success']} success, {strict['failure']} failure ({rate}), "
                   f"{len(strict['replay_compromised'])} replay-compromised"
                   + (f", {len(strict['unknown'])} without provenance" if strict["unknown"] else ""))
    for w in report["warnings"] + [w for w in (unshown_start_warning(run_dir), live_error_warning(run_dir)) if w]:
        click.echo(f"warning: {w}", err=True)
    click.echo(f"wrote {run_dir}/report.json and {run_dir}/report.html", err=True)


@eval_group.command("export-har")
@click.argument("run_dir", metavar="RUN_DIR", type=click.Path(file_okay=False))
@click.option("-o", "--out", "out", type=click.Path(file_okay=False), default=None,
              help="Folder for the HAR files [default: RUN_DIR/har].")
@click.option("--archive", type=click.Path(dir_okay=False), default=None,
              help="The run's archive [default: the one its manifest names].")
def export_har_command(run_dir, out, archive):
    """Write one HAR 1.2 file per episode of RUN_DIR (OUT/<task_id>.har): the requests the replay
    answered, in order, with their request and response headers, bodies (text or base64) and
    capture times from the archive (so Playwright's route_from_har replays the pages), and each
    one's match provenance (exact, canonical, fuzzy with score and the capture served, site model,
    miss) in the entry's `_webfreeze` field."""
    from webfreeze.har import export_run_har  # (the archive and the replay: only for this command)

    stats: dict = {}
    written = export_run_har(run_dir, out, archive=archive, stats=stats)
    for path in written:
        click.echo(str(path))
    click.echo(f"wrote {len(written)} HAR file{'s' if len(written) != 1 else ''}", err=True)
    if stats.get("websockets"):
        n = stats["websockets"]
        click.echo(f"note: {n} WebSocket{'s' if n != 1 else ''} written with {'their' if n != 1 else 'its'} recorded "
                   "conversation in _webSocketMessages (Chromium DevTools' field, which 'archive import' reads); "
                   "Playwright's route_from_har serves no WebSocket", err=True)
