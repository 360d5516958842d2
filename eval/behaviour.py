"""Behaviour metrics and the error taxonomy (Long-context WebAgents, arXiv 2512.04307, its error
analysis: false end, step limit split into loop / inefficient progress, other; efficiency ratio =
reference steps / agent steps), WebArxiv's steps and consistency. Rules (also in docs/suites-and-runs.md):

- Loop: the sequence of (action string trimmed, ``obs_digest``) pairs holds a block of 1-3 pairs
  repeated back to back at least 3 times. The reported loop is the one covering the most steps
  (ties: the shortest block, then the earliest start). Reported whenever it happened
  (``loop``, the run's ``loops`` count); ``final_loop`` is the loop that runs up to the last
  browser step, if any (the longest such run).
- False end: the agent ended the episode itself (``end.reason`` ``answer`` or ``infeasible``) and
  the task failed, i.e. key steps (or any other success check) are missing. The paper counts an
  agent that declares the task done *or impossible* while key steps are missing as a false end;
  ``false_end_kind`` keeps which (``answer`` / ``infeasible``).
- Step limit: ``end.reason == "step_limit"`` on a failed task, split into ``loop`` when the agent
  is in a loop *at the limit* (its last browser steps are a block of 1-3 repeated back to back at
  least 3 times) and ``inefficient_progress`` otherwise, even when it looped earlier and left the
  loop.
- Error category of a task: ``success``, ``undecided`` (its success is undecided: a Persona2Web
  rubric whose intent nothing in the trajectory decides, every other check passed; neither a
  success nor a failure, so never a false end), ``false_end``, ``step_limit_loop``,
  ``step_limit_inefficient``, ``error`` (the episode ended on an environment or agent error), else
  ``other`` (``stopped``); ``missing`` for a task with no trajectory. ``error`` and ``other`` are
  the paper's "other".
- Efficiency ratio (the one definition every report uses): reference steps / agent steps. Agent
  steps = every step the agent spent of its step budget: all browser steps, the answer or
  infeasibility report, no-ops, waits, unparsed and failed actions included; history accesses are
  not steps of the budget and are left out. Reference steps = the task's reference trajectory
  counted the same way (an agent-format reference: its browser steps; a ``record session``
  reference: its normalised actions plus its answer steps), else ``reference_length``. None
  without a reference or when the agent took no step. Above 1 means shorter than the reference.
- Trajectory consistency over repeated runs of one task: the share of runs whose action-string
  sequence equals the most common sequence (1.0 for identical runs; 1/n when all differ).
- Average steps: mean of the browser steps (every step but history accesses).
- History accesses (steps of ``kind == "history"``) are not navigation: they are left out of loop
  detection, of the efficiency ratio and of the step counts, and counted apart (``history_steps``).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from .trajectory import (
    TRAJECTORY_FORMAT,
    action_strings,
    browser_steps,
    history_steps,
    is_history_step,
    session_actions,
)

MAX_CYCLE = 3
MIN_REPEATS = 3
# The error category (and the task outcome) of a task whose success nothing decided: a Persona2Web
# rubric whose intent is undecided (``rubric.UNDECIDED``), its other checks passed.
UNDECIDED = "undecided"


def detect_loop(trajectory: dict, *, max_cycle: int = MAX_CYCLE, min_repeats: int = MIN_REPEATS) -> dict:
    """``{"detected", "cycle_length", "repeats", "start_step", "steps_in_loop"}``."""
    # history accesses are not navigation: a loop is a repeated block of browser steps only
    browser = [(i, s) for i, s in enumerate(trajectory.get("steps", [])) if not is_history_step(s)]
    index = [i for i, _ in browser]
    seq = [(str(s.get("action") or "").strip(), s.get("obs_digest")) for _, s in browser]
    best = None  # (covered, -length, -start)
    n = len(seq)
    for length in range(1, max_cycle + 1):
        for start in range(0, n - length * min_repeats + 1):
            block = seq[start:start + length]
            reps = 1
            while seq[start + reps * length:start + (reps + 1) * length] == block:
                reps += 1
            if reps >= min_repeats:
                key = (reps * length, -length, -start)
                if best is None or key > best[0]:
                    best = (key, length, reps, start)
    if best is None:
        return {"detected": False, "cycle_length": None, "repeats": 0, "start_step": None, "steps_in_loop": 0}
    _, length, reps, start = best
    return {"detected": True, "cycle_length": length, "repeats": reps, "start_step": index[start],
            "steps_in_loop": length * reps}


def final_loop(trajectory: dict, *, max_cycle: int = MAX_CYCLE, min_repeats: int = MIN_REPEATS) -> dict:
    """The loop the agent is in at its last browser step: a block of 1-3 (action, obs_digest) pairs
    ending at the last browser step and repeated back to back at least ``min_repeats`` times
    (history steps left out). The longest such run wins (ties: the shortest block).
    ``{"detected", "cycle_length", "repeats", "start_step", "steps_in_loop"}``."""
    browser = [(i, s) for i, s in enumerate(trajectory.get("steps", [])) if not is_history_step(s)]
    seq = [(str(s.get("action") or "").strip(), s.get("obs_digest")) for _, s in browser]
    n = len(seq)
    best = None  # (covered, -length, length, reps)
    for length in range(1, max_cycle + 1):
        if n < length * min_repeats:
            break
        block = seq[n - length:]
        reps = 1
        while (reps + 1) * length <= n and seq[n - (reps + 1) * length:n - reps * length] == block:
            reps += 1
        if reps >= min_repeats and (best is None or (reps * length, -length) > best[:2]):
            best = (reps * length, -length, length, reps)
    if best is None:
        return {"detected": False, "cycle_length": None, "repeats": 0, "start_step": None, "steps_in_loop": 0}
    covered, _, length, reps = best
    return {"detected": True, "cycle_length": length, "repeats": reps, "start_step": browser[n - covered][0],
            "steps_in_loop": covered}


def agent_step_count(trajectory: dict) -> int:
    """The agent's steps for the efficiency ratio: every browser step (answer, infeasibility report,
    no-op, wait and failed actions included; history accesses are not steps of the budget)."""
    return len(browser_steps(trajectory))


def reference_step_count(reference: dict | None, reference_length: int | None = None) -> int | None:
    """Reference steps, counted as :func:`agent_step_count` counts the agent's: an agent-format
    reference's browser steps; a ``record session`` reference's normalised actions plus its answer
    steps; else ``reference_length`` (None when there is neither, or the count is 0)."""
    if isinstance(reference, dict):
        if reference.get("format") == TRAJECTORY_FORMAT:
            n = len(browser_steps(reference))
        else:
            answers = sum(1 for s in reference.get("steps", []) if isinstance(s, dict) and s.get("action") == "answer")
            n = len(session_actions(reference)) + answers
        if n:
            return n
    return reference_length or None


def efficiency_ratio(reference_steps: int | None, trajectory: dict) -> float | None:
    """Reference steps / agent steps (:func:`agent_step_count`); None without a reference or with no
    agent step. The one efficiency figure of every report (key nodes' ``efficiency`` included)."""
    agent_steps = agent_step_count(trajectory)
    if not reference_steps or not agent_steps:
        return None
    return reference_steps / agent_steps


def error_category(trajectory: dict, success: bool, loop_at_limit: bool, undecided: bool = False) -> str:
    """The task's error category (module rules): ``loop_at_limit`` is whether the agent is in a
    loop at its last step (:func:`final_loop`), not whether it looped at some time; ``undecided``
    whether the task's success is undecided (neither a success nor a failure: not a false end)."""
    if success:
        return "success"
    if undecided:
        return UNDECIDED
    reason = (trajectory.get("end") or {}).get("reason")
    if reason in ("answer", "infeasible"):
        return "false_end"
    if reason == "step_limit":
        return "step_limit_loop" if loop_at_limit else "step_limit_inefficient"
    if reason == "error":
        return "error"
    return "other"


def evaluate_behaviour(trajectory: dict, *, success: bool, reference_steps: int | None = None,
                       undecided: bool = False) -> dict:
    loop = detect_loop(trajectory)
    at_limit = final_loop(trajectory)
    category = error_category(trajectory, success, at_limit["detected"], undecided)
    reason = (trajectory.get("end") or {}).get("reason")
    return {"steps": len(browser_steps(trajectory)), "history_steps": len(history_steps(trajectory)), "loop": loop,
            "final_loop": at_limit, "false_end": category == "false_end",
            "false_end_kind": reason if category == "false_end" else None,
            "step_limit": ({"loop": "loop", "inefficient": "inefficient_progress"}
                           .get(category.removeprefix("step_limit_")) if category.startswith("step_limit") else None),
            "error_category": category, "end_reason": reason,
            "reference_steps": reference_steps, "efficiency_ratio": efficiency_ratio(reference_steps, trajectory)}


def trajectory_consistency(trajectories: Iterable[dict]) -> float | None:
    """Share of runs whose action sequence is the most common one (None for no runs)."""
    seqs = [tuple(action_strings(t)) for t in trajectories]
    if not seqs:
        return None
    return Counter(seqs).most_common(1)[0][1] / len(seqs)


def average_steps(trajectories: Iterable[dict]) -> float | None:
    counts = [len(browser_steps(t)) for t in trajectories]
    return sum(counts) / len(counts) if counts else None
