"""The personalisation part of a report: Persona2Web's Table 3 (P_web, P_pref, P_avg, Intent, SR
per level and per history-access scheme), retrieval Hit@k of the gold history entries, APeB
ranking Hit@1/Hit@5, and who decided the rubric items. Rules in docs/suites-and-runs.md ("Personalisation").

Everything is computed from ``score_task`` results (``eval.score``); nothing is re-scored here.
"""

from __future__ import annotations

from typing import Any

from .infrastructure import infrastructure_counts, infrastructure_phrase
from .rubric import UNDECIDED

NO_LEVEL = "-"
# Deciders of rubric items that are not judges (``decided_by``). "agent's word" is kept for
# results scored before an intent resting on the agent's answer alone became "undecided".
NOT_JUDGES = ("rule", "instruction", "ground truth", "infrastructure", "undecided", "agent's word")
# The deciders that are the rules (an item decided from the trajectory, the instruction or the
# task's final-state checks).
RULE_DECIDERS = ("rule", "instruction", "ground truth")


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def intent_decided(rb: dict) -> bool:
    """Whether a task's rubric result has a decided intent (an undecided one scores None)."""
    return rb.get("intent") is not None


def rubric_values(results: list[dict]) -> dict:
    """Per task, on a 0-1 scale, the values behind a Table 3 row: ``web``, ``pref``, ``intent``
    (floats) and ``sr`` (booleans). ``intent`` and ``sr`` hold only the tasks whose intent was
    decided (an undecided intent is neither credited nor counted as a failure). A task without a
    trajectory scores 0 on every part its rubric has: its ``rubric_parts`` (both website and
    preference in results that predate them); it is decided (the agent did nothing)."""
    web, pref, intent, sr = [], [], [], []
    for r in results:
        rb = (r.get("results") or {}).get("rubric")
        if rb is None:  # missing trajectory: zeros where the rubric would have scored
            parts = r.get("rubric_parts", ("website", "preference"))
            if "website" in parts:
                web.append(0.0)
            if "preference" in parts:
                pref.append(0.0)
            intent.append(0.0)
            sr.append(False)
            continue
        if "website" in rb:
            web.append(rb["website"]["score"] / 10.0)
        if "preference" in rb:
            pref.append(rb["preference"]["score"] / 10.0)
        if intent_decided(rb):
            intent.append(rb["intent"] / 10.0)
            sr.append(bool(rb["success"]))
    return {"web": web, "pref": pref, "intent": intent, "sr": sr}


def table_row(results: list[dict]) -> dict:
    """One Table 3 row over task results that have rubric ground truth, on a 0-1 scale. A task
    without a trajectory scores 0 on every part its rubric has (the agent did nothing): its
    ``rubric_parts`` (both website and preference in results that predate them). Intent and SR are
    over the ``decided`` tasks only (those whose intent was decided); ``undecided`` counts the rest."""
    v = rubric_values(results)
    web, pref, intent, success = v["web"], v["pref"], v["intent"], v["sr"]
    p_web, p_pref = _mean(web), _mean(pref)
    parts = [p for p in (p_web, p_pref) if p is not None]
    return {"tasks": len(results), "missing": sum(1 for r in results if r["outcome"] == "missing"),
            # ended by the LLM provider or a live site failing: scored as run (intent 0), counted apart
            # as in the summary
            **infrastructure_counts(results),
            "decided": len(success), "undecided": len(results) - len(success),
            "p_web": p_web, "p_pref": p_pref, "p_avg": sum(parts) / len(parts) if parts else None,
            "intent": _mean(intent), "sr": _mean([1.0 if s else 0.0 for s in success])}


def _level_key(r: dict) -> str:
    level = r.get("level")
    return str(level) if level is not None else NO_LEVEL


def _group(results: list[dict], key) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in results:
        out.setdefault(key(r), []).append(r)
    return dict(sorted(out.items()))


def retrieval_hits(results: list[dict]) -> dict | None:
    """Hit@k of the gold history entries, per preference key and overall (over every (task, key)
    pair of the tasks that ran), per scheme; None when no task names gold entries."""
    pairs: list[tuple[str, str, bool]] = []  # (scheme, key, hit)
    ks: set[int] = set()
    tasks = with_retrieval = 0
    for r in results:
        hits = (r["results"].get("rubric") or {}).get("gold_hits")
        if not hits:
            continue
        tasks += 1
        with_retrieval += 1 if hits["history_steps"] else 0
        k = hits["k"]
        ks.update(k if isinstance(k, list) else [k] if isinstance(k, int) else [])
        pairs.extend((r.get("scheme") or "no-history", key, hit) for key, hit in hits["by_key"].items())
    if not tasks:
        return None

    def rate(sel: list[bool]) -> dict:
        return {"pairs": len(sel), "hits": sum(sel), "hit@k": sum(sel) / len(sel) if sel else None}

    return {"k": sorted(ks)[0] if len(ks) == 1 else sorted(ks) or None, "tasks": tasks,
            "tasks_with_retrieval": with_retrieval, "overall": rate([h for _, _, h in pairs]),
            "by_key": {key: rate([h for _, k, h in pairs if k == key]) for key in sorted({k for _, k, _ in pairs})},
            "by_scheme": {s: rate([h for sc, _, h in pairs if sc == s]) for s in sorted({s for s, _, _ in pairs})}}


def ranking_summary(results: list[dict]) -> dict | None:
    """Hit@1 and Hit@5 over every ranking task; an invalid answer or a missing trajectory is a miss."""
    rk = [r for r in results if "ranking" in r["kinds"]]
    if not rk:
        return None
    ran = [r["results"]["ranking"] for r in rk if "ranking" in r["results"]]
    invalid = [r["task_id"] for r in rk if "ranking" in r["results"] and not r["results"]["ranking"]["valid"]]
    n = len(rk)
    return {"tasks": n, "valid": len(ran) - len(invalid), "invalid": len(invalid), "invalid_tasks": invalid,
            "missing": n - len(ran),
            "hit@1": sum(1 for x in ran if x["hit@1"]) / n, "hit@5": sum(1 for x in ran if x["hit@5"]) / n}


def _deciders(rb: dict) -> list[str]:
    """Who decided each decision of one rubric result: retrieval and use of every item, then the intent."""
    names = [i["retrieved_by"] for i in rb.get("items", [])] + [i["used_by"] for i in rb.get("items", [])]
    detail = rb.get("intent_detail") or {}
    names.append(detail.get("decided_by") or ("rule" if intent_decided(rb) else UNDECIDED))
    return names


def decided_by(results: list[dict]) -> dict[str, int]:
    """How many rubric decisions each decider made: ``rule``, ``instruction``, ``ground truth``,
    ``infrastructure`` (an intent left without verdict by a provider failure), ``undecided`` (an
    intent only the agent's answer vouches for, with no final-state check and no judge) or a judge's
    name (retrieval and use of every item, and the intent)."""
    counts: dict[str, int] = {}
    for r in results:
        rb = r["results"].get("rubric")
        if not rb:
            continue
        for n in _deciders(rb):
            counts[n] = counts.get(n, 0) + 1
    return dict(sorted(counts.items()))


def by_task(results: list[dict]) -> dict[str, dict]:
    """Per task that ran, who decided its rubric: ``rules`` (decisions by rule, instruction or the
    final-state checks), ``judge`` (decisions by a judge), ``undecided`` (the parts left undecided:
    ``["intent"]`` or none), ``intent`` (the intent's decider) and ``infrastructure`` (1 when a
    provider failure ended it), with the task's ``level`` and ``scheme``."""
    out: dict[str, dict] = {}
    for r in results:
        rb = r["results"].get("rubric")
        if not rb:
            continue
        names = _deciders(rb)
        out[r["task_id"]] = {
            "level": r.get("level"), "scheme": r.get("scheme") or "no-history",
            "rules": sum(1 for n in names if n in RULE_DECIDERS),
            "judge": sum(1 for n in names if n not in NOT_JUDGES),
            "infrastructure": sum(1 for n in names if n == "infrastructure"),
            "undecided": ["intent"] if not intent_decided(rb) else [],
            "intent": names[-1]}
    return dict(sorted(out.items()))


def personalisation(results: list[dict]) -> dict | None:
    """The report's ``personalisation`` section, or None when the run has no rubric or ranking task."""
    rubric = [r for r in results if "rubric" in r["kinds"]]
    ranking = ranking_summary(results)
    if not rubric and ranking is None:
        return None
    out: dict[str, Any] = {}
    if rubric:
        judges = decided_by(rubric)
        out.update({
            "overall": table_row(rubric),
            "by_level": {lv: table_row(rs) for lv, rs in _group(rubric, _level_key).items()},
            "by_scheme": {s: table_row(rs) for s, rs in _group(rubric, lambda r: r.get("scheme") or "no-history").items()},
            "table": {s: {lv: table_row(x) for lv, x in _group(rs, _level_key).items()} | {"all": table_row(rs)}
                      for s, rs in _group(rubric, lambda r: r.get("scheme") or "no-history").items()},
            "decided_by": judges,
            "judges_that_decided": sorted(n for n in judges if n not in NOT_JUDGES),
            "by_task": by_task(rubric),
        })
        hits = retrieval_hits(rubric)
        if hits is not None:
            out["retrieval"] = hits
    if ranking is not None:
        out["ranking"] = ranking
    return out


# ------------------------------------------------------------------------------ Markdown
# Undecided task ids the Markdown names before it says "and N more".
MAX_LISTED = 20


def _decided(row: dict, key: str = "decided") -> str:
    """A row's count of decided (or ``undecided``) tasks; "-" in results scored before the count existed."""
    return str(row[key]) if key in row else "-"


def _f(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def markdown(section: dict | None) -> str:
    """The personalisation section as Markdown tables (Table 3 per scheme x level, Hit@k, ranking)."""
    if not section:
        return ""
    lines: list[str] = []
    if "table" in section:
        levels = sorted({lv for rows in section["table"].values() for lv in rows if lv != "all"})
        lines += ["### Persona2Web (0-1 scale; Intent and SR over the decided tasks)", "",
                  "| scheme | level | tasks | decided | undecided | P_web | P_pref | P_avg | Intent | SR |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for scheme, rows in section["table"].items():
            for lv in levels + ["all"]:
                if lv in rows:
                    r = rows[lv]
                    lines.append(f"| {scheme} | {lv} | {r['tasks']} | {_decided(r)} | {_decided(r, 'undecided')} | "
                                 f"{_f(r['p_web'])} | {_f(r['p_pref'])} | {_f(r['p_avg'])} | {_f(r['intent'])} | "
                                 f"{_f(r['sr'])} |")
        lines.append("")
        decided = ", ".join(f"{k} {v}" for k, v in section["decided_by"].items())
        lines += [f"Decided by: {decided}.", ""]
        undecided = [t for t, d in (section.get("by_task") or {}).items() if d["undecided"]]
        if undecided:
            shown = ", ".join(undecided[:MAX_LISTED]) + (f" and {len(undecided) - MAX_LISTED} more"
                                                        if len(undecided) > MAX_LISTED else "")
            lines += [f"Intent undecided for {len(undecided)} task(s) (no final-state check, no judge, and nothing in "
                      "the trajectory says the goal was not achieved: only the agent's answer says it was done), "
                      f"left out of Intent and SR: {shown}. "
                      "Score with `--judge llm` to decide them; who decided each task is in report.json "
                      "(`personalisation.by_task`) and report.html.", ""]
        infra = section["overall"].get("infrastructure_errors")
        if infra:
            lines += [f"{infra} task(s) {infrastructure_phrase(section['overall'])} (infrastructure, not the agent's failure): "
                      "scored as run, intent 0; run the same command again to retry them.", ""]
    if "retrieval" in section:
        rt = section["retrieval"]
        lines += [f"### Retrieval Hit@{_f(rt['k'])} of the gold history entries", "",
                  "| key | pairs | hits | Hit@k |", "|---|---:|---:|---:|"]
        for key, r in rt["by_key"].items():
            lines.append(f"| {key} | {r['pairs']} | {r['hits']} | {_f(r['hit@k'])} |")
        o = rt["overall"]
        lines += [f"| **overall** | {o['pairs']} | {o['hits']} | {_f(o['hit@k'])} |", ""]
    if "ranking" in section:
        r = section["ranking"]
        lines += ["### Ranking (APeB)", "", "| tasks | valid | invalid | missing | Hit@1 | Hit@5 |",
                  "|---:|---:|---:|---:|---:|---:|",
                  f"| {r['tasks']} | {r['valid']} | {r['invalid']} | {r['missing']} | {_f(r['hit@1'])} | "
                  f"{_f(r['hit@5'])} |", ""]
    return "\n".join(lines)
