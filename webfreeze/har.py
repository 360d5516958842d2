"""What ``eval export-har`` adds to a run's HAR files from the archive: each answered request's
headers, bodies and capture time, as the replay served them; each WebSocket's recorded conversation
(the recording the replay's rule picks for it: replayer/websocket.py) in the ``_webSocketMessages``
field Chromium DevTools writes, which ``archive import`` reads back. What the episode was sent of
that conversation is not kept (a conversation that parted, pushes that waited): the recording is.

The episode is answered again in process (:class:`~webfreeze.replayer.replay.Replay`, no browser)
with the run's settings: its seed, the task's frozen clock, the suite's site models and replay
rules, the agent environment's default rules, and the determinism runtime injected into pages as the
episode's browser got it (its clock and timers virtual: a page replayed from the HAR asks for the
same URLs as in the episode). The answers are asked in the trajectory's order, so that ordered
repeats pick the same captures.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from webfreeze.archives.content import DecodeError, content_encoding, decode_content
from webfreeze.archives.timeutil import normalize_time, parse_time
from webfreeze.archives.urlkey import surt_key
from webfreeze.eval.errors import ReportError
from webfreeze.eval.har import export_har
from webfreeze.replayer.matching import AGENT_RULES
from webfreeze.replayer.replay import Replay, ReplayError
from webfreeze.replayer.websocket import SocketIndex
from webfreeze.simulator.site_models import SimulatedSiteModel

_OURS = ("x-webfreeze-",)


def archive_of(run: Path, manifest: dict, archive=None) -> Path:
    """The run's archive: ``archive`` if given, else the one its manifest names (relative to the run)."""
    if archive is not None:
        path = Path(archive)
    else:
        named = (manifest.get("circumstances") or {}).get("archive_path")
        if not named:
            raise ReportError(f"{run}: the manifest does not say where the archive is; pass --archive")
        path = (run / named) if not Path(named).is_absolute() else Path(named)
    if not path.is_file():
        raise ReportError(f"{path}: no such archive (pass --archive)")
    return path


class ArchiveContent:
    """``content`` for :func:`webfreeze.eval.har.export_har`: per trajectory, a function giving
    each answer's headers, bodies and capture time."""

    def __init__(self, archive: Path, manifest: dict):
        self.archive = archive
        self.rules = ((manifest.get("env") or {}).get("replay_rules")) or None
        self.sockets = 0  # WebSocket entries given their recorded conversation

    def __call__(self, trajectory: dict):
        env = trajectory.get("env") or {}
        browser = env.get("backend") == "browser"
        replay = Replay(self.archive, inject=browser, timers=browser,
                        seed=int(env.get("seed") or 0), rules=self.rules, rule_defaults=AGENT_RULES)
        try:
            replay.open()
        except ReplayError as exc:
            raise ReportError(str(exc)) from None
        for host, kind in sorted((env.get("site_models") or {}).items()):
            replay.register(SimulatedSiteModel(kind, host))
        replay.reset(int(env.get("seed") or 0), when=env.get("snapshot_time"))
        arc = replay.archive
        used: set[int] = set()  # the captures of requests with a body taken by this episode's entries
        # WebSockets: the recording that answered each (the rule's pick, replayer/websocket.py), from
        # the page's document (its capture session and time) and the count of sockets to a URL since
        sockets: dict[str, Any] = {"index": None, "doc": None, "opened": {}}

        def socket_content(answer: dict, url: str) -> dict | None:
            if answer.get("why"):  # (a second record of a socket served: said set aside, or ahead)
                return None
            if sockets["index"] is None:
                sockets["index"] = SocketIndex.from_archive(arc, replay.rules)
            k = sockets["opened"].get(url, 0)
            sockets["opened"][url] = k + 1
            doc = sockets["doc"]
            pick = sockets["index"].pick(url, k, session=doc[0] if doc else None, after=doc[1] if doc else None,
                                        when=replay.when)
            if pick.recording is None:
                return None
            self.sockets += 1
            return {"websocket_messages": [_devtools_message(m) for m in pick.recording.messages],
                    "captured_at": _har_time(normalize_time(datetime.fromtimestamp(pick.recording.opened, timezone.utc)))}

        def content(answer: dict) -> dict | None:
            method, url = str(answer.get("method") or "GET"), str(answer.get("url") or "")
            if answer.get("level") != "miss" and url.startswith(("ws:", "wss:")):
                return socket_content(answer, url)
            if answer.get("main") and answer.get("kind") == "document":  # (a new document: as the replay,
                sockets["doc"], sockets["opened"] = None, {}              # whatever answered it)
            if answer.get("level") == "miss" or not url.startswith(("http:", "https:")):
                return None
            captured = None
            if method not in ("GET", "HEAD"):
                # the exchange that answered (the trajectory's ``capture``), else a guess from its
                # method, URL and status (a trajectory written before it was kept)
                captured = _answered_by(arc, answer, method, url)
                if captured is None:
                    captured = _sent(arc, method, url, answer.get("status"), env.get("snapshot_time"), used)
                if captured is not None:
                    used.add(captured.id)
            req_body = captured.request.payload() if captured is not None else b""
            # asked as the episode's browser asked it: a document, or not (an XHR's HTML answer gets
            # no runtime, as the episode's did not)
            headers = [("Host", urlsplit(url).netloc),
                       ("Sec-Fetch-Dest", "document" if answer.get("kind") == "document" else "empty")]
            if captured is not None and captured.request.captured:
                headers += [(k, v) for k, v in captured.request.headers if k.lower() == "content-type"]
            head, body = replay.answer(method, url, headers, req_body,
                                       capture=captured.id if captured is not None else None)
            if body is None:
                return None
            lines = head.decode("latin-1").split("\r\n")
            status_line = lines[0].split(" ", 2)
            got = [tuple(line.split(": ", 1)) for line in lines[1:] if ": " in line]
            if any(k.lower() == "x-webfreeze-miss" for k, _ in got):
                return None  # (the episode's answer was not a miss: its request is not found again; left unknown)
            capture = next((v for k, v in got if k.lower() == "x-webfreeze-capture"), None)
            ex = arc.exchange(int(capture)) if capture and capture.isdigit() else None
            if answer.get("main") and answer.get("kind") == "document" and ex is not None:
                sockets["doc"] = (ex.session_id, parse_time(ex.captured_at).timestamp())
            response_headers = [(k, v) for k, v in got if not k.lower().startswith(_OURS)]
            coding = content_encoding(response_headers)
            if coding:  # a HAR's content is the body decoded (HAR 1.2); its headers say so
                try:
                    body = decode_content(body, coding)
                except DecodeError:
                    pass
                else:
                    response_headers = [(k, v) for k, v in response_headers
                                        if k.lower() not in ("content-encoding", "content-length")]
                    response_headers.append(("Content-Length", str(len(body))))
            return {
                "request_headers": list(ex.request.headers) if ex is not None and ex.request.captured else headers,
                "request_body": req_body or None,
                "response_headers": response_headers,
                "body": body, "reason": status_line[2] if len(status_line) > 2 else "",
                "captured_at": _har_time(ex.captured_at) if ex is not None else None,
            }

        content.close = replay.close  # type: ignore[attr-defined]  # (called once the trajectory's HAR is built)
        self._open = getattr(self, "_open", [])
        self._open.append(replay)
        return content

    def close(self) -> None:
        for replay in getattr(self, "_open", []):
            replay.close()
        self._open = []


def _answered_by(arc, answer: dict, method: str, url: str):
    """The exchange the trajectory says answered (``capture``), when the archive holds it with the
    answer's method and URL (the capture served instead, for a fuzzy answer); else None (another
    archive given with ``--archive``, one merged since: its ids are not the run's)."""
    capture = answer.get("capture")
    if not isinstance(capture, int) or isinstance(capture, bool):
        return None
    try:
        ex = arc.exchange(capture)
    except Exception:  # (no such exchange)
        return None
    wanted = answer.get("capture_url") or url
    return ex if ex is not None and ex.method == method.upper() and ex.url == wanted else None


def _sent(arc, method: str, url: str, status, when, used: set[int]):
    """The capture of a request with a body (a form's POST) that an episode's answer stands for: the
    trajectory keeps its method, URL and status, not the body the agent sent. Among the captures of
    that method and URL (with the answer's status when some have it), the first not taken yet at or
    after the task's time (its own session's), else the first not taken yet, else the first."""
    found = [ex for ex in arc.lookup_surt(surt_key(url)) if ex.method == method.upper() and ex.url == url]
    if isinstance(status, int) and any(ex.status == status for ex in found):
        found = [ex for ex in found if ex.status == status]
    if not found:
        return None
    t = normalize_time(when) if when else ""
    fresh = [ex for ex in found if ex.id not in used]
    for pool in ([ex for ex in fresh if ex.captured_at >= t], fresh, found):
        if pool:
            return pool[0]
    return None


def _devtools_message(m) -> dict:
    """A recorded WebSocket message as Chromium DevTools writes one in a HAR's
    ``_webSocketMessages``: ``type`` send (the page's) or receive, ``time`` (seconds since the
    epoch), ``opcode`` 1 (text) or 2 (binary, ``data`` in base64)."""
    binary = isinstance(m.data, bytes)
    return {"type": "send" if m.from_client else "receive", "time": m.time if m.time is not None else 0,
            "opcode": 2 if binary else 1,
            "data": base64.b64encode(m.data).decode("ascii") if binary else m.data}


def _har_time(stored: str) -> str:
    """An archive time (``YYYY-MM-DDTHH:MM:SS.ffffffZ``) as HAR's, to the millisecond."""
    head, _, frac = stored.rstrip("Z").partition(".")
    return f"{head}.{(frac + '000')[:3]}Z"


def export_run_har(run_dir, out=None, *, archive=None, stats: dict | None = None) -> list[Path]:
    """``eval export-har``: the run's HAR files with the archive's headers, bodies and capture times,
    and each WebSocket's recorded conversation (``stats["websockets"]``: how many were given one)."""
    run = Path(run_dir)
    try:
        manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return export_har(run, out)  # (export_har says what is wrong with the folder)
    filler = ArchiveContent(archive_of(run, manifest if isinstance(manifest, dict) else {}, archive),
                            manifest if isinstance(manifest, dict) else {})
    try:
        return export_har(run, out, content=filler)
    finally:
        filler.close()
        if stats is not None:
            stats["websockets"] = filler.sockets
