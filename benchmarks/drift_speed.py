"""``webfreeze drift``: seconds per page, against ``replay check`` per page in the same run.

The simulated scholar site is crawled twice on loopback (depth 1, 20 pages, the defaults: viewport
screenshots), with seed 0 and then seed 1, as two snapshots of a live site. Timed, alternated over
two rounds, best of each (whole commands, interpreter start included, as a user runs them):

- ``drift OLD NEW``: every page of both compared (text similarity, pixel difference) - seconds
  per page of the pair;
- ``replay check OLD``: the anchor, the same machinery's per-page cost when the page is loaded
  through the replay in Chromium - seconds per page;
- ``drift OLD NEW --suite S --backend text`` with four demo tasks: seconds per task on top of the
  page comparison (reported).

Drift compares the captures the archives hold and launches no browser for pages, so it should cost
a small fraction of a replay check per page; both figures are reported (no goal was set).
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
from webfreeze.simulator.sites.common import SiteServer
from webfreeze.simulator.sites.scholar import ScholarSite

from . import Context, Row, console

NAME = "drift_speed"
TITLE = "drift: seconds per page against replay check"
BENCH = "10 drift"
PAGES = 20
ROUNDS = 2
TASKS = ["scholar-site-info-001", "scholar-site-info-002", "scholar-site-info-009", "scholar-site-info-010"]


def _cli(*args, home: Path, timeout: float = 1800) -> tuple[float, subprocess.CompletedProcess]:
    env = dict(os.environ, WEBFREEZE_HOME=str(home))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "webfreeze", *map(str, args)], env=env, capture_output=True, text=True,
                       timeout=timeout)
    return time.perf_counter() - t, r


def _crawl(seed: int, archive: Path, home: Path) -> None:
    site = SiteServer(ScholarSite(seed)).start()
    try:
        port = site.url.rsplit(":", 1)[1].strip("/")
        _, r = _cli("record", "crawl", "http://scholar.test/", "--archive", archive, "--depth", "1",
                    "--max-pages", PAGES, "--resolve", f"scholar.test=127.0.0.1:{port}", home=home)
    finally:
        site.stop()
    if r.returncode not in (0, 1):  # 1: an incomplete page, compared all the same
        raise RuntimeError(f"record crawl failed: {r.stderr.strip()[-500:]}")


def _suite(root: Path) -> Path:
    lines = {json.loads(x)["id"]: x for x in (SUITE / "tasks.jsonl").read_text().splitlines() if x}
    (root / "references").mkdir(parents=True)
    for tid in TASKS:
        shutil.copyfile(SUITE / "references" / f"{tid}.json", root / "references" / f"{tid}.json")
    manifest = json.loads((SUITE / "manifest.json").read_text())
    for key in ("archive", "archive_digest"):
        manifest.pop(key, None)
    (root / "manifest.json").write_text(json.dumps(dict(manifest, name="drift-bench")))
    (root / "tasks.jsonl").write_text("".join(lines[t] + "\n" for t in TASKS))
    return root


def run(ctx: Context) -> list[Row]:
    home = ctx.scratch / "home"
    old, new = ctx.fresh_path("old.wfz"), ctx.fresh_path("new.wfz")
    console.print("  crawling the scholar site twice (seeds 0 and 1)")
    _crawl(0, old, home)
    _crawl(1, new, home)
    suite = ctx.scratch / "suite"
    shutil.rmtree(suite, ignore_errors=True)
    _suite(suite)
    drift_s, check_s, suite_s = [], [], []
    pages = checked = None
    for i in range(ROUNDS):
        console.print(f"  round {i + 1}/{ROUNDS}")
        t, r = _cli("drift", old, new, "--json", home=home)
        if r.returncode != 0:
            raise RuntimeError(f"drift failed: {r.stderr.strip()[-500:]}")
        pages = json.loads(r.stdout)["summary"]["pages"]
        drift_s.append(t)
        report = ctx.scratch / f"check-{i}"
        shutil.rmtree(report, ignore_errors=True)
        t, r = _cli("replay", "check", old, "--report", report, home=home)
        if r.returncode not in (0, 1):
            raise RuntimeError(f"replay check failed: {r.stderr.strip()[-500:]}")
        checked = json.loads((report / "report.json").read_text())["summary"]["pages"]
        check_s.append(t)
        t, r = _cli("drift", old, new, "--suite", suite, "--backend", "text", "--json", home=home)
        if r.returncode not in (0, 1):
            raise RuntimeError(f"drift --suite failed: {r.stderr.strip()[-500:]}")
        suite_s.append(t)
    per_page = min(drift_s) / pages
    anchor = min(check_s) / checked
    per_task = (min(suite_s) - min(drift_s)) / len(TASKS)
    ctx.details[NAME] = {"pages_compared": pages, "pages_checked": checked, "drift_s": drift_s,
                         "replay_check_s": check_s, "drift_suite_s": suite_s, "tasks": len(TASKS)}
    return [Row(BENCH, f"drift, seconds per page ({pages} pages, 2 crawls of {PAGES})", per_page, anchor,
                f"replay check per page ({checked} pages)", "s", "lower", None, note="reported"),
            Row(BENCH, f"drift --suite, seconds per task on top ({len(TASKS)} tasks, text, both archives)",
                per_task, anchor, f"replay check per page ({checked} pages)", "s", "lower", None, note="reported")]
