"""Scoring one task (every ground-truth kind it has) and summarising a run.

``score_task`` rules (also in docs/suites-and-runs.md):

- The *success kinds* are answer, key_nodes, rubric, ranking, final_state and requests; the task
  succeeds when every success kind present succeeds.
- ``reference_trajectory`` gives partial credit (``partial``: overlap > 0.7) and the reference
  step count; it decides success only when it is the task's only kind.
- A rubric's intent satisfaction never looks at the preferences: it is decided by
  ``rubric.intent`` (checks in the final_state format) when given, else by the ``count`` checks
  of ``final_state`` only (``contains`` checks encode the preferred item, size or slot). With
  neither, the rubric decides it (an answer on an expected site; a judge when one is given; see
  ``rubric``). The other success kinds still decide the task's success.
- Ranking ground truth is ``ranking: {target, candidates}`` or the older ``candidates`` +
  ``target``; the answer must follow the schema in ``ranking`` (invalid = a miss, counted).
- ``level`` (the task's field) and ``scheme`` (the trajectory's ``agent.config.scheme``, absent =
  ``no-history``) are copied into the result of personalised tasks for the report's tables.
- ``steps`` counts browser steps; history accesses are counted apart in ``behaviour``.
- ``behaviour.efficiency_ratio`` (``behaviour.py``): reference steps (the reference trajectory's
  step count, else ``reference_length``) / agent steps (browser steps).
- ``outcome``: ``success``; else ``undecided`` when the rubric's success waits on an undecided
  intent (``rubric.success`` None: nothing in the trajectory decides, no final-state check, no
  judge) and every other success kind succeeded, since the task is then neither a success nor a
  failure (its ``success`` stays false, never credited, and its error category is ``undecided``,
  not a false end); else ``partial`` when the reference overlap is above 0.7 (WebArxiv's
  "partially correct"); else ``fail``. A task with no trajectory: ``missing``.
- ``score``: the mean over the success kinds present of their scores (answer: share of checks;
  key_nodes: completion rate; rubric: mean of its 0-10 scores / 10; ranking: Hit@1; final_state
  and requests: share of checks), or the reference overlap when it is the only kind.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .answer import evaluate_answer
from .behaviour import UNDECIDED, evaluate_behaviour, reference_step_count
from .final_state import evaluate_final_state
from .infrastructure import INFRASTRUCTURE_CAUSES, infrastructure_counts
from .judge import Judge, judge_name
from .keynodes import evaluate_key_nodes
from .partial import evaluate_partial
from .ranking import evaluate_ranking
from .request_checks import evaluate_requests
from .rubric import evaluate_rubric, rubric_parts
from .tasks import Task, ranking_truth

SUCCESS_KINDS = ("answer", "key_nodes", "ranking", "final_state", "requests", "rubric")


def score_task(task: Task, trajectory: dict | None, judge: Judge | None = None,
               dom_loader: Callable[[str], bytes | None] | None = None) -> dict:
    """Score one trajectory against every kind of ground truth ``task`` has (``dom_loader``: reads
    the steps' DOM snapshots for key nodes, ``keynodes.run_dom_loader``)."""
    gt = task.ground_truth
    base: dict[str, Any] = {"task_id": task.id, "category": task.category, "instruction": task.instruction,
                            "kinds": task.kinds, "judge": judge_name(judge)}
    if task.extra.get("level") is not None:
        base["level"] = task.extra["level"]
    if trajectory is not None and ("rubric" in task.ground_truth or "level" in base):
        base["scheme"] = scheme_of(trajectory)
    if trajectory is None:
        if "rubric" in gt:  # the parts it would have scored, for the personalisation table's zeros
            base["rubric_parts"] = rubric_parts(gt["rubric"])
        return {**base, "outcome": "missing", "success": False, "partial": False, "score": 0.0, "steps": 0,
                "answer": None, "results": {}, "behaviour": {"error_category": "missing"}}
    answer = trajectory.get("answer")
    results: dict[str, dict] = {}
    if "answer" in gt:
        results["answer"] = evaluate_answer(gt["answer"], answer)
    if "key_nodes" in gt:
        results["key_nodes"] = evaluate_key_nodes(gt["key_nodes"], trajectory, reference_length=task.reference_length,
                                                  judge=judge, dom_loader=dom_loader)
    ranking = ranking_truth(gt)
    if ranking is not None:
        results["ranking"] = evaluate_ranking(ranking[0], ranking[1], answer)
    if "final_state" in gt:
        results["final_state"] = evaluate_final_state(gt["final_state"], trajectory)
    if "requests" in gt:
        results["requests"] = evaluate_requests(gt["requests"], trajectory)
    if "rubric" in gt:
        checks = intent_checks(gt)
        intent = evaluate_final_state(checks, trajectory) if checks else None
        results["rubric"] = evaluate_rubric(gt["rubric"], trajectory, instruction=task.instruction,
                                            intent_done=intent["success"] if intent else None, judge=judge,
                                            start_url=task.start_url)
        if intent is not None:
            results["rubric"]["intent_detail"]["checks"] = intent["checks"]
    if task.reference is not None:
        results["reference_trajectory"] = evaluate_partial(task.reference, trajectory)
    reference_steps = reference_step_count(task.reference, task.reference_length)

    present = [k for k in SUCCESS_KINDS if k in results]
    overlap_result = results.get("reference_trajectory")
    partial = bool(overlap_result and overlap_result["partial"])
    # a rubric whose success waits on an undecided intent (None), every other kind having succeeded:
    # the task is neither a success nor a failure
    undecided = ("rubric" in results and results["rubric"]["success"] is None
                 and all(results[k]["success"] for k in present if k != "rubric"))
    if present:
        success = all(results[k]["success"] for k in present)
        score = sum(_kind_score(k, results[k]) for k in present) / len(present)
    else:
        success = partial
        score = (overlap_result or {}).get("overlap") or 0.0
    outcome = "success" if success else UNDECIDED if undecided else "partial" if partial else "fail"
    behaviour = evaluate_behaviour(trajectory, success=success, reference_steps=reference_steps,
                                   undecided=undecided)
    end = trajectory.get("end") or {}
    out = {**base, "outcome": outcome, "success": success, "partial": partial, "score": score,
           "steps": behaviour["steps"], "answer": answer,
           "end_reason": end.get("reason"), "results": results, "behaviour": behaviour}
    if end.get("cause"):  # "provider" or "site": an infrastructure failure, counted apart from the agent's own
        out["end_cause"] = end["cause"]
    usage = llm_usage(trajectory)
    if usage is not None:
        out["llm"] = usage
    return out


def intent_checks(gt: dict) -> list[dict] | None:
    """The checks that decide a rubric's intent (Persona2Web, Appendix D: intent is scored apart
    from the preferences): ``rubric.intent`` when given (final_state format), else the ``count``
    checks of ``final_state`` (the request was carried out: one item in the cart, one reservation),
    never its ``contains`` checks, which name the preferred item, size or slot. None when neither
    exists (the rubric's rules, or a judge, decide)."""
    own = gt["rubric"].get("intent")
    if own:
        return own
    counts = [c for c in gt.get("final_state") or [] if "count" in c]
    return counts or None


def scheme_of(trajectory: dict) -> str:
    """The history-access scheme of the agent that ran: ``agent.config.scheme``; none = no-history."""
    agent = trajectory.get("agent") if isinstance(trajectory.get("agent"), dict) else {}
    config = agent.get("config") if isinstance(agent.get("config"), dict) else {}
    scheme = config.get("scheme")
    return scheme if isinstance(scheme, str) and scheme else "no-history"


LLM_COUNTS = ("calls", "prompt_tokens", "completion_tokens")


def llm_usage(trajectory: dict) -> dict | None:
    """The LLM calls and tokens of a trajectory, summed over its steps' ``agent_fields.llm``
    (None when no step reports any)."""
    total, seen = dict.fromkeys(LLM_COUNTS, 0), False
    for step in trajectory.get("steps") or []:
        llm = (step.get("agent_fields") or {}).get("llm")
        if not isinstance(llm, dict):
            continue
        seen = True
        for k in LLM_COUNTS:
            v = llm.get(k)
            if isinstance(v, int) and not isinstance(v, bool):
                total[k] += v
    return total if seen else None


def _kind_score(kind: str, result: dict) -> float:
    if kind == "key_nodes":
        return result["completion_rate"]
    return result["score"]


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


def _rate(flags: list[bool]) -> float | None:
    return sum(1 for f in flags if f) / len(flags) if flags else None


def summary_row(results: list[dict]) -> dict:
    """Counts and means over some task results (one row of the summary table)."""
    ran = [r for r in results if r["outcome"] != "missing"]
    kn = [r["results"]["key_nodes"] for r in ran if "key_nodes" in r["results"]]
    rk = [r["results"]["ranking"] for r in ran if "ranking" in r["results"]]
    # Hit@k over every ranking task: a missing trajectory or an invalid answer is a miss
    rk_all = [r for r in results if "ranking" in r["kinds"]]
    rb = [r["results"]["rubric"] for r in ran if "rubric" in r["results"]]
    ov = [r["results"]["reference_trajectory"] for r in ran if "reference_trajectory" in r["results"]]
    cats = [r["behaviour"]["error_category"] for r in results]
    n = len(results)
    return {
        "tasks": n,
        "missing": sum(1 for r in results if r["outcome"] == "missing"),
        "success": sum(1 for r in results if r["success"]),
        "success_rate": _rate([r["success"] for r in results]),
        "partial": sum(1 for r in results if r["outcome"] == "partial"),
        "partial_rate": _rate([r["outcome"] == "partial" for r in results]),
        # neither succeeded nor failed: a rubric's intent nothing decided (counted in success_rate's
        # denominator as not succeeded, never credited)
        "undecided": sum(1 for r in results if r["outcome"] == UNDECIDED),
        "mean_score": _mean(r["score"] for r in results),
        "avg_steps": _mean(r["steps"] for r in ran),
        "mean_efficiency": _mean(r["behaviour"].get("efficiency_ratio") for r in ran),
        "mean_overlap": _mean(o["overlap"] for o in ov),
        "false_end": cats.count("false_end"),
        # false ends where the agent declared the task impossible (the paper counts them as false ends)
        "false_end_infeasible": sum(1 for r in ran if r["behaviour"].get("false_end_kind") == "infeasible"),
        "loops": sum(1 for r in ran if r["behaviour"]["loop"]["detected"]),
        "step_limit_loop": cats.count("step_limit_loop"),
        "step_limit_inefficient": cats.count("step_limit_inefficient"),
        # the paper's "other": episodes ended by an error, or stopped (those infrastructure ended are
        # counted apart, below)
        "other_errors": sum(1 for r, c in zip(results, cats)
                            if c == "other" or c == "error" and r.get("end_cause") not in INFRASTRUCTURE_CAUSES),
        "key_node_completion": _mean(k["completion_rate"] for k in kn),
        "key_node_near_success": sum(1 for k in kn if k["near_success"]) if kn else None,
        "hit@1": _rate([bool(r["results"].get("ranking", {}).get("hit@1")) for r in rk_all]),
        "hit@5": _rate([bool(r["results"].get("ranking", {}).get("hit@5")) for r in rk_all]),
        "ranking_invalid": sum(1 for k in rk if not k.get("valid", True)) if rk_all else None,
        "rubric_website": _mean(b["website"]["score"] for b in rb if "website" in b),
        "rubric_preference": _mean(b["preference"]["score"] for b in rb if "preference" in b),
        "rubric_intent": _mean(b["intent"] for b in rb),
        # episodes ended by a provider that still failed after the client's retries, or by a live site
        # failing: not the agent's failure (site_errors only when a site failed: see eval/infrastructure.py)
        **infrastructure_counts(results),
        **_llm_totals(results),
    }


def _llm_totals(results: list[dict]) -> dict:
    used = [r["llm"] for r in results if isinstance(r.get("llm"), dict)]
    if not used:
        return {"llm_calls": None, "prompt_tokens": None, "completion_tokens": None}
    return {"llm_calls": sum(u["calls"] for u in used), "prompt_tokens": sum(u["prompt_tokens"] for u in used),
            "completion_tokens": sum(u["completion_tokens"] for u in used)}


def summarise(results: list[dict]) -> dict:
    """``{"overall": row, "categories": {category: row}}`` (categories sorted)."""
    by_cat: dict[str, list[dict]] = {}
    for r in results:
        by_cat.setdefault(r["category"], []).append(r)
    return {"overall": summary_row(results),
            "categories": {c: summary_row(rs) for c, rs in sorted(by_cat.items())}}
