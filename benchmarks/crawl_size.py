"""What a crawl weighs and costs: payloads vs screenshots vs the whole archive, seconds per page.

Sites: real documentation with long pages, Python's own ``pydoc`` HTML for a fixed list of
standard-library modules (the pages ``python -m pydoc -w`` writes) with an index page linking
them, and the simulated scholar site; both served on loopback. ``record crawl`` records the docs
three times: the default (viewport screenshots, stored as lossless WebP, each page checked against
a replay of the archive), ``--no-check`` (the same without the check: the anchor of the check's
cost) and ``--screenshots full``; the scholar site once with the defaults. Per crawl: the payload
bytes of every recorded response, the page records' screenshot bytes, the archive file, and
crawl seconds per page (the whole command, browser start included, over the pages it recorded).
Goal: the default crawl of the documentation is at most 5x its payload bytes (the scholar site's
pages are about 2 kB each, so there the figure is reported: any screenshot outweighs them).

The test bed (tests/testbed/, docs/testbed.md): its three real applications (Datasette, the Sphinx
documentation, the Django catalogue), each started on loopback and crawled with the defaults under
its own name (``--resolve``), depth 2, at most 20 pages: archive bytes / payload bytes (goal <= 5x)
and crawl seconds per page (reported). Skipped, with a line, when ``.venv/testbed`` is not there.

Also: the default crawl's screenshots, decoded, encoded again as PNG (Pillow) and as lossless
WebP with the crawl's settings: bytes and encode time per screenshot, the measurement behind
storing WebP.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

from . import Context, Row, archive_bytes, console

NAME = "crawl_size"
TITLE = "Crawl size and cost: payloads vs screenshots, seconds per page"
MODULES = ["argparse", "collections", "configparser", "csv", "datetime", "email.message", "functools",
           "http.client", "json", "logging", "pathlib", "re", "shutil", "subprocess", "tarfile", "textwrap",
           "threading", "urllib.parse", "zipfile"]


def docs_app():
    """A WSGI app serving pydoc's HTML pages of :data:`MODULES` and an index linking them."""
    import importlib
    import pydoc

    from werkzeug.wrappers import Request, Response

    html = pydoc.HTMLDoc()
    pages: dict[str, bytes] = {}
    for name in MODULES:
        mod = importlib.import_module(name)
        pages[f"/{name}.html"] = html.page(pydoc.describe(mod), html.document(mod, name)).encode("utf-8")
    links = "".join(f'<li><a href="/{n}.html">{n}</a></li>' for n in MODULES)
    pages["/"] = html.page("Library reference", f"<h1>Library reference</h1><ul>{links}</ul>").encode("utf-8")

    def app(environ, start_response):
        body = pages.get(Request(environ).path)
        if body is None:
            return Response("not found", status=404)(environ, start_response)
        return Response(body, content_type="text/html; charset=utf-8")(environ, start_response)

    return app


def _crawl(url: str, archive: Path, home: Path, screenshots: str, *extra: str, max_pages: int = len(MODULES) + 1) -> float:
    """Run ``record crawl``; returns its wall-clock seconds."""
    env = dict(os.environ, WEBFREEZE_HOME=str(home))
    t = time.perf_counter()
    # exit status 3 is an incomplete crawl: measured all the same, and said in the row's note
    r = subprocess.run([sys.executable, "-m", "webfreeze", "record", "crawl", url, "--archive", str(archive),
                        "--depth", "1", "--max-pages", str(max_pages), "--screenshots", screenshots, *extra],
                       env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode not in (0, 3):
        raise RuntimeError(f"record crawl failed: {r.stderr.strip()[-500:]}")
    return time.perf_counter() - t


def _sizes(archive: Path) -> dict:
    from webfreeze.archives import Archive
    from webfreeze.archives.maintenance import storage

    sizes = storage(archive)
    with Archive.open(archive) as arc:
        shots = [p.screenshot() for p in arc.pages() if p.screenshot_digest]
        pages = arc.counts()["pages"]
        incomplete = sum(1 for p in arc.pages() if p.extra.get("complete") is False)
    return {"pages": pages, "payload_bytes": sizes["payload_bytes_referenced"], "screenshot_bytes": sizes["screenshot_bytes"],
            "screenshot_stored_bytes": sizes["screenshot_bytes_stored"], "archive_bytes": archive_bytes(archive),
            "webp_screenshots": sum(1 for d in shots if d[:4] == b"RIFF"), "incomplete_pages": incomplete,
            "_shots": shots}


def _webp(shots: list[bytes]) -> dict:
    """The screenshots decoded, then encoded as PNG (Pillow's default level) and as lossless WebP
    with the crawl's settings: bytes and encode seconds of each."""
    from PIL import Image

    from webfreeze.recorder.crawl import WEBP_EFFORT, WEBP_METHOD

    png_bytes = webp_bytes = 0
    png_s = webp_s = 0.0
    for data in shots:
        img = Image.open(io.BytesIO(data))
        img.load()
        t = time.perf_counter()
        out = io.BytesIO()
        img.save(out, "PNG")
        png_s += time.perf_counter() - t
        png_bytes += out.tell()
        t = time.perf_counter()
        out = io.BytesIO()
        img.save(out, "WEBP", lossless=True, quality=WEBP_EFFORT, method=WEBP_METHOD)
        webp_s += time.perf_counter() - t
        webp_bytes += out.tell()
    return {"png_bytes": png_bytes, "webp_lossless_bytes": webp_bytes, "png_encode_s": png_s, "webp_encode_s": webp_s,
            "screenshots": len(shots)}


TESTBED_PAGES = 20


def _testbed(ctx: Context, home: Path) -> dict:
    """Each test-bed application crawled with the defaults: {name: sizes + seconds}; {} without
    the test bed's venv."""
    tests = Path(__file__).resolve().parent.parent / "tests"
    if str(tests) not in sys.path:
        sys.path.insert(0, str(tests))
    from testbed.apps import STARTERS, TestbedMissing, venv_python

    try:
        venv_python()
    except TestbedMissing as exc:
        console.print(f"  test bed skipped: {exc}")
        return {}
    out = {}
    for name, start in STARTERS.items():
        app = start(ctx.scratch.resolve() / f"testbed-{name}")  # (the apps run in folders of their own)
        try:
            archive = ctx.fresh_path(f"testbed-{name}.wfz")
            console.print(f"  crawl the test bed's {name} ({app.host}): defaults")
            seconds = _crawl(app.base_url, archive, home, "viewport", "--resolve", app.resolve, "--depth", "2",
                             max_pages=TESTBED_PAGES)  # (the last --depth is the one that counts)
        finally:
            app.stop()
        sizes = _sizes(archive)
        sizes.pop("_shots")
        out[name] = {**sizes, "seconds": seconds, "seconds_per_page": seconds / max(sizes["pages"], 1)}
    return out


def run(ctx: Context) -> list[Row]:
    from webfreeze.simulator.sites.common import SiteServer
    from webfreeze.simulator.sites.scholar import ScholarSite

    home = ctx.scratch / "crawl-size-home"
    home.mkdir(exist_ok=True)
    results, seconds = {}, {}
    docs = SiteServer(docs_app()).start()
    try:
        for mode, screenshots, extra in (("default", "viewport", ()), ("no_check", "viewport", ("--no-check",)),
                                         ("full", "full", ())):
            archive = ctx.fresh_path(f"docs-{mode}.wfz")
            console.print(f"  crawl pydoc pages: --screenshots {screenshots} {' '.join(extra)}")
            seconds[mode] = _crawl(f"{docs.url}/", archive, home, screenshots, *extra)
            results[mode] = _sizes(archive)
    finally:
        docs.stop()
    scholar = SiteServer(ScholarSite(0)).start()
    try:
        archive = ctx.fresh_path("scholar-default.wfz")
        console.print("  crawl the simulated scholar site: defaults")
        seconds["scholar"] = _crawl(f"{scholar.url}/", archive, home, "viewport", max_pages=20)
        results["scholar"] = _sizes(archive)
    finally:
        scholar.stop()
    testbed = _testbed(ctx, home)
    console.print("  lossless WebP vs PNG on the default crawl's screenshots")
    webp = _webp(results["default"]["_shots"])
    for r in results.values():
        r.pop("_shots")
    per_page = {k: seconds[k] / max(results[k]["pages"], 1) for k in seconds}
    ctx.details[NAME] = {**results, "seconds": seconds, "seconds_per_page": per_page, "webp_vs_png": webp,
                         "testbed": testbed}
    d, f, sc = results["default"], results["full"], results["scholar"]
    note = f"{d['pages']} pages, {d['payload_bytes'] / 1e6:.2f} MB payloads, {d['incomplete_pages']} incomplete"
    shots = max(webp["screenshots"], 1)
    rows = []
    for name, t in testbed.items():
        rows.append(Row(f"{NAME} testbed", f"{name}: archive bytes", t["archive_bytes"], t["payload_bytes"],
                        "payload bytes", "bytes", "lower", 5,
                        note=f"{t['pages']} pages, {t['incomplete_pages']} incomplete, "
                             f"{t['seconds_per_page']:.2f} s per page"))
        rows.append(Row(f"{NAME} testbed", f"{name}: crawl seconds per page", t["seconds_per_page"],
                        per_page["no_check"], "pydoc --no-check", "s", "lower", note="reported"))
    return rows + [
        Row(f"{NAME} size", "docs, default crawl: archive bytes", d["archive_bytes"], d["payload_bytes"],
            "payload bytes", "bytes", "lower", 5, note=note),
        Row(f"{NAME} size", "docs, default crawl: screenshot bytes", d["screenshot_bytes"], d["payload_bytes"],
            "payload bytes", "bytes", "lower", note=f"{d['webp_screenshots']} of {d['pages']} WebP"),
        # reported, no goal: the simulated pages are ~2 kB compressed, so any screenshot outweighs them
        Row(f"{NAME} size", "scholar, default crawl: archive bytes", sc["archive_bytes"], sc["payload_bytes"],
            "payload bytes", "bytes", "lower",
            note=f"{sc['pages']} tiny pages, {sc['incomplete_pages']} incomplete; screenshots "
                 f"{sc['screenshot_bytes'] / 1e3:.0f} kB"),
        Row(f"{NAME} size", "docs, --screenshots full: archive bytes", f["archive_bytes"], f["payload_bytes"],
            "payload bytes", "bytes", "lower",
            note=f"screenshots {f['screenshot_bytes'] / 1e6:.1f} MB, {f['webp_screenshots']} of {f['pages']} WebP"),
        Row(f"{NAME} time", "docs: crawl seconds per page, checked", per_page["default"], per_page["no_check"],
            "--no-check", "s", "lower", note=f"{per_page['default']:.2f} s vs {per_page['no_check']:.2f} s per page"),
        Row(f"{NAME} time", "scholar: crawl seconds per page, checked", per_page["scholar"], per_page["no_check"],
            "docs --no-check", "s", "lower", note="reported"),
        Row(f"{NAME} size", "screenshots as lossless WebP: bytes", webp["webp_lossless_bytes"], webp["png_bytes"],
            "PNG (Pillow)", "bytes", "lower", note=f"{webp['screenshots']} viewport screenshots"),
        Row(f"{NAME} size", "screenshots as lossless WebP: encode time", webp["webp_encode_s"], webp["png_encode_s"],
            "PNG (Pillow)", "s", "lower",
            note=f"{webp['webp_encode_s'] / shots * 1000:.0f} ms vs {webp['png_encode_s'] / shots * 1000:.0f} ms each"),
    ]
