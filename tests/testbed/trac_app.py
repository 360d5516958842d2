"""Trac 1.6 in the test bed: an issue tracker behind HTTP basic authentication.

:func:`start_trac` makes a Trac environment (SQLite) with ``trac-admin initenv`` on first use,
fills it with fixed content (:mod:`tests.testbed.trac_seed`: two components, a milestone, five
tickets, two wiki pages), writes an htpasswd file for one user, and runs ``tracd --basic-auth`` on
127.0.0.1. Anonymous visitors read everything; ``/login`` asks for the password (HTTP basic auth)
and a logged-in user can create and change tickets. Query and ticket pages link to CSV and TSV
exports (``?format=csv``, ``?format=tab``), which Trac sends as attachments (downloads).
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path

from .apps import HERE, App, _launch, free_port, venv_python

TRAC_HOST = "trac.testbed.test"
TRAC_USER, TRAC_PASSWORD = "editor", "marsh-lantern-7"
TRAC_REALM = "Test bed tracker"
# tracd, with ``import multipart`` failing: Trac 1.6 takes a module of that name for the
# ``multipart`` distribution (it needs it from Python 3.13), but in the test bed's venv the name is
# python-multipart's shim (Datasette's dependency), which lacks ``parse_options_header``; every
# request would then fail. Without it Trac parses headers with the standard library, as on 3.11.
TRACD = "import sys; sys.modules['multipart'] = None; from trac.web.standalone import main; sys.exit(main())"


def htpasswd_line(user: str, password: str) -> str:
    """One htpasswd entry in the ``{SHA}`` scheme (Trac's tracd reads it, as Apache does)."""
    digest = base64.b64encode(hashlib.sha1(password.encode("utf-8")).digest()).decode("ascii")
    return f"{user}:{{SHA}}{digest}\n"


def make_trac_env(work: Path) -> Path:
    """The Trac environment under ``work`` (``work/env``), made and filled when it does not exist."""
    env = work / "env"
    if (env / "VERSION").exists():
        return env
    py = venv_python()
    work.mkdir(parents=True, exist_ok=True)
    admin = [str(py), "-m", "trac.admin.console", str(env)]
    steps = [admin + ["initenv", TRAC_REALM, "sqlite:db/trac.db"],
             [str(py), str(HERE / "trac_seed.py"), str(env), TRAC_USER]]
    for argv in steps:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=work)
        if r.returncode != 0:
            raise RuntimeError(f"setting up Trac failed ({argv[2]}): {(r.stderr or r.stdout)[-2000:]}")
    return env


def start_trac(work: Path) -> App:
    """Trac on 127.0.0.1 behind basic auth (user :data:`TRAC_USER`, password :data:`TRAC_PASSWORD`);
    its access log is tracd's request log (``python -c`` :data:`TRACD`: tracd's own entry point)."""
    py = venv_python()
    env = make_trac_env(work)
    htpasswd = work / "htpasswd"
    htpasswd.write_text(htpasswd_line(TRAC_USER, TRAC_PASSWORD))
    app = App("trac", TRAC_HOST, free_port(), work / "access.log")
    argv = [str(py), "-c", TRACD, "--single-env", "--hostname", "127.0.0.1",
            "--port", str(app.port), "--basic-auth", f"*,{htpasswd},{TRAC_REALM}", str(env)]
    return _launch(app, argv, cwd=work)
