"""``webfreeze bench compare RUN_A RUN_B``: where two runs differ, task by task and step by step.

Trajectories are compared without their timing fields. For each task the first step where the two
runs part is named with the field that differs (``action``, ``url``, ``error``, ``url_after``,
``count`` when one run has more steps, or ``answer`` / ``end`` / ``final_state`` after the last
step). Outcomes come from each run's ``report.json`` (scored afresh when absent). Each side also
says how many episodes touched a fuzzy main document, a fuzzy XHR answer or a replay miss, and
which (``replay``; eval/replay_provenance.py), so a difference that rests on the replay shows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from webfreeze.eval.errors import ReportError
from webfreeze.eval.keynodes import run_dom_loader
from webfreeze.eval.replay_provenance import run_provenance
from webfreeze.eval.report import build_report, report_json
from webfreeze.eval.trajectory import validate_trajectory
from webfreeze.llm.cassette import first_difference as json_difference
from webfreeze.simulator.trajectory import dumps, without_timings

STEP_FIELDS = ("action", "url", "error", "url_after")
END_FIELDS = ("answer", "end", "final_state")


def _load_run(run_dir) -> tuple[dict, dict[str, dict], dict]:
    run = Path(run_dir)
    if not (run / "manifest.json").is_file():
        raise ReportError(f"{run}: not a run directory (no manifest.json)")
    try:
        manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = None
    if not isinstance(manifest, dict):
        raise ReportError(f"{run / 'manifest.json'}: not a readable run manifest")
    report_path = run / "report.json"
    report = None
    if report_path.is_file():
        try:
            report = json.loads(report_path.read_text(encoding="utf-8"))
        except ValueError:
            report = None
    if not isinstance(report, dict) or not isinstance(report.get("tasks", {}), dict):
        report, _ = build_report(run)
    trajectories = {}
    for p in sorted((run / "trajectories").glob("*.json")):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except ValueError:
            raise ReportError(f"{p}: not valid JSON") from None
        trajectories[p.stem] = without_timings(validate_trajectory(data, str(p)))
    return report, trajectories, manifest


def _version(versions: dict, name: str):
    """A recorded version as compared: Python's to its minor release (a patch release does not
    change what a run does), every other as recorded."""
    v = versions.get(name)
    if name == "python" and isinstance(v, str):
        return ".".join(v.split(".")[:2])
    return v


def version_differences(manifest_a: dict, manifest_b: dict) -> list[dict]:
    """The versions (manifest ``versions``) that differ between two runs, in name order:
    ``{"name", "a", "b"}``, as recorded; a side that did not record one has None there (a run made
    before it was recorded, or a text-backend run, which has no browser). Python is compared to
    its minor release. A difference in any (webfreeze, Playwright, the browser's build, the page
    runtime injected into replayed pages) can part two runs' trajectories."""
    va = manifest_a.get("versions") if isinstance(manifest_a.get("versions"), dict) else {}
    vb = manifest_b.get("versions") if isinstance(manifest_b.get("versions"), dict) else {}
    return [{"name": k, "a": va.get(k), "b": vb.get(k)} for k in sorted(set(va) | set(vb))
            if _version(va, k) != _version(vb, k)]


# The versions only the browser backend has: a text run has none of them (it did not fail to record them).
BROWSER_VERSIONS = frozenset({"browser", "font_hinting", "page_runtime"})


def describe_versions(differences: list[dict], a: str, b: str, backends: tuple = (None, None)) -> str:
    """``differences`` (:func:`version_differences`) as a phrase: ``page_runtime X A, Y B``, a
    version one side did not record said so; ``backends`` (each run's ``env.backend``, when known):
    a browser's version on a text run's side is said ``none (text backend)``."""
    def one(d: dict, side: str, backend) -> str:
        if d[side] is not None:
            return d[side]
        return "none (text backend)" if backend == "text" and d["name"] in BROWSER_VERSIONS else "not recorded"
    return ", ".join(f"{d['name']} {one(d, 'a', backends[0])} {a}, {one(d, 'b', backends[1])} {b}"
                     for d in differences)


# What a run was run with, besides its agent and its tasks (manifest keys): another backend, archive
# (a later snapshot), suite, seed or step budget parts two runs' trajectories whatever the agent did.
SETTINGS = (("archive", ("archive", "digest")), ("backend", ("env", "backend")), ("max_steps", ("env", "max_steps")),
            ("screenshots", ("env", "screenshots")), ("seed", ("env", "seed")),
            ("site_models", ("env", "site_models")), ("suite", ("suite", "digest")))


def _setting(manifest: dict, path: tuple):
    v = manifest
    for k in path:
        v = v.get(k) if isinstance(v, dict) else None
    return v


def setting_differences(manifest_a: dict, manifest_b: dict) -> list[dict]:
    """The run settings (:data:`SETTINGS`) that differ between two runs' manifests, in name order:
    ``{"name", "a", "b"}`` as recorded (None where a manifest has none)."""
    return [{"name": name, "a": _setting(manifest_a, path), "b": _setting(manifest_b, path)}
            for name, path in SETTINGS if _setting(manifest_a, path) != _setting(manifest_b, path)]


def describe_settings(differences: list[dict], a: str, b: str) -> str:
    """``differences`` (:func:`setting_differences`) as a phrase: ``backend text A, browser B``;
    digests shortened to 12 hex digits."""
    def one(v) -> str:
        if v is None:
            return "not recorded"
        if isinstance(v, str) and v.startswith("sha256:"):
            return v[:19]
        return v if isinstance(v, str) else json.dumps(v, sort_keys=True)
    return ", ".join(f"{d['name']} {one(d['a'])} {a}, {one(d['b'])} {b}" for d in differences)


def first_difference(a: dict, b: dict) -> dict | None:
    """The first place two trajectories (without timings) differ, or None when they are equal."""
    if a == b:
        return None
    sa, sb = a.get("steps", []), b.get("steps", [])
    for i, (x, y) in enumerate(zip(sa, sb)):
        for f in STEP_FIELDS:
            if x.get(f) != y.get(f):
                return {"step": i, "field": f, "a": x.get(f), "b": y.get(f)}
        if x != y:
            f = next((k for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)), "step")
            return {"step": i, "field": f, "a": x.get(f), "b": y.get(f)}
    if len(sa) != len(sb):
        i = min(len(sa), len(sb))
        return {"step": i, "field": "count", "a": sa[i]["action"] if i < len(sa) else f"ended after {len(sa)} steps",
                "b": sb[i]["action"] if i < len(sb) else f"ended after {len(sb)} steps"}
    for f in END_FIELDS:
        if a.get(f) != b.get(f):
            return {"step": len(sa), "field": f, "a": a.get(f), "b": b.get(f)}
    f = next(k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))
    return {"step": len(sa), "field": f, "a": a.get(f), "b": b.get(f)}


def _replay_side(report: dict, trajectories: dict[str, dict]) -> dict | None:
    """A run's replay provenance: its report's, else computed from its trajectories (a report
    written before provenance existed); None when no trajectory records any."""
    if isinstance(report.get("replay"), dict):
        return report["replay"]
    tasks = report.get("tasks") or {}
    results = [{"task_id": tid, "outcome": (tasks.get(tid) or {}).get("outcome")} for tid in sorted(trajectories)]
    return run_provenance(results, trajectories)


def compare_runs(run_a, run_b) -> dict:
    rep_a, traj_a, man_a = _load_run(run_a)
    rep_b, traj_b, man_b = _load_run(run_b)
    tasks_a, tasks_b = rep_a.get("tasks", {}), rep_b.get("tasks", {})
    rows = []
    counts = {"same": 0, "different": 0, "only_a": 0, "only_b": 0}
    for tid in sorted(set(traj_a) | set(traj_b) | set(tasks_a) | set(tasks_b)):
        a, b = traj_a.get(tid), traj_b.get(tid)
        row = {"task_id": tid, "a_outcome": (tasks_a.get(tid) or {}).get("outcome"),
               "b_outcome": (tasks_b.get(tid) or {}).get("outcome")}
        if a is None and b is None:  # no trajectory on either side (an episode that never began)
            if tid in tasks_a and tid in tasks_b:  # then the two reports' outcomes are what is compared
                same = row["a_outcome"] == row["b_outcome"]
                row.update(same=same, first_difference=None if same else
                           {"step": "-", "field": "outcome (no trajectories)", "a": row["a_outcome"],
                            "b": row["b_outcome"]})
                counts["same" if same else "different"] += 1
            else:
                row.update(same=False, first_difference=None)
                counts["only_a" if tid in tasks_a else "only_b"] += 1
        elif a is None or b is None:
            row.update(same=False, first_difference=None)
            counts["only_a" if b is None else "only_b"] += 1
        else:
            # the agent and suite blocks name the run, not the episode: compare the episode
            diff = first_difference({k: v for k, v in a.items() if k not in ("agent", "suite")},
                                    {k: v for k, v in b.items() if k not in ("agent", "suite")})
            if diff and diff["field"] == "dom":  # (two digests: where the snapshots themselves part)
                parted = dom_parting(run_a, run_b, diff["a"], diff["b"])
                if parted:
                    diff["parted"] = {"at": parted[0], "a": parted[1], "b": parted[2]}
            row.update(same=diff is None, first_difference=diff)
            counts["same" if diff is None else "different"] += 1
        rows.append(row)
    replay_a, replay_b = _replay_side(rep_a, traj_a), _replay_side(rep_b, traj_b)
    compromised_a = {e["task_id"] for e in (replay_a or {}).get("episodes_compromised", [])}
    compromised_b = {e["task_id"] for e in (replay_b or {}).get("episodes_compromised", [])}
    for row in rows:
        if row["task_id"] in compromised_a or row["task_id"] in compromised_b:
            row["replay_compromised"] = [side for side, bad in (("a", compromised_a), ("b", compromised_b))
                                         if row["task_id"] in bad]
    cats = sorted(set((rep_a.get("summary") or {}).get("categories", {})) |
                  set((rep_b.get("summary") or {}).get("categories", {})))
    categories = {}
    for cat in cats + ["overall"]:
        def rate(rep):
            s = rep.get("summary") or {}
            r = s.get("overall") if cat == "overall" else s.get("categories", {}).get(cat)
            return None if not r else r.get("success_rate")
        categories[cat] = {"a": rate(rep_a), "b": rate(rep_b)}
    return {"a": {"path": str(run_a), "agent": (rep_a.get("run") or {}).get("agent")},
            "b": {"path": str(run_b), "agent": (rep_b.get("run") or {}).get("agent")},
            "identical": counts["different"] == counts["only_a"] == counts["only_b"] == 0,
            "counts": counts, "tasks": rows, "categories": categories,
            "replay": {"a": replay_a, "b": replay_b}, "versions": version_differences(man_a, man_b),
            "settings": setting_differences(man_a, man_b),
            "backends": [_setting(man_a, ("env", "backend")), _setting(man_b, ("env", "backend"))]}


# ------------------------------------------------------------------ two runs equal apart from timings
def comparable_report(report: dict) -> dict:
    """A report without its ``timings`` section: what a re-run must reproduce byte for byte."""
    return {k: v for k, v in report.items() if k != "timings"}


def comparable_trajectory(traj: dict, stale: set | None = None) -> str:
    """A trajectory's text without its timing fields; the steps numbered in ``stale`` also lose
    their ``obs_digest`` (a redacted bundle's steps whose observation showed a secret: replay
    cannot show the page it hid, see webfreeze.bundles.redaction)."""
    traj = without_timings(traj)
    for step in traj.get("steps") or [] if stale else []:
        if isinstance(step, dict) and step.get("step") in stale:
            step.pop("obs_digest", None)
    return dumps(traj)


def _recorded_alike(ra: dict, rb: dict) -> None:
    """Leave out of ``rb``'s ``run.versions`` the versions ``ra``'s run did not record (a run made
    by an older webfreeze, before that version was recorded: a re-run's record of it is no
    difference in what either run did)."""
    va, vb = ((r.get("run") or {}).get("versions") if isinstance(r.get("run"), dict) else None for r in (ra, rb))
    if isinstance(va, dict) and isinstance(vb, dict):
        rb["run"]["versions"] = {k: v for k, v in vb.items() if k in va}


def _read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


_STEP_DOM = re.compile(r"steps\[(\d+)\]\.dom at char \d+\Z")
DOM_CONTEXT = 60  # characters shown of each side of where two DOM snapshots part


def dom_parting(run_a, run_b, path_a, path_b) -> tuple[int, str, str] | None:
    """Where two DOM snapshots (``path_a`` of run folder ``run_a``, ``path_b`` of ``run_b``) part:
    the character offset and up to DOM_CONTEXT characters of each from a little before it; None
    when either is not there to read. A snapshot's name is a digest, which says only that two
    differ."""
    try:
        da, db = run_dom_loader(run_a)(path_a), run_dom_loader(run_b)(path_b)
    except Exception:  # noqa: BLE001 (a damaged snapshot, zstandard's own error too: said by digest alone)
        return None
    if da is None or db is None:
        return None
    sa, sb = da.decode("utf-8", "replace"), db.decode("utf-8", "replace")
    at = next((k for k, (x, y) in enumerate(zip(sa, sb)) if x != y), min(len(sa), len(sb)))
    start = max(0, at - DOM_CONTEXT // 3)
    return at, sa[start:start + DOM_CONTEXT], sb[start:start + DOM_CONTEXT]


def _dom_difference(a: Path, b: Path, ta: str, tb: str, where: str, names: tuple[str, str]) -> str:
    """:func:`dom_parting` as a clause for :func:`run_difference`'s line (``; the DOM snapshots
    part at char N: ...``), when ``where`` is a step's ``dom``; else ''."""
    m = _STEP_DOM.match(where)
    if not m:
        return ""
    i = int(m.group(1))
    try:
        pa, pb = (json.loads(t)["steps"][i]["dom"] for t in (ta, tb))
    except (ValueError, KeyError, IndexError, TypeError):
        return ""
    parted = dom_parting(a, b, pa, pb)
    if parted is None:
        return ""
    at, sa, sb = parted
    return (f"; the DOM snapshots part at char {at}: {json.dumps(sa, ensure_ascii=False)} in {names[0]}, "
            f"{json.dumps(sb, ensure_ascii=False)} in {names[1]}")


def run_difference(a, b, *, stale: Callable[[str], set] | None = None,
                   names: tuple[str, str] = ("the first run", "the second run")) -> str | None:
    """The first difference between run folders ``a`` (the reference) and ``b``, as one line, or
    None when their trajectories (timing fields aside) and ``report.json`` (its ``timings`` aside)
    are byte-identical. A report is compared when ``a`` has one (a run kept without its report is
    checked by its trajectories). ``stale(name)`` gives a trajectory's steps whose observation
    digest is not compared; ``names`` words the two sides in the line."""
    a, b = Path(a), Path(b)
    old = sorted(p.name for p in (a / "trajectories").glob("*.json"))
    new = sorted(p.name for p in (b / "trajectories").glob("*.json"))
    if old != new:
        only = sorted(set(old) - set(new)) or sorted(set(new) - set(old))
        return f"trajectory {only[0]} is only in {names[0] if only[0] in old else names[1]}"
    for name in old:
        skip = stale(name) if stale else None
        ta, tb = (comparable_trajectory(_read_json(run / "trajectories" / name), skip) for run in (a, b))
        if ta != tb:
            where = json_difference(json.loads(tb), json.loads(ta), names=names) or "(the same)"
            return f"trajectory {name} differs at {where}{_dom_difference(a, b, ta, tb, where, names)}"
    if not (a / "report.json").is_file():
        return None
    if not (b / "report.json").is_file():
        return f"report.json is only in {names[0]}"
    ra, rb = (comparable_report(_read_json(run / "report.json")) for run in (a, b))
    _recorded_alike(ra, rb)
    if report_json(ra) != report_json(rb):
        return f"report.json differs at {json_difference(rb, ra, names=names) or '(the same)'}"
    return None
