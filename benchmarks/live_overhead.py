"""A live run's overhead: ``bench run --live`` against the same run offline on the archive it recorded.

The simulated scholar site (seed 0) is served on loopback; the reference agent runs the demo
suite's scholar tasks ``scholar-*-00[1-3]`` (18 tasks, one worker) live through the recording proxy
(``--live --resolve scholar.test=127.0.0.1:PORT``), then the same command on the recorded archive
(``--archive RUN/live.wfz``, strict offline). Both backends. Timed as a user runs them (whole
commands, interpreter start included), and the run's own ``elapsed_s`` from its manifest (the
episodes, without start-up and sealing). The two runs must be identical (trajectories and report,
timings aside: ``runs.compare.run_difference``), else the benchmark fails: a live run that does
not replay is no frozen benchmark, however fast.

A live request goes browser -> replay server -> recording proxy -> site and is committed to the
archive before it is answered; offline it is read from the archive. The ratio live / offline is
reported (no goal was set); the site here answers at loopback speed, so a real site's latency
adds to the live side only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from webfreeze.demo import SUITE
from webfreeze.runs.compare import run_difference
from webfreeze.simulator.sites.common import SiteServer
from webfreeze.simulator.sites.scholar import ScholarSite

from . import Context, Row, console

NAME = "live_overhead"
TITLE = "live runs: bench run --live against the same run offline on its archive"
BENCH = "11 live"
TASKS = "scholar-*-00[1-3]"
BACKENDS = ("text", "browser")


def _bench(out: Path, backend: str, *more, home: Path) -> tuple[float, dict]:
    """One ``bench run`` as a user runs it: its seconds and its manifest."""
    env = dict(os.environ, WEBFREEZE_HOME=str(home))
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "webfreeze", "bench", "run", str(SUITE), "--agent", "reference",
                        "--tasks", TASKS, "--backend", backend, "--out", str(out), *map(str, more)],
                       env=env, capture_output=True, text=True, timeout=900)
    seconds = time.perf_counter() - t
    if r.returncode != 0:
        raise RuntimeError(f"bench run {' '.join(map(str, more))} failed: {r.stderr.strip()[-500:]}")
    return seconds, json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def run(ctx: Context) -> list[Row]:
    home = ctx.scratch / "home"
    site = SiteServer(ScholarSite(0)).start()
    rows: list[Row] = []
    details: dict = {"tasks": TASKS}
    try:
        for backend in BACKENDS:
            live, offline = ctx.scratch / f"live-{backend}", ctx.scratch / f"offline-{backend}"
            console.print(f"  {backend}: live, then offline on the recorded archive")
            live_s, live_m = _bench(live, backend, "--live", "--resolve", f"scholar.test=127.0.0.1:{site.port}",
                                    home=home)
            offline_s, offline_m = _bench(offline, backend, "--archive", live / "live.wfz", home=home)
            differs = run_difference(live, offline, names=("the live run", "the offline re-run"))
            if differs:
                raise RuntimeError(f"{backend}: the offline re-run differs: {differs}")
            fetches = live_m["circumstances"]["live"]["live_fetches"]
            tasks = live_m["suite"]["tasks"]
            details[backend] = {"tasks": tasks, "live_fetches": fetches, "live_s": live_s, "offline_s": offline_s,
                                "live_elapsed_s": live_m.get("elapsed_s"),
                                "offline_elapsed_s": offline_m.get("elapsed_s"), "identical": True}
            rows.append(Row(BENCH, f"{backend}: bench run --live, {tasks} tasks ({fetches} live fetches)", live_s,
                            offline_s, "the same run offline on its archive", "s", "lower", None,
                            note="reported; identical runs"))
            if live_m.get("elapsed_s") and offline_m.get("elapsed_s"):
                rows.append(Row(BENCH, f"{backend}: the episodes alone (manifest elapsed_s)", live_m["elapsed_s"],
                                offline_m["elapsed_s"], "the same episodes offline", "s", "lower", None,
                                note="reported"))
    finally:
        site.stop()
    ctx.details[NAME] = details
    return rows
