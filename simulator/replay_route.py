"""An archive answering a browser context's requests in process: every request a Playwright
context makes goes to a :class:`webfreeze.replayer.Replay` of the archive, never to the network.

This is the replay the recorder's page check loads a just-recorded page through
(:mod:`webfreeze.recorder.page_check`): it lives here, behind the simulator, because the recorder
may import only the simulator's browser side, and the simulator may import the replayer (the layer
table of docs/architecture.md). What the replay answers with a miss, or with the recording proxy's placeholder
for an exchange whose upstream failed (the site never answered), is kept as :class:`Missing`; so
is a request whose answer Chromium would not take, which is then aborted: a page never waits for
an answer that will not come. A WebSocket the page opens is answered from the archive's recording of
it (:class:`SocketRoutes`, the rule in :mod:`webfreeze.replayer.websocket`), routed apart
(``context.route`` does not see one) and never connected past the replay: one the archive holds no
recording of, or whose conversation parts from the recording, is missing (its reason starts with
:data:`WEBSOCKET_MISSING`). Chromium drops without a word an answer whose headers are not valid
HTTP (a name that is not a token, a value holding CR, LF or NUL: ``route.fulfill`` returns, and
the request never ends), so those are found before (:func:`refused_header`); ``route.fulfill``
raising is caught the same way.

Playwright hands headers to Chromium as one value a name (:func:`fulfil_headers`): repeated
``Set-Cookie`` headers go one a line, as Playwright splits them again; other repeats are joined
with ``", "`` as HTTP joins a field's lines, or kept once when they are equal (nginx sends
``Accept-Ranges: bytes`` with a static file and the replay says the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from webfreeze.archives.content import DecodeError, decode_content
from webfreeze.archives.timeutil import parse_time
from webfreeze.common.http import header_value
from webfreeze.replayer import Replay
from webfreeze.replayer.replay import is_browser_own
from webfreeze.replayer.websocket import (  # (replay serve's miss report words it alike)
    WEBSOCKET_PARTED,
    WEBSOCKET_SET_ASIDE,
)


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
        """The URL, and why it is missing when that is not a plain miss."""
        return self.url if self.why == "miss" else f"{self.url} ({self.why})"


# How the reason of every missing WebSocket begins (docs/replay-and-environment.md, "WebSockets"):
# one the archive holds no recording of, one opened more often than recorded, one whose conversation
# parted from the recording (the page sent what the recording did not: WEBSOCKET_PARTED).
WEBSOCKET_MISSING = "a WebSocket"


class SocketRoutes:
    """Serves the WebSockets of browser contexts (``context.route_web_socket(\"**/*\", routes.handle)``,
    Playwright's sync or async API) from the conversations an archive recorded
    (:mod:`webfreeze.replayer.websocket`): the socket never leaves the browser. Tell it each main
    document the page loads (:meth:`document`, the capture the replay answered with): its capture
    session is preferred, and the count of the sockets a page opens to a URL starts again. What it
    serves is reported to ``on_open(url, level, why=None)``; a miss to ``on_miss(url, why)``; a
    socket whose page's message matched only with its ``socket_volatile`` parts set aside to
    ``on_open(url, "canonical", WEBSOCKET_SET_ASIDE)`` once more. After each batch
    it sends :data:`~webfreeze.replayer.determinism.SOCKET_MARK` (``marks``, for pages whose replay
    runtime counts socket deliveries: ``Replay.sockets``), so a settle sees the batch delivered."""

    def __init__(self, archive_path, rules=None, *, direct: bool = False, marks: bool = True,
                 on_open=None, on_miss=None, answered=None):
        from webfreeze.archives import Archive
        from webfreeze.replayer.websocket import SocketIndex

        self._archive = Archive.open(archive_path)
        try:
            self.index = SocketIndex.from_archive(self._archive, rules)
        except BaseException:
            self._archive.close()
            raise
        self.volatile = rules.socket_volatile if rules is not None else ()  # (Rules.socket_volatile)
        self.direct = direct
        self.marks = marks
        self.on_open = on_open or (lambda url, level, why=None: None)
        self.on_miss = on_miss or (lambda url, why: None)
        # () -> the requests the HTTP replay has answered state-changing requests with
        # (``Replay.actions_answered``): a push recorded after one not among them waits for it
        # (Conversation.release; None: nothing waits)
        self.answered = answered or (lambda: None)
        # where the owner collects the URLs of sockets missed elsewhere (a worker's, answered by the
        # replay server): ``replay check`` points it at the list of the page it is loading
        self.missed_to: list[str] | None = None
        self.fuzzy_to: list[str] | None = None  # (and those it answered only fuzzily)
        self.when: float | None = None
        self._doc: tuple[str, float, str] | None = None  # the page's document: session, time, URL
        self._opened: dict[str, int] = {}
        self._lock = threading.Lock()
        # [url, Conversation, said ahead, route, closed] of this replay session
        self._conversations: list[list] = []
        # the actions answered as the last release saw them: what a socket's open and a page's
        # message go by, so that when a push goes out does not hang on which thread came first (the
        # replay server answering a POST, Playwright's loop delivering the page's message)
        self._answered = self.answered()

    def reset(self, when: float | None = None) -> None:
        """A new replay session (``when``: its target time, as the HTTP replay's)."""
        with self._lock:
            self.when, self._doc, self._opened = when, None, {}
            self._conversations = []
            self._answered = self.answered()

    def ahead(self, answered) -> list[str]:
        """The URLs of this session's sockets that have now sent the page what the server sent after
        an action the page did not take (``answered``: the requests of the captures the HTTP replay
        answered state-changing requests with, ``Replay.actions_answered``; :meth:`~webfreeze.replayer.websocket.Conversation.ahead`),
        each said once."""
        with self._lock:
            out = []
            for entry in self._conversations:
                if not entry[2] and entry[1].ahead(answered):
                    entry[2] = True
                    out.append(entry[0])
            return out

    def document(self, capture_id) -> None:
        """The page loaded a main document answered by capture ``capture_id`` (None: not a capture)."""
        found = None
        if capture_id is not None and str(capture_id).isdigit():
            try:
                with self._lock:
                    ex = self._archive.exchange(int(capture_id))
                found = (ex.session_id, parse_time(ex.captured_at).timestamp(), ex.url)
            except Exception:
                found = None
        with self._lock:
            self._doc, self._opened = found, {}

    def close(self) -> None:
        self._archive.close()

    def _direct(self, url: str) -> str:
        """A direct-mode socket URL as the URL it stands for. The replay server's shim passes a
        ``ws://`` URL the page built from ``location`` (the replay server's own address) as an
        absolute URL of another origin: that address stands for the origin of the page's document."""
        from webfreeze.replayer.websocket import direct_socket_url

        own = urlsplit(url).netloc
        original = direct_socket_url(url)
        # a URL the page built from its own address (its path holds the replay's prefix already:
        # Shiny's), which the shim prefixed once more: unwrapped again
        for _ in range(3):
            if urlsplit(original).netloc != own or (again := direct_socket_url(original)) == original:
                break
            original = again
        said = urlsplit(original)
        if original != url and said.netloc == own and self._doc is not None:
            page = urlsplit(self._doc[2])
            scheme = "wss" if page.scheme == "https" else "ws"
            return said._replace(scheme=scheme, netloc=page.netloc).geturl()
        return original

    def _shown(self, url: str) -> str:
        """The URL a socket is reported under: in direct mode the one it stands for (not the
        replay's address a page's own ``location`` put in it, nor the prefix the shim put on it
        once more), a ``ws``/``wss`` URL."""
        if not self.direct:
            return url
        original = urlsplit(self._direct(url))
        if original.scheme in ("http", "https"):
            original = original._replace(scheme="ws" if original.scheme == "http" else "wss")
        return original.geturl()

    def pick(self, url: str):
        """The recording (:class:`~webfreeze.replayer.websocket.Pick`) that answers the next socket
        opened to ``url``: the k-th socket to a URL since the page's document gets the k-th
        recording. The browser backend's replay server asks here too, for a worker's socket
        (Playwright routes none), so a page and its workers count their sockets together."""
        with self._lock:
            key = self._direct(url) if self.direct else url
            k = self._opened.get(key, 0)
            self._opened[key] = k + 1
            doc, when = self._doc, self.when
        return self.index.pick(key, k, session=doc[0] if doc else None, after=doc[1] if doc else None, when=when)

    def handle(self, ws, *, on_open=None, on_miss=None):
        """The route's handler: the recorded conversation, or a miss and the socket closed
        (``on_open``, ``on_miss``: this socket's reports, in place of the object's own)."""
        from webfreeze.replayer.websocket import Conversation

        on_open, on_miss = on_open or self.on_open, on_miss or self.on_miss
        pick = self.pick(ws.url)
        url = self._shown(ws.url)
        if pick.recording is None:
            on_miss(url, pick.why)
            return _close(ws, 1000)
        conversation = Conversation(pick.recording, self.volatile)
        entry = [url, conversation, False, ws, False]
        with self._lock:
            self._conversations.append(entry)
            answered = self._answered
        on_open(url, pick.level)

        def on_message(data):
            with self._lock:
                answered = self._answered
            turn = conversation.receive(data, answered)
            if turn.parted is not None:
                on_miss(url, f"{WEBSOCKET_PARTED}: {turn.parted}")
            if turn.set_aside:
                on_open(url, "canonical", WEBSOCKET_SET_ASIDE)
            return self._play(ws, turn, conversation)

        def on_close(code=None, reason=None):
            entry[4] = True  # (its pushes go nowhere now: never released)

        ws.on_message(on_message)
        ws.on_close(on_close)
        return self._play(ws, conversation.open(answered), conversation)

    def releasable(self) -> bool:
        """Whether a socket of this replay session has pushes that :meth:`release` would send now."""
        answered = self.answered()
        if answered is None:
            return False
        with self._lock:
            return any(not entry[4] and entry[1].releasable(answered) for entry in self._conversations)

    def release(self) -> int:
        """Send each socket of this replay session the pushes that waited for an action the HTTP
        replay has now answered (:meth:`~webfreeze.replayer.websocket.Conversation.release`), each
        batch followed by its mark; the number of sockets sent to. Call it on the thread the
        routes' handlers run on (Playwright's)."""
        answered = self.answered()
        if answered is None:
            return 0
        with self._lock:
            self._answered = answered
            waiting = [(entry[1], entry[3]) for entry in self._conversations if entry[1].held and not entry[4]]
        sent = 0
        for conversation, ws in waiting:
            turn = conversation.release(answered)
            if turn.send:
                closing = self._play(ws, turn, conversation)
                if inspect.isawaitable(closing):  # (the async API's close: on the routes' loop)
                    asyncio.ensure_future(closing)
                sent += 1
        return sent

    def _play(self, ws, turn, conversation):
        from playwright.sync_api import Error as PlaywrightError

        from webfreeze.replayer.determinism import SOCKET_MARK

        try:
            for message in turn.send:
                ws.send(message)
            if self.marks:
                ws.send(SOCKET_MARK)
        except PlaywrightError:
            return None  # the page went away meanwhile
        if turn.close:
            code = conversation.recording.close_code
            return _close(ws, code if code == 1000 or (code is not None and 3000 <= code <= 4999) else 1000)
        return None


def _close(ws, code: int):
    """Close the page's side of ``ws`` (the sync API closes at once; the async API's coroutine is
    returned, for Playwright to await as a handler's result)."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        result = ws.close(code=code)
    except PlaywrightError:
        return None  # the page went away meanwhile
    return result if inspect.isawaitable(result) else None


class _Shared:
    """The replay a :class:`ReplayRoute` serves, as its proxy (a replay server) answers with it:
    one request at a time between the two threads."""

    def __init__(self, replay, lock):
        self._replay, self._lock = replay, lock

    def __getattr__(self, name):
        return getattr(self._replay, name)

    def answer(self, *args, **kwargs):
        with self._lock:
            return self._replay.answer(*args, **kwargs)


class ReplayRoute:
    """Routes a browser context's requests to a replay of ``archive_path``: :meth:`attach` a context
    once, then load pages inside :meth:`serving`, which opens the archive anew (its match index then
    holds what was recorded a moment ago) and collects what the replay could not answer.

    Playwright routes no request a redirect makes (its docs say so: the next hop of an answer
    ``route.fulfill`` gave with a 3xx goes to the network, through the browser's proxy: the crawl's
    recording proxy, which fetched it live and recorded it, without the login's cookies: Calibre-Web's
    sort links answered 308, and the crawl recorded their logged-out ``302`` to the login page).
    So a context attached here also gets :meth:`proxy`: a replay server answering from the same
    replay, whose misses count with the route's."""

    def __init__(self, archive_path, *, seed: int = 0):
        self.archive_path = archive_path
        self.seed = seed
        self._replay = None
        self._sockets: SocketRoutes | None = None
        self._missing: dict[tuple[str, str], Missing] = {}
        self._failed_ids: dict[int, str | None] = {}
        self._lock = threading.Lock()
        self._server = None  # the proxy the next hops of redirects reach (started by proxy())
        self._own = None  # (its own replay, between checks)

    @property
    def missing(self) -> dict[tuple[str, str], Missing]:
        """What the replay could not answer while :meth:`serving`: the route's misses, and those of
        the next hops of redirects its proxy answered."""
        out = dict(self._missing)
        replay = self._replay
        if replay is not None and self._server is not None:
            with self._lock:
                seen = list(replay.misses)
            for m in seen:
                if m["method"] == "CONNECT":  # (a tunnel that carried no request: Chromium's preconnect)
                    continue
                out.setdefault((m["method"], m["url"]), Missing(m["method"], m["url"], (), b"", m.get("why") or "miss"))
        return out

    def proxy(self) -> dict:
        """The ``proxy`` setting of a context :meth:`attach` serves (see the class's docstring): a
        replay server on loopback, started on the first call, answering from :meth:`serving`'s replay."""
        if self._server is None:
            from webfreeze.replayer.server import ReplayServer

            self._server = ReplayServer(self.archive_path, mode="proxy", host="127.0.0.1", port=0, miss_report=None,
                                        seed=self.seed).start()
            self._own = self._server.replay
            if self._replay is not None:
                self._server.replay = _Shared(self._replay, self._lock)
        return {"server": self._server.url}

    def stop(self) -> None:
        """Stop :meth:`proxy`'s server, if started."""
        if self._server is not None:
            self._server.replay = self._own
            self._server.stop()
            self._server = None

    @property
    def sockets(self) -> SocketRoutes | None:
        """The WebSockets served while :meth:`serving` (None outside it)."""
        return self._sockets

    def attach(self, context) -> None:
        """Answer every request of ``context`` from the archive (outside :meth:`serving`: aborted),
        and every WebSocket it opens from the archive's recording of it (never connected past the
        replay; outside :meth:`serving`: closed)."""
        context.route("**/*", self._answer)
        context.route_web_socket("**/*", self._socket)

    def _socket(self, ws) -> None:
        sockets = self._sockets
        if sockets is None:  # (between checks: closed, as a request is aborted)
            _close(ws, 1000)
            return
        sockets.handle(ws)

    def _socket_missing(self, url: str, why: str) -> None:
        if self._replay is not None:
            self._missing.setdefault(("GET", url), Missing("GET", url, (), b"", why))

    @contextlib.contextmanager
    def serving(self, when: str):
        """The replay, as at ``when``, for the pages loaded in this block; :attr:`missing` starts empty."""
        self._missing, self._failed_ids = {}, {}
        with Replay(self.archive_path, seed=self.seed) as replay:
            replay.reset(self.seed, when=when)
            replay.sockets = True  # (the runtime counts socket deliveries: SocketRoutes marks them)
            sockets = SocketRoutes(self.archive_path, replay.rules, on_miss=self._socket_missing,
                                   answered=lambda: replay.actions_answered)
            sockets.reset(replay.when)
            self._replay, self._sockets = replay, sockets
            if self._server is not None:
                self._server.replay = _Shared(replay, self._lock)
                self._server._socket_index = None  # (a worker's socket: the recordings as they are now)
                self._server.socket_picker = sockets.pick  # (counted with the page's own, as replay check does)
            try:
                yield self
            finally:
                if self._server is not None:
                    self._server.replay, self._server.socket_picker = self._own, None
                self._replay, self._sockets = None, None
                sockets.close()

    def _upstream_failure(self, headers) -> str | None:
        cap = header_value(headers, "x-webfreeze-capture")
        if not cap or not cap.isdigit():
            return None
        cid = int(cap)
        if cid not in self._failed_ids:
            self._failed_ids[cid] = self._replay.archive.exchange(cid).extra.get("error")
        return self._failed_ids[cid]

    def _answer(self, route, request) -> None:
        from playwright.sync_api import Error as PlaywrightError  # (late: the replay extra)

        try:
            replay = self._replay
            if replay is None:  # a request of a page being left, between checks
                route.abort()
                return
            if urlsplit(request.url).scheme not in ("http", "https"):
                # the browser's own resources (chrome://, chrome-extension://: the full browser's PDF
                # viewer) are not the site's and never touch the network: the browser serves them
                route.continue_()
                return
            body = request.post_data_buffer or b""
            headers = list(request.headers.items())
            with self._lock:
                status, resp_headers, data = replay.fetch(request.method, request.url, headers, body)
            if self._sockets is not None and _main_navigation(request):
                self._sockets.document(header_value(resp_headers, "x-webfreeze-capture"))
            internal = is_browser_own(request.url)
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
            answer = fulfil_headers(resp_headers)
            refused = refused_header(answer)
            try:
                if refused is None:
                    route.fulfill(status=status, headers=answer, body=data)
            except PlaywrightError as exc:
                refused = str(exc).splitlines()[0]
            if refused is not None:  # the browser would not take it: the request is missing, said why
                if not internal:
                    why = f"the browser refused the replayed answer: {refused}"
                    self._missing[(request.method, request.url)] = Missing(request.method, request.url,
                                                                           tuple(headers), body, why)
                route.abort()  # (not left waiting: the page goes on without it)
        except PlaywrightError:
            pass  # the page went away meanwhile


def _main_navigation(request) -> bool:
    """Whether ``request`` loads a page's main document (Playwright's sync API)."""
    try:
        return request.is_navigation_request() and request.frame.parent_frame is None
    except Exception:  # a frame already detached, a service worker's request
        return False


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\r\n\0]")


def refused_header(headers: dict[str, str]) -> str | None:
    """Why Chromium would drop an answer with these headers (as :func:`fulfil_headers` gives them),
    or None: a name that is not an HTTP token, a value with CR, LF or NUL (``Set-Cookie``'s lines
    apart, which Playwright splits)."""
    for name, value in headers.items():
        if not _TOKEN.fullmatch(name):
            return f"header name {name!r} is not valid HTTP"
        for line in value.split("\n") if name == "set-cookie" else (value,):
            if _BAD_VALUE.search(line):
                return f"header {name!r} holds a line break or NUL"
    return None


def fulfil_headers(headers) -> dict[str, str]:
    """Response headers as ``route.fulfill`` takes them, one value a name (lower-case): repeated
    ``Set-Cookie`` values one a line (Playwright hands each line to Chromium as a header of its
    own); any other repeated header's distinct values joined with ``", "`` as HTTP joins a field
    sent twice, a value repeated as it was kept once (a capture's ``Accept-Ranges: bytes`` and
    the replay's own). ``Content-Length`` is left out: Playwright sets it from the body it sends."""
    values: dict[str, list[str]] = {}
    for k, v in headers:
        key = k.lower()
        if key == "content-length":
            continue
        seen = values.setdefault(key, [])
        if key == "set-cookie" or v not in seen:
            seen.append(v)
    return {k: ("\n" if k == "set-cookie" else ", ").join(vs) for k, vs in values.items()}
