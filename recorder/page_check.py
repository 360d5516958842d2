"""A crawl's check of its own pages: load the page again from what was just recorded, with no
network, and list what that replay cannot answer.

The page is loaded in a fresh browser context (an empty cache) whose every request is answered in
process by a replay of the archive (:class:`webfreeze.simulator.replay_route.ReplayRoute`), opened
anew for each check so that it sees the exchanges committed a moment ago. What the replay answers with a miss, or with the
proxy's placeholder for an exchange whose upstream failed (a connection cut, a TLS failure: the
site never answered), is *missing*. The crawl fetches what is missing live through its recording
proxy (so the answers are recorded) and checks again, while the fetches repair something
(:data:`CHECK_TRIES` checks at most); a page still missing something is recorded but marked
incomplete.

The replay is the one ``replay check`` and the agent environment use (request matching, ordered
repeats, the determinism runtime), so a page that passes here replays there. (The recorder reaches
the replayer only through the simulator's replay route, as docs/architecture.md's layer table has it.)
"""

from __future__ import annotations

from webfreeze.simulator.replay_route import Missing, ReplayRoute

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



def wait_loaded(page, inflight, sockets=None) -> None:
    """Wait until the page has loaded what it will still load (:data:`LOADED_JS`), and the network
    has been quiet since (a font or an image asked for late starts a request of its own) and its
    scripts idle (:func:`~webfreeze.simulator.browser.wait_settled`, as ``replay check`` waits).

    Then the page's one-shot timers due within the replay's timer horizon
    (:func:`~webfreeze.simulator.browser.wait_timers_due`; the context must have had
    :func:`~webfreeze.simulator.browser.track_live_timers`) are waited for, and the network again:
    content a timer shows, or a request a timer makes, after the network went quiet is captured
    and checked. The quiet period itself is wall-clock, as in ``replay check``. ``sockets``: the
    replay's SocketRoutes, whose pushes that waited for an action the page made are let through."""
    from playwright.sync_api import Error as PlaywrightError

    from webfreeze.simulator.browser import wait_settled, wait_timers_due

    try:  # (after the load event: most pages have nothing left and this returns at once)
        page.evaluate(LOADED_JS, LOADED_LIMIT_MS)
    except PlaywrightError:
        pass  # the document went away (a late navigation): what is there is captured
    wait_settled(page, inflight, sockets=sockets)
    wait_timers_due(page, inflight, sockets)


# In every document of the crawl's check: a beacon (``navigator.sendBeacon``, or a ``fetch`` with
# ``keepalive``, which outlives its page) is sent by the browser past Playwright's routes, so through
# the crawl's recording proxy to the live site; here none is sent (a beacon answers true, as if
# queued; a keepalive fetch goes as a plain one, which the routes answer from the archive).
NO_BEACONS_JS = """(() => {
  try { Object.defineProperty(Navigator.prototype, 'sendBeacon', {configurable: true, writable: true,
    value: function sendBeacon() { return true; }}); } catch (e) {}
  const F = globalThis.fetch;
  if (typeof F === 'function') {
    globalThis.fetch = function fetch(input, init) {
      if (init && typeof init === 'object' && init.keepalive) { init = Object.assign({}, init, {keepalive: false}); }
      if (typeof Request === 'function' && input instanceof Request && input.keepalive) {
        input = new Request(input, {keepalive: false});
      }
      return F.call(this, input, init);
    };
  }
})();"""


class PageChecker:
    """Checks pages of one archive in one browser: :meth:`check` loads a page from the archive
    alone and says what it missed. One context serves every check (a context per page costs more
    than the check's own load), each check in a new tab of it, as the crawl captures each page in
    one: nothing a page keeps per tab (sessionStorage) reaches the next. The HTTP cache plays no
    part, since Chromium sends every request of a routed context to the route. A beacon (sent as a
    page is left: Wagtail's editor releases its editing session so) would pass the routes by, to the
    live site through the crawl's recording proxy: a checked page sends none (:data:`NO_BEACONS_JS`).
    :meth:`close` at the end."""

    def __init__(self, browser, archive_path, *, seed: int = 0, full=None):
        self.browser = browser
        self.archive_path = archive_path
        self.seed = seed
        self._context = self._page = self._inflight = None
        self._route = ReplayRoute(archive_path, seed=seed)
        # ``full``: a function giving the full browser, for a page ``browser`` (the headless shell)
        # takes for a download (a PDF, which the full browser shows in its viewer, as the crawl's
        # capture did); checked there from then on
        self._full = full
        self._full_checker: PageChecker | None = None
        self._in_full: set[str] = set()

    def check(self, url: str, when: str) -> tuple[list[Missing], str | None]:
        """Load ``url`` from the archive alone (replayed as at ``when``) and return (what it missed,
        in request order without repeats; the load's error or None)."""
        from playwright.sync_api import Error as PlaywrightError

        from webfreeze.simulator.browser import is_download, new_context, track_inflight, track_live_timers

        if url in self._in_full:
            return self._in_full_browser(url, when)
        with self._route.serving(when):
            if self._context is None:
                # (a redirect's next hop, which no route sees, goes to the route's own replay server)
                self._context = new_context(self.browser, proxy={**self._route.proxy(), "bypass": "<-loopback>"})
                self._context.add_init_script(NO_BEACONS_JS)
                track_live_timers(self._context)
                self._route.attach(self._context)
            error = None
            try:
                if self._page is not None:
                    self._page.close()
                self._page = self._context.new_page()
                self._inflight = track_inflight(self._page)
                self._page.goto(url, wait_until="load", timeout=30_000)
                wait_loaded(self._page, self._inflight, self._route.sockets)
                missing = list(self._route.missing.values())  # (what the page asked for, not what leaving it cut off)
                self._page.goto("about:blank")  # nothing of this page runs on into the next check
            except PlaywrightError as exc:
                error = str(exc).splitlines()[0]
                missing = list(self._route.missing.values()) + self._stalled()
                self.close()  # a tab in an unknown state is not reused
        if error is not None and self._full is not None and is_download(error):
            self._in_full.add(url)
            return self._in_full_browser(url, when)
        return missing, error

    def _in_full_browser(self, url: str, when: str) -> tuple[list[Missing], str | None]:
        if self._full_checker is None:
            self._full_checker = PageChecker(self._full(), self.archive_path, seed=self.seed)
        return self._full_checker.check(url, when)

    def _stalled(self) -> list[Missing]:
        """The requests still in flight when a load failed (what it waited for): missing, so that
        a check that timed out names them, not only the timeout."""
        known = set(self._route.missing)
        out = []
        for request in list(self._inflight or ()):
            if (request.method, request.url) not in known and not request.url.startswith("data:"):
                known.add((request.method, request.url))
                out.append(Missing(request.method, request.url, (), b"", "still loading when the page timed out"))
        return out

    def shutdown(self) -> None:
        """Close the checking contexts and stop the replay servers their redirects reach."""
        self.close()
        self.stop_servers()

    def stop_servers(self) -> None:
        """Stop the replay servers the checking contexts' redirects reach (safe to call again, and
        after the browser has gone)."""
        self._route.stop()
        if self._full_checker is not None:
            self._full_checker.stop_servers()

    def close(self) -> None:
        """Close the checking context (a later :meth:`check` opens a new one)."""
        from playwright.sync_api import Error as PlaywrightError

        if self._context is not None:
            try:
                self._context.close()
            except PlaywrightError:
                pass
        self._context = self._page = self._inflight = None
        if self._full_checker is not None:
            self._full_checker.close()
