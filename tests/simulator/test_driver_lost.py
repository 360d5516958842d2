"""A Playwright driver (its Node process) that goes away unasked (killed, out of memory) left a
note nobody read, printed by asyncio when the process exited: ``Future exception was never
retrieved ... Connection closed while reading from the driver``, after every call on that driver
had already failed in its own words (seen at the end of ``make test``). The environment's loop
leaves that one note out, and only that one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SCRIPT = r"""
import asyncio, gc, os, signal, time
from pathlib import Path
from webfreeze.simulator.browser_backend import _Driver

def children(name):
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            comm = stat.read_text().split("(", 1)[1].rsplit(")", 1)[0]
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid() and comm.startswith(name):  # (Node names its thread node-MainThread)
            yield int(stat.parent.name)

driver, _ = _Driver.get()
[node] = children("node")
os.kill(node, signal.SIGKILL)
time.sleep(1)
if os.environ.get("OTHER"):  # another never-read exception on the same loop is still printed
    driver.loop.loop.call_soon_threadsafe(lambda: driver.loop.loop.create_future().set_exception(ValueError("other")))
    time.sleep(0.2)
_Driver.stop_all()
del driver
gc.collect()
print("stopped")
"""


def _run(**env):
    import os

    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_a_killed_driver_leaves_no_note_at_exit():
    r = _run()
    assert r.returncode == 0 and "stopped" in r.stdout, r.stdout + r.stderr
    assert "never retrieved" not in r.stderr and "Connection closed" not in r.stderr, r.stderr


def test_other_unread_exceptions_are_still_said():
    r = _run(OTHER="1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Future exception was never retrieved" in r.stderr and "ValueError: other" in r.stderr, r.stderr
    assert "Connection closed" not in r.stderr, r.stderr
