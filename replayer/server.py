"""The replay server: answers HTTP(S) from an archive and never opens an upstream connection.

One asyncio event loop (uvloop when installed) parses HTTP/1.1 with httptools and answers each
request synchronously from an in-memory match index and a cache of ready-made responses, so a
request costs a dictionary lookup and one write. Two ways in, on the same port:

- proxy: absolute-form requests (``GET http://host/...``) and ``CONNECT host:port`` tunnels. What
  the client sends first in a tunnel decides: a TLS handshake (its first byte 0x16) is terminated
  with a per-host certificate from the webfreeze CA and the requests inside are ``https://host``'s;
  anything else is read as plain HTTP, ``http://host``'s (Chromium tunnels every ``ws://`` socket
  so). A tunnel that ends without a request the server could read (garbage, a failed handshake,
  nothing sent) is a miss, with its reason. Origin-form requests whose Host is another site are
  served as that site (transparent use).
- direct: pywb's URL scheme without a collection name. ``/<1-14 digit timestamp>id_/<original URL>``
  is *identity*: the archived response closest in time, its payload byte for byte as stored (as
  pywb's ``id_`` returns it); ``/<timestamp>/<original URL>`` (pywb's default replay URL; also
  with any other two-letter modifier such as ``mp_``) is the replayed form, HTML with the
  determinism runtime injected unless injection is off; ``/`` lists the archive.

A WebSocket handshake (direct mode, an origin-form request, or inside a tunnel, plain or TLS) is
answered from the archive's recording of the socket by the rule of :mod:`.websocket` (frames both
ways on the connection); one with no recording is a miss, answered 404.

Control endpoints under ``/_webfreeze/`` (status, reset, state, misses) serve tools that drive a
replay from another process; a request a web page made (fetch metadata, ``Origin``) is refused
(403), so a replayed page, of the server's own origin in direct mode, cannot reach them.

What a request gets is decided by a :class:`~webfreeze.replayer.replay.Replay` (matching, site
models, determinism injection, JSONP renaming, pywb's direct-URL rules, the response itself); this
module only speaks HTTP on sockets and hands each request to it.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import re
import resource
import signal
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httptools

from webfreeze.archives import ArchiveError
from webfreeze.archives.timeutil import parse_time
from webfreeze.common.http import header_value, split_host_port

from .decoding import DecodeError, decode_bounded
from .determinism import SOCKET_MARK
from .hooks import SiteModel
from .matching import asks_for_document, request_kind
from .replay import (
    BROWSER_INTERNAL_HOSTS,
    CACHE_BYTES,
    DIRECT,
    HELD_HEADER,
    PortInUse,
    Replay,
    ReplayError,
    direct_original,
    load_rules_file,
    simple_response,
)
from .rewrite import UrlRewriter, rewrite_css_bytes, rewrite_html, rewrite_refresh, seal_headers, shim_script
from .upstream import Upstream

HELD_MARK = f"\r\n{HELD_HEADER}: 1\r\n".encode()  # (in a head: an answer held open, replay.py _held)

# (BROWSER_INTERNAL_HOSTS: the browser launch reads it here, to send Chromium's own traffic to the proxy)
__all__ = ["BROWSER_INTERNAL_HOSTS", "PortInUse", "ReplayServer", "ReplayError", "load_rules_file"]

log = logging.getLogger("webfreeze.replay")

MAX_BODY = 64 * 1024 * 1024
MAX_HEADER_BYTES = 64 * 1024
IDLE_TIMEOUT = 120.0  # a kept-alive connection with no request
HEADER_TIMEOUT = 10.0  # from a request's first byte to the end of its headers (and a tunnel's first byte)
BODY_TIMEOUT = 60.0  # from the end of a request's headers to the end of its body
WRITE_TIMEOUT = 60.0  # an answer the client has read none of (its buffers full) for this long: closed
MAX_CONNECTIONS = 4096  # at most; never more than the descriptor limit allows (less FD_RESERVE)
FD_RESERVE = 64  # descriptors kept for the archive, the miss report, the listening socket, the loop
TLS_HANDSHAKE = 0x16  # the first byte of a TLS record carrying a handshake (a ClientHello)
# TLS alerts by which a client turns down the replay's certificate. Chromium told by Playwright to
# ignore certificate errors (every webfreeze browser) sends one on its first handshake with each
# host, then asks again and takes the certificate (measured: one refused tunnel a host, then one
# that works). So a refusal is counted (``tls_refused``), not a miss: the client's own request
# fails there if it never comes back, which the client sees.
CERTIFICATE_REFUSED = ("ALERT_CERTIFICATE_UNKNOWN", "ALERT_BAD_CERTIFICATE", "ALERT_UNKNOWN_CA")
REWRITE_CACHE_BYTES = 64 * 1024 * 1024
SEAL = seal_headers()
# Headers a rewritten (or any direct-mode) answer does not pass on as archived.
_DROP_REWRITTEN = frozenset({b"content-length", b"content-encoding", b"content-security-policy",
                             b"content-security-policy-report-only", b"etag", b"content-md5", b"digest"})
_DROP_DIRECT = frozenset({b"link", b"x-dns-prefetch-control"})  # Link: preload/preconnect to live origins
# (on a lower-cased head) what a direct answer may have to change: headers, or a body to rewrite
_NEEDS_WORK_ID = re.compile(rb"\r\n(?:location|refresh|link|x-dns-prefetch-control):")
_NEEDS_WORK = re.compile(rb"\r\n(?:location|refresh|link|x-dns-prefetch-control):|\r\ncontent-type:[ \t]*"
                         rb"(?:text/html|application/xhtml|text/css)")


class ReplayServer:
    """Serve one archive's :class:`Replay` over HTTP(S). Use :meth:`start` (background thread) or
    :meth:`serve_forever`; ``replay`` is the answerer (its settings are this constructor's)."""

    def __init__(self, archive_path: str | Path, *, mode: str = "proxy", host: str = "127.0.0.1", port: int = 0,
                 on_miss: str = "404", miss_report: str | Path | None = None, inject: bool = True,
                 seed: int = 0, rules: dict | None = None, when: str | None = None,
                 confdir: str | Path | None = None, cache_bytes: int = CACHE_BYTES,
                 rule_defaults: dict | None = None, timers: bool = False, upstream: Upstream | None = None,
                 max_connections: int | None = None, header_timeout: float = HEADER_TIMEOUT,
                 write_timeout: float = WRITE_TIMEOUT):
        """``max_connections`` caps the connections served at once (default :data:`MAX_CONNECTIONS`,
        and never more than the process's descriptor limit allows); one more takes the place of the
        connection that has waited longest for a request, else gets a 503. ``header_timeout``:
        seconds a client may take to send a request's headers; ``write_timeout``: seconds a client
        may leave an answer unread (a connection whose writes stay paused that long is closed)."""
        if mode not in ("proxy", "direct"):
            raise ReplayError(f"unknown mode {mode!r} (proxy or direct)")
        self.replay = Replay(archive_path, on_miss=on_miss, miss_report=miss_report, inject=inject, seed=seed,
                             rules=rules, when=when, cache_bytes=cache_bytes, rule_defaults=rule_defaults,
                             timers=timers, upstream=upstream)  # (upstream: live runs, replayer/upstream.py)
        self.archive_path = self.replay.archive_path
        # WebSockets: the recordings (read on the first upgrade), the page's document, sockets per URL
        self._socket_index = None
        self._socket_doc: tuple[str, float, str] | None = None  # session, time, URL
        self._sockets_opened: dict[str, int] = {}
        # Told of every WebSocket handshake the server answers, as (URL, level, why): the level of
        # its match, or "miss" (why: the reason); the browser backend's provenance (a worker's socket)
        self.on_socket: Callable[[str, str, str], None] | None = None
        # (URL) -> the Pick that answers a WebSocket, in place of the server's own count: the
        # browser backend's SocketRoutes.pick, so a page's sockets and its workers' count together
        self.socket_picker: Callable[[str], Any] | None = None
        self.mode = mode
        self.host = host
        self.port = port
        self.confdir = confdir
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._stopping: asyncio.Event | None = None
        self._conns: set = set()
        self.tls = None
        self.header_timeout = header_timeout
        self.write_timeout = write_timeout
        self.max_connections = _connection_cap(max_connections)
        self._rewrites: OrderedDict = OrderedDict()  # direct mode's rewritten answers, bounded in bytes
        self._rewrite_bytes = 0

    # ------------------------------------------------------------------ the replay's state, for its users
    def register(self, model: SiteModel) -> None:
        """Let ``model`` answer requests for its hosts (before the archive): :meth:`Replay.register`."""
        self.replay.register(model)

    def reset(self, seed: int | None = None, when: str | None = None, *, clock_shift: float = 0.0) -> None:
        """Start a new replay session: :meth:`Replay.reset`."""
        self.replay.reset(seed, when, clock_shift=clock_shift)
        self._socket_doc, self._sockets_opened = None, {}

    # ------------------------------------------------------------------ WebSockets (replayer/websocket.py)
    def _note_document(self, headers, head: bytes | None) -> None:
        """A document was answered (``head``: its answer): the WebSockets its page opens
        prefer its capture session, and their count per URL starts again."""
        if request_kind(headers, "") != "document":
            return
        m = re.search(rb"(?im)^x-webfreeze-capture: *(\d+)", head or b"")
        found = None
        if m:
            try:
                ex = self.replay.archive.exchange(int(m.group(1)))
                found = (ex.session_id, parse_time(ex.captured_at).timestamp(), ex.url)
            except Exception:
                found = None
        self._socket_doc, self._sockets_opened = found, {}

    def _socket_report(self, url: str, level: str, why: str = "", headers=()) -> None:
        """A WebSocket served (``level``: its match's) or missed (``"miss"``, ``why``; ``headers``:
        its handshake's): a miss is counted and reported; either way :attr:`on_socket` is told."""
        if level == "miss":
            self.replay._log_miss("GET", url, headers, "", None, why=why)
        if self.on_socket is not None:
            try:
                self.on_socket(url, level, why)
            except Exception:
                log.exception("the WebSocket listener failed")

    def _release_sockets(self) -> None:
        """Send each open WebSocket the pushes that waited for an action the replay has now answered
        (:meth:`~.websocket.Conversation.release`), right after that action's answer is written."""
        answered = None
        for conn in list(self._conns):
            session = conn._socket
            if session is None or conn.closed:
                continue
            if answered is None:
                answered = self.replay.actions_answered
            turn = session.conversation.release(answered)
            if turn.send:
                session.play(turn)

    def _tunnel_miss(self, target: str, why: str) -> None:
        """A ``CONNECT`` tunnel that ended without a request the server could read: a miss of the
        tunnel's target (``host:port``), with why."""
        self.replay.stats["requests"] += 1
        self.replay._log_miss("CONNECT", target, [], "", None, why=why)

    def _socket_pick(self, url: str):
        """The recording that answers a WebSocket to ``url`` (:meth:`SocketIndex.pick`)."""
        from .websocket import SocketIndex

        if self.socket_picker is not None:
            return self.socket_picker(url)
        if self._socket_index is None:
            self._socket_index = SocketIndex.from_archive(self.replay.archive, self.replay.rules)
        k = self._sockets_opened.get(url, 0)
        self._sockets_opened[url] = k + 1
        doc = self._socket_doc
        return self._socket_index.pick(url, k, session=doc[0] if doc else None, after=doc[1] if doc else None,
                                       when=self.replay.when)

    def site_state(self) -> dict:
        """Every site model's exported state, by model name: :meth:`Replay.site_state`."""
        return self.replay.site_state()

    stats = property(lambda self: self.replay.stats, doc="Request counters (requests, hits, misses, ...).")
    misses = property(lambda self: self.replay.misses, doc="This session's misses.")
    miss_report = property(lambda self: self.replay.miss_report, doc="The miss report's path (None: none).")
    rules = property(lambda self: self.replay.rules, doc="The replay rules in force.")
    matcher = property(lambda self: self.replay.matcher, doc="The request matcher.")
    seed = property(lambda self: self.replay.seed, doc="The current session's seed.")

    # ------------------------------------------------------------------ set-up
    def _open(self) -> None:
        self.replay.open()
        if self.mode == "proxy":
            self.tls = _tls_contexts(self.confdir)

    # ------------------------------------------------------------------ running
    def start(self) -> "ReplayServer":
        """Serve from a background thread; returns once listening (raises if it cannot start)."""
        self._thread = threading.Thread(target=self._thread_main, name="webfreeze-replay", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._startup_error is not None:
            raise self._startup_error
        return self

    def _thread_main(self) -> None:
        loop = _new_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve(install_signals=False))
        except BaseException as exc:  # reported by start()
            if not self._ready.is_set():
                self._startup_error = exc
                self._ready.set()
            else:
                log.exception("replay server crashed")
        finally:
            loop.close()

    def serve_forever(self, on_ready=None) -> None:
        """Serve in this thread until SIGINT/SIGTERM or :meth:`stop`."""
        loop = _new_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._serve(install_signals=True, on_ready=on_ready))
        finally:
            loop.close()

    async def _serve(self, install_signals: bool, on_ready=None) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        try:
            self._open()
            try:
                self._server = await self._loop.create_server(lambda: _Connection(self), self.host, self.port,
                                                              reuse_address=True, backlog=1024)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise PortInUse(f"cannot listen on {self.host}:{self.port}: port already in use") from None
                raise ReplayError(f"cannot listen on {self.host}:{self.port}: {exc.strerror}") from None
        except BaseException:
            self._close_resources()
            raise
        self.port = self._server.sockets[0].getsockname()[1]
        if install_signals:
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._loop.add_signal_handler(sig, self._stopping.set)
        sweeper = self._loop.create_task(self._sweep_idle())
        self._ready.set()
        if on_ready:
            on_ready(self)
        try:
            await self._stopping.wait()
        finally:
            sweeper.cancel()
            self._server.close()
            for conn in list(self._conns):
                conn.close()
            await self._server.wait_closed()
            self._close_resources()

    def _close_resources(self) -> None:
        self.replay.close()
        if self.tls is not None:
            self.tls.close()

    async def _sweep_idle(self) -> None:
        while True:
            await asyncio.sleep(1)
            now = time.monotonic()
            for conn in list(self._conns):
                conn.expire(now)

    def _admit(self, conn: "_Connection") -> bool:
        """Whether a new connection may be served: under the cap, or in the place of the connection
        that has waited longest for a request (a slow or idle client); else it is answered 503."""
        if len(self._conns) < self.max_connections:
            self._conns.add(conn)
            return True
        waiting = [c for c in self._conns if c.waiting_since is not None and not c.busy()]
        if waiting:
            victim = min(waiting, key=lambda c: (not c.partial, c.waiting_since))
            self.replay.stats["evicted"] = self.replay.stats.get("evicted", 0) + 1
            victim.refuse(408, "request timeout: the server is full and this connection sent no request")
            self._conns.discard(victim)
            self._conns.add(conn)
            return True
        self.replay.stats["refused"] = self.replay.stats.get("refused", 0) + 1
        return False

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None and not self._loop.is_closed():
            try:
                self._loop.call_soon_threadsafe(self._stopping.set)
            except RuntimeError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> "ReplayServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ca_file(self) -> Path | None:
        return self.tls.ca_file if self.tls else None

    # ------------------------------------------------------------------ control endpoints
    def control(self, target: str, method: str):
        parts = urlsplit(target)
        name = parts.path[len("/_webfreeze/"):]
        if name == "status":
            data = {"archive": str(self.archive_path), "mode": self.mode, "exchanges": self.replay.matcher.count,
                    "seed": self.replay.seed, **self.replay.stats}
        elif name == "reset" and method == "POST":
            q = dict(parse_qsl(parts.query))
            try:
                self.replay.reset(int(q["seed"]) if "seed" in q else None)
            except ValueError:
                return self._plain(400, "seed must be an integer\n")
            data = {"reset": True, "seed": self.replay.seed}
        elif name == "state":
            data = self.replay.site_state()
        elif name == "misses":
            data = list(self.replay.misses)
        else:
            return self._plain(404, "unknown control endpoint (status, reset (POST), state, misses)\n")
        return simple_response(200, "application/json", json.dumps(data, sort_keys=True, indent=1).encode(),
                       b"Cache-Control: no-store\r\n")

    def _plain(self, status: int, text: str):
        return simple_response(status, "text/plain; charset=utf-8", text.encode("utf-8", "replace"))

    # ------------------------------------------------------------------ direct mode: rewritten and sealed
    def direct(self, target: str, method: str, headers, body: bytes):
        """A ``/<ts>[xx_]/<url>`` request. ``id_`` is the archived response as it is (its body byte
        for byte); any other form is the replayed page, its HTML and CSS rewritten into the archive's
        URL space with the client-side shim in front (:mod:`.rewrite`). Either way redirects and
        refreshes stay inside the archive, Link headers are dropped and service workers refused."""
        if header_value(headers, "service-worker"):
            return self._plain(403, "webfreeze: service workers are refused in a replay\n")
        ts, modifier, original = DIRECT.match(target).groups()
        original = direct_original(original)
        head, data = self.replay.direct(target, method, headers, body)
        if data is None:
            return head, data
        lower = head.lower()
        if not _NEEDS_WORK.search(lower):  # (most answers: images, scripts, fonts; every id_ but redirects)
            return head, data
        if modifier == "id" and not _NEEDS_WORK_ID.search(lower):
            return head, data
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ", 2)[1])
        fields = [line.split(b":", 1) for line in lines[1:] if b":" in line]
        rewrite = UrlRewriter(f"{ts}{modifier}_" if modifier == "id" else ts, original)
        kind = None
        if modifier != "id" and data and status >= 200 and not 300 <= status < 400 and status not in (204, 206):
            ctype = next((v for k, v in fields if k.strip().lower() == b"content-type"), b"").strip().lower()
            kind = "html" if ctype.startswith((b"text/html", b"application/xhtml")) else \
                "css" if ctype.startswith(b"text/css") else None
        if kind is not None:
            capture = next((v.strip() for k, v in fields if k.strip().lower() == b"x-webfreeze-capture"), None)
            # (whether the answer got the runtime: a document's did, a fetch's of the same URL not)
            key = (capture, ts, original, self.replay.seed, asks_for_document(headers, original)) if capture else None
            new = self._rewrites.get(key) if key else None
            if new is None:
                new = self._rewrite(kind, data, fields, ts, original)
                if key and new is not None:
                    self._remember(key, new)
            if new is not None:
                if key in self._rewrites:
                    self._rewrites.move_to_end(key)
                data = new
                fields = [(k, v) for k, v in fields if k.strip().lower() not in _DROP_REWRITTEN]
                fields.append((b"Content-Length", b" %d" % len(data)))
        out = [lines[0]]
        for k, v in fields:
            name = k.strip().lower()
            if name in _DROP_DIRECT:
                continue
            if name in (b"location", b"refresh"):
                v = b" " + _rewrite_location(v.decode("latin-1").strip(), rewrite, name == b"refresh").encode("latin-1")
            out.append(k + b":" + v)
        return b"\r\n".join(out) + b"\r\n", data

    def _rewrite(self, kind: str, data: bytes, fields, ts: str, original: str) -> bytes | None:
        enc = next((v for k, v in fields if k.strip().lower() == b"content-encoding"), b"").decode("latin-1")
        try:
            plain = decode_bounded(data, enc)
        except DecodeError as exc:  # a body past the expansion limit, or corrupt: served as archived, sealed
            log.warning("not rewriting %s: %s", original, exc)
            return None
        if kind == "html":
            return rewrite_html(plain, ts, original, shim_script(ts, original))
        return rewrite_css_bytes(plain, ts, original)

    def _remember(self, key, body: bytes) -> None:
        if len(body) > REWRITE_CACHE_BYTES // 4:
            return
        self._rewrites[key] = body
        self._rewrite_bytes += len(body)
        while self._rewrite_bytes > REWRITE_CACHE_BYTES:
            _, old = self._rewrites.popitem(last=False)
            self._rewrite_bytes -= len(old)

    def stray(self, target: str, headers):
        """A root-relative request that escaped the rewriting (a script-made ``/api/x``): sent, by a
        307, to the same path on the origin of the replayed page that asked (its Referer); None
        when the Referer is no replayed page."""
        referer = header_value(headers, "referer")
        if not referer:
            return None
        try:
            parts = urlsplit(referer)
        except ValueError:
            return None
        m = DIRECT.match(parts.path + (f"?{parts.query}" if parts.query else ""))
        if not m:
            return None
        ts, modifier, original = m.groups()
        original = direct_original(original)
        page = urlsplit(original)
        where = f"/{ts}{modifier + '_' if modifier else ''}/{page.scheme}://{page.netloc}{target}"
        return simple_response(307, "text/plain; charset=utf-8", b"", f"Location: {where}\r\n".encode("latin-1", "replace"))

    def own_address(self, host_header: str) -> bool:
        host, port = split_host_port(host_header or "")
        local = {"127.0.0.1", "localhost", "::1", self.host.lower(), "0.0.0.0"}
        return not host_header or (host in local and port == str(self.port))


def _from_a_page(headers) -> bool:
    """Whether a request was made by a web page (a replayed page's script, a form, a link), which the
    control endpoints refuse: in direct mode every replayed page is of the server's own origin and
    could otherwise read the site state or reset the session. A browser marks what a page sends
    with headers no script can set or remove (``Sec-Fetch-Site`` other than ``none``, which is an
    address typed by the user; ``Origin``; and, in browsers without fetch metadata, ``Referer``
    unless the page asked for none). Tools (urllib, curl, our own callers) send none of them."""
    site = header_value(headers, "sec-fetch-site")
    if site and site.strip().lower() != "none":
        return True
    return bool(header_value(headers, "origin") or (not site and header_value(headers, "referer")))


def _connection_cap(asked: int | None) -> int:
    """The connections served at once: ``asked`` (else :data:`MAX_CONNECTIONS`), at most the soft
    descriptor limit less :data:`FD_RESERVE`, so accepting one never fails for want of a descriptor."""
    cap = asked or MAX_CONNECTIONS
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        soft = resource.RLIM_INFINITY
    if soft != resource.RLIM_INFINITY:
        cap = min(cap, soft - FD_RESERVE)
    return max(cap, 8)


def _rewrite_location(value: str, rewrite: UrlRewriter, refresh: bool) -> str:
    """A Location (or Refresh) header's URL, moved into the archive's URL space."""
    if refresh:
        return rewrite_refresh(value, rewrite) or value
    return rewrite(value) or value


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


def _tls_contexts(confdir):
    from .tls import TlsContexts

    try:
        return TlsContexts(confdir)
    except ImportError:
        raise ReplayError("proxy mode needs mitmproxy for its certificates: pip install 'webfreeze[replay]'") from None


class _Connection(asyncio.Protocol):
    """One client connection (plain, or the inside of a CONNECT tunnel when ``tunnel_host`` is set:
    TLS when ``tls``, else plain HTTP; ``tunnel_target``: the ``CONNECT`` request's ``host:port``)."""

    def __init__(self, server: ReplayServer, tunnel_host: str | None = None, *, tls: bool = True,
                 tunnel_target: str = ""):
        self.server = server
        self.tunnel_host = tunnel_host
        self.tunnel_tls = tls
        self.tunnel_target = tunnel_target
        self._read = 0  # requests read whole on this connection (a tunnel with none is a miss)
        self._tunnel_counted = False
        self._peeking = None  # while a tunnel waits for its first byte: what ends the wait
        self.transport = None
        self.parser = httptools.HttpRequestParser(self)
        self.last_active = time.monotonic()
        self.closed = False
        self._url = b""
        self._headers: list[tuple[str, str]] = []
        self._header_bytes = 0
        self._body: list[bytes] = []
        self._body_size = 0
        self._upgrading = False
        self._socket: _SocketSession | None = None  # once upgraded to a replayed WebSocket
        self._paused = False
        # Waiting for a request's headers since (monotonic; None while one is being read or answered);
        # partial: some of them have come. The sweeper closes one that takes too long (expire).
        self.waiting_since: float | None = self.last_active
        self.partial = False
        self.body_since: float | None = None
        self.paused_since: float | None = None  # writes paused (the client reads nothing) since

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport
        if not self.server._admit(self):
            self.refuse(503, "too many connections; try again")

    def refuse(self, status: int, why: str) -> None:
        """Answer ``status`` with one line and close (a full server; a client too slow)."""
        if self.transport is not None and not self.transport.is_closing():
            head, body = self.server._plain(status, f"webfreeze: {why}\n")
            self.transport.write(head + b"Connection: close\r\n\r\n" + body)
            self.transport.close()
        self.closed = True

    def expire(self, now: float) -> None:
        """Close this connection when it has overstayed: headers not in within the header timeout,
        a body not in within :data:`BODY_TIMEOUT`, no request within :data:`IDLE_TIMEOUT`, or an
        answer left unread for the write timeout (a client that reads nothing holds its place)."""
        if self.closed or self._socket is not None:  # (a WebSocket stays open as long as its page)
            return
        if self.busy():
            if self.paused_since is not None and now - self.paused_since > self.server.write_timeout:
                self.server.replay.stats["timeouts"] = self.server.replay.stats.get("timeouts", 0) + 1
                self.closed = True
                if self.transport is not None:
                    self.transport.abort()  # (what is buffered for it is dropped: it read none of it)
            return
        if self.waiting_since is not None:
            if self.partial and now - self.waiting_since > self.server.header_timeout:
                self.server.replay.stats["timeouts"] = self.server.replay.stats.get("timeouts", 0) + 1
                self.refuse(408, "request timeout: the request's headers did not come in time")
            elif now - self.last_active > IDLE_TIMEOUT:
                self.close()
        elif self.body_since is not None and now - self.body_since > BODY_TIMEOUT:
            self.server.replay.stats["timeouts"] = self.server.replay.stats.get("timeouts", 0) + 1
            self.refuse(408, "request timeout: the request's body did not come in time")

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.server._conns.discard(self)
        if self._peeking is not None:
            self._peeking(None)
        if self.partial and self._socket is None:
            self._tunnel_unread("the tunnel ended in the middle of a request")

    def _tunnel_unread(self, why: str) -> None:
        """Inside a tunnel that has carried no request the server could read: a miss (once)."""
        if self.tunnel_host is not None and self._read == 0 and not self._tunnel_counted:
            self._tunnel_counted = True
            self.server._tunnel_miss(self.tunnel_target, why)

    def pause_writing(self) -> None:
        if not self._paused and self.transport is not None:
            self._paused = True
            self.paused_since = time.monotonic()
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self._paused and self.transport is not None:
            self._paused = False
            self.paused_since = None
            self.transport.resume_reading()

    def busy(self) -> bool:
        return self._paused

    def close(self) -> None:
        if self._peeking is not None:
            self._peeking(None)
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._socket is not None and not self.closed:
            self._socket.feed(data)
            return
        if self._upgrading or self.closed:
            return
        self.last_active = time.monotonic()
        if self.waiting_since is not None and not self.partial:
            self.partial = True
            self.waiting_since = self.last_active  # the header timeout runs from the request's first byte
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._on_upgrade()
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, _TooLarge):
                self._bad_request(str(cause), status=413 if "body" in str(cause) else 431)
            else:
                log.error("error answering a request: %r", cause)
                self._bad_request("internal error", status=500)
        except httptools.HttpParserError:
            self._bad_request("malformed HTTP request")

    # httptools callbacks
    def on_message_begin(self) -> None:
        self._url = b""
        self._headers = []
        self._header_bytes = 0
        self._body = []
        self._body_size = 0

    def on_headers_complete(self) -> None:
        # (httptools calls back from data_received's feed_data: last_active is now, one clock read a request)
        self._read += 1
        self.waiting_since = None
        self.partial = False
        self.body_since = self.last_active

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > MAX_HEADER_BYTES:
            raise _TooLarge("request line too long")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value)
        if self._header_bytes > MAX_HEADER_BYTES:
            raise _TooLarge("request headers too large")
        self._headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_body(self, body: bytes) -> None:
        self._body_size += len(body)
        if self._body_size > MAX_BODY:
            raise _TooLarge("request body too large")
        self._body.append(body)

    def on_message_complete(self) -> None:
        method = self.parser.get_method().decode("latin-1")
        if method == "CONNECT" or header_value(self._headers, "upgrade", "").lower() == "websocket":
            return  # handled by the upgrade path
        self.body_since = None
        self.waiting_since = self.last_active  # (for the next request; partial once a byte of it comes)
        keep = self.parser.should_keep_alive()
        try:
            head, body = self._dispatch(method, self._url.decode("latin-1"), self._headers, b"".join(self._body))
        except ArchiveError as exc:  # a damaged archive (a corrupt blob): one line, not a traceback
            log.error("cannot answer %s %s: %s", method, self._url.decode("latin-1"), exc)
            self.server.stats["errors"] += 1
            head, body = self.server._plain(500, f"webfreeze: cannot replay this request: {exc}\n")
        except Exception:  # never let one request take the server down
            log.exception("error answering %s %r", method, self._url)
            self.server.stats["errors"] += 1
            head, body = self.server._plain(500, "webfreeze: internal error while replaying\n")
        if body is None:  # on-miss abort: drop the connection, like an unreachable host
            if self.transport is not None:
                self.transport.abort()
            self.closed = True
            return
        if self.closed or self.transport is None or self.transport.is_closing():
            return
        if not self.server.replay.timers and HELD_MARK in head:
            # a request the recording got no answer to (a long poll the site was holding): without
            # the runtime's pumped timers nothing keeps it from the page, so it is held open here
            # as the site held it, its headers sent and its body never (a page's settle then waits
            # for it no longer, as for an event stream's), until the client lets go
            self.waiting_since = None
            lines = [line for line in head.split(b"\r\n") if line and not line.lower().startswith(b"content-length:")]
            self.transport.write(b"\r\n".join(lines) + b"\r\nTransfer-Encoding: chunked\r\n\r\n")
            return
        self.server._note_document(self._headers, head)
        if keep:
            self.transport.write(head + b"\r\n" + body if len(body) < 65536 else head + b"\r\n")
            if len(body) >= 65536:
                self.transport.write(body)
        else:
            self.transport.write(head + b"Connection: close\r\n\r\n")
            self.transport.write(body)
            self.transport.close()
            self.closed = True
        if method.upper() not in ("GET", "HEAD", "OPTIONS"):  # (an action: pushes may have waited for it)
            self.server._release_sockets()

    def _dispatch(self, method: str, target: str, headers, body: bytes):
        server = self.server
        if self.tunnel_host is not None:
            if not target.startswith("/"):
                return server._plain(400, "expected an origin-form request inside the tunnel\n")
            scheme = "https" if self.tunnel_tls else "http"
            return server.replay.answer(method, f"{scheme}://{self.tunnel_host}{target}", headers, body)
        if target.startswith(("http://", "https://")) or target[:8].lower().startswith(("http://", "https://")):
            return server.replay.answer(method, target, headers, body)
        if not target.startswith("/"):
            return server._plain(400, "bad request target\n")
        host = header_value(headers, "host", "")
        if server.own_address(host) or server.mode == "direct":
            head, data = self._direct(server, method, target, headers, body)
            return (head + SEAL if data is not None else head), data  # (sealed: see rewrite.py)
        return server.replay.answer(method, f"http://{host}{target}", headers, body)

    @staticmethod
    def _direct(server: ReplayServer, method: str, target: str, headers, body: bytes):
        if DIRECT.match(target):
            return server.direct(target, method, headers, body)
        if target.startswith("/_webfreeze/"):
            if _from_a_page(headers):
                return server._plain(403, "webfreeze: the control endpoints answer tools, not pages\n")
            return server.control(target, method)
        if target == "/" or target.startswith("/?"):
            return server.replay.listing(target)
        return server.stray(target, headers) or simple_response(
            404, "text/plain; charset=utf-8",
            b"not a replay URL: use /<timestamp>/<original url> or /<timestamp>id_/<original url>\n",
            b"X-Webfreeze-Miss: 1\r\nCache-Control: no-store\r\n")

    def _bad_request(self, why: str, status: int = 400) -> None:
        self.server.stats["bad_requests"] += 1
        self._tunnel_unread(f"the tunnel carried no request the server could read ({why})")
        if self.transport is not None and not self.transport.is_closing():
            head, body = self.server._plain(status, f"webfreeze: {why}\n")
            self.transport.write(head + b"Connection: close\r\n\r\n" + body)
            self.transport.close()
        self.closed = True

    def _on_upgrade(self) -> None:
        method = self.parser.get_method().decode("latin-1")
        if method == "GET" and header_value(self._headers, "upgrade", "").lower() == "websocket":
            self._open_socket()
            return
        if method != "CONNECT":
            self._bad_request("protocol upgrades other than WebSocket are not replayed")
            return
        target = self._url.decode("latin-1")
        if self.server.tls is None:
            self._bad_request("CONNECT needs proxy mode", status=405)
            return
        host, port = split_host_port(target)
        if not host or not port.isdigit():
            self._bad_request("bad CONNECT target")
            return
        self._upgrading = True
        self.transport.pause_reading()  # (the tunnel's first byte is looked at where it lies: _peek)
        self.transport.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        self._peek(host, port, target)

    def _peek(self, host: str, port: str, target: str) -> None:
        """Wait for the tunnel's first byte without taking it off the socket (``MSG_PEEK`` on a
        duplicate of its descriptor): a TLS handshake is then terminated (:meth:`_start_tls`), any
        other byte starts plain HTTP (:meth:`_start_plain`); an end, or nothing within the header
        timeout, is a miss."""
        loop = asyncio.get_running_loop()
        authority = f"[{host}]" if ":" in host else host
        try:
            raw = self.transport.get_extra_info("socket")
            dup = socket.socket(raw.family, raw.type, fileno=os.dup(raw.fileno()))
            dup.setblocking(False)
        except (OSError, AttributeError, ValueError) as exc:  # (no socket: not a TCP transport)
            self.server._tunnel_miss(target, f"the tunnel could not be read: {exc}")
            self.close()
            return

        def finish(first: bytes | None) -> None:
            self._peeking = None
            loop.remove_reader(dup.fileno())
            timer.cancel()
            dup.close()
            if first is None:  # (the connection closed meanwhile, by the server)
                return
            if not first:
                self.server._tunnel_miss(target, "the tunnel ended before it carried a request")
                self.close()
            elif first[0] == TLS_HANDSHAKE:
                loop.create_task(self._start_tls(host, authority if port == "443" else f"{authority}:{port}", target))
            else:
                self._start_plain(authority if port == "80" else f"{authority}:{port}", target)

        def readable() -> None:
            try:
                first = dup.recv(1, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                first = b""
            finish(first)

        def quiet() -> None:
            if self._peeking is not None:
                finish(None)
                self.server._tunnel_miss(target, f"the tunnel sent nothing for {self.server.header_timeout:g} s")
                self.close()

        self._peeking = finish
        loop.add_reader(dup.fileno(), readable)
        timer = loop.call_later(self.server.header_timeout, quiet)

    def _hand_over(self, inner: "_Connection", transport) -> None:
        """The tunnel's inside now speaks to ``inner``."""
        self.server._conns.discard(self)
        inner.connection_made(transport)

    def _start_plain(self, tunnel_host: str, target: str) -> None:
        inner = _Connection(self.server, tunnel_host, tls=False, tunnel_target=target)
        self.transport.set_protocol(inner)
        self._hand_over(inner, self.transport)
        self.transport.resume_reading()

    async def _start_tls(self, host: str, tunnel_host: str, target: str) -> None:
        loop = asyncio.get_running_loop()
        inner = _Connection(self.server, tunnel_host, tunnel_target=target)
        try:
            ctx = self.server.tls.context_for(host)
            transport = await loop.start_tls(self.transport, inner, ctx, server_side=True,
                                             ssl_handshake_timeout=15)
        except (OSError, ConnectionError, asyncio.TimeoutError, ValueError) as exc:
            log.debug("TLS handshake with client failed: %s", exc)
            why = str(exc).splitlines()[0] if str(exc).strip() else \
                "the client closed the connection" if isinstance(exc, ConnectionError) else \
                "it took too long" if isinstance(exc, asyncio.TimeoutError) else type(exc).__name__
            if any(alert in why for alert in CERTIFICATE_REFUSED):
                stats = self.server.replay.stats
                stats["tls_refused"] = stats.get("tls_refused", 0) + 1
            else:
                self.server._tunnel_miss(target, f"the tunnel's TLS handshake failed: {why}")
            self.close()
            return
        except Exception:
            log.exception("TLS set-up failed")
            self.server._tunnel_miss(target, "the tunnel's TLS could not be set up")
            self.close()
            return
        self._hand_over(inner, transport)


    def _socket_url(self, target: str) -> str:
        """The URL a WebSocket handshake asks for, as the recorder kept it (ws:, wss:)."""
        server = self.server
        if self.tunnel_host is not None:
            return f"{'wss' if self.tunnel_tls else 'ws'}://{self.tunnel_host}{target}"
        if target[:8].lower().startswith(("http://", "https://", "ws://", "wss://")):
            return "ws" + target[4:] if target[:4].lower() == "http" else target
        host = header_value(self._headers, "host", "")
        if server.own_address(host) or server.mode == "direct":
            url = target
            for _ in range(3):  # (a page that built its URL from its own address: prefixed twice)
                m = DIRECT.match(urlsplit(url).path + ("?" + urlsplit(url).query if urlsplit(url).query else "")) \
                    if url.startswith("/") or urlsplit(url).netloc == host else None
                if m is None:
                    break
                url = direct_original(m.group(3))
            doc = server._socket_doc
            if urlsplit(url).netloc == host and doc is not None:  # built from the replay's own address
                page = urlsplit(doc[2])
                url = urlsplit(url)._replace(scheme="wss" if page.scheme == "https" else "ws", netloc=page.netloc).geturl()
            if url[:8].lower().startswith(("http://", "https://")):  # (a URL the page built from its http: address)
                url = "ws" + url[4:]
            return url
        return f"ws://{host}{target}"

    def _open_socket(self) -> None:
        """A WebSocket handshake: answered from the archive's recording of the socket (the rule of
        :mod:`.websocket`), or a miss (404)."""
        import base64
        import hashlib

        from .websocket import Conversation

        key = header_value(self._headers, "sec-websocket-key", "")
        url = self._socket_url(self._url.decode("latin-1"))
        server = self.server
        server.replay.stats["requests"] += 1
        pick = server._socket_pick(url) if key else None
        if pick is None or pick.recording is None:
            server._socket_report(url, "miss", pick.why if pick else "not a WebSocket handshake", self._headers)
            head, body = simple_response(404, "text/plain; charset=utf-8",
                                         f"webfreeze: {pick.why if pick else 'not a WebSocket handshake'}: {url}\n"
                                         .encode("utf-8", "replace"), b"X-Webfreeze-Miss: 1\r\n")
            if self.transport is not None and not self.transport.is_closing():
                self.transport.write(head + b"Connection: close\r\n\r\n" + body)
                self.transport.close()
            self.closed = True
            return
        server.replay.stats["hits"] += 1
        if pick.level == "fuzzy":  # (another capture's conversation: counted as the HTTP answers are)
            server.replay.stats["fuzzy"] = server.replay.stats.get("fuzzy", 0) + 1
        server._socket_report(url, pick.level)
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
        protocol = pick.recording.answer_protocol(header_value(self._headers, "sec-websocket-protocol", ""))
        chosen = f"Sec-WebSocket-Protocol: {protocol}\r\n".encode("latin-1", "replace") if protocol else b""
        self.transport.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                             b"Sec-WebSocket-Accept: " + accept + b"\r\n" + chosen + b"X-Webfreeze-Match: "
                             + pick.level.encode() + b"\r\n\r\n")
        self._socket = _SocketSession(self, url, Conversation(pick.recording, server.replay.rules.socket_volatile))
        self._socket.play(self._socket.conversation.open(server.replay.actions_answered))


class _SocketSession:
    """A replayed WebSocket on a connection of the replay server: RFC 6455 frames both ways
    (wsproto's frame protocol: the client's masked frames, fragments joined, pings answered), the
    conversation's turns sent as frames."""

    def __init__(self, conn: _Connection, url: str, conversation):
        from wsproto.frame_protocol import FrameProtocol  # (late: mitmproxy's, the replay extra)

        self.conn, self.url, self.conversation = conn, url, conversation
        self._frames = FrameProtocol(client=False, extensions=[])
        self._parts: list = []

    def _write(self, data: bytes) -> None:
        t = self.conn.transport
        if t is not None and not t.is_closing():
            t.write(bytes(data))

    def play(self, turn) -> None:
        for m in turn.send:
            self._write(self._frames.send_data(m, fin=True))
        if self.conn.server.replay.sockets:  # (the runtime counts deliveries: a worker's socket, in process)
            self._write(self._frames.send_data(SOCKET_MARK, fin=True))
        if turn.parted is not None:
            from .websocket import WEBSOCKET_PARTED

            self.conn.server._socket_report(self.url, "miss", f"{WEBSOCKET_PARTED}: {turn.parted}")
        if turn.set_aside:
            from .websocket import WEBSOCKET_SET_ASIDE

            self.conn.server._socket_report(self.url, "canonical", WEBSOCKET_SET_ASIDE)
        if turn.close:
            self._write(self._frames.close(self.conversation.recording.close_code or 1000))
            self.conn.close()

    def feed(self, data: bytes) -> None:
        from wsproto.frame_protocol import Opcode, ParseFailed

        self._frames.receive_bytes(data)
        try:
            for frame in self._frames.received_frames():
                if frame.opcode is Opcode.CLOSE:  # answered, and the connection ends
                    code = frame.payload[0] if isinstance(frame.payload, tuple) else None
                    self._write(self._frames.close(code))
                    self.conn.close()
                    return
                if frame.opcode is Opcode.PING:
                    self._write(self._frames.pong(frame.payload))
                    continue
                if frame.opcode is Opcode.PONG:
                    continue
                self._parts.append(frame.payload)
                if frame.message_finished:
                    parts, self._parts = self._parts, []
                    message = "".join(parts) if frame.opcode is Opcode.TEXT else b"".join(parts)
                    self.play(self.conversation.receive(message, self.conn.server.replay.actions_answered))
        except ParseFailed:
            self.conn.close()  # not a WebSocket frame: the connection ends


class _TooLarge(Exception):
    """A request body over the limit: an internal signal, answered with a 413 (never a user error)."""

