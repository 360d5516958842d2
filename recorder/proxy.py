"""The recording proxy: mitmproxy with our addon, HTTP and HTTPS, one capture session per run."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import http.client
import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from webfreeze.archives import Archive, ArchiveError, new_archive_atomically
from webfreeze.archives.store import archive_files
from webfreeze.archives.urlkey import url_of
from webfreeze.common.ca import default_confdir, load_ca  # one CA for recording and replay
from webfreeze.common.http import is_event_stream
from webfreeze.common.resolve import parse_resolve  # noqa: F401  (the --resolve table; its home is common)

from .addon import ArchiveRecorder
from .errors import ProxyError, SiteUnreachable

CA_NAME = "mitmproxy-ca-cert.pem"
START_TIMEOUT_S = 120  # a safety net: the proxy thread says at once when it failed


_CA_CHECKED: set[Path] = set()


def ensure_ca(confdir: Path | None = None) -> Path:
    """Create the recording CA if needed and return the path of its certificate (PEM). Loaded once
    per folder and process (~30 ms): a recording checks it before making an archive, then again
    when its proxy starts."""
    confdir = Path(confdir or default_confdir())
    cert = confdir / CA_NAME
    if confdir not in _CA_CHECKED or not cert.exists():
        load_ca(confdir)
        _CA_CHECKED.add(confdir)
    return cert


def free_port() -> int:
    """A loopback port nothing listens on right now (for proxies we start ourselves)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_port(host: str, port: int) -> int:
    """Fail in one line when the port is taken (mitmproxy would only log it); returns the port, a
    free one chosen by the system for port 0. A port whose last connections wait out TIME_WAIT (a
    proxy just stopped after serving a client) is free: mitmproxy's listener reuses the address, and
    so does this check (on POSIX, where that still refuses a port something listens on)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        if os.name == "posix":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            reason = "port already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
            raise ProxyError(f"cannot listen on {host}:{port}: {reason}") from None
        return s.getsockname()[1]


def open_for_recording(path: str | os.PathLike) -> Archive:
    """Open (or create) the archive a recording writes into; the recording CA is checked first, so
    that a broken one stops the recording before an archive is made."""
    return _open_or_create(path)[0]


def _open_or_create(path: str | os.PathLike) -> tuple[Archive, bool]:
    """:func:`open_for_recording`, and whether this call created the archive (one that another
    process creates meanwhile is an error of ``new_archive_atomically``, never taken for ours)."""
    ensure_ca()
    p = Path(path)
    if p.exists():
        return Archive.open(p, write=True), False
    with new_archive_atomically(p):
        pass  # an empty archive appears whole, then recording appends to it
    return Archive.open(p, write=True), True


@contextlib.contextmanager
def recording_into(path: str | os.PathLike) -> Iterator[Archive]:
    """:func:`open_for_recording` for one recording: closed at the end, and removed again when this
    call created it and the recording failed before anything was recorded into it (a browser that
    would not start leaves no empty archive behind). What a failed recording did record stays."""
    arc, created = _open_or_create(path)
    try:
        yield arc
    except BaseException as exc:
        try:
            # a recording whose start failed (``discard`` set: a crawl's seed) publishes nothing
            empty = created and (getattr(exc, "discard", False) or arc.is_empty())
        except Exception:
            empty = False  # an archive that cannot even say so is kept as it is
        with contextlib.suppress(Exception):  # the recording's own error is the one to report
            arc.close()
        if empty:
            for f in archive_files(path):
                with contextlib.suppress(FileNotFoundError):
                    f.unlink()
        raise
    arc.close()


# How a live fetch that gave up on a stream that never ends starts its reason (a crawl's missing list).
STREAM_MISSING = "still streaming after"
# How long a live fetch listens to server-sent events before it records them as they stand.
EVENTS_LISTEN_S = 5.0


class RecordingProxy:
    """A mitmproxy instance recording into ``archive``; run it in the foreground or a thread."""

    def __init__(self, archive: Archive, *, host: str = "127.0.0.1", port: int = 8080,
                 confdir: Path | None = None, session_kind: str = "proxy",
                 resolve: dict[str, tuple[str, int]] | None = None, paused: bool = False,
                 seed_pages: bool = False):
        check_port(host, port)  # a taken port fails here, before a session is made
        self.resolve = dict(resolve or {})
        self.archive = archive
        self.host, self.port = host, port
        self.confdir = Path(confdir or default_confdir())
        ensure_ca(self.confdir)
        self.session_kind = session_kind
        self.session_id: str | None = None
        # seed_pages: the documents reach the browser with the replay's generator (recorder/addon.py)
        self.recorder = ArchiveRecorder(archive, None, seed_pages=seed_pages)
        if not paused:
            self.begin_session()
        self._master = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: ProxyError | None = None
        self._listening = False
        self._on_ready = None
        self.tls_failures: dict[str, str] = {}  # host -> why the upstream TLS handshake failed

    def begin_session(self) -> str:
        """Start recording: make the capture session (a proxy made with ``paused=True`` passes
        traffic through unrecorded until then, so a reachability probe leaves no trace)."""
        from mitmproxy import version

        if self.session_id is None:
            source = f"proxy {self.host}" + (f":{self.port}" if self.port else "")
            self.session_id = self.archive.new_session(self.session_kind, source=source,
                                                       tool=f"webfreeze recorder, mitmproxy {version.VERSION}")
            self.recorder.session_id = self.session_id
        return self.session_id

    def probe(self, url: str, timeout: float = 15) -> None:
        """GET ``url`` through this proxy (its resolver, its certificate policy) without recording
        it; one-line :class:`SiteUnreachable` when the network fails or the site answers 4xx/5xx.
        Redirects are not followed: a site that answers at all with one is reachable."""
        self.recorder.last_failure = None
        try:
            status, reason = self.fetch("GET", url, [("User-Agent", "webfreeze-probe")], timeout=timeout)
        except (OSError, http.client.HTTPException) as exc:
            why = self.recorder.last_failure or str(exc) or type(exc).__name__
            raise SiteUnreachable(f"{url}: unreachable ({_plain_reason(why)}){self.resolve_hint(url)}") from None
        if status >= 400:
            why = self.recorder.last_failure  # the proxy's own 502 for a connection that failed
            if why:
                raise SiteUnreachable(f"{url}: unreachable ({_plain_reason(why)}){self.resolve_hint(url)}")
            raise SiteUnreachable(f"{url}: the site answered {status} {reason}".rstrip())

    def resolve_hint(self, url: str) -> str:
        """When ``--resolve`` was given but names neither the URL's host nor its host:port: a word
        saying so (a typo in the host name sends the crawl to the real network)."""
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port or (443 if parts.scheme == "https" else 80)
        if not self.resolve or not host:
            return ""
        table = {k.lower() for k in self.resolve}
        if host in table or f"{host}:{port}" in table:
            return ""
        return f"; --resolve names {', '.join(sorted(table))}, not {host}{f':{parts.port}' if parts.port else ''}"

    def fetch(self, method: str, url: str, headers=(), body: bytes | None = None, *,
              timeout: float = 15, deadline: float = 120) -> tuple[int, str]:
        """Send one request through this proxy, as a browser would (HTTPS in a CONNECT tunnel,
        trusting the proxy's CA), and return (status, reason); recorded like any other exchange
        once the session has begun. A crawl fetches what its replayed page missed this way, so the
        answer lands in the archive exactly as the browser's would. Network errors raise OSError
        or :class:`http.client.HTTPException`. ``timeout`` bounds each read, ``deadline`` (seconds)
        the whole answer: a stream that never ends raises :class:`TimeoutError` then, and is not
        recorded. Server-sent events (a page keeps them open: Gradio's heartbeat) are listened to
        for :data:`EVENTS_LISTEN_S` at most (``deadline`` if shorter) and recorded as they stand
        (:meth:`flush_open_streams`)."""
        import ssl
        import time

        parts = urlsplit(url)
        path = urlunsplit(("", "", parts.path or "/", parts.query, ""))  # (no fragment: it is the browser's)
        sent = [(k, v) for k, v in headers if k.lower() not in _NOT_FORWARDED and not k.startswith(":")]
        if parts.scheme == "https":
            ctx = ssl.create_default_context(cafile=str(ensure_ca(self.confdir)))  # the proxy's CA
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=timeout, context=ctx)
            conn.set_tunnel(parts.hostname, parts.port or 443)
            target = path
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
            target = urlunsplit((parts.scheme, parts.netloc, "", "", "")) + path  # (absolute form, to a proxy)
        try:
            conn.putrequest(method, target, skip_accept_encoding=True)
            for k, v in sent:
                conn.putheader(k, v)
            if body:
                conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body or None)
            resp = conn.getresponse()
            if is_event_stream(resp.getheader("content-type")):
                self._listen(conn, resp, min(deadline, EVENTS_LISTEN_S))
                return resp.status, resp.reason
            end = time.monotonic() + deadline
            while resp.read1(1 << 16):
                if time.monotonic() > end:
                    raise TimeoutError(f"{STREAM_MISSING} {deadline:g} s: an answer that never ends "
                                       "is never recorded")
            return resp.status, resp.reason
        finally:
            conn.close()

    def _listen(self, conn, resp, seconds: float) -> None:
        """Read server-sent events for ``seconds`` at most (or to their end), then have what came
        recorded as it stands, before the connection closes."""
        import time

        end = time.monotonic() + seconds
        try:
            while (left := end - time.monotonic()) > 0:
                if conn.sock is not None:
                    conn.sock.settimeout(left)
                if not resp.read1(1 << 16):
                    return  # (it ended: recorded as any answer)
        except (TimeoutError, socket.timeout):
            pass
        self.flush_open_streams()

    def flush_open_streams(self, timeout: float = 15) -> int:
        """Record the event streams still coming through this proxy as they stand (on its loop:
        :meth:`ArchiveRecorder.flush_open`); how many. A proxy not running has none."""
        if self._loop is None or not self._listening or self._loop.is_closed():
            return 0

        async def flush() -> int:
            return self.recorder.flush_open()
        try:
            return asyncio.run_coroutine_threadsafe(flush(), self._loop).result(timeout)
        except RuntimeError:  # (the loop stopped meanwhile)
            return 0

    def tls_failed(self, host: str) -> str | None:
        """Why the proxy's TLS handshake with ``host`` failed (its last failure), or None."""
        return self.tls_failures.get(host.lower())

    async def _main(self) -> None:
        from mitmproxy import options
        from mitmproxy.tools.dump import DumpMaster

        try:
            opts = options.Options(listen_host=self.host, listen_port=self.port, confdir=str(self.confdir),
                                   ssl_insecure=True)  # record sites with self-signed certificates too
            master = DumpMaster(opts, with_termlog=False, with_dumper=False)
            # The upstream connection is made once the client's request inside its tunnel is read
            # (not on CONNECT): an HTTPS site that cannot be reached is then a failed exchange under
            # the request's URL, recorded as the proxy's 502, rather than a tunnel refused unseen.
            opts.update(connection_strategy="lazy")
            # A server that cannot listen is reported by _Started as one line (mitmproxy's own check
            # prints to stderr and calls sys.exit).
            errorcheck = master.addons.get("errorcheck")
            if errorcheck is not None:
                master.addons.remove(errorcheck)
                errorcheck.finish()  # its log handler, installed when it was made, would stay for the process
            master.addons.add(_Started(self))
            if self.resolve:  # before the recorder: it names each flow's URL as the client asked
                master.addons.add(_Resolver(self.resolve))
            master.addons.add(self.recorder)
            master.addons.add(_TlsWatch(self))
            self._master = master
            self._loop = asyncio.get_running_loop()
            self._loop.set_exception_handler(_quiet_cancellation)
            if threading.current_thread() is threading.main_thread():
                # Ctrl-C and SIGTERM end the run cleanly: the session is closed, the archive checkpointed.
                for sig in (signal.SIGINT, signal.SIGTERM):
                    self._loop.add_signal_handler(sig, master.shutdown)
            await master.run()
        finally:
            self._ready.set()  # a run that ends before it listened does not leave start() waiting

    def _started(self, port: int | None, exc: BaseException | None) -> None:
        """Called on the proxy's loop once mitmproxy's server listens (``port``) or failed to."""
        if port is None:
            code = getattr(exc, "errno", None)
            reason = ("port already in use" if code == errno.EADDRINUSE else os.strerror(code) if code
                      else str(exc or "mitmproxy started no server"))
            self._failure = ProxyError(f"cannot listen on {self.host}:{self.port}: {reason}")
            self._master.shutdown()
        else:
            self.port = port
            self._listening = True
            if self._on_ready is not None:
                self._on_ready(self)
        self._ready.set()

    def run(self, on_ready=None) -> None:
        """Serve in the foreground until :meth:`stop` (or Ctrl-C in the CLI); ``on_ready(proxy)`` is
        called once it listens (:attr:`port` is then the real one, also when 0 was asked for)."""
        self._on_ready = on_ready
        try:
            asyncio.run(self._main())
        finally:
            if self.session_id is not None:
                self.archive.end_session(self.session_id, {"recorded": self.recorder.recorded,
                                                           "errors": self.recorder.errors})
        if self._failure is not None:
            raise self._failure

    def start(self) -> "RecordingProxy":
        """Serve in a background thread; returns once the proxy listens (port 0: on a port the
        system chose, then in :attr:`port`)."""
        self._thread = threading.Thread(target=self._run_in_thread, name="recording-proxy", daemon=True)
        self._thread.start()
        # (the thread sets _ready however it ends, so this bound is only for a start that hangs: on
        # the 2-core machine with the suite beside it, mitmproxy's start took over 30 s)
        if not self._ready.wait(START_TIMEOUT_S):
            self.stop()
            raise ProxyError(f"the recording proxy did not start within {START_TIMEOUT_S} s")
        if not self._listening:
            self._thread.join(timeout=15)
            raise self._failure or ProxyError("the recording proxy stopped as it started")
        return self

    def _run_in_thread(self) -> None:
        try:
            self.run()
        except (ProxyError, ArchiveError):
            pass  # start() reports the proxy's failure; a thread has no one to tell of the archive's
        except Exception as exc:  # mitmproxy failed to set up: start() reports it in one line
            self._failure = self._failure or ProxyError(f"the recording proxy failed to start: {exc}")
        finally:
            self._ready.set()  # (start() waits for it: a proxy that ended before it listened has failed)

    def stop(self) -> None:
        if self._master is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._master.shutdown)
        if self._thread is not None:
            self._thread.join(timeout=15)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


def _quiet_cancellation(loop: asyncio.AbstractEventLoop, context: dict) -> None:
    """The proxy loop's handler of errors nobody awaited: a connection still open when the proxy
    stops (Ctrl-C with a browser connected) has its task cancelled, and Python 3.11's asyncio
    streams then report that cancellation as an error in a callback (a traceback per connection,
    none of them a failure). Anything else goes to asyncio's own handler."""
    if isinstance(context.get("exception"), asyncio.CancelledError):
        return
    loop.default_exception_handler(context)


def _plain_reason(why: str) -> str:
    """mitmproxy's words for an upstream failure, said for a user."""
    low = why.lower()
    if "unexpected server response" in low or "protocol error" in low or "invalid http" in low:
        return f"the server does not speak HTTP: {why}"
    return why


# Not sent on by RecordingProxy.fetch: http.client writes its own Host, length and connection handling.
_NOT_FORWARDED = frozenset({"host", "content-length", "connection", "keep-alive", "proxy-connection",
                            "transfer-encoding", "te", "upgrade", "trailer"})


class _TlsWatch:
    """mitmproxy addon: remembers, per host name, why a TLS handshake with the upstream server
    failed. A crawl reads it to tell a name Chromium upgraded to HTTPS on its own (an
    HSTS-preloaded name served over plain HTTP) from any other failure."""

    def __init__(self, proxy: RecordingProxy):
        self.proxy = proxy

    def tls_failed_server(self, data) -> None:
        conn = data.conn
        name = conn.sni or (conn.address[0] if conn.address else None)
        if name:
            self.proxy.tls_failures[str(name).lower()] = str(conn.error or "TLS handshake failed")


class _Started:
    """mitmproxy addon: once mitmproxy has brought its server up (or failed to), tells the
    :class:`RecordingProxy` the port it listens on, or why it does not."""

    def __init__(self, proxy: RecordingProxy):
        self.proxy = proxy

    def running(self) -> None:
        servers = list(self.proxy._master.addons.get("proxyserver").servers)  # this proxy's, not ctx's latest
        failed = next((s.last_exception for s in servers if s.last_exception is not None), None)
        ports = [addr[1] for s in servers for addr in s.listen_addrs]
        self.proxy._started(ports[0] if ports and failed is None else None, failed)


class _Resolver:
    """Connects to a fixed address for some host names (like curl's ``--resolve``), so a site on
    loopback is recorded under its real name: the URLs in the archive keep the name and the scheme
    the client used, only the upstream connection goes elsewhere.

    mitmproxy gives a request inside a CONNECT tunnel the host and port of its server connection,
    which after the redirection is the resolved address; so the name each redirected connection
    had is remembered and put back, as the URL to record, on every flow that used it."""

    def __init__(self, table: dict[str, tuple[str, int]]):
        self.table = {k.lower(): v for k, v in table.items()}
        self.names: dict[str, tuple[str, int]] = {}  # server connection id -> (name, port) asked for

    def server_connect(self, data) -> None:
        host, port = data.server.address
        target = self.table.get(f"{host}:{port}".lower()) or self.table.get(str(host).lower())
        if target is not None:
            self.names[data.server.id] = (str(host), int(port))
            data.server.address = target

    def requestheaders(self, flow) -> None:
        """A plain-HTTP request sent to the proxy (in absolute form) names its host itself: it is
        aimed at the resolved address here, before mitmproxy picks a server connection for it, so
        the connection the last request to that address opened is used again. (Redirecting only
        the connection, in :meth:`server_connect`, left mitmproxy looking for a connection to the
        name, never finding one: every request opened another, and a keep-alive server with a
        thread per connection stopped answering.) The Host header and the recorded URL keep the
        name."""
        req = flow.request
        if req.scheme != "http":
            return  # HTTPS comes through a CONNECT tunnel: server_connect redirects its connection
        target = self.table.get(f"{req.host}:{req.port}".lower()) or self.table.get(req.host.lower())
        if target is None:
            return
        flow.metadata["webfreeze_url"] = url_of(req.scheme, req.host, req.port, req.path)
        host_header = req.host_header
        req.host, req.port = target
        req.host_header = host_header

    def _name(self, flow) -> None:
        server = flow.server_conn
        asked = self.names.get(server.id) if server is not None else None
        req = flow.request
        if asked is None or req is None or server.address is None:
            return
        if (req.host, req.port) != tuple(server.address):
            return  # an absolute-form request (plain HTTP through the proxy) already names its host
        name, port = asked
        host = f"[{name}]" if ":" in name else name
        default = 443 if req.scheme == "https" else 80
        flow.metadata["webfreeze_url"] = f"{req.scheme}://{host}{'' if port == default else f':{port}'}{req.path}"

    def response(self, flow) -> None:
        self._name(flow)

    def error(self, flow) -> None:
        self._name(flow)
