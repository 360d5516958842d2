"""Searching everything an archive holds for a secret: what redaction tests (tests/bundles/test_redact.py,
the test bed's) check is gone."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

from webfreeze.archives import Archive


def everything(archive: Path) -> list[bytes]:
    """Every decoded byte string an archive holds: blobs (and payloads with their content coding
    undone), URLs, headers, pages, documents, metadata, sessions."""
    out: list[bytes] = []
    with Archive.open(archive) as arc:
        for (digest,) in arc.conn.execute("SELECT digest FROM blobs"):
            out.append(arc.get_blob(digest))
        for ex in arc.exchanges():
            out += [ex.url.encode(), json.dumps(ex.headers).encode(), ex.body(), ex.body_key.encode()]
            if ex.request.captured:
                out += [json.dumps(ex.request.headers).encode(), ex.request.body()]
        for page in arc.pages():
            out += [page.url.encode(), page.title.encode(), json.dumps(page.extra).encode()]
        for name in arc.document_names():
            out.append(json.dumps(arc.get_document(name)).encode())
        out.append(json.dumps(arc.meta()).encode())
        for row in arc.conn.execute("SELECT * FROM sessions"):
            out.append(json.dumps(dict(row)).encode())
    return out


def _forms(secret: str) -> list[bytes]:
    return [v.encode() for v in {secret, urllib.parse.quote_plus(secret), urllib.parse.quote(secret, safe="")}]


def holds(chunks, secret: str) -> bool:
    """Whether any chunk holds ``secret`` as it is, or URL-encoded (as a form or a query sends it)."""
    return any(f in c for c in chunks for f in _forms(secret))
