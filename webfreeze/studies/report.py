"""The study report (``webfreeze study report DIR``): the cells' ``report.json`` files aggregated.

Per cell (one run) and per condition (the cells that differ only by repeat, pooled), overall and
per category: success / partial / fail rates with the standard error of a proportion, steps and
efficiency with the standard error of the mean, the error taxonomy as shares with their standard
errors, trajectory consistency across repeats, LLM calls and tokens; the success rate per repeat
with its standard error over repeats; the long-context table (per context condition, over the
dependent tasks) and Persona2Web's Table 3 when the cells have them. Definitions in
docs/studies.md.

Everything here is read from the cells' ``report.json`` (what ``eval`` scored), ``tasks.jsonl``
(which tasks depend on another) and trajectories (action sequences, for consistency); nothing is
re-scored. The outputs (``study-report.md``, ``.csv``, ``.json``, ``.html``) hold no timing and
no path, so a study and its replay from the cassettes give byte-identical files; timings go to
``study-timings.json``.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import os
from collections import Counter
from pathlib import Path
from typing import Any

from webfreeze.common.files import write_atomically
from webfreeze.eval.infrastructure import infrastructure_counts, infrastructure_phrase
from webfreeze.eval.personal import rubric_values, table_row
from webfreeze.eval.report import CSS
from webfreeze.eval.trajectory import action_strings
from webfreeze.studies.run import read_study_json
from webfreeze.studies.spec import CELLS_DIR, StudyError, condition_label

REPORT_FORMAT = "webfreeze-study-report"
REPORT_VERSION = 1
FILES = ("study-report.md", "study-report.csv", "study-report.json", "study-report.html")
TIMINGS_FILE = "study-timings.json"
# The error taxonomy's categories in the order tables show them; others found come after, sorted.
ERROR_ORDER = ("success", "false_end", "step_limit_loop", "step_limit_inefficient", "infeasible", "error", "other",
               "missing")
ERROR_NAMES = {"success": "success", "false_end": "false end", "step_limit_loop": "step limit: loop",
               "step_limit_inefficient": "step limit: inefficient", "infeasible": "infeasible", "error": "error",
               "other": "other", "missing": "missing"}
OVERALL = "overall"


# ------------------------------------------------------------------------------------ arithmetic
def se_proportion(p: float | None, n: int) -> float | None:
    """Standard error of a proportion ``p`` over ``n`` trials: sqrt(p(1-p)/n); None when n is 0."""
    if p is None or not n:
        return None
    return math.sqrt(p * (1 - p) / n)


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def sem(values: list[float]) -> float | None:
    """Standard error of the mean: the sample standard deviation (n - 1) over sqrt(n); None below 2 values."""
    n = len(values)
    if n < 2:
        return None
    m = sum(values) / n
    return math.sqrt(sum((x - m) ** 2 for x in values) / (n - 1)) / math.sqrt(n)


def proportion(flags: list[bool]) -> dict:
    n = len(flags)
    k = sum(1 for f in flags if f)
    p = k / n if n else None
    return {"count": k, "n": n, "rate": p, "se": se_proportion(p, n)}


def continuous(values: list[float]) -> dict:
    return {"n": len(values), "mean": mean(values), "sem": sem(values)}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


# ------------------------------------------------------------------------------------ statistics
def stats(results: list[dict]) -> dict:
    """The figures of a group of scored episodes (``report.json``'s per-task results)."""
    n = len(results)
    ran = [r for r in results if r.get("outcome") != "missing"]
    success = [bool(r.get("success")) for r in results]
    partial = [r.get("outcome") == "partial" for r in results]
    fail = [not s and not p for s, p in zip(success, partial)]
    cats = [str((r.get("behaviour") or {}).get("error_category") or "other") for r in results]
    found = sorted(set(cats), key=lambda c: (ERROR_ORDER.index(c) if c in ERROR_ORDER else len(ERROR_ORDER), c))
    steps = [_num(r.get("steps")) for r in ran]
    eff = [_num((r.get("behaviour") or {}).get("efficiency_ratio")) for r in ran]
    rs = [(r.get("long_context") or {}).get("retrieval_success") for r in ran]
    rs = [bool(x) for x in rs if isinstance(x, bool)]
    used = [r["llm"] for r in results if isinstance(r.get("llm"), dict)]
    llm = None
    if used:
        calls = sum(int(u.get("calls") or 0) for u in used)
        prompt = sum(int(u.get("prompt_tokens") or 0) for u in used)
        completion = sum(int(u.get("completion_tokens") or 0) for u in used)
        llm = {"calls": calls, "prompt_tokens": prompt, "completion_tokens": completion,
               "calls_per_task": calls / n if n else None,
               "tokens_per_task": (prompt + completion) / n if n else None}
    return {
        "n": n, "missing": n - len(ran),
        **infrastructure_counts(results),
        "success": proportion(success), "partial": proportion(partial), "fail": proportion(fail),
        "steps": continuous([s for s in steps if s is not None]),
        "steps_success": continuous([_num(r.get("steps")) for r in ran if r.get("success")
                                     and _num(r.get("steps")) is not None]),
        "efficiency": continuous([e for e in eff if e is not None]),
        "errors": {c: proportion([x == c for x in cats]) for c in found},
        "retrieval_success": proportion(rs) if rs else None,
        "llm": llm,
    }


def consistency(sequences_by_task: dict[str, list[tuple]]) -> dict | None:
    """Trajectory consistency over the repeats of each task: per task, the share of its repeats whose
    action sequence is the most common one (1.0: all identical; 1/R: all differ), averaged over the
    tasks; and the share of tasks whose repeats are all identical. Tasks run fewer than twice are
    left out; None when none is left."""
    shares, identical = [], []
    for seqs in sequences_by_task.values():
        if len(seqs) < 2:
            continue
        top = Counter(seqs).most_common(1)[0][1]
        shares.append(top / len(seqs))
        identical.append(top == len(seqs))
    if not shares:
        return None
    return {"tasks": len(shares), "consistency": mean(shares), "consistency_sem": sem(shares),
            "identical": proportion(identical)}


def over_repeats(rates: list[float]) -> dict:
    """The success rate of each repeat, their mean and its standard error over repeats."""
    return {"values": rates, "mean": mean(rates), "se": sem(rates)}


# ------------------------------------------------------------------------------------ personalisation
def _rubric_values(results: list[dict]) -> dict:
    """Per task, on a 0-1 scale, the values behind Table 3 (``eval.personal``'s rules)."""
    return rubric_values(results)


def persona_row(results: list[dict]) -> dict:
    row = table_row(results)
    v = _rubric_values(results)
    # Intent and SR (and their errors) are over the tasks whose intent was decided: an intent that
    # only the agent's answer vouches for is undecided, neither credited nor a failure
    return {"tasks": row["tasks"], "decided": row["decided"],
            "p_web": row["p_web"], "p_web_sem": sem(v["web"]), "p_pref": row["p_pref"],
            "p_pref_sem": sem(v["pref"]), "p_avg": row["p_avg"], "intent": row["intent"],
            "intent_sem": sem(v["intent"]), "sr": row["sr"], "sr_se": se_proportion(row["sr"], len(v["sr"]))}


def personalisation(results: list[dict]) -> dict | None:
    """Table 3 over pooled episodes: per scheme, per level and all levels."""
    rubric = [r for r in results if "rubric" in (r.get("kinds") or [])]
    if not rubric:
        return None
    out: dict[str, dict] = {}
    for scheme in sorted({r.get("scheme") or "no-history" for r in rubric}):
        rs = [r for r in rubric if (r.get("scheme") or "no-history") == scheme]
        levels = sorted({"-" if r.get("level") is None else str(r["level"]) for r in rs})
        out[scheme] = {lv: persona_row([r for r in rs if ("-" if r.get("level") is None else str(r["level"])) == lv])
                       for lv in levels}
        out[scheme]["all"] = persona_row(rs)
    return out


# ------------------------------------------------------------------------------------ reading cells
def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StudyError(f"{path}: not readable JSON ({exc})") from None


def _dependent_tasks(run_dir: Path) -> set[str]:
    out = set()
    path = run_dir / "tasks.jsonl"
    if not path.is_file():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            t = json.loads(line)
        except ValueError:
            continue
        if isinstance(t, dict) and t.get("depends_on"):
            out.add(str(t.get("id")))
    return out


def _actions(run_dir: Path, task_id: str) -> tuple | None:
    traj = _read_json(run_dir / "trajectories" / f"{task_id}.json")
    return tuple(action_strings(traj)) if isinstance(traj, dict) else None


def _by_category(results: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in results:
        out.setdefault(str(r.get("category")), []).append(r)
    return dict(sorted(out.items()))


def replay_row(results: list[tuple[str, dict]]) -> dict | None:
    """A condition's replay provenance over its (cell id, task result) pairs: episodes that touched
    a fuzzy main document, a fuzzy XHR answer or a replay miss, and which (None when no result
    records provenance: runs from before it existed)."""
    with_prov = [(c, r) for c, r in results if isinstance(r.get("replay"), dict)]
    if not with_prov:
        return None
    row = {"episodes": len(with_prov), "compromised": 0, "fuzzy_documents": 0, "fuzzy_xhr": 0, "misses": 0,
           "episodes_compromised": []}
    for cell, r in with_prov:
        prov = r["replay"]
        for k in ("fuzzy_documents", "fuzzy_xhr", "misses"):
            row[k] += bool(prov.get(k))
        if prov.get("compromised"):
            row["compromised"] += 1
            row["episodes_compromised"].append({"cell": cell, "task_id": r["task_id"]})
    return row


def build_study_report(study_dir: str | os.PathLike) -> dict:
    """Aggregate a study folder into the report's JSON (no timings, no paths)."""
    root = Path(study_dir)
    manifest = read_study_json(root)
    warnings = []
    cells_out: dict[str, dict] = {}
    runs: dict[str, dict] = {}  # cell id -> {results, dependent, actions}
    order: list[str] = []
    conditions: dict[str, dict] = {}
    for cell in manifest["cells"]:
        cid = cell["id"]
        run_dir = root / CELLS_DIR / cid
        report = _read_json(run_dir / "report.json")
        cond = conditions.setdefault(cell["condition"], {
            "label": condition_label(cell, suite=len(manifest["study"].get("suites") or []) > 1),
            "agent": cell["agent"], "agent_label": cell["label"], "grid": cell["grid"], "context": cell["context"],
            "suite": Path(cell["suite"]).name, "cells": [], "repeats_planned": 0})
        cond["repeats_planned"] += 1
        if cell.get("snapshot"):  # (only in studies with snapshots: other reports keep their bytes)
            cond["snapshot"] = cell["snapshot"]
        if cell["condition"] not in order:
            order.append(cell["condition"])
        if not isinstance(report, dict) or not isinstance(report.get("tasks"), dict):
            warnings.append(f"cell {cid} has no report yet (status {cell.get('status', 'pending')}): left out")
            continue
        results = [report["tasks"][k] for k in sorted(report["tasks"])]
        cond["cells"].append(cid)
        runs[cid] = {"results": results, "dependent": _dependent_tasks(run_dir), "dir": run_dir}
        overall = stats(results)
        cells_out[cid] = {"condition": cell["condition"], "repeat": cell["repeat"], "seed": cell["seed"],
                          "overall": overall,
                          "categories": {c: stats(rs) for c, rs in _by_category(results).items()}}
        if overall["infrastructure_errors"]:
            warnings.append(f"cell {cid}: {overall['infrastructure_errors']} episode(s) "
                            f"{infrastructure_phrase(overall)} (re-run the study to retry them)")
    categories = sorted({c for cid in cells_out for c in cells_out[cid]["categories"]})
    for cid, cond in conditions.items():
        pooled = [r for c in cond["cells"] for r in runs[c]["results"]]
        seqs: dict[str, list[tuple]] = {}
        seqs_cat: dict[str, dict[str, list[tuple]]] = {}
        for c in cond["cells"]:
            for r in runs[c]["results"]:
                if r.get("outcome") == "missing":
                    continue
                a = _actions(runs[c]["dir"], r["task_id"])
                if a is not None:
                    seqs.setdefault(r["task_id"], []).append(a)
                    seqs_cat.setdefault(str(r.get("category")), {}).setdefault(r["task_id"], []).append(a)
        cond["repeats"] = len(cond["cells"])
        cond["overall"] = stats(pooled)
        cond["overall"]["consistency"] = consistency(seqs)
        cond["overall"]["over_repeats"] = over_repeats(
            [cells_out[c]["overall"]["success"]["rate"] for c in cond["cells"]
             if cells_out[c]["overall"]["success"]["rate"] is not None])
        cond["categories"] = {}
        for cat, rs in _by_category(pooled).items():
            row = stats(rs)
            row["consistency"] = consistency(seqs_cat.get(cat, {}))
            row["over_repeats"] = over_repeats(
                [cells_out[c]["categories"][cat]["success"]["rate"] for c in cond["cells"]
                 if cat in cells_out[c]["categories"]])
            cond["categories"][cat] = row
        dependent = [r for c in cond["cells"] for r in runs[c]["results"] if r["task_id"] in runs[c]["dependent"]]
        cond["long_context"] = stats(dependent) if dependent else None
        replay = replay_row([(c, r) for c in cond["cells"] for r in runs[c]["results"]])
        if replay is not None:  # (only for runs whose trajectories record provenance)
            cond["replay"] = replay
        cond["personalisation"] = personalisation(pooled)
        if cond["repeats"] < cond["repeats_planned"]:
            warnings.append(f"condition {cid}: {cond['repeats']} of {cond['repeats_planned']} repeats reported")
    study = manifest["study"]
    report = {
        "format": REPORT_FORMAT, "version": REPORT_VERSION,
        "study": {"name": manifest.get("name") or study.get("name"), "digest": manifest.get("digest"),
                  "repeats": study.get("repeats"), "backend": study.get("backend"),
                  "max_steps": study.get("max_steps"), "cells": len(manifest["cells"]),
                  "cells_reported": len(cells_out), "tasks": manifest.get("tasks")},
        "order": order, "categories": categories,
        "cells": cells_out, "conditions": conditions,
        "has_context": any(c["context"] for c in conditions.values()),
        "warnings": warnings,
    }
    return _rounded(report)


def _rounded(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 6)
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    return v


def study_timings(study_dir: str | os.PathLike) -> dict:
    """Each cell's timings (from its run manifest): kept out of the report so that it compares."""
    root = Path(study_dir)
    manifest = read_study_json(root)
    out = {}
    for cell in manifest["cells"]:
        m = _read_json(root / CELLS_DIR / cell["id"] / "manifest.json")
        if isinstance(m, dict):
            out[cell["id"]] = {k: m.get(k) for k in ("started_at", "finished_at", "elapsed_s")}
    circ = manifest.get("circumstances") or {}
    return {"format": "webfreeze-study-timings", "version": 1, "study_started_at": circ.get("started_at"),
            "study_finished_at": circ.get("finished_at"), "cells": out}


# ------------------------------------------------------------------------------------ formatting
def pct(p: dict | None, *, se: bool = True) -> str:
    if not p or p.get("rate") is None:
        return "-"
    text = f"{p['rate'] * 100:.1f}"
    if se and p.get("se") is not None:
        text += f" ± {p['se'] * 100:.1f}"
    return text


def num(c: dict | None, *, digits: int = 2) -> str:
    if not c or c.get("mean") is None:
        return "-"
    text = f"{c['mean']:.{digits}f}"
    if c.get("sem") is not None:
        text += f" ± {c['sem']:.{digits}f}"
    return text


def _f(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _cons(c: dict | None) -> tuple[str, str]:
    if not c:
        return "-", "-"
    return _f(c["consistency"], 2), pct(c["identical"], se=False)


def _llm(row: dict) -> tuple[str, str]:
    u = row.get("llm")
    if not u:
        return "-", "-"
    return _f(u["calls_per_task"], 1), _f(u["tokens_per_task"], 0)


def _errors_of(report: dict) -> list[str]:
    found = {e for c in report["conditions"].values() if c.get("overall") for e in c["overall"]["errors"]}
    return sorted(found, key=lambda c: (ERROR_ORDER.index(c) if c in ERROR_ORDER else len(ERROR_ORDER), c))


TEXT_COLUMNS = ("condition", "category", "cell", "agent", "context", "scheme", "level")


def _md_table(head: list[str], rows: list[list[str]], align: str | None = None) -> list[str]:
    align = align or "".join("l" if i == 0 or h in TEXT_COLUMNS else "r" for i, h in enumerate(head))
    sep = ["---" if a == "l" else "---:" for a in align]
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join(sep) + " |"]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return out + [""]


def tables(report: dict) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """Every table of the report as (id, title, header, rows): what Markdown and HTML render."""
    conds = [(cid, report["conditions"][cid]) for cid in report["order"] if report["conditions"][cid]["cells"]]
    out = []
    rows = []
    for cid, c in conds:
        o = c["overall"]
        cons, ident = _cons(o.get("consistency"))
        calls, toks = _llm(o)
        rows.append([c["label"], str(c["repeats"]), str(o["n"]), pct(o["success"]), pct(o["partial"]), pct(o["fail"]),
                     num(o["steps"]), num(o["steps_success"]), num(o["efficiency"]), cons, ident, calls, toks])
    out.append(("overview", "Per condition (all repeats pooled; rates in % ± SE)",
                ["condition", "repeats", "episodes", "success", "partial", "fail", "steps", "steps (success)",
                 "efficiency", "consistency", "identical", "LLM calls / task", "tokens / task"], rows))
    replay_rows = []
    for cid, c in conds:
        rp = c.get("replay")
        if rp:
            listed = ", ".join(f"{e['cell']}/{e['task_id']}" for e in rp["episodes_compromised"][:5])
            more = f" (+{len(rp['episodes_compromised']) - 5})" if len(rp["episodes_compromised"]) > 5 else ""
            replay_rows.append([c["label"], str(rp["episodes"]), str(rp["compromised"]), str(rp["fuzzy_documents"]),
                                str(rp["fuzzy_xhr"]), str(rp["misses"]), (listed + more) or "-"])
    if replay_rows:
        out.append(("replay", "Replay provenance (episodes that touched a fuzzy answer or a miss)",
                    ["condition", "episodes", "replay-compromised", "fuzzy main document", "fuzzy XHR", "miss",
                     "which"], replay_rows))
    cats = report["categories"]
    # The WebArxiv reference only where the categories are WebArxiv's (the demo's scholar-* ones).
    webarxiv = any(c.startswith("scholar-") for c in cats)
    for key, title, fmt in (("success", "Success by category (% ± SE" + ("; WebArxiv Tables 2-4, 6)" if webarxiv
                                                                         else ")"), pct),
                            ("partial", "Partially correct by category (% ± SE)", pct),
                            ("steps", "Average steps by category (± SEM)", num)):
        rows = []
        for cat in cats + [OVERALL]:
            row = [f"**{cat}**" if cat == OVERALL else cat]
            for _, c in conds:
                r = c["overall"] if cat == OVERALL else c["categories"].get(cat)
                row.append(fmt(r[key]) if r else "-")
            rows.append(row)
        out.append((f"by-category-{key}", title, ["category"] + [c["label"] for _, c in conds], rows))
    errs = _errors_of(report)
    out.append(("errors", "Error taxonomy (% of episodes ± SE)",
                ["condition", "episodes"] + [ERROR_NAMES.get(e, e) for e in errs],
                [[c["label"], str(c["overall"]["n"])] + [pct(c["overall"]["errors"].get(e)) if e in c["overall"]["errors"]
                                                          else "0.0" for e in errs] for _, c in conds]))
    out.append(("repeats", "Success rate per repeat (%), and their mean ± SE over repeats",
                ["condition", "repeats", "per repeat", "mean ± SE"],
                [[c["label"], str(c["repeats"]),
                  " / ".join(f"{v * 100:.1f}" for v in c["overall"]["over_repeats"]["values"]) or "-",
                  _repeat_mean(c["overall"]["over_repeats"])] for _, c in conds]))
    if any(c.get("snapshot") for _, c in conds):
        out.append(("snapshots", "Success per snapshot (same agent, other archive; % ± SE pooled, and the mean ± SE "
                                 "over repeats; change = last snapshot - first, ± SE)", *snapshot_table(conds)))
    if report.get("has_context"):
        rows = []
        first = {}
        for i, (_, c) in enumerate(conds):
            first.setdefault(_agent_key(c), i)
        for cid, c in sorted(conds, key=lambda x: (first[_agent_key(x[1])], (x[1]["context"] or {}).get("tokens", -1))):
            lc = c["long_context"] or c["overall"]
            er = lc["errors"]
            rows.append([_agent_part(c), (c["context"] or {}).get("label", "-"), str(lc["n"]), pct(lc["success"]),
                         pct(lc.get("retrieval_success")), pct(er.get("false_end")) if "false_end" in er else "0.0",
                         pct(er.get("step_limit_loop")) if "step_limit_loop" in er else "0.0",
                         pct(er.get("step_limit_inefficient")) if "step_limit_inefficient" in er else "0.0",
                         pct(_other(er)), num(lc["efficiency"]), num(lc["steps"])])
        out.append(("long-context", "Long context: success and errors per context length (dependent tasks; "
                                    "long-context paper Tables 1-3; % ± SE)",
                    ["agent", "context", "episodes", "SR", "RS", "false end", "step limit: loop",
                     "step limit: inefficient", "other", "efficiency", "steps"], rows))
    if any(c.get("personalisation") for _, c in conds):
        rows = []
        for cid, c in conds:
            for scheme, levels in (c.get("personalisation") or {}).items():
                for lv in [k for k in levels if k != "all"] + ["all"]:
                    r = levels[lv]
                    rows.append([c["label"], scheme, lv, str(r["tasks"]), str(r.get("decided", "-")),
                                 _pm(r["p_web"], r["p_web_sem"]),
                                 _pm(r["p_pref"], r["p_pref_sem"]), _f(r["p_avg"]), _pm(r["intent"], r["intent_sem"]),
                                 _pm(r["sr"], r["sr_se"])])
        out.append(("persona2web", "Personalisation (Persona2Web Table 3; 0-1 scale, ± SEM / SE; Intent and SR "
                                   "over the decided episodes)",
                    ["condition", "scheme", "level", "episodes", "decided", "P_web", "P_pref", "P_avg", "Intent",
                     "SR"], rows))
    rows = []
    for cid in sorted(report["cells"], key=lambda k: (report["order"].index(report["cells"][k]["condition"]),
                                                      report["cells"][k]["repeat"])):
        cell = report["cells"][cid]
        o = cell["overall"]
        u = o.get("llm") or {}
        rows.append([cid, str(cell["repeat"]), str(cell["seed"]), str(o["n"]), pct(o["success"]), pct(o["partial"]),
                     pct(o["fail"]), num(o["steps"]), num(o["efficiency"]), _f(u.get("calls")),
                     f"{_f(u.get('prompt_tokens'))} / {_f(u.get('completion_tokens'))}" if u else "-"])
    out.append(("cells", "Cells (one run each; % ± SE over its tasks)",
                ["cell", "repeat", "seed", "tasks", "success", "partial", "fail", "steps", "efficiency", "LLM calls",
                 "tokens in / out"], rows))
    return out


def snapshot_table(conds: list[tuple[str, dict]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the snapshot table: one row per configuration (a condition but for its
    snapshot), one column per snapshot with the pooled success ± SE and, beside it, the mean ± SE
    over repeats, then the change from the first snapshot to the last with the SE of a difference
    of independent proportions, sqrt(SE1² + SE2²). The change is the site's drift as this agent
    meets it; the SE over repeats within a snapshot is the agent's own variance."""
    snaps: list[str] = []
    groups: dict[str, dict[str, dict]] = {}
    labels: dict[str, str] = {}
    for cid, c in conds:
        snap = c.get("snapshot")
        if not snap:
            continue
        base = cid.rsplit(".snap-", 1)[0]
        if snap not in snaps:
            snaps.append(snap)
        groups.setdefault(base, {})[snap] = c
        labels.setdefault(base, c["label"].replace(f" @{snap}", ""))
    head = ["configuration"] + [f"{s} {part}" for s in snaps for part in ("success", "over repeats")] + ["change"]
    rows = []
    for base, by_snap in groups.items():
        row = [labels[base]]
        for snap in snaps:
            c = by_snap.get(snap)
            row += [pct(c["overall"]["success"]), _repeat_mean(c["overall"]["over_repeats"])] if c else ["-", "-"]
        first, last = by_snap.get(snaps[0]), by_snap.get(snaps[-1])
        a = first["overall"]["success"] if first else None
        b = last["overall"]["success"] if last else None
        if a and b and a.get("rate") is not None and b.get("rate") is not None:
            se = math.sqrt((a.get("se") or 0.0) ** 2 + (b.get("se") or 0.0) ** 2)
            row.append(f"{(b['rate'] - a['rate']) * 100:+.1f} ± {se * 100:.1f}")
        else:
            row.append("-")
        rows.append(row)
    return head, rows


def _repeat_mean(rep: dict) -> str:
    if rep.get("mean") is None:
        return "-"
    return f"{rep['mean'] * 100:.1f}" + (f" ± {rep['se'] * 100:.1f}" if rep.get("se") is not None else "")


def _pm(v: float | None, se: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" + (f" ± {se:.3f}" if se is not None else "")


def _other(errors: dict) -> dict | None:
    """Everything that is neither a success, a false end nor a step limit (the paper's "other")."""
    keep = [e for e in errors if e not in ("success", "false_end", "step_limit_loop", "step_limit_inefficient")]
    if not errors:
        return None
    n = next(iter(errors.values()))["n"]
    k = sum(errors[e]["count"] for e in keep)
    p = k / n if n else None
    return {"count": k, "n": n, "rate": p, "se": se_proportion(p, n)}


def _agent_key(c: dict) -> tuple:
    return (c["agent_label"], json.dumps(c["grid"], sort_keys=True), c["suite"])


def _agent_part(c: dict) -> str:
    return " ".join([c["agent_label"]] + [f"{k}={v}" for k, v in c["grid"].items()])


def markdown(report: dict, *, brief: bool = False) -> str:
    s = report["study"]
    lines = [f"# Study {s['name']}", "",
             f"Study digest `{s['digest']}`; {s['cells_reported']} of {s['cells']} cells reported; "
             f"{s['repeats']} repeat(s); backend {s['backend']}, at most {s['max_steps']} steps.", "",
             "Rates are pooled over a condition's repeats: p = k / N over its N episodes (tasks x repeats), "
             "SE = sqrt(p(1-p)/N). Steps and efficiency: mean ± SEM over episodes. Definitions: docs/studies.md.", ""]
    for tid, title, head, rows in tables(report):
        if brief and tid not in ("overview", "by-category-success", "snapshots"):
            continue
        lines += [f"## {title}", ""] + _md_table(head, rows)
    if report["warnings"] and not brief:
        lines += ["## Warnings", ""] + [f"- {w}" for w in report["warnings"]] + [""]
    return "\n".join(lines)


CSV_ERRORS = ERROR_ORDER


def csv_text(report: dict) -> str:
    """One row per (cell or condition, category or overall), every figure in its own column."""
    head = ["scope", "id", "condition", "label", "repeat", "context_tokens", "category", "n", "missing",
            "success", "success_se", "partial", "partial_se", "fail", "fail_se", "steps_mean", "steps_sem",
            "steps_success_mean", "steps_success_sem", "efficiency_mean", "efficiency_sem",
            "consistency", "identical", "success_repeat_mean", "success_repeat_se",
            "retrieval_success", "retrieval_success_se", "llm_calls", "prompt_tokens", "completion_tokens"]
    errs = list(CSV_ERRORS) + [e for e in _errors_of(report) if e not in CSV_ERRORS]
    for e in errs:
        head += [f"err_{e}", f"err_{e}_se"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(head)

    def v(x: Any) -> str:
        if x is None:
            return ""
        if isinstance(x, float):
            return repr(round(x, 6))
        return str(x)

    def row(scope, rid, cond, repeat, cat, r):
        c = report["conditions"][cond]
        cons = r.get("consistency") or {}
        rep = r.get("over_repeats") or {}
        rs = r.get("retrieval_success") or {}
        u = r.get("llm") or {}
        out = [scope, rid, cond, c["label"], v(repeat), v((c["context"] or {}).get("tokens")), cat, v(r["n"]),
               v(r["missing"])]
        for k in ("success", "partial", "fail"):
            out += [v(r[k]["rate"]), v(r[k]["se"])]
        for k in ("steps", "steps_success", "efficiency"):
            out += [v(r[k]["mean"]), v(r[k]["sem"])]
        out += [v(cons.get("consistency")), v((cons.get("identical") or {}).get("rate")), v(rep.get("mean")),
                v(rep.get("se")), v(rs.get("rate")), v(rs.get("se")), v(u.get("calls")), v(u.get("prompt_tokens")),
                v(u.get("completion_tokens"))]
        for e in errs:
            p = r["errors"].get(e)
            out += [v(p["rate"]), v(p["se"])] if p else ["0.0" if r["n"] else "", "0.0" if r["n"] else ""]
        w.writerow(out)

    for cond in report["order"]:
        c = report["conditions"][cond]
        if not c["cells"]:
            continue
        for cat, r in c["categories"].items():
            row("condition", cond, cond, None, cat, r)
        row("condition", cond, cond, None, OVERALL, c["overall"])
        for cid in c["cells"]:
            cell = report["cells"][cid]
            for cat, r in cell["categories"].items():
                row("cell", cid, cond, cell["repeat"], cat, r)
            row("cell", cid, cond, cell["repeat"], OVERALL, cell["overall"])
    return buf.getvalue()


# ------------------------------------------------------------------------------------ HTML
PALETTE = ("#3b6fd1", "#17803d", "#d08a1a", "#7a4fc8", "#b3261e", "#1c8c8c", "#6d7789", "#c2185b", "#5d4037")


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def category_chart(report: dict) -> str:
    """Grouped bars: per category (and overall), one bar per condition, success % with ± SE whiskers."""
    conds = [(cid, report["conditions"][cid]) for cid in report["order"] if report["conditions"][cid]["cells"]]
    cats = report["categories"] + [OVERALL]
    if not conds:
        return ""
    bar, gap, top, left, height = 14, 18, 16, 40, 180
    group = len(conds) * bar + gap
    width = left + len(cats) * group + 10
    parts = [f'<svg role="img" aria-label="success by category" width="{width}" height="{height + 90}" '
             f'viewBox="0 0 {width} {height + 90}">']
    for t in (0, 25, 50, 75, 100):
        y = top + height - t / 100 * height
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#e3e6ec"/>'
                     f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{t}%</text>')
    for gi, cat in enumerate(cats):
        x0 = left + gi * group + gap / 2
        for ci, (cid, c) in enumerate(conds):
            r = c["overall"] if cat == OVERALL else c["categories"].get(cat)
            if not r or r["success"]["rate"] is None:
                continue
            p, se = r["success"]["rate"], r["success"]["se"] or 0.0
            x = x0 + ci * bar
            h = max(p * height, 1.0)  # (a 0% bar still shows as a line at the axis)
            parts.append(f'<rect x="{x:.1f}" y="{top + height - h:.1f}" width="{bar - 2}" height="{h:.1f}" '
                         f'fill="{PALETTE[ci % len(PALETTE)]}"><title>{_e(c["label"])} · {_e(cat)}: '
                         f'{p * 100:.1f}% ± {se * 100:.1f}</title></rect>')
            if se:
                lo, hi = max(0.0, p - se), min(1.0, p + se)
                cx = x + (bar - 2) / 2
                parts.append(f'<line x1="{cx:.1f}" y1="{top + height - hi * height:.1f}" x2="{cx:.1f}" '
                             f'y2="{top + height - lo * height:.1f}" stroke="#1d2330"/>')
        parts.append(f'<text x="{x0 + len(conds) * bar / 2:.1f}" y="{top + height + 14}" text-anchor="end" '
                     f'transform="rotate(-30 {x0 + len(conds) * bar / 2:.1f} {top + height + 14})">{_e(cat)}</text>')
    parts.append("</svg>")
    return "".join(parts) + _legend([c["label"] for _, c in conds])


def _legend(labels: list[str]) -> str:
    items = "".join(f'<span class="key"><i style="background:{PALETTE[i % len(PALETTE)]}"></i>{_e(lb)}</span>'
                    for i, lb in enumerate(labels))
    return f'<div class="legend">{items}</div>'


def context_chart(report: dict) -> str:
    """Success (dependent tasks) against context length: one line per agent configuration, ± SE."""
    series: dict[str, list[tuple[int, str, dict]]] = {}
    for cid in report["order"]:
        c = report["conditions"][cid]
        if not c["cells"] or not c["context"]:
            continue
        lc = c["long_context"] or c["overall"]
        series.setdefault(_agent_part(c), []).append((c["context"]["tokens"], c["context"]["label"], lc["success"]))
    if not series:
        return ""
    xs = sorted({(t, lb) for pts in series.values() for t, lb, _ in pts})
    left, top, w, h = 44, 14, max(160, 90 * len(xs)), 180
    width, height = left + w + 20, top + h + 40
    def xpos(t):
        i = [x[0] for x in xs].index(t)
        return left + (w * (i + 0.5) / len(xs))
    parts = [f'<svg role="img" aria-label="success vs context length" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}">']
    for t in (0, 25, 50, 75, 100):
        y = top + h - t / 100 * h
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + w}" y2="{y:.1f}" stroke="#e3e6ec"/>'
                     f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{t}%</text>')
    for t, lb in xs:
        parts.append(f'<text x="{xpos(t):.1f}" y="{top + h + 16}" text-anchor="middle">{_e(lb)}</text>')
    parts.append(f'<text x="{left + w / 2:.1f}" y="{top + h + 34}" text-anchor="middle">context tokens</text>')
    for si, (name, pts) in enumerate(series.items()):
        colour = PALETTE[si % len(PALETTE)]
        pts = sorted((t, s) for t, _, s in pts if s["rate"] is not None)
        coords = [(xpos(t), top + h - s["rate"] * h) for t, s in pts]
        if len(coords) > 1:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                         + " ".join(f"{x:.1f},{y:.1f}" for x, y in coords) + '"/>')
        for (t, s), (x, y) in zip(pts, coords):
            se = s["se"] or 0.0
            if se:
                parts.append(f'<line x1="{x:.1f}" y1="{top + h - min(1.0, s["rate"] + se) * h:.1f}" x2="{x:.1f}" '
                             f'y2="{top + h - max(0.0, s["rate"] - se) * h:.1f}" stroke="{colour}"/>')
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"><title>{_e(name)} · '
                         f'{t} tokens: {s["rate"] * 100:.1f}% ± {se * 100:.1f}</title></circle>')
    parts.append("</svg>")
    return "".join(parts) + _legend(list(series))


EXTRA_CSS = """
.legend{margin:4px 0 12px}.legend .key{display:inline-block;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
p.note{color:#4a5468;max-width:1000px}
td{white-space:nowrap}
"""


def render_html(report: dict) -> str:
    s = report["study"]
    title = f"webfreeze study — {s['name']}"
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(title)}</title><style>{CSS}{EXTRA_CSS}</style></head><body>",
           f'<header><h1>{_e(title)}</h1><div class="meta">study digest {_e(s["digest"])} · '
           f'{s["cells_reported"]} of {s["cells"]} cells · {s["repeats"]} repeat(s) · backend {_e(s["backend"])} · '
           f'max steps {s["max_steps"]}</div></header><main>',
           '<p class="note">Rates pooled over each condition\'s repeats: p = k / N over its N episodes '
           "(tasks × repeats), SE = √(p(1−p)/N); steps and efficiency: mean ± SEM over episodes. "
           "Definitions in docs/studies.md.</p>"]
    for w in report["warnings"]:
        out.append(f'<p class="error">warning: {_e(w)}</p>')
    chart = context_chart(report)
    if chart:
        out.append(f'<h2>Success vs context length</h2><div id="context-chart">{chart}</div>')
    out.append(f'<h2>Success by category</h2><div id="category-chart">{category_chart(report)}</div>')
    for tid, title_, head, rows in tables(report):
        out.append(f'<h2>{_e(title_)}</h2><table id="{tid}"><thead><tr>'
                   + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr></thead><tbody>")
        for r in rows:
            cls = ' class="overall"' if r and r[0] == f"**{OVERALL}**" else ""
            out.append(f"<tr{cls}>" + "".join(f"<td>{_e(str(x).strip('*'))}</td>" for x in r) + "</tr>")
        out.append("</tbody></table>")
    out.append("</main></body></html>\n")
    return "\n".join(out)


# ------------------------------------------------------------------------------------ writing
def report_json(report: dict) -> str:
    return json.dumps(report, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def write_study_report(report: dict, out: str | os.PathLike, study_dir: str | os.PathLike) -> list[Path]:
    """Render every file first, then write each through a temporary file and a rename."""
    out = Path(out)
    texts = {"study-report.md": markdown(report) + "\n", "study-report.csv": csv_text(report),
             "study-report.json": report_json(report), "study-report.html": render_html(report),
             TIMINGS_FILE: json.dumps(study_timings(study_dir), indent=1, sort_keys=True) + "\n"}
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StudyError(f"{out}: cannot write the report: {exc.strerror or exc}") from None
    written = []
    for name, text in texts.items():
        path = out / name
        try:
            write_atomically(path, text)
        except OSError as exc:
            raise StudyError(f"{path}: cannot write: {exc.strerror or exc}") from None
        written.append(path)
    return written


__all__ = ["build_study_report", "write_study_report", "markdown", "csv_text", "render_html", "stats",
           "se_proportion", "sem", "consistency", "personalisation", "tables", "study_timings"]
