"""The shipped demo: an archive of the simulated scholar, shop and booking sites recorded by our
recorder, a suite of 80 tasks with ground truth and reference trajectories (``data/``, built by
:mod:`webfreeze.demo.build`), and an LLM cassette of the LLM agent on the embedded local model
(``data/llm-cassette.sqlite``). ``make demo`` / ``webfreeze demo`` runs the whole loop offline:
the reference agent (the oracle, the upper bound) and the keyword baseline on every task, and the
LLM agent on one task per category, its model calls replayed from the cassette (so it needs
neither the model nor an API key, and gives the same trajectories every time). ``webfreeze demo
--live`` records a fresh cassette with the local model instead."""

from __future__ import annotations

import shutil
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
ARCHIVE = DATA / "demo.wfz"
SUITE = DATA / "suite"
CASSETTE = DATA / "llm-cassette.sqlite"
AGENTS = ("reference", "keyword", "llm")
# The LLM agent's demo run: one task per category (a 135M model on 2 CPU cores takes ~10 s a step
# when live), a short step budget, and the WebArxiv baseline memory (the last 3 steps).
LLM_TASKS = ("scholar-site-info-001", "scholar-rules-accounts-001", "scholar-paper-retrieval-001",
             "scholar-advanced-search-001", "scholar-paper-extraction-001", "scholar-cross-paper-001",
             "shop-001", "booking-001")
LLM_MAX_STEPS = 6
LLM_SETTINGS = {"model": "local", "memory": "last-k", "k": 3}


def demo_paths() -> dict:
    """Where the shipped demo's files are: ``archive``, ``suite`` (its folder), ``manifest``,
    ``tasks`` and ``llm_cassette``, as strings."""
    return {"archive": str(ARCHIVE), "suite": str(SUITE), "manifest": str(SUITE / "manifest.json"),
            "tasks": str(SUITE / "tasks.jsonl"), "llm_cassette": str(CASSETTE)}


def run_demo(*, out: str = "runs/demo", backend: str = "browser", workers: int = 2, live: bool = False) -> dict:
    """Run the three agents on the suite, print their reports and success rates; returns {agent: report}.

    The LLM agent replays its calls from the shipped cassette, or with ``live`` calls the local
    model (started for the run) and records a fresh cassette in its run folder."""
    import click

    from webfreeze.runs.console import print_report, run_suite
    from webfreeze.runs.spec import RunError

    if not ARCHIVE.is_file() or not (SUITE / "manifest.json").is_file():
        raise RunError(f"{DATA}: the demo archive or suite is missing (rebuild: python -m webfreeze.demo.build)")
    if not live and not CASSETTE.is_file():
        raise RunError(f"{CASSETTE}: the demo's LLM cassette is missing (record one: webfreeze demo --live)")
    import webfreeze.simulator.env  # noqa: F401  (the environment first: without its extra, one line and no output)
    reports = {}
    for agent in AGENTS:
        run_dir = Path(out) / agent
        if run_dir.exists():
            shutil.rmtree(run_dir)  # a demo run starts afresh (bench run would resume it)
        if agent == "llm":
            mode = "record" if live else "replay"
            # Live, one worker: the model's server keeps the last prompt's cache, which a retry (the same
            # prompt plus a few lines) then reuses, ~10x faster than when two workers' prompts alternate.
            llm_workers = 1 if live else workers
            # The shipped cassette was recorded in the browser backend: the text backend shows the
            # model other observations (no scripts run), so its prompts are not the stored ones.
            llm_backend = backend if live else "browser"
            extra = (" ".join(f"--tasks {t}" for t in LLM_TASKS) + f" --max-steps {LLM_MAX_STEPS} --llm local"
                     + ("" if live else f" --cassette {CASSETTE} --cassette-mode replay"))
            click.echo(f"\n== llm agent (SmolLM2-135M, local; {'live' if live else 'replayed from the demo cassette'}) "
                       f"on {len(LLM_TASKS)} demo tasks ({llm_backend} backend, {llm_workers} workers)\n"
                       f"$ webfreeze bench run {SUITE} --agent llm {extra} --backend {llm_backend} --workers {llm_workers} "
                       f"--out {run_dir}", err=True)
            run_suite(SUITE, None, "llm", run_dir, workers=llm_workers, backend=llm_backend, tasks=LLM_TASKS,
                      max_steps=LLM_MAX_STEPS, agent_config=LLM_SETTINGS,
                      cassette=None if live else CASSETTE, cassette_mode=mode)
        else:
            oracle = " (the oracle: replays reference trajectories; the upper bound)" if agent == "reference" else ""
            click.echo(f"\n== {agent} agent{oracle} on the demo suite ({backend} backend, {workers} workers)\n"
                       f"$ webfreeze bench run {SUITE} --agent {agent} --backend {backend} --workers {workers} "
                       f"--out {run_dir}", err=True)
            run_suite(SUITE, None, agent, run_dir, workers=workers, backend=backend)
        reports[agent] = print_report(run_dir)
    click.echo("\n== success rates per category (task by task: webfreeze bench compare "
               f"{Path(out) / 'reference'} {Path(out) / 'keyword'})", err=True)
    from webfreeze.runs.compare import compare_runs

    cmp = compare_runs(Path(out) / "reference", Path(out) / "keyword")
    llm_cats = reports["llm"]["summary"]["categories"]
    click.echo(f"  {'category':<18} {'reference (upper bound)':>24} {'keyword':>9} {'llm (1 task)':>13}")
    for cat, r in cmp["categories"].items():
        a, b = r["a"], r["b"]
        c = (reports["llm"]["summary"]["overall"] if cat == "overall" else llm_cats.get(cat) or {}).get("success_rate")
        click.echo(f"  {cat:<18} {a * 100 if a is not None else 0:23.1f}% {b * 100 if b is not None else 0:8.1f}% "
                   f"{'-' if c is None else f'{c * 100:.1f}%':>13}")
    usage = reports["llm"]["summary"]["overall"]
    click.echo(f"  llm agent: {usage.get('llm_calls')} LLM calls, {usage.get('prompt_tokens')} prompt and "
               f"{usage.get('completion_tokens')} completion tokens "
               f"({'recorded live' if live else 'all answered from the cassette'})", err=True)
    click.echo(f"\nDemo finished: runs in {out}/<agent>/ (report.json, report.html, trajectories/).", err=True)
    return reports


def main() -> None:
    from webfreeze.cli import main as cli_main

    cli_main(["demo"])


__all__ = ["ARCHIVE", "DATA", "SUITE", "demo_paths", "run_demo"]
