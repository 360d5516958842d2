"""Tasks, ground truth, evaluators and reports.

``tasks`` loads and validates task suites (ours, and the Mind2Web-Live key-node file as published);
the evaluator modules (``answer``, ``partial``, ``keynodes``, ``rubric``, ``ranking``,
``final_state``, ``behaviour``) are pure functions over a task's ground truth and a trajectory;
``score`` combines them per task and summarises a run; ``report`` writes ``report.json`` and a
self-contained ``report.html`` for a run directory. The rules are in ``eval/FORMATS.md``.

This package never imports ``webfreeze.agents``: scoring cannot depend on who acted.
"""

from .errors import EvalError, ReportError, TaskError

__all__ = ["EvalError", "ReportError", "TaskError"]
