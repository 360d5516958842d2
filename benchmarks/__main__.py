"""``python -m benchmarks [NAME ...]``: run the benchmarks (all by default), print the results as a
table and a README-ready markdown summary, and write ``bench-out/results.json``."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from rich.console import Console
from rich.table import Table

from . import Context, Row, all_modules, console, fmt_num

PACKAGES = ["webfreeze", "warcio", "pywb", "surt", "sqlite-utils", "zstandard"]


def _versions() -> dict:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    import sqlite3

    out["sqlite"] = sqlite3.sqlite_version
    return out


def _table(rows: list[Row]) -> Table:
    t = Table(title="webfreeze benchmarks (ratio = webfreeze / anchor, same run)", title_justify="left")
    for col, kw in [("bench", {}), ("metric", {}), ("webfreeze", {"justify": "right"}), ("anchor", {}),
                    ("anchor value", {"justify": "right"}), ("ratio", {"justify": "right"}), ("better", {}),
                    ("goal", {}), ("met", {})]:
        t.add_column(col, **kw)
    last = None
    for r in rows:
        if last is not None and r.bench.split()[0] != last:
            t.add_section()
        last = r.bench.split()[0]
        met = "-" if r.met is None else ("[green]yes[/]" if r.met else "[red]no[/]")
        t.add_row(r.bench, r.metric, fmt_num(r.ours, r.unit), r.anchor_name, fmt_num(r.anchor, r.unit),
                  f"{r.ratio:.2f}x", r.better, r.goal_text, met)
    return t


def _markdown(rows: list[Row]) -> str:
    lines = ["| Benchmark | webfreeze | Anchor | Ratio | Goal |", "|---|---:|---|---:|---|"]
    for r in rows:
        if "(anchor)" in r.metric:
            continue
        goal = r.goal_text if r.goal is not None else "-"
        if r.met is not None:
            goal += " (met)" if r.met else " (not met)"
        lines.append(f"| {r.bench.split(' ', 1)[1]}: {r.metric} | {fmt_num(r.ours, r.unit)} | "
                     f"{r.anchor_name}: {fmt_num(r.anchor, r.unit)} | {r.ratio:.2f}x | {goal} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    modules = {m.NAME: m for m in all_modules()}
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    ap.add_argument("names", nargs="*", metavar="NAME", help=f"benchmarks to run (default: all): {', '.join(modules)}")
    ap.add_argument("--out", default="bench-out", help="output folder (default: bench-out)")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in modules]
    if unknown:
        ap.error(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(modules)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(out=out)
    started = time.perf_counter()
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    rows: list[Row] = []
    timings: dict = {}
    errors: dict = {}
    try:
        for name in args.names or list(modules):
            mod = modules[name]
            console.rule(f"[bold]{mod.TITLE}")
            t0 = time.perf_counter()
            try:
                rows.extend(mod.run(ctx))
            except Exception as exc:  # report and go on with the other benchmarks
                errors[name] = "".join(traceback.format_exception(exc))
                console.print(f"[red]{name} failed:[/] {exc!r}")
                console.print(errors[name], markup=False, highlight=False)
            timings[name] = time.perf_counter() - t0
            console.print(f"  {name}: {timings[name]:.1f} s")
    finally:
        ctx.cleanup()
    total = time.perf_counter() - started

    stdout = Console(width=max(140, Console().width))
    stdout.print(_table(rows))
    result = {
        "suite": "webfreeze benchmarks",
        "started_at": stamp,
        "runtime_s": total,
        "runtime_by_benchmark_s": timings,
        "machine": {"platform": platform.platform(), "python": sys.version.split()[0], "cpus": os.cpu_count(),
                    "processor": platform.processor() or platform.machine()},
        "versions": _versions(),
        "results": [r.to_json() for r in rows],
        "details": ctx.details,
        "errors": errors,
    }
    (out / "results.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    print()
    print("## Benchmarks\n")
    print(f"Measured with `make bench` (`.venv/bin/python -m benchmarks`) on {os.cpu_count()} cores, "
          f"Python {sys.version.split()[0]}; every figure is a ratio against an anchor measured in the same run.\n")
    print(_markdown(rows))
    print()
    print(f"total runtime {total:.0f} s; results in {out / 'results.json'}")
    if errors:
        print(f"FAILED: {', '.join(errors)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
