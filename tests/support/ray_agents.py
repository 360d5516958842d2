"""Agents for the Ray executor's failure tests (imported by Ray workers as ``ray_agents:...`` with
``tests/`` on PYTHONPATH). Both are the reference agent, except on one task named by an environment
variable, so the rest of their runs equals a plain run of the same class."""

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
