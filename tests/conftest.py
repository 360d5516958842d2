"""Shared fixtures: real sample WARCs from pywb's PyPI release, and a CLI runner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from webfreeze.samples import SamplesUnavailable, pywb_sample_archive

# A suite started in the background of a script (`make test &`, nohup) inherits SIGINT ignored, and
# so would every process the tests start; the Ctrl-C tests need it delivered as a user's terminal
# would. A handler set here is reset to the default in the children.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def samples() -> Path:
    """pywb's sample_archive/warcs folder (downloaded once into the cache; skipped when offline)."""
    try:
        return pywb_sample_archive() / "warcs"
    except SamplesUnavailable as exc:
        pytest.skip(f"pywb sample archives unavailable: {exc}")


def run_cli(*args: str, cwd: str | os.PathLike | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the real ``webfreeze`` CLI in a subprocess, as a user would."""
    return subprocess.run([sys.executable, "-m", "webfreeze", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)


@pytest.fixture
def cli():
    return run_cli


# The real-application test bed (tests/testbed/): session fixtures `testbed` and `testbed_app`.
from testbed.fixtures import testbed, testbed_app  # noqa: E402,F401
