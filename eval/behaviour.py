"""Behaviour metrics and the error taxonomy (Long-context WebAgents; WebArxiv's steps and
consistency). Rules (also in FORMATS.md):

- Loop: the sequence of (action string trimmed, ``obs_digest``) pairs holds a block of 1-3 pairs
  repeated back to back at least 3 times. The reported loop is the one covering the most steps
  (ties: the shortest block, then the earliest start).
- False end: the agent declared the task finished (``end.reason == "answer"``) but the task
  failed.
- Step limit: ``end.reason == "step_limit"`` on a failed task, split into ``loop`` (a loop was
  detected) and ``inefficient_progress`` (none was).
- Error category of a task: ``success``, ``false_end``, ``step_limit_loop``,
  ``step_limit_inefficient``, ``infeasible`` (the agent declared it impossible), ``error`` (the
  episode ended on an environment or agent error), else ``other``.
- Efficiency ratio: reference steps / agent steps, both counted as normalised actions (noop,
  wait, answer and infeasible steps do not count; see ``trajectory.Action``); None without a
  reference or when the agent made no action. Above 1 means shorter than the reference.
- Trajectory consistency over repeated runs of one task: the share of runs whose action-string
  sequence equals the most common sequence (1.0 for identical runs; 1/n when all differ).
- Average steps: mean of the browser steps (every step but history accesses).
- History accesses (steps of ``kind == "history"``) are not navigation: they are left out of loop
  detection, of the efficiency ratio and of the step counts, and counted apart (``history_steps``).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from .trajectory import action_strings, agent_actions, browser_steps, history_steps, is_history_step

MAX_CYCLE = 3
MIN_REPEATS = 3


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


def efficiency_ratio(reference_steps: int | None, trajectory: dict) -> float | None:
    agent_steps = len(agent_actions(trajectory))
    if not reference_steps or not agent_steps:
        return None
    return reference_steps / agent_steps


def error_category(trajectory: dict, success: bool, loop_detected: bool) -> str:
    if success:
        return "success"
    reason = (trajectory.get("end") or {}).get("reason")
    if reason == "answer":
        return "false_end"
    if reason == "step_limit":
        return "step_limit_loop" if loop_detected else "step_limit_inefficient"
    if reason == "infeasible":
        return "infeasible"
    if reason == "error":
        return "error"
    return "other"


def evaluate_behaviour(trajectory: dict, *, success: bool, reference_steps: int | None = None) -> dict:
    loop = detect_loop(trajectory)
    category = error_category(trajectory, success, loop["detected"])
    return {"steps": len(browser_steps(trajectory)), "history_steps": len(history_steps(trajectory)), "loop": loop,
            "false_end": category == "false_end",
            "step_limit": ({"loop": "loop", "inefficient": "inefficient_progress"}
                           .get(category.removeprefix("step_limit_")) if category.startswith("step_limit") else None),
            "error_category": category, "end_reason": (trajectory.get("end") or {}).get("reason"),
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
