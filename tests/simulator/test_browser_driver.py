"""The browser backends of a process share one Playwright driver (a Node process): environments made
one after another (an environment per episode, as BrowserGym's ``gym.make`` and AgentLab make them)
start no driver of their own, and one whose driver was killed since it last served gets a new one."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import webfreeze as wf
from webfreeze.demo import demo_paths
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

TASK = {"task": {"id": "t", "start_url": "http://scholar.test/", "instruction": "look"}}


def _drivers() -> list[int]:
    """This process's children that run Playwright's driver."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (proc / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # (a process that ended meanwhile)
        if ppid == os.getpid() and b"run-driver" in cmdline:
            found.append(int(proc.name))
    return sorted(found)


def _episode() -> str:
    env = wf.WebEnv(wf.EnvConfig(demo_paths()["archive"], backend="browser"))
    try:
        obs, _ = env.reset(options=TASK)
        return obs["url"]
    finally:
        env.close()


def test_environments_share_one_driver_and_outlive_its_loss():
    assert _episode() == "http://scholar.test/"
    first = _drivers()
    assert len(first) == 1
    assert _episode() == "http://scholar.test/"
    assert _drivers() == first  # the second environment started no driver
    os.kill(first[0], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while first[0] in _drivers() and time.monotonic() < deadline:  # (reaped by Playwright's transport)
        time.sleep(0.1)
    assert _episode() == "http://scholar.test/"  # the next environment starts a new driver
    again = _drivers()
    assert len(again) == 1 and again != first


def test_a_failed_launch_leaves_the_other_environments_running(monkeypatch):
    """A browser that does not start on the shared driver is tried on a new driver; an environment
    open on the old one goes on working (the old driver is not stopped under it)."""
    from webfreeze.simulator import browser

    first = wf.WebEnv(wf.EnvConfig(demo_paths()["archive"], backend="browser"))
    try:
        first.reset(options=TASK)
        real, calls = browser.launch_chromium, []

        async def failing_once(*args, **kwargs):
            calls.append(1)
            if len(calls) == 1:
                raise browser.BrowserUnavailable("Chromium did not start (the test's)")
            return await real(*args, **kwargs)

        monkeypatch.setattr(browser, "launch_chromium", failing_once)
        second = wf.WebEnv(wf.EnvConfig(demo_paths()["archive"], backend="browser"))
        monkeypatch.setattr(browser, "launch_chromium", real)
        try:
            assert len(calls) == 2
            obs, _ = second.reset(options=TASK)
            assert obs["url"] == "http://scholar.test/"
        finally:
            second.close()
        obs, _ = first.reset(options=TASK)  # (before the fix: "Event loop is closed")
        assert obs["url"] == "http://scholar.test/"
    finally:
        first.close()


def test_an_environment_closed_at_exit_after_the_driver_stopped_exits_cleanly(tmp_path):
    """A pool worker registers its environment's close with atexit before the environment exists,
    so it runs after the driver's own handler: the close finds the driver stopped and says nothing."""
    import subprocess
    import sys

    script = (
        "import atexit\n"
        "held = {}\n"
        "atexit.register(lambda: held['env'].close())\n"
        "import webfreeze as wf\n"
        "from webfreeze.demo import demo_paths\n"
        "env = wf.WebEnv(wf.EnvConfig(demo_paths()['archive'], backend='browser'))\n"
        f"env.reset(options={TASK!r})\n"
        "held['env'] = env\n"
    )
    done = subprocess.run([sys.executable, "-W", "error::RuntimeWarning", "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr[-2000:]
