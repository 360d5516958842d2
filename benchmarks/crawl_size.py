"""What a crawl of long documentation pages weighs: payloads vs screenshots vs the whole archive.

The site: real documentation, long pages: Python's own ``pydoc`` HTML for a fixed list of standard
library modules (the pages ``python -m pydoc -w`` writes), with an index page linking them, served
on loopback. ``record crawl`` records it twice, with the default screenshots (``viewport``) and with
``--screenshots full``. Per crawl: the payload bytes of every recorded response, the bytes of the
page records' screenshots, and the archive file. Goal: the default crawl's archive is at most 10x
its payload bytes (a shared archive is mostly the site, not pictures of it).

Also: the full-page screenshots re-encoded as lossless WebP with Pillow (method 4, the default
effort), against the PNGs Chromium writes, bytes and encode time (against Pillow's own PNG encode
of the same image): the measurement behind keeping PNG. WebP cannot hold an image taller than
16,383 px; such screenshots are counted, not compared.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

from . import Context, Row, archive_bytes, console

WEBP_MAX = 16383  # the WebP format's largest width or height
NAME = "crawl_size"
TITLE = "Archive size of a long-page crawl: payloads vs screenshots"
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


def _crawl(url: str, archive: Path, home: Path, screenshots: str) -> None:
    env = dict(os.environ, WEBFREEZE_HOME=str(home))
    subprocess.run([sys.executable, "-m", "webfreeze", "record", "crawl", url, "--archive", str(archive),
                    "--depth", "1", "--max-pages", str(len(MODULES) + 1), "--screenshots", screenshots],
                   env=env, check=True, capture_output=True, timeout=1800)


def _sizes(archive: Path) -> dict:
    from webfreeze.archives import Archive
    from webfreeze.archives.maintenance import storage

    sizes = storage(archive)
    with Archive.open(archive) as arc:
        pngs = [p.screenshot() for p in arc.pages() if p.screenshot_digest]
        pages = arc.counts()["pages"]
    return {"pages": pages, "payload_bytes": sizes["payload_bytes_referenced"], "screenshot_bytes": sizes["screenshot_bytes"],
            "screenshot_stored_bytes": sizes["screenshot_bytes_stored"], "archive_bytes": archive_bytes(archive),
            "_pngs": pngs}


def _webp(pngs: list[bytes]) -> dict:
    """PNG vs lossless WebP on the screenshots WebP can hold (at most 16,383 px high: taller
    full-page screenshots are counted apart, they have no WebP form)."""
    from PIL import Image

    png_bytes = webp_bytes = too_tall = 0
    png_s = webp_s = 0.0
    for data in pngs:
        img = Image.open(io.BytesIO(data))
        if img.height > WEBP_MAX:
            too_tall += 1
            continue
        img.load()
        t = time.perf_counter()
        out = io.BytesIO()
        img.save(out, "PNG", optimize=False)  # the re-encode time of a PNG, for a like-for-like time
        png_s += time.perf_counter() - t
        t = time.perf_counter()
        out = io.BytesIO()
        img.save(out, "WEBP", lossless=True, method=4)
        webp_s += time.perf_counter() - t
        png_bytes += len(data)
        webp_bytes += out.tell()
    return {"png_bytes": png_bytes, "webp_lossless_bytes": webp_bytes, "png_encode_s": png_s, "webp_encode_s": webp_s,
            "compared": len(pngs) - too_tall, "too_tall_for_webp": too_tall}


def run(ctx: Context) -> list[Row]:
    from webfreeze.simulator.sites.common import SiteServer

    home = ctx.scratch / "crawl-size-home"
    home.mkdir(exist_ok=True)
    site = SiteServer(docs_app()).start()
    results = {}
    try:
        for mode in ("viewport", "full"):
            archive = ctx.fresh_path(f"docs-{mode}.wfz")
            console.print(f"  crawl pydoc pages, --screenshots {mode}")
            _crawl(f"{site.url}/", archive, home, mode)
            results[mode] = _sizes(archive)
    finally:
        site.stop()
    console.print("  WebP lossless vs PNG on the full-page screenshots")
    webp = _webp(results["full"].pop("_pngs"))
    results["viewport"].pop("_pngs")
    ctx.details[NAME] = {**{k: v for k, v in results.items()}, "webp_vs_png": webp}
    d, f = results["viewport"], results["full"]
    note = f"{d['pages']} pages, {d['payload_bytes'] / 1e6:.2f} MB payloads"
    return [
        Row(f"{NAME} size", "default crawl (viewport screenshots): archive bytes", d["archive_bytes"], d["payload_bytes"],
            "payload bytes", "bytes", "lower", 10, note=note),
        Row(f"{NAME} size", "default crawl: screenshot bytes", d["screenshot_bytes"], d["payload_bytes"], "payload bytes",
            "bytes", "lower", note=note),
        Row(f"{NAME} size", "--screenshots full: archive bytes", f["archive_bytes"], f["payload_bytes"], "payload bytes",
            "bytes", "lower", note=f"screenshots {f['screenshot_bytes'] / 1e6:.1f} MB"),
        Row(f"{NAME} size", "full-page screenshots as lossless WebP: bytes", webp["webp_lossless_bytes"], webp["png_bytes"],
            "Chromium's PNG", "bytes", "lower",
            note=f"{webp['compared']} screenshots; {webp['too_tall_for_webp']} taller than WebP allows"),
        Row(f"{NAME} size", "full-page screenshots as lossless WebP: encode time", webp["webp_encode_s"], webp["png_encode_s"],
            "Pillow PNG encode", "s", "lower"),
    ]
