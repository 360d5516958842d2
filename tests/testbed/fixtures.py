"""Session-scoped pytest fixtures of the test bed (imported by tests/conftest.py).

``testbed`` starts each application on first use and keeps it for the session; its crawl into an
archive is recorded once per session and shared (a test that changes an archive copies it first).
Without the test bed's venv the tests that use it skip with one line, except under ``CI``, where
set-up must have installed it, and its absence fails them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .apps import HOSTS, STARTERS, App, TestbedMissing, venv_python

# Crawl of each application: (depth, max pages, scope), for about ten pages each. Datasette's table
# page links to every row; its scope keeps the table's own views: sorted, faceted, as JSON.
CRAWLS = {"datasette": (1, 12, r"^http://data\.testbed\.test/testbed/books(\.json\?_labels=on|\?_sort=(year|rating|title)"
                                r"|\?genre=\w+)$"),
          "sphinx": (1, 12, "host"), "django": (1, 12, "host"),
          # the JavaScript test bed's page of our own (tests/testbed/js_page/): the page and what it loads;
          # the Dash application's page, the MkDocs site's pages
          "jspage": (0, 1, "host"), "dash": (0, 1, "host"), "mkdocs": (1, 6, "host"), "bokeh": (1, 3, "host")}
# Suites whose reference sessions are recorded into a copy of the application's crawl.
SUITES_ON_CRAWL = {"datasette", "sphinx"}


def cli_env(home: Path) -> dict:
    """The environment our CLI runs with in test bed tests (its own WEBFREEZE_HOME)."""
    return {**os.environ, "WEBFREEZE_HOME": str(home)}


def webfreeze(*args, home: Path, cwd=None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real ``webfreeze`` CLI as a user would."""
    return subprocess.run([sys.executable, "-m", "webfreeze", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=cli_env(home), timeout=timeout)


class Testbed:
    """The session's applications and their crawls, each made on first use."""

    def __init__(self, work: Path):
        self.work = work
        self.home = work / "home"
        self.apps: dict[str, App] = {}
        self.archives: dict[str, Path] = {}
        self.crawl_output: dict[str, str] = {}  # the crawl command's stdout
        self.crawl_requests: dict[str, list] = {}  # what the application served during its crawl
        self.suites: dict[str, Path] = {}
        self.failures: dict[str, str] = {}  # a crawl or suite that failed fails its later users at once

    def app(self, name: str) -> App:
        """The running application ``name`` (datasette, sphinx, django)."""
        if name not in HOSTS:
            raise KeyError(f"no test bed application {name!r}")
        if name not in self.apps:
            self.apps[name] = STARTERS[name](self.work / name)
        return self.apps[name]

    def crawl(self, name: str) -> Path:
        """The archive of the application's crawl, recorded once per session."""
        if f"crawl {name}" in self.failures:  # once per session, not once per test
            pytest.fail(self.failures[f"crawl {name}"])
        if name not in self.archives:
            app = self.app(name)
            depth, pages, scope = CRAWLS[name]
            archive = self.work / "archives" / f"{name}.wfz"
            archive.parent.mkdir(exist_ok=True)
            mark = app.mark()
            r = webfreeze("record", "crawl", app.start_url, "--archive", archive, "--depth", depth,
                          "--max-pages", pages, "--scope", scope, "--resolve", app.resolve, home=self.home)
            if r.returncode != 0:
                self.failures[f"crawl {name}"] = f"the crawl of {name} failed: {r.stderr[-2000:]}"
                pytest.fail(self.failures[f"crawl {name}"])
            self.crawl_output[name] = r.stdout
            self.crawl_requests[name] = app.requests_since(mark)
            self.archives[name] = archive
        return self.archives[name]

    def suite(self, name: str) -> Path:
        """The application's task suite (references recorded live into a copy of its crawl)."""
        if f"suite {name}" in self.failures:
            pytest.fail(self.failures[f"suite {name}"])
        if name not in self.suites:
            from .suites import build_suite

            # Django's sessions go to an archive of their own: after the crawl's capture of the login
            # page the login does not replay today (see the CSRF test in tests/testbed/test_testbed.py)
            base = self.crawl(name) if name in SUITES_ON_CRAWL else None
            try:
                self.suites[name] = build_suite(name, self.app(name), self.work / "suites" / name, webfreeze,
                                                self.home, base_archive=base)
            except RuntimeError as exc:
                self.failures[f"suite {name}"] = str(exc)
                pytest.fail(str(exc))
        return self.suites[name]

    def close(self) -> None:
        for app in self.apps.values():
            app.stop()


@pytest.fixture(scope="session")
def testbed(tmp_path_factory):
    """The test bed (skips, or fails under CI, when its venv is not installed)."""
    try:
        venv_python()
    except TestbedMissing as exc:
        if os.environ.get("CI"):
            pytest.fail(f"{exc} (under CI set-up must install it)")
        pytest.skip(str(exc))
    bed = Testbed(tmp_path_factory.mktemp("testbed"))
    try:
        yield bed
    finally:
        bed.close()


@pytest.fixture(scope="session")
def testbed_app(testbed):
    """``testbed_app(name)``: the running application ``name``."""
    return testbed.app
