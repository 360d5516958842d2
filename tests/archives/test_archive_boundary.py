"""Nothing but ``archives/`` knows the archive's tables (docs/architecture.md: "nothing but
`archives` opens archive files or knows their tables"): every other module reads through the typed API. This test
reads every Python module of the package and of ``benchmarks/`` and fails on SQL that names an
archive table, or on a reach into an open archive's SQLite connection."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE_TABLES = ("meta", "blobs", "sessions", "exchanges", "pages", "documents", "digest_aliases")
# SQL naming a table: FROM/JOIN/INTO/UPDATE/TABLE/INDEX ... ON followed by one of the archive's tables
SQL = re.compile(r"(?i)\b(?:from|join|into|update|table|on)\s+[\"`']?(" + "|".join(ARCHIVE_TABLES) + r")\b[\"`']?")
# ``arc.conn`` / ``archive.db``: the archive's own connection, used from outside
CONNECTION = re.compile(r"\b(?:arc|archive|src|dst|a|b|self\.archive)\.(?:conn|db)\b")
# Modules with SQLite files of their own whose tables share a name with one of the archive's.
OWN_DATABASES = {
    "llm/cassette.py": {"meta"},  # the LLM cassette's own file (docs/agents.md): its meta table
}
STAGES = ("recorder", "replayer", "simulator", "llm", "agents", "personas", "eval", "webfreeze", "benchmarks")


def _modules():
    for stage in STAGES:
        for path in sorted((ROOT / stage).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


def _sql_hits(text: str, allowed: set[str]) -> list[str]:
    hits = []
    for m in SQL.finditer(text):
        line = text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.end())]
        # only inside a string: SQL, not prose such as "pages from the archive" in a comment or docstring
        if m.group(1).lower() in allowed or not re.search(r"(?i)\b(select|insert|update|delete|create)\b", line):
            continue
        hits.append(line.strip())
    return hits


def test_no_module_outside_archives_writes_sql_against_the_archive_tables():
    found = {}
    for rel, text in _modules():
        hits = _sql_hits(text, OWN_DATABASES.get(rel, set()))
        hits += [line.strip() for line in text.splitlines() if CONNECTION.search(line)]
        if hits:
            found[rel] = hits
    assert not found, "SQL against the archive outside archives/ (use the typed API):\n" + "\n".join(
        f"{rel}: {line}" for rel, lines in found.items() for line in lines)


def test_the_check_can_fail():
    """The patterns catch the forms that were there before the typed API."""
    for line in ('rows = archive.conn.execute("SELECT id, url FROM exchanges WHERE kind=\'response\'")',
                 'q("SELECT count(*) FROM pages").fetchone()',
                 'conn.execute("INSERT INTO blobs(digest) VALUES (?)")',
                 "sql = 'UPDATE exchanges SET method=? WHERE id=?'"):
        assert _sql_hits(line, set()) or CONNECTION.search(line), line
    assert not _sql_hits('"""Pages from the archive, read in the order the crawl recorded them."""', set())
    assert not _sql_hits('conn.execute("SELECT value FROM meta")', {"meta"})
