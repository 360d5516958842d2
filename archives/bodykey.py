"""Canonical keys for request bodies, so equivalent POSTs are found by one indexed lookup.

The key does not depend on incidental encoding choices: form fields and multipart parts are
compared as sorted fields (the multipart boundary is ignored; a multipart body with no part, an
empty ``FormData``, is the form with no field), JSON as sorted flattened leaves, anything else by
digest. A request without a body has the empty key.
"""

from __future__ import annotations

import hashlib
import json
from email.parser import BytesParser
from email.policy import HTTP
from urllib.parse import parse_qsl, urlencode

MAX_INLINE_KEY = 512


def _short(kind: str, text: str) -> str:
    """Keep short keys readable; hash long ones so the index stays small."""
    if len(text) <= MAX_INLINE_KEY:
        return f"{kind}:{text}"
    return f"{kind}#sha256:{hashlib.sha256(text.encode('utf-8')).hexdigest()}"


def _flatten(value, prefix: str, out: list[tuple[str, str]]) -> None:
    if isinstance(value, dict):
        for k in value:
            _flatten(value[k], f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _flatten(item, f"{prefix}[{i}]", out)
    else:
        out.append((prefix, json.dumps(value, sort_keys=True)))


def flatten_json(value) -> list[tuple[str, str]]:
    """Flatten a JSON value to sorted ``(path, json-leaf)`` pairs."""
    out: list[tuple[str, str]] = []
    _flatten(value, "", out)
    return sorted(out)


def _multipart_fields(content_type: str, body: bytes) -> list[tuple[str, str]] | None:
    msg = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
    )
    if not msg.is_multipart():
        # no part at all (an empty FormData: the closing delimiter alone, "--BOUNDARY--"), which
        # the parser does not read as multipart: the form with no field, whatever its boundary
        boundary = msg.get_param("boundary")
        if isinstance(boundary, str) and boundary and body.strip() == b"--" + boundary.encode("latin-1") + b"--":
            return []
        return None
    fields = []
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition") or ""
        payload = part.get_payload(decode=True) or b""
        filename = part.get_filename()
        if filename is not None:
            value = f"file:{filename}:sha256:{hashlib.sha256(payload).hexdigest()}"
        else:
            value = payload.decode("utf-8", "replace")
        fields.append((name, value))
    return sorted(fields)


def legacy_body_keys(content_type: str | None, body: bytes | None) -> set[str]:
    """Keys earlier versions gave ``body`` where :func:`body_key` now gives another: an empty
    multipart body was keyed by its digest (its random boundary made each one unique). An archive
    written then holds them; ``archive verify`` accepts them."""
    if body and body_key(content_type, body) == "form:":
        return {f"sha256:{hashlib.sha256(body).hexdigest()}"}
    return set()


def body_key(content_type: str | None, body: bytes | None) -> str:
    """The canonical key of a request body given its Content-Type header."""
    if not body:
        return ""
    mime = (content_type or "").split(";")[0].strip().lower()
    try:
        if mime == "application/x-www-form-urlencoded":
            fields = sorted(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
            return _short("form", urlencode(fields))
        if mime == "multipart/form-data":
            fields = _multipart_fields(content_type or "", body)
            if fields is not None:
                return _short("form", urlencode(fields))
        if mime == "application/json" or mime.endswith("+json"):
            leaves = flatten_json(json.loads(body.decode("utf-8")))
            return _short("json", urlencode(leaves))
    except (UnicodeDecodeError, ValueError):
        pass  # not what it claims to be: fall back to the digest
    return f"sha256:{hashlib.sha256(body).hexdigest()}"
