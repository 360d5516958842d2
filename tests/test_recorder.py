"""The recording proxy on real mitmproxy: HTTP and HTTPS on loopback, large bodies, crash safety."""

from __future__ import annotations

import datetime as dt
import gzip
import http.server
import os
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


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private WEBFREEZE_HOME, so the test's CA never touches the user's."""
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def proxy(tmp_path, home):
    from webfreeze.recorder.proxy import RecordingProxy, open_for_recording

    arc = open_for_recording(tmp_path / "rec.wfz")
    p = RecordingProxy(arc, port=free_port()).start()
    yield p
    p.stop()
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
    rows = {(r["method"], r["url"][len(base):]): r for r in rows_of(arc)}
    assert len(rows) == 6
    home_row = rows[("GET", "/")]
    assert arc.get_blob(home_row["payload"]) == got["/"][1]  # exactly the bytes the client got
    assert gzip.decompress(got["/"][1]).startswith(b"<!DOCTYPE html>")
    assert ("Content-Encoding", "gzip") in arc.headers(home_row, "resp_headers")
    assert ("Accept-Encoding", "gzip") in arc.headers(home_row, "req_headers")
    assert ("Content-Encoding", "br") in arc.headers(rows[("GET", "/static/app.js?v=1")], "resp_headers")
    assert rows[("GET", "/list/cs")]["status"] == 301
    p = rows[("POST", "/prefs")]
    assert p["body_key"] == "form:next=%2Fhelp&theme=dark" and arc.get_blob(p["req_body"]) == b"theme=dark&next=%2Fhelp"
    assert rows[("GET", "/api/stats?_=1700000000000")]["mime"] == "application/json"
    assert len({r["session_id"] for r in rows.values()}) == 1
    assert verify(arc).ok


def _self_signed(tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
    import ipaddress

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
    arc = proxy.archive
    rows = {r["url"]: r for r in rows_of(arc)}
    assert arc.get_blob(rows[url + "/secret"]["payload"]) == b"secret page over TLS"
    assert rows[url + "/big"]["payload_size"] == len(BIG) and arc.get_blob(rows[url + "/big"]["payload"]) == BIG


def test_sigkill_keeps_every_completed_exchange(tmp_path, home):
    site = serve("scholar")
    port = free_port()
    archive = tmp_path / "killed.wfz"
    env = {**os.environ, "WEBFREEZE_HOME": str(home)}
    proc = subprocess.Popen([sys.executable, "-m", "webfreeze", "record", "proxy", "--archive", str(archive),
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
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
        assert verify(arc).ok


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
