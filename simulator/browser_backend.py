"""The ``browser`` backend of :class:`~webfreeze.simulator.env.WebEnv`: Debian's Chromium through the
replay server (proxy mode, in this process), one browser per environment and a fresh context per
episode, 1920x1080, scale 1, en-US, UTC, service workers blocked, the page clock frozen at the
capture time by the replay runtime. Playwright's async API runs on a loop thread of its own, which
the process's browser backends share with its one Playwright driver (``_Driver``).

It meets :class:`webfreeze.simulator.backends.Backend`.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webfreeze.replayer.determinism import FRAME_RUNTIME_JS
from webfreeze.replayer.replay import HELD_HEADER, HELD_WHY, OPEN_STREAM_HEADER, REPEAT_HEADER, REPEAT_WHY

from . import bgym_obs
from .actions import MAX_WAIT_MS, Action
from .axtree import BID_ATTR, MARK_JS, OPEN_ROOTS_JS, build_tree, frame_path
from .axtree import marked as read_marked
from .browser import (
    MARKS_JS,
    RELEASE_WAIT_S,
    PageActivity,
    fast_animations,
    finish_animations,
    has_document,
    pump_timers,
    stalled_loads,
    still_screenshot_async,
    wait_painted,
)
from .marks import draw_marks
from .provenance import OPEN_STREAM_WHY, answer_record, kind_of_resource, refused_after_answer, settle_record

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page, Playwright

    from .env import WebEnv

ACTION_TIMEOUT_MS = 5000  # an action's own waits (an element to become actionable): the agent's error if not
# A page's load (goto, back, forward, the settle's wait for the load event): what the page is
# waiting for decides, so this is only a safety net for a page that never loads, far above what a
# loaded machine takes (Dash's page, 9 scripts, loads in 0.5 to 1.6 s beside a dozen busy processes;
# the 5 s of the actions' timeout cut it off in the suite: a "Loading..." first observation).
NAVIGATION_TIMEOUT_MS = 120_000
WORKER_SOCKET_WAIT_S = 1.0  # a worker's socket waits this long at most for the page's own to be answered
SETTLE_MS = 30  # replay is local: 30 ms without a request in flight means settled
# A settle ends when the page has nothing left to do (network quiet, painted, no timer due): a count
# bounds it, SETTLE_ROUNDS rounds (a page that reloads itself on a timer forever), and the wall clock
# only as a safety net, SETTLE_TIMEOUT_S, far above the slowest settle of a loaded machine (Dash's
# first one: 9 s beside a dozen busy processes). Either limit hit is recorded in the step's
# provenance (``settle``), so a test can tell a page that was not ready from an agent that erred.
SETTLE_ROUNDS = 50
SETTLE_TIMEOUT_S = 300
SNAPSHOT_TRIES = 3
# A click that opens another window (a link aimed at one, a middle or Ctrl/Meta/Shift click on a
# link): how long its page may take to open. It ends as soon as the page opens, so only a window
# that never opens (a blocked one) waits it all; generous, as a loaded machine may be slow.
POPUP_WAIT_MS = 5000
NEW_WINDOW_MODIFIERS = ("Control", "Meta", "Shift", "ControlOrMeta")

# Where a click on a bid lands: the element scrolled into view if it is not wholly inside the
# viewport, then the centre of its box, and whether a pointer there would hit the element (or one
# of its descendants). ``null`` when there is no such element or it is disabled.
CLICK_POINT_JS = r"""
(bid) => {
  // (an element in an open shadow root too: the observation gives those bids)
  const q = '[data-wf-bid="' + bid + '"]';
  let el = document.querySelector(q);
  if (!el) {
__OPEN_ROOTS__
    el = openRoots().map((r) => r.querySelector(q)).find((found) => found) || null;
  }
  if (!el || el.matches(':disabled') || el.getAttribute('aria-disabled') === 'true') return null;
  let r = el.getBoundingClientRect();
  if (r.width <= 0 || r.height <= 0) return null;
  if (r.top < 0 || r.left < 0 || r.bottom > window.innerHeight || r.right > window.innerWidth) {
    el.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});
    r = el.getBoundingClientRect();
  }
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  // what a pointer there hits, inside shadow roots too; the element or a node drawn inside it
  let hit = document.elementFromPoint(x, y);
  for (let inner; hit && hit.shadowRoot && (inner = hit.shadowRoot.elementFromPoint(x, y)) && inner !== hit;) hit = inner;
  // (up the flat tree by the DOM's own getters: a page's <form name="host"> is document.host)
  const getter = (proto, key) => Object.getOwnPropertyDescriptor(proto, key).get;
  const slotOf = getter(Element.prototype, 'assignedSlot'), parentOf = getter(Node.prototype, 'parentNode');
  const hostOf = getter(ShadowRoot.prototype, 'host');
  let under = !!hit && (hit === el || el.contains(hit));
  for (let n = hit; n && n !== document && !under;) {
    n = (n instanceof Element && slotOf.call(n)) || (n instanceof ShadowRoot ? hostOf.call(n) : parentOf.call(n));
    under = n === el;
  }
  if (!under) return {x, y, hit: false};
  // A link or a form aimed at another window opens a page: the caller waits for it.
  const link = el.closest('a[href], area[href]');
  const submits = (el.localName === 'button' || el.localName === 'input') && (el.type === 'submit' || el.type === 'image');
  const form = link || !submits ? null : el.form;
  const named = (link ? link.target : form ? (el.formTarget || form.target) : '') || '';
  const aim = named.toLowerCase();
  // (a name an existing frame has is that frame: no new page, nothing to wait for)
  const framed = () => { try { return !!(window.frames[named] || window.top.frames[named]); } catch (e) { return false; } };
  const popup = aim !== '' && !['_self', '_top', '_parent'].includes(aim) && (aim === '_blank' || !framed());
  // Note whether the click starts a navigation of this page: the Navigation API's event (not for
  // a download), or an unprevented submission of a form that targets this page (its navigation
  // is queued for a later task). Read right after the click and again after the settle.
  window.__wfNavigating = false;
  const started = () => { window.__wfNavigating = true; };
  if (window.navigation) {
    // (a same-document navigation, a fragment or pushState, loads nothing: not one to wait for)
    window.navigation.addEventListener('navigate', (e) => {
      if (!e.downloadRequest && !(e.destination && e.destination.sameDocument)) started();
    }, {once: true});
  }
  window.addEventListener('submit', (e) => {
    const form = e.target, by = e.submitter;
    const method = ((by && by.getAttribute('formmethod')) || form.getAttribute('method') || '').toLowerCase();
    const target = (by && by.getAttribute('formtarget')) || form.getAttribute('target') || '';
    if (!e.defaultPrevented && method !== 'dialog' && (target === '' || target === '_self')) started();
  }, {once: true});
  return {x, y, hit: true, popup};
}
""".replace("__OPEN_ROOTS__", OPEN_ROOTS_JS)
# Right after the click: has a navigation been announced (or is this already another document)?
NAVIGATING_JS = "() => { const n = window.__wfNavigating; window.__wfNavigating = 'seen'; return n !== false; }"
# After the settle: was one announced since (a navigation a script queued, say)?
LATE_NAVIGATION_JS = ("() => { const n = window.__wfNavigating === true; if (n) window.__wfNavigating = 'seen';"
                      " return n; }")



# What Playwright sets on a future of its own when its driver (the Node process) goes away
# unasked: killed, or out of memory. A backend that used that driver gets its own error then.
DRIVER_LOST = "Connection closed while reading from the driver"


def _quiet_driver_loss(loop, context: dict) -> None:
    """The loop's exception handler: asyncio's default, except for a lost driver's note that
    nobody read (``Future exception was never retrieved ... Connection closed while reading from
    the driver``, printed at exit after a driver was killed, though every call on it had already
    failed in its own words)."""
    exc = context.get("exception")
    if isinstance(exc, Exception) and str(exc) == DRIVER_LOST and "never retrieved" in str(context.get("message")):
        return
    loop.default_exception_handler(context)


class _Loop:
    """An asyncio loop on a thread of its own (the process's browser backends share one: ``_Driver``).
    The browser backend drives Playwright's async API there, so that work for the next episode (a
    fresh context and page: Chromium starting a renderer, ~80 ms in the headless shell) goes on
    between the environment's calls instead of inside ``reset``."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(_quiet_driver_loss)
        self.thread = threading.Thread(target=self.loop.run_forever, name="webfreeze-env-browser", daemon=True)
        self.thread.start()

    def run(self, coro):
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            # Interrupted (Ctrl-C): stop the call on the loop too, so that the next one does not
            # run beside it on the same page.
            if not future.done():
                future.cancel()
                concurrent.futures.wait([future], timeout=5)
            raise

    @property
    def stopped(self) -> bool:
        return self.loop.is_closed() or not self.thread.is_alive()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        if not self.thread.is_alive():
            self.loop.close()


class _Driver:
    """A Playwright driver (a Node process) and the loop thread it runs on, shared by the process's
    browser backends: each backend still launches a browser of its own (its replay server is that
    browser's proxy), but starting the driver costs about half a CPU-second, which an environment
    made per episode (BrowserGym's ``gym.make``, AgentLab) or per test paid every time.

    Started on first use and stopped when the process exits normally (after the environments still
    open there are closed). A browser that does not start on a driver that served before (its
    process killed, say) is tried once more on a new driver, which later backends then use; the
    old one is left to the backends that hold it, never stopped under them. A forked child starts
    its own."""

    _lock = threading.Lock()
    _current: _Driver | None = None
    _made: list[_Driver] = []  # every driver this process started: all stopped at exit

    def __init__(self):
        from playwright.async_api import async_playwright

        self.loop = _Loop()
        try:
            self.playwright: Playwright = self.loop.run(async_playwright().start())
        except BaseException:
            self.loop.stop()
            raise

    @classmethod
    def get(cls, *, fresh: bool = False) -> tuple[_Driver, bool]:
        """The process's driver and whether it served an earlier backend; ``fresh``: a new one."""
        with cls._lock:
            if cls._current is not None and not fresh and not cls._current.loop.stopped:
                return cls._current, True
            driver = cls()
            cls._current = driver
            cls._made.append(driver)
            return driver, False

    @classmethod
    def stop_all(cls) -> None:
        with cls._lock:
            made, cls._made, cls._current = cls._made, [], None
        for driver in made:
            driver.stop()

    @classmethod
    def _forget_after_fork(cls) -> None:
        cls._lock = threading.Lock()  # (a thread of the parent's may have held it)
        cls._current, cls._made = None, []

    def stop(self) -> None:
        if self.loop.stopped:
            return
        try:
            self.loop.run(asyncio.wait_for(self.playwright.stop(), 30))
        except Exception:  # noqa: BLE001 (a driver already gone: nothing left to stop)
            pass
        finally:
            self.loop.stop()


# At exit: registered when this module is imported, so that a handler registered later (a worker's
# environment closing itself, runs/worker.py) runs first and finds the driver still there.
atexit.register(_Driver.stop_all)
if hasattr(os, "register_at_fork"):  # (POSIX)
    os.register_at_fork(after_in_child=_Driver._forget_after_fork)


# Why Playwright's last try of an action failed, as its call log says (the element another one
# covers, say): added to a timeout's line, which says only that the time ran out.
_WHY_NOT = re.compile(r"^\s*- (.+ intercepts pointer events|element is (?:not \w+|outside of the viewport))\s*$")
WHY_NOT_CHARS = 200


def action_error(exc: BaseException) -> str:
    """A failed action's error in one line: Playwright's first line, and when that is a timeout,
    the reason its call log gives last (``<div class="veil">...</div> intercepts pointer
    events``, ``element is not visible``), as the agent would need it."""
    lines = str(exc).splitlines() or [type(exc).__name__]
    first = lines[0]
    if "Timeout" in first and "Call log:" in lines:
        why = next((m.group(1) for line in reversed(lines) if (m := _WHY_NOT.match(line))), None)
        if why:
            why = why if len(why) <= WHY_NOT_CHARS else why[:WHY_NOT_CHARS - 3] + "..."
            first = f"{first.rstrip('.')}: {why}"
    return first


def _quietly(task: asyncio.Future) -> None:
    """Retrieve a background task's exception (it has nobody to report to)."""
    if not task.cancelled():
        task.exception()


class BrowserBackend:
    """Chromium through the in-process replay server, driven from the process's loop thread (``_Driver``).

    Each episode gets a fresh context and page made while the previous episode ran (a *spare*);
    the first ``reset`` makes its own."""

    def __init__(self, env: WebEnv):
        from .browser import launch_chromium
        from .replay_route import SocketRoutes

        self.env = env
        self.server = env.server.start()
        # WebSockets: served in the browser from the archive's recorded conversations (never past
        # the replay); the runtime counts their deliveries, which the timer pump waits for
        self.server.replay.sockets = True
        self._sockets = SocketRoutes(self.server.archive_path, self.server.replay.rules,
                                     on_open=self._socket_opened, on_miss=self._socket_missed,
                                     answered=lambda: self.server.replay.actions_answered)
        # a worker's WebSocket (Playwright routes none) reaches the replay server, which answers it
        # by the same rule (and marks its batches for the worker's runtime): told here alike
        self.server.on_socket = self._server_socket
        self.server.socket_picker = self._worker_socket_pick  # (one count of the sockets to a URL: page and workers)
        def launch(driver: _Driver):
            return driver.loop.run(launch_chromium(driver.playwright, proxy=self.server.url, bypass_internal=False,
                                                   shell=True))

        try:
            driver, reused = _Driver.get()
            try:
                self.browser = launch(driver)
            except Exception:
                if not reused:
                    raise
                # (the driver's process may have gone since it last served, killed say: a new one,
                # once; the old one is left as it is to any backend still on it)
                driver, _ = _Driver.get(fresh=True)
                self.browser = launch(driver)
        except BaseException:
            self._sockets.close()
            self.server.stop()
            raise
        self._loop: _Loop | None = driver.loop
        self.context: BrowserContext | None = None
        self.page: Page | None = None
        self._settles = 0  # settles so far: each one's token for the timer pump
        self.pump = True  # False only to measure the rule against the browser's own timers (benchmarks)
        self._spare: asyncio.Future | None = None
        # What the last observation saw: the loop thread goes on handling the page's events
        # between calls, so the live page.url could change under the caller.
        self._url = ""
        self._open_pages: list[str] = []
        self._answers: list[dict] = []  # provenance records of the responses seen since the last take
        self._answers_lock = threading.Lock()  # (the loop thread appends, the caller's thread takes)
        self.bgym_raw: dict | None = None  # BrowserGym's snapshots of the last observation (observation="browsergym")
        self._watched: dict = {}  # page -> its PageActivity: every page of the episode, once
        self._dialogs: list[dict] = []  # the JavaScript dialogs answered since take_dialogs
        self._unsettled: list[str] = []  # why settles since the last take_answers stopped short
        self._stalled = 0  # loads (and worker turns) the pages' runtime stopped waiting for since then

    @property
    def url(self) -> str:
        return self._url

    def take_dialogs(self) -> list[dict]:
        """The JavaScript dialogs the episode's pages opened since the last call, as answered
        (:meth:`_on_dialog`)."""
        with self._answers_lock:
            got, self._dialogs = self._dialogs, []
        return got

    async def _on_dialog(self, dialog) -> None:
        """Answer a JavaScript dialog as a person going on with the task would: ``alert`` and
        ``beforeunload`` dismissed by their one button (OK; Leave), ``confirm`` accepted (OK),
        ``prompt`` accepted with the text it offers. Without it Playwright dismissed every one, so a
        ``confirm`` returned false, and a delete or a bulk action behind one (Flask-Admin asks for
        every one) never reached its server; the text backend, which runs no scripts, went on as
        if accepted. Recorded on the step (``dialogs``)."""
        from playwright.async_api import Error as PlaywrightError

        kind = dialog.type
        answer: bool | str = dialog.default_value if kind == "prompt" else True
        with self._answers_lock:
            self._dialogs.append({"type": kind, "message": dialog.message, "answer": answer})
        try:
            if kind == "prompt":
                await dialog.accept(dialog.default_value)
            else:
                await dialog.accept()
        except PlaywrightError:
            pass  # the page (or its frame) went away meanwhile: nothing is waiting for the answer

    def take_answers(self) -> list[dict]:
        """The responses (and failed requests) the pages reported since the last call, and a
        :func:`settle_record` when a settle since then stopped short or loads stalled."""
        from webfreeze.replayer.websocket import WEBSOCKET_AHEAD

        for url in self._sockets.ahead(self.server.replay.actions_answered):
            self._socket_opened(url, "fuzzy", WEBSOCKET_AHEAD)
        with self._answers_lock:
            got, self._answers = self._answers, []
        if self._unsettled or self._stalled:
            got.append(settle_record(self._unsettled, self._stalled))
            self._unsettled, self._stalled = [], 0
        return got

    def reset(self, url: str) -> str | None:
        return self._loop.run(self._reset(url))

    def _socket_opened(self, url: str, level: str, why: str | None = None) -> None:
        """A WebSocket served from its recording: one answer (status 101), at its match's level;
        once more, ``canonical`` with ``why``, when a page's message on it matched only with its
        ``socket_volatile`` parts set aside (WEBSOCKET_SET_ASIDE)."""
        with self._answers_lock:
            self._answers.append(answer_record("xhr", "GET", url, level, 101, why=why))

    def _socket_missed(self, url: str, why: str) -> None:
        """A WebSocket with no recording, or whose conversation parted from it: a miss."""
        with self._answers_lock:
            self._answers.append(answer_record("xhr", "GET", url, "miss", 0, why=why))

    def _worker_socket_pick(self, url: str):
        """The recording for a worker's socket (the replay server asks, from its own thread), once
        the page's own sockets made before it have had theirs. The k-th socket to a URL gets the
        k-th recording, counted over the page and its workers together; a page's socket reaches the
        count through Playwright's route (a callback on the loop thread), a worker's through the
        proxy, and on a loaded machine the worker's could come first though the page made its own
        before it started the worker. So the page's sockets still waiting for their route
        (``__wfSocketsOpening``, the runtime's count of those neither open nor closed) are let
        through first, for WORKER_SOCKET_WAIT_S at most."""
        page, driver = getattr(self, "page", None), self._loop

        async def page_sockets_answered():
            from playwright.async_api import Error as PlaywrightError

            while True:
                try:
                    if not await page.evaluate("() => window.__wfSocketsOpening || 0"):
                        return
                except PlaywrightError:
                    return  # the page went away, or is between documents
                await asyncio.sleep(0.005)

        if page is not None and driver is not None and not driver.stopped and threading.current_thread() is not driver.thread:
            waited = asyncio.run_coroutine_threadsafe(asyncio.wait_for(page_sockets_answered(), WORKER_SOCKET_WAIT_S),
                                                      driver.loop)
            try:
                waited.result(WORKER_SOCKET_WAIT_S + 1)
            except (asyncio.TimeoutError, concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                waited.cancel()
        return self._sockets.pick(url)

    def _server_socket(self, url: str, level: str, why: str) -> None:
        """A WebSocket the replay server answered (a worker's): as one served in the browser."""
        if level == "miss":
            self._socket_missed(url, why)
        else:
            self._socket_opened(url, level, why or None)

    async def _fresh(self):
        from .browser import new_context

        # live runs with --http-credentials: the browser answers a site's 401 challenge with them
        credentials = (self.env.config.upstream or {}).get("http_credentials")
        context = await new_context(self.browser, **({"http_credentials": credentials} if credentials else {}))
        try:
            context.on("dialog", self._on_dialog)  # (every page of the episode, popups too)
            await context.add_init_script(FRAME_RUNTIME_JS)  # (frames the replay does not serve take their parent's)
            # (routed before the page is made: a route set on a page already made changes how
            # Chromium draws its own pages, the JSON view's, from what a plain visit shows)
            await context.route_web_socket("**/*", self._sockets.handle)
            page = await context.new_page()
            await fast_animations(context, page)
            return context, page
        except BaseException:
            await context.close()
            raise

    async def _reset(self, url: str) -> str | None:
        old = self.context
        spare, self._spare = self._spare, None
        fresh = None
        if spare is not None:
            try:
                fresh = await spare
            except Exception:
                fresh = None  # made again below; a browser that went away fails there, loudly
        self.context, page = fresh or await self._fresh()
        # The next episode's context and page, made while this one loads its first page (made
        # after it, they would slow the first steps instead).
        self._spare = asyncio.ensure_future(self._fresh())
        self._spare.add_done_callback(_quietly)
        if old is not None:
            await old.close()
        self._watched = {}
        self._sockets.reset(self.server.replay.when)
        self.page = self._watch(page)
        return await self._navigate(self.page.goto(url, wait_until="load"))

    async def _navigate(self, awaitable) -> str | None:
        from playwright.async_api import Error as PlaywrightError
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        try:
            await awaitable
            await self._settle()
        except PlaywrightError as exc:
            if isinstance(exc, PlaywrightTimeout):
                self._note_unsettled("load")
            return str(exc).splitlines()[0]
        return None

    def _watch(self, page):
        """``page`` as the active one (the first time: its timeout set and its events counted)."""
        watched = self._watched.get(page)
        if watched is None:
            page.set_default_timeout(ACTION_TIMEOUT_MS)
            page.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
            watched = self._watched[page] = PageActivity(page)
            self._count_answers(page)
        self._activity = watched
        return page

    def _count_answers(self, page) -> None:
        """Record how the replay answered each request of ``page`` (its X-Webfreeze headers): the
        steps' provenance (not Chromium's own answers: an HSTS upgrade's 307). A request that failed
        (no answer) counts as a miss, and so does a WebSocket the replay could not serve (an ``xhr`` of method GET at its ws://
        URL; a worker's, which reaches the replay server, is told by it: :meth:`_server_socket`).
        One that failed after its answer came because the browser refused the answer (a module
        script answered 404, a recorded one too) was counted with that answer (``refused``)."""
        import weakref

        answered = weakref.WeakKeyDictionary()  # the requests whose response came -> its status

        def main(request) -> bool:
            try:
                return request.is_navigation_request() and request.frame == page.main_frame
            except Exception:  # a frame already detached
                return False

        def on_response(response) -> None:
            request = response.request
            if not request.url.startswith(("http:", "https:")):
                return
            answered[request] = response.status
            h = response.headers
            if main(request):  # (the capture session the page's WebSockets are answered from first)
                self._sockets.document(h.get("x-webfreeze-capture"))
            if "x-webfreeze-match" not in h and "non-authoritative-reason" in h:
                return  # Chromium's own answer (an HSTS upgrade's 307): the replay never saw the request
            level = h.get("x-webfreeze-match") or "miss"
            score = h.get("x-webfreeze-score")
            size = h.get("content-length")
            rec = answer_record(
                kind_of_resource(request.resource_type), request.method, request.url, level, response.status,
                main=main(request), score=float(score) if score else None,
                capture_url=h.get("x-webfreeze-capture-url"),  # (as the header has it: ASCII URLs unchanged)
                mime=h.get("content-type") if level != "miss" else None,
                size=int(size) if size and size.isdigit() and level != "miss" else None,
                why=(OPEN_STREAM_WHY if h.get(OPEN_STREAM_HEADER.lower())
                     else HELD_WHY if h.get(HELD_HEADER.lower())
                     else REPEAT_WHY.get(h.get(REPEAT_HEADER.lower(), ""))),
                capture=int(h["x-webfreeze-capture"]) if h.get("x-webfreeze-capture", "").isdigit() else None)
            with self._answers_lock:
                self._answers.append(rec)

        def placeholder(request) -> str | None:
            try:
                return self.server.replay.failed_upstream(request.method, request.url, list(request.headers.items()),
                                                          request.post_data_buffer)
            except Exception:  # (a request the index cannot read: a miss, as before)
                return None

        def refused(request) -> bool:
            """A request that failed after its answer came, counted with the answer
            (:func:`~webfreeze.simulator.provenance.refused_after_answer`)."""
            return refused_after_answer(answered.get(request), str(request.failure or ""))

        def on_failed(request) -> None:
            if request.url.startswith(("http:", "https:")) and not refused(request):
                # a placeholder of a site that never answered the recording, which the browser
                # refused with no response (a cross-origin XHR: its 502 has no CORS header), is the
                # answer the capture had, as the text backend counts it; anything else a miss
                level = placeholder(request)
                rec = answer_record(kind_of_resource(request.resource_type), request.method, request.url,
                                    level or "miss", 502 if level else 0, main=main(request))
                with self._answers_lock:
                    self._answers.append(rec)

        page.on("response", on_response)
        page.on("requestfailed", on_failed)

    async def _settle(self, extra_ms: int = 0) -> None:
        """Wait for a navigation the action started to commit, for the load event, then until
        nothing (request or navigation) has been in flight for SETTLE_MS; then run the page's due
        timers (:func:`pump_timers`, ``extra_ms`` more virtual time for a wait action) and, if any
        ran, settle again; again too if a document committed meanwhile and has not loaded yet. A
        settled page has also painted (see :func:`wait_painted`), so the agent's next action is not
        dropped. A settle that stopped short (SETTLE_ROUNDS, SETTLE_TIMEOUT_S, or a load event that
        never came) and the loads the page's runtime stopped waiting for (``__wfStalled``) are noted
        for the step's provenance (:meth:`take_answers`)."""
        from playwright.async_api import TimeoutError as PlaywrightTimeout

        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        activity = self._activity
        self._settles += 1
        token = self._settles
        rounds = 0
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or rounds >= SETTLE_ROUNDS:
                    self._note_unsettled("time" if left <= 0 else "rounds")
                    await wait_painted(self.page)  # input sent before the first paint would be dropped
                    return
                rounds += 1
                await activity.wait_commit(left)
                try:
                    await self.page.wait_for_load_state("load", timeout=NAVIGATION_TIMEOUT_MS)
                except PlaywrightTimeout:
                    self._note_unsettled("load")
                    return
                except Exception:
                    return  # the page went away (a closed tab): nothing left to settle
                activity.loaded = True
                await activity.wait_quiet(SETTLE_MS, max(0.0, deadline - time.monotonic()))
                if activity and time.monotonic() >= deadline:
                    self._note_unsettled("time")  # the network never went quiet: cut by the safety net
                if activity.pending is None and activity.loaded:
                    quiet_since = activity.changed
                    await wait_painted(self.page)
                    if activity.changed != quiet_since and time.monotonic() < deadline:
                        # the network moved while the page painted: a script chain between two
                        # requests (Gradio's modules import() the next ones) is not done; the pump
                        # would run its timers to the horizon before the chunk that sets one came
                        continue
                    if activity.pending is None and activity.loaded:  # no navigation began meanwhile
                        # the pump after the paint: a page that has just loaded answers late before it
                        if self.pump and await pump_timers(self.page, token, extra_ms=extra_ms):
                            continue  # timers ran: what they started (loads, a navigation) is waited for
                        if self._sockets.releasable():
                            # pushes that waited for an action the page has now taken: sent at this
                            # point of the step on every run, then what they start is settled
                            await self._release_sockets(deadline)
                            continue
                        return
        finally:
            if not self.page.is_closed():
                self._stalled += await stalled_loads(self.page)

    async def _release_sockets(self, deadline: float) -> None:
        """Send the pushes that waited for an action the page has now taken (SocketRoutes.release)
        and wait until the page's runtime has taken off each batch's mark (``__wfMarks``, summed
        over the frames of the episode's pages), so they are delivered before the settle goes on."""
        from playwright.async_api import Error as PlaywrightError

        async def marks() -> int:
            n = 0
            for frame in (f for page in self.context.pages for f in page.frames):
                if has_document(frame):
                    try:
                        n += int(await frame.evaluate(MARKS_JS) or 0)
                    except PlaywrightError:
                        pass  # a frame that went away
            return n

        before = await marks()
        sent = self._sockets.release()
        until = min(deadline, time.monotonic() + RELEASE_WAIT_S)
        while sent:
            now = await marks()
            if now >= before + sent or now < before:  # (delivered; or a document went, its count with it)
                return
            if time.monotonic() >= until:
                self._note_unsettled("time")
                return
            await asyncio.sleep(0.002)

    def _note_unsettled(self, why: str) -> None:
        if why not in self._unsettled:
            self._unsettled.append(why)

    async def _click(self, sel: str, bid: str) -> bool:
        """A left click on the element: straight through the mouse at the centre of its box when
        a pointer there hits it (no waiting: the observation it comes from is settled), else
        Playwright's ``click`` with its actionability waits (and its error when they fail).
        True when it went through the mouse."""
        from playwright.async_api import Error as PlaywrightError

        point = await self.page.evaluate(CLICK_POINT_JS, bid)
        if not (point and point["hit"]):
            await self.page.click(sel)
            return False
        mark = self._activity.mark()
        pages = len(self.context.pages)
        await self.page.mouse.click(point["x"], point["y"])
        if point.get("popup") and len(self.context.pages) == pages:
            try:
                await self.context.wait_for_event("page", timeout=POPUP_WAIT_MS)
            except PlaywrightError:
                pass  # a target that named an existing frame, or a blocked window
        await self._announced(NAVIGATING_JS, mark)
        return True

    async def _scope(self, bid: str):
        """The page, or the frame whose document holds ``bid`` (its frame elements' bids lead there,
        as BrowserGym's ``get_elem_by_bid`` reads them)."""
        from playwright.async_api import Error as PlaywrightError

        frame: Any = self.page  # (a Page, then the Frame of each frame element on the way)
        for step in frame_path(bid):
            element = await frame.query_selector(f'[{BID_ATTR}="{step}"]')
            inner = await element.content_frame() if element is not None else None
            if inner is None:
                raise PlaywrightError(f"no frame with bid {step} on the page")
            frame = inner
        return frame

    async def _click_with(self, sel: str, button, modifiers, scope=None) -> None:
        """Playwright's click with ``button`` and ``modifiers``; when that opens the link under it in
        another window (a middle click, Ctrl, Meta or Shift), wait for that window's page, as
        :meth:`_click` does for a link aimed at another window."""
        from playwright.async_api import Error as PlaywrightError

        locator = (scope or self.page).locator(sel)
        opens = button == "middle" or bool(set(modifiers or ()) & set(NEW_WINDOW_MODIFIERS))
        if opens:
            opens = await locator.evaluate("e => !!(e.closest && e.closest('a[href], area[href]'))")
        pages = len(self.context.pages)
        await locator.click(button=button, modifiers=modifiers)
        if opens and len(self.context.pages) == pages:
            try:
                await self.context.wait_for_event("page", timeout=POPUP_WAIT_MS)
            except PlaywrightError:
                pass  # a link the page handles itself (preventDefault), or a blocked window

    async def _announced(self, question: str, mark=None) -> bool:
        """Ask the page whether a navigation was announced (NAVIGATING_JS right after a mouse
        click, LATE_NAVIGATION_JS after its settle); if so, expect it unless its request or a
        commit has been seen since ``mark`` (default: now)."""
        from playwright.async_api import Error as PlaywrightError

        mark = self._activity.mark() if mark is None else mark
        try:
            announced = await self.page.evaluate(question)
        except PlaywrightError:
            announced = True  # the document went away under the question
        if announced:
            self._activity.expect_navigation(mark)
        return announced

    def observe(self):
        marked, shot, self._url, self._open_pages = self._loop.run(self._snapshot())
        tree = build_tree(marked["html"], self._url, marked["geometry"], frames=marked.get("documents"))
        if shot is not None and self.env.config.set_of_marks:
            shot = draw_marks(shot, tree.summaries())
        return tree, shot

    async def _snapshot(self):
        from playwright.async_api import Error as PlaywrightError

        await self._follow_new_pages()
        config = self.env.config
        keep_png = config.screenshots or config.set_of_marks  # (else BrowserGym's capture takes its own, faster)
        for attempt in range(SNAPSHOT_TRIES):
            try:
                # transitions and animations at their end, as the still screenshot below shows them
                await finish_animations(self.page)
                marked = read_marked(await self.page.evaluate(MARK_JS))
                if self.page.main_frame.child_frames:
                    await self._mark_frames(marked)
                if config.observation == "browsergym":  # (after MARK_JS: its bids are in the snapshots)
                    self.bgym_raw = await bgym_obs.capture_browser(self.context, self.page,
                                                                   screenshot=not keep_png)
                break
            except PlaywrightError as exc:
                # A navigation the settle did not see coming (a script's timer, say): wait for
                # it as for any other, then look again.
                if attempt == SNAPSHOT_TRIES - 1 or "context was destroyed" not in str(exc):
                    raise
                await self._settle()
        shot = None
        if keep_png:
            # still, as replay check's: two resets give the same bytes (issue 43)
            shot = await still_screenshot_async(self.page)
            if config.observation == "browsergym":
                self.bgym_raw["png"] = shot
        return marked, shot, self.page.url, [p.url for p in self.context.pages]

    async def _mark_frames(self, marked: dict) -> None:
        """MARK_JS in every frame of the page, as BrowserGym marks them (``mark_frames_recursive``):
        each frame element's bid the prefix of its document's; detached frames and frames whose
        scripts a sandbox blocks are left out. Their documents go to ``marked["documents"]`` (bid ->
        ``{html, url}``, for build_tree's ``frames``), their geometry, in page coordinates, into
        ``marked["geometry"]``: a box is visible when it is in its frame's viewport and in every
        frame's around it."""
        size = self.page.viewport_size or {"width": 1920, "height": 1080}
        documents: dict = {}
        await self._frames_of(self.page.main_frame, marked, (0, 0, size["width"], size["height"]), documents,
                              marked["geometry"])
        if documents:
            marked["documents"] = documents

    async def _frames_of(self, frame, marked: dict, clip, documents: dict, geometry: dict, depth: int = 0) -> None:
        from playwright.async_api import Error as PlaywrightError

        boxes = marked.get("frames") or {}
        for child in frame.child_frames:
            if not has_document(child) or depth > 8:
                continue  # (a lazy frame out of view holds no document yet)
            try:
                element = await child.frame_element()
                if await element.content_frame() != child:
                    continue  # (a PDF viewer in an <embed>, say)
                sandbox = await element.get_attribute("sandbox")
                if sandbox is not None and "allow-scripts" not in sandbox.split():
                    continue
                bid = await element.get_attribute(BID_ATTR)
                if not bid or bid not in boxes:
                    continue
                got = read_marked(await child.evaluate(MARK_JS, bid))
            except PlaywrightError:
                continue  # a frame that went away meanwhile
            x0, y0, shown = boxes[bid]
            inner = None
            if shown and clip is not None:
                inner = (max(clip[0], x0), max(clip[1], y0), min(clip[2], x0 + got.get("width", 0)),
                         min(clip[3], y0 + got.get("height", 0)))
                if inner[0] >= inner[2] or inner[1] >= inner[3]:
                    inner = None
            for key, g in got["geometry"].items():
                x, y = round(g[0] + x0, 2), round(g[1] + y0, 2)
                visible = bool(g[4]) and inner is not None and x < inner[2] and y < inner[3] and \
                    x + g[2] > inner[0] and y + g[3] > inner[1]
                geometry[key] = [x, y, g[2], g[3], 1 if visible else 0]
            for key, f in (got.get("frames") or {}).items():
                f[0], f[1] = round(f[0] + x0, 2), round(f[1] + y0, 2)
            documents[bid] = {"html": got["html"], "url": got.get("url") or child.url}
            await self._frames_of(child, got, inner, documents, geometry, depth + 1)

    async def _follow_new_pages(self) -> None:
        """A page opened since the last look (a link to another window) becomes the active one, as
        one the active page closed hands over to the last one left."""
        pages = self.context.pages
        new = [p for p in pages if p not in self._watched]
        if new or (pages and self.page not in pages):
            self.page = self._watch(new[-1] if new else pages[-1])
            try:
                await fast_animations(self.context, self.page)  # (as the episode's first page)
            except Exception:
                pass  # a window that closed at once: the settle below sees it
            await self._settle()

    def act(self, a: Action, target: dict | None) -> str | None:
        return self._loop.run(self._act(a))

    async def _act(self, a: Action) -> str | None:
        from playwright.async_api import Error as PlaywrightError

        page = self.page
        sel = f'[data-wf-bid="{a.bid}"]' if a.bid else None
        more = a.args or {}
        with self._answers_lock:
            seen = len(self._answers)  # (the main documents this action loads are checked below)
        by_mouse = False
        try:
            # the page, or the frame whose document holds the element (a bid with a frame's prefix)
            scope = await self._scope(a.bid) if a.bid else page
            if a.kind == "click":
                if more:  # another button, or modifiers: Playwright's click, as BrowserGym's
                    await self._click_with(sel, more.get("button", "left"), more.get("modifiers"), scope)
                elif scope is not page:  # in a frame: Playwright's click (the frame's own coordinates)
                    await scope.click(sel)
                else:
                    by_mouse = await self._click(sel, a.bid)
            elif a.kind == "dblclick":
                await scope.locator(sel).dblclick(button=more.get("button", "left"), modifiers=more.get("modifiers"))
            elif a.kind == "fill":
                if more.get("autocomplete"):  # BrowserGym's: all but the last character filled, that one typed
                    text, box = a.text or "", scope.locator(sel)
                    # BrowserGym clears first; an empty field is left alone: clearing it would fire an
                    # input event for "" that no person's typing made (a search box would ask for q=)
                    if await box.evaluate("e => ('value' in e ? e.value : e.textContent) || ''"):
                        await box.clear()
                    if len(text) > 1:
                        await box.fill(text[:-1])
                    if text:
                        await box.press_sequentially(text[-1])
                else:
                    await scope.fill(sel, a.text or "")
                if a.key == "Enter":
                    await scope.press(sel, "Enter")
            elif a.kind == "select":
                many = more.get("options")
                await scope.locator(sel).select_option(list(many) if many else a.value)  # (a value or a label)
            elif a.kind == "hover":
                await scope.hover(sel)
            elif a.kind == "focus":
                await scope.locator(sel).focus()
            elif a.kind == "clear":
                await scope.locator(sel).clear()
            elif a.kind == "press":
                if sel:
                    await scope.press(sel, a.key or "Enter")
                else:
                    await page.keyboard.press(a.key or "Enter")
            elif a.kind == "drag_and_drop":
                await scope.locator(sel).hover()
                await page.mouse.down()
                await (await self._scope(more["to_bid"])).locator(f'[data-wf-bid="{more["to_bid"]}"]').hover()
                await page.mouse.up()
            elif a.kind in ("upload_file", "mouse_upload_file"):
                missing = [f for f in more["files"] if not Path(f).is_file()]
                if missing:
                    return f"{a.kind}(): no such file {missing[0]!r}"
                async with page.expect_file_chooser() as chooser:
                    if sel:
                        await scope.locator(sel).click()
                    else:
                        await page.mouse.click(more["x"], more["y"])
                await (await chooser.value).set_files(list(more["files"]))
            elif a.kind == "scroll" and "delta_x" in more:
                await page.mouse.wheel(more["delta_x"], more["delta_y"])
            elif a.kind == "scroll":
                dy = (a.amount or 500) * (-1 if a.direction == "up" else 1) if a.direction in ("up", "down") else 0
                dx = (a.amount or 500) * (-1 if a.direction == "left" else 1) if a.direction in ("left", "right") else 0
                if sel:
                    await scope.locator(sel).evaluate("(el, d) => el.scrollBy(d[0], d[1])", [dx, dy])
                else:
                    await page.mouse.wheel(dx, dy)
            elif a.kind == "scroll_at":
                await page.mouse.move(more["x"], more["y"])
                await page.mouse.wheel(more["dx"], more["dy"])
            elif a.kind == "mouse_move":
                await page.mouse.move(more["x"], more["y"])
            elif a.kind in ("mouse_up", "mouse_down"):
                await page.mouse.move(more["x"], more["y"])
                await getattr(page.mouse, a.kind[6:])(button=more.get("button", "left"))
            elif a.kind in ("mouse_click", "mouse_dblclick"):
                await getattr(page.mouse, a.kind[6:])(more["x"], more["y"], button=more.get("button", "left"))
            elif a.kind == "mouse_drag_and_drop":
                await page.mouse.move(more["from_x"], more["from_y"])
                await page.mouse.down()
                await page.mouse.move(more["to_x"], more["to_y"])
                await page.mouse.up()
            elif a.kind in ("keyboard_down", "keyboard_up"):
                await getattr(page.keyboard, a.kind[9:])(a.key)
            elif a.kind == "keyboard_type":
                await page.keyboard.type(a.text or "")
            elif a.kind == "keyboard_insert_text":
                await page.keyboard.insert_text(a.text or "")
            elif a.kind in ("new_tab", "tab_close", "tab_focus"):
                problem = await self._tabs(a)
                if problem:
                    return problem
            elif a.kind == "goto":
                await page.goto(a.url, wait_until="load")
            elif a.kind in ("go_back", "go_forward"):
                if not await self._can_go(page, back=a.kind == "go_back"):
                    return "no previous page" if a.kind == "go_back" else "no next page"
                await (page.go_back if a.kind == "go_back" else page.go_forward)(wait_until="load")
            # a wait is virtual time for the page's timers (the settle's pump), not a real sleep
            await self._settle(extra_ms=min(a.amount or 0, MAX_WAIT_MS) if a.kind == "noop" else 0)
            if a.kind == "click" and by_mouse and await self._announced(LATE_NAVIGATION_JS):
                await self._settle()
        except PlaywrightError as exc:
            return action_error(exc)
        with self._answers_lock:
            loaded = [r for r in self._answers[seen:] if r["main"] and r["status"]]
        miss = next((r for r in loaded if r["level"] == "miss"), None)
        if miss is not None:  # (the text backend's words for the same load)
            return f"not captured: the archive has no {miss['method']} {miss['url']} (a replay miss)"
        if loaded and loaded[-1]["status"] >= 400:  # (as the text backend says of a page that failed)
            return f"HTTP {loaded[-1]['status']} for {loaded[-1]['url']}"
        return None

    async def _tabs(self, a: Action) -> str | None:
        """BrowserGym's tab actions: a new blank tab becomes the active one; closing the active tab
        activates the last one left (a new blank one if none is); ``tab_focus(i)`` activates the
        i-th open tab."""
        pages = self.context.pages
        if a.kind == "tab_focus":
            index = a.args["index"]
            if not -len(pages) <= index < len(pages):
                return f"tab_focus(): no tab {index} ({len(pages)} open)"
            page = pages[index]
        elif a.kind == "new_tab":
            page = await self.context.new_page()
        else:
            await self.page.close()
            page = self.context.pages[-1] if self.context.pages else await self.context.new_page()
        self.page = self._watch(page)
        await page.bring_to_front()
        return None

    @staticmethod
    async def _can_go(page, *, back: bool) -> bool:
        """Whether the page's history has an entry of this episode before (or after) the current
        one: the blank page a new tab starts on does not count, as in the text backend."""
        cdp = await page.context.new_cdp_session(page)
        try:
            history = await cdp.send("Page.getNavigationHistory")
        finally:
            await cdp.detach()
        to = history["currentIndex"] + (-1 if back else 1)
        entries = history["entries"]
        return 0 <= to < len(entries) and entries[to]["url"] != "about:blank"

    def open_pages(self) -> list[str]:
        return list(self._open_pages)

    def screenshot(self) -> bytes:
        return self._loop.run(still_screenshot_async(self.page))

    def close(self) -> None:
        if self._loop is None:
            return
        try:
            if not self._loop.stopped:  # (else the driver was stopped at exit, and its browsers with it)
                self._loop.run(self._close())
        finally:
            self._loop = None  # (the loop and the driver are the process's: _Driver)
            self._sockets.close()
            self.server.stop()

    async def _close(self) -> None:
        try:
            if self._spare is not None:
                try:
                    context, _ = await self._spare
                    await context.close()
                except Exception:
                    pass
            if self.context is not None:
                await self.context.close()
        finally:
            await self.browser.close()
