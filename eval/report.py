"""Reports for a run directory: ``report.json``, a self-contained ``report.html`` and a rich table.

A run directory (written by ``webfreeze bench run``) holds ``manifest.json``, ``tasks.jsonl`` (a
copy of the suite's task lines), ``trajectories/<task_id>.json`` and the screenshots those name.
``report.json`` is deterministic: sorted keys, floats rounded to 6 places, nothing that was not in
the inputs, and every timing (the trajectories' ``timing`` fields and the manifest's time-like
fields) kept apart under ``timings``, so two runs compare equal apart from that section.
``report.html`` has inline CSS and inline SVG charts, loads nothing from the network, and shows
each trajectory step by step (screenshot by relative path, action, thought, memory, error).
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from webfreeze.common.files import json_text, write_atomically

from .errors import ReportError, TaskError
from .infrastructure import infrastructure_phrase
from .judge import Judge, judge_name
from .keynodes import run_dom_loader
from .longctx import long_context_results
from .longctx import summarise as summarise_long_context
from .personal import markdown as personalisation_markdown
from .personal import personalisation
from .replay_provenance import flagged_html, provenance_html, run_provenance, task_provenance
from .replay_provenance import strict_replay as strict_replay_counts
from .score import score_task, summarise
from .tasks import load_tasks_jsonl, suite_digest
from .trajectory import validate_trajectory

REPORT_FORMAT = "webfreeze-report"
REPORT_VERSION = 1
# "circumstances": how a run was produced (e.g. its LLM calls replayed from which cassette), not
# what it did; kept apart with the timings so that a replayed run's report equals the recorded one's.
# "agent_settings" too: the settings as given (`--llm local` or the same default left out build the
# same agent, whose config is in "agent").
_TIME_KEYS = {"timing", "timings", "time", "duration", "started", "finished", "elapsed", "circumstances",
              "agent_settings"}
_TIME_SUFFIXES = ("_at", "_ms", "_s", "_seconds", "_time")


def unshown_start_warning(run_dir) -> str | None:
    """One line for a run whose episodes started on a page its backend could not show (it shows
    nothing without its scripts and the text backend runs none: the trajectory's
    ``replay.start.note``): how many, an example, the way out; None when none did. Printed by
    ``bench run`` and ``eval report`` beside the report's warnings, not kept in ``report.json``
    (which runs packed before it was said re-run to byte for byte)."""
    paths = sorted((Path(run_dir) / "trajectories").glob("*.json"))
    unshown = []
    for path in paths:
        try:
            traj = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        replay = traj.get("replay") if isinstance(traj, dict) and isinstance(traj.get("replay"), dict) else {}
        start = replay.get("start") if isinstance(replay.get("start"), dict) else {}
        if isinstance(start.get("note"), str) and start["note"]:
            unshown.append((path.stem, start["note"]))
    if not unshown:
        return None
    first, note = unshown[0]
    return (f"{len(unshown)} of {len(paths)} episode(s) started on a page that shows nothing without its scripts "
            f"(or their templates unfilled), which this backend does not run (e.g. {first}: "
            f"{note.split(' shows ', 1)[0]}): run them with --backend browser")


def _is_time_key(key: str) -> bool:
    return key in _TIME_KEYS or key.endswith(_TIME_SUFFIXES)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ReportError(f"{path}: no {what} here") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ReportError(f"{path}: {what} is not valid JSON ({exc})") from None
    except OSError as exc:
        raise ReportError(f"{path}: {exc.strerror or exc}") from None


def _step_timing_sums(trajectory: dict) -> dict:
    sums: dict[str, float] = {}
    for step in trajectory.get("steps", []):
        for k, v in (step.get("timing") or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                sums[k] = sums.get(k, 0.0) + v
    return sums


def build_report(run_dir: str | os.PathLike, judge: Judge | None = None, *,
                 strict_replay: bool = False) -> tuple[dict, dict[str, dict]]:
    """Score every task of a run directory. Returns (the report, the trajectories by task id).
    ``strict_replay``: also set replay-compromised episodes apart (``report["strict_replay"]``)."""
    run = Path(run_dir)
    if not run.is_dir():
        raise ReportError(f"{run}: not a run directory (no such directory)")
    manifest = _read_json(run / "manifest.json", "run manifest")
    if not isinstance(manifest, dict):
        raise ReportError(f"{run / 'manifest.json'}: the run manifest must be a JSON object")
    if manifest.get("format") == "webfreeze-suite":  # (a suite folder also holds manifest.json and tasks.jsonl)
        raise ReportError(f"{run}: a task suite, not a run directory (run it first: webfreeze bench run {run} ...)")
    suite_info = manifest.get("suite") if isinstance(manifest.get("suite"), dict) else {}
    roots = [run]
    circumstances = manifest.get("circumstances") if isinstance(manifest.get("circumstances"), dict) else {}
    # where the suite lay: a circumstance (older manifests kept it as suite.path)
    suite_path = circumstances.get("suite_path") or suite_info.get("path")
    if isinstance(suite_path, str):
        roots.append(Path(suite_path))
    tasks, digest = load_tasks_jsonl(run / "tasks.jsonl", roots=roots, dependencies=False)

    warnings = []
    # a run of some of a suite's tasks (--tasks, --limit) records the digest of the lines it selected
    selection = manifest.get("selection") if isinstance(manifest.get("selection"), dict) else {}
    recorded_digest = selection.get("digest") or suite_info.get("digest") or manifest.get("suite_digest")
    if recorded_digest and recorded_digest != digest:
        warnings.append(f"tasks.jsonl digest {digest} differs from the manifest's suite digest {recorded_digest}")

    traj_dir = run / "trajectories"
    doms = run_dom_loader(run)  # the steps' DOM snapshots, RUN_DIR/dom/ (key nodes)
    trajectories: dict[str, dict] = {}
    results = []
    timings: dict[str, Any] = {"manifest": {k: v for k, v in sorted(manifest.items()) if _is_time_key(k)},
                               "tasks": {}}
    for task in tasks:
        path = traj_dir / f"{task.id}.json"
        trajectory = None
        if path.is_file():
            trajectory = validate_trajectory(_read_json(path, "trajectory"), str(path))
            if trajectory["task_id"] != task.id:
                raise ReportError(f"{path}: holds task {trajectory['task_id']!r}, not {task.id!r}")
            trajectories[task.id] = trajectory
            timings["tasks"][task.id] = {"total_ms": (trajectory.get("timing") or {}).get("total_ms"),
                                         "steps": _step_timing_sums(trajectory)}
        results.append(score_task(task, trajectory, judge, dom_loader=doms))
    agent = manifest.get("agent") if isinstance(manifest.get("agent"), dict) else {}
    config = agent.get("config") if isinstance(agent.get("config"), dict) else {}
    for r in results:  # a task that did not run is counted under the run's scheme
        if r["outcome"] == "missing" and ("rubric" in r["kinds"] or "level" in r):
            r["scheme"] = config.get("scheme") if isinstance(config.get("scheme"), str) else "no-history"
    long_context_results(tasks, trajectories, results)  # (dependent tasks only: A2 of an A1 -> A2 pair)
    known = {f"{t.id}.json" for t in tasks}
    extra = sorted(p.name for p in traj_dir.glob("*.json") if p.name not in known) if traj_dir.is_dir() else []
    if extra:
        warnings.append(f"{len(extra)} trajectory file(s) for tasks not in tasks.jsonl: {', '.join(extra[:5])}")
    report = {
        "format": REPORT_FORMAT, "version": REPORT_VERSION,
        "run": {k: v for k, v in sorted(manifest.items()) if not _is_time_key(k)},
        "suite": {"name": suite_info.get("name"), "digest": digest, "tasks": len(tasks)},
        "judge": judge_name(judge),
        "summary": summarise(results),
        "personalisation": personalisation(results),
        "tasks": {r["task_id"]: r for r in results},
        "missing": [r["task_id"] for r in results if r["outcome"] == "missing"],
        "warnings": warnings,
        "timings": timings,
    }
    long_context = summarise_long_context(results)
    if long_context is not None:
        report["long_context"] = long_context
    # replay provenance (eval/replay_provenance.py): only for runs whose trajectories record it, so
    # reports of older runs keep their bytes
    for r in results:
        prov = task_provenance(trajectories.get(r["task_id"]))
        if prov is not None:
            r["replay"] = prov
    replay = run_provenance(results, trajectories)
    if replay is not None:
        report["replay"] = replay
    if strict_replay:
        report["strict_replay"] = strict_replay_counts(results, replay)
    return _rounded(report), trajectories


def report_json(report: dict) -> str:
    """``report.json``'s text (the house JSON style: sorted keys, one-space indents)."""
    return json_text(report)


def _write_atomically(path: Path, text: str) -> None:
    try:
        write_atomically(path, text)
    except OSError as exc:  # name the report, not the temporary file
        raise ReportError(f"{path}: cannot write: {exc.strerror or exc}") from None


def scored_strictly(run_dir: str | os.PathLike) -> bool:
    """Whether the run's report.json was written with ``strict_replay`` (``eval report
    --strict-replay``), so that a re-score of the run (a bundle's re-run) is scored the same way."""
    try:
        report = json.loads((Path(run_dir) / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(report, dict) and "strict_replay" in report


def write_report(run_dir: str | os.PathLike, judge: Judge | None = None, *, strict_replay: bool = False) -> dict:
    """Build the report and write ``report.json`` and ``report.html`` into the run directory
    (both rendered before either is written; each written to a temporary file and renamed)."""
    report, trajectories = build_report(run_dir, judge, strict_replay=strict_replay)
    text_json = report_json(report)
    text_html = render_html(report, trajectories)
    run = Path(run_dir)
    _write_atomically(run / "report.json", text_json)
    _write_atomically(run / "report.html", text_html)
    return report


# ------------------------------------------------------------------------------ rich table
def _false_end(r: dict) -> str:
    """False ends, with those that ended as infeasible in brackets (older reports lack the count)."""
    n = r.get("false_end_infeasible")
    return f"{_fmt(r['false_end'])} ({_fmt(n)})" if n else _fmt(r["false_end"])


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v * 100:.1f}%" if pct else f"{v:.2f}"
    return str(v)


def summary_table(report: dict):
    """A rich Table of the summary: one row per category and one overall."""
    from rich.table import Table

    title = report["suite"].get("name") or "suite"
    label = agent_label(report)
    if label:
        title += f" — {label}"
    table = Table(title=title)
    llm = report["summary"]["overall"].get("llm_calls") is not None
    undecided = bool(report["summary"]["overall"].get("undecided"))
    cols = [("category", "left"), ("tasks", "right"), ("success", "right"), ("rate", "right"),
            ("partial", "right"), ("score", "right"), ("avg steps", "right"), ("efficiency", "right"),
            ("false end", "right"), ("step limit loop/ineff.", "right"), ("loops", "right"), ("missing", "right")]
    if undecided:  # tasks whose success nothing decided (a rubric's intent): neither success nor failure
        cols.insert(5, ("undecided", "right"))
    if llm:
        cols += [("LLM calls", "right"), ("tokens in/out", "right")]
    for name, justify in cols:
        table.add_column(name, justify=justify, no_wrap=name == "category")

    def row(name: str, r: dict, style: str | None = None):
        cells = [name, _fmt(r["tasks"]), _fmt(r["success"]), _fmt(r["success_rate"], pct=True),
                 _fmt(r["partial"]), _fmt(r["mean_score"]), _fmt(r["avg_steps"]), _fmt(r["mean_efficiency"]),
                 _false_end(r), f"{_fmt(r['step_limit_loop'])}/{_fmt(r['step_limit_inefficient'])}",
                 _fmt(r["loops"]), _fmt(r["missing"])]
        if undecided:
            cells.insert(5, _fmt(r.get("undecided")))
        if llm:
            cells += [_fmt(r.get("llm_calls")), f"{_fmt(r.get('prompt_tokens'))}/{_fmt(r.get('completion_tokens'))}"]
        table.add_row(*cells, style=style)

    for cat, r in report["summary"]["categories"].items():
        row(cat, r)
    table.add_section()
    row("overall", report["summary"]["overall"], style="bold")
    return table


def agent_label(report: dict) -> str:
    """The run's agent as reports name it: an oracle's run is marked as the upper bound."""
    agent = report["run"].get("agent") if isinstance(report["run"].get("agent"), dict) else {}
    name = agent.get("name") or ""
    if name and agent.get("oracle"):
        name += f" (oracle: {agent.get('label') or 'upper bound'})"
    return name


# ------------------------------------------------------------------------------ HTML
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"DejaVu Sans",sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:16px 24px}header h1{margin:0 0 4px;font-size:20px}
header .meta{font-size:12px;color:#c9cfdb;word-break:break-all}
main{padding:16px 24px;max-width:1400px}
h2{font-size:17px;margin:24px 0 8px}
table{border-collapse:collapse;background:#fff;margin-bottom:12px}
th,td{border:1px solid #dde1e8;padding:4px 8px;text-align:right;vertical-align:top}
th:first-child,td:first-child{text-align:left}
tr.overall td{font-weight:bold;background:#eef1f6}
.charts{display:flex;flex-wrap:wrap;gap:12px}
figure.chart{background:#fff;border:1px solid #dde1e8;margin:0;padding:8px}
figure.chart figcaption{font-weight:bold;font-size:13px;margin-bottom:4px}
svg text{font:11px system-ui,"DejaVu Sans",sans-serif;fill:#1d2330}
.outcome-success{color:#17803d;font-weight:bold}.outcome-partial{color:#b26b00;font-weight:bold}
.outcome-fail,.outcome-missing{color:#b3261e;font-weight:bold}.outcome-undecided{color:#555;font-weight:bold}
details.task{background:#fff;border:1px solid #dde1e8;margin:8px 0;padding:6px 10px}
details.task>summary{cursor:pointer;font-weight:bold}
.step{display:grid;grid-template-columns:320px 1fr;gap:12px;border-top:1px solid #eceff4;padding:8px 0}
.step img{max-width:320px;border:1px solid #ccd2dc}
.step .noshot{width:320px;height:60px;display:flex;align-items:center;justify-content:center;color:#8a93a3;border:1px dashed #ccd2dc}
.step code{background:#f0f2f6;padding:1px 4px;white-space:pre-wrap;word-break:break-all}
.field{margin:2px 0}.field b{display:inline-block;min-width:80px;color:#4a5468}
.error{color:#b3261e}
pre.kind{background:#f6f7f9;border:1px solid #e3e6ec;padding:6px;overflow:auto;max-height:240px;font-size:12px}
"""

CHART_METRICS = [("success_rate", "success", "#17803d"), ("partial_rate", "partial", "#d08a1a"),
                 ("mean_score", "score", "#3b6fd1"), ("key_node_completion", "key nodes", "#7a4fc8"),
                 ("hit@5", "hit@5", "#1c8c8c"), ("mean_efficiency", "efficiency", "#6d7789")]


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def bar_chart(title: str, bars: list[tuple[str, float, str]]) -> str:
    """An inline SVG horizontal bar chart of values in [0, 1] (clipped), labelled with percentages."""
    row_h, label_w, bar_w = 22, 90, 240
    height = row_h * len(bars) + 8
    parts = [f'<figure class="chart" data-category="{_e(title)}"><figcaption>{_e(title)}</figcaption>'
             f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 60}" height="{height}" '
             f'role="img" aria-label="{_e(title)}">']
    for i, (label, value, colour) in enumerate(bars):
        y = 4 + i * row_h
        w = max(0.0, min(1.0, value)) * bar_w
        parts.append(f'<text x="0" y="{y + 14}">{_e(label)}</text>'
                     f'<rect x="{label_w}" y="{y + 2}" width="{bar_w}" height="16" fill="#eceff4"/>'
                     f'<rect class="bar" data-metric="{_e(label)}" x="{label_w}" y="{y + 2}" width="{w:.1f}" '
                     f'height="16" fill="{colour}"/>'
                     f'<text x="{label_w + bar_w + 6}" y="{y + 14}">{value * 100:.1f}%</text>')
    parts.append("</svg></figure>")
    return "".join(parts)


def _chart_bars(row: dict) -> list[tuple[str, float, str]]:
    return [(label, float(row[key]), colour) for key, label, colour in CHART_METRICS if row.get(key) is not None]


def _screenshot_src(path: Any) -> str | None:
    if not isinstance(path, str) or not path or os.path.isabs(path) or ".." in Path(path).parts or ":" in path:
        return None
    return quote(path.replace(os.sep, "/"))


def _render_step(step: dict, index: int) -> str:
    fields = step.get("agent_fields") or {}
    src = _screenshot_src(step.get("screenshot"))
    shot = (f'<img src="{_e(src)}" alt="screenshot of step {index}" loading="lazy">' if src
            else '<div class="noshot">no screenshot</div>')
    rows = [f'<div class="field"><b>step</b> {index}</div>',
            f'<div class="field"><b>action</b> <code class="action">{_e(step.get("action"))}</code></div>',
            f'<div class="field"><b>url</b> {_e(step.get("url"))}</div>']
    if step.get("url_after") and step.get("url_after") != step.get("url"):
        rows.append(f'<div class="field"><b>led to</b> {_e(step.get("url_after"))}</div>')
    for key in ("thought", "memory", "reflection"):
        if fields.get(key):
            rows.append(f'<div class="field {key}"><b>{key}</b> {_e(fields[key])}</div>')
    if step.get("kind") == "history" and isinstance(step.get("history"), dict):
        h = step["history"]
        ids = ", ".join(str(e.get("id")) for e in h.get("results") or [] if isinstance(e, dict))
        rows.append(f'<div class="field history"><b>history</b> {_e(h.get("query"))} → {_e(ids or "nothing")}</div>')
    if fields.get("history_queries"):
        rows.append(f'<div class="field"><b>history</b> {_e("; ".join(map(str, fields["history_queries"])))}</div>')
    if step.get("error"):
        rows.append(f'<div class="field error"><b>error</b> {_e(step["error"])}</div>')
    return f'<div class="step" data-step="{index}">{shot}<div>{"".join(rows)}</div></div>'


def _personalisation_html(section: dict | None) -> list[str]:
    """Table 3 (scheme x level), retrieval Hit@k and ranking Hit@1/Hit@5 as HTML tables."""
    if not section:
        return []
    out = []
    if "table" in section:
        out.append('<h2>Personalisation (Persona2Web, 0-1 scale; Intent and SR over the decided tasks)</h2>'
                   '<table id="persona"><thead><tr><th>scheme</th>'
                   '<th>level</th><th>tasks</th><th>decided</th><th>undecided</th><th>P_web</th><th>P_pref</th>'
                   '<th>P_avg</th><th>Intent</th><th>SR</th></tr></thead><tbody>')
        for scheme, rows in section["table"].items():
            for level, r in rows.items():
                cls = "overall" if level == "all" else ""
                cells = [scheme, level, r["tasks"], r.get("decided", "-"), r.get("undecided", "-")] + \
                    [_fmt(r[k]) for k in ("p_web", "p_pref", "p_avg", "intent", "sr")]
                out.append(f'<tr class="{cls}">' + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
        out.append("</tbody></table>")
        decided = ", ".join(f"{k}: {v}" for k, v in section["decided_by"].items())
        out.append(f'<p class="decided">rubric decisions by {_e(decided)}</p>')
        undecided = section["overall"].get("undecided")
        if undecided:
            out.append(f'<p class="undecided">Intent undecided for {undecided} task(s): no final-state check, '
                       "no judge, and nothing in the trajectory says the goal was not achieved, only the agent's "
                       "answer says it was done; left out of Intent and SR (score with --judge llm to decide "
                       "them).</p>")
        if section.get("by_task"):
            # per task: which rubric decisions the rules made, which a judge made, what is undecided
            out.append('<table id="persona-tasks"><thead><tr><th>task</th><th>level</th><th>scheme</th>'
                       '<th>by rules</th><th>by judge</th><th>undecided</th><th>intent decided by</th>'
                       '</tr></thead><tbody>')
            for tid, d in section["by_task"].items():
                cls = "undecided" if d["undecided"] else ""
                cells = [tid, "-" if d["level"] is None else d["level"], d["scheme"], d["rules"], d["judge"],
                         ", ".join(d["undecided"]) or "-", d["intent"]]
                out.append(f'<tr class="{cls}">' + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>")
            out.append("</tbody></table>")
        infra = section["overall"].get("infrastructure_errors")
        if infra:
            how = _e(infrastructure_phrase(section["overall"]))
            out.append(f'<p class="infrastructure">{infra} task(s) {how} (infrastructure, '
                       "not the agent's failure): scored as run, intent 0.</p>")
    if "retrieval" in section:
        rt = section["retrieval"]
        out.append(f'<h2>Retrieval Hit@{_e(rt["k"])} of gold history entries</h2><table id="retrieval"><thead><tr>'
                   '<th>key</th><th>pairs</th><th>hits</th><th>Hit@k</th></tr></thead><tbody>')
        for key, r in list(rt["by_key"].items()) + [("overall", rt["overall"])]:
            cls = "overall" if key == "overall" else ""
            out.append(f'<tr class="{cls}"><td>{_e(key)}</td><td>{r["pairs"]}</td><td>{r["hits"]}</td>'
                       f'<td>{_fmt(r["hit@k"])}</td></tr>')
        out.append("</tbody></table>")
    if "ranking" in section:
        r = section["ranking"]
        out.append('<h2>Ranking (APeB)</h2><table id="ranking"><thead><tr><th>tasks</th><th>valid</th><th>invalid</th>'
                   '<th>missing</th><th>Hit@1</th><th>Hit@5</th></tr></thead><tbody><tr>'
                   + "".join(f"<td>{_e(c)}</td>" for c in (r["tasks"], r["valid"], r["invalid"], r["missing"],
                                                         _fmt(r["hit@1"]), _fmt(r["hit@5"]))) + "</tr></tbody></table>")
    return out


def _kind_summary(result: dict) -> str:
    brief = {k: v for k, v in result.items() if k not in ("reference", "agent")}
    return json.dumps(brief, sort_keys=True, indent=1, ensure_ascii=False)


def render_html(report: dict, trajectories: dict[str, dict]) -> str:
    """The self-contained HTML report (no scripts, no external resources)."""
    run = report["run"]
    suite = report["suite"]
    label = agent_label(report)
    title = f"webfreeze report — {suite.get('name') or 'suite'}" + (f" — {label}" if label else "")
    meta = [f"suite digest {suite.get('digest')}", f"judge: {report['judge']}"]
    for key in ("archive_digest", "backend"):
        if run.get(key):
            meta.append(f"{key.replace('_', ' ')} {run[key]}")
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
           f"<header><h1>{_e(title)}</h1><div class=\"meta\">{' · '.join(_e(m) for m in meta)}</div></header><main>"]
    for w in report.get("warnings", []):
        out.append(f'<p class="error">warning: {_e(w)}</p>')

    summary = report["summary"]
    undecided = bool(summary["overall"].get("undecided"))
    out.append('<h2>Summary</h2><table id="summary"><thead><tr><th>category</th><th>tasks</th><th>success</th>'
               '<th>rate</th><th>partial</th>' + ('<th>undecided</th>' if undecided else '') +
               '<th>score</th><th>avg steps</th><th>efficiency</th><th>false end (infeasible)</th>'
               '<th>loops</th><th>step limit (loop at limit / inefficient)</th><th>missing</th></tr></thead><tbody>')

    def row(name: str, r: dict, cls: str = "") -> str:
        cells = [name, r["tasks"], r["success"], _fmt(r["success_rate"], pct=True), r["partial"], _fmt(r["mean_score"]),
                 _fmt(r["avg_steps"]), _fmt(r["mean_efficiency"]), _false_end(r), r["loops"],
                 f"{r['step_limit_loop']} / {r['step_limit_inefficient']}", r["missing"]]
        if undecided:  # tasks whose success nothing decided (a rubric's intent): neither success nor failure
            cells.insert(5, _fmt(r.get("undecided")))
        return f'<tr class="{cls}">' + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>"

    for cat, r in summary["categories"].items():
        out.append(row(cat, r))
    out.append(row("overall", summary["overall"], "overall"))
    out.append("</tbody></table>")

    out.extend(provenance_html(report.get("replay"), report.get("strict_replay")))
    out.extend(_personalisation_html(report.get("personalisation")))
    out.append('<h2>Per category</h2><div class="charts" id="charts">')
    for cat, r in summary["categories"].items():
        out.append(bar_chart(cat, _chart_bars(r)))
    out.append(bar_chart("overall", _chart_bars(summary["overall"])))
    out.append("</div>")

    llm = summary["overall"].get("llm_calls") is not None
    llm_heads = "<th>LLM calls</th><th>tokens in / out</th><th>cassette hits</th>" if llm else ""
    out.append('<h2>Tasks</h2><table id="tasks"><thead><tr><th>task</th><th>category</th><th>outcome</th>'
               f'<th>score</th><th>steps</th><th>end</th><th>error category</th>{llm_heads}</tr></thead><tbody>')
    task_timings = (report.get("timings") or {}).get("tasks") or {}
    for tid, r in report["tasks"].items():
        llm_cells = ""
        if llm:
            u = r.get("llm") or {}
            hits = ((task_timings.get(tid) or {}).get("steps") or {}).get("cassette_hits")
            llm_cells = (f'<td>{_e(u.get("calls", "-"))}</td><td>{_e(u.get("prompt_tokens", "-"))} / '
                         f'{_e(u.get("completion_tokens", "-"))}</td><td>{_e("-" if hits is None else int(hits))}</td>')
        out.append(f'<tr><td><a href="#traj-{_e(tid)}">{_e(tid)}</a></td><td>{_e(r["category"])}</td>'
                   f'<td class="outcome-{_e(r["outcome"])}">{_e(r["outcome"])}</td><td>{_fmt(r["score"])}</td>'
                   f'<td>{_e(r["steps"])}</td><td>{_e(r.get("end_reason"))}</td>'
                   f'<td>{_e(r["behaviour"].get("error_category"))}</td>{llm_cells}</tr>')
    out.append("</tbody></table>")

    out.append('<h2>Trajectories</h2><div id="trajectories">')
    for tid, r in report["tasks"].items():
        traj = trajectories.get(tid)
        out.append(f'<details class="task" id="traj-{_e(tid)}"><summary>{_e(tid)} — '
                   f'<span class="outcome-{_e(r["outcome"])}">{_e(r["outcome"])}</span> '
                   f'({_e(r["steps"])} steps)</summary>')
        if traj is None:
            out.append("<p>No trajectory was written for this task.</p></details>")
            continue
        out.append(f'<div class="field"><b>task</b> {_e(r.get("instruction"))}</div>')
        out.append(f'<div class="field"><b>answer</b> {_e(r.get("answer"))}</div>')
        for kind, result in r["results"].items():
            out.append(f'<div class="field"><b>{_e(kind)}</b> result</div><pre class="kind">{_e(_kind_summary(result))}</pre>')
        out.append(flagged_html(r.get("replay")))
        for i, step in enumerate(traj.get("steps", [])):
            out.append(_render_step(step, i))
        out.append("</details>")
    out.append("</div></main></body></html>\n")
    return "\n".join(out)


__all__ = ["build_report", "write_report", "render_html", "summary_table", "report_json", "bar_chart",
           "personalisation_markdown",
           "ReportError", "TaskError", "suite_digest"]
