"""User histories in the Persona2Web shape: the entry format, the loader and the digest.

A history is a list of entries, one JSON object per line of a ``history.jsonl`` file, in time order::

    {"id": "p01-00001", "timestamp": "2023-03-16 08:12:40", "type": "web visit",
     "object": "Acme Black Running Shoe, $84.20", "website": "shop.test"}

``type`` is one of :data:`TYPES`; ``status`` (``cancelled`` or ``modified``) is optional, and so is
``id`` (entries without one are numbered ``h00001``... in file order). The loader also reads the
Persona2Web authors' memory-bank JSON (``{"memory_bank": [entry, ...]}``). Every problem is one
:class:`HistoryError` whose text names the file and the line (or, in a memory bank, the entry).
The format is documented in docs/personas.md ("History format").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from webfreeze.common.canonical import canonical_json
from webfreeze.common.errors import WebfreezeError

TYPES = ("web search", "web visit", "purchase", "booking", "review & rating")
STATUSES = ("cancelled", "modified")
FIELDS = ("id", "timestamp", "type", "object", "website", "status")  # the written order
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}$")


class HistoryError(WebfreezeError):
    """A history file that cannot be read: one line, ``FILE:LINE: message`` (or ``FILE: message``)."""

    def __init__(self, message: str, file: str | os.PathLike = "", line: int | str | None = None):
        self.message, self.file, self.line = message, str(file), line
        where = f"{self.file}:{line}" if line is not None else self.file
        super().__init__(f"{where}: {message}" if where else message)


def validate_entry(obj: Any, *, file: str | os.PathLike = "", line: int | str | None = None) -> dict:
    """The entry ``obj`` checked and normalised (known fields only, in the written order; a
    ``T`` between date and time becomes a space; an empty or null ``status`` is dropped).

    Raises :class:`HistoryError` naming ``file`` and ``line`` for anything else."""
    def bad(message: str) -> HistoryError:
        return HistoryError(message, file, line)

    if not isinstance(obj, dict):
        raise bad(f"an entry must be a JSON object, not {type(obj).__name__}")
    for name in ("timestamp", "type", "object", "website"):
        if name not in obj:
            raise bad(f"entry has no {name!r}")
        if not isinstance(obj[name], str):
            raise bad(f"{name!r} must be a string")
    ts = obj["timestamp"].strip()
    if not _TIMESTAMP.match(ts):
        raise bad(f"timestamp {obj['timestamp']!r} is not 'YYYY-MM-DD HH:MM:SS'")
    ts = ts.replace("T", " ")
    try:
        datetime.strptime(ts, TIMESTAMP_FORMAT)
    except ValueError:
        raise bad(f"timestamp {obj['timestamp']!r} is not a real date and time") from None
    if obj["type"] not in TYPES:
        raise bad(f"type {obj['type']!r} is not one of {', '.join(TYPES)}")
    if not obj["object"].strip():
        raise bad("'object' is empty")
    entry = {"timestamp": ts, "type": obj["type"], "object": obj["object"], "website": obj["website"]}
    if "id" in obj and obj["id"] is not None:
        if not isinstance(obj["id"], str) or not obj["id"]:
            raise bad("'id' must be a non-empty string")
        entry["id"] = obj["id"]
    status = obj.get("status")
    if status not in (None, ""):
        if status not in STATUSES:
            raise bad(f"status {status!r} is not one of {', '.join(STATUSES)}")
        entry["status"] = status
    return {k: entry[k] for k in FIELDS if k in entry}


def _finish(entries: list[dict], file: str, where: list) -> list[dict]:
    """Number entries without an id and reject repeated ids (naming both places)."""
    seen: dict[str, Any] = {}
    for n, (entry, place) in enumerate(zip(entries, where), start=1):
        if "id" not in entry:
            entry["id"] = f"h{n:05d}"
            entry.update({k: entry.pop(k) for k in FIELDS[1:] if k in entry})  # keep the written order
        if entry["id"] in seen:
            raise HistoryError(f"id {entry['id']!r} repeats the one at {seen[entry['id']]}", file, place)
        seen[entry["id"]] = place
    return entries


def parse_history_text(text: str, *, file: str = "") -> list[dict]:
    """Entries from the text of a JSONL history or a memory-bank JSON document (see module doc)."""
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            doc = None
            if '"memory_bank"' in text[:4000]:  # a damaged memory bank: name the JSON error's line
                raise HistoryError(f"not valid JSON ({exc.msg})", file, exc.lineno) from None
        if isinstance(doc, dict) and "memory_bank" in doc:
            return _memory_bank(doc, file)
    entries, where = [], []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise HistoryError(f"not valid JSON ({exc.msg})", file, n) from None
        entries.append(validate_entry(obj, file=file, line=n))
        where.append(n)
    return _finish(entries, file, where)


def _memory_bank(doc: dict, file: str) -> list[dict]:
    bank = doc["memory_bank"]
    if not isinstance(bank, list):
        raise HistoryError("'memory_bank' must be a list of entries", file)
    entries, where = [], []
    for i, obj in enumerate(bank, start=1):
        place = f"memory_bank entry {i}"
        entries.append(validate_entry(obj, file=file, line=place))
        where.append(place)
    return _finish(entries, file, where)


def load_history(path: str | os.PathLike) -> list[dict]:
    """The entries of the history file ``path`` (JSONL, or a memory-bank JSON), in file order."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise HistoryError("no such history file", p) from None
    except IsADirectoryError:
        raise HistoryError("is a directory, not a history file", p) from None
    except OSError as exc:
        raise HistoryError(f"cannot read ({exc.strerror})", p) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise HistoryError("not UTF-8 text", p, line) from None
    return parse_history_text(text, file=str(p))


def entry_line(entry: dict) -> str:
    """One entry as its history.jsonl line (fields in the written order, non-ASCII kept), no newline."""
    return json.dumps({k: entry[k] for k in FIELDS if k in entry}, ensure_ascii=False, separators=(", ", ": "))


def write_history(path: str | os.PathLike, entries: Iterable[dict]) -> None:
    """Write ``entries`` as a history.jsonl file (via a temporary file, so never half-written)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".part")
    with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
        for entry in entries:
            fh.write(entry_line(entry) + "\n")
    os.replace(tmp, p)


def canonical_line(entry: dict) -> str:
    """The canonical JSON of an entry (sorted keys, no spaces, non-ASCII kept): what the digest hashes."""
    return canonical_json(entry)


def history_digest(entries: Iterable[dict]) -> str:
    """``sha256:<hex>`` over the entries' canonical JSON lines, each followed by ``\\n``, in order.

    Reformatting a file does not change it; any change of content or order does."""
    h = hashlib.sha256()
    for entry in entries:
        h.update(canonical_line(entry).encode("utf-8") + b"\n")
    return "sha256:" + h.hexdigest()


@contextlib.contextmanager
def new_folder(out: Path):
    """A temporary folder beside ``out`` (made as a plain mkdir would, not private) that becomes
    ``out`` (absent or empty) when the block ends; removed, with ``out`` untouched, on any error."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)
    try:
        yield tmp
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
