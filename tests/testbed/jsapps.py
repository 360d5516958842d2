"""The JavaScript part of the test bed: a Plotly Dash application, an MkDocs Material site with its
search (a web worker), a static site Bokeh draws as web components (in shadow roots), and a page of
our own (``js_page/``) using a worker, timers, animation frames, random numbers, clocks, fetches
and a CSS transition ([testbed.md](../../docs/testbed.md)).

Registered in ``apps.py``'s ``HOSTS``, ``START_PATHS`` and ``STARTERS``; each runs as a child
process on loopback like the others, its requests logged one line each.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .apps import HERE, App, _launch, free_port, venv_python

JS_HOSTS = {"dash": "dash.testbed.test", "mkdocs": "mkdocs.testbed.test", "jspage": "js.testbed.test",
            "bokeh": "bokeh.testbed.test"}
JS_START_PATHS = {"dash": "", "mkdocs": "", "jspage": "index.html", "bokeh": "index.html"}


def start_dash(work: Path) -> App:
    """The Dash application (``dash_app.py``) on Dash's own server (Flask's, which logs each request)."""
    py = venv_python()
    work.mkdir(parents=True, exist_ok=True)
    app = App("dash", JS_HOSTS["dash"], free_port(), work / "access.log")
    return _launch(app, [str(py), str(HERE / "dash_app.py"), str(app.port)], cwd=work, ready_path="_dash-layout")


def build_mkdocs(out: Path) -> Path:
    """Build the MkDocs Material site from ``mkdocs_src`` into ``out`` with ``mkdocs build``."""
    py = venv_python()
    if out.exists():
        shutil.rmtree(out)
    r = subprocess.run([str(py), "-m", "mkdocs", "build", "-q", "-f", str(HERE / "mkdocs_src" / "mkdocs.yml"),
                        "-d", str(out)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    if r.returncode != 0:
        raise RuntimeError(f"mkdocs build failed: {r.stderr[-2000:]}")
    return out


def _static(name: str, work: Path, folder: Path) -> App:
    app = App(name, JS_HOSTS[name], free_port(), work / "access.log")
    argv = [sys.executable, "-m", "http.server", str(app.port), "--bind", "127.0.0.1", "--directory", str(folder)]
    return _launch(app, argv, cwd=work)


def start_mkdocs(work: Path) -> App:
    """The built MkDocs Material site served by Python's http.server."""
    work.mkdir(parents=True, exist_ok=True)
    return _static("mkdocs", work, build_mkdocs(work / "site"))


def start_jspage(work: Path) -> App:
    """The page of our own (``js_page/``) served by Python's http.server."""
    work.mkdir(parents=True, exist_ok=True)
    return _static("jspage", work, HERE / "js_page")


def start_bokeh(work: Path) -> App:
    """A static site Bokeh draws (``bokeh_site.py``: its widgets, table and tabs are web components,
    in open shadow roots), built with the test bed's Bokeh and served by Python's http.server."""
    work.mkdir(parents=True, exist_ok=True)
    site = work / "site"
    r = subprocess.run([str(venv_python()), str(HERE / "bokeh_site.py"), str(site)], capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        raise RuntimeError(f"building the Bokeh site failed: {r.stderr[-2000:]}")
    return _static("bokeh", work, site)


JS_STARTERS = {"dash": start_dash, "mkdocs": start_mkdocs, "jspage": start_jspage, "bokeh": start_bokeh}
