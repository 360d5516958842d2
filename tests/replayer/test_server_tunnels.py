"""``CONNECT`` tunnels of the replay server's proxy mode, on a real loopback server: what the client
sends first decides (a TLS handshake, byte 0x16, is terminated; anything else is plain HTTP,
``http://host[:port]``'s, as Chromium sends a ``ws://`` socket through a proxy); a tunnel that ends
without a request the server could read is a miss with its reason, never dropped unsaid. Chromium's
own ``ws://`` sockets through the proxy: tests/recorder/test_websocket_pages.py; a worker's:
tests/simulator/test_env_worker_sockets.py."""

from __future__ import annotations

import socket
import ssl
import time

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.replayer.server import ReplayServer

SITE = "tunnel.test"


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("tunnels") / "tunnels.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_server_tunnels")
        for url, body in ((f"http://{SITE}/plain.txt", "plain"), (f"http://{SITE}:8080/port.txt", "port 8080"),
                          (f"https://{SITE}/secure.txt", "secure")):
            arc.add_exchange(Exchange(url=url, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", "text/plain")], payload=body.encode(),
                                      session_id=sid))
    return path


@pytest.fixture
def server(archive, tmp_path):
    srv = ReplayServer(archive, mode="proxy", header_timeout=1.0, confdir=tmp_path / "ca").start()
    try:
        yield srv
    finally:
        srv.stop()


def _tunnel(server, target: str) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    conn.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    assert conn.recv(100) == b"HTTP/1.1 200 Connection established\r\n\r\n"
    return conn


def _read_all(conn) -> bytes:
    data = b""
    while chunk := conn.recv(4096):
        data += chunk
    return data


def _get(conn, path: str, host: str) -> bytes:
    conn.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    return _read_all(conn)


def _misses(server, n: int) -> list[tuple[str, str, str]]:
    for _ in range(100):  # (the server counts a tunnel's end from its own thread)
        if len(server.misses) >= n:
            break
        time.sleep(0.05)
    return [(m["method"], m["url"], m.get("why")) for m in server.misses]


def test_plain_http_inside_a_tunnel_is_the_tunnel_host_s(server):
    answer = _get(_tunnel(server, f"{SITE}:80"), "/plain.txt", SITE)
    assert answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"\r\n\r\nplain"), answer
    answer = _get(_tunnel(server, f"{SITE}:8080"), "/port.txt", f"{SITE}:8080")
    assert answer.endswith(b"\r\n\r\nport 8080") and b"X-Webfreeze-Match: exact" in answer, answer
    # TLS in a tunnel as before: the server's certificate for the host, the requests https://host's
    ctx = ssl.create_default_context(cafile=str(server.ca_file))
    with ctx.wrap_socket(_tunnel(server, f"{SITE}:443"), server_hostname=SITE) as tls:
        assert _get(tls, "/secure.txt", SITE).endswith(b"\r\n\r\nsecure")
    assert server.misses == [] and server.stats["hits"] == 3


def test_a_tunnel_without_a_readable_request_is_a_miss_with_its_reason(server):
    # garbage in a plain tunnel: answered 400 and counted
    conn = _tunnel(server, f"{SITE}:81")
    conn.sendall(b"\x00\x01 not HTTP\r\n\r\n")
    assert b" 400 " in _read_all(conn)
    # a TLS record that is no handshake the server can finish
    conn = _tunnel(server, f"{SITE}:443")
    conn.sendall(b"\x16\x03\x01\x00\x04\xff\xff\xff\xff")
    _read_all(conn)
    # nothing sent: the tunnel ends (closed by the client), and one that stays silent
    _tunnel(server, f"{SITE}:82").close()
    silent = _tunnel(server, f"{SITE}:83")
    # half a request, then the end
    conn = _tunnel(server, f"{SITE}:84")
    conn.sendall(b"GET /plain.txt HT")
    conn.close()
    misses = dict((url, (method, why)) for method, url, why in _misses(server, 5))
    silent.close()
    assert set(misses) == {f"{SITE}:81", f"{SITE}:443", f"{SITE}:82", f"{SITE}:83", f"{SITE}:84"}, misses
    assert all(method == "CONNECT" and "\n" not in why for method, why in misses.values())
    assert misses[f"{SITE}:81"][1] == "the tunnel carried no request the server could read (malformed HTTP request)"
    assert misses[f"{SITE}:443"][1].startswith("the tunnel's TLS handshake failed: ")
    assert "Error" not in misses[f"{SITE}:443"][1]  # (a sentence, not an exception's class)
    assert misses[f"{SITE}:82"][1] == "the tunnel ended before it carried a request"
    assert misses[f"{SITE}:83"][1] == "the tunnel sent nothing for 1 s"
    assert misses[f"{SITE}:84"][1] == "the tunnel ended in the middle of a request"
    assert server.stats["misses"] == 5


def test_chromium_turning_the_certificate_down_first_is_no_miss(server):
    """Chromium told to ignore certificate errors (every browser webfreeze starts) turns the
    replay's certificate down on its first handshake with a host, then tunnels again and takes it
    (measured): the refusal is counted apart, the page is whole, and the server has no miss."""
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import BrowserUnavailable, chromium_path, launch_chromium, new_context

    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    with sync_playwright() as pw:
        browser = launch_chromium(pw, proxy=server.url, shell=True)
        try:
            page = new_context(browser).new_page()
            page.goto(f"https://{SITE}/secure.txt")
            assert page.inner_text("body") == "secure"
        finally:
            browser.close()
    assert server.misses == [] and server.stats["tls_refused"] == 1, (server.misses, server.stats)
