"""The shipped demo: an archive of the simulated scholar, shop and booking sites recorded by our
recorder, and a suite of 80 tasks with ground truth and reference trajectories (``data/``, built by
:mod:`webfreeze.demo.build`). ``make demo`` / ``webfreeze demo`` runs the whole loop offline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
ARCHIVE = DATA / "demo.wfz"
SUITE = DATA / "suite"
AGENTS = ("reference", "keyword")


def demo_paths() -> dict:
    return {"archive": str(ARCHIVE), "suite": str(SUITE), "manifest": str(SUITE / "manifest.json"),
            "tasks": str(SUITE / "tasks.jsonl")}


def run_demo(*, out: str = "runs/demo", backend: str = "browser", workers: int = 2) -> dict:
    """Run both agents on the suite, print their reports and success rates; returns {agent: report}."""
    import click

    from webfreeze.cli_bench import _print_report, run_suite
    from webfreeze.runner import RunError

    if not ARCHIVE.is_file() or not (SUITE / "manifest.json").is_file():
        raise RunError(f"{DATA}: the demo archive or suite is missing (rebuild: python -m webfreeze.demo.build)")
    reports = {}
    for agent in AGENTS:
        run_dir = Path(out) / agent
        if run_dir.exists():
            shutil.rmtree(run_dir)  # a demo run starts afresh (bench run would resume it)
        click.echo(f"\n== {agent} agent on the demo suite ({backend} backend, {workers} workers)\n"
                   f"$ webfreeze bench run {SUITE} --agent {agent} --backend {backend} --workers {workers} "
                   f"--out {run_dir}", err=True)
        run_suite(SUITE, None, agent, run_dir, workers=workers, backend=backend)
        reports[agent] = _print_report(run_dir)
    click.echo("\n== success rates per category (task by task: webfreeze bench compare "
               f"{Path(out) / 'reference'} {Path(out) / 'keyword'})", err=True)
    from webfreeze.compare import compare_runs

    cmp = compare_runs(Path(out) / "reference", Path(out) / "keyword")
    for cat, r in cmp["categories"].items():
        a, b = r["a"], r["b"]
        click.echo(f"  {cat:<18} reference {a * 100 if a is not None else 0:5.1f}%   keyword "
                   f"{b * 100 if b is not None else 0:5.1f}%")
    click.echo(f"\nDemo finished: runs in {out}/<agent>/ (report.json, report.html, trajectories/).", err=True)
    return reports


def main() -> None:
    from webfreeze.cli import main as cli_main

    cli_main(["demo"])


__all__ = ["ARCHIVE", "DATA", "SUITE", "demo_paths", "run_demo"]
