"""The recording proxy on real mitmproxy: HTTP and HTTPS on loopback, large bodies, crash safety."""

from __future__ import annotations

import datetime as dt
import gzip
import http.server
import json
import logging
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from urllib.parse import urlencode

import pytest

from webfreeze.archives import Archive
from webfreeze.archives.verify import verify
from webfreeze.simulator.sites import serve


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


def recorder_process(archive, port: int, home, *, stdout) -> subprocess.Popen:
    """`webfreeze record proxy` in its own process, returned once it listens."""
    env = {**os.environ, "WEBFREEZE_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "webfreeze", "record", "proxy", "--archive", str(archive),
                             "--port", str(port)], env=env, stdout=stdout, stderr=subprocess.PIPE, text=True)
    try:
        if port == 0:  # the system's choice, as the first line says
            first = proc.stderr.readline()
            match = re.search(r"through proxy http://127\.0\.0\.1:(\d+) ", first)
            assert match and int(match.group(1)) > 0, first
            port = int(match.group(1))
        wait_listening(port)
    except AssertionError:
        proc.kill()
        raise
    proc.port = port
    return proc


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private WEBFREEZE_HOME, so the test's CA never touches the user's."""
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def proxy(tmp_path, home):
    from webfreeze.recorder.proxy import RecordingProxy, open_for_recording

    arc = open_for_recording(tmp_path / "rec.wfz")
    p = RecordingProxy(arc, port=0).start()  # mitmproxy binds a port of the system's choice
    yield p
    p.stop()
    arc.close()


def test_port_zero_is_read_back_from_mitmproxy(proxy):
    assert proxy.port > 0 and proxy.url == f"http://127.0.0.1:{proxy.port}"
    with socket.socket() as s:  # it is really taken (by the proxy)
        with pytest.raises(OSError):
            s.bind(("127.0.0.1", proxy.port))
    (source,) = proxy.archive.conn.execute("SELECT source FROM sessions").fetchone()
    assert source == "proxy 127.0.0.1"


def test_a_proxy_starts_again_on_the_port_it_just_served(tmp_path, home):
    """`record proxy` stopped (Ctrl-C) after serving a client leaves its port's last connections in
    TIME_WAIT for a minute; the port is free all the same (mitmproxy's listener reuses it), so the
    proxy started again on it at once records, where the port check refused it ("port already in
    use") until the minute was over."""
    site = serve("scholar")
    port = free_port()
    try:
        for n in range(2):
            proc = recorder_process(tmp_path / f"rec{n}.wfz", port, home, stdout=subprocess.DEVNULL)
            try:
                assert fetch(opener(f"http://127.0.0.1:{port}"), f"{site.url}/")[0] == 200
            finally:
                proc.send_signal(signal.SIGINT)
                _, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err
        with Archive.open(tmp_path / "rec1.wfz") as arc:
            assert arc.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 1
    finally:
        site.stop()


def test_a_port_taken_after_the_check_fails_start_in_one_line(tmp_path, home):
    """Free when the proxy is made, taken before mitmproxy binds it (the race any port chosen in
    advance has): start() raises the reason, the thread is gone and the session is ended."""
    from webfreeze.recorder.errors import ProxyError
    from webfreeze.recorder.proxy import RecordingProxy, open_for_recording

    arc = open_for_recording(tmp_path / "rec.wfz")
    port = free_port()
    p = RecordingProxy(arc, port=port)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen(1)
        with pytest.raises(ProxyError) as err:  # the recorder's error, not the archive's
            p.start()
    assert str(err.value) == f"cannot listen on 127.0.0.1:{port}: port already in use"
    assert not p._thread.is_alive()
    # mitmproxy's start-up error check, taken out of the proxy, left no log handler behind
    from mitmproxy.addons.errorcheck import ErrorCheckHandler

    assert not [h for h in logging.getLogger().handlers if isinstance(h, ErrorCheckHandler)]
    (session,) = arc.conn.execute("SELECT source, ended_at FROM sessions")
    assert session["source"] == f"proxy 127.0.0.1:{port}" and session["ended_at"]
    arc.close()


def opener(proxy_url: str, cafile=None):
    handlers = [urllib.request.ProxyHandler({"http": proxy_url, "https": proxy_url})]
    if cafile:
        handlers.append(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=str(cafile))))

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    return urllib.request.build_opener(NoRedirect, *handlers)


def fetch(op, url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with op.open(req, timeout=20) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:  # 3xx/4xx arrive here with redirects disabled
        return exc.code, exc.read()


def rows_of(arc: Archive):
    return list(arc.exchanges())


def wait_recorded(proxy, count: int, timeout: float = 60) -> None:
    """Wait until the proxy's recorder has stored (or failed to store) ``count`` exchanges."""
    rec = proxy.recorder
    deadline = time.monotonic() + timeout
    while rec.recorded + rec.errors < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"the proxy stored {rec.recorded} of {count} exchanges "
                                 f"({rec.errors} failed) within {timeout:.0f} s")
        time.sleep(0.05)


def test_records_a_browsing_session_on_scholar(proxy):
    site = serve("scholar")
    try:
        op = opener(proxy.url)
        base = site.url
        got = {}
        for path, headers in [("/", {"Accept-Encoding": "gzip"}), ("/static/app.js?v=1", {"Accept-Encoding": "br"}),
                              ("/list/cs", {}), ("/search?query=graph&searchtype=title", {}),
                              ("/api/stats?_=1700000000000", {})]:
            got[path] = fetch(op, base + path, headers=headers)
        post = fetch(op, base + "/prefs", data=urlencode({"theme": "dark", "next": "/help"}).encode(),
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert post[0] == 303 and got["/list/cs"][0] == 301
    finally:
        site.stop()
    arc = proxy.archive
    rows = {(r.method, r.url[len(base):]): r for r in rows_of(arc)}
    assert len(rows) == 6
    home_row = rows[("GET", "/")]
    assert home_row.payload() == got["/"][1]  # exactly the bytes the client got
    assert gzip.decompress(got["/"][1]).startswith(b"<!DOCTYPE html>")
    assert ("Content-Encoding", "gzip") in home_row.headers
    assert ("Accept-Encoding", "gzip") in home_row.request.headers
    assert ("Content-Encoding", "br") in rows[("GET", "/static/app.js?v=1")].headers
    assert rows[("GET", "/list/cs")].status == 301
    p = rows[("POST", "/prefs")]
    assert p.body_key == "form:next=%2Fhelp&theme=dark" and p.request.payload() == b"theme=dark&next=%2Fhelp"
    assert rows[("GET", "/api/stats?_=1700000000000")].mime == "application/json"
    assert len({r.session_id for r in rows.values()}) == 1
    assert verify(arc.path).ok


def _self_signed(tmp_path):
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "loopback test server")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "server.pem", tmp_path / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


BIG = os.urandom(6 << 20)


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = BIG if self.path == "/big" else b"secret page over TLS"
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream" if self.path == "/big" else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_https_with_its_own_certificate_and_a_streamed_large_body(proxy, tmp_path):
    cert_file, key_file = _self_signed(tmp_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_file, key_file)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        from webfreeze.recorder.proxy import ensure_ca

        op = opener(proxy.url, cafile=ensure_ca(proxy.confdir))  # the client trusts our recording CA
        url = f"https://127.0.0.1:{server.server_address[1]}"
        assert fetch(op, url + "/secret") == (200, b"secret page over TLS")
        status, big = fetch(op, url + "/big")
        assert status == 200 and big == BIG
    finally:
        server.shutdown()
        server.server_close()
    # A body over the stream threshold reaches the client before mitmproxy calls the response hook
    # that stores it, so the /big row can lag the bytes (on a loaded machine, by seconds).
    wait_recorded(proxy, 2)
    arc = proxy.archive
    rows = {r.url: r for r in rows_of(arc)}
    assert rows[url + "/secret"].payload() == b"secret page over TLS"
    assert rows[url + "/big"].response.payload_size == len(BIG) and rows[url + "/big"].payload() == BIG


def test_sigkill_keeps_every_completed_exchange(tmp_path, home):
    site = serve("scholar")
    port = free_port()
    archive = tmp_path / "killed.wfz"
    proc = recorder_process(archive, port, home, stdout=subprocess.DEVNULL)
    try:
        op = opener(f"http://127.0.0.1:{port}")
        done = 0
        for i in range(25):
            status, _ = fetch(op, f"{site.url}/search?query=graph&start={i}")
            assert status == 200
            done += 1
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        site.stop()
    with Archive.open(archive) as arc:
        assert arc.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0] == done
        assert verify(arc.path).ok


def test_bad_input_is_one_line(tmp_path, home, cli):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = cli("record", "proxy", "--archive", tmp_path / "a.wfz", "--port", port)
    assert r.returncode == 1 and r.stderr.strip() == f"webfreeze: error: cannot listen on 127.0.0.1:{port}: port already in use"
    r = cli("record", "proxy", "--archive", tmp_path / "missing-dir" / "a.wfz", "--port", free_port())
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "no such directory" in r.stderr
    assert not (tmp_path / "a.wfz").exists()


class _Statuses(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/cached":
            self.send_response(304)
            self.send_header("ETag", '"v1"')
            self.end_headers()
            return
        code = 500 if self.path == "/broken" else 404
        body = b"server trouble" if code == 500 else b"not here"
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_304s_errors_and_upstream_failures_are_kept(proxy):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Statuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    dead = free_port()  # nothing listens there
    try:
        op = opener(proxy.url)
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert fetch(op, base + "/cached", headers={"If-None-Match": '"v1"'})[0] == 304
        assert fetch(op, base + "/broken") == (500, b"server trouble")
        assert fetch(op, base + "/missing")[0] == 404
        assert fetch(op, f"http://127.0.0.1:{dead}/gone")[0] == 502
    finally:
        server.shutdown()
        server.server_close()
    rows = {r.url: r for r in rows_of(proxy.archive)}
    assert rows[base + "/cached"].status == 304
    assert rows[base + "/broken"].status == 500
    assert rows[base + "/broken"].payload() == b"server trouble"
    assert rows[base + "/missing"].status == 404
    failed = rows[f"http://127.0.0.1:{dead}/gone"]
    assert failed.status == 502 and "error" in failed.extra


def test_an_https_upstream_failure_is_kept_under_its_url(proxy):
    """A page's request to an HTTPS site that cannot be reached (Wagtail's admin asks
    https://releases.wagtail.org/latest.txt, offline here) is kept as the 502 the client got,
    under its own URL, as a plain-HTTP one is: a replay then answers it as the recording did, and
    `tasks validate` does not call the task an incomplete capture for a request the site never
    answered. (The proxy used to try the upstream on CONNECT, before the request inside the
    tunnel existed, so nothing named it.)"""
    from webfreeze.recorder.proxy import ensure_ca

    dead = free_port()  # nothing listens there
    op = opener(proxy.url, cafile=ensure_ca(proxy.confdir))
    url = f"https://127.0.0.1:{dead}/latest.txt"
    try:
        status = fetch(op, url)[0]
    except urllib.error.URLError:
        status = None  # the tunnel itself refused: the client never sent its request
    if status == 502:
        wait_recorded(proxy, 1, timeout=10)
    rows = {r.url: r for r in rows_of(proxy.archive)}
    assert status == 502
    assert url in rows, sorted(rows)
    assert rows[url].status == 502 and "error" in rows[url].extra


class _Held(http.server.BaseHTTPRequestHandler):
    """``/held`` answers only once ``release`` is set (``asked`` says the request arrived); any other
    path at once."""
    asked = threading.Event()
    release = threading.Event()

    def do_GET(self):
        if self.path == "/held":
            type(self).asked.set()
            type(self).release.wait(20)
        body = b"here " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_request_its_client_gave_up_on_is_not_kept_as_a_failure(proxy):
    """A client that closes its connection before the answer (a page's script dropping an image it
    asked for) is not the site failing: nothing is kept for it, not a 502 that a replay would then
    give a page that waits for the answer, and it is not counted among upstream failures."""
    _Held.asked.clear()
    _Held.release.clear()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Held)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        host, port = proxy.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as client:
            client.sendall(f"GET {base}/held HTTP/1.1\r\nHost: {base[7:]}\r\n\r\n".encode())
            assert _Held.asked.wait(20), "the request never reached the site"
        # (closed unanswered)
        deadline = time.monotonic() + 20
        while not proxy.recorder.abandoned and time.monotonic() < deadline:
            time.sleep(0.05)
        _Held.release.set()
        assert fetch(opener(proxy.url), base + "/after") == (200, b"here /after")
        wait_recorded(proxy, 1)
    finally:
        _Held.release.set()
        server.shutdown()
        server.server_close()
    assert proxy.recorder.abandoned == [f"GET {base}/held"]
    assert [r.url for r in rows_of(proxy.archive)] == [base + "/after"]
    assert proxy.recorder.failures == 0 and proxy.recorder.upstream_failures == {}


@pytest.mark.parametrize("sig, port", [(signal.SIGINT, "free"), (signal.SIGTERM, "0")])
def test_a_signal_flushes_and_closes(tmp_path, home, sig, port):
    """Ctrl-C or SIGTERM: the session is ended, the archive checkpointed (with --port 0 the system
    picks the port and the first line names it)."""
    site = serve("scholar")
    archive = tmp_path / "interrupted.wfz"
    proc = recorder_process(archive, free_port() if port == "free" else 0, home, stdout=subprocess.PIPE)
    try:
        op = opener(f"http://127.0.0.1:{proc.port}")
        for path in ("/", "/about", "/help"):
            assert fetch(op, site.url + path)[0] == 200
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        site.stop()
    assert proc.returncode == 0, err
    assert "recorded 3 exchanges" in err
    assert not os.path.exists(f"{archive}-wal") or os.path.getsize(f"{archive}-wal") == 0  # checkpointed
    with Archive.open(archive) as arc:
        (session,) = list(arc.conn.execute("SELECT * FROM sessions"))
        assert session["ended_at"] and json.loads(session["info"])["recorded"] == 3
        assert sorted(r[0] for r in arc.conn.execute("SELECT url FROM exchanges")) == sorted(
            site.url + p for p in ("/", "/about", "/help"))


def test_ctrl_c_with_a_stream_still_open_records_it_and_prints_no_traceback(tmp_path, home):
    """A client still reading server-sent events when the proxy is stopped: mitmproxy cancels its
    connection, which Python's asyncio reported as an error, a traceback per connection. Now the
    proxy stops with its one line, and the events that had come are recorded (open_stream)."""
    from http.server import ThreadingHTTPServer

    from test_fetch_stream import Heartbeat

    server = ThreadingHTTPServer(("127.0.0.1", 0), Heartbeat)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/events/1"
    archive = tmp_path / "open.wfz"
    proc = recorder_process(archive, 0, home, stdout=subprocess.PIPE)
    try:
        conn = socket.create_connection(("127.0.0.1", proc.port), timeout=10)
        conn.sendall(f"GET {url} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".encode())
        got = b""
        while got.count(b"event: heartbeat") < 2:  # (the stream is flowing through the proxy)
            got += conn.recv(65536)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        conn.close()
    finally:
        if proc.poll() is None:
            proc.kill()
        server.shutdown()
        server.server_close()
    assert proc.returncode == 0 and "Traceback" not in err and "recorded 1 exchange" in err, err
    with Archive.open(archive) as arc:
        [ex] = list(arc.exchanges())
        assert ex.url == url and ex.extra.get("open_stream") is True, ex.extra
        assert ex.response.payload().startswith(b"event: heartbeat\ndata: {}\n\n")


def _ws_echo_server():
    """A WebSocket echo server on loopback, built on wsproto (the library mitmproxy uses)."""
    import wsproto
    from wsproto.events import AcceptConnection, CloseConnection, Message, Request, TextMessage

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def serve_one(conn):
        ws = wsproto.WSConnection(wsproto.ConnectionType.SERVER)
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                ws.receive_data(data)
                for event in ws.events():
                    if isinstance(event, Request):
                        conn.sendall(ws.send(AcceptConnection()))
                    elif isinstance(event, Message):
                        conn.sendall(ws.send(TextMessage(data=f"echo: {event.data}")))
                    elif isinstance(event, CloseConnection):
                        conn.sendall(ws.send(event.response()))
                        return

    def loop():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return listener


def test_websocket_messages_are_stored(proxy):
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import BrowserUnavailable, chromium_path, launch_chromium, new_context

    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    listener = _ws_echo_server()
    site = serve("scholar")
    port = listener.getsockname()[1]
    try:
        with sync_playwright() as pw:
            browser = launch_chromium(pw, proxy=proxy.url)
            page = new_context(browser).new_page()
            page.goto(site.url + "/about")
            reply = page.evaluate("""port => new Promise((resolve, reject) => {
                const ws = new WebSocket('ws://127.0.0.1:' + port + '/chat');
                ws.onopen = () => ws.send('hello');
                ws.onmessage = (e) => { ws.close(); resolve(e.data); };
                ws.onerror = () => reject('websocket error');
                setTimeout(() => reject('timeout'), 120000);  // (a safety net: the echo is local)
            })""", port)
            page.wait_for_timeout(500)
            browser.close()
    finally:
        listener.close()
        site.stop()
    assert reply == "echo: hello"
    # stored when mitmproxy sees the connection end, after the browser closed it (later on a loaded machine)
    deadline = time.monotonic() + 120
    docs = []
    while time.monotonic() < deadline and not docs:
        docs = [n for n in proxy.archive.document_names() if n.startswith("websocket/")]
        time.sleep(0.1)
    assert len(docs) == 1
    doc = proxy.archive.get_document(docs[0])
    assert doc["url"] == f"ws://127.0.0.1:{port}/chat" or doc["url"].endswith(f"127.0.0.1:{port}/chat")
    assert [(m["from_client"], m["content"]) for m in doc["messages"]] == [(True, "hello"), (False, "echo: hello")]
