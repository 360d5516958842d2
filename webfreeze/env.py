"""``webfreeze.WebEnv``: the agent environment with task suites and task scores wired in.

:class:`webfreeze.simulator.env.WebEnv` is the environment itself; the simulator stage does not
import the evaluators, so reading a suite from a path (``EnvConfig(suite="suite/")``) and the
``reward="score"`` option (the final step rewarded with the task's score) are provided here, at
the front door, where every stage may be used.
"""

from __future__ import annotations

from webfreeze.simulator.env import EnvConfig, EnvError
from webfreeze.simulator.env import WebEnv as _BaseEnv


class WebEnv(_BaseEnv):
    """:class:`webfreeze.simulator.env.WebEnv`, reading suites by path and scoring episodes with
    :mod:`webfreeze.eval` (``EnvConfig(reward="score")``)."""

    def _load_suite(self, suite):
        if hasattr(suite, "tasks"):
            return super()._load_suite(suite)
        from webfreeze.eval.errors import TaskError
        from webfreeze.eval.tasks import load_suite

        try:
            loaded = load_suite(suite)
        except TaskError as exc:
            raise EnvError(str(exc)) from None
        if not loaded.tasks:
            raise EnvError(f"{suite}: the suite has no tasks")
        return loaded

    def _score(self) -> float:
        from webfreeze.eval.errors import TaskError
        from webfreeze.eval.score import score_task
        from webfreeze.eval.tasks import validate_task

        task = self._task_obj
        if task is None:
            if not self.task.get("ground_truth"):
                return 0.0  # an exploration episode has nothing to score
            try:
                task = validate_task(self.task)
            except TaskError as exc:
                raise EnvError(f"reward='score': {exc}") from None
        trajectory = self.recorder.data(archive_digest=self.archive_digest)
        doms = self.recorder.doms  # the episode's DOM snapshots, still in memory
        return float(score_task(task, trajectory, dom_loader=doms.get).get("score") or 0.0)


__all__ = ["EnvConfig", "EnvError", "WebEnv"]
