"""The ``tasks`` command group (checking, adding and validating suites' tasks).

Registered on the main CLI in ``webfreeze/cli/__init__.py``.
"""

from __future__ import annotations

import glob
import json
import shutil
import sys
import tempfile
from pathlib import Path

import click

from webfreeze.cli.options import task_options
from webfreeze.common.errors import WebfreezeError
from webfreeze.eval.authoring import add_task, capture_misses, describe_miss, stalled_action
from webfreeze.eval.replay_provenance import summary_line
from webfreeze.eval.report import write_report
from webfreeze.eval.score import SUCCESS_KINDS
from webfreeze.eval.tasks import load_suite
from webfreeze.runs.console import DEFAULT_BACKEND, run_suite
from webfreeze.runs.prepare import select_tasks
from webfreeze.runs.spec import RunError
from webfreeze.simulator.backends import BACKENDS


@click.group("tasks")
def tasks_group() -> None:
    """Task suites: validate them and count their tasks."""


@tasks_group.command("check")
@click.argument("suite", metavar="SUITE", type=click.Path())
@click.option("--json", "as_json", is_flag=True, help="Print the counts as JSON.")
def tasks_check(suite, as_json):
    """Load and validate SUITE (a suite directory, its manifest, a tasks .jsonl file, or the
    Mind2Web-Live key-node JSON) and print the number of tasks per category and kind."""
    s = load_suite(suite)
    kinds: dict[str, int] = {}
    for t in s.tasks:
        for k in t.kinds:
            kinds[k] = kinds.get(k, 0) + 1
    if as_json:
        click.echo(json.dumps({"name": s.name, "digest": s.digest, "tasks": len(s.tasks), "categories": s.counts(),
                               "kinds": dict(sorted(kinds.items()))}, indent=2, sort_keys=True))
        return
    counts = s.counts()
    width = max(len(c) for c in counts)
    for cat, n in counts.items():
        click.echo(f"{cat:<{width}}  {n:>5}")
    click.echo(f"{'total':<{width}}  {len(s.tasks):>5}")
    click.echo("kinds: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    click.echo(f"{s.name}: {len(s.tasks)} tasks ok, digest {s.digest}", err=True)


@tasks_group.command("add")
@click.argument("suite", metavar="SUITE", type=click.Path(file_okay=False))
@click.option("--reference", "reference", required=True, type=click.Path(dir_okay=False),
              help="The session's trajectory (record session --trajectory); copied into SUITE/references/.")
@click.option("--answer", "answer", default=None,
              help="The task's answer [default: the one the session logged with record_answer; with --replace, "
                   "the replaced task's].")
@click.option("--match", type=click.Choice(["exact", "normalised", "must_include"]), default=None,
              help="How an agent's answer is checked against --answer [default: exact; with --replace, "
                   "the replaced task's].")
@click.option("--category", default=None,
              help="The task's category [default: the manifest's only category, else 'general'; with --replace, "
                   "the replaced task's].")
@click.option("--instruction", default=None,
              help="What the agent is asked [default: the trajectory's instruction; with --replace, else the "
                   "replaced task's].")
@click.option("--id", "task_id", default=None, help="The task's id [default: the reference file's name].")
@click.option("--archive", type=click.Path(dir_okay=False),
              help="A new suite only: the archive its manifest names (the one the session recorded into).")
@click.option("--replace", is_flag=True,
              help="Replace the task of the same id (a session recorded again) and its reference; options not "
                   "given keep the old task's values, and every field that changed is printed.")
@click.option("--require-request", "requests", multiple=True, metavar="'METHOD URL'",
              help="A request the agent must send, answered as recorded (a 'requests' check: the reply posted, "
                   "not only said); the session must have sent it. Repeatable.")
def tasks_add(suite, reference, answer, match, category, instruction, task_id, archive, replace, requests):
    """Add a task to SUITE from a recorded session: the task line (its start URL from the session,
    the answer check, the reference trajectory copied into SUITE/references/). A SUITE that does not
    exist is made, with a manifest. Nothing is written when anything is wrong."""
    obj = add_task(suite, reference, answer, category=category, instruction=instruction, task_id=task_id,
                   match=match, archive=archive, replace=replace, has_session=_has_session,
                   requests=list(requests), session_sent=_session_sent, sent_before=_session_sent_before)
    for change in obj.get("changes", []):
        click.echo(f"{obj['id']}: {change}")
    if obj.get("answer_added"):
        kept = next(iter((obj.get("ground_truth") or {}).get("answer", {}).values()), answer)  # (--replace keeps it)
        kept = kept[0] if isinstance(kept, list) and len(kept) == 1 else kept
        click.echo(f"note: the session logged no answer; its reference in {suite}/references/ ends with the answer "
                   f"{kept!r} (give the evidence with record_answer in a session script)", err=True)
    for d in obj.get("dialogs_otherwise", []):  # (the agent environment answers every dialog as accepted)
        said = (f"cancelled the {d['type']} {d['message']!r}" if d["answer"] in (False, None)
                else f"answered the {d['type']} {d['message']!r} with {d['answer']!r}")
        click.echo(f"note: its session {said} (reference step {d['step']}); the agent "
                   "environment accepts every confirm, and a prompt with the text it offers, so the task is not "
                   "replayed as it was done", err=True)
    if obj.get("unrequired"):  # (an action's task scored on its answer alone: say how to require the action)
        last = obj["unrequired"][-1]  # (the last one sent: a login or a beacon comes before the action)
        more = f" (and {len(obj['unrequired']) - 1} before it)" if len(obj["unrequired"]) > 1 else ""
        click.echo(f"note: its session sent {last}{more}; if the task's point is that action, require it "
                   f"(tasks add ... --replace --require-request '{last}'): the answer alone does not show it was "
                   "done", err=True)
    check = f"webfreeze tasks validate {suite}"
    if not obj["names_archive"]:  # (a suite made without --archive: every run is told where the archive is)
        check += (" --archive ARCHIVE (its manifest names no archive: add \"archive\" to it, or give --archive "
                  "to tasks add when it makes a suite)")
    click.echo(f"{'replaced' if obj['replaced'] else 'added'} task {obj['id']} ({obj['category']}) in {suite}; "
               f"check it with: {check}", err=True)


def _session_sent(path, session_id: str, before: float | None = None) -> list[str]:
    """The requests other than GET and HEAD a session of the archive at ``path`` sent (before the
    time ``before``, seconds since the epoch, if given), as 'METHOD URL', in the order it first sent
    them; a CORS preflight (the browser's ``OPTIONS`` before a cross-origin POST or DELETE, not an
    action of the page's) is left out."""
    from webfreeze.archives import Archive
    from webfreeze.archives.timeutil import parse_time

    def preflight(ex) -> bool:
        return ex.method == "OPTIONS" and ex.request.header("Access-Control-Request-Method") is not None

    with Archive.open(path) as arc:  # (in the order sent: an action comes after the login before it)
        sent = [f"{ex.method} {ex.url}" for ex in arc.exchanges(session=session_id, order="time")
                if ex.method not in ("GET", "HEAD") and not preflight(ex)
                and (before is None or parse_time(ex.captured_at).timestamp() < before)]
    return list(dict.fromkeys(sent))


def _session_sent_before(path, session_id: str, before: float) -> list[str]:
    """:func:`_session_sent` before the time ``before`` (``tasks add``'s ``sent_before``)."""
    return _session_sent(path, session_id, before)


def _has_session(path, session_id: str) -> bool:
    from webfreeze.archives import Archive

    with Archive.open(path) as arc:
        return arc.session(session_id) is not None


@tasks_group.command("validate")
@click.argument("suite", metavar="SUITE", type=click.Path())
@click.option("--archive", "archive", type=click.Path(dir_okay=False),
              help="Archive to check against (default: the one the suite's manifest names).")
@click.option("--backend", type=click.Choice(BACKENDS), default=None,
              help="browser runs the pages' scripts; text is fast and enough for server-rendered sites "
                   "[default: the suite manifest's backend, else browser, as bench run].")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--out", type=click.Path(file_okay=False), help="Keep the validation run here (default: discarded).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@task_options
def tasks_validate(suite, archive, backend, workers, out, as_json, task_globs, limit):
    """Replay every task's reference trajectory on the archive with the reference agent and list
    the tasks whose ground truth cannot be reached there ("expired" tasks), and those whose replay
    asked for a document or XHR the archive lacks ("incomplete capture", naming the reference step
    and the URL, reached or not: the evidence may also stand on a page that did load). A
    personalised task is reachable when its final state (or ranking) is: its rubric also scores
    history retrieval.

    Exit status 0 when every task is reachable with a complete capture, 1 otherwise.
    """
    loaded = load_suite(suite)
    no_ref = [t.id for t in select_tasks(loaded.tasks, task_globs, limit) if t.reference is None]
    if no_ref:
        raise RunError(f"{len(no_ref)} task(s) have no reference trajectory to replay, e.g. {no_ref[0]}")
    backend = backend or loaded.backend or DEFAULT_BACKEND
    report, expired, incomplete, stalled = _validate_run(suite, archive, backend, workers, out, as_json, task_globs,
                                                         limit)
    if expired or incomplete:
        # would the other backend reach them? (a page whose scripts matter, or a page whose scripts
        # break the replay): said per task, for the author to choose the suite's backend

        other = next(b for b in BACKENDS if b != backend)
        problems = expired + incomplete
        try:
            _, still, still_incomplete, _ = _validate_run(suite, archive, other, workers, None, True,
                                                       [glob.escape(e["task_id"]) for e in problems], None)
        except WebfreezeError:  # the other backend cannot run here (no Chromium): nothing to say
            still, still_incomplete = problems, []
        failing = {e["task_id"] for e in still + still_incomplete}
        for e in problems:
            e["passes_with"] = other if e["task_id"] not in failing else None
    # reached, but on answers the site did not give (fuzzy, missed, a socket ahead of the page): each
    # run of the task is replay-compromised too
    provenance = report.get("replay") or {}
    compromised = [e["task_id"] for e in provenance.get("episodes_compromised") or []]
    own = report.get("own_requests") or []
    result = {"suite": report["suite"], "tasks": len(report["tasks"]), "expired": expired, "incomplete": incomplete,
              "backend": backend, "stalled": stalled, "compromised": compromised, "own_requests": own}
    if as_json:
        click.echo(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        for e in stalled:  # (reachable: no failure, but the reference did not go where the session went)
            st = e["stalled"]
            click.echo(f"warning: {e['task_id']} reached its answer, but reference step {st['step']} ({st['action']}) "
                       f"went on to {st['recorded']} in the session; replayed, it stayed on {st['stayed']} "
                       "(the evidence was on that page too)", err=True)
        for e in own:  # (a check that an agent doing nothing passes: the page's own requests answer it)
            click.echo(f"warning: {e['task_id']}'s requests check {e['request']} holds for an agent that does nothing: "
                       "its session sent that request before its first action (the page sends it on its own); "
                       "take the check out of the task's line", err=True)
        if compromised:
            shown = ", ".join(compromised[:5]) + (f" and {len(compromised) - 5} more" if len(compromised) > 5 else "")
            click.echo(f"warning: {summary_line(provenance)}: {shown}; every run of {'it' if len(compromised) == 1 else 'them'} "
                       "will be too (the trajectory's replay section says which answers)", err=True)
        for e in incomplete:
            click.echo(f"incomplete capture: {e['task_id']} ({_why_expired(e)})")
        for e in expired:
            click.echo(f"expired: {e['task_id']} ({_why_expired(e)})")
        bad = len(expired) + len(incomplete)
        click.echo(f"{report['suite']['name']}: {len(report['tasks']) - bad} of {len(report['tasks'])} tasks "
                   f"reachable on the archive, {len(expired)} expired"
                   + (f", {len(incomplete)} incomplete capture" if incomplete else "") + f" ({backend} backend)",
                   err=True)
    sys.exit(1 if expired or incomplete else 0)


def _validate_run(suite, archive, backend, workers, out, quiet, task_globs,
                  limit) -> tuple[dict, list[dict], list[dict], list[dict]]:
    """Run the reference agent on the selected tasks; (the report, the expired tasks: id, how the
    episode ended, the answer, the failed check's detail and the reason the reference gave up; the
    tasks whose replay missed a document or XHR: the same, and ``misses``,
    :func:`~webfreeze.eval.authoring.capture_misses`, with ``reason`` naming the first; the tasks
    reached though a click of theirs led nowhere: id and ``stalled``,
    :func:`~webfreeze.eval.authoring.stalled_action`)."""
    tmp = None
    if out is None:
        tmp = tempfile.mkdtemp(prefix="webfreeze-validate-")
        out = str(Path(tmp) / "run")
    work = None
    try:
        if archive is not None:
            # another archive (a newer snapshot): a task recorded again into it is replayed at that
            # session's time, with its placeholders, as drift replays it (checks/drift.py)
            from webfreeze.checks.drift import retimed_suite

            work = Path(tempfile.mkdtemp(prefix="webfreeze-validate-suite-"))
            suite = str(retimed_suite(suite, archive, work / "suite"))
        run_suite(suite, archive, "reference", out, workers=workers, backend=backend, quiet=quiet,
                  tasks=task_globs, limit=limit)
        report = write_report(out)
        expired, incomplete, stalled_reached = [], [], []
        lines_by_id: dict[str, list[str]] = {}  # (each task's line, found once)
        try:
            for line in (Path(out) / "tasks.jsonl").read_text(encoding="utf-8").splitlines():
                task = json.loads(line) if line.strip() else None
                if isinstance(task, dict) and isinstance(task.get("id"), str):
                    lines_by_id.setdefault(task["id"], [line])
        except (OSError, ValueError):
            lines_by_id = {}
        report["own_requests"] = _own_requests(out, report, lines_by_id)
        for tid, r in sorted(report["tasks"].items()):
            lines = lines_by_id.get(tid, [])
            try:
                traj = json.loads((Path(out) / "trajectories" / f"{tid}.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                traj = {}
            traj = traj if isinstance(traj, dict) else {}
            misses = capture_misses(traj, reached=_reachable(r))
            if _reachable(r) and not misses:
                # reached, though a click led nowhere here: the answer stood on a page it stayed on
                # (Django Oscar's mini-basket, where "View basket" is a script's button)
                stalled = stalled_action(traj, _run_reference(out, tid, lines))
                if stalled:
                    stalled_reached.append({"task_id": tid, "stalled": stalled})
                continue
            if misses:
                from webfreeze.checks.drift import note_captured  # (late: the archive, looked at only here)

                misses = note_captured(_run_archive(out), misses, _run_reference(out, tid, lines))
            detail = next((res.get("detail") for res in r["results"].values()
                           if isinstance(res, dict) and not res.get("success") and res.get("detail")), None)
            if detail is None:  # (a requests check says it per request)
                detail = next((f"requests: {c.get('method')} {c.get('url')} {c.get('detail')}"
                               for c in ((r["results"].get("requests") or {}).get("checks") or [])
                               if isinstance(c, dict) and not c.get("passed")), None)
            end = traj.get("end") if isinstance(traj.get("end"), dict) else {}
            reason = end.get("detail") if end.get("reason") == "infeasible" else None
            entry = {"task_id": tid, "end": r.get("end_reason") or r["outcome"], "answer": r.get("answer"),
                     "detail": detail, "reason": reason, "passes_with": None}
            # a start page this backend could not show (a single-page application's shell in the text
            # backend): the reason the reference found nothing there, said with it
            start = (traj.get("replay") or {}).get("start") if isinstance(traj.get("replay"), dict) else None
            if isinstance(start, dict) and isinstance(start.get("note"), str) and start["note"]:
                entry["start_note"] = start["note"]
            if misses:
                entry.update(misses=misses, reached=_reachable(r), reason=describe_miss(misses[0])
                             + (f" (and {len(misses) - 1} more)" if len(misses) > 1 else ""))
                incomplete.append(entry)
            else:
                # a click that led nowhere in this backend (a script's button in the text backend)
                stalled = stalled_action(traj, _run_reference(out, tid, lines))
                if stalled:
                    entry["stalled"] = stalled
                expired.append(entry)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    return report, expired, incomplete, stalled_reached


def _own_requests(out, report: dict, lines_by_id: dict) -> list[dict]:
    """The ``requests`` checks of the run's tasks that hold without the agent acting: the task's
    session sent that request before the person's first action (the page sends it on its own,
    ``tasks add`` now refuses such a check): ``{"task_id", "request"}`` each."""
    from webfreeze.eval.authoring import first_action_time
    from webfreeze.eval.request_checks import among

    archive = _run_archive(out)
    found: list[dict] = []
    for tid in sorted(report["tasks"]):
        try:
            task = json.loads((lines_by_id.get(tid) or [""])[0])
        except ValueError:
            continue
        checks = (task.get("ground_truth") or {}).get("requests") if isinstance(task, dict) else None
        if not checks or not isinstance(checks, list) or not archive:
            continue
        ref = _run_reference(out, tid, lines_by_id.get(tid))
        first, sid = first_action_time(ref), ref.get("archive_session")
        if first is None or not isinstance(sid, str) or not sid:
            continue
        try:
            own = _session_sent(archive, sid, first)
        except WebfreezeError:
            continue
        for c in checks:
            if isinstance(c, dict) and among(own, str(c.get("method", "")), str(c.get("url"))):
                found.append({"task_id": tid, "request": f"{str(c.get('method')).upper()} {c.get('url')}"})
    return found


def _run_reference(out, task_id: str, lines: list[str] | None = None) -> dict:
    """The reference trajectory of task ``task_id`` in run folder ``out`` (its ``tasks.jsonl`` line
    names it, relative to the folder, or holds it), or {} when there is none to read. ``lines``:
    that file's lines, read once by a caller asking for many tasks."""
    try:
        if lines is None:
            lines = (Path(out) / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
        for line in lines:
            task = json.loads(line) if line.strip() else {}
            if isinstance(task, dict) and task.get("id") == task_id:
                ref = (task.get("ground_truth") or {}).get("reference_trajectory")
                if isinstance(ref, str):
                    ref = json.loads((Path(out) / ref).read_text(encoding="utf-8"))
                return ref if isinstance(ref, dict) else {}
    except (OSError, ValueError, AttributeError):
        pass
    return {}


def _run_archive(out) -> str | None:
    """The archive a run (folder ``out``) played on, from its manifest; None when it says none."""
    try:
        manifest = json.loads((Path(out) / "manifest.json").read_text(encoding="utf-8"))
        return manifest["circumstances"]["archive_path"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _why_expired(e: dict) -> str:
    """One expired task's line: why the reference could not reach the ground truth, and whether the
    other backend would."""
    if e.get("reason"):
        why = e["reason"]
    else:
        answered = "no answer" if e["answer"] is None else f"answer {e['answer']!r}"
        why = f"ended by {e['end']}; {answered}" + (f"; {e['detail']}" if e.get("detail") else "")
    stalled = e.get("stalled")
    if isinstance(stalled, dict):
        why += (f"; reference step {stalled['step']} ({stalled['action']}) went on to {stalled['recorded']} in the "
                f"session; replayed, it stayed on {stalled['stayed']}")
    if e.get("start_note"):
        why += f"; the start page {e['start_note'].split(': the browser backend', 1)[0]}"
    if e.get("passes_with"):
        why += f"; passes with the {e['passes_with']} backend"
    return why


def _reachable(r: dict) -> bool:
    """Whether the reference reached the task's ground truth. A personalised task's rubric also
    scores history retrieval, which a replayed reference never does: there the task's other checks
    (final state, ranking) decide."""
    results = r.get("results") or {}
    others = [results[k] for k in SUCCESS_KINDS if k != "rubric" and isinstance(results.get(k), dict)]
    if "rubric" in results and others:
        return all(v["success"] for v in others)
    return bool(r["success"])
