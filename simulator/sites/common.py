"""What every simulated site shares: content negotiation, the page shell, tiny images, serving.

The sites stand in for the live web in tests and the demo, so they take the paths real sites
take: gzip and brotli encodings chosen from Accept-Encoding, cache-busting asset URLs, cookies,
redirects, a JSON XHR that carries a timestamp, images with ``srcset``, and a script that writes
``Date.now()`` and ``Math.random()`` into the page (what replay must freeze).
"""

from __future__ import annotations

import errno
import gzip
import html
import itertools
import json
import socket
import struct
import threading
import time
import zlib
from collections.abc import Callable
from functools import lru_cache

from werkzeug.exceptions import HTTPException, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

ASSET_VERSION = "20240315"
TEXT_TYPES = ("text/", "application/javascript", "application/json", "image/svg+xml")

APP_JS = """// Page runtime of the simulated site: what a recording must capture and a replay must freeze.
(function () {
  var info = document.getElementById('render-info');
  if (info) {
    info.textContent = 'rendered at ' + Date.now() + ' token ' + Math.random().toString(36).slice(2, 10);
  }
  var stats = document.getElementById('site-stats');
  if (stats && window.fetch) {
    fetch(stats.getAttribute('data-src') + '?_=' + Date.now())
      .then(function (r) { return r.json(); })
      .then(function (d) { stats.textContent = d.summary + ' (served ' + d.served_at + ')'; })
      .catch(function () { stats.textContent = 'stats unavailable'; });
  }
})();
"""


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid-colour PNG, byte-identical for the same arguments."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    row = b"\x00" + bytes(rgb) * width
    raw = zlib.compress(row * height, 9)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def respond(request: Request, body: bytes | str, content_type: str, *, status: int = 200,
            headers: dict | None = None, cache: str = "public, max-age=300") -> Response:
    """A response whose body is brotli- or gzip-encoded when the client accepts it (text only)."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    out_headers = {"Cache-Control": cache, **(headers or {})}
    if content_type.startswith(TEXT_TYPES) and len(data) > 256:
        accepted = request.headers.get("Accept-Encoding", "").lower()
        # brotli for scripts and styles (as CDNs do), gzip for the rest
        if "br" in accepted and content_type.startswith(("text/css", "application/javascript")):
            import brotli

            data = brotli.compress(data, quality=5)
            out_headers["Content-Encoding"] = "br"
        elif "gzip" in accepted:
            data = gzip.compress(data, compresslevel=6, mtime=0)
            out_headers["Content-Encoding"] = "gzip"
        out_headers["Vary"] = "Accept-Encoding"
    return Response(data, status=status, content_type=content_type, headers=out_headers)


def json_response(request: Request, value, *, cache: str = "no-store") -> Response:
    return respond(request, json.dumps(value, sort_keys=True), "application/json", cache=cache)


def page_shell(*, site: str, title: str, body: str, nav: str = "", stats_src: str = "/api/stats") -> str:
    """The HTML around every page: assets with cache busters, logo with srcset, dynamic footer."""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{esc(title)}</title>
<link rel="stylesheet" href="/static/style.css?v={ASSET_VERSION}">
<script src="/static/app.js?v={ASSET_VERSION}" defer></script>
</head>
<body>
<header class="masthead">
  <a href="/" class="logo"><img src="/static/logo.png" srcset="/static/logo.png 1x, /static/logo@2x.png 2x"
     width="120" height="40" alt="{esc(site)} logo"></a>
  {nav}
</header>
<main id="content">
{body}
</main>
<footer>
  <p id="site-stats" data-src="{esc(stats_src)}">loading statistics</p>
  <p id="render-info">rendered on the server</p>
</footer>
</body>
</html>
"""


STYLE_CSS = """body{font-family:sans-serif;margin:0;color:#222}
.masthead{background:#b31b1b;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:center}
.masthead a{color:#fff}
main{padding:16px 24px;max-width:1100px}
dl.listing dt{margin-top:12px}
.list-title{font-size:1.1em;font-weight:bold}
.authors a{margin-right:4px}
.abstract{line-height:1.5}
table.results{border-collapse:collapse}
table.results td,table.results th{border:1px solid #ccc;padding:4px 8px}
figure{margin:16px 0}
figcaption{font-size:.9em;color:#555}
footer{border-top:1px solid #ddd;padding:8px 24px;color:#666;font-size:.85em}
form.search label{margin-right:8px}
.pagination a{margin-right:6px}
"""


def static_response(request: Request, name: str, site_color: tuple[int, int, int]) -> Response | None:
    """The shared static assets, or None for an unknown name."""
    year_cache = "public, max-age=31536000, immutable"
    if name == "style.css":
        return respond(request, STYLE_CSS, "text/css", cache=year_cache)
    if name == "app.js":
        return respond(request, APP_JS, "application/javascript", cache=year_cache)
    if name == "logo.png":
        return respond(request, png(120, 40, site_color), "image/png", cache=year_cache)
    if name == "logo@2x.png":
        return respond(request, png(240, 80, site_color), "image/png", cache=year_cache)
    return None


def route_map(rules: Callable[[], list[Rule]]) -> Callable[[], Map]:
    """A site's routes (``rules()``, not slash-strict), built once on first use and shared by every
    instance: a built Map is only read, and building one (werkzeug compiles each rule) cost more
    than the rest of a fresh site, which a replay makes for each episode."""
    return lru_cache(maxsize=None)(lambda: Map(rules(), strict_slashes=False))


class SimulatedSite:
    """The plumbing every simulated site shares: routing by ``url_map`` to ``on_<endpoint>(request,
    **values)`` methods, a session cookie, error pages and the page shell. Subclasses set the class
    attributes and build ``self.url_map``."""

    title = "Simulated site"
    color = (80, 80, 80)
    nav = ""
    session_cookie = "session"
    session_prefix = "s"
    stats_src = "/api/stats"
    clock = time.time  # what "now" is for the dynamic bits (site models in replay set a frozen one)

    def __init__(self):
        self._sessions = itertools.count(1)
        self._session_lock = threading.Lock()

    def __call__(self, environ, start_response):
        request = Request(environ)
        session = request.cookies.get(self.session_cookie)
        new_session = session is None
        if new_session:
            with self._session_lock:
                session = f"{self.session_prefix}{next(self._sessions):06d}"
        environ["webfreeze.session"] = session
        try:
            endpoint, values = self.url_map.bind_to_environ(environ).match()
            response = getattr(self, f"on_{endpoint}")(request, **values)
        except HTTPException as exc:
            response = exc if exc.code in (301, 302, 303, 307, 308) else self.error_page(request, exc)
        if new_session and isinstance(response, Response):
            response.set_cookie(self.session_cookie, session, path="/", httponly=True, samesite="Lax")
        return response(environ, start_response)

    @staticmethod
    def session(request: Request) -> str:
        """The visitor's session id (from the cookie, or the one this response is about to set)."""
        return request.environ["webfreeze.session"]

    def html(self, request: Request, title: str, body: str, *, status: int = 200) -> Response:
        return respond(request, page_shell(site=self.title, title=title, body=body, nav=self.nav,
                                           stats_src=self.stats_src),
                       "text/html; charset=utf-8", status=status, cache="no-cache")

    def error_page(self, request: Request, exc: HTTPException) -> Response:
        body = f"<h1>{exc.code} {esc(exc.name)}</h1><p>{esc(exc.description or '')}</p>"
        return self.html(request, f"{exc.code} {exc.name}", body, status=exc.code)

    def on_static(self, request: Request, name: str) -> Response:
        response = static_response(request, name, self.color)
        if response is None:
            raise NotFound()
        return response


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args, **kwargs) -> None:  # tests and embedded use: no access log
        pass


def https_redirect(target: str) -> Callable:
    """A WSGI app answering every request with a 301 to the same path under ``target`` (e.g.
    ``https://scholar.test``): what a site's plain-HTTP port does once it moved to HTTPS."""
    target = target.rstrip("/")

    def app(environ, start_response):
        request = Request(environ)
        return Response(status=301, headers={"Location": target + request.full_path.rstrip("?")})(environ, start_response)

    return app


def tls_context(certfile: str, keyfile: str | None = None):
    """A server-side TLS context for :class:`SiteServer` from a PEM certificate (chain) and key; one
    line naming the file when either cannot be used."""
    import ssl

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise OSError(getattr(exc, "errno", None) or 0,
                      f"cannot use the TLS certificate {certfile}{f' / key {keyfile}' if keyfile else ''}: "
                      f"{getattr(exc, 'strerror', None) or getattr(exc, 'reason', None) or exc}") from None
    return ctx


class SiteServer:
    """A simulated site served by werkzeug's threaded server on loopback, in a background thread;
    over TLS when given an ``ssl_context`` (:func:`tls_context`), as real sites are."""

    def __init__(self, app: Callable, host: str = "127.0.0.1", port: int = 0, *, log_requests: bool = False,
                 ssl_context=None):
        handler = WSGIRequestHandler if log_requests else _QuietHandler
        # Bind first, ourselves: werkzeug reports a busy port by printing and exiting the process.
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        # connections left open after stop() must not keep the port from being bound again
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            reason = "port already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
            raise OSError(exc.errno, f"cannot listen on {host}:{port}: {reason}") from None
        self._socket = sock
        self._server = make_server(host, port, app, threaded=True, request_handler=handler, fd=sock.fileno(),
                                   ssl_context=ssl_context)
        self.scheme = "https" if ssl_context is not None else "http"
        self.host = host
        self.port = sock.getsockname()[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def start(self) -> "SiteServer":
        self._thread = threading.Thread(target=self._server.serve_forever, name="site-server", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        if self._thread:
            self._server.shutdown()
        self._server.server_close()
        self._socket.close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> "SiteServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
