"""What the commands' guard tests (tests/*/test_*_guards.py) break: a damaged archive, and a
digest to show a file was left as it was."""

from __future__ import annotations

import hashlib


def archive_with_a_corrupt_blob(target):
    """An archive of one page whose stored blob has one bit flipped."""
    from webfreeze.archives import Archive
    from webfreeze.archives.store import Exchange

    body = ("<html><body>" + "lorem ipsum dolor sit amet " * 50 + "</body></html>").encode()
    with Archive.create(target) as arc:
        sid = arc.new_session("crawl")
        arc.add_exchange(Exchange(url="http://example.com/", captured_at="2024-01-01T00:00:00Z", status=200,
                                  resp_headers=[("Content-Type", "text/html")], payload=body, session_id=sid))
    with Archive.open(target) as arc:
        stored = arc.conn.execute("SELECT data FROM blobs").fetchone()[0]
    raw = bytearray(target.read_bytes())
    raw[raw.find(stored) + len(stored) // 2] ^= 0x01
    target.write_bytes(bytes(raw))
    return target


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
