"""A loopback site for tests: fixed answers by path (a GET of any other path is a 404), served in a
thread on 127.0.0.1 (HTTP/1.1, keep-alive), for as long as the ``with`` block runs."""

from __future__ import annotations

import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HTML = "text/html; charset=utf-8"


@contextlib.contextmanager
def static_site(answers: dict):
    """``answers``: path -> body (200, HTML) or (body, content type) or (status, body, content
    type); the path ``"*"`` answers every path not listed. Yields the port."""
    def answer(path: str) -> tuple[int, bytes, str]:
        got = answers.get(path, answers.get("*"))
        if got is None:
            return 404, b"not found", "text/plain"
        if isinstance(got, bytes):
            return 200, got, HTML
        return (200, *got) if len(got) == 2 else got

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            status, body, ctype = answer(self.path)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
