"""webfreeze benchmarks: every figure is a ratio against an anchor measured in the same run.

Run all of them with ``make bench`` (or ``.venv/bin/python -m benchmarks`` from the repository
root); results are printed as a table and written to ``bench-out/results.json``. Benchmarks
never assert on time: a missed goal is reported, not raised.

Each benchmark module exposes ``NAME``, ``TITLE`` and ``run(ctx) -> list[Row]``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

# Progress and status go to stderr so stdout holds only the results.
console = Console(stderr=True)


@dataclass
class Row:
    """One measured figure, its anchor and their ratio (``ours / anchor``)."""

    bench: str
    metric: str
    ours: float
    anchor: float
    anchor_name: str
    unit: str
    better: str  # "lower" or "higher": which direction of the ratio is good
    goal: float | None = None  # goal on the ratio, in the ``better`` direction
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.ours / self.anchor if self.anchor else float("nan")

    @property
    def goal_text(self) -> str:
        if self.goal is None:
            return "-"
        return f"<= {self.goal:g}x" if self.better == "lower" else f">= {self.goal:g}x"

    @property
    def met(self) -> bool | None:
        if self.goal is None:
            return None
        return self.ratio <= self.goal if self.better == "lower" else self.ratio >= self.goal

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(ratio=self.ratio, goal_text=self.goal_text, met=self.met)
        return d


@dataclass
class Context:
    """What every benchmark gets: the output folder and a scratch folder emptied at the end."""

    out: Path
    details: dict = field(default_factory=dict)  # per-benchmark extra figures for results.json

    @property
    def scratch(self) -> Path:
        p = self.out / "scratch"
        p.mkdir(parents=True, exist_ok=True)
        return p

    def fresh_path(self, name: str) -> Path:
        """A path in the scratch folder with nothing (no archive, -wal or -shm) at it."""
        p = self.scratch / name
        remove_archive_files(p)
        return p

    def cleanup(self) -> None:
        shutil.rmtree(self.out / "scratch", ignore_errors=True)


def remove_archive_files(p: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.unlink(f"{p}{suffix}")
        except FileNotFoundError:
            pass


def archive_bytes(p: Path) -> int:
    """Bytes an archive occupies on disk: the SQLite file plus its -wal file when one is left."""
    total = p.stat().st_size
    wal = Path(f"{p}-wal")
    if wal.exists():
        total += wal.stat().st_size
    return total


def progress() -> Progress:
    """A progress bar on stderr (disappears when done)."""
    return Progress(
        TextColumn("  [progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,  # no bar in logs; the status lines say what runs
    )


def median_time(fn: Callable[[], object], repeats: int, *, setup: Callable[[], object] | None = None,
                label: str = "") -> tuple[float, list[float]]:
    """Median wall time of ``fn`` over ``repeats`` runs (``setup`` runs untimed before each)."""
    times = []
    with progress() as prog:
        task = prog.add_task(label or "timing", total=repeats)
        for _ in range(repeats):
            if setup:
                setup()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
            prog.advance(task)
    return statistics.median(times), times


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of already sorted values (q in 0..100)."""
    if not sorted_values:
        return float("nan")
    k = max(0, min(len(sorted_values) - 1, int(round(q / 100 * len(sorted_values) + 0.5)) - 1))
    return sorted_values[k]


def mb(n: float) -> float:
    return n / 1e6


def fmt_num(value: float, unit: str) -> str:
    if unit == "bytes":
        if value >= 1e6:
            return f"{value / 1e6:,.2f} MB"
        if value >= 1e3:
            return f"{value / 1e3:,.1f} kB"
        return f"{value:,.0f} B"
    if unit == "MB/s":
        return f"{value:,.1f} MB/s"
    if unit == "us":
        return f"{value:,.1f} us"
    if unit == "ms":
        return f"{value:,.1f} ms"
    if unit == "s":
        return f"{value:,.2f} s"
    return f"{value:,.3g} {unit}".strip()


def all_modules() -> Iterable:
    from . import (
        bgym_obs,
        bundle_scale,
        crawl_check,
        crawl_size,
        disk_size,
        drift_speed,
        env_latency,
        history_retrieval,
        import_speed,
        live_overhead,
        llm_agent,
        lookup_latency,
        recorder_overhead,
        redact_speed,
        replay_throughput,
        study_overhead,
    )

    return [disk_size, import_speed, lookup_latency, recorder_overhead, replay_throughput, crawl_size, crawl_check,
            env_latency, bgym_obs, llm_agent, history_retrieval, bundle_scale, study_overhead, redact_speed, drift_speed,
            live_overhead]
