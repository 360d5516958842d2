"""A crawl's check of its own pages: load the page again from what was just recorded, with no
network, and list what that replay cannot answer.

The page is loaded in a fresh browser context (an empty cache) whose every request is answered in
process by a :class:`webfreeze.replayer.Replay` of the archive, opened anew for each check so that
it sees the exchanges committed a moment ago. What the replay answers with a miss, or with the
proxy's placeholder for an exchange whose upstream failed (a connection cut, a TLS failure: the
site never answered), is *missing*. The crawl fetches what is missing live through its recording
proxy (so the answers are recorded) and checks again, while the fetches repair something
(:data:`CHECK_TRIES` checks at most); a page still missing something is recorded but marked
incomplete.

The replay is the one ``replay check`` and the agent environment use (request matching, ordered
repeats, the determinism runtime), so a page that passes here replays there. (The recorder reaching
into the replayer is the one exception to the layer table of DESIGN.md: checking a capture means
replaying it.)
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from webfreeze.archives.content import DecodeError, decode_content
from webfreeze.common.http import header_value

# Checks of one page at most: the first, then one after each live fetch of what it missed. A fetch
# can uncover more (a stylesheet fetched again imports one the capture never reached), so a chain
# of N levels needs N checks; a check that misses what the one before missed stops sooner.
CHECK_TRIES = 8
# Only these are fetched again live: sending a form or an API call a second time could change the
# site. A missing request of another method is reported as missing, never repeated.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# Waited for before a page is captured (and before it is checked), after the load event (which
# already waits for stylesheets, chained @imports included): the web fonts the page uses, and the
# images in the first viewport (lazy ones the viewport triggers; a broken image counts as complete).
# Bounded: a page that never finishes is still captured.
LOADED_JS = """async (limitMs) => {
  const inView = (img) => { const r = img.getBoundingClientRect();
    return r.bottom >= 0 && r.top <= innerHeight && r.right >= 0 && r.left <= innerWidth; };
  const pending = () => Array.from(document.images).some((img) => inView(img) && !img.complete);
  const loaded = (async () => {
    if (document.fonts && document.fonts.ready) await document.fonts.ready;
    while (pending()) await new Promise((done) => setTimeout(done, 25));
  })();
  await Promise.race([loaded, new Promise((done) => setTimeout(done, limitMs))]);
}"""
LOADED_LIMIT_MS = 5000


def wait_loaded(page, inflight) -> None:
    """Wait until the page has loaded what it will still load (:data:`LOADED_JS`), and the network
    has been quiet since (a font or an image asked for late starts a request of its own).

    TODO(settle rule, issue 31): the quiet period is wall-clock, as in ``replay check``; a request a
    page makes from a timer later than it is missed by both. When the determinism runtime's timer
    pump lands (replayer/determinism.py, simulator/browser.py), the check's replay should settle
    by it, so that what a page loads late is checked the way agents will see it."""
    from playwright.sync_api import Error as PlaywrightError

    from webfreeze.simulator.browser import wait_network_quiet

    try:  # (after the load event: most pages have nothing left and this returns at once)
        page.evaluate(LOADED_JS, LOADED_LIMIT_MS)
    except PlaywrightError:
        pass  # the document went away (a late navigation): what is there is captured
    wait_network_quiet(page, inflight)


@dataclass(frozen=True)
class Missing:
    """A request of the replayed page the archive could not answer (``why``: ``miss``, or the
    upstream failure its recorded placeholder holds)."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    why: str

    def describe(self) -> str:
        return self.url if self.why == "miss" else f"{self.url} ({self.why})"


class PageChecker:
    """Checks pages of one archive in one browser: :meth:`check` loads a page from the archive
    alone and says what it missed. One context and tab serve every check (a context per page costs
    more than the check's own load); the HTTP cache plays no part, since Chromium sends every
    request of a routed context to the route. :meth:`close` at the end."""

    def __init__(self, browser, archive_path, *, seed: int = 0):
        self.browser = browser
        self.archive_path = archive_path
        self.seed = seed
        self._context = self._page = self._inflight = None
        self._replay = None
        self._missing: dict[tuple[str, str], Missing] = {}
        self._failed_ids: dict[int, str | None] = {}

    def check(self, url: str, when: str) -> tuple[list[Missing], str | None]:
        """Load ``url`` from the archive alone (replayed as at ``when``) and return (what it missed,
        in request order without repeats; the load's error or None)."""
        from playwright.sync_api import Error as PlaywrightError

        from webfreeze.replayer import Replay

        from webfreeze.simulator.browser import new_context, track_inflight

        self._missing, self._failed_ids = {}, {}
        # opened anew for each check: the match index then holds what was recorded a moment ago
        with Replay(self.archive_path, seed=self.seed) as replay:
            replay.reset(self.seed, when=when)
            self._replay = replay
            try:
                if self._context is None:
                    self._context = new_context(self.browser)
                    self._context.route("**/*", self._answer)
                    self._page = self._context.new_page()
                    self._inflight = track_inflight(self._page)
                self._inflight.clear()
                error = None
                try:
                    self._page.goto(url, wait_until="load", timeout=30_000)
                    wait_loaded(self._page, self._inflight)
                    self._page.goto("about:blank")  # nothing of this page runs on into the next check
                except PlaywrightError as exc:
                    error = str(exc).splitlines()[0]
                    self.close()  # a tab in an unknown state is not reused
            finally:
                self._replay = None
        return list(self._missing.values()), error

    def close(self) -> None:
        """Close the checking context (a later :meth:`check` opens a new one)."""
        from playwright.sync_api import Error as PlaywrightError

        if self._context is not None:
            try:
                self._context.close()
            except PlaywrightError:
                pass
        self._context = self._page = self._inflight = None

    def _upstream_failure(self, headers) -> str | None:
        cap = header_value(headers, "x-webfreeze-capture")
        if not cap or not cap.isdigit():
            return None
        cid = int(cap)
        if cid not in self._failed_ids:
            self._failed_ids[cid] = self._replay.archive.exchange(cid).extra.get("error")
        return self._failed_ids[cid]

    def _answer(self, route, request) -> None:
        from playwright.sync_api import Error as PlaywrightError

        from webfreeze.replayer.replay import BROWSER_INTERNAL_HOSTS

        try:
            replay = self._replay
            if replay is None:  # a request of a page being left, between checks
                route.abort()
                return
            body = request.post_data_buffer or b""
            headers = list(request.headers.items())
            status, resp_headers, data = replay.fetch(request.method, request.url, headers, body)
            internal = (urlsplit(request.url).hostname or "") in BROWSER_INTERNAL_HOSTS
            why = "miss" if status == 0 or header_value(resp_headers, "x-webfreeze-miss") else \
                self._upstream_failure(resp_headers)
            if why and not internal:
                self._missing.setdefault((request.method, request.url),
                                         Missing(request.method, request.url, tuple(headers), body, why))
            if status == 0:
                route.abort()
                return
            # Playwright hands the body to Chromium as the decoded entity: take the content coding
            # off here (the archive keeps it as the site sent it).
            coding = header_value(resp_headers, "content-encoding")
            if coding:
                try:
                    data = decode_content(data, coding)
                    resp_headers = [(k, v) for k, v in resp_headers
                                    if k.lower() not in ("content-encoding", "content-length")]
                except DecodeError:
                    pass
            route.fulfill(status=status, headers=_header_dict(resp_headers), body=data)
        except PlaywrightError:
            pass  # the page went away meanwhile


def _header_dict(headers) -> dict[str, str]:
    """Playwright takes headers as a dict: repeated ones (Set-Cookie) joined as Chromium reads them."""
    out: dict[str, str] = {}
    for k, v in headers:
        key = k.lower()
        out[key] = f"{out[key]}\n{v}" if key in out else v
    return out
