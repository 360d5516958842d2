"""Start and stop the test bed's applications, and read their access logs.

Each application runs as a child process of the tests, bound to 127.0.0.1 on a free port, with
its stdout and stderr (where all three write one line per request) going to a log file. Our tools
reach it as ``http://NAME/`` through ``--resolve NAME=127.0.0.1:PORT``; nothing public is named.
The applications live in their own virtual environment (``.venv/testbed``: their dependencies
conflict with ours), made by ``scripts/bootstrap.sh``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from .makedb import make_database

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
VENV = ROOT / ".venv" / "testbed"
REQUIREMENTS = HERE / "requirements.txt"

HOSTS = {"datasette": "data.testbed.test", "sphinx": "docs.testbed.test", "django": "admin.testbed.test",
         "trac": "trac.testbed.test", "pydocs": "pydocs.testbed.test"}
# Where each application's crawl starts (path under its base URL).
START_PATHS = {"datasette": "testbed/books", "sphinx": "index.html", "django": "", "trac": "", "pydocs": "index.html"}
# The Django admin's staff account, made by the fixture (the tasks log in with it).
ADMIN_USER, ADMIN_PASSWORD = "librarian", "tide-pool-42"

# One request in any of the three logs: uvicorn ('"GET /x HTTP/1.1" 200 OK'), Python's http.server
# and Django's runserver ('"GET /x HTTP/1.1" 200 1234').
_REQUEST = re.compile(r'"([A-Z]+) (\S+) HTTP/[0-9.]+"')


class TestbedMissing(RuntimeError):
    """The test bed's virtual environment is not installed."""


def venv_python() -> Path:
    """The test bed venv's interpreter; :class:`TestbedMissing` when it is not installed."""
    py = VENV / "bin" / "python"
    if not py.exists():
        raise TestbedMissing(f"the test bed is not installed ({VENV} is missing; run scripts/bootstrap.sh test)")
    return py


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class App:
    """One running application: its name, where it listens and its access log."""

    name: str
    host: str
    port: int
    log_path: Path
    proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        """The application's URL under its own name (what archives and tasks keep)."""
        return f"http://{self.host}/"

    @property
    def start_url(self) -> str:
        return self.base_url + START_PATHS[self.name]

    @property
    def resolve(self) -> str:
        """The ``--resolve`` value sending its name to the loopback port."""
        return f"{self.host}=127.0.0.1:{self.port}"

    @property
    def local_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def requests(self) -> list[tuple[str, str]]:
        """Every request the application has logged so far, as (method, path), in order."""
        text = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
        return [(m.group(1), m.group(2)) for m in _REQUEST.finditer(text)]

    def mark(self) -> int:
        """A position in the access log; :meth:`requests_since` lists what came after it."""
        return len(self.requests())

    def requests_since(self, mark: int) -> list[tuple[str, str]]:
        """The requests logged after ``mark`` (the leak canary: none during a replay)."""
        return self.requests()[mark:]

    def stop(self) -> None:
        """End the application's processes (its whole process group) and wait for them."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def _launch(app: App, argv: list[str], *, cwd: Path, env: dict | None = None, ready_path: str = "") -> App:
    log = open(app.log_path, "ab")
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    # its own process group, so stopping it also stops a server's children
    app.proc = subprocess.Popen(argv, cwd=cwd, env=full_env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    deadline = time.monotonic() + 60
    while True:
        if app.proc.poll() is not None:
            tail = app.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"{app.name} exited with status {app.proc.returncode} while starting:\n{tail}")
        try:
            with urllib.request.urlopen(app.local_url + ready_path, timeout=5):
                break
        except urllib.error.HTTPError:
            break  # it answers
        except OSError:
            if time.monotonic() > deadline:
                app.stop()
                raise RuntimeError(f"{app.name} did not answer on port {app.port} within 60 s") from None
            time.sleep(0.1)
    return app


def start_datasette(work: Path) -> App:
    """Datasette over a generated database, with the books table faceted by genre."""
    py = venv_python()
    work.mkdir(parents=True, exist_ok=True)
    db = make_database(work / "testbed.db")
    (work / "metadata.json").write_text(
        '{"title": "Test bed library", "databases": {"testbed": {"tables": {"books": {"facets": ["genre"]}}}}}\n')
    app = App("datasette", HOSTS["datasette"], free_port(), work / "access.log")
    # facet suggestions are cut off by a time limit: off, so a page's content does not depend on speed
    argv = [str(py), "-m", "datasette", "serve", str(db), "--host", "127.0.0.1", "--port", str(app.port),
            "--metadata", str(work / "metadata.json"), "--setting", "suggest_facets", "off"]
    return _launch(app, argv, cwd=work)


def build_sphinx(out: Path) -> Path:
    """Build the documentation site from ``docs_src`` into ``out`` with ``sphinx-build``."""
    py = venv_python()
    if out.exists():
        shutil.rmtree(out)
    r = subprocess.run([str(py), "-m", "sphinx", "-q", "-b", "html", "-d", str(out.parent / "doctrees"),
                        str(HERE / "docs_src"), str(out)], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"sphinx-build failed: {r.stderr[-2000:]}")
    return out


def start_sphinx(work: Path) -> App:
    """The built documentation served by Python's http.server (it logs every request)."""
    work.mkdir(parents=True, exist_ok=True)
    html = build_sphinx(work / "html")
    app = App("sphinx", HOSTS["sphinx"], free_port(), work / "access.log")
    argv = [sys.executable, "-m", "http.server", str(app.port), "--bind", "127.0.0.1", "--directory", str(html)]
    return _launch(app, argv, cwd=work)


def start_django(work: Path, *, threading: bool = False) -> App:
    """The Django site: migrate a fresh SQLite database, seed it, then ``runserver --noreload``.

    ``threading=False`` adds ``--nothreading``: runserver then closes each connection after its
    response. Threaded (runserver's default), it keeps connections alive, and recording it through
    ``--resolve`` stalls today (see tests/testbed/test_testbed.py, the keep-alive test)."""
    py = venv_python()
    work.mkdir(parents=True, exist_ok=True)
    site = HERE / "django_site"
    env = {**os.environ, "TESTBED_DJANGO_DB": str(work / "django.sqlite3"), "PYTHONDONTWRITEBYTECODE": "1"}
    for argv in (["migrate", "--noinput", "-v", "0"], ["seed", ADMIN_USER, ADMIN_PASSWORD]):
        r = subprocess.run([str(py), "manage.py", *argv], cwd=site, env=env, capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"manage.py {argv[0]} failed: {r.stderr[-2000:]}")
    app = App("django", HOSTS["django"], free_port(), work / "access.log")
    argv = [str(py), "manage.py", "runserver", f"127.0.0.1:{app.port}", "--noreload"]
    if not threading:
        argv.append("--nothreading")
    return _launch(app, argv, cwd=site, env=env)


def start_trac(work: Path) -> App:
    """Trac behind HTTP basic auth (tests/testbed/trac_app.py)."""
    from .trac_app import start_trac as start

    return start(work)


def start_pydocs(work: Path) -> App:
    """Python's documentation served by nginx over HTTP and TLS (tests/testbed/nginx_app.py)."""
    from .nginx_app import start_pydocs as start

    return start(work)


STARTERS = {"datasette": start_datasette, "sphinx": start_sphinx, "django": start_django, "trac": start_trac,
            "pydocs": start_pydocs}

# The JavaScript applications (tests/testbed/jsapps.py), registered beside the others.
from .jsapps import JS_HOSTS, JS_START_PATHS, JS_STARTERS  # noqa: E402 (it imports this module's helpers)

HOSTS.update(JS_HOSTS)
START_PATHS.update(JS_START_PATHS)
STARTERS.update(JS_STARTERS)
