"""The ``study`` group: ``study run`` (a grid of runs from one TOML file) and ``study report``.

Registered on the main CLI in ``webfreeze/cli/__init__.py``. See docs/studies.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from webfreeze.studies.report import build_study_report, markdown, write_study_report
from webfreeze.studies.run import StudyOptions, cell_status, plan_study, read_study_json, run_study
from webfreeze.studies.spec import CELLS_DIR, StudyError, load_study


@click.group("study")
def study_group() -> None:
    """Run a grid of agent configurations, context conditions and repeats from one study file,
    and aggregate the runs into the papers' tables with standard errors."""


class _Progress:
    """Two rich bars on stderr: the cells, and the current cell's episodes (lines when not a terminal)."""

    def __init__(self):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console = Console(stderr=True)
        self.live = self.console.is_terminal
        self.bars = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                             console=self.console, transient=True, disable=not self.live)
        self.cells = None
        self.tasks = None

    def __enter__(self):
        self.bars.__enter__()
        return self

    def __exit__(self, *exc):
        return self.bars.__exit__(*exc)

    def study_started(self, plan, todo, done):
        total = len(plan.cells)
        self.cells = self.bars.add_task(f"study {plan.study.name}: cells", total=total, completed=len(done))
        if done:
            click.echo(f"resuming {plan.out}: {len(done)} of {total} cells already finished", err=True)

    def cell_started(self, cell, tasks, done):
        if self.tasks is not None:
            self.bars.remove_task(self.tasks)
        self.tasks = self.bars.add_task(f"  {cell.id}", total=tasks, completed=done)
        if not self.live:
            more = f" (resuming: {done} done)" if done else ""
            click.echo(f"cell {cell.id}: {tasks} tasks{more}", err=True)

    def episode(self, cell, summary):
        if self.tasks is not None:
            self.bars.advance(self.tasks)
        if not self.live:
            steps = f"{summary['steps']} step" + ("" if summary["steps"] == 1 else "s")
            click.echo(f"  {summary['task_id']}: {summary['end']} after {steps}", err=True)

    def cell_finished(self, cell, manifest):
        self.bars.advance(self.cells)


@study_group.command("run")
@click.argument("study_file", metavar="STUDY.toml", type=click.Path(dir_okay=False))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Study folder (created; re-running into it finishes what is missing).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where each cell's episodes play (as bench run --executor).")
@click.option("--ray-address", metavar="ADDR", help="ray: an existing cluster (default: a Ray started per cell).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Episodes of a cell in parallel (cells run one after another).")
@click.option("--cassette-mode", type=click.Choice(["record", "replay", "auto"]), default=None,
              help="record (default): call the model and keep each cell's calls in its own cassette; replay: "
                   "answer only from the cassettes (default with --cassettes); auto: replay what is stored.")
@click.option("--cassettes", "cassettes", type=click.Path(file_okay=False),
              help="Replay each cell from the cassette of the same cell in this earlier study folder.")
@click.option("--llm-concurrency", type=click.IntRange(1, 256), default=None,
              help="LLM calls in flight at once across a cell's workers.")
@click.option("--list", "list_only", is_flag=True, help="Print the cells and their status, run nothing.")
@click.option("--no-report", is_flag=True, help="Do not write the study report at the end.")
def study_run(study_file, out, executor, ray_address, workers, cassette_mode, cassettes, llm_concurrency, list_only,
              no_report):
    """Run every cell of STUDY.toml (suite x agent configuration x grid point x context condition x
    repeat) as an ordinary run folder under OUT/cells/, keep OUT/study.json, then write the study
    report (study-report.md, .csv, .json, .html) into OUT.

    Finished cells are never run again: re-running the same command after an interruption finishes
    the study (a half-done cell resumes where it stopped).
    """

    study = load_study(study_file)
    if cassettes is not None:
        if not (Path(cassettes) / "study.json").is_file():
            raise StudyError(f"--cassettes {cassettes}: not a study folder (no study.json)")

        if read_study_json(cassettes).get("digest") != study.digest:
            raise StudyError(f"--cassettes {cassettes} holds another study (its digest differs from {study_file}'s)")
        if Path(cassettes).resolve() == Path(out).resolve():
            raise StudyError("--cassettes names the study folder itself: its cells' cassettes are used anyway")
        if cassette_mode not in (None, "replay"):
            raise click.BadParameter("--cassettes replays: leave out --cassette-mode or give replay",
                                     param_hint="--cassette-mode")
    mode = cassette_mode or ("replay" if cassettes else "record")
    plan = plan_study(study, out)
    if list_only:
        for cell in plan.cells:
            click.echo(f"{cell.id}\t{cell_status(Path(out) / CELLS_DIR / cell.id)}\t"
                       f"{json.dumps(cell.settings, sort_keys=True)}")
        n_tasks = sum(len(v) for v in plan.tasks.values()) if plan.tasks else "?"
        click.echo(f"{len(plan.cells)} cells, {n_tasks} tasks each", err=True)
        return
    opts = StudyOptions(workers=workers, executor=executor, ray_address=ray_address, cassette_mode=mode,
                      cassettes=cassettes, llm_concurrency=llm_concurrency)
    with _Progress() as progress:
        manifest = run_study(plan, opts, progress)
    done = sum(1 for c in manifest["cells"] if c["status"] == "complete")
    click.echo(f"study {study.name}: {done} of {len(manifest['cells'])} cells complete -> {out}", err=True)
    if not no_report:
        _write_report(out, None)


def _write_report(study_dir, out) -> None:
    report = build_study_report(study_dir)
    paths = write_study_report(report, out or study_dir, study_dir)
    click.echo(markdown(report, brief=True))
    for w in report["warnings"]:
        click.echo(f"warning: {w}", err=True)
    click.echo("wrote " + ", ".join(str(p) for p in paths), err=True)


@study_group.command("report")
@click.argument("study_dir", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--out", "out", type=click.Path(file_okay=False),
              help="Folder for study-report.md/.csv/.json/.html and study-timings.json (default: DIR).")
def study_report(study_dir, out):
    """Aggregate the cells of the study in DIR: per cell and category success / partial / fail rates
    with standard errors, steps, efficiency, the error taxonomy, trajectory consistency across
    repeats, tokens and LLM calls; the papers' table shapes; Markdown, CSV, JSON and an HTML page
    with charts. Timings go to study-timings.json only, so the tables of a study and of its replay
    are byte-identical."""
    _write_report(study_dir, out)
