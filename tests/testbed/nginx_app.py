"""Python's own documentation served by nginx: a static site as most of the web serves one.

nginx (Debian's ``/usr/sbin/nginx``) runs as a child of the tests with a configuration written
under the work folder (no root: ``-p PREFIX``, ``daemon off``, its pid, temporary files, error
log and access log there), serving Python 3.11's HTML documentation (Debian's ``python3.11-doc``)
under ``pydocs.testbed.test`` over HTTP and over TLS, on two loopback ports. Its certificate is
issued by a test CA made on the spot (tests/support/tls_certs.py). Unlike the test bed's Python
servers, nginx sends what real sites send with static files: ``Accept-Ranges``, ``ETag``,
``Last-Modified``, gzip for HTML. Its access log is the leak canary.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .apps import HOSTS, App, _launch, free_port

SUPPORT = Path(__file__).resolve().parent.parent / "support"  # tests/support: tls_certs

NGINX = Path("/usr/sbin/nginx")
DOC_ROOTS = (Path("/usr/share/doc/python3.11/html"), Path("/usr/share/doc/python3/html"))
MIME_TYPES = Path("/etc/nginx/mime.types")

CONFIG = """\
worker_processes 1;
daemon off;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections 256; }}
http {{
    include {mime_types};
    default_type application/octet-stream;
    access_log {work}/access.log;
    client_body_temp_path {work}/tmp/body;
    proxy_temp_path {work}/tmp/proxy;
    fastcgi_temp_path {work}/tmp/fastcgi;
    uwsgi_temp_path {work}/tmp/uwsgi;
    scgi_temp_path {work}/tmp/scgi;
    sendfile on;
    gzip on;
    server {{
        listen 127.0.0.1:{port};
        listen 127.0.0.1:{tls_port} ssl;
        server_name {host};
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {root};
        index index.html;
    }}
}}
"""


class NginxMissing(RuntimeError):
    """nginx or Python's documentation is not installed (scripts/bootstrap.sh test installs both)."""


def docs_root() -> Path:
    """Where Python's HTML documentation is installed."""
    for root in DOC_ROOTS:
        if (root / "index.html").exists():
            return root
    raise NginxMissing(f"Python's documentation is not installed ({DOC_ROOTS[0]}; apt-get install python3.11-doc)")


@dataclass
class NginxApp(App):
    """The nginx-served site: :attr:`port` speaks HTTP, :attr:`tls_port` HTTPS; :attr:`ca_path` is
    the test CA that issued its certificate."""

    tls_port: int = 0
    ca_path: Path | None = None

    @property
    def https_base_url(self) -> str:
        return f"https://{self.host}/"

    @property
    def https_start_url(self) -> str:
        return self.https_base_url + "index.html"

    @property
    def https_resolve(self) -> str:
        """The ``--resolve`` value sending ``HOST:443`` to the TLS port."""
        return f"{self.host}:443=127.0.0.1:{self.tls_port}"


def start_pydocs(work: Path) -> NginxApp:
    """nginx serving Python's documentation on two loopback ports (HTTP and HTTPS)."""
    if not os.access(NGINX, os.X_OK):
        raise NginxMissing(f"{NGINX} is not installed (apt-get install nginx-light)")
    if str(SUPPORT) not in sys.path:  # (pytest puts it there; the benchmarks do not)
        sys.path.append(str(SUPPORT))
    from tls_certs import LocalCA

    root = docs_root()
    work = Path(work).resolve()
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    host = HOSTS["pydocs"]
    ca = LocalCA(work / "certs")
    cert, key = ca.issue([host])
    app = NginxApp("pydocs", host, free_port(), work / "access.log", tls_port=free_port(), ca_path=ca.cert_path)
    conf = work / "nginx.conf"
    conf.write_text(CONFIG.format(work=work, mime_types=MIME_TYPES, port=app.port, tls_port=app.tls_port,
                                  host=host, cert=cert, key=key, root=root))
    argv = [str(NGINX), "-p", str(work), "-c", str(conf), "-e", str(work / "error.log")]
    return _launch(app, argv, cwd=work)
