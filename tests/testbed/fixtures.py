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

# Crawl of each application: (depth, max pages), chosen for ~10 pages each.
CRAWLS = {"datasette": (1, 10), "sphinx": (1, 10), "django": (1, 10)}


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

    def app(self, name: str) -> App:
        """The running application ``name`` (datasette, sphinx, django)."""
        if name not in HOSTS:
            raise KeyError(f"no test bed application {name!r}")
        if name not in self.apps:
            self.apps[name] = STARTERS[name](self.work / name)
        return self.apps[name]

    def crawl(self, name: str) -> Path:
        """The archive of the application's crawl, recorded once per session."""
        if name not in self.archives:
            app = self.app(name)
            depth, pages = CRAWLS[name]
            archive = self.work / "archives" / f"{name}.wfz"
            archive.parent.mkdir(exist_ok=True)
            r = webfreeze("record", "crawl", app.start_url, "--archive", archive, "--depth", depth,
                          "--max-pages", pages, "--resolve", app.resolve, home=self.home)
            if r.returncode != 0:
                pytest.fail(f"the crawl of {name} failed: {r.stderr[-2000:]}")
            self.crawl_output = getattr(self, "crawl_output", {})
            self.crawl_output[name] = r.stdout
            self.archives[name] = archive
        return self.archives[name]

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
