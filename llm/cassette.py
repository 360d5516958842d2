"""The LLM cassette: every chat-completion call of a run, keyed by the SHA-256 of its canonical
request, in one SQLite file.

The cassette is to LLM calls what the archive is to HTTP: replaying it makes an LLM run a pure
function of its inputs. The file is plain SQLite with JSON text values, readable without our code:

- table ``meta`` (``key``, ``value`` as JSON): ``format`` = "webfreeze-llm-cassette", ``version`` = 1.
- table ``calls``, primary key (``key``, ``n``): ``key`` = sha256 hex of ``request``; ``n`` = the
  occurrence of this identical request within one episode, from 0; ``request`` = the canonical
  request (see :func:`canonical_request`); ``response`` = JSON with ``text``, ``finish_reason``,
  ``usage`` {``prompt_tokens``, ``completion_tokens``}, ``model`` (the provider's id),
  ``system_fingerprint`` and ``latency_ms``; and metadata that is not part of the key: ``task_id``,
  ``step``, ``purpose`` and ``mode`` (the mode that stored the row).

Recording on an existing cassette adds rows and never changes one: a (key, n) already stored keeps
its response (record into a new file to record afresh).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import os
import sqlite3
import tempfile
import threading
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING

from webfreeze.common.canonical import canonical_json
from webfreeze.common.files import FILE_MODE
from webfreeze.llm.errors import CassetteError, CassetteMiss, LLMError

if TYPE_CHECKING:
    import sqlite_utils

FORMAT = "webfreeze-llm-cassette"
VERSION = 1
MODES = ("record", "replay", "auto")
RESPONSE_FIELDS = ("text", "finish_reason", "usage", "model", "system_fingerprint", "latency_ms")
# Many worker processes write one cassette; a writer waits this long for another's short transaction.
BUSY_TIMEOUT_S = 30.0


# ------------------------------------------------------------------------------ canonical requests
def _dumps(value) -> str:
    """The canonical JSON spelling, refusing NaN: a request holding one is not JSON an API takes."""
    return canonical_json(value, allow_nan=False)


def _data_url_digest(url: str) -> str:
    """``sha256:<hex>`` of the bytes a ``data:`` URL holds (base64 decoded, or percent decoded)."""
    header, _, payload = url.partition(",")
    if header.endswith(";base64"):
        try:
            data = base64.b64decode(payload, validate=False)
        except (binascii.Error, ValueError):
            data = payload.encode("utf-8")  # not valid base64: its text still identifies it
    else:
        data = urllib.parse.unquote_to_bytes(payload)
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _without_image_data(messages):
    """``messages`` with each image part's ``data:`` URL replaced by the digest of its bytes: a
    screenshot is hundreds of kilobytes that would bloat every row, and its digest identifies it."""
    if not isinstance(messages, list):
        return messages
    out = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            parts = []
            for part in content:
                if isinstance(part, dict) and part.get("type") == "image_url":
                    image = part.get("image_url")
                    if isinstance(image, dict) and str(image.get("url", "")).startswith("data:"):
                        part = {**part, "image_url": {**image, "url": _data_url_digest(image["url"])}}
                    elif isinstance(image, str) and image.startswith("data:"):
                        part = {**part, "image_url": _data_url_digest(image)}
                parts.append(part)
            message = {**message, "content": parts}
        out.append(message)
    return out


def canonical_request(request: dict) -> str:
    """The request as canonical JSON text: sorted keys, compact separators, non-ASCII kept, and
    image data URLs inside content parts replaced by ``"sha256:<hex>"`` of their bytes (small
    cassettes, stable keys). Not plain JSON (NaN, bytes, objects) is an LLMError."""
    if not isinstance(request, dict):
        raise LLMError(f"an LLM request must be an object, not {type(request).__name__}")
    if "messages" in request:
        request = {**request, "messages": _without_image_data(request["messages"])}
    try:
        return _dumps(request)
    except (TypeError, ValueError) as exc:
        raise LLMError(f"the LLM request is not plain JSON: {exc}") from None


def text_key(canonical_text: str) -> str:
    """The cassette key of a canonical request text: its SHA-256, hex."""
    return hashlib.sha256(canonical_text.encode("utf-8")).hexdigest()


def request_key(request: dict) -> str:
    """The cassette key of a request: the SHA-256 hex of :func:`canonical_request`."""
    return text_key(canonical_request(request))


def _path_name(path: str, key) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def first_difference(ours, stored, path: str = "", *, names: tuple[str, str] | None = None) -> str | None:
    """Where two JSON values first differ, as a readable path (``messages[1].content at char 812``),
    walking objects in sorted key order and lists in order; None when they are equal. ``names``
    words the two sides, ``stored``'s then ``ours``'s (two runs' reports: ``("the bundle", "the
    re-run")``); without them, a cassette's stored request and ours."""
    if isinstance(ours, dict) and isinstance(stored, dict):
        for k in sorted(set(ours) | set(stored)):
            where = _path_name(path, k)
            if k not in stored:
                return (f"{where} (only in {names[1]})" if names else f"{where} (not in the stored request)")
            if k not in ours:
                return f"{where} (only in {names[0] if names else 'the stored request'})"
            found = first_difference(ours[k], stored[k], where, names=names)
            if found:
                return found
        return None
    if isinstance(ours, list) and isinstance(stored, list):
        for i, (a, b) in enumerate(zip(ours, stored)):
            found = first_difference(a, b, _path_name(path, i), names=names)
            if found:
                return found
        if len(ours) != len(stored):
            if names:
                return f"{path or 'the whole'} has {len(stored)} items in {names[0]}, {len(ours)} in {names[1]}"
            return f"{path or 'request'} has {len(ours)} items, the stored one {len(stored)}"
        return None
    if isinstance(ours, str) and isinstance(stored, str):
        if ours == stored:
            return None
        return f"{path or 'request'} at char {_common_prefix_len(ours, stored)}"
    a, b = _dumps(ours), _dumps(stored)  # 0 and 0.0 differ in a key, so they differ here too
    if a == b:
        return None
    if names:
        return f"{path or 'the whole'} ({b[:40]} in {names[0]}, {a[:40]} in {names[1]})"
    return f"{path or 'request'} ({a[:40]} vs stored {b[:40]})"


def _common_prefix_len(a: str, b: str) -> int:
    """Length of the common prefix, by bisection over slice comparisons (done in C: a miss may
    compare a long prompt with thousands of stored ones)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def normalise_response(response: dict) -> dict:
    """The response fields a cassette stores, as the plain JSON a replay will give back."""
    usage = response.get("usage") or {}
    kept = {
        "text": response.get("text") or "",
        "finish_reason": response.get("finish_reason"),
        "usage": {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                  "completion_tokens": int(usage.get("completion_tokens") or 0)},
        "model": response.get("model"),
        "system_fingerprint": response.get("system_fingerprint"),
        "latency_ms": response.get("latency_ms"),
    }
    return json.loads(_dumps(kept))


def _same_answer(a: dict, b: dict) -> bool:
    """Whether two stored responses say the same (latency is how long it took, not what was said)."""
    return {k: v for k, v in a.items() if k != "latency_ms"} == {k: v for k, v in b.items() if k != "latency_ms"}


# ------------------------------------------------------------------------------ the file
def _sqlite_uri(path: Path, **params: str) -> str:
    uri = path.resolve().as_uri()  # percent-escapes '?', '#' and '%' in the path
    return f"{uri}?{urllib.parse.urlencode(params)}" if params else uri


def _create_schema(db: sqlite_utils.Database) -> None:
    db["meta"].create({"key": str, "value": str}, pk="key", if_not_exists=True)
    db["calls"].create(
        {"key": str, "n": int, "request": str, "response": str,
         "task_id": str, "step": int, "purpose": str, "mode": str},
        pk=("key", "n"),
        not_null={"key", "n", "request", "response"},
        if_not_exists=True,
    )
    # the nearest-request search of a strict-replay miss looks at the same task and step first
    db["calls"].create_index(["task_id", "step"], index_name="ix_calls_task_step", if_not_exists=True)
    db.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('format', ?), ('version', ?)",
               [_dumps(FORMAT), _dumps(VERSION)])


class Cassette:
    """One cassette file, opened in a mode: ``record`` (the client calls the provider and stores
    every answer), ``replay`` (strict: read only; a request not stored is a :class:`CassetteMiss`)
    or ``auto`` (what is stored is replayed, the rest called and stored).

    Safe for threads (one lock around the connection) and for many processes writing one file (WAL,
    a busy timeout, one short transaction per stored call).
    """

    def __init__(self, path: str | os.PathLike, mode: str = "auto"):
        if mode not in MODES:
            raise LLMError(f"unknown cassette mode {mode!r} (one of {', '.join(MODES)})")
        self.path = Path(path)
        self.mode = mode
        self.readonly = mode == "replay"
        self._lock = threading.Lock()
        # the (key, n) rows this object answered or stored: what a run used, for its per-run digest
        self._used: set[tuple[str, int]] = set()
        self._conn: sqlite3.Connection | None = None
        self._conn = self._open()

    # -------------------------------------------------------------------------- opening
    def _open(self) -> sqlite3.Connection:
        p = self.path
        if p.is_dir():
            raise CassetteError(f"{p}: is a directory, not a cassette file")
        exists = p.is_file() and p.stat().st_size > 0
        if self.readonly and not exists:
            raise CassetteError(f"{p}: no such cassette" if not p.exists() else f"{p}: empty file, not a cassette")
        if not self.readonly and not p.parent.is_dir():
            raise CassetteError(f"{p.parent}: no such directory")
        conn = None
        try:
            if self.readonly and not os.access(p.parent, os.W_OK) and not os.path.exists(f"{p}-wal"):
                # a read-only folder (a shipped cassette): nothing can change it, and SQLite could
                # not create its shared-memory file there
                uri = _sqlite_uri(p, mode="ro", immutable="1")
            elif self.readonly:
                uri = _sqlite_uri(p, mode="ro")
            else:
                uri = _sqlite_uri(p)
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
            if self.readonly:
                self._check_format(conn)
                return conn
            # A file with tables is checked before anything is written to it (recording into an
            # archive by mistake must not add tables to it); one without is new, or is being
            # created by another worker this moment: both create the same schema, idempotently.
            fresh = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
            if not fresh:
                self._check_format(conn)
            import sqlite_utils  # (here: only a cassette opened for writing needs it)

            db = sqlite_utils.Database(conn, execute_plugins=False)
            db.enable_wal()  # readers never wait for a writer, writers only for one short commit
            conn.execute("PRAGMA synchronous=NORMAL")  # with WAL: consistent after a crash, fast commits
            if fresh:
                conn.execute("BEGIN IMMEDIATE")  # the write lock first: no read-then-upgrade race
                try:
                    _create_schema(db)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                self._check_format(conn)
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            raise CassetteError(f"{p}: {'damaged or not a cassette' if _damaged(exc) else 'cannot open cassette'}: "
                                f"{exc}") from None
        except BaseException:
            if conn is not None:
                conn.close()
            raise
        return conn

    def _check_format(self, conn: sqlite3.Connection) -> None:
        try:
            rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('format', 'version')").fetchall())
            name, version = json.loads(rows["format"]), json.loads(rows["version"])
        except (sqlite3.OperationalError, KeyError, TypeError, ValueError):
            raise CassetteError(f"{self.path}: not an LLM cassette (no {FORMAT} meta table)") from None
        if name != FORMAT or not isinstance(version, int):
            raise CassetteError(f"{self.path}: not an LLM cassette (format {name!r})")
        if version > VERSION:
            raise CassetteError(f"{self.path}: cassette version {version} is newer than this webfreeze "
                                f"supports ({VERSION}); upgrade webfreeze")

    @contextlib.contextmanager
    def _db(self, what: str):
        """The connection, under the lock, with SQLite's errors turned into one-line CassetteErrors."""
        if self._conn is None:
            raise CassetteError(f"{self.path}: cassette is closed")
        with self._lock:
            try:
                yield self._conn
            except sqlite3.DatabaseError as exc:
                raise CassetteError(f"{self.path}: cannot {what}: {exc}") from None

    def close(self) -> None:
        """Close the file. The last writer to close turns the write-ahead log off again, so that a
        finished cassette is one self-contained file: read-only readers (strict replay, a cassette
        shipped in a read-only folder) then need no side files, and leave none behind."""
        with self._lock:
            if self._conn is None:
                return
            try:
                if not self.readonly:
                    # succeeds only when no other connection has the file open: then we are the last
                    # writer; otherwise the file stays in WAL mode for the others (no waiting here)
                    self._conn.execute("PRAGMA busy_timeout=0")
                    self._conn.execute("PRAGMA journal_mode=DELETE").fetchall()
            except sqlite3.Error:
                pass
            finally:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "Cassette":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __len__(self) -> int:
        with self._db("count calls") as conn:
            return conn.execute("SELECT count(*) FROM calls").fetchone()[0]

    def __repr__(self) -> str:
        return f"Cassette({str(self.path)!r}, mode={self.mode!r})"

    # -------------------------------------------------------------------------- calls
    def lookup(self, key: str, n: int, *, repeat_last: bool = True) -> dict | None:
        """The stored response of the ``n``-th occurrence of request ``key`` in an episode. Past
        the last recorded occurrence the last one answers again (as HTTP replay repeats the last
        response), unless ``repeat_last`` is false. None when nothing answers."""
        with self._db("read a call") as conn:
            if repeat_last:
                row = conn.execute("SELECT n, response FROM calls WHERE key = ? AND n <= ? ORDER BY n DESC LIMIT 1",
                                   (key, n)).fetchone()
            else:
                row = conn.execute("SELECT n, response FROM calls WHERE key = ? AND n = ?", (key, n)).fetchone()
            if row is not None:
                self._used.add((key, row[0]))
        if row is None:
            return None
        try:
            return json.loads(row[1])
        except ValueError:
            raise CassetteError(f"{self.path}: damaged call {key[:12]}/{n}: its response is not JSON "
                                f"(run 'webfreeze cassette verify')") from None

    def store(self, key: str, n: int, request_text: str, response: dict, *, task_id: str | None = None,
              step: int | None = None, purpose: str | None = None) -> tuple[dict, bool]:
        """Store a call unless (key, n) is already there. Returns the response the cassette holds
        for (key, n) afterwards, and whether it is the one given: a caller that answers with the
        returned response behaves exactly as a later replay of this cassette will."""
        if self.readonly:
            raise CassetteError(f"{self.path}: opened for strict replay, nothing can be recorded")
        if text_key(request_text) != key:
            raise LLMError("cassette store: the key is not the SHA-256 of the request text")  # a bug of the caller
        kept = normalise_response(response)
        with self._db("record a call") as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO calls (key, n, request, response, task_id, step, purpose, mode) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, n, request_text, _dumps(kept), task_id, step, purpose, self.mode))
            inserted = cur.rowcount == 1
            self._used.add((key, n))
        if inserted:
            return kept, True
        stored = self.lookup(key, n, repeat_last=False)
        return (stored if stored is not None else kept), False

    def nearest(self, request_text: str, *, task_id: str | None = None, step: int | None = None) -> dict | None:
        """The stored request most like ``request_text``: among the calls of the same task and
        step if there are any, else of the same task, else all; the longest common prefix of the
        canonical texts wins. Returns its task_id, step, purpose, key, n and ``difference`` (where
        the two first differ), or None for an empty cassette."""
        queries = []
        if task_id is not None and step is not None:
            queries.append(("task_id = ? AND step = ?", (task_id, step)))
        if task_id is not None:
            queries.append(("task_id = ?", (task_id,)))
        queries.append(("1", ()))
        best = None
        with self._db("search the cassette") as conn:
            for where, params in queries:
                rows = conn.execute(f"SELECT key, n, request, task_id, step, purpose FROM calls WHERE {where} "
                                    "ORDER BY key, n", params).fetchall()
                for row in rows:
                    common = _common_prefix_len(request_text, row[2])
                    if best is None or common > best[0]:
                        best = (common, row)
                if best is not None:
                    break
        if best is None:
            return None
        key, n, stored_text, stored_task, stored_step, purpose = best[1]
        try:
            difference = first_difference(json.loads(request_text), json.loads(stored_text))
        except ValueError:
            difference = f"char {best[0]} of the request text"
        return {"task_id": stored_task, "step": stored_step, "purpose": purpose, "key": key, "n": n,
                "difference": difference or "nowhere (the same request)"}

    def miss(self, request_text: str, key: str, *, task_id: str | None, step: int | None,
             purpose: str | None = None) -> CassetteMiss:
        """The :class:`CassetteMiss` for a request that strict replay cannot answer: one line
        naming the task, the step and the nearest stored request with where the two differ."""
        where = f"task {task_id if task_id is not None else '(none)'} step {step if step is not None else '(none)'}"
        what = f" ({purpose})" if purpose else ""
        nearest = self.nearest(request_text, task_id=task_id, step=step)
        if nearest is None:
            tail = f"the cassette {self.path} holds no calls"
        else:
            tail = (f"nearest stored request: task {nearest['task_id']} step {nearest['step']}, "
                    f"differing at {nearest['difference']}")
        return CassetteMiss(f"strict replay: no stored LLM call for {where}{what} (key {key[:12]}); {tail}",
                            key=key, task_id=task_id, step=step, nearest=nearest)

    def rows(self):
        """Every stored call as a dict, in (key, n) order, JSON values parsed where they parse."""
        with self._db("read the calls") as conn:
            cur = conn.execute("SELECT key, n, request, response, task_id, step, purpose, mode FROM calls "
                               "ORDER BY key, n")
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        return [dict(zip(names, r)) for r in rows]

    def take_used(self) -> list[list]:
        """The (key, n) rows answered or stored since the last call, as sorted ``[key, n]`` pairs,
        and forget them: the runner asks after each episode, so that a run knows which entries of a
        (possibly larger, shared) cassette it used."""
        with self._lock:
            used, self._used = self._used, set()
        return [[k, n] for k, n in sorted(used)]

    # -------------------------------------------------------------------------- summaries
    def entries_digest(self, used) -> tuple[str, int]:
        """``(sha256:<hex>, count)`` over the given ``[key, n]`` rows only: key, n, request and the
        response without ``latency_ms`` (how long a call took is not what it said). The digest of
        what one run used, equal whether its calls sit in their own cassette or in a larger one.
        A pair the cassette does not hold is a :class:`CassetteError`."""
        h = hashlib.sha256()
        pairs = sorted({(str(k), int(n)) for k, n in used})
        with self._db("read the calls") as conn:
            for key, n in pairs:
                row = conn.execute("SELECT request, response FROM calls WHERE key = ? AND n = ?", (key, n)).fetchone()
                if row is None:
                    raise CassetteError(f"{self.path}: holds no call {key[:12]}/{n}")
                try:
                    response = {k: v for k, v in json.loads(row[1]).items() if k != "latency_ms"}
                except (ValueError, AttributeError):
                    raise CassetteError(f"{self.path}: damaged call {key[:12]}/{n}: its response is not JSON") from None
                h.update((_dumps([key, n, row[0], response]) + "\n").encode("utf-8"))
        return "sha256:" + h.hexdigest(), len(pairs)

    def digest(self) -> str:
        """``sha256:<hex>`` over the sorted (key, n, request, response) rows: the content, so two
        files holding the same calls have the same digest whatever their page layout."""
        h = hashlib.sha256()
        with self._db("read the calls") as conn:
            for key, n, request, response in conn.execute(
                    "SELECT key, n, request, response FROM calls ORDER BY key, n"):
                h.update((_dumps([key, n, request, response]) + "\n").encode("utf-8"))
        return "sha256:" + h.hexdigest()

    def info(self) -> dict:
        """A summary: calls, distinct requests, tasks, purposes, the models asked for and the
        providers' model ids, token totals, the modes that stored calls, and the digest."""
        purposes: dict[str, int] = {}
        tasks, keys, models, request_models, modes = set(), set(), set(), set(), set()
        prompt = completion = unreadable = 0
        rows = self.rows()
        for r in rows:
            keys.add(r["key"])
            if r["task_id"] is not None:
                tasks.add(r["task_id"])
            if r["mode"]:
                modes.add(r["mode"])
            purposes[r["purpose"] or ""] = purposes.get(r["purpose"] or "", 0) + 1
            try:
                response, request = json.loads(r["response"]), json.loads(r["request"])
                usage = response.get("usage") or {}
                prompt += int(usage.get("prompt_tokens") or 0)
                completion += int(usage.get("completion_tokens") or 0)
                if response.get("model"):
                    models.add(str(response["model"]))
                if request.get("model"):
                    request_models.add(str(request["model"]))
            except (ValueError, TypeError, AttributeError):
                unreadable += 1
        return {
            "path": str(self.path), "format": FORMAT, "version": VERSION,
            "calls": len(rows), "distinct_requests": len(keys), "tasks": len(tasks),
            "purposes": dict(sorted(purposes.items())), "models": sorted(models),
            "request_models": sorted(request_models), "prompt_tokens": prompt,
            "completion_tokens": completion, "modes": sorted(modes), "unreadable_rows": unreadable,
            "digest": self.digest(),
        }

    def verify(self) -> list[str]:
        """Problems found, one line each (empty when the cassette is sound): SQLite's own check,
        the format, and per call: JSON that does not parse, a request that is not canonical, a key
        that is not the SHA-256 of its request, a response without its fields."""
        problems = []
        with self._db("check the file") as conn:
            check = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
        if check != ["ok"]:
            problems.append(f"SQLite integrity check: {'; '.join(check[:3])}")
        try:
            with self._db("read the format") as conn:
                self._check_format(conn)
        except CassetteError as exc:
            problems.append(str(exc))
        for r in self.rows():
            label = f"call {str(r['key'])[:12]}/{r['n']}"
            if not isinstance(r["n"], int) or r["n"] < 0:
                problems.append(f"{label}: occurrence n is not an integer >= 0")
            try:
                request = json.loads(r["request"])
            except (TypeError, ValueError):
                problems.append(f"{label}: request is not JSON")
                continue
            if not isinstance(request, dict) or canonical_request(request) != r["request"]:
                problems.append(f"{label}: request is not in canonical form")
            elif text_key(r["request"]) != r["key"]:
                problems.append(f"{label}: key is not the SHA-256 of its request")
            try:
                response = json.loads(r["response"])
            except (TypeError, ValueError):
                problems.append(f"{label}: response is not JSON")
                continue
            if not isinstance(response, dict) or not isinstance(response.get("text"), str) \
                    or not isinstance(response.get("usage"), dict):
                problems.append(f"{label}: response lacks its text or usage")
        return problems


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc).lower()
    return "not a database" in text or "malformed" in text or "corrupt" in text


def verify_file(path: str | os.PathLike) -> list[str]:
    """:meth:`Cassette.verify` of the file at ``path``, opened read-only; a file that does not
    open as a cassette is one problem."""
    try:
        with Cassette(path, "replay") as cassette:
            return cassette.verify()
    except CassetteError as exc:
        return [str(exc)]


# ------------------------------------------------------------------------------ merging
def merge(out_path: str | os.PathLike, sources, *, force: bool = False) -> dict:
    """Write the union of the ``sources`` cassettes to ``out_path`` (atomically: a temporary file
    beside it, renamed on success). A (key, n) in several sources keeps the first source's row;
    one whose answer differs (latency aside) is counted as a conflict. Returns counts: sources,
    read, calls (written), duplicates, conflicts, and the new file's digest."""
    out = Path(out_path)
    sources = [Path(s) for s in sources]
    if not sources:
        raise LLMError("cassette merge needs at least one source cassette")
    if out.is_dir():
        raise CassetteError(f"{out}: is a directory; choose another output file")
    for s in sources:
        if out.exists() and s.exists() and os.path.samefile(out, s) or out.resolve() == s.resolve():
            raise CassetteError(f"{out}: is {s}, which this command reads; choose another output file")
    if out.exists() and not force:
        raise CassetteError(f"{out}: already exists (use --force to replace it)")
    if not out.parent.is_dir():
        raise CassetteError(f"{out.parent}: no such directory")
    readers = [Cassette(s, "replay") for s in sources]  # every source checked before writing anything
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    except OSError as exc:
        for r in readers:
            r.close()
        raise CassetteError(f"{out}: cannot write: {exc.strerror or exc}") from None
    os.close(fd)
    stats = {"sources": len(sources), "read": 0, "calls": 0, "duplicates": 0, "conflicts": 0}
    try:
        with Cassette(tmp, "record") as merged:
            with merged._db("write the merged cassette") as conn:
                conn.execute("BEGIN IMMEDIATE")  # one transaction: thousands of rows, one sync
                for reader in readers:
                    for r in reader.rows():
                        stats["read"] += 1
                        cur = conn.execute(
                            "INSERT OR IGNORE INTO calls (key, n, request, response, task_id, step, purpose, mode) "
                            "VALUES (:key, :n, :request, :response, :task_id, :step, :purpose, :mode)", r)
                        if cur.rowcount == 1:
                            continue
                        kept = conn.execute("SELECT response FROM calls WHERE key = ? AND n = ?",
                                            (r["key"], r["n"])).fetchone()[0]
                        try:
                            same = kept == r["response"] or _same_answer(json.loads(kept), json.loads(r["response"]))
                        except (ValueError, AttributeError):
                            same = False
                        stats["duplicates" if same else "conflicts"] += 1
                conn.execute("COMMIT")
            stats["calls"] = len(merged)
            stats["digest"] = merged.digest()
        for suffix in ("-wal", "-shm", "-journal"):  # an old file's side files must not meet the new one
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{out}{suffix}")
        os.chmod(tmp, FILE_MODE)  # mkstemp made it 0600; a cassette is shared like any output
        os.replace(tmp, out)
    except BaseException as exc:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{tmp}{suffix}")
        if isinstance(exc, OSError):
            raise CassetteError(f"{out}: cannot write: {exc.strerror or exc}") from None
        raise
    finally:
        for r in readers:
            r.close()
    return stats


def write_subset(src: str | os.PathLike, out_path: str | os.PathLike, used) -> int:
    """Write a new cassette at ``out_path`` holding only the ``[key, n]`` rows of ``src`` named in
    ``used``, each row as it is (metadata and latency kept). Written beside ``out_path`` and renamed
    when complete; returns the number of rows. A pair ``src`` lacks is a :class:`CassetteError`."""
    out = Path(out_path)
    if out.exists():
        raise CassetteError(f"{out}: already exists")
    pairs = sorted({(str(k), int(n)) for k, n in used})
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    os.close(fd)
    try:
        with Cassette(src, "replay") as reader, Cassette(tmp, "record") as subset:
            with reader._db("read the calls") as rconn, subset._db("write the subset") as wconn:
                wconn.execute("BEGIN IMMEDIATE")
                for key, n in pairs:
                    cur = rconn.execute("SELECT key, n, request, response, task_id, step, purpose, mode FROM calls "
                                        "WHERE key = ? AND n = ?", (key, n))
                    row = cur.fetchone()
                    if row is None:
                        raise CassetteError(f"{src}: holds no call {key[:12]}/{n}")
                    wconn.execute("INSERT INTO calls (key, n, request, response, task_id, step, purpose, mode) "
                                  "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
                wconn.execute("COMMIT")
        _publish(tmp, out)
    except BaseException:
        _discard(tmp)
        raise
    return len(pairs)


def _publish(tmp: str, out) -> None:
    """Move a finished cassette written at ``tmp`` (its WAL checkpointed) to ``out``."""
    for suffix in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{tmp}{suffix}")
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, out)


def _discard(tmp: str) -> None:
    """Remove a cassette left half-written at ``tmp``, with its SQLite side files."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{tmp}{suffix}")


def redact_file(src: str | os.PathLike, out_path: str | os.PathLike, rewrite) -> dict:
    """Write a redacted copy of cassette ``src`` to ``out_path``: every request text and response
    passed through ``rewrite(text) -> text`` (the mapping of an archive redaction, which replaces
    each secret by its placeholder), each request's key recomputed from its new text, so a run
    replayed on the redacted archive, whose observations show the placeholders, finds its calls.
    Written beside ``out_path`` and renamed when complete. Returns counts and ``keys`` (old key ->
    new key, for the trajectories' ``llm_entries``)."""
    out = Path(out_path)
    if out.exists():
        raise CassetteError(f"{out}: already exists")
    if not out.parent.is_dir():
        raise CassetteError(f"{out.parent}: no such directory")
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    os.close(fd)
    stats: dict = {"calls": 0, "changed": 0, "keys": {}}
    try:
        with Cassette(src, "replay") as reader, Cassette(tmp, "record") as redacted:
            with redacted._db("write the redacted cassette") as conn:
                conn.execute("BEGIN IMMEDIATE")
                for r in reader.rows():
                    request, response = rewrite(r["request"]), rewrite(r["response"])
                    key = text_key(request) if request != r["request"] else r["key"]
                    stats["keys"][r["key"]] = key
                    stats["calls"] += 1
                    stats["changed"] += request != r["request"] or response != r["response"]
                    row = dict(r, key=key, request=request, response=response, task_id=rewrite(r["task_id"])
                               if r["task_id"] else r["task_id"])
                    conn.execute("INSERT OR IGNORE INTO calls (key, n, request, response, task_id, step, purpose, "
                                 "mode) VALUES (:key, :n, :request, :response, :task_id, :step, :purpose, :mode)", row)
                conn.execute("COMMIT")
        _publish(tmp, out)
    except BaseException:
        _discard(tmp)
        raise
    return stats
