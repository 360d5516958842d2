"""HAR 1.2 export of a run: per episode, the requests the replay answered and how it matched them.

Network-based evaluators (WebArena-Verified's, for one) read an episode's traffic as a HAR file.
Ours comes from what the trajectory records, not from a new replay: each step's ``replay.answers``
(docs/trajectories.md, "Replay provenance") lists every request the step caused with its method,
URL, status, the body's media type and size, and how the replay answered it (exact, canonical,
fuzzy with its score and the capture served instead, a site model, a miss). That provenance goes
into each entry's custom ``_webfreeze`` field (HAR allows fields that start with an underscore).

What a trajectory does not keep is left as HAR says unknown values are: no header lists beyond
the response's ``Content-Type``, sizes of headers ``-1``, zero timings (a replay's timings say
nothing about the site), every entry at the episode's frozen clock (the task's ``snapshot_time``,
else the Unix epoch). ``eval export-har`` fills that in from the archive (``content``): request
and response headers and bodies (text, or base64) as the replay served them, and each exchange's
capture time, so that Playwright's ``route_from_har`` replays the episode's pages. The file's bytes
depend only on the trajectory, the archive and the run's webfreeze version, so exporting twice
gives equal files.
"""

from __future__ import annotations

import base64
import http
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from webfreeze.common.files import check_output_file, write_atomically

from .errors import ReportError

HAR_VERSION = "1.2"
EPOCH = "1970-01-01T00:00:00.000Z"
# The provenance an entry's ``_webfreeze`` field carries, in this order.
PROVENANCE_KEYS = ("step", "kind", "main", "level", "score", "capture_url")


def _started(snapshot_time) -> str:
    """The episode's frozen clock as HAR's ISO 8601 with milliseconds (UTC)."""
    if not isinstance(snapshot_time, str) or not snapshot_time:
        return EPOCH
    try:
        when = datetime.fromisoformat(snapshot_time)
    except ValueError:
        return EPOCH
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _status_text(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""


def _content_of(body: bytes, mime: str | None) -> dict:
    """HAR's ``content`` of a body: text when it is UTF-8 text, else base64."""
    textual = (mime or "").split(";")[0].strip().lower()
    if textual.startswith("text/") or textual.endswith(("json", "javascript", "xml", "+json", "+xml")) \
            or textual in ("application/x-www-form-urlencoded",):
        try:
            return {"size": len(body), "mimeType": mime or "x-unknown", "text": body.decode("utf-8")}
        except UnicodeDecodeError:
            pass
    return {"size": len(body), "mimeType": mime or "x-unknown", "text": base64.b64encode(body).decode("ascii"),
            "encoding": "base64"}


def _with_content(entry: dict, got: dict) -> None:
    """Fill ``entry`` with what the archive holds of its exchange (``got``: request and response
    headers and bodies as the replay served them, the capture time; for a WebSocket, its recorded
    conversation in Chromium DevTools' ``_webSocketMessages``)."""
    if "websocket_messages" in got:
        entry["_resourceType"] = "websocket"
        entry["_webSocketMessages"] = got["websocket_messages"]
        if got.get("captured_at"):
            entry["startedDateTime"] = got["captured_at"]
        return
    request, response = entry["request"], entry["response"]
    request["headers"] = [{"name": k, "value": v} for k, v in got.get("request_headers") or []]
    body = got.get("request_body")
    if body:
        ctype = next((v for k, v in got.get("request_headers") or [] if k.lower() == "content-type"), "")
        post = _content_of(body, ctype or "application/octet-stream")
        request["postData"] = {"mimeType": post["mimeType"], "text": post["text"],
                               **({"_encoding": "base64"} if post.get("encoding") else {})}
        request["bodySize"] = len(body)
    headers = got.get("response_headers") or []
    response["headers"] = [{"name": k, "value": v} for k, v in headers]
    if got.get("reason") is not None:
        response["statusText"] = got["reason"] or response["statusText"]
    mime = next((v for k, v in headers if k.lower() == "content-type"), None)
    payload = got.get("body") or b""
    response["content"] = _content_of(payload, mime)
    response["bodySize"] = len(payload)
    location = next((v for k, v in headers if k.lower() == "location"), None)
    if location and 300 <= response["status"] < 400:
        response["redirectURL"] = location
    if got.get("captured_at"):
        entry["startedDateTime"] = got["captured_at"]


def _entry(answer: dict, step, pageref: str, started: str) -> dict:
    method = str(answer.get("method") or "GET")
    url = str(answer.get("url") or "")
    status = int(answer.get("status") or 0)
    mime = answer.get("mime")
    size = answer.get("size")
    headers = [{"name": "Content-Type", "value": mime}] if mime else []
    provenance = {"step": step, "kind": answer.get("kind"), "main": bool(answer.get("main")),
                  "level": answer.get("level")}
    for key in ("score", "capture_url"):
        if answer.get(key) is not None:
            provenance[key] = answer[key]
    return {
        "pageref": pageref,
        "startedDateTime": started,
        "time": 0,
        "request": {
            "method": method, "url": url, "httpVersion": "HTTP/1.1", "cookies": [], "headers": [],
            "queryString": [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)],
            "headersSize": -1, "bodySize": 0 if method in ("GET", "HEAD") else -1,
        },
        "response": {
            "status": status, "statusText": _status_text(status), "httpVersion": "HTTP/1.1", "cookies": [],
            "headers": headers,
            "content": {"size": size if isinstance(size, int) else 0, "mimeType": mime or "x-unknown"},
            "redirectURL": "", "headersSize": -1, "bodySize": size if isinstance(size, int) else -1,
        },
        "cache": {},
        "timings": {"send": 0, "wait": 0, "receive": 0},
        "_webfreeze": provenance,
    }


def trajectory_har(trajectory: dict, *, creator_version: str | None = None, content=None) -> dict:
    """The HAR 1.2 document of one episode: a page for the start (``start``) and for each step that
    caused requests (``step-N``), and an entry per answered request, in the trajectory's order
    (the start, then step by step; within a step the main document's hops first). ``content``, if
    given, is called with each answer in that order and returns what the archive holds of it
    (``request_headers``, ``request_body``, ``response_headers``, ``body``, ``reason``,
    ``captured_at``; or None): the entry then carries it, so that the HAR replays the pages. Raises
    :class:`ReportError` for a trajectory written before steps recorded their answers."""
    task_id = trajectory.get("task_id")
    replay = trajectory.get("replay")
    steps = trajectory.get("steps") or []
    parts = []
    if isinstance(replay, dict) and isinstance(replay.get("start"), dict):
        parts.append((None, "start", "", replay["start"]))
    for s in steps:
        if isinstance(s, dict) and isinstance(s.get("replay"), dict):
            parts.append((s.get("step"), f"step-{s.get('step')}", s.get("url_after") or "", s["replay"]))
    if not parts or any("answers" not in prov for *_, prov in parts):
        raise ReportError(f"trajectory {task_id}: written before steps recorded the replay's answers "
                          "(no replay.answers); run the task again to export its HAR")
    started = _started((trajectory.get("env") or {}).get("snapshot_time"))
    pages, entries = [], []
    for step, page_id, url, prov in parts:
        answers = [a for a in prov.get("answers") or [] if isinstance(a, dict)]
        if not answers:
            continue
        main = next((a for a in answers if a.get("main")), None)
        title = url or (main or {}).get("url") or ""
        pages.append({"startedDateTime": started, "id": page_id, "title": title,
                      "pageTimings": {"onContentLoad": -1, "onLoad": -1},
                      "_webfreeze": {"step": step, "document": prov.get("document")}})
        hops = [a for a in answers if a.get("main")]
        for a in answers:
            entry = _entry(a, step, page_id, started)
            if a.get("main") and 300 <= int(a.get("status") or 0) < 400:
                # a redirect of the main document: where it led is the next hop the page loaded
                later = hops[hops.index(a) + 1:] if a in hops else []
                entry["response"]["redirectURL"] = str(later[0].get("url") or "") if later else ""
            got = content(a) if content is not None else None
            if got:
                _with_content(entry, got)
            entries.append(entry)
    return {"log": {
        "version": HAR_VERSION,
        "creator": {"name": "webfreeze", "version": creator_version or "unknown"},
        "pages": pages,
        "entries": entries,
        "comment": f"task {task_id}: requests the replay answered, with their match provenance in _webfreeze",
        "_webfreeze": {"task_id": task_id, "archive_digest": (trajectory.get("env") or {}).get("archive_digest"),
                       "backend": (trajectory.get("env") or {}).get("backend"),
                       "replay": {k: v for k, v in (replay or {}).items() if k != "start"}},
    }}


def har_text(har: dict) -> str:
    """A HAR document's bytes as we write them: keys in the order built, two-space indents, a
    final newline (deterministic for equal inputs)."""
    return json.dumps(har, indent=2, ensure_ascii=False) + "\n"


def _read(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ReportError(f"{path}: {what} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ReportError(f"{path}: {what} is not a JSON object")
    return data


def export_har(run_dir: str | os.PathLike, out: str | os.PathLike | None = None, *, content=None) -> list[Path]:
    """Write ``<task_id>.har`` per trajectory of the run folder ``run_dir`` into ``out`` (default
    ``RUN_DIR/har``); returns the paths written, in task-id order. Every trajectory is read and
    converted before the first file is written: a bad one (unreadable, or without recorded
    answers) raises :class:`ReportError` and writes nothing. ``content`` (a callable taking a
    trajectory, returning :func:`trajectory_har`'s ``content`` for it) fills the entries with the
    archive's headers, bodies and capture times."""
    run = Path(run_dir)
    if not run.is_dir():
        raise ReportError(f"{run}: no such run directory")
    manifest_path = run / "manifest.json"
    if not manifest_path.is_file():
        raise ReportError(f"{run}: not a run directory (no manifest.json)")
    manifest = _read(manifest_path, "the run manifest")
    files = sorted((run / "trajectories").glob("*.json")) if (run / "trajectories").is_dir() else []
    if not files:
        raise ReportError(f"{run}: the run has no trajectories to export")
    version = (manifest.get("versions") or {}).get("webfreeze")
    hars = []
    for path in files:
        trajectory = _read(path, "the trajectory")
        task_id = trajectory.get("task_id")
        if not isinstance(task_id, str) or not task_id or "/" in task_id or task_id.startswith("."):
            raise ReportError(f"{path}: the trajectory has no usable task_id")
        filler = content(trajectory) if content is not None else None
        hars.append((task_id, har_text(trajectory_har(trajectory, creator_version=version, content=filler))))
    target = Path(out) if out is not None else run / "har"
    if target.exists() and not target.is_dir():
        raise ReportError(f"{target}: exists and is not a directory")
    if not target.exists() and not target.parent.is_dir():
        raise ReportError(f"{target.parent}: no such directory")
    written = [target / f"{task_id}.har" for task_id, _ in hars]
    if target.is_dir():
        for path in written:
            check_output_file(path, what="HAR")
    target.mkdir(exist_ok=True)
    for path, (_, text) in zip(written, hars):
        write_atomically(path, text)
    return written
