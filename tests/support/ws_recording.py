"""A WebSocket's recording as recorder/addon.py writes one (a ``websocket/`` document), for tests that
build archives by hand: a rally, the server sending 0 and answering each number the page sends back
with the next, ``rounds`` times; the client never closing."""

from __future__ import annotations


def rally_recording(url: str, rounds: int, opened: float) -> dict:
    messages = [{"from_client": False, "type": "text", "content": "0", "time": opened}]
    for n in range(rounds):
        messages += [{"from_client": True, "type": "text", "content": str(n), "time": opened + n + 0.1},
                     {"from_client": False, "type": "text", "content": str(n + 1), "time": opened + n + 0.2}]
    return {"version": 1, "url": url, "opened": opened, "closed_by_client": None, "close_code": None,
            "messages": messages}


def handshake(sock, path: str) -> tuple[bytes, bytes]:
    """Send a WebSocket handshake for ``path`` (a replay server's, on connected ``sock``); the
    answer's head and whatever came after it with the same reads."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
                 + b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                   b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    head, _, rest = got.partition(b"\r\n\r\n")
    return head, rest
