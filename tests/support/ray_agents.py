"""Agents for the Ray executor's tests (imported by Ray workers as ``ray_agents:...`` with
``tests/support`` on PYTHONPATH). Each is the reference agent but for what an environment variable
asks, so without it (or on the other tasks) a run equals a plain run of the same class."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from webfreeze.agents.reference import ReferenceAgent


class Flaky(ReferenceAgent):
    """On task ``$WF_DIE_TASK``, the first time (no file ``$WF_DIE_MARKER`` yet), its worker process
    is killed for real (SIGKILL, as the OOM killer or a lost node would); on task ``$WF_HANG_TASK``
    it hangs in ``act`` for ten minutes (a stuck browser or model call)."""

    def reset(self, task) -> None:
        if task.get("id") == os.environ.get("WF_DIE_TASK"):
            marker = Path(os.environ["WF_DIE_MARKER"])
            if not marker.exists():
                marker.write_text(str(os.getpid()))
                os.kill(os.getpid(), signal.SIGKILL)
        self._hang = task.get("id") == os.environ.get("WF_HANG_TASK")
        super().reset(task)

    def act(self, obs: dict) -> dict:
        if self._hang:
            time.sleep(600)
        return super().act(obs)


class Gathered(ReferenceAgent):
    """With ``$WF_GATHER_DIR`` set, the first episode of each worker process waits, before it
    starts, until ``$WF_GATHER_COUNT`` processes have begun one (each leaves a file named by its
    pid in that folder; gives up after ``$WF_GATHER_TIMEOUT_S``, default 300). So every worker of a
    run plays an episode however late it starts: without it, one started early may play them all."""

    _gathered = False

    def reset(self, task) -> None:
        folder = os.environ.get("WF_GATHER_DIR")
        if folder and not Gathered._gathered:
            Gathered._gathered = True
            here = Path(folder)
            here.mkdir(parents=True, exist_ok=True)
            (here / str(os.getpid())).touch()
            deadline = time.monotonic() + float(os.environ.get("WF_GATHER_TIMEOUT_S", "300"))
            while len(list(here.iterdir())) < int(os.environ.get("WF_GATHER_COUNT", "2")):
                if time.monotonic() > deadline:
                    break  # the test that asked says what is missing
                time.sleep(0.1)
        super().reset(task)
