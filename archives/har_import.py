"""HAR 1.2 import (``archive import file.har``): the HTTP Archive files browsers and Playwright write.

Read: Playwright's (``record_har_path``, content embedded, or ``attach``ed as files beside the
HAR) and Chromium DevTools' ("Save all as HAR with content"). Each entry whose response has
content becomes one exchange: the request (method, URL, headers, body from ``postData``) and the
response (status, reason, HTTP version, headers, body from ``content.text``, base64 when
``content.encoding`` says so). A response without a body by nature (a redirect, 204, 304, or an
empty one: ``content.size`` 0) is kept with an empty body. An entry without content (a body the
browser did not keep, a request that got no answer, an ``eval export-har`` entry for a replay's
miss: ``_webfreeze.level`` ``miss``) is not invented: it is listed in the import's
session (``har.without_content``: method, URL, status, why) and counted as skipped. A WebSocket
entry with ``_webSocketMessages`` (Chromium DevTools writes them; so does ``eval export-har``)
becomes the recorder's ``websocket/`` document of its conversation, which the replay serves.

A HAR holds bodies as the page received them, content coding undone: the stored response drops
``Content-Encoding`` and ``Content-Length`` (``extra.har_decoded``), so that the replay serves
what it stores. HTTP/2 pseudo-headers (``:status``, ...) are dropped. Each document a HAR page's main
frame loaded (its first one, in a HAR that does not mark documents) becomes a page record, that
document standing for its DOM (no screenshot).
"""

from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from .errors import BadInput
from .store import Archive, Exchange
from .warc_import import ImportStats

# HTML-ish first bytes of a HAR: a JSON object whose first key is "log" (after white space).
MAX_HAR_BYTES = 4 << 30  # (read whole: JSON has no streaming reader here)
_DROPPED = frozenset({"content-encoding", "content-length", "transfer-encoding"})
_NO_BODY = (204, 304)
WITHOUT_CONTENT_LISTED = 1000  # entries listed by URL in the session (the count is always whole)


def looks_like_har(head: bytes) -> bool:
    """Whether a file's first bytes are those of a HAR (JSON whose top object has ``"log"``)."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return text.startswith(b"{") and b'"log"' in head


def _text(value, what: str) -> str:
    if not isinstance(value, str):
        raise BadInput(f"{what} is not a string")
    return value


def _headers(items, what: str) -> list[tuple[str, str]]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise BadInput(f"{what} is not a list")
    out = []
    for h in items:
        if not isinstance(h, dict) or not isinstance(h.get("name"), str):
            raise BadInput(f"{what}: a header without a name")
        name = h["name"]
        if name.startswith(":"):
            continue  # HTTP/2's pseudo-headers: the status line and URL say them
        out.append((name, str(h.get("value", ""))))
    return out


def _body(content: dict, har_dir: Path, what: str) -> bytes | None:
    """The body a HAR ``content`` (or ``postData``) holds; None when it holds none."""
    if "_file" in content:  # Playwright's content="attach": the body in a file beside the HAR
        name = _text(content["_file"], f"{what}._file")
        path = (har_dir / name).resolve()
        if har_dir.resolve() not in path.parents:
            raise BadInput(f"{what}._file {name!r} is outside the HAR's folder")
        try:
            return path.read_bytes()
        except OSError:
            return None
    if "text" not in content or content["text"] is None:
        return None
    text = _text(content["text"], f"{what}.text")
    if content.get("encoding") == "base64":
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise BadInput(f"{what}.text is not valid base64") from None
    return text.encode("utf-8")


def _request_body(request: dict, har_dir: Path, what: str) -> bytes | None:
    post = request.get("postData")
    if not isinstance(post, dict):
        return None
    body = _body(post, har_dir, f"{what}.postData")
    if body is None and isinstance(post.get("params"), list):
        body = urlencode([(str(p.get("name", "")), str(p.get("value", ""))) for p in post["params"]
                          if isinstance(p, dict)]).encode("ascii")
    return body


def _socket(arc: Archive, session_id: str, entry: dict, url: str, name: str, what: str) -> None:
    """A WebSocket entry's ``_webSocketMessages`` (Chromium DevTools': ``type`` send or receive,
    ``time`` in seconds since the epoch, ``opcode`` 1 text or 2 binary with ``data`` in base64) as
    the recorder's ``websocket/`` document, which the replay serves (replayer/websocket.py). Control
    frames (other opcodes) are left out; how the socket ended is not in a HAR (left open)."""
    from .timeutil import parse_time

    try:
        opened = parse_time(_text(entry.get("startedDateTime"), f"{what}.startedDateTime")).timestamp()
    except ValueError as exc:
        raise BadInput(f"{what}: {exc}") from None
    messages = []
    for j, m in enumerate(entry["_webSocketMessages"]):
        if not isinstance(m, dict) or m.get("type") not in ("send", "receive"):
            raise BadInput(f"{what}._webSocketMessages[{j}]: not a message (type send or receive)")
        opcode, data = m.get("opcode", 1), _text(m.get("data", ""), f"{what}._webSocketMessages[{j}].data")
        if opcode not in (1, 2):
            continue
        if opcode == 2:
            try:
                content = base64.b64decode(data, validate=True).hex()
            except (binascii.Error, ValueError):
                raise BadInput(f"{what}._webSocketMessages[{j}].data is not valid base64") from None
        else:
            content = data
        when = m.get("time")
        messages.append({"from_client": m["type"] == "send", "type": "binary" if opcode == 2 else "text",
                         "content": content, "time": float(when) if isinstance(when, (int, float)) else opened})
    response = entry.get("response") if isinstance(entry.get("response"), dict) else {}
    protocol = next((v for k, v in _headers(response.get("headers"), f"{what}.response.headers")
                     if k.lower() == "sec-websocket-protocol"), None)
    arc.put_document(name, {"version": 1, "url": url, "opened": opened, "protocol": protocol,
                            "closed_by_client": None, "close_code": None, "messages": messages})


def read_har(path: Path) -> dict:
    """The parsed HAR at ``path`` (its ``log``), checked for the fields the import reads."""
    try:
        if path.stat().st_size > MAX_HAR_BYTES:
            raise BadInput(f"the HAR is larger than {MAX_HAR_BYTES >> 30} GiB")
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise BadInput("the HAR is not UTF-8 text") from None
    except ValueError as exc:
        raise BadInput(f"not valid JSON ({exc})") from None
    log = data.get("log") if isinstance(data, dict) else None
    if not isinstance(log, dict) or not isinstance(log.get("entries"), list):
        raise BadInput("not a HAR file (no log.entries)")
    return log


def import_har(arc: Archive, path: Path, session_id: str) -> tuple[ImportStats, int, dict]:
    """Store the exchanges of the HAR at ``path`` in ``arc`` under ``session_id``; returns the
    stats, the pages added and what the session records of the HAR (creator, entries without content)."""
    log = read_har(path)
    har_dir = path.parent
    stats = ImportStats()
    without: list[dict] = []
    documents: dict[str, list[tuple[str, str, bytes]]] = {}  # page id -> url, time, body of its documents
    main_frame: dict[str, object] = {}  # page id -> its main frame (Playwright's _frameref)
    for i, entry in enumerate(log["entries"]):
        what = f"entry {i}"
        if not isinstance(entry, dict) or not isinstance(entry.get("request"), dict) \
                or not isinstance(entry.get("response"), dict):
            raise BadInput(f"{what}: no request or response")
        request, response = entry["request"], entry["response"]
        url = _text(request.get("url"), f"{what}.request.url")
        method = _text(request.get("method", "GET"), f"{what}.request.method").upper() or "GET"
        scheme = urlsplit(url).scheme
        if scheme in ("ws", "wss") and isinstance(entry.get("_webSocketMessages"), list):
            _socket(arc, session_id, entry, url, f"websocket/{session_id}/har-{i}.json", what)
            stats.websockets += 1
            continue
        if scheme in ("ws", "wss"):  # (a socket's entry without its messages: eval export-har's second
            stats.skip("har: WebSocket entry without _webSocketMessages")  # record of one, say)
            continue
        if scheme not in ("http", "https"):
            stats.skip("har: not http(s)")
            continue
        when = _text(entry.get("startedDateTime"), f"{what}.startedDateTime")
        status = response.get("status")
        if not isinstance(status, int) or isinstance(status, bool):
            raise BadInput(f"{what}.response.status is not a number")
        content = response.get("content") if isinstance(response.get("content"), dict) else {}
        body = _body(content, har_dir, f"{what}.response.content")
        why = None
        ours = entry.get("_webfreeze") if isinstance(entry.get("_webfreeze"), dict) else {}
        if ours.get("level") == "miss":  # (eval export-har's entry for a replay's miss: no answer of the site's)
            why = "a replay's miss"
        elif status <= 0:
            why = "no response"
        elif body is None:
            if 300 <= status < 400 or status in _NO_BODY or content.get("size") == 0:
                body = b""
            else:
                why = "no content"
        if why is not None:
            stats.skip(f"har: {why}")
            if len(without) < WITHOUT_CONTENT_LISTED:
                without.append({"method": method, "url": url, "status": status, "why": why})
            continue
        headers = _headers(response.get("headers"), f"{what}.response.headers")
        decoded = any(k.lower() == "content-encoding" for k, _ in headers)
        headers = [(k, v) for k, v in headers if k.lower() not in _DROPPED]
        if body or status not in _NO_BODY and not 100 <= status < 200:
            headers.append(("Content-Length", str(len(body))))
        extra: dict[str, object] = {"har_decoded": True} if decoded else {}
        version = response.get("httpVersion") or "HTTP/1.1"
        if not str(version).upper().startswith("HTTP/"):  # (Chromium writes "h2", "http/2.0")
            extra["har_http_version"] = str(version)
            version = "HTTP/1.1"
        ex = Exchange(url=url, captured_at=when, status=status, resp_headers=headers, payload=body, method=method,
                      req_headers=_headers(request.get("headers"), f"{what}.request.headers"),
                      req_body=_request_body(request, har_dir, f"{what}.request") or None,
                      reason=str(response.get("statusText") or ""), http_version=str(version).upper(),
                      extra=extra, session_id=session_id)
        try:
            arc.add_exchange(ex)
        except ValueError as exc:  # a time that is no time, say
            raise BadInput(f"{what}: {exc}") from None
        stats.exchanges += 1
        stats.requests_paired += 1
        page = entry.get("pageref")
        mime = str(content.get("mimeType") or "")
        if isinstance(page, str) and mime.startswith("text/html") and 200 <= status < 300:
            kind, frame = entry.get("_resourceType"), entry.get("_frameref")
            if page not in main_frame and kind in (None, "document"):
                main_frame[page] = frame
            # each navigation of a page's main frame (Playwright and Chromium say which entries are
            # documents, and of which frame); without those marks, a page's first document
            if kind == "document" and frame == main_frame.get(page) or kind is None and page not in documents:
                documents.setdefault(page, []).append((url, when, body))
    ids = [p.get("id") for p in log.get("pages") or [] if isinstance(p, dict)]
    titles = {p.get("id"): p for p in log.get("pages") or [] if isinstance(p, dict)}
    pages, seen = 0, set()
    for page_id in ids:
        for url, when, html in documents.get(page_id, []):
            if url in seen:
                continue
            seen.add(url)
            p = titles[page_id]
            title = p.get("title") if isinstance(p.get("title"), str) and len(documents[page_id]) == 1 else ""
            # the document as received stands for the page's DOM (a HAR keeps no screenshot)
            arc.add_page(session_id=session_id, url=url, captured_at=when, title="" if title == url else title or "",
                         dom=html or None, extra={"screenshot": "none", "har_page": str(page_id)})
            pages += 1
    creator = log.get("creator") if isinstance(log.get("creator"), dict) else {}
    info = {"creator": {k: creator.get(k) for k in ("name", "version") if k in creator},
            "entries": len(log["entries"]), "without_content": without}
    return stats, pages, info


__all__ = ["import_har", "looks_like_har", "read_har"]
