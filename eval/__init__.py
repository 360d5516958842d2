"""Tasks, ground truth, evaluators and reports.

``tasks`` loads and validates task suites (ours, and the Mind2Web-Live key-node file as published);
the evaluator modules (``answer``, ``partial``, ``keynodes``, ``rubric``, ``ranking``,
``final_state``, ``behaviour``) are pure functions over a task's ground truth and a trajectory;
``score`` combines them per task and summarises a run; ``personal`` adds Persona2Web's and APeB's
tables; ``report`` writes ``report.json`` and a self-contained ``report.html`` for a run
directory; ``judge`` is the judge interface and ``llm_judge`` its LLM implementation (through
``webfreeze.llm`` and its cassette). The rules are in ``docs/suites-and-runs.md``.

This package never imports ``webfreeze.agents``: scoring cannot depend on who acted.
"""

from .errors import EvalError, ReportError, TaskError
from .report import build_report, write_report
from .score import score_task, summarise
from .tasks import Suite, Task, load_suite, validate_task
from .trajectory import validate_trajectory

__all__ = ["EvalError", "ReportError", "Suite", "Task", "TaskError", "build_report", "load_suite", "score_task",
           "summarise", "validate_task", "validate_trajectory", "write_report"]
