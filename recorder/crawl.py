"""``record crawl``: real Chromium through the recording proxy, breadth-first, resumable.

Every page visited gets a page record (full-page screenshot, DOM snapshot, title) and every
request the browser makes is recorded by the proxy. The crawl's frontier is a JSON document in the
archive, updated in the same transaction as each page record, so a crawl killed at any moment
resumes where it stopped when run again with the same start URL, scope and depth.
"""

from __future__ import annotations

import hashlib
import http.client
import re
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urldefrag, urlsplit

from webfreeze.archives import ArchiveError
from webfreeze.archives.timeutil import now

from .proxy import RecordingProxy, recording_into, resolved_url

STATE_VERSION = 1


@dataclass
class CrawlResult:
    pages: int
    pages_this_run: int
    exchanges_this_run: int
    resumed: bool
    complete: bool


def scope_matcher(start: str, scope: str) -> Callable[[str], bool]:
    """``host``: same host and port; ``prefix``: URLs under the start URL; anything else: a regex."""
    start_parts = urlsplit(start)
    if scope == "host":
        return lambda u: urlsplit(u).netloc == start_parts.netloc and urlsplit(u).scheme in ("http", "https")
    if scope == "prefix":
        return lambda u: u.startswith(start)
    try:
        rx = re.compile(scope)
    except re.error as exc:
        raise ArchiveError(f"invalid --scope regular expression {scope!r}: {exc}") from None
    return lambda u: bool(rx.search(u))


def check_url(url: str) -> None:
    """Fail in one line on a start URL that is not a well-formed http(s) URL."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise ArchiveError(f"{url}: not a valid URL (it holds a space or a control character)")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise ArchiveError(f"{url}: not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ArchiveError(f"{url}: not an http(s) URL")


def check_reachable(url: str) -> None:
    """Fail in one line, before anything is written, when the start URL cannot be fetched."""
    check_url(url)
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=15) as resp:
            resp.read(1)
    except urllib.error.HTTPError:
        return  # the server answered; the crawl records whatever it says
    except (urllib.error.URLError, socket.timeout, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ArchiveError(f"{url}: unreachable ({reason})") from None
    except (ValueError, http.client.InvalidURL) as exc:  # a URL urllib cannot send (a space in the host)
        raise ArchiveError(f"{url}: not a valid URL ({exc})") from None
    except http.client.HTTPException as exc:  # something answered, but not in HTTP
        raise ArchiveError(f"{url}: unreachable (the server does not speak HTTP: {type(exc).__name__})") from None


def crawl(archive_path, start: str, *, depth: int = 2, max_pages: int = 100, scope: str = "host",
          progress: Callable[[int, str], None] | None = None,
          resolve: dict[str, tuple[str, int]] | None = None) -> CrawlResult:
    """Crawl from ``start`` into the archive (created if missing); resumes an interrupted crawl."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import (launch_chromium, new_context, still_screenshot, track_inflight,
                                             wait_network_quiet)

    start = urldefrag(start)[0]
    in_scope = scope_matcher(start, scope)
    check_reachable(resolved_url(start, resolve))
    state_name = "crawls/" + hashlib.sha256(f"{start}\n{scope}\n{depth}".encode()).hexdigest()[:16] + ".json"
    with recording_into(archive_path) as arc:
        try:
            state = arc.get_document(state_name)
            resumed = True
        except ArchiveError:
            state = {"version": STATE_VERSION, "start": start, "scope": scope, "depth": depth,
                     "queue": [[start, 0]], "seen": [start], "done": 0}
            resumed = False
        seen = set(state["seen"])
        proxy = RecordingProxy(arc, port=0, session_kind="crawl", resolve=resolve).start()
        before = proxy.recorder.recorded
        visited = 0
        try:
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
                        shot = still_screenshot(page)
                        links = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
                    except PlaywrightError as exc:
                        title, dom, shot, links = "", None, None, []
                        status = f"error: {str(exc).splitlines()[0]}"
                    new = sorted({urldefrag(link)[0] for link in links} - seen) if level < depth else []
                    new = [u for u in new if in_scope(u)]
                    seen.update(new)
                    state["queue"] = state["queue"][1:] + [[u, level + 1] for u in new]
                    state["seen"] = sorted(seen)
                    state["done"] += 1
                    with arc.transaction():  # the page and the frontier land together
                        arc.add_page(session_id=proxy.session_id, url=url, captured_at=now(), title=title,
                                     screenshot=shot, dom=dom,
                                     extra={"final_url": page.url, "status": status, "depth": level})
                        arc.put_document(state_name, state)
                    visited += 1
                    if progress:
                        progress(state["done"], url)
                browser.close()
        finally:
            proxy.stop()
        return CrawlResult(pages=state["done"], pages_this_run=visited,
                           exchanges_this_run=proxy.recorder.recorded - before, resumed=resumed,
                           complete=not state["queue"] or state["done"] >= max_pages)


