"""The report's replay provenance: which episodes were answered other than exactly.

A trajectory's ``replay`` field (written by the environment, docs/trajectories.md) says per step
how the replay answered the agent: exact, canonical, fuzzy (score, capture served), site model or
miss. An episode that touched a fuzzy main document, a fuzzy XHR answer or a miss is
*replay-compromised*: its score may rest on a page the site did not give for the request. The
report counts and lists them (``report["replay"]``, each task's ``replay``) and, under
``eval report --strict-replay``, sets them apart from successes and failures
(``report["strict_replay"]``). Trajectories written before provenance existed have no ``replay``
field: they are counted as ``unknown``, never as clean.
"""

from __future__ import annotations

from html import escape

from webfreeze.simulator.provenance import flagged_answers

COUNTS = ("fuzzy_documents", "fuzzy_xhr", "misses")


def task_provenance(trajectory: dict | None) -> dict | None:
    """A task's ``replay`` entry in the report (None when its trajectory records no provenance)."""
    replay = (trajectory or {}).get("replay")
    if not isinstance(replay, dict):
        return None
    flagged = flagged_answers(trajectory)
    return {**{k: int(replay.get(k) or 0) for k in COUNTS}, "compromised": bool(replay.get("compromised")),
            "documents": replay.get("documents") or {},
            "flagged": [{k: f.get(k) for k in ("step", "kind", "level", "method", "url", "score", "capture_url")
                         if f.get(k) is not None or k == "step"} for f in flagged]}


def run_provenance(results: list[dict], trajectories: dict[str, dict]) -> dict | None:
    """The run's ``replay`` section: how many episodes touched a fuzzy main document, a fuzzy XHR
    answer or a miss, and which (None when no trajectory records provenance)."""
    episodes = live = 0
    touched = dict.fromkeys(COUNTS, 0)
    compromised = []
    unknown = []
    for r in results:
        traj = trajectories.get(r["task_id"])
        if traj is None:
            continue
        prov = task_provenance(traj)
        if prov is None:
            unknown.append(r["task_id"])
            continue
        episodes += 1
        requests = traj["replay"].get("requests") if isinstance(traj["replay"].get("requests"), dict) else {}
        live += any(isinstance(by, dict) and by.get("live") for by in requests.values())
        for k in COUNTS:
            touched[k] += prov[k] > 0
        if prov["compromised"]:
            compromised.append({"task_id": r["task_id"], "outcome": r["outcome"], **{k: prov[k] for k in COUNTS}})
    if not episodes:
        return None
    out = {"episodes": episodes, "compromised": len(compromised), **touched,
           "episodes_compromised": compromised, "unknown": unknown}
    if live:  # (--patch-from-live: answers the site gave now, beside the archive's; not compromised, but said)
        out["live"] = live
    return out


def strict_replay(results: list[dict], run: dict | None) -> dict:
    """``eval report --strict-replay``: successes and failures among the clean episodes, and the
    replay-compromised ones apart (as are episodes without provenance, listed as unknown)."""
    bad = {e["task_id"] for e in (run or {}).get("episodes_compromised", [])}
    unknown = set((run or {}).get("unknown", []))
    success = failure = 0
    for r in results:
        if r["task_id"] in bad or r["task_id"] in unknown or r["outcome"] == "missing":
            continue
        if r.get("success"):
            success += 1
        else:
            failure += 1
    clean = success + failure
    return {"success": success, "failure": failure, "success_rate": round(success / clean, 4) if clean else None,
            "replay_compromised": sorted(bad), "unknown": sorted(unknown)}


def summary_line(run: dict | None) -> str | None:
    """One line for a terminal: how many episodes were replay-compromised, and by what."""
    if not run:
        return None
    line = (f"replay: {run['compromised']} of {run['episodes']} episodes replay-compromised "
            f"({run['fuzzy_documents']} fuzzy main document, {run['fuzzy_xhr']} fuzzy XHR, {run['misses']} miss)")
    if run.get("live"):
        line += f"; {run['live']} with answers fetched live from the site today (--patch-from-live)"
    return line


def provenance_html(run: dict | None, strict: dict | None) -> list[str]:
    """The HTML report's "Replay provenance" section (nothing when the run records none)."""
    if not run:
        return []
    out = ['<h2>Replay provenance</h2><p id="replay">',
           f"{run['episodes']} episodes with provenance: {run['compromised']} replay-compromised "
           f"({run['fuzzy_documents']} touched a fuzzy main document, {run['fuzzy_xhr']} a fuzzy XHR answer, "
           f"{run['misses']} a miss)."]
    if run.get("live"):
        out.append(f" {run['live']} with answers fetched live from the site at run time (--patch-from-live).")
    if run.get("unknown"):
        out.append(f" {len(run['unknown'])} without provenance (older trajectories).")
    out.append("</p>")
    if strict:
        rate = "-" if strict["success_rate"] is None else f"{strict['success_rate'] * 100:.1f}%"
        out.append(f"<p>Strict replay: {strict['success']} success, {strict['failure']} failure among clean "
                   f"episodes ({rate}); {len(strict['replay_compromised'])} replay-compromised.</p>")
    if run["episodes_compromised"]:
        out.append('<table id="replay-compromised"><thead><tr><th>task</th><th>outcome</th><th>fuzzy documents</th>'
                   "<th>fuzzy XHR</th><th>misses</th></tr></thead><tbody>")
        for e in run["episodes_compromised"]:
            out.append(f'<tr><td><a href="#traj-{escape(e["task_id"])}">{escape(e["task_id"])}</a></td>'
                       f'<td>{escape(e["outcome"])}</td><td>{e["fuzzy_documents"]}</td><td>{e["fuzzy_xhr"]}</td>'
                       f'<td>{e["misses"]}</td></tr>')
        out.append("</tbody></table>")
    return out


def flagged_html(prov: dict | None) -> str:
    """A task's fuzzy answers and misses, for its trajectory's section of the HTML report."""
    if not prov or not prov["flagged"]:
        return ""
    items = []
    for f in prov["flagged"]:
        served = f" served {f['capture_url']} (score {f['score']})" if f.get("capture_url") else ""
        where = "start" if f["step"] is None else f"step {f['step']}"
        items.append(f"<li>{escape(where)}: {escape(f['level'])} {escape(f['kind'])} {escape(f['method'])} "
                     f"{escape(f['url'])}{escape(served)}</li>")
    return f'<div class="field"><b>replay</b> fuzzy answers and misses</div><ul class="replay">{"".join(items)}</ul>'
