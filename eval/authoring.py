"""``tasks add``: a recorded session (``record session``) becomes a task line of a suite.

The task's start URL comes from the trajectory, its answer check from the author, and the
trajectory is copied into the suite's ``references/`` as the task's reference. A suite that does not
exist yet is made (its manifest names the archive when one is given). Everything is checked before
anything is written; the reference and ``tasks.jsonl`` are each written whole (a new file or the
old one, never a part), and a reference written for a line that then could not be is removed.

Adding a task whose id the suite already has is refused unless ``replace``: the re-recorded
session's reference then replaces the old one (its exchanges are in the archive's newer session).
What the author did not give (category, answer check kind, instruction when the session has none,
fields ``tasks add`` never writes) keeps the old line's value, and every field that changed is named.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from webfreeze.common.errors import WebfreezeError
from webfreeze.common.files import write_output
from webfreeze.common.http import page_url

from .answer import evaluate_answer
from .errors import TaskError
from .request_checks import among
from .score import SUCCESS_KINDS
from .tasks import SUITE_FORMAT, SUITE_VERSION, canonical_line, load_suite, validate_task
from .trajectory import session_actions

MATCHES = ("exact", "normalised", "must_include")
DEFAULT_CATEGORY = "general"


def _read_reference(path: Path) -> dict:
    try:
        trajectory = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskError("no such reference trajectory", path) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TaskError(f"not a readable JSON trajectory ({getattr(exc, 'strerror', None) or exc})", path) from None
    if not (isinstance(trajectory, dict) and trajectory.get("kind") == "reference_trajectory"
            and isinstance(trajectory.get("steps"), list)):
        raise TaskError("not a `record session` trajectory (kind 'reference_trajectory' with steps)", path)
    if not isinstance(trajectory.get("start_url"), str) or not trajectory["start_url"]:
        raise TaskError("the trajectory has no start_url", path)
    return trajectory


def recorded_answer(trajectory: dict) -> str | None:
    """The answer the session logged with ``record_answer`` (its last), or None."""
    answers = [s for s in trajectory.get("steps", []) if isinstance(s, dict) and s.get("action") == "answer"]
    if not answers:
        return None
    value = answers[-1].get("value")
    text = value.get("text") if isinstance(value, dict) else value
    return str(text) if text is not None and str(text).strip() else None


def session_time(trajectory: dict) -> str | None:
    """When the session began (its first step's time, ISO 8601 UTC), or None when it has no times.

    It is the task's ``snapshot_time``: replay answers a request asked again and again with the
    captures in recorded order starting at the one closest to that time, so the task sees its own
    session's pages. Without it, a page every session loads (a login form, ``/admin/``, which
    answers a visitor with a redirect and a logged-in person with the page) is answered first with
    the earliest session's capture, and the login of a later task lands on a page of the wrong
    moment."""
    from datetime import datetime, timezone

    times = [s.get("time") for s in trajectory.get("steps") or [] if isinstance(s, dict)]
    times = [t for t in times if isinstance(t, (int, float)) and not isinstance(t, bool)]
    if not times:
        return None
    return datetime.fromtimestamp(min(times), timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def reference_reached(task_result: dict) -> bool:
    """Whether a reference agent's episode (one task of a run report) reached the task's ground
    truth. A personalised task's rubric also scores history retrieval, which a replayed reference
    never does: there the task's other checks (final state, ranking) decide."""
    results = task_result.get("results") or {}
    others = [results[k] for k in SUCCESS_KINDS if k != "rubric" and isinstance(results.get(k), dict)]
    if "rubric" in results and others:
        return all(v["success"] for v in others)
    return bool(task_result.get("success"))


# The reference agent starts each step's thought with the reference step it replays (agents/reference.py).
_REFERENCE_STEP = re.compile(r"^reference step (\d+)\b")
# What a capture must hold for a reference to replay: its documents (frames too) and its XHR.
CAPTURE_KINDS = ("document", "xhr")


def capture_misses(trajectory: dict, *, reached: bool = True) -> list[dict]:
    """The documents and XHR the replay could not answer (``level`` miss in a step's ``replay``)
    while a reference trajectory was replayed, in order: ``step`` (the reference step the agent was
    replaying, from its thought; the episode's step when it gave none; None for the start page),
    ``kind``, ``method`` and ``url``, each request once. Any of them means the archive lacks part of
    what the session captured: an incomplete capture, whatever the answer check then says (the
    evidence may also stand on a page that did load).

    A reference that did not reach its ground truth (``reached`` false) counts misses of every kind:
    a script chunk its click imports (VitePress's search box) is as much the capture's gap as an
    XHR, and the task cannot be said to have changed on the site while anything it asked for was
    not captured. A reached one keeps to documents and XHR (a missed image did not stop it)."""
    out = []
    kinds = CAPTURE_KINDS if reached else ("document", "xhr", "subresource")
    seen = set()

    def add(step, replay) -> None:
        flagged = replay.get("flagged") if isinstance(replay, dict) else None
        for f in flagged if isinstance(flagged, list) else []:
            if isinstance(f, dict) and f.get("level") == "miss" and f.get("kind") in kinds:
                miss = {"step": step, "kind": f["kind"], "method": f.get("method") or "GET", "url": f.get("url")}
                key = tuple(miss.values())
                if key not in seen:  # (the browser reports a refused answer as a second miss of it)
                    seen.add(key)
                    if f.get("why"):  # (a WebSocket's: why the replay could not serve it)
                        miss["why"] = str(f["why"])
                    out.append(miss)

    replay = trajectory.get("replay") if isinstance(trajectory.get("replay"), dict) else {}
    add(None, replay.get("start"))
    for i, s in enumerate(trajectory.get("steps") or []):
        if not isinstance(s, dict):
            continue
        fields = s.get("agent_fields") if isinstance(s.get("agent_fields"), dict) else {}
        m = _REFERENCE_STEP.match(str(fields.get("thought") or s.get("thought") or ""))
        add(int(m.group(1)) if m else s.get("step", i), s.get("replay"))
    return out


_REFERENCE_ACTION = re.compile(r"^reference step (\d+): ((?:click|press) .*)$")
# A navigation the session's action brought about (a link, a form, a script), not one of the person's own.
_NOT_EFFECTS = ("goto", "sameDocument")


def stalled_action(trajectory: dict, reference: dict) -> dict | None:
    """The first click or key press of a reference agent's episode that left the agent on the page
    where it acted, though in the session it led to another page (the next navigation the reference
    logged after it, past the form submission and scrolls it caused): MoinMoin's OK button, outside
    the edit form, submits it by a script, which the text backend does not run. ``{"step": the
    reference step, "action": "click button 'OK'", "recorded": the page it led to in the session,
    "stayed": the page the replay stayed on}``, or None. Read from the agent's thoughts (``reference
    step N: click button 'OK'``) and the steps' URLs."""
    steps = [s for s in (reference or {}).get("steps") or [] if isinstance(s, dict)]
    by_number = {s.get("step", i): i for i, s in enumerate(steps)}
    for s in trajectory.get("steps") or []:
        if not isinstance(s, dict):
            continue
        fields = s.get("agent_fields") if isinstance(s.get("agent_fields"), dict) else {}
        m = _REFERENCE_ACTION.match(str(fields.get("thought") or s.get("thought") or ""))
        if not m or int(m.group(1)) not in by_number:
            continue
        went = None
        for later in steps[by_number[int(m.group(1))] + 1:]:
            if later.get("action") in ("submit", "scroll"):
                continue
            if later.get("action") == "navigate" and later.get("cause") not in _NOT_EFFECTS:
                went = later.get("url")
            break
        here, after = s.get("url"), s.get("url_after")
        if (isinstance(went, str) and isinstance(here, str) and isinstance(after, str)
                and _same_page(here, after) and not _same_page(went, here)):
            return {"step": int(m.group(1)), "action": m.group(2), "recorded": went, "stayed": after}
    return None


def _same_page(a: str, b: str) -> bool:
    return page_url(a).rstrip("/") == page_url(b).rstrip("/")


# What a miss's ``captured`` (set where the archive was looked at) says of the request.
CAPTURED_OTHERWISE = {
    "body": "was captured only with another request body (a field drawn at random or from the clock may go in "
            "replay_rules' ignorable_params; a field that says what was asked for, an RPC's method, a form's "
            "words, means the archive lacks this request: record the task's session into it)",
    "redacted": "was captured only with another request body, holding redaction placeholders (each redaction "
                "draws its own key: an archive redacted apart from the one the reference was redacted with holds "
                "other placeholders for the same secrets; compare archives before redaction, or record the task "
                "again on this one)",
    "kind": "was captured only as another kind of request (a form's submission, say), never as this one: the "
            "replayed page sent what the recorded page did not (a timer that ran out in the replay, whose clock "
            "runs up to 1 s a step, before the person acted; wait as long in the session: docs/authoring.md)",
    "query": "was captured only with other query parameters ({differs}a parameter drawn at random or from the "
             "clock may go in replay_rules' ignorable_params; one that says what was asked for, a search's words, "
             "means the archive lacks this request: record the task's session into it)",
    # (a body too long to keep field by field in the index: bodykey.MAX_INLINE_KEY)
    "long_body": "was captured only with another request body, too long for the replay to compare field by field "
                 "(only equal bodies match, whatever replay_rules' ignorable_params say)",
}


# (replayer/websocket.py WEBSOCKET_PARTED: its words, not imported: eval needs no replay extra)
WEBSOCKET_PARTED_WORDS = "a WebSocket whose conversation parted from the recording"
# What a parted conversation says to the task's author: recording again as it was does not mend it.
PARTED_HINT = ("; recording it again as it was will not mend it: a session whose actions came sooner than the "
               "replay's steps settle (up to 1 s of the page's time each) had its messages grouped or ordered "
               "otherwise live, so record it pausing a second after each action; a message that differs in a "
               "clock, a random id or a pointer's coordinates (a click event sent whole: Solara's) is set aside "
               "by the replay rule socket_volatile (docs/authoring.md)")
# What it says instead when the archive holds no session of the task (``session`` "absent" on the
# miss: webfreeze/checks/drift.py note_captured): the socket was answered from another session's
# conversation (a crawl's, another task's), which the page's first action parts from.
ABSENT_SESSION_HINT = ("; this archive holds no session of this task (its reference was recorded in session {sid}, "
                       "not in this archive), so the socket was answered from another session's conversation: "
                       "record the task's session into this archive (record session ... --archive)")


def describe_miss(miss: dict) -> str:
    """One capture miss in words: ``reference step 3: POST http://site/newticket (document) was not captured``;
    a WebSocket's: ``the start page: GET ws://site/socket (xhr) is a WebSocket the replay could not
    serve (no recording of it, or the page's messages parted from the recording)``, or the miss's
    ``why`` in the parentheses when the replay said it (``a WebSocket whose conversation parted ...``);
    one whose ``captured`` says the archive holds the request otherwise (``body``: the same method
    and URL, ``query``: the same path), that it was captured only with another body or query."""
    where = "the start page" if miss.get("step") is None else f"reference step {miss['step']}"
    socket = str(miss.get("url") or "").startswith(("ws:", "wss:"))  # (not served by the replay, recorded or not)
    said = (f"is a WebSocket the replay could not serve ({miss['why']})" if socket and miss.get("why")
            else "is a WebSocket the replay could not serve (no recording of it, or the page's messages parted "
            "from the recording)" if socket
            else CAPTURED_OTHERWISE.get(miss.get("captured"), "was not captured"))
    differs = [str(d) for d in miss.get("differs") or []]
    said = said.replace("{differs}", f"differing here: {', '.join(differs)}; " if differs else "")
    if socket and miss.get("step") is not None and str(miss.get("why") or "").startswith(WEBSOCKET_PARTED_WORDS):
        if miss.get("session") == "absent":
            said += ABSENT_SESSION_HINT.format(sid=miss.get("reference_session") or "?")
        else:
            said += PARTED_HINT  # (after an action; on the start page no action came too soon)
    return f"{where}: {miss['method']} {miss['url']} ({miss['kind']}) {said}"


def _request_check(text: str) -> dict:
    """``"POST http://site/path"`` as a ``requests`` check; a one-line error otherwise, also for a
    GET or HEAD (reading a page is no action: the session's requests other than those are what
    ``tasks add`` lists) and for a WebSocket (its handshake comes with the page, not with an action)."""
    method, _, url = str(text).strip().partition(" ")
    url = url.strip()
    if method.isalpha() and url.startswith(("ws://", "wss://")) and " " not in url:
        raise TaskError(f"--require-request {text!r}: a WebSocket opens with its page, not with an action; a "
                        "requests check names a request an action sends (POST, PUT, PATCH, DELETE)")
    if not method.isalpha() or not url.startswith(("http://", "https://")) or " " in url:
        raise TaskError(f"--require-request {text!r}: give it as 'METHOD URL' (POST http://site/path)")
    if method.upper() in ("GET", "HEAD"):
        raise TaskError(f"--require-request {text!r}: a {method.upper()} only reads, and an agent sends it by "
                        "looking; a requests check names a request an action sends (POST, PUT, PATCH, DELETE)")
    return {"method": method.upper(), "url": url}


# The steps of a session that are the person's actions on a page (not a page opened, a scroll, an answer).
PAGE_ACTIONS = frozenset({"click", "dblclick", "type", "select", "press", "submit", "drag", "upload"})


def first_action_time(trajectory: dict) -> float | None:
    """When the person first acted on a page in a session (a step of :data:`PAGE_ACTIONS`), seconds
    since the epoch; None when no such step says when."""
    for step in trajectory.get("steps") or []:
        if isinstance(step, dict) and step.get("action") in PAGE_ACTIONS:
            t = step.get("time")
            return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None
    return None


def reference_changes(old: dict, new: dict) -> list[str]:
    """What a re-recorded reference changes, in short lines: the archive session, the first step
    (as the reference agent takes them) where the two part and the step counts, the answer."""
    out = []
    if old.get("archive_session") != new.get("archive_session"):
        out.append(f"archive session {old.get('archive_session')} -> {new.get('archive_session')}")
    a, b = [str(x) for x in session_actions(old)], [str(x) for x in session_actions(new)]
    if a != b:
        i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        out.append(f"steps part at step {i + 1}: {a[i] if i < len(a) else '(none)'} -> "
                   f"{b[i] if i < len(b) else '(none)'} ({len(a)} -> {len(b)} steps)")
    else:
        out.append(f"the same {len(a)} steps")
    if recorded_answer(old) != recorded_answer(new):
        out.append(f"answer {recorded_answer(old)!r} -> {recorded_answer(new)!r}")
    return out


def _old_match(old) -> str | None:
    """The kind of answer check (one of :data:`MATCHES`) of a task's line, or None when its check is
    not one ``tasks add`` writes (a list of checks, ``one_of``, ``numeric``, none)."""
    check = old.ground_truth.get("answer")
    if isinstance(check, dict) and len(check) == 1 and next(iter(check)) in MATCHES:
        return next(iter(check))
    return None


def _describe_check(check) -> str:
    """An answer check in short: ``exact 'Order #1001'``, ``must_include ['1001']``."""
    if isinstance(check, dict) and len(check) == 1:
        kind, value = next(iter(check.items()))
        return f"{kind} {_short(value)}"
    return "none" if check is None else _short(check)


def _short(value) -> str:
    """A field's value in a change line: its repr, a structure cut to 80 characters."""
    text = repr(value)
    return text if isinstance(value, str) or len(text) <= 80 else text[:77] + "..."


# the order in which a replaced task's changed fields are listed (any other field after them)
_FIELD_ORDER = ("id", "category", "instruction", "start_url", "snapshot_time")


def field_changes(old: dict, new: dict) -> list[str]:
    """Every field of a task line that differs between ``old`` and ``new`` (the line's JSON
    objects), one short line each: ``category 'info' -> 'general'``, ``answer check exact 'X' ->
    normalised 'X'``; a field of ``ground_truth`` other than the answer check is named
    ``ground_truth.KIND``."""
    out = []
    keys = [k for k in _FIELD_ORDER if k in old or k in new]
    keys += sorted((set(old) | set(new)) - set(_FIELD_ORDER) - {"ground_truth"})
    for k in keys:
        if old.get(k) != new.get(k):
            out.append(f"{k} {_short(old.get(k))} -> {_short(new.get(k))}")
    gt_old = old.get("ground_truth") if isinstance(old.get("ground_truth"), dict) else {}
    gt_new = new.get("ground_truth") if isinstance(new.get("ground_truth"), dict) else {}
    if gt_old.get("answer") != gt_new.get("answer"):
        out.append(f"answer check {_describe_check(gt_old.get('answer'))} -> {_describe_check(gt_new.get('answer'))}")
    for k in sorted((set(gt_old) | set(gt_new)) - {"answer"}):
        if gt_old.get(k) != gt_new.get(k):
            out.append(f"ground_truth.{k} {_short(gt_old.get(k))} -> {_short(gt_new.get(k))}")
    return out


def dialogs_answered_otherwise(trajectory: dict) -> list[dict]:
    """The JavaScript dialogs a session answered otherwise than the agent environment does (it
    accepts a ``confirm``, and a ``prompt`` with the text the prompt offers): ``{"step", "type",
    "message", "answer"}`` for each, in step order. A task whose session cancelled a confirm (or
    typed into a prompt) is not replayed as it was done."""
    out = []
    for i, step in enumerate(trajectory.get("steps") or []):
        for d in (step.get("dialogs") or []) if isinstance(step, dict) else []:
            if not isinstance(d, dict):
                continue
            if (d.get("type") == "confirm" and d.get("answer") is not True) or (
                    d.get("type") == "prompt" and d.get("answer") != d.get("offered")):
                out.append({"step": step.get("step", i), "type": d.get("type"), "message": d.get("message"),
                            "answer": d.get("answer")})
    return out


def add_task(suite: str | os.PathLike, reference: str | os.PathLike, answer: str | None, *, category: str | None = None,
             instruction: str | None = None, task_id: str | None = None, match: str | None = None,
             archive: str | os.PathLike | None = None, replace: bool = False, has_session=None,
             requests: list[str] | None = None, session_sent=None, sent_before=None) -> dict:
    """Add (or with ``replace``, replace) one task in the suite directory ``suite``; returns the
    task object written, with ``replaced`` (whether a task of that id was there), ``names_archive``
    (whether the suite's manifest names its archive) and, for a replaced task, ``changes`` (short
    lines: :func:`reference_changes`, then :func:`field_changes`). Raises :class:`TaskError` (one
    line) and writes nothing on bad input.

    ``answer`` None keeps a replaced task's answer; a new task's is then the one its session logged
    (``record_answer``), and a session that logged none is refused. An option left None
    takes, for a new task, its default: ``match`` exact, ``category`` the
    manifest's only category else ``general``, ``instruction`` the session's. For a replaced task
    it keeps the old line's value instead (the instruction: the session's, else the old line's), as
    do the fields of the old line that ``tasks add`` does not write.

    ``has_session(archive_path, session_id)``, if given, says whether an archive holds a session: a
    reference whose session is not in the suite's archive (recorded into another one) is refused,
    since its task would replay on captures of other sessions and read as expired.

    ``requests`` (``"POST URL"`` each) become the task's ``requests`` checks (eval/request_checks.py:
    the agent must send them, answered as recorded); ``session_sent(archive_path, session_id)``, if
    given, lists the session's requests other than GET and HEAD (``"METHOD URL"``), and a request
    the session did not send is refused, naming those it did; without ``requests``, the returned
    ``unrequired`` lists them (the caller may say that no check requires them).
    ``sent_before(archive_path, session_id, t)``, if given, lists the session's requests other than
    GET and HEAD sent before the time ``t`` (seconds since the epoch): those sent before the person's
    first action (a click, a key, a choice; not a page opened) the page sent on its own (Transmission
    polls its one RPC URL by POST), and a check on one of them, which compares method and URL, would
    hold for an agent that did nothing: refused (and not offered in ``unrequired``)."""
    root = Path(suite)
    ref_path = Path(reference)
    trajectory = _read_reference(ref_path)
    if match is not None and match not in MATCHES:
        raise TaskError(f"unknown answer check {match!r} ({', '.join(MATCHES)})")
    if answer is not None and (not isinstance(answer, str) or not answer.strip()):
        raise TaskError("the answer must not be empty")
    tid = task_id or ref_path.stem

    manifest_path = root / "manifest.json"
    if root.exists() and not root.is_dir():
        raise TaskError("not a suite directory", root)
    new_suite = not manifest_path.exists()
    if new_suite and (root / "tasks.jsonl").exists():
        raise TaskError("has a tasks.jsonl but no manifest.json: not a suite this command can add to", root)
    if new_suite:
        manifest = {"format": SUITE_FORMAT, "version": SUITE_VERSION, "name": root.resolve().name,
                    "tasks": "tasks.jsonl"}
        if archive is not None:
            manifest["archive"] = os.path.relpath(Path(archive).resolve(), root.resolve())
        lines: list[str] = []
        tasks_path = root / "tasks.jsonl"
        existing: list = []
        categories = None
    else:
        if archive is not None:
            raise TaskError("the suite exists: its manifest names its archive (edit it to change it)", manifest_path)
        loaded = load_suite(root)
        manifest = loaded.manifest
        tasks_path = root / manifest.get("tasks", "tasks.jsonl")
        lines = tasks_path.read_text(encoding="utf-8").splitlines() if tasks_path.exists() else []
        existing = loaded.tasks
        categories = manifest.get("categories")
    named = manifest.get("archive")
    sid = trajectory.get("archive_session")
    if has_session is not None and isinstance(named, str) and isinstance(sid, str) and sid:
        path = Path(named) if Path(named).is_absolute() else Path(os.path.normpath(root / named))
        if path.is_file() and not has_session(path, sid):
            raise TaskError(f"its session {sid} is not in the suite's archive {os.path.normpath(path)}: record the "
                            f"session into that archive (record session --archive {os.path.normpath(path)})", ref_path)
    wanted = [_request_check(r) for r in requests or []]
    sent: list[str] = []
    if session_sent is not None and isinstance(named, str) and isinstance(sid, str) and sid:
        path = Path(named) if Path(named).is_absolute() else Path(os.path.normpath(root / named))
        if path.is_file():
            sent = session_sent(path, sid)
            for w in wanted:  # (as the check reads URLs: Gradio's join?, with its empty query, is join)
                if not among(sent, w["method"], w["url"]):
                    listed = ", ".join(sent[:6]) + (", ..." if len(sent) > 6 else "") if sent else "only GET and HEAD"
                    raise TaskError(f"its session sent no {w['method']} {w['url']} (it sent: {listed})", ref_path)
            first = first_action_time(trajectory)
            own = sent_before(path, sid, first) if sent_before is not None and first is not None else []
            for w in wanted:
                if among(own, w["method"], w["url"]):
                    raise TaskError(f"--require-request '{w['method']} {w['url']}': its session sent that request "
                                    "before its first action (the page sends it on its own), and a requests check "
                                    "compares method and URL only: it would hold for an agent that did nothing",
                                    ref_path)
            sent = [r for r in sent if r not in own]
    old = next((t for t in existing if t.id == tid), None)
    if old is not None and not replace:
        raise TaskError(f"the suite already has a task {tid!r} ({old.source}); give --replace to record it anew "
                        "or --id for another task")

    # what the command line did not give: the replaced task's value, else the default for a new task
    if instruction is None or not instruction.strip():
        instruction = trajectory.get("instruction")
    if isinstance(instruction, str) and instruction.strip():
        instruction = instruction.strip()
    elif old is not None:
        instruction = old.instruction
    else:
        raise TaskError("the task needs an instruction: give --instruction TEXT")
    if match is None and old is not None:
        match = _old_match(old)
        if match is None:
            raise TaskError(f"task {tid!r} has an answer check tasks add does not write "
                            f"({_describe_check(old.ground_truth.get('answer'))}); give --match "
                            f"({', '.join(MATCHES)})")
    match = match or "exact"
    if answer is None and old is None:  # (a new task: the answer its session logged, if it logged one)
        answer = recorded_answer(trajectory)
        if answer is None:
            raise TaskError("the session logged no answer (record_answer in its script): give --answer TEXT")
    if answer is None and old is not None:  # (--replace without --answer: the replaced task's answer)
        kind = _old_match(old)
        kept = (old.ground_truth.get("answer") or {}).get(kind) if kind else None
        if isinstance(kept, list) and len(kept) == 1:
            kept = kept[0]
        if not isinstance(kept, str):
            raise TaskError(f"task {tid!r}'s answer check is not one --answer can keep; give --answer TEXT")
        answer = kept
    if category is None:
        category = old.category if old is not None else None
    category = category or (categories[0] if categories and len(categories) == 1 else None) or DEFAULT_CATEGORY
    check = {"must_include": [answer]} if match == "must_include" else {match: answer}
    said = recorded_answer(trajectory)
    if said is not None and not evaluate_answer(check, said)["success"]:
        raise TaskError(f"the session answered {said!r}, which the {match} check of {answer!r} would fail", ref_path)
    if said is None:  # (a session recorded by hand, or a script that never called record_answer): the copied
        # reference ends with the author's answer, as record_answer would have logged it; without it the reference
        # agent ends the replay with 'done' and the task can never validate
        steps = list(trajectory.get("steps") or [])
        at = next((s["url"] for s in reversed(steps) if isinstance(s, dict) and isinstance(s.get("url"), str)),
                  trajectory.get("start_url"))
        trajectory = {**trajectory, "steps": steps + [{"action": "answer", "target": None,
                                                       "value": {"text": answer, "evidence": []},
                                                       "url": at, "step": len(steps)}]}
    if categories is not None and category not in categories:
        raise TaskError(f"category {category!r} is not among the manifest's categories ({', '.join(categories)}); "
                        "give --category", manifest_path)

    ref_name = f"references/{tid}.json"
    obj = {"id": tid, "category": category, "instruction": instruction, "start_url": trajectory["start_url"],
           "snapshot_time": session_time(trajectory), "ground_truth": {"answer": check, "reference_trajectory": ref_name}}
    if old is not None:  # the old line's fields that tasks add does not write stay as they were
        kept_gt = {k: v for k, v in old.ground_truth.items() if k not in obj["ground_truth"]}
        obj = {**old.raw, **obj, "ground_truth": {**kept_gt, **obj["ground_truth"]}}
    if wanted:
        obj["ground_truth"]["requests"] = wanted
    validate_task({**obj, "ground_truth": {**obj["ground_truth"], "reference_trajectory": trajectory}},
                  file=tasks_path, line=None)
    line = canonical_line(obj)
    if old is not None:
        at = int(old.source.rsplit(":", 1)[1]) - 1 if re.search(r":\d+$", old.source) else None
        if at is None or not (0 <= at < len(lines)):
            raise TaskError(f"cannot find the line of task {tid!r}", tasks_path)
        lines[at] = line
    else:
        lines.append(line)

    ref_target = root / ref_name
    try:
        root.mkdir(parents=True, exist_ok=True)
        (root / "references").mkdir(exist_ok=True)
    except OSError as exc:
        raise TaskError(f"cannot make the suite folder ({exc.strerror or exc})", root) from None
    previous = ref_target.read_bytes() if ref_target.is_file() else None
    written: list[Path] = []
    try:
        write_output(ref_target, json.dumps(trajectory, indent=2, ensure_ascii=False) + "\n")
        written.append(ref_target)
        write_output(tasks_path, "".join(x + "\n" for x in lines))
        written.append(tasks_path)
        if new_suite:
            write_output(manifest_path, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    except WebfreezeError as exc:
        # leave the suite as it was: the old reference back, or no new one
        if ref_target in written:
            if previous is not None:
                write_output(ref_target, previous)
            else:
                ref_target.unlink(missing_ok=True)
        if new_suite and tasks_path in written:
            tasks_path.unlink(missing_ok=True)
        raise TaskError(str(exc)) from None
    obj = dict(obj, replaced=old is not None, names_archive="archive" in manifest,  # (not part of the line written)
               unrequired=[] if wanted else sent, answer_added=said is None,
               dialogs_otherwise=dialogs_answered_otherwise(trajectory))
    if old is not None:
        obj["changes"] = ((reference_changes(old.reference, trajectory) if old.reference is not None else [])
                          + field_changes(old.raw, {k: v for k, v in obj.items()
                                                    if k not in ("replaced", "names_archive", "unrequired",
                                                                 "answer_added", "dialogs_otherwise")}))
    return obj
