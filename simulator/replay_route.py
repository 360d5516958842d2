"""An archive answering a browser context's requests in process: every request a Playwright
context makes goes to a :class:`webfreeze.replayer.Replay` of the archive, never to the network.

This is the replay the recorder's page check loads a just-recorded page through
(:mod:`webfreeze.recorder.page_check`): it lives here, behind the simulator, because the recorder
may import only the simulator's browser side, and the simulator may import the replayer (the layer
table of docs/architecture.md). What the replay answers with a miss, or with the recording proxy's placeholder
for an exchange whose upstream failed (the site never answered), is kept as :class:`Missing`; so
is a request whose answer Chromium would not take, which is then aborted: a page never waits for
an answer that will not come. A WebSocket the page opens is missing too (:data:`WEBSOCKET_MISSING`):
the replay serves no WebSocket conversation, and ``context.route`` does not see one, so it is
routed apart and closed at once; left alone it would go past the replay, to the browser's proxy
and the live site, and a check would see the page whole. Chromium drops without a word an answer whose headers are not valid
HTTP (a name that is not a token, a value holding CR, LF or NUL: ``route.fulfill`` returns, and
the request never ends), so those are found before (:func:`refused_header`); ``route.fulfill``
raising is caught the same way.

Playwright hands headers to Chromium as one value a name (:func:`fulfil_headers`): repeated
``Set-Cookie`` headers go one a line, as Playwright splits them again; other repeats are joined
with ``", "`` as HTTP joins a field's lines, or kept once when they are equal (nginx sends
``Accept-Ranges: bytes`` with a static file and the replay says the same).
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from webfreeze.archives.content import DecodeError, decode_content
from webfreeze.common.http import header_value
from webfreeze.replayer import Replay
from webfreeze.replayer.replay import is_browser_own


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


# Why a WebSocket is missing: the archive keeps its messages (websocket/<session>/<flow>.json) but
# no replay answers them (docs/replay-and-environment.md, "WebSockets").
WEBSOCKET_MISSING = "a WebSocket: replay does not serve its conversation"


class ReplayRoute:
    """Routes a browser context's requests to a replay of ``archive_path``: :meth:`attach` a context
    once, then load pages inside :meth:`serving`, which opens the archive anew (its match index then
    holds what was recorded a moment ago) and collects what the replay could not answer."""

    def __init__(self, archive_path, *, seed: int = 0):
        self.archive_path = archive_path
        self.seed = seed
        self._replay = None
        self.missing: dict[tuple[str, str], Missing] = {}
        self._failed_ids: dict[int, str | None] = {}

    def attach(self, context) -> None:
        """Answer every request of ``context`` from the archive (outside :meth:`serving`: aborted);
        close every WebSocket it opens, missing (never connected past the replay)."""
        context.route("**/*", self._answer)
        context.route_web_socket("**/*", self._refuse_socket)

    def _refuse_socket(self, ws) -> None:
        from playwright.sync_api import Error as PlaywrightError  # (late: the replay extra)

        if self._replay is not None:  # (between checks: closed, as a request is aborted)
            self.missing.setdefault(("GET", ws.url), Missing("GET", ws.url, (), b"", WEBSOCKET_MISSING))
        try:
            ws.close()
        except PlaywrightError:
            pass  # the page went away meanwhile

    @contextlib.contextmanager
    def serving(self, when: str):
        """The replay, as at ``when``, for the pages loaded in this block; :attr:`missing` starts empty."""
        self.missing, self._failed_ids = {}, {}
        with Replay(self.archive_path, seed=self.seed) as replay:
            replay.reset(self.seed, when=when)
            self._replay = replay
            try:
                yield self
            finally:
                self._replay = None

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
            status, resp_headers, data = replay.fetch(request.method, request.url, headers, body)
            internal = is_browser_own(request.url)
            why = "miss" if status == 0 or header_value(resp_headers, "x-webfreeze-miss") else \
                self._upstream_failure(resp_headers)
            if why and not internal:
                self.missing.setdefault((request.method, request.url),
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
                    self.missing[(request.method, request.url)] = Missing(request.method, request.url,
                                                                          tuple(headers), body, why)
                route.abort()  # (not left waiting: the page goes on without it)
        except PlaywrightError:
            pass  # the page went away meanwhile


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
