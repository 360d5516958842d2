"""A replay server that holds up: slow clients cannot starve others (a header read timeout, a cap
on connections under the descriptor limit, the longest-waiting connection giving way), and a body
whose gzip coding expands to 1 GiB is decoded in bounded memory while other requests are answered."""

from __future__ import annotations

import re
import resource
import socket
import subprocess
import sys
import threading
import time
import zlib

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.replayer.server import ReplayServer

T0 = "2024-03-01T12:00:00Z"
TS = "20240301120000"


def _archive(path, extra=()):
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_replay_limits")
        arc.add_exchange(Exchange(url="http://site.test/ok", captured_at=T0, status=200, payload=b"the answer",
                                  resp_headers=[("Content-Type", "text/plain")], session_id=sid))
        for ex in extra:
            arc.add_exchange(Exchange(session_id=sid, captured_at=T0, **ex))
    return path


def _get(port: int, path: str, timeout: float = 60) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(1 << 16):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def _serve(archive, nofile: int | None = None):
    """``replay serve --mode direct`` in a subprocess (its descriptor limit lowered to ``nofile``);
    (process, port)."""
    limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
    proc = subprocess.Popen([sys.executable, "-m", "webfreeze", "replay", "serve", str(archive), "--mode", "direct",
                             "--port", "0", "--miss-report", str(archive) + ".misses.jsonl"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, preexec_fn=limit)
    line = proc.stderr.readline()
    m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
    if not m:
        proc.kill()
        pytest.fail(f"replay serve did not start: {line}{proc.stderr.read()}")
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # (never blocks on a full pipe)
    return proc, int(m.group(1))


def _stop(proc):
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_slow_clients_past_the_descriptor_limit_do_not_starve_others(tmp_path):
    archive = _archive(tmp_path / "a.wfz")
    nofile, slow = 256, 300  # (as 1,100 slow connections against 1,024 descriptors)
    proc, port = _serve(archive, nofile)
    socks = []
    try:
        for _ in range(slow):  # each sends half a request and then nothing
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.sendall(b"GET /" + TS.encode() + b"/http://site.test/ok HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        answers = [_get(port, f"/{TS}/http://site.test/ok") for _ in range(20)]
        assert answers == [(200, b"the answer")] * 20
        assert proc.poll() is None
        # the slow ones given way were told why, in one line
        told = 0
        for s in socks[:60]:
            s.settimeout(30)
            try:
                data = s.recv(4096)
            except OSError:
                continue
            told += data.startswith(b"HTTP/1.1 408")
        assert told > 0
    finally:
        for s in socks:
            s.close()
        _stop(proc)


def test_a_header_that_never_ends_times_out_and_others_go_on(tmp_path):
    archive = _archive(tmp_path / "a.wfz")
    with ReplayServer(archive, mode="direct", miss_report=None, header_timeout=0.5, max_connections=8) as srv:
        slow = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        slow.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        data = slow.recv(4096)  # the sweeper closes it with a 408
        assert data.startswith(b"HTTP/1.1 408") and slow.recv(4096) == b""
        slow.close()
        # a full server (8 connections that sent nothing) gives the longest-waiting one's place to a new one
        idle = [socket.create_connection(("127.0.0.1", srv.port), timeout=30) for _ in range(8)]
        assert _get(srv.port, f"/{TS}/http://site.test/ok") == (200, b"the answer")  # an idle one gave way
        for s in idle:
            s.close()
        assert srv.stats.get("timeouts", 0) >= 1 and srv.stats.get("evicted", 0) >= 1


def _read_answer(sock: socket.socket) -> tuple[int, bytes]:
    """One answer on a kept-alive connection (status, body by its Content-Length)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        assert chunk, f"closed before an answer: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    size = int(re.search(rb"(?i)\r\ncontent-length:\s*(\d+)", head).group(1))
    while len(body) < size:
        body += sock.recv(4096)
    return int(head.split(b" ", 2)[1]), body


def test_header_timeout_runs_per_request_and_spares_a_slow_body(tmp_path):
    """On a kept-alive connection the header timeout starts again with the next request's first
    byte (one that stalls is cut off with a 408), and once a request's headers are in, a body that
    comes in slower than the header timeout is read to its end and answered."""
    archive = _archive(tmp_path / "a.wfz")
    with ReplayServer(archive, mode="direct", miss_report=None, header_timeout=0.5, max_connections=8) as srv:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
            ask = f"GET /{TS}/http://site.test/ok HTTP/1.1\r\nHost: x\r\n\r\n".encode()
            s.sendall(ask)
            assert _read_answer(s) == (200, b"the answer")
            time.sleep(1.5)  # idle between requests: not a header timeout (no byte of a request yet)
            s.sendall(ask)
            assert _read_answer(s) == (200, b"the answer")
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # a second request whose headers never end
            assert s.recv(4096).startswith(b"HTTP/1.1 408")
        assert srv.stats.get("timeouts", 0) == 1
        with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as s:
            s.sendall(f"POST /{TS}/http://site.test/ok HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n".encode())
            for byte in b"abcd":  # 2 s for the body: four times the header timeout
                time.sleep(0.5)
                s.sendall(bytes([byte]))
            status, _ = _read_answer(s)
            assert status != 408
        assert srv.stats.get("timeouts", 0) == 1


def test_a_client_that_reads_nothing_gives_its_place_up(tmp_path):
    """A client that asks for a large answer and reads none of it (the server's writes stay paused)
    is closed after the write timeout, so such clients cannot fill the server."""
    size = 32 << 20
    archive = _archive(tmp_path / "a.wfz", [{"url": "http://site.test/big", "status": 200, "payload": bytes(size),
                                             "resp_headers": [("Content-Type", "application/octet-stream")]}])
    with ReplayServer(archive, mode="direct", miss_report=None, write_timeout=0.5, max_connections=8) as srv:
        stuck = socket.socket()
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.settimeout(30)
        stuck.connect(("127.0.0.1", srv.port))
        stuck.sendall(f"GET /{TS}/http://site.test/big HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        deadline = time.monotonic() + 120
        while not srv.stats.get("timeouts"):  # (the sweeper looks once a second)
            assert time.monotonic() < deadline, "a client that reads nothing was never closed"
            time.sleep(0.2)
        got = 0
        try:
            while chunk := stuck.recv(1 << 20):
                got += len(chunk)
        except ConnectionResetError:
            pass
        stuck.close()
        assert got < size  # cut off, not served in full once it began to read
        assert _get(srv.port, f"/{TS}/http://site.test/ok") == (200, b"the answer")


def _bomb(size: int) -> bytes:
    """A gzip body that expands to ``size`` zero bytes (about a thousandth of it)."""
    c = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    parts = [c.compress(b"<html><head></head><body>")]
    for _ in range(size >> 20):
        parts.append(c.compress(block))
    parts.append(c.flush())
    return b"".join(parts)


def _peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak RSS from /proc")
def test_a_gzip_body_of_one_gib_is_decoded_in_bounded_memory(tmp_path):
    bomb = _bomb(1 << 30)
    archive = _archive(tmp_path / "bomb.wfz", [
        {"url": "http://site.test/bomb", "status": 200, "payload": bomb,
         "resp_headers": [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]},
        {"url": "http://site.test/bomb.css", "status": 200, "payload": bomb,
         "resp_headers": [("Content-Type", "text/css"), ("Content-Encoding", "gzip")]},
    ])
    stored = len(bomb)
    del bomb
    proc, port = _serve(archive)
    try:
        got = {}

        def ask(path):
            got[path] = _get(port, path)

        heavy = [threading.Thread(target=ask, args=(f"/{TS}/http://site.test/{name}",)) for name in ("bomb", "bomb.css")]
        for t in heavy:
            t.start()
        others = [_get(port, f"/{TS}/http://site.test/ok") for _ in range(10)]
        for t in heavy:
            t.join(120)
        assert others == [(200, b"the answer")] * 10
        for name in ("bomb", "bomb.css"):
            status, body = got[f"/{TS}/http://site.test/{name}"]
            # served as archived (still coded): too large to rewrite, never expanded here
            assert status == 200 and body[:2] == b"\x1f\x8b" and len(body) == stored
        assert _get(port, f"/{TS}/http://site.test/ok") == (200, b"the answer")
        peak = _peak_rss_mb(proc.pid)
        print(f"peak RSS of the server: {peak:.1f} MB")
        assert peak < 100, f"the server's peak RSS was {peak:.0f} MB"
    finally:
        _stop(proc)
