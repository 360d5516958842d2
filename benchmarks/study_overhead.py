"""The study layer's overhead over the same runs done as ``bench run`` does them.

The same cells (the keyword baseline on the demo suite, text backend, one worker: 3 settings x 2
repeats = 6 runs of 16 tasks) run two ways in this process, alternated over rounds:

- **study**: ``plan_study`` + ``run_study`` (the study file read and checked, every agent
  configuration built once, the tasks selected, ``study.json`` kept, each cell prepared, executed
  and scored), as ``webfreeze study run --no-report`` does;
- **bench run**: for each cell, the ``RunSpec`` and ``RunOptions`` the study would give it, ``prepare`` +
  ``execute`` + ``write_report``, as ``webfreeze bench run`` does.

Rounds alternate which way runs first; the best round of each is compared (other load on a
shared machine only adds time). Goal: <= 1.05x. The study report over the 6 cells is reported apart (no goal), against the same
bench-run time.
"""

from __future__ import annotations

import shutil
import statistics
import time

from . import Context, Row, console

NAME = "study_overhead"
TITLE = "Study layer overhead over the same runs done with bench run"
BENCH = "8 study"
ROUNDS = 4

STUDY = """
name = "overhead"
suite = "{suite}"
backend = "text"
max_steps = 6
repeats = 2
[tasks]
per_category = 2
[[agents]]
name = "keyword"
[grid]
max_clicks = [1, 2, 3]
"""


def run(ctx: Context) -> list[Row]:
    from webfreeze.demo import SUITE
    from webfreeze.eval.report import write_report
    from webfreeze.runs.execute import execute
    from webfreeze.runs.prepare import prepare
    from webfreeze.studies.report import build_study_report, write_study_report
    from webfreeze.studies.run import StudyOptions, cell_config, plan_study, run_study
    from webfreeze.studies.spec import load_study

    path = ctx.scratch / "overhead.toml"
    path.write_text(STUDY.format(suite=SUITE), encoding="utf-8")
    study_s, bench_s, report_s = [], [], []
    plan = None

    def by_study(i: int) -> None:
        nonlocal plan
        out = ctx.scratch / f"study-{i}"
        shutil.rmtree(out, ignore_errors=True)
        console.print(f"  study, round {i + 1}/{ROUNDS}")
        t0 = time.perf_counter()
        plan = plan_study(load_study(path), out)
        run_study(plan)
        study_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        write_study_report(build_study_report(out), ctx.scratch / f"report-{i}", out)
        report_s.append(time.perf_counter() - t0)

    def by_bench(i: int) -> None:
        # the same cells, as bench run runs them (their configs built before the clock starts)
        base = ctx.scratch / f"bench-{i}"
        shutil.rmtree(base, ignore_errors=True)
        other = plan_study(load_study(path), base)
        configs = [cell_config(other, cell, StudyOptions()) for cell in other.cells]
        console.print(f"  bench run x {len(configs)}, round {i + 1}/{ROUNDS}")
        t0 = time.perf_counter()
        for spec, options in configs:
            execute(prepare(spec, options))
            write_report(options.out)
        bench_s.append(time.perf_counter() - t0)

    for i in range(ROUNDS):  # alternated (ABBA...) so that neither always runs first
        for step in ((by_study, by_bench) if i % 2 == 0 else (by_bench, by_study)):
            step(i)
    # best of the rounds: on a shared machine the other load only ever adds time
    study, bench, report = min(study_s), min(bench_s), statistics.median(report_s)
    ctx.details["study_overhead"] = {"study_s": study_s, "bench_s": bench_s, "report_s": report_s,
                                     "cells": len(plan.cells), "tasks_per_cell": len(next(iter(plan.tasks.values())))}
    n = len(plan.cells)
    return [Row(BENCH, f"study run, {n} cells (keyword, 16 tasks each, text)", study, bench,
                f"bench run x {n}, same cells", "s", "lower", 1.05),
            Row(BENCH, f"study report over {n} cells", report, bench, f"bench run x {n}, same cells", "s", "lower",
                None, note="reported")]
