"""Shared fixtures: real sample WARCs from pywb's PyPI release, the CLI (in a subprocess or in this
process), and the test bed's applications. Helpers tests import live in tests/support/."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from cli_runner import invoke, run_cli

from webfreeze.samples import SamplesUnavailable, pywb_sample_archive

# A suite started in the background of a script (`make test &`, nohup) inherits SIGINT ignored, and
# so would every process the tests start; the Ctrl-C tests need it delivered as a user's terminal
# would. A handler set here is reset to the default in the children.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Whole files the inner loop (`make test-fast`, `-m "not slow"`) leaves out besides the tests marked
# slow where they are: each spends most of a minute or more on crawls in Chromium, real applications,
# pywb's servers or a fixed-length load run (measured on the 2-core machine; docs/contributing.md).
SLOW_FILES = {
    "testbed/test_testbed.py", "testbed/test_testbed_authoring.py",
    "recorder/test_crawl.py", "recorder/test_crawl_check.py", "recorder/test_record_https.py",
    "replayer/test_replay_browser.py", "replayer/test_replay_load.py",
    "archives/test_interop.py", "docs/test_readme_tour.py",
}
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    """Mark every test of the files in ``SLOW_FILES`` slow."""
    for item in items:
        if item.path.relative_to(TESTS).as_posix() in SLOW_FILES:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def samples() -> Path:
    """pywb's sample_archive/warcs folder (downloaded once into the cache; skipped when offline)."""
    try:
        return pywb_sample_archive() / "warcs"
    except SamplesUnavailable as exc:
        pytest.skip(f"pywb sample archives unavailable: {exc}")


@pytest.fixture
def archive(samples, tmp_path, cli_here):
    """An archive imported from pywb's ``iana.warc.gz`` (what the commands' guard tests break)."""
    path = tmp_path / "a.wfz"
    r = cli_here("archive", "import", samples / "iana.warc.gz", "--to", path)
    assert r.returncode == 0, r.stderr
    return path


@pytest.fixture
def cli():
    """The CLI in a subprocess, as a user runs it: ``cli(*args, cwd=, env=, timeout=, prefix=)``."""
    return run_cli


@pytest.fixture
def cli_here():
    """The CLI's entry point in this process, output captured: ``cli_here(*args, cwd=, env=)``."""
    return invoke


# The real-application test bed (tests/testbed/): session fixtures `testbed` and `testbed_app`.
from testbed.fixtures import testbed, testbed_app  # noqa: E402,F401
