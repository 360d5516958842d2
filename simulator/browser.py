"""Launching Chromium the one way that works here: Debian's build, driven by Playwright.

``playwright install`` cannot download browsers on these machines, so the executable is Debian's
``chromium`` (or ``$WEBFREEZE_CHROMIUM``), started with flags that keep it off the network except
through the proxy it is given.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import shutil
import sys
import time

from webfreeze.common.errors import WebfreezeError
from webfreeze.common.http import is_event_stream

# Chromium's own background traffic (component and model updates) that the launch flags do not stop
# entirely; recording sends it around the proxy (it fails offline) so recordings hold only what
# pages asked for. Defined by the replay server, which keeps it out of its miss reports.
from webfreeze.replayer.server import BROWSER_INTERNAL_HOSTS

_HINTSTYLES = {"0": "none", "1": "slight", "2": "medium", "3": "full"}


def font_render_hinting() -> str:
    """The hinting the full browser gives web fonts (``@font-face``): fontconfig's default
    (``fc-match``'s ``hinting`` and ``hintstyle``), which it takes whatever ``--font-render-hinting``
    says; the headless shell takes the flag instead. Both are told this, so a screenshot of either
    (an archive crawled in the full browser, before crawls ran the shell, replayed in ``replay
    check``'s shell) draws web fonts alike; system fonts go through fontconfig in both. ``slight``
    (fontconfig's own default) when it cannot be asked."""
    import subprocess

    fc_match = shutil.which("fc-match")
    if fc_match:
        try:
            out = subprocess.run([fc_match, "-f", "%{hinting}:%{hintstyle}"], capture_output=True, text=True,
                                 timeout=10, check=False).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        hinting, _, style = out.partition(":")
        if hinting == "False":
            return "none"
        if style in _HINTSTYLES:
            return _HINTSTYLES[style]
    return "slight"


# This machine's web-font hinting (fontconfig's), asked once: run manifests record it beside the
# browser's build (``versions.font_hinting``), since screenshots differ where it does.
FONT_HINTING = font_render_hinting()

# Rendering that comes out the same, pixel for pixel, on every run and in both binaries (the crawl's
# and replay check's screenshots are compared byte for byte): web fonts hinted as fontconfig says
# (font_render_hinting), no subpixel glyph positions or LCD text, one colour profile, Skia without
# CPU-specific fast paths, whole tiles re-rastered, image decodes not deferred, and each frame drawn
# only after every compositor stage has finished.
RENDER_FLAGS = [
    f"--font-render-hinting={FONT_HINTING}", "--disable-font-subpixel-positioning", "--disable-lcd-text",
    "--force-color-profile=srgb", "--disable-skia-runtime-opts", "--disable-partial-raster",
    "--disable-checker-imaging", "--run-all-compositor-stages-before-draw", "--disable-threaded-animation",
    "--disable-threaded-scrolling", "--disable-image-animation-resync", "--disable-new-content-rendering-timeout",
]
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage",
    *RENDER_FLAGS,
]
VIEWPORT = {"width": 1920, "height": 1080}


class BrowserUnavailable(WebfreezeError, RuntimeError):
    """No Chromium executable could be found, or it would not start (the message says why, in one line)."""


def has_display() -> bool:
    """Whether a headed browser has somewhere to show its window (an X or Wayland display; on
    macOS and Windows there always is one)."""
    if not sys.platform.startswith("linux"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def require_display(advice: str = "run it on a desktop or under xvfb-run") -> None:
    """Raise :class:`BrowserUnavailable` when a headed browser would have no display."""
    if not has_display():
        raise BrowserUnavailable(f"a headed browser needs a display, and neither DISPLAY nor WAYLAND_DISPLAY is set "
                                 f"({advice})")


# A line of Chromium's own log (``[pid:tid:date:ERROR:file.cc:123] message``) and its message;
# D-Bus complaints come on every start in a container and never say why a start failed.
_CHROMIUM_LOG = re.compile(r":(?:ERROR|FATAL):[^\]]*\]\s*(.+)$")
_LOG_NOISE = ("dbus", "bus.cc")
# Playwright's note of how the process ended, for a log with no error line of Chromium's own.
_EXITED = re.compile(r"<process did exit: exitCode=(\w+), signal=(\w+)>")


def launch_failure(exc: Exception, path: str) -> str:
    """One line for a Chromium that did not start: Playwright's own first line, plus the first error
    in Chromium's log (Playwright's message is a box of text and the whole log)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    first = lines[0] if lines else type(exc).__name__
    for line in lines[1:]:
        m = _CHROMIUM_LOG.search(line)
        if m and not any(noise in line for noise in _LOG_NOISE):
            return f"Chromium ({path}) did not start: {first}; its log says: {m.group(1).strip()}"
    for line in lines[1:]:
        m = _EXITED.search(line)
        if m:
            how = f"signal {m.group(2)}" if m.group(2) != "null" else f"exit status {m.group(1)}"
            return f"Chromium ({path}) did not start: {first}; it ended with {how} and logged no error"
    return f"Chromium ({path}) did not start: {first}"


def is_download(error: str | None) -> bool:
    """Whether a navigation's error says the browser took the document for a download (the headless
    shell takes a PDF so)."""
    return error is not None and "Download is starting" in error


def chromium_path(*, shell: bool = False) -> str:
    """The Chromium executable: $WEBFREEZE_CHROMIUM, else (with ``shell``) Debian's
    ``chromium-headless-shell`` when it is installed, else ``chromium`` on PATH.

    The headless shell is the same Chromium build without the browser's own UI: the full browser,
    even headless, opens a window per context with two omnibox WebUI pages (two more renderer
    processes) and preloads other top-chrome WebUI, which doubles what a fresh context costs.
    It is also what Playwright runs for headless Chromium by default."""
    path = os.environ.get("WEBFREEZE_CHROMIUM")
    if not path and shell:
        path = shutil.which("chromium-headless-shell")
    path = path or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        raise BrowserUnavailable("Chromium not found: install Debian's chromium (apt-get install chromium) "
                                 "or set WEBFREEZE_CHROMIUM")
    return path


def browser_build(*, shell: bool = False) -> str | None:
    """Which Chromium the browser backend runs, for run manifests: ``"<executable> <version>"``
    (``None`` when there is none, or it will not say)."""
    import subprocess

    try:
        path = chromium_path(shell=shell)
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (BrowserUnavailable, OSError, subprocess.SubprocessError):
        return None
    line = out.strip().splitlines()[0] if out.strip() else ""
    return f"{os.path.basename(path)} {line}".strip()


def launch_chromium(playwright, *, proxy: str | None = None, headless: bool = True, bypass_internal: bool = True,
                    shell: bool = False):
    """A Playwright Browser on Debian's Chromium; with ``proxy``, every request (loopback included)
    goes through it. ``bypass_internal=False`` sends the browser's own update traffic through the
    proxy too (replay: it then fails there instead of trying the network). ``shell`` (headless
    only) prefers ``chromium-headless-shell`` (see :func:`chromium_path`): the agent environment,
    ``replay check``, ``record crawl`` and a scripted ``record session`` use it; the full browser
    shows a PDF (the crawl's, and ``replay check``'s for a document the full browser captured) and
    runs a ``--headed`` session."""
    from playwright.sync_api import Error as PlaywrightError

    path = chromium_path(shell=shell and headless)
    if not headless:
        require_display()
    kwargs = {"executable_path": path, "headless": headless, "args": list(CHROMIUM_FLAGS)}
    if proxy:
        # Chromium bypasses proxies for loopback unless told otherwise.
        bypass = ["<-loopback>", *(BROWSER_INTERNAL_HOSTS if bypass_internal else [])]
        kwargs["proxy"] = {"server": proxy, "bypass": ";".join(bypass)}
    try:
        browser = playwright.chromium.launch(**kwargs)
    except PlaywrightError as exc:
        raise BrowserUnavailable(launch_failure(exc, path)) from None
    if asyncio.iscoroutine(browser):  # Playwright's async API: the failure comes when it is awaited
        return _launched(browser, path)
    return browser


async def _launched(launching, path: str):
    from playwright.async_api import Error as PlaywrightError

    try:
        return await launching
    except PlaywrightError as exc:
        raise BrowserUnavailable(launch_failure(exc, path)) from None


def new_context(browser, **overrides):
    """A context with the fixed rendering settings (docs/replay-and-environment.md, "Agent
    environment"): 1920x1080, scale 1, en-US, UTC, no service workers."""
    settings = {"viewport": VIEWPORT, "device_scale_factor": 1, "locale": "en-US", "timezone_id": "UTC",
                "service_workers": "block", "ignore_https_errors": True}
    settings.update(overrides)
    return browser.new_context(**settings)


QUIET_MS = 150  # the network counts as settled after this long without a request in flight
SETTLE_TIMEOUT_S = 10


class Inflight(set):
    """The requests of a page in flight, and when that set last changed (``time.monotonic()`` as
    Python saw the event: late rather than early, so quiet periods are never overestimated)."""

    def __init__(self):
        super().__init__()
        self.changed = time.monotonic()

    def started(self, request) -> None:
        # only the network counts: Chromium reports a shared worker's blob: script as a request
        # that never finishes (the settle then waited out its whole time bound on every such page)
        if not request.url.startswith(("http:", "https:")):
            return
        self.add(request)
        self.changed = time.monotonic()

    def ended(self, request) -> None:
        self.discard(request)
        self.changed = time.monotonic()

    def responded(self, response) -> None:
        # Server-sent events come for as long as the page is shown (Gradio's heartbeat): the
        # request is no longer waited for once its answer has begun (it changed nothing: events
        # that come at once are waited for as a body is, by the quiet period after)
        if response.request in self and (is_event_stream(response.headers.get("content-type"))
                                         or response.headers.get("x-webfreeze-held")):
            # (and a long poll the replay holds open as the site did: replayer/replay.py _held)
            self.discard(response.request)

    def handlers(self) -> list:
        """(Playwright event, handler) pairs that keep this set current, for ``on`` and ``remove_listener``."""
        return [("request", self.started), ("response", self.responded), ("requestfinished", self.ended),
                ("requestfailed", self.ended)]


def track_inflight(page) -> Inflight:
    """The set of the page's requests in flight, kept current by Playwright's request events."""
    inflight = Inflight()
    for event, handler in inflight.handlers():
        page.on(event, handler)
    return inflight


def track_websocket_handshakes(page, inflight: Inflight):
    """Count each WebSocket handshake of ``page`` (Playwright's sync API) in ``inflight``, from the
    socket's creation until the server's answer to it (or its close, or an error): the messages a
    server sends with its answer then come inside the quiet period that follows, as a request's
    body does, however long the handshake took within the settle's time bound (through a
    recording proxy on a loaded machine, longer than the quiet period; a server that never
    answers holds the capture for the whole bound). Playwright reports neither a WebSocket as a request nor the end
    of its handshake; Chromium's DevTools events do. Returns a function that stops the tracking
    (a handshake still open then is no longer waited for)."""
    from playwright.sync_api import Error as PlaywrightError

    cdp = None
    try:
        cdp = page.context.new_cdp_session(page)
        cdp.send("Network.enable")
    except PlaywrightError:
        if cdp is not None:  # (a session made but not enabled: not left attached)
            try:
                cdp.detach()
            except PlaywrightError:
                pass
        return lambda: None
    keys: set = set()

    def opened(event) -> None:
        try:
            key = ("websocket", event["requestId"])
            keys.add(key)
            inflight.add(key)
            inflight.changed = time.monotonic()
        except Exception:
            pass  # (never raise from an event handler: the settle's time bound covers a miss)

    def answered(event) -> None:
        try:
            key = ("websocket", event["requestId"])
            if key in keys:
                keys.discard(key)
                inflight.ended(key)
        except Exception:
            pass

    cdp.on("Network.webSocketCreated", opened)
    for name in ("Network.webSocketHandshakeResponseReceived", "Network.webSocketClosed",
                 "Network.webSocketFrameError"):
        cdp.on(name, answered)

    def stop() -> None:
        try:
            cdp.detach()
        except PlaywrightError:
            pass  # the page is gone, and the session with it
        for key in list(keys):
            inflight.discard(key)
        keys.clear()

    return stop


NO_COMMIT_STATUSES = (204, 205)
# Safety nets of wall-clock time, far above what a loaded machine takes (a navigation to another
# host starts a renderer process: seconds beside a dozen busy processes); the cases that end
# without a commit or a request are recognised as they happen (204, 205, an attachment, a
# download; a same-document navigation is never announced), so these are reached only by a
# navigation that went wrong.
COMMIT_WAIT_S = 10.0  # a finished navigation request that has not committed by then never will
EXPECT_WAIT_S = 5.0  # a navigation the page announced whose request has not shown up by then never will
EXPECTED = object()  # PageActivity.pending before the navigation's request is seen


def _guarded(handler):
    """An event handler that never raises: Playwright would raise its exception from the next,
    unrelated call. The state it would have updated is left as it was (the settle's timeouts
    bound what that costs)."""

    @functools.wraps(handler)
    def run(self, arg) -> None:
        try:
            handler(self, arg)
        except Exception:
            pass
    return run


class PageActivity(Inflight):
    """What :class:`Inflight` tracks, plus the main-frame navigations of a page of Playwright's
    async API (the waits are coroutines).

    Input sent with ``page.mouse`` does not wait for the navigation it may start, as Playwright's
    ``click`` does, so this counts as busy while a navigation is pending: from its request to the
    main frame's commit (``framenavigated``), a failed request, or a response that never commits a
    document (204, 205, an attachment). ``loaded`` is False from a commit to the next ``load``
    event (or until a caller saw ``wait_for_load_state`` return)."""

    def __init__(self, page):
        super().__init__()
        self.page = page
        self.pending = None  # the request of the pending navigation
        self.give_up_at: float | None = None  # when a pending navigation stops counting
        self.loaded = True
        self.requests = 0  # main-frame navigation requests seen so far
        self.commits = 0  # main-frame commits (framenavigated) seen so far
        page.on("request", self._request)
        page.on("response", self._response)
        page.on("requestfinished", self._finished)
        page.on("requestfailed", self._failed)
        page.on("framenavigated", self._committed)
        page.on("load", self._load)
        page.on("download", self._download)

    def __bool__(self) -> bool:
        return len(self) > 0 or self.pending is not None

    @_guarded
    def _request(self, request) -> None:
        self.started(request)
        if request.is_navigation_request() and request.frame == self.page.main_frame:
            self.pending, self.give_up_at = request, None
            self.requests += 1

    def mark(self) -> tuple[int, int]:
        """What has happened so far, for :meth:`expect_navigation`."""
        return self.requests, self.commits

    def expect_navigation(self, mark: tuple[int, int]) -> None:
        """The page said a navigation has started: unless its request or a commit has been seen
        since ``mark``, pending until the request shows up and commits (or, if no request comes,
        for at most EXPECT_WAIT_S)."""
        if self.pending is None and self.mark() == mark:
            self.pending, self.give_up_at = EXPECTED, time.monotonic() + EXPECT_WAIT_S

    @_guarded
    def _response(self, response) -> None:
        if response.request.resource_type == "fetch":
            # A fetch is the network's until its answer comes; its body is the page's to read (the
            # replay runtime holds the pump for a body read). Chromium never finishes a fetch
            # answered with Cache-Control: no-store (the replay's miss answer, many APIs) whose
            # body the page leaves unread (TiddlyWiki's saves): it held the settle to its bound.
            self.ended(response.request)
        if response.request is self.pending and (
                response.status in NO_COMMIT_STATUSES
                or "attachment" in response.headers.get("content-disposition", "").lower()):
            self.pending = None

    @_guarded
    def _download(self, _download) -> None:
        self.pending = None  # a navigation that became a download commits no document

    @_guarded
    def _finished(self, request) -> None:
        self.ended(request)
        if request is self.pending:
            self.give_up_at = time.monotonic() + COMMIT_WAIT_S

    @_guarded
    def _failed(self, request) -> None:
        self.ended(request)
        if request is self.pending:
            self.pending = None

    @_guarded
    def _committed(self, frame) -> None:
        if frame == self.page.main_frame:
            self.pending = None
            self.loaded = False
            self.commits += 1
            self.changed = time.monotonic()

    @_guarded
    def _load(self, _page) -> None:
        self.loaded = True
        self.changed = time.monotonic()

    async def wait_commit(self, timeout_s: float) -> None:
        """Return once no navigation is pending (or after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while self.pending is not None:
            now = time.monotonic()
            if now >= deadline or (self.give_up_at is not None and now >= self.give_up_at):
                self.pending = None
                return
            await asyncio.sleep(0.002)  # events are handled while the loop waits

    async def wait_quiet(self, quiet_ms: float, timeout_s: float) -> None:
        """Wait until nothing has been in flight for ``quiet_ms``, counted from the call (never
        earlier: a request the last action started may not have been reported yet) or from the
        last event after it, whichever is later; sleeps exactly the time still missing."""
        start = time.monotonic()
        deadline = start + timeout_s
        busy = start
        while True:
            now = time.monotonic()
            if now >= deadline:
                return
            if self:
                busy = now
                wait = 0.005
            else:
                wait = quiet_ms / 1000 - (now - max(busy, self.changed))
                if wait <= 0:
                    return
            await asyncio.sleep(min(wait, deadline - now))


# Chromium drops the mouse and keyboard input that reaches a page before its first paint, while
# the DevTools call that sent it succeeds all the same (measured: a link clicked right after its
# page committed did nothing in 54 of 80 tries, in none once the page had painted). On a loaded
# machine a page can settle (loaded, network quiet) before it has painted, so an agent's action
# waits for the page's `first-paint` entry (a first paint of boxes alone is enough: clicks on a page
# of coloured boxes, which never gets a first *contentful* paint, landed 60 of 60 right after it).
# A page that paints nothing but the default background gets no such entry: after
# FIRST_PAINT_FRAMES animation frames without one (frames slow down with the machine, so this bound
# stretches with the load), or at most limitMs, the wait ends anyway.
FIRST_PAINT_JS = """async ([limitMs, frames]) => {
  const T = window.__wfNative || window;  // the browser's own timers, not the pumped ones
  const painted = () => performance.getEntriesByType('paint').length > 0;
  if (painted()) return 'painted';
  const why = await new Promise((done) => {
    let left = frames, over = false;
    const observer = new PerformanceObserver(() => finish('painted'));
    const timer = T.setTimeout(() => finish('time'), limitMs);
    function finish(reason) {
      if (over) return;
      over = true;
      observer.disconnect();
      T.clearTimeout(timer);
      done(reason);
    }
    observer.observe({type: 'paint', buffered: true});
    const frame = () => { if (!over) { if (--left <= 0) finish('frames'); else T.requestAnimationFrame(frame); } };
    T.requestAnimationFrame(frame);
  });
  return painted() ? 'painted' : why;
}"""
FIRST_PAINT_LIMIT_MS = 10_000  # (a safety net: the frames bound ends the wait on a page that paints nothing)
FIRST_PAINT_FRAMES = 10


async def wait_painted(page, limit_ms: int = FIRST_PAINT_LIMIT_MS) -> bool:
    """Wait (Playwright's async API) until ``page`` has painted its first frame, for at most
    FIRST_PAINT_FRAMES animation frames or ``limit_ms``; whether it has. A document that goes
    away meanwhile counts as not painted; a page whose timers and frames never run (it replaced
    them) is given up a second after ``limit_ms``."""
    from playwright.async_api import Error as PlaywrightError

    try:
        why = await asyncio.wait_for(page.evaluate(FIRST_PAINT_JS, [limit_ms, FIRST_PAINT_FRAMES]),
                                     limit_ms / 1000 + 1)
    except (PlaywrightError, asyncio.TimeoutError):
        return False
    return why == "painted"


# The page's timers under replay with ``timers=True`` (replayer/determinism.py) run only when pumped:
# in virtual due order, up to TIMER_HORIZON_MS of virtual time after a settle began (plus what a
# wait action asks for) and at most TIMER_CAP callbacks per settle, never while a load the page's
# scripts started is pending. Both bounds are counts, not wall-clock time, so a page that animates
# or polls forever stops at the same point on every run.
PUMP_JS = "([token, horizon, cap]) => window.__wfPump ? window.__wfPump(token, horizon, cap) : 0"
TIMER_HORIZON_MS = 1000
TIMER_CAP = 1000


def page_runtime_digest() -> str:
    """What a replayed page's scripts are made to see, as one digest (run manifests'
    ``versions.page_runtime``, browser runs): the runtime's text (replayer/determinism.py; its
    frames' part too), the stall bounds it is configured with, how a page's seed is derived, and
    the pump's bounds. Two runs whose digests differ may part on a page whose timers or randomness
    matter."""
    import hashlib
    import json

    from webfreeze.replayer import determinism

    parts = {"runtime": hashlib.sha256(determinism.RUNTIME_JS.encode("ascii")).hexdigest(),
             "frame_runtime": hashlib.sha256(determinism.FRAME_RUNTIME_JS.encode("ascii")).hexdigest(),
             "stall_ms": determinism.STALL_MS, "network_stall_ms": determinism.NETWORK_STALL_MS,
             "seed": determinism.page_seed(0, "http://seed.invalid/"),  # (the derivation, by one value)
             "timer_horizon_ms": TIMER_HORIZON_MS, "timer_cap": TIMER_CAP}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("ascii")).hexdigest()[:16]


def has_document(frame) -> bool:
    """Whether ``frame`` (Playwright's frame, either API) holds a document to run code in: not
    detached, and some document committed there. A lazy frame out of view (``loading=lazy``) never
    starts loading, its URL stays empty, and Playwright's ``evaluate`` there waits for ever for a
    context that never comes."""
    return not frame.is_detached() and frame.url != ""


async def pump_timers(page, token: int, *, extra_ms: int = 0) -> int:
    """Run the due timers of every frame of ``page`` (Playwright's async API), main frame first;
    how many callbacks ran. ``token`` names the settle: a new token starts a new virtual horizon
    (TIMER_HORIZON_MS + ``extra_ms`` past the frame's virtual now). A document that went away
    meanwhile (its timer navigated) counts as one callback, so the caller settles again."""
    from playwright.async_api import Error as PlaywrightError

    ran = 0
    for frame in page.frames:
        if not has_document(frame):
            continue
        try:
            ran += int(await frame.evaluate(PUMP_JS, [token, TIMER_HORIZON_MS + extra_ms, TIMER_CAP]) or 0)
        except PlaywrightError:
            ran += frame == page.main_frame
    return ran


# The loads (and worker turns) the page's runtime stopped waiting for since the last call, read and
# set back to 0 (replayer/determinism.py: ``__wfStalled``, its workers' included).
STALLED_JS = "() => { const n = window.__wfStalled || 0; if (n) window.__wfStalled = 0; return n; }"


async def stalled_loads(page) -> int:
    """How many loads the runtime of ``page``'s frames stopped waiting for (Playwright's async API)
    since the last call; a frame that went away counts none."""
    from playwright.async_api import Error as PlaywrightError

    stalled = 0
    for frame in page.frames:
        if not has_document(frame):
            continue
        try:
            stalled += int(await frame.evaluate(STALLED_JS) or 0)
        except PlaywrightError:
            pass
    return stalled


def wait_network_quiet(page, inflight: set, *, quiet_ms: float = QUIET_MS,
                       timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Wait until no request has been in flight for ``quiet_ms`` (XHRs after load included).

    The page is polled every 10 or 25 ms and the quiet period starts at the first poll that
    finds nothing in flight (the polling overhead adds slack, which the crawl and ``replay
    check`` screenshots keep). The agent environment uses the exact :meth:`PageActivity.wait_quiet`."""
    deadline = time.monotonic() + timeout_s
    poll_ms = 10 if quiet_ms < 100 else 25
    quiet_since = None
    while time.monotonic() < deadline:
        if inflight:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif (time.monotonic() - quiet_since) * 1000 >= quiet_ms:
            return
        page.wait_for_timeout(poll_ms)



# A page's scripts can be busy with no request in flight: a framework rendering in many short tasks
# (React's scheduler) before the chart it draws asks for its code (Dash's lazy Plotly bundle). On a
# loaded machine such a gap outlasts QUIET_MS, and a network-quiet page was taken for settled with
# its chart not drawn. Waited for after the network is quiet: the page's main thread idle (the
# browser's own requestIdleCallback, which runs only once the task queue is empty), bounded. It is
# asked for from an animation frame: with no frame scheduled, Chromium (with RENDER_FLAGS) gave a
# settled page no idle period, and the callback waited for its timeout (2 s a page, measured).
IDLE_JS = """async (limitMs) => {
  const T = window.__wfNative || window;
  const ric = window.requestIdleCallback;
  const native = typeof ric === 'function' && /\\[native code\\]/.test(Function.prototype.toString.call(ric));
  await new Promise((done) => {
    T.setTimeout(done, limitMs);
    const idle = () => (native ? ric.call(window, () => done(), {timeout: limitMs}) : T.setTimeout(done, 0));
    if (T.requestAnimationFrame) T.requestAnimationFrame(idle); else idle();
  });
}"""
IDLE_LIMIT_MS = 2000


# The WebSocket deliveries a frame's replay runtime still waits for (replayer/determinism.py,
# SOCKET_MARK: from a socket's creation, and each message the page sends, until the replay's batch).
SOCKETS_JS = "() => window.__wfSockets || 0"


def pending_sockets(page) -> int:
    """How many WebSocket deliveries the frames of ``page`` (Playwright's sync API) wait for."""
    from playwright.sync_api import Error as PlaywrightError

    n = 0
    for frame in page.frames:
        if not has_document(frame):
            continue
        try:
            n += int(frame.evaluate(SOCKETS_JS) or 0)
        except PlaywrightError:
            pass  # a frame that went away waits for nothing
    return n


# The socket markers a frame's replay runtime has taken off (replayer/determinism.py ``__wfMarks``).
MARKS_JS = "() => window.__wfMarks || 0"
# How long a settle waits for the pushes it let through to be delivered (their marks taken off)
# before it goes on and says it stopped short; a local delivery takes milliseconds.
RELEASE_WAIT_S = 2.0


def _marks(page) -> int:
    from playwright.sync_api import Error as PlaywrightError

    n = 0
    for frame in (f for p in page.context.pages for f in p.frames):
        if has_document(frame):
            try:
                n += int(frame.evaluate(MARKS_JS) or 0)
            except PlaywrightError:
                pass  # a frame that went away
    return n


def release_sockets(page, sockets, deadline: float) -> None:
    """Send the pushes that waited for an action the replay has now answered
    (simulator/replay_route.py ``SocketRoutes.release``) and wait until the page's runtime has
    taken off each batch's marker (before ``deadline``, a ``time.monotonic()``)."""
    before = _marks(page)
    sent = sockets.release()
    until = min(deadline, time.monotonic() + RELEASE_WAIT_S)
    while sent and time.monotonic() < until:
        now = _marks(page)
        if now >= before + sent or now < before:  # (delivered; or a document went, its count with it)
            return
        page.wait_for_timeout(2)


def wait_settled(page, inflight: Inflight, *, quiet_ms: float = QUIET_MS, timeout_s: float = SETTLE_TIMEOUT_S,
                 sockets=None) -> None:
    """Wait until the network has been quiet for ``quiet_ms`` (:func:`wait_network_quiet`) and the
    page's main thread has been idle since (:data:`IDLE_JS`); again while the idle wait saw a
    request start, or while a WebSocket delivery of the replay is pending (:func:`pending_sockets`),
    or when ``sockets`` (the replay's SocketRoutes) has pushes the page's actions now let through
    (:func:`release_sockets`). At most ``timeout_s`` in all."""
    from playwright.sync_api import Error as PlaywrightError

    deadline = time.monotonic() + timeout_s
    while True:
        wait_network_quiet(page, inflight, quiet_ms=quiet_ms, timeout_s=max(0.0, deadline - time.monotonic()))
        changed = inflight.changed
        try:
            page.evaluate(IDLE_JS, IDLE_LIMIT_MS)
        except PlaywrightError:
            return  # the document went away (a late navigation): what is there now is what counts
        if time.monotonic() >= deadline:
            return
        if pending_sockets(page):  # (its handlers may start requests: the network is waited for again)
            page.wait_for_timeout(5)
            continue
        if not inflight and inflight.changed == changed:
            if sockets is not None and sockets.releasable():
                release_sockets(page, sockets, deadline)
                continue
            return

# A page's scripts may still change it after the network has gone quiet, on a timer: React's
# Suspense shows a resolved boundary up to 300 ms later (Verdaccio 6's package pages: the crawl's
# DOM snapshot had the header and footer alone), a lazy panel asks for its data after a delay. So
# every page of a context given track_live_timers (a crawl's, its check's, replay check's) counts its pending one-shot
# timers (an init script: setTimeout and clearTimeout wrapped), and before a page is captured or
# checked (wait_timers_due) the timers due within TIMER_HORIZON_MS of its network quiet are waited for, as the agent
# environment's settle runs them on virtual time (docs/replay-and-environment.md), then the
# network again. Intervals, and timers due later, are not waited for: a page that polls forever
# is still captured.
LIVE_TIMERS_JS = """(() => {
  if (window.__wfLiveTimers) return;
  // (the browser's own clock: a replayed page's performance.now is the determinism runtime's)
  const native = window.setTimeout, clear = window.clearTimeout, due = new Map();
  const now = performance.now.bind(performance);
  Object.defineProperty(window, '__wfLiveTimers', {value: {native, due, now}});
  window.setTimeout = function (fn, delay, ...args) {
    if (typeof fn !== 'function') return native.call(window, fn, delay, ...args);
    const id = native.call(window, function () { due.delete(id); return fn.apply(this, args); }, delay);
    due.set(id, now() + Math.max(0, Number(delay) || 0));
    return id;
  };
  window.clearTimeout = function (id) { due.delete(id); return clear.call(window, id); };
})();"""
# Runs the page's timers due before the horizon (fixed at the first call on a document: a timer
# that sets another keeps within it); returns how many waits it took (0: nothing was due).
TIMERS_DUE_JS = """async ([horizonMs, limitMs]) => {
  const t = window.__wfLiveTimers;
  if (!t) return 0;
  const now = t.now;
  if (t.until === undefined) t.until = now() + horizonMs;
  const end = now() + limitMs;
  let waits = 0;
  for (;;) {
    let last = -1;
    for (const d of t.due.values()) if (d <= t.until && d > last) last = d;
    if (last < 0 || now() >= end) return waits;
    await new Promise((done) => t.native.call(window, done, Math.min(last, end) - now() + 1));
    waits++;
  }
}"""
TIMERS_DUE_LIMIT_MS = 5000

def track_live_timers(context) -> None:
    """Make every page of ``context`` count its pending one-shot timers (:data:`LIVE_TIMERS_JS`),
    for :func:`wait_timers_due`."""
    context.add_init_script(LIVE_TIMERS_JS)


def wait_timers_due(page, inflight: Inflight, sockets=None) -> None:
    """After :func:`wait_settled`: wait for the page's one-shot timers due within
    :data:`TIMER_HORIZON_MS` of the first call on its document, then for the network they used, in
    :data:`TIMER_ROUNDS` rounds at most. Nothing to wait for on a page whose context has no
    :func:`track_live_timers`, or whose document went away."""
    from playwright.sync_api import Error as PlaywrightError

    for _ in range(TIMER_ROUNDS):
        try:
            if not page.evaluate(TIMERS_DUE_JS, [TIMER_HORIZON_MS, TIMERS_DUE_LIMIT_MS]):
                return
        except PlaywrightError:
            return  # the document went away: what is there now is what counts
        wait_settled(page, inflight, sockets=sockets)


# Rounds of (timers due, network quiet) at most: a timer's request may answer with more timers
# (within the same horizon); bounded, so a page that keeps doing so is still captured.
TIMER_ROUNDS = 4

# Before a full-page screenshot that must come out the same on every run: web fonts loaded, every
# loaded image decoded, then two animation frames (the second starts after the first was painted).
# Bounded, so a page that never settles still gets its screenshot.
PAINT_SETTLE_JS = """async (limitMs) => {
  const T = window.__wfNative || window;
  const settled = (async () => {
    if (document.fonts && document.fonts.ready) await document.fonts.ready;
    await Promise.all(Array.from(document.images)
      .filter((img) => img.complete && img.naturalWidth > 0)
      .map((img) => img.decode().catch(() => null)));
    await new Promise((done) => T.requestAnimationFrame(() => T.requestAnimationFrame(done)));
  })();
  await Promise.race([settled, new Promise((done) => T.setTimeout(done, limitMs))]);
}"""
PAINT_SETTLE_LIMIT_MS = 2000
STILL_SHOT_TRIES = 3  # screenshots at most, to find two in a row that agree
# A screenshot that does not come in SHOT_TIMEOUT_MS is asked for again, SHOT_ATTEMPTS times in
# all: on the 2-core machine with the test suite's two workers busy, headless Chromium now and then
# produced no frame for a screenshot (`Page.screenshot: Timeout 120000ms exceeded` on one page of a
# `replay check` of 32, a different page each time), while the same page's next screenshot came at once.
SHOT_TIMEOUT_MS = 30_000
SHOT_ATTEMPTS = 3


def _screenshot(page, full_page: bool) -> bytes:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    def take() -> bytes:
        return page.screenshot(full_page=full_page, type="png", animations="disabled", caret="hide",
                               timeout=SHOT_TIMEOUT_MS)

    for _ in range(SHOT_ATTEMPTS - 1):
        try:
            return take()
        except PlaywrightTimeout:
            wake_compositor(page)
            try:
                page.evaluate(PAINT_SETTLE_JS, PAINT_SETTLE_LIMIT_MS)  # bounded by a timer, not a frame
            except PlaywrightError:
                pass
    return take()


def wake_compositor(page) -> None:
    """Make an idle compositor draw a frame (Playwright's sync API): a screencast started and
    stopped. A screenshot waits for a frame, and a headless Chromium whose compositor has gone idle
    (seen under load, a page at rest) produces none until something asks for frames: the
    screenshot that then timed out comes at once after this."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        cdp = page.context.new_cdp_session(page)
    except PlaywrightError:
        return
    try:
        cdp.send("Page.startScreencast", {"format": "jpeg", "quality": 10, "maxWidth": 64, "maxHeight": 64})
        page.wait_for_timeout(250)
        cdp.send("Page.stopScreencast")
    except PlaywrightError:
        pass
    finally:
        try:
            cdp.detach()
        except PlaywrightError:
            pass


# Before an observation: CSS transitions and animations (and the page's Web Animations) that have an
# end are finished, so that what the observation reads (text, which elements CSS hides) and shows
# is their end state, not wherever the wall clock left them; their end events are dispatched at the
# next frame, which is waited for (a few rounds: an end can start another). Endless ones are left to
# the screenshot, which stops them (``animations="disabled"``).
FINISH_ANIMATIONS_JS = """async ([rounds, limitMs]) => {
  const T = window.__wfNative || window;
  let finished = 0;
  for (let i = 0; i < rounds; i++) {
    let now = 0;
    for (const a of document.getAnimations()) {
      const timing = a.effect && a.effect.getComputedTiming ? a.effect.getComputedTiming() : null;
      if (a.playState !== 'finished' && timing && Number.isFinite(timing.endTime)) {
        try { a.finish(); now++; } catch (e) {}
      }
    }
    if (!now) break;
    finished += now;
    await Promise.race([new Promise((done) => T.requestAnimationFrame(() => T.setTimeout(done, 0))),
                        new Promise((done) => T.setTimeout(done, limitMs))]);
  }
  return finished;
}"""
FINISH_ROUNDS = 3
FINISH_LIMIT_MS = 500


ANIMATION_RATE = 1000  # how much faster than the wall clock the page's CSS animations and transitions run


async def fast_animations(context, page) -> None:
    """Run the page's animations and transitions ANIMATION_RATE times faster (CDP's
    ``Animation.setPlaybackRate``; Playwright's async API): one that a step starts has ended, and
    been painted at its end, long before the observation; a layer rasterized mid-transition comes
    out with other glyph edges than one at rest (MkDocs Material's search results: the same DOM,
    four PNGs in twenty resets)."""
    cdp = await context.new_cdp_session(page)  # kept: the rate holds while its session does
    await cdp.send("Animation.enable")
    await cdp.send("Animation.setPlaybackRate", {"playbackRate": ANIMATION_RATE})


async def finish_animations(page) -> int:
    """Finish the page's finite CSS transitions and animations (Playwright's async API; see
    FINISH_ANIMATIONS_JS); how many. A document that goes away meanwhile counts as none."""
    from playwright.async_api import Error as PlaywrightError

    try:
        return int(await page.evaluate(FINISH_ANIMATIONS_JS, [FINISH_ROUNDS, FINISH_LIMIT_MS]) or 0)
    except PlaywrightError:
        return 0


async def still_screenshot_async(page, *, full_page: bool = False) -> bytes:
    """:func:`still_screenshot` for Playwright's async API (the agent environment's observations):
    the same settle before it, animations stopped, the caret hidden, taken again until two in a
    row agree."""
    from playwright.async_api import Error as PlaywrightError
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    async def take() -> bytes:
        for _ in range(SHOT_ATTEMPTS - 1):
            try:
                return await page.screenshot(full_page=full_page, type="png", animations="disabled", caret="hide",
                                             timeout=SHOT_TIMEOUT_MS)
            except PlaywrightTimeout:
                pass
        return await page.screenshot(full_page=full_page, type="png", animations="disabled", caret="hide",
                                     timeout=SHOT_TIMEOUT_MS)

    try:
        await page.evaluate(PAINT_SETTLE_JS, PAINT_SETTLE_LIMIT_MS)
    except PlaywrightError:
        pass  # the document went away: the screenshot shows what is there now
    shot = await take()
    for _ in range(STILL_SHOT_TRIES - 1):
        again = await take()
        if again == shot:
            break
        shot = again
    return shot


def still_screenshot(page, *, full_page: bool = True) -> bytes:
    """A full-page (or, ``full_page=False``, viewport) PNG of a settled page (fonts, image decoding, a painted frame; CSS animations
    and transitions stopped, the caret hidden), for screenshots compared byte for byte: the
    crawl's and ``replay check``'s."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        page.evaluate(PAINT_SETTLE_JS, PAINT_SETTLE_LIMIT_MS)
    except PlaywrightError:
        pass  # the document went away (a late navigation): the screenshot shows what is there now
    # Taken again until two in a row agree: on a loaded machine a frame can still be repainting
    # (once, one anti-aliased pixel of a button's corner differed by one level between replays).
    shot = _screenshot(page, full_page)
    for _ in range(STILL_SHOT_TRIES - 1):
        again = _screenshot(page, full_page)
        if again == shot:
            break
        shot = again
    return shot
