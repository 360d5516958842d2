"""The replay server's WebSockets (`replay serve`, a worker's socket in the agent environment)
keep the rule's waits: a push the recording got after a state-changing request of the session
(marimo: a widget's POST, answered on the socket) is not sent at the handshake; it comes right
after the server has answered that request as recorded, on the socket already open."""

from __future__ import annotations

import http.client
import socket
from datetime import datetime, timezone

from ws_recording import handshake

from webfreeze.archives import Archive, Exchange
from webfreeze.replayer.server import ReplayServer

SITE = "http://waits.test"
T0 = 1767225600.0  # 2026-01-01T00:00:00Z


def _at(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat().replace("+00:00", "Z")


def _frames(sock: socket.socket, buffer: bytearray, n: int) -> list[str]:
    """The next ``n`` text frames the server sends (unmasked, short: a 7-bit length)."""
    out = []
    while len(out) < n:
        while len(buffer) < 2 or len(buffer) < 2 + (buffer[1] & 0x7F):
            chunk = sock.recv(4096)
            assert chunk, f"the socket closed after {out}"
            buffer += chunk
        size = buffer[1] & 0x7F
        assert buffer[0] == 0x81 and size < 126, bytes(buffer[:4])
        out.append(bytes(buffer[2:2 + size]).decode())
        del buffer[:2 + size]
    return out


def test_a_push_after_an_action_comes_once_the_server_has_answered_it(tmp_path):
    path = tmp_path / "waits.wfz"
    with Archive.create(path) as arc:
        sid = arc.new_session("session", source="test")
        arc.add_exchange(Exchange(url=SITE + "/api/set", method="POST", req_body=b"name=Ada",
                                  req_headers=[("Content-Type", "application/x-www-form-urlencoded")],
                                  captured_at=_at(T0 + 10), status=200, reason="OK", payload=b"ok",
                                  resp_headers=[("Content-Type", "text/plain")], session_id=sid))
        arc.put_document(f"websocket/{sid}/ws.json", {
            "version": 1, "url": "ws://waits.test/ws", "opened": T0 + 1, "closed_by_client": None, "close_code": None,
            "messages": [{"from_client": False, "type": "text", "time": T0 + 2, "content": "rendered"},
                         {"from_client": False, "type": "text", "time": T0 + 11, "content": "Hello, Ada!"},
                         {"from_client": False, "type": "text", "time": T0 + 12, "content": "done"}]})
    with ReplayServer(path, mode="direct", port=0, miss_report=None, confdir=tmp_path / "ca") as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as ws:
            head, rest = handshake(ws, "/2026id_/ws://waits.test/ws")
            assert head.startswith(b"HTTP/1.1 101"), head
            buffer = bytearray(rest)
            assert _frames(ws, buffer, 1) == ["rendered"]
            ws.settimeout(0.5)  # (what the handshake's answer wrote has come: nothing more is on its way)
            try:
                early = ws.recv(4096)
            except TimeoutError:
                early = b""
            assert bytes(buffer) + early == b"", bytes(buffer) + early
            ws.settimeout(30)
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            conn.request("POST", "/2026id_/" + SITE + "/api/set", body=b"name=Ada",
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
            answer = conn.getresponse()
            assert (answer.status, answer.read(), answer.getheader("X-Webfreeze-Match")) == (200, b"ok", "exact")
            conn.close()
            assert _frames(ws, buffer, 2) == ["Hello, Ada!", "done"]


def test_a_direct_mode_socket_the_page_built_from_its_http_address_is_named_ws(tmp_path):
    # Streamlit builds its socket's URL from its own address: in direct mode the shim's prefix holds
    # http://streamlit.test/_stcore/stream; `replay serve`'s miss report named it so, where the
    # check and the docs say ws://
    path = tmp_path / "none.wfz"
    with Archive.create(path) as arc:
        arc.new_session("session", source="test")
    with ReplayServer(path, mode="direct", port=0, miss_report=None, confdir=tmp_path / "ca") as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as ws:
            head, _ = handshake(ws, "/2026/http://waits.test/_stcore/stream")
        assert head.startswith(b"HTTP/1.1 404"), head
        assert [m["url"] for m in server.misses] == ["ws://waits.test/_stcore/stream"]
