"""The mitmproxy addon that writes every completed exchange into an archive.

Each exchange is committed in its own transaction the moment its response is complete, so a
recorder killed at any moment leaves an archive holding every exchange it had finished. Bodies
are kept as they travelled (content coding such as gzip kept, transfer coding removed); large
bodies are streamed to the client and teed into a spooled temporary file on the way.

With ``seed_pages`` (the crawl, ``record session``, ``record proxy``; not a live run, whose pages
get a replay's whole runtime), an HTML document's answer reaches the browser with the replay's
generator in front of its scripts (:func:`~webfreeze.replayer.determinism.random_script`, seeded
as a replay with seed 0 seeds that page): the page draws, live, the numbers its replay will draw,
so what it makes up from them and sends (Bokeh's message ids over its WebSocket) is what the replay's
page sends. The archive keeps the answer as the site sent it; the browser's copy has the script,
no content coding, and no ``Content-Security-Policy`` (as a replay's answer). A document answer
that would otherwise stream through (chunked, no length) is buffered for it, up to the streaming
threshold.

A stream of server-sent events (``text/event-stream``) always streams through, and one a page keeps
open for as long as it is shown (Gradio's heartbeat) is recorded as what had come when the page let
it go, or when a crawl checks the page (:meth:`ArchiveRecorder.flush_open`), with
``extra.open_stream``: a replay answers those events, and the answer ends there.
"""

from __future__ import annotations

import logging
import re
import tempfile
import threading
from datetime import datetime, timezone

from mitmproxy import http

from webfreeze.archives import Archive, Exchange
from webfreeze.archives.urlkey import url_of
from webfreeze.common.http import is_event_stream

log = logging.getLogger("webfreeze.recorder")

# Bodies larger than this are streamed through the proxy instead of buffered by mitmproxy.
STREAM_THRESHOLD = 4 << 20


def _headers(fields) -> list[tuple[str, str]]:
    # latin-1 maps bytes to code points one to one: nothing a server sent is lost or altered.
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in fields]


def client_url(flow: http.HTTPFlow) -> str:
    """The URL as the client asked for it. Where ``--resolve`` sent the connection elsewhere, the
    proxy's resolver left the name the client used in the flow's metadata (mitmproxy takes the
    host of a request inside a CONNECT tunnel from the connection's address, the resolved one)."""
    req = flow.request
    return flow.metadata.get("webfreeze_url") or url_of(req.scheme, req.host, req.port, req.path)


class _Tee:
    """A mitmproxy stream callback that keeps a copy of what passes through."""

    def __init__(self):
        self.file = tempfile.SpooledTemporaryFile(max_size=16 << 20)
        self._lock = threading.Lock()  # (an open stream is read while it still grows)

    def __call__(self, chunk: bytes) -> bytes:
        with self._lock:
            self.file.write(chunk)
        return chunk

    def read(self) -> bytes:
        with self._lock:
            self.file.seek(0)
            data = self.file.read()  # (and the file is left at its end for the next write)
        return data


# mitmproxy's words (11.x, proxy/layers/http) for a request its client stopped waiting for before
# any answer came: the connection closed (HTTP/1: said only of the client's side) or the stream
# cancelled (HTTP/2: the words name either side, so only CANCEL, the code a browser resets with,
# counts; a site that cancels instead is then left out, a miss, rather than kept as a 502).
_CLIENT_GAVE_UP = re.compile(r"Client disconnected\.|stream reset by client \(CANCEL\)")


def client_gave_up(message: str) -> bool:
    """Whether mitmproxy's error ``message`` says the client gave up on the request (not the site)."""
    return bool(_CLIENT_GAVE_UP.fullmatch(message or ""))


def _is_event_stream(resp) -> bool:
    return is_event_stream(resp.headers.get("content-type"))


class ArchiveRecorder:
    """Records HTTP(S) exchanges, and WebSocket messages as a JSON document per connection."""

    def __init__(self, archive: Archive, session_id: str | None, *, seed_pages: bool = False):
        self.archive = archive
        self.session_id = session_id
        self.seed_pages = seed_pages
        self.recorded = 0
        self.errors = 0
        # While paused (no session yet: a crawl's reachability probe), exchanges pass through
        # unrecorded; the last upstream failure is kept so the probe can say why it failed.
        self.last_failure: str | None = None
        # URL -> why, of the requests the site never answered (the client got the proxy's own 502)
        self.upstream_failures: dict[str, str] = {}
        self.failures = 0  # how many times the proxy answered with its own 502 (a count of the above)
        # "METHOD URL" of the answers still coming when their connection closed (a stream a page kept
        # open until it was closed: Gradio's heartbeat): never complete, so not recorded
        self.unfinished: list[str] = []
        # "METHOD URL" of the requests the client itself gave up on before any answer (a page's
        # script that drops an image it asked for): the site was never heard, so nothing is recorded
        self.abandoned: list[str] = []
        # flow id -> flow, of the event streams still coming (recorded as they stand by flush_open)
        self._open: dict[str, http.HTTPFlow] = {}

    @property
    def paused(self) -> bool:
        return self.session_id is None

    # ------------------------------------------------------------------ HTTP
    def responseheaders(self, flow: http.HTTPFlow) -> None:
        length = flow.response.headers.get("content-length", "")
        chunked = "chunked" in flow.response.headers.get("transfer-encoding", "").lower()
        # (asked once: the answer's body is then kept whole for the generator, response() adds it)
        seeds = flow.metadata["webfreeze_seeds"] = self._seeds(flow)
        events = _is_event_stream(flow.response)
        if (length.isdigit() and int(length) > STREAM_THRESHOLD) or (chunked and not length and not seeds) or events:
            tee = _Tee()
            flow.response.stream = tee
            flow.metadata["webfreeze_tee"] = tee
            if events:  # (each event reaches the page as it comes, over HTTP/2 too)
                self._open[flow.id] = flow

    def response(self, flow: http.HTTPFlow) -> None:
        self._open.pop(flow.id, None)
        tee = flow.metadata.pop("webfreeze_tee", None)
        if self.paused or flow.metadata.get("webfreeze_flushed"):
            return  # (an event stream already recorded as it stood: its answer in the archive ends there)
        self._record(flow, tee)

    def _record(self, flow: http.HTTPFlow, tee: _Tee | None, *, open_stream: bool = False) -> None:
        """Write ``flow``'s exchange, its body what ``tee`` kept (else mitmproxy's); ``open_stream``:
        the answer was still coming (recorded as it stood)."""
        payload = tee.read() if tee is not None else (flow.response.raw_content or b"")
        req, resp = flow.request, flow.response
        peer = flow.server_conn.peername[0] if flow.server_conn and flow.server_conn.peername else None
        extra: dict = {"ip": peer} if peer else {}
        if tee is not None and "chunked" in resp.headers.get("transfer-encoding", "").lower():
            extra["dechunked"] = True
        if open_stream:
            extra["open_stream"] = True
        ex = Exchange(
            url=client_url(flow),
            captured_at=datetime.fromtimestamp(req.timestamp_start, timezone.utc),
            method=req.method,
            req_headers=_headers(req.headers.fields),
            req_body=req.raw_content or None,
            status=resp.status_code,
            reason=resp.reason or "",
            http_version=resp.http_version,
            resp_headers=_headers(resp.headers.fields),
            payload=payload,
            extra=extra,
            session_id=self.session_id,
        )
        try:
            # (the id: a live run's proxy names the exchange to the replay that asked, recorder/live.py)
            flow.metadata["webfreeze_exchange"] = self.archive.add_exchange(ex)
            self.recorded += 1
        except Exception as exc:  # never take the proxy down; the miss is logged and counted
            self.errors += 1
            log.error("could not record %s %s: %s", req.method, req.url, exc)
        if tee is None and not open_stream and flow.metadata.get("webfreeze_seeds"):
            self._seed(flow, ex.url)

    def flush_open(self) -> int:
        """Record each event stream still coming as it stands now (its events so far, marked
        ``open_stream``), once: a crawl does this before it checks a page that keeps one open, so
        that the check's replay finds it. Run it on the proxy's loop
        (:meth:`~webfreeze.recorder.proxy.RecordingProxy.flush_open_streams`). Returns how many."""
        flows = list(self._open.values())
        self._open.clear()
        if self.paused:
            return 0
        for flow in flows:
            self._close_open(flow)
        return len(flows)

    def _close_open(self, flow: http.HTTPFlow) -> None:
        tee = flow.metadata.get("webfreeze_tee")
        if tee is None or flow.metadata.get("webfreeze_flushed"):
            return
        flow.metadata["webfreeze_flushed"] = True
        self._record(flow, tee, open_stream=True)

    def done(self) -> None:
        """mitmproxy's shutdown: the event streams still coming are recorded as they stand."""
        self.flush_open()

    def _seeds(self, flow: http.HTTPFlow) -> bool:
        """Whether ``flow``'s answer is a document that gets the replay's generator (``seed_pages``):
        HTML, to a request for a document, with a body a page runs (as the replay's rule)."""
        from webfreeze.replayer.matching import HTML_MIMES, asks_for_document

        if not self.seed_pages or self.paused:
            return False
        req, resp = flow.request, flow.response
        if resp is None or req.method == "HEAD" or resp.status_code < 200 or resp.status_code in (204, 304):
            return False
        if not resp.headers.get("content-type", "").lower().lstrip().startswith(HTML_MIMES):
            return False
        return asks_for_document(_headers(req.headers.fields), client_url(flow))

    def _seed(self, flow: http.HTTPFlow, url: str) -> None:
        """Put the replay's generator, seeded for ``url``, in front of the page's scripts in the
        browser's copy of the answer (the recorded one is untouched)."""
        from webfreeze.replayer.determinism import inject, page_seed, parsed_as_xml, random_script

        resp = flow.response
        try:
            html = resp.get_content(strict=True)
        except ValueError:
            return  # a content coding mitmproxy cannot undo: the page goes as it came
        if html is None:
            return
        resp.headers.pop("content-encoding", None)
        for name in ("content-security-policy", "content-security-policy-report-only", "content-md5", "digest"):
            resp.headers.pop(name, None)
        resp.content = inject(html, random_script(page_seed(0, url)), xml=parsed_as_xml(resp.headers.get("content-type", "")))

    def error(self, flow: http.HTTPFlow) -> None:
        """An exchange that failed upstream (refused, reset, TLS failure) is kept too: the client
        got a 502 from the proxy, and a replay must answer the same way."""
        if flow.request is None:
            return
        if flow.response is not None:  # the answer had begun: it was cut, or never ended
            self._open.pop(flow.id, None)
            if self.paused or flow.metadata.get("webfreeze_flushed"):
                return
            if flow.metadata.get("webfreeze_tee") is not None and _is_event_stream(flow.response) \
                    and flow.error is not None and client_gave_up(flow.error.msg):
                # An event stream the page let go (closed, or went elsewhere): the events it had.
                self._close_open(flow)
                return
            self.unfinished.append(f"{flow.request.method} {client_url(flow)}")
            return
        if flow.error is not None and client_gave_up(flow.error.msg):
            # Not the site's failure: a 502 kept for it would be replayed to a page that waits for
            # the answer, where the recording had none to give (a URL left out is a miss, said so).
            if not self.paused:
                self.abandoned.append(f"{flow.request.method} {client_url(flow)}")
            return
        self.upstream_failures[client_url(flow)] = str(flow.error) if flow.error else "upstream failure"
        self.failures += 1
        if self.paused:
            self.last_failure = str(flow.error) if flow.error else "upstream failure"
            return
        req = flow.request
        ex = Exchange(url=client_url(flow), captured_at=datetime.fromtimestamp(req.timestamp_start, timezone.utc),
                      method=req.method, req_headers=_headers(req.headers.fields), req_body=req.raw_content or None,
                      status=502, reason="Bad Gateway", http_version=req.http_version, resp_headers=[],
                      payload=b"", extra={"error": str(flow.error) if flow.error else "upstream failure"},
                      session_id=self.session_id)
        try:
            self.archive.add_exchange(ex)
            self.recorded += 1
        except Exception as exc:
            self.errors += 1
            log.error("could not record failed %s %s: %s", req.method, req.url, exc)

    # ------------------------------------------------------------------ WebSocket
    # The document is written when the connection opens, again with each of its first
    # SOCKET_REWRITES messages (before the message goes on: what a page was sent is in the archive
    # once the page has it, so a crawl's check of the page, while the socket is still open, replays
    # it) and at its end (all of them, and how it closed). The bound keeps a socket that streams
    # for long (a live dashboard) from rewriting an ever longer document with every message.
    SOCKET_REWRITES = 1000

    def websocket_start(self, flow: http.HTTPFlow) -> None:
        self._put_socket(flow)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        if flow.websocket is not None and len(flow.websocket.messages) <= self.SOCKET_REWRITES:
            self._put_socket(flow)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        self._put_socket(flow)

    def _put_socket(self, flow: http.HTTPFlow) -> None:
        if flow.websocket is None or self.paused:
            return
        ws = flow.websocket
        messages = [{"from_client": m.from_client, "type": "text" if m.is_text else "binary",
                     "content": m.text if m.is_text else m.content.hex(), "time": m.timestamp}
                    for m in ws.messages]
        # (``opened`` orders a page's connections to one URL; how it closed, whether the replay closes
        # after the last message: replayer/websocket.py; ``protocol``, the subprotocol the server chose
        # ("" none), is what a replay's handshake answers)
        protocol = flow.response.headers.get("sec-websocket-protocol", "") if flow.response is not None else ""
        try:
            self.archive.put_document(f"websocket/{self.session_id}/{flow.id}.json",
                                      {"version": 1, "url": client_url(flow), "messages": messages,
                                       "opened": flow.request.timestamp_start, "closed_by_client": ws.closed_by_client,
                                       "close_code": ws.close_code, "protocol": protocol})
        except Exception as exc:  # never take the proxy down
            self.errors += 1
            log.error("could not record the WebSocket %s: %s", client_url(flow), exc)
