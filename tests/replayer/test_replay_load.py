"""Load on the replay server: 200 concurrent keep-alive connections for 60 s from `wrk` (Debian's),
on loopback, with zero socket errors and zero non-2xx answers, while other clients misbehave.

Each connection waits ``PACE_MS`` between an answer and its next request: about 2,000 requests a
second in all, every connection busy the whole minute. Unpaced, wrk and the server took both cores
for the minute (31,600 requests a second alone, 62 CPU-seconds inside the suite) and slowed every
other test running then; how many requests a second the server can answer is `make bench`'s
question (benchmarks/, against pywb), not this test's."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
import time

import pytest
from test_replay import build_archive, text

from webfreeze.replayer.server import ReplayServer

pytestmark = pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk not installed (make test installs it)")

PACE_MS = 100
PAGE = b"<!doctype html><html><head><title>load</title></head><body>" + b"<p>row</p>" * 400 + b"</body></html>"


def test_200_connections_for_60_seconds_without_errors(tmp_path):
    archive = build_archive(tmp_path / "load.wfz", [
        text("http://load.test/", PAGE, resp_headers=[("Content-Type", "text/html")]),
        text("http://load.test/font.woff2", bytes(range(256)) * 300, resp_headers=[("Content-Type", "font/woff2")]),
    ])
    script = tmp_path / "paths.lua"
    # each wrk connection alternates between the page (with injection) and the font
    script.write_text('local n = 0\nrequest = function()\n  n = n + 1\n'
                      '  if n % 2 == 0 then return wrk.format("GET", "/2024id_/http://load.test/font.woff2") end\n'
                      '  return wrk.format("GET", "/2024id_/http://load.test/")\nend\n'
                      f'delay = function()\n  return {PACE_MS}\nend\n')
    with ReplayServer(archive, mode="direct") as srv:
        stop = threading.Event()
        rude = {"n": 0}

        def misbehave():  # clients that send junk or hang up mid-response, all through the run
            while not stop.is_set():
                try:
                    with socket.create_connection(("127.0.0.1", srv.port), timeout=2) as s:
                        if rude["n"] % 2:
                            s.sendall(b"NOT HTTP AT ALL\r\n\r\n")
                            s.recv(100)
                        else:
                            s.sendall(b"GET /2024id_/http://load.test/font.woff2 HTTP/1.1\r\nHost: x\r\n\r\n")
                            s.recv(10)  # and hang up with most of the body unread
                    rude["n"] += 1
                except OSError:
                    pass
                time.sleep(0.05)

        t = threading.Thread(target=misbehave, daemon=True)
        t.start()
        try:
            out = subprocess.run(["wrk", "-t2", "-c200", "-d60s", "--timeout", "10s", "-s", str(script),
                                  f"{srv.url}/"], capture_output=True, text=True, timeout=180)
        finally:
            stop.set()
            t.join()
        assert out.returncode == 0, out.stderr
        report = out.stdout
        assert "Socket errors" not in report, report
        assert "Non-2xx" not in report, report
        done = int(re.search(r"(\d+) requests in", report).group(1))
        assert done > 200 * 60, report  # every connection asked more than once a second on average
        assert srv.stats["errors"] == 0
        assert srv.stats["bad_requests"] >= rude["n"] // 2 - 1 > 10
        # still healthy afterwards
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            s.sendall(b"GET /2024id_/http://load.test/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"</body></html>")
