"""Bundles and the Ray executor.

- **bundle pack / verify** of the demo's LLM run (the demo's 8 LLM tasks replayed from the shipped
  cassette, browser backend): the time of ``bundle pack`` and of ``bundle verify`` (every member's
  digest, the archive's own verification, the cassette's) against reading and hashing (SHA-256) the
  same parts once, the least any packer that lists digests must do; and the bundle's size against
  the sum of its parts (the archive, the suite folder, the run folder and the cassette the run
  replayed; the bundle holds only the cassette entries the run used), goal <= 1x.
- **Ray vs the local process pool**: the reference agent on the whole demo suite (80 tasks, text
  backend), episodes per second with 2 workers on each executor, alternated over rounds, best of
  each (goal >= 0.9x of the local pool). Ray is started once in this process beforehand (a cluster
  is up before a grid runs on it); each run still starts its own actors, as the pool starts its
  processes. Also Ray's scaling from 1 to 2 workers (reported, no goal: 2 cores are shared with the
  driver).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

from . import Context, Row, console

NAME = "bundle_scale"
TITLE = "Bundle pack/verify vs hashing the parts; Ray vs the local process pool"
BENCH = "8 bundle"
ROUNDS = 2


def _sha256_tree(paths: list[Path]) -> int:
    total = 0
    for root in paths:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for f in files:
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
                    total += len(chunk)
    return total


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _bundle_rows(ctx: Context) -> list[Row]:
    from webfreeze.bundles.pack import pack, verify
    from webfreeze.demo import ARCHIVE, CASSETTE, LLM_MAX_STEPS, LLM_SETTINGS, LLM_TASKS, SUITE
    from webfreeze.runs.execute import run

    run_dir = ctx.scratch / "bundle-llm-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    console.print("  demo LLM run from its cassette (browser backend) ...")
    run(SUITE, "llm", run_dir, archive=ARCHIVE, workers=2, backend="browser", tasks=list(LLM_TASKS),
        max_steps=LLM_MAX_STEPS, agent_config=dict(LLM_SETTINGS), cassette=str(CASSETTE), cassette_mode="replay")
    from webfreeze.eval.report import write_report

    write_report(run_dir)
    parts = [Path(ARCHIVE), Path(SUITE), run_dir, Path(CASSETTE)]
    out = ctx.scratch / "demo-llm.wfb"
    pack_t, verify_t, hash_t = [], [], []
    for _ in range(ROUNDS):
        out.unlink(missing_ok=True)
        t0 = time.perf_counter()
        pack([run_dir], out)
        pack_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        verify(out)
        verify_t.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        _sha256_tree(parts)
        hash_t.append(time.perf_counter() - t0)
    parts_bytes = sum(_size(p) for p in parts)
    anchor = min(hash_t) * 1000
    ctx.details["bundle"] = {"bundle_bytes": out.stat().st_size, "parts_bytes": parts_bytes,
                             "pack_ms": [round(t * 1000, 1) for t in pack_t],
                             "verify_ms": [round(t * 1000, 1) for t in verify_t],
                             "hash_parts_ms": [round(t * 1000, 1) for t in hash_t]}
    return [
        Row(BENCH, "bundle pack, demo LLM run", min(pack_t) * 1000, anchor, "SHA-256 of the parts", "ms", "lower",
            note="pack = stage the cassette subset, hash every member, write the zip"),
        Row(BENCH, "bundle verify, demo LLM run", min(verify_t) * 1000, anchor, "SHA-256 of the parts", "ms",
            "lower", note="digests + the archive's own verification + the cassette's"),
        Row(BENCH, "bundle size, demo LLM run", out.stat().st_size, parts_bytes, "sum of its parts", "bytes", "lower",
            goal=1.0, note="archive + suite + run folder + the cassette it replayed"),
    ]


def _episodes_per_s(executor: str, workers: int, out: Path) -> float:
    from webfreeze.demo import ARCHIVE, SUITE
    from webfreeze.runs.execute import run

    shutil.rmtree(out, ignore_errors=True)
    ends = []
    t0 = time.perf_counter()
    manifest = run(SUITE, "reference", out, archive=ARCHIVE, workers=workers, backend="text", executor=executor,
                   progress=lambda s: ends.append(time.perf_counter()))
    elapsed = time.perf_counter() - t0
    assert manifest["complete"], "a benchmark run did not complete"
    return len(ends) / elapsed


def _ray_rows(ctx: Context) -> list[Row]:
    try:
        import ray
    except ImportError:
        console.print("  [yellow]ray is not installed: Ray rows skipped (pip install 'webfreeze[ray]')[/]")
        return []
    from webfreeze.runs.ray import start_ray

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    start_ray(None, 2)
    try:
        results: dict = {("local", 1): [], ("local", 2): [], ("ray", 1): [], ("ray", 2): []}
        for r in range(ROUNDS):
            for key in results:
                console.print(f"  round {r + 1}: {key[0]}, {key[1]} worker(s) ...")
                results[key].append(_episodes_per_s(*key, ctx.scratch / f"run-{key[0]}-{key[1]}"))
    finally:
        ray.shutdown()
    best = {k: max(v) for k, v in results.items()}
    ctx.details["ray"] = {f"{k[0]}-{k[1]}": [round(x, 2) for x in v] for k, v in results.items()}
    return [
        Row(BENCH, "episodes/s, Ray, 2 workers", best[("ray", 2)], best[("local", 2)], "local pool, 2 workers",
            "eps/s", "higher", goal=0.9, note="reference agent, demo suite (80 tasks), text backend"),
        Row(BENCH, "Ray scaling 1 -> 2 workers", best[("ray", 2)], best[("ray", 1)], "Ray, 1 worker", "eps/s",
            "higher", note="2 cores, shared with the driver"),
        Row(BENCH, "local pool scaling 1 -> 2 workers", best[("local", 2)], best[("local", 1)],
            "local, 1 worker (in-process)", "eps/s", "higher", note="for comparison"),
    ]


def run(ctx: Context) -> list[Row]:
    return _bundle_rows(ctx) + _ray_rows(ctx)
