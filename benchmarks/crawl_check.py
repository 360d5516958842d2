"""What the crawl's self-check costs on a server nobody here wrote: nginx serving Python's
documentation (the test bed's ``pydocs.testbed.test``, tests/testbed/nginx_app.py).

``record crawl http://pydocs.testbed.test/index.html --depth 2 --max-pages 40`` twice, into fresh
archives: with the check (the default) and with ``--no-check`` (the anchor). Per crawl: the whole
command's seconds over the pages it recorded (browser start included), and how many pages the
check left incomplete (0 expected: nginx's ``Accept-Ranges`` once made every page's check wait
30 s for a load that never came). Goal: the checked crawl's seconds per page at most 1.5x the
unchecked one's. Skipped, with a line, without nginx or Python's documentation.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from . import Context, Row, console

NAME = "crawl_check"
TITLE = "The crawl's self-check on an nginx site: seconds per page, checked vs --no-check"
PAGES = 40
GOAL = 1.5


def _crawl(app, archive: Path, home: Path, *extra: str) -> tuple[float, int]:
    """Run ``record crawl`` on the docs; (wall seconds, exit status)."""
    env = dict(os.environ, WEBFREEZE_HOME=str(home))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "webfreeze", "record", "crawl", app.start_url, "--archive", str(archive),
                        "--depth", "2", "--max-pages", str(PAGES), "--resolve", app.resolve, *extra],
                       env=env, capture_output=True, text=True, timeout=3600)
    if r.returncode not in (0, 3):  # 3: incomplete pages, measured all the same and counted
        raise RuntimeError(f"record crawl failed: {r.stderr.strip()[-500:]}")
    return time.perf_counter() - t, r.returncode


def _pages(archive: Path) -> tuple[int, int]:
    from webfreeze.archives import Archive

    with Archive.open(archive) as arc:
        pages = list(arc.pages())
    return len(pages), sum(1 for p in pages if p.extra.get("complete") is False)


def run(ctx: Context) -> list[Row]:
    tests = Path(__file__).resolve().parent.parent / "tests"
    for p in (tests, tests / "support"):
        if str(p) not in sys.path:
            sys.path.insert(0, str(p))
    from testbed.nginx_app import NginxMissing, start_pydocs

    try:
        app = start_pydocs(ctx.scratch.resolve() / "crawl-check-nginx")
    except NginxMissing as exc:
        console.print(f"  crawl_check skipped: {exc}")
        return []
    home = ctx.scratch / "crawl-check-home"
    home.mkdir(exist_ok=True)
    figures = {}
    try:
        for mode, extra in (("checked", ()), ("no_check", ("--no-check",))):
            archive = ctx.fresh_path(f"pydocs-{mode}.wfz")
            console.print(f"  crawl nginx's Python docs, depth 2, {PAGES} pages {' '.join(extra)}")
            seconds, status = _crawl(app, archive, home, *extra)
            pages, incomplete = _pages(archive)
            figures[mode] = {"seconds": seconds, "pages": pages, "incomplete": incomplete, "exit": status,
                             "seconds_per_page": seconds / max(pages, 1)}
    finally:
        app.stop()
    ctx.details[NAME] = figures
    c, n = figures["checked"], figures["no_check"]
    return [Row(f"{NAME} time", "nginx docs: crawl seconds per page, checked", c["seconds_per_page"],
                n["seconds_per_page"], "--no-check", "s", "lower", GOAL,
                note=f"{c['pages']} pages, {c['incomplete']} incomplete; {c['seconds_per_page']:.2f} s vs "
                     f"{n['seconds_per_page']:.2f} s per page")]
