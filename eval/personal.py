"""The personalisation part of a report: Persona2Web's Table 3 (P_web, P_pref, P_avg, Intent, SR
per level and per history-access scheme), retrieval Hit@k of the gold history entries, APeB
ranking Hit@1/Hit@5, and who decided the rubric items. Rules in FORMATS.md ("Personalisation").

Everything is computed from ``score_task`` results (``eval.score``); nothing is re-scored here.
"""

from __future__ import annotations

from typing import Any

NO_LEVEL = "-"
# Deciders of rubric items that are not judges (``decided_by``).
NOT_JUDGES = ("rule", "instruction", "ground truth", "infrastructure", "agent's word")


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def rubric_values(results: list[dict]) -> dict:
    """Per task, on a 0-1 scale, the values behind a Table 3 row: ``web``, ``pref``, ``intent``
    (floats) and ``sr`` (booleans). A task without a trajectory scores 0 on every part its rubric
    has: its ``rubric_parts`` (both website and preference in results that predate them)."""
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
        intent.append(rb["intent"] / 10.0)
        sr.append(bool(rb["success"]))
    return {"web": web, "pref": pref, "intent": intent, "sr": sr}


def table_row(results: list[dict]) -> dict:
    """One Table 3 row over task results that have rubric ground truth, on a 0-1 scale. A task
    without a trajectory scores 0 on every part its rubric has (the agent did nothing): its
    ``rubric_parts`` (both website and preference in results that predate them)."""
    v = rubric_values(results)
    web, pref, intent, success = v["web"], v["pref"], v["intent"], v["sr"]
    p_web, p_pref = _mean(web), _mean(pref)
    parts = [p for p in (p_web, p_pref) if p is not None]
    return {"tasks": len(results), "missing": sum(1 for r in results if r["outcome"] == "missing"),
            # ended by the LLM provider failing: scored as run (intent 0), counted apart as in the summary
            "infrastructure_errors": sum(1 for r in results if r.get("end_cause") == "provider"),
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


def decided_by(results: list[dict]) -> dict[str, int]:
    """How many rubric decisions each decider made: ``rule``, ``instruction``, ``ground truth``,
    ``agent's word`` (an intent done only because the agent answered so), ``infrastructure`` (an
    intent left undecided by a provider failure) or a judge's name
    (retrieval and use of every item, and the intent)."""
    counts: dict[str, int] = {}
    for r in results:
        rb = r["results"].get("rubric")
        if not rb:
            continue
        names = [i["retrieved_by"] for i in rb["items"]] + [i["used_by"] for i in rb["items"]]
        names.append(rb["intent_detail"]["decided_by"])
        for n in names:
            counts[n] = counts.get(n, 0) + 1
    return dict(sorted(counts.items()))


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
        })
        hits = retrieval_hits(rubric)
        if hits is not None:
            out["retrieval"] = hits
    if ranking is not None:
        out["ranking"] = ranking
    return out


# ------------------------------------------------------------------------------ Markdown
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
        lines += ["### Persona2Web (0-1 scale)", "",
                  "| scheme | level | tasks | P_web | P_pref | P_avg | Intent | SR |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for scheme, rows in section["table"].items():
            for lv in levels + ["all"]:
                if lv in rows:
                    r = rows[lv]
                    lines.append(f"| {scheme} | {lv} | {r['tasks']} | {_f(r['p_web'])} | {_f(r['p_pref'])} | "
                                 f"{_f(r['p_avg'])} | {_f(r['intent'])} | {_f(r['sr'])} |")
        lines.append("")
        decided = ", ".join(f"{k} {v}" for k, v in section["decided_by"].items())
        lines += [f"Decided by: {decided}.", ""]
        infra = section["overall"].get("infrastructure_errors")
        if infra:
            lines += [f"{infra} task(s) ended by an LLM provider failure (infrastructure, not the agent's failure): "
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
