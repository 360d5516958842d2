"""Page-load time of the same pages through our recorder vs plain mitmdump vs no proxy.

The same Chromium (Debian's, via Playwright) loads the same 40 pages of the simulated scholar site
three ways, in one run and in interleaved rounds: straight to the site, through mitmproxy with no
addon (what `mitmdump` runs), and through our recording proxy writing every exchange into an
archive. A page load is `goto(..., wait_until="load")` plus the wait for the network to settle
(the page's XHR), exactly as `record crawl` does it. Goal: <= 1.1x plain mitmdump.
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import threading
import time

from webfreeze.recorder.proxy import free_port

from . import Context, Row, console

NAME = "recorder_overhead"
TITLE = "Recorder page-load time vs plain mitmdump"
ROUNDS = 3


class _PlainMitmproxy:
    """mitmproxy's DumpMaster with no addon of ours: the anchor."""

    def __init__(self, confdir: str):
        self.port = free_port()
        self.confdir = confdir
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        from mitmproxy import options
        from mitmproxy.tools.dump import DumpMaster

        opts = options.Options(listen_host="127.0.0.1", listen_port=self.port, confdir=self.confdir, ssl_insecure=True)
        self.master = DumpMaster(opts, with_termlog=False, with_dumper=False)
        self.loop = asyncio.get_running_loop()
        self.loop.call_soon(self._ready.set)
        await self.master.run()

    def start(self) -> "_PlainMitmproxy":
        self._thread.start()
        self._ready.wait(30)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.master.shutdown)
        self._thread.join(timeout=15)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _pages(site_url: str) -> list[str]:
    from webfreeze.simulator.sites.scholar_data import build_corpus

    papers = build_corpus(0).papers
    paths = ["/", "/list/cs/recent", "/list/math/new", "/list/physics/pastweek", "/search?query=graph",
             "/search/advanced", "/help", "/about"]
    paths += [f"/abs/{p.id}" for p in papers[:20]] + [f"/html/{p.id}v1" for p in papers[:12]]
    return [site_url + p for p in paths]


def _load_times(pw, urls: list[str], proxy: str | None) -> list[float]:
    from webfreeze.simulator.browser import launch_chromium, new_context, track_inflight, wait_network_quiet

    browser = launch_chromium(pw, proxy=proxy, shell=True)  # (what record crawl runs)
    try:
        page = new_context(browser).new_page()
        inflight = track_inflight(page)
        page.goto(urls[0], wait_until="load")  # warm-up: process start, first connection
        times = []
        for url in urls:
            inflight.clear()
            t0 = time.perf_counter()
            page.goto(url, wait_until="load")
            wait_network_quiet(page, inflight)
            times.append(time.perf_counter() - t0)
        return times
    finally:
        browser.close()


def run(ctx: Context) -> list[Row]:
    from playwright.sync_api import sync_playwright

    from webfreeze.recorder.proxy import RecordingProxy, ensure_ca, open_for_recording
    from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
    from webfreeze.simulator.sites import serve

    try:
        chromium_path()
    except BrowserUnavailable as exc:
        console.print(f"  skipped: {exc}")
        return []
    confdir = ctx.scratch / "mitmproxy"
    ensure_ca(confdir)
    site = serve("scholar")
    urls = _pages(site.url)
    times: dict[str, list[float]] = {"none": [], "mitmdump": [], "recorder": []}
    try:
        with sync_playwright() as pw:
            for r in range(ROUNDS):
                console.print(f"  round {r + 1}/{ROUNDS}: {len(urls)} pages x 3 ways ...")
                times["none"] += _load_times(pw, urls, None)
                plain = _PlainMitmproxy(str(confdir)).start()
                try:
                    times["mitmdump"] += _load_times(pw, urls, plain.url)
                finally:
                    plain.stop()
                with open_for_recording(ctx.fresh_path(f"recorder-{r}.wfz")) as arc:
                    proxy = RecordingProxy(arc, port=free_port(), confdir=confdir).start()
                    try:
                        times["recorder"] += _load_times(pw, urls, proxy.url)
                    finally:
                        proxy.stop()
    finally:
        site.stop()
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    total = {k: sum(v) / ROUNDS for k, v in times.items()}
    ctx.details[NAME] = {"pages": len(urls), "rounds": ROUNDS, "median_ms": med, "total_s_per_round": total,
                         "samples_s": times}
    return [
        Row("4 record", "page load p50, through the recorder", med["recorder"], med["mitmdump"], "plain mitmdump",
            "ms", "lower", 1.1),
        Row("4 record", "crawl of 40 pages, through the recorder", total["recorder"], total["mitmdump"],
            "plain mitmdump", "s", "lower", 1.1),
        Row("4 record", "page load p50, plain mitmdump vs no proxy", med["mitmdump"], med["none"], "no proxy",
            "ms", "lower", note="the cost of any proxy"),
        Row("4 record", "page load p50, through the recorder vs no proxy", med["recorder"], med["none"], "no proxy",
            "ms", "lower"),
    ]
