"""``record crawl``: real Chromium through the recording proxy, breadth-first, resumable.

Every page visited gets a page record (full-page screenshot, DOM snapshot, title) and every
request the browser makes is recorded by the proxy. The crawl's frontier is a JSON document in the
archive, updated in the same transaction as each page record, so a crawl killed at any moment
resumes where it stopped when run again with the same start URL, scope and depth.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urldefrag, urlsplit

from webfreeze.archives import ArchiveError
from webfreeze.archives.timeutil import now

from .errors import CrawlError, RecordError, SeedFailed, SiteUnreachable
from .proxy import RecordingProxy, recording_into

STATE_VERSION = 1
SCREENSHOTS = ("none", "viewport", "full")


@dataclass
class CrawlResult:
    pages: int  # pages recorded (failed ones are not), this run and earlier runs of the same crawl
    pages_this_run: int
    exchanges_this_run: int
    resumed: bool
    complete: bool
    failed: list = field(default_factory=list)  # [url, why] of every page that failed, all runs


def scope_prefix(start: str) -> str:
    """The ``prefix`` scope of a start URL, as Browsertrix has it: the URL up to and including the
    last ``/`` of its path (``.../library/index.html`` covers ``.../library/``)."""
    parts = urlsplit(start)
    path = parts.path or "/"
    return f"{parts.scheme}://{parts.netloc}{path[:path.rfind('/') + 1]}"


def page_failure(status) -> str | None:
    """Why a visited page counts as failed (a network error, a 4xx/5xx answer), or None."""
    if isinstance(status, str):
        return status.removeprefix("error: ")
    if status is None:
        return "no response"
    return f"HTTP {status}" if status >= 400 else None


def scope_matcher(start: str, scope: str) -> Callable[[str], bool]:
    """``host``: same host and port; ``prefix``: URLs under the start URL's folder (:func:`scope_prefix`);
    anything else: a regular expression searched in the URL."""
    start_parts = urlsplit(start)
    if scope == "host":
        return lambda u: urlsplit(u).netloc == start_parts.netloc and urlsplit(u).scheme in ("http", "https")
    if scope == "prefix":
        prefix = scope_prefix(start)
        return lambda u: u.startswith(prefix)
    try:
        rx = re.compile(scope)
    except re.error as exc:
        raise CrawlError(f"invalid --scope regular expression {scope!r}: {exc}") from None
    return lambda u: bool(rx.search(u))


def check_url(url: str) -> None:
    """Fail in one line on a start URL that is not a well-formed http(s) URL."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise RecordError(f"{url}: not a valid URL (it holds a space or a control character)")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise RecordError(f"{url}: not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RecordError(f"{url}: not an http(s) URL")


def crawl(archive_path, start: str, *, depth: int = 2, max_pages: int = 100, scope: str = "host",
          progress: Callable[[int, str], None] | None = None,
          resolve: dict[str, tuple[str, int]] | None = None, screenshots: str = "viewport") -> CrawlResult:
    """Crawl from ``start`` into the archive (created if missing); resumes an interrupted crawl.

    The start URL is first fetched through the recording proxy, unrecorded (its resolver, its
    certificate policy): a seed that fails (a network error, a 4xx/5xx answer) raises
    :class:`SeedFailed` with nothing recorded. Pages that fail later are not recorded as pages;
    they are listed in the crawl's state document and in :attr:`CrawlResult.failed`.
    ``screenshots``: ``full`` (the whole page), ``viewport`` (the first 1920x1080) or ``none``.
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import (launch_chromium, new_context, still_screenshot, track_inflight,
                                             wait_network_quiet)

    if screenshots not in SCREENSHOTS:
        raise CrawlError(f"--screenshots {screenshots!r}: expected one of {', '.join(SCREENSHOTS)}")
    start = urldefrag(start)[0]
    check_url(start)
    in_scope = scope_matcher(start, scope)
    state_name = "crawls/" + hashlib.sha256(f"{start}\n{scope}\n{depth}".encode()).hexdigest()[:16] + ".json"
    with recording_into(archive_path) as arc:
        try:
            state = arc.get_document(state_name)
            resumed = True
        except ArchiveError:
            state = {"version": STATE_VERSION, "start": start, "scope": scope, "depth": depth,
                     "queue": [[start, 0]], "seen": [start], "done": 0}
            resumed = False
        state.setdefault("failed", [])
        seen = set(state["seen"])
        proxy = RecordingProxy(arc, port=0, session_kind="crawl", resolve=resolve, paused=True).start()
        visited = 0
        try:
            if not resumed:
                try:
                    proxy.probe(start)
                except SiteUnreachable as exc:
                    raise SeedFailed(str(exc)) from None
            proxy.begin_session()
            before = proxy.recorder.recorded
            with sync_playwright() as pw:
                browser = launch_chromium(pw, proxy=proxy.url)
                context = new_context(browser)
                page = context.new_page()
                inflight = track_inflight(page)
                while state["queue"] and state["done"] < max_pages:
                    url, level = state["queue"][0]
                    status = None
                    inflight.clear()
                    try:
                        response = page.goto(url, wait_until="load", timeout=30_000)
                        status = response.status if response else None
                        wait_network_quiet(page, inflight)
                        title = page.title()
                        dom = page.content().encode("utf-8")
                        shot = None if screenshots == "none" else still_screenshot(page, full_page=screenshots == "full")
                        links = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
                    except PlaywrightError as exc:
                        title, dom, shot, links = "", None, None, []
                        status = f"error: {str(exc).splitlines()[0]}"
                    failure = page_failure(status)
                    if failure is not None and level == 0 and state["done"] == 0:
                        raise SeedFailed(f"{url}: the start page failed ({failure})")
                    new = sorted({urldefrag(link)[0] for link in links} - seen) if level < depth and not failure else []
                    new = [u for u in new if in_scope(u)]
                    seen.update(new)
                    state["queue"] = state["queue"][1:] + [[u, level + 1] for u in new]
                    state["seen"] = sorted(seen)
                    state["done"] += 1
                    with arc.transaction():  # the page and the frontier land together
                        if failure is None:
                            arc.add_page(session_id=proxy.session_id, url=url, captured_at=now(), title=title,
                                         screenshot=shot, dom=dom,
                                         extra={"final_url": page.url, "status": status, "depth": level,
                                                "screenshot": screenshots})
                        else:  # not a recorded page: listed with why (its exchanges stay, as recorded)
                            state["failed"].append([url, failure])
                        arc.put_document(state_name, state)
                    visited += failure is None
                    if progress:
                        progress(state["done"], url)
                browser.close()
        finally:
            proxy.stop()
        return CrawlResult(pages=state["done"] - len(state["failed"]), pages_this_run=visited,
                           exchanges_this_run=proxy.recorder.recorded - before, resumed=resumed,
                           complete=not state["queue"] or state["done"] >= max_pages, failed=state["failed"])
