"""Retrieval over a user's history (personas/retrieval.py) with the real all-MiniLM-L6-v2 and FAISS.

The expected answers are computed here by hand: cosine by numpy, ranked by (score rounded to 6
places, history order), over vectors from the same ONNX Runtime encoder (equal to the last digit)
and over vectors from sentence-transformers' own PyTorch ``encode``, the path before the ONNX one
(the same ids, scores within 1e-6). The cache tests damage the real cache files on disk; the
stand-ins are an encoder that raises, used to prove that a cached reload never embeds a text (a call
that must not happen cannot be observed otherwise), and an onnxruntime that cannot be imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from webfreeze.personas import retrieval
from webfreeze.personas.history import history_digest, write_history
from webfreeze.personas.retrieval import (
    ALL_FIELDS,
    HistoryIndex,
    RetrievalError,
    key_text,
    open_user_history,
    parse_key_fields,
)

E = [  # (type, object, website[, status]): three running-shoe entries (one repeated), food, hotels, noise
    ("web search", "trail running shoes size 42", "search.test"),
    ("web visit", "Acme Trail Runner, blue, size 42, $84.20", "shop.test"),
    ("purchase", "Acme Trail Runner, blue, size 42, $84.20", "shop.test"),
    ("web search", "vegetarian restaurants in Lisbon", "search.test"),
    ("booking", "Table for two at Green Garden, Lisbon, 19:30", "booking.test", "cancelled"),
    ("web search", "trail running shoes size 42", "search.test"),
    ("review & rating", "4 stars for the Acme Trail Runner: light and comfortable", "shop.test"),
    ("web visit", "Seaside Hotel, 4 stars, Porto", "hotels.test"),
    ("booking", "Two nights at the Seaside Hotel, Porto", "hotels.test", "modified"),
    ("web search", "weather forecast tomorrow", "search.test"),
    ("web visit", "Dermatologist Dr. Silva, Lisbon clinic", "clinic.test"),
    ("web search", "best vegetarian lasagna recipe", "recipes.test"),
]
QUERIES = ["running shoes for trails", "where to eat vegetarian food", "hotel stay in Porto", "skin doctor",
           "quantum field theory lecture notes"]  # the last: nothing above 0.5


def _history() -> list[dict]:
    out = []
    for n, row in enumerate(E, start=1):
        entry = {"id": f"u-{n:03d}", "timestamp": f"2024-03-{n:02d} 1{n % 10}:00:00", "type": row[0],
                 "object": row[1], "website": row[2]}
        if len(row) > 3:
            entry["status"] = row[3]
        out.append(entry)
    return out


@pytest.fixture(scope="module")
def history() -> list[dict]:
    return _history()


@pytest.fixture(scope="module")
def model():
    return retrieval._load_model(*retrieval._model_source(retrieval.DEFAULT_MODEL))


@pytest.fixture(scope="module")
def encoder():
    return retrieval._load_encoder(*retrieval._model_source(retrieval.DEFAULT_MODEL))


_ALONE: dict[str, np.ndarray] = {}  # text -> its vector embedded alone (the model is slow on a busy machine)
_BATCHED: dict[tuple, np.ndarray] = {}


def alone(model, texts: list[str]) -> np.ndarray:
    """Each text embedded by itself (a batch of one), unit length."""
    for t in texts:
        if t not in _ALONE:
            _ALONE[t] = model.encode([t], normalize_embeddings=True, convert_to_numpy=True)[0]
    return np.vstack([_ALONE[t] for t in texts])


def by_hand(model, entries, query, *, k=20, threshold=0.5, fields=("type", "object")) -> list[tuple[str, float]]:
    """numpy cosine over the model's vectors of the distinct key texts (encoded as a build encodes
    them: one call, batches of 64), ranked by rounded score then history order. ``model``: the
    sentence-transformers model (PyTorch, the path before ONNX) or the ONNX encoder."""
    texts = [key_text(e, fields) for e in entries]
    unique = tuple(dict.fromkeys(texts))
    onnx = not hasattr(model, "tokenize")
    if (onnx, unique) not in _BATCHED:
        _BATCHED[onnx, unique] = model.encode(list(unique), 64) if onnx else \
            model.encode(list(unique), batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    q = model.encode_one(query)[0] if onnx else alone(model, [query])[0]
    by_text = dict(zip(unique, (_BATCHED[onnx, unique].astype(np.float64) @ q.astype(np.float64)).tolist()))
    scores = [round(by_text[t], 6) for t in texts]
    ranked = sorted(range(len(entries)), key=lambda i: (-scores[i], i))
    return [(entries[i]["id"], scores[i]) for i in ranked if scores[i] > threshold][:k]


def pairs(results) -> list[tuple[str, float]]:
    return [(r["id"], r["score"]) for r in results]


def same_within(got, want, tol=1e-6 + 1e-12) -> bool:
    """The same ids in the same order, scores within ``tol`` (two paths' last digits)."""
    return [i for i, _ in got] == [i for i, _ in want] and all(abs(a - b) <= tol for (_, a), (_, b) in zip(got, want))


# ------------------------------------------------------------------------------------------ search
def test_search_is_the_hand_computed_cosine_top_k(history, model, encoder, tmp_path):
    index = HistoryIndex.build(history, cache_dir=tmp_path)
    sizes = set()
    for k, threshold in [(20, 0.5), (2, 0.5), (20, 0.3), (4, 0.0), (20, -1.0)]:
        for query in QUERIES:
            got = pairs(index.search(query, k=k, threshold=threshold))
            want = by_hand(encoder, history, query, k=k, threshold=threshold)
            assert got == want  # the same vectors: the same ids and scores, to the 6th place
            assert len(got) <= k and all(s > threshold for _, s in got)
            # The path before ONNX (sentence-transformers' PyTorch encode): the same answers to 1e-6.
            assert same_within(got, by_hand(model, history, query, k=k, threshold=threshold))
            sizes.add(len(got))
    assert {0, 2, 4, 12} <= sizes  # the threshold and k both cut, and an open search returns everything


def test_onnx_vectors_match_the_pytorch_model(history, model, encoder):
    """Index and query vectors come from the ONNX export; they agree with sentence-transformers'
    own encode (the PyTorch path) to ~1e-7, alone and batched."""
    texts = list(dict.fromkeys(key_text(e) for e in history)) + QUERIES
    torch_alone = alone(model, texts)
    assert np.abs(np.vstack([encoder.encode_one(t) for t in texts]) - torch_alone).max() <= 1e-6
    torch_batched = model.encode(texts, batch_size=4, normalize_embeddings=True, convert_to_numpy=True)
    assert np.abs(encoder.encode(texts, 4) - torch_batched).max() <= 1e-6
    assert encoder.encode(texts, 4).dtype == np.float32 and encoder.encode([], 4).shape == (0, 384)


def test_defaults_are_top_20_above_half_and_meaningful(history, tmp_path):
    index = HistoryIndex.build(history, cache_dir=tmp_path)
    got = index.search("trail running shoes")
    assert got and all(r["score"] > 0.5 for r in got)
    assert {r["id"] for r in got} <= {"u-001", "u-002", "u-003", "u-006", "u-007"}
    assert got[0]["id"] == "u-001" and got[1]["id"] == "u-006"  # same text, same score, history order
    assert got[0]["score"] == got[1]["score"]
    assert index.search("weather forecast tomorrow", threshold=0.5)[0]["id"] == "u-010"
    assert index.identity() == {"history_digest": history_digest(history), "model": "all-MiniLM-L6-v2",
                                "key_fields": ["type", "object"], "k": 20, "threshold": 0.5}


def test_threshold_is_strict_and_results_carry_the_entry(history, tmp_path):
    index = HistoryIndex.build(history, cache_dir=tmp_path)
    full = index.search("table booking for dinner", k=20, threshold=-1.0)
    assert len(full) == len(history)  # every entry, best first
    cut = full[3]["score"]
    above = index.search("table booking for dinner", k=20, threshold=cut)
    assert pairs(above) == pairs([r for r in full if r["score"] > cut])
    assert all(r["score"] != cut for r in above)
    booking = next(r for r in full if r["id"] == "u-005")
    assert booking == {"id": "u-005", "score": booking["score"], "timestamp": "2024-03-05 15:00:00",
                       "type": "booking", "object": "Table for two at Green Garden, Lisbon, 19:30",
                       "website": "booking.test", "status": "cancelled"}
    assert "status" not in full[[r["id"] for r in full].index("u-001")]


def test_k_bounds_the_answer_and_ties_stay_in_history_order(tmp_path):
    same = [{"id": f"d{n}", "timestamp": "2024-01-01 10:00:00", "type": "web search", "object": "red sneakers",
             "website": "search.test"} for n in range(30)]
    index = HistoryIndex.build(list(reversed(same)), cache_dir=tmp_path)  # ids d29 .. d0 in history order
    got = index.search("red sneakers", k=20)
    assert [r["id"] for r in got] == [f"d{n}" for n in range(29, 9, -1)]
    assert len({r["score"] for r in got}) == 1 and len(index.texts) == 1  # one text, embedded once


def test_batched_vectors_are_close_to_vectors_embedded_alone(history, model, tmp_path):
    """Build texts are embedded in batches: the last digits move with the batch (padding, shapes)
    and its size, so the batch size is part of the cache key; the query is embedded alone."""
    index = HistoryIndex.build(history, cache_dir=tmp_path, batch_size=5)
    want = alone(model, [key_text(e) for e in history])
    assert np.abs(index.vectors() - want).max() <= 1e-6
    other = HistoryIndex.build(history, cache_dir=tmp_path, batch_size=64)
    assert other.cache_status == "built"  # another batch size, another cache entry
    assert np.abs(other.vectors() - index.vectors()).max() <= 1e-6
    assert HistoryIndex.build(history, cache_dir=tmp_path, batch_size=5).cache_status == "hit"
    top = index.search(key_text(history[6]), k=1)[0]
    assert top["id"] == "u-007" and top["score"] == pytest.approx(1.0, abs=1e-6)
    assert np.array_equal(index.query_vector("shoes"), index.query_vector("shoes"))


def test_all_fields_key(history, model, encoder, tmp_path):
    assert parse_key_fields("all") == ALL_FIELDS
    assert parse_key_fields("object,type") == ("type", "object")
    assert key_text(history[4], ALL_FIELDS) == \
        "2024-03-05 15:00:00 booking: Table for two at Green Garden, Lisbon, 19:30 (booking.test)"
    assert key_text(history[4], ("object", "status")) == "Table for two at Green Garden, Lisbon, 19:30 [cancelled]"
    index = HistoryIndex.build(history, key_fields="all", cache_dir=tmp_path)
    assert index.identity()["key_fields"] == list(ALL_FIELDS)
    assert len(index.texts) == len(history)  # the timestamp tells the repeated search apart
    for query in QUERIES:
        got = pairs(index.search(query, k=5, threshold=0.2))
        assert got == by_hand(encoder, history, query, k=5, threshold=0.2, fields=ALL_FIELDS)
        assert same_within(got, by_hand(model, history, query, k=5, threshold=0.2, fields=ALL_FIELDS))
    plain = HistoryIndex.build(history, cache_dir=tmp_path)
    assert pairs(plain.search(QUERIES[0], threshold=0.0)) != pairs(index.search(QUERIES[0], threshold=0.0))


@pytest.mark.parametrize("fields,message", [("type,colour", "unknown field 'colour'"), ("", "at least one"),
                                            ("type,type", "named twice")])
def test_bad_key_fields_are_one_line(history, fields, message):
    with pytest.raises(RetrievalError, match=message) as err:
        HistoryIndex.build(history, key_fields=fields, cache=False)
    assert "\n" not in str(err.value)


def test_bad_arguments_are_one_line(history, tmp_path):
    index = HistoryIndex.build(history, cache_dir=tmp_path)
    for kwargs, message in [({"k": 0}, "k must be"), ({"threshold": 2}, "threshold"), ({"k": True}, "k must be")]:
        with pytest.raises(RetrievalError, match=message):
            index.search("shoes", **kwargs)
    with pytest.raises(RetrievalError, match="batch size"):
        HistoryIndex.build(history, batch_size=0, cache=False)
    with pytest.raises(RetrievalError, match=r"history entry 2: type 'click' is not one of"):
        HistoryIndex.build([history[0], {**history[1], "type": "click"}], cache=False)
    with pytest.raises(RetrievalError, match="repeats"):
        HistoryIndex.build([history[0], history[0]], cache=False)


def test_empty_history_answers_nothing(tmp_path):
    index = HistoryIndex.build([], cache_dir=tmp_path)
    assert len(index) == 0 and index.search("anything", threshold=-1.0) == []
    assert HistoryIndex.build([], cache_dir=tmp_path).cache_status == "hit"


# ------------------------------------------------------------------------------------------ cache
def files(folder) -> dict:
    return {p.suffix: p for p in sorted(folder.iterdir()) if p.suffix in (".npy", ".json")}


def test_cache_is_reused_without_the_model(history, tmp_path, monkeypatch):
    fresh = HistoryIndex.build(history, cache_dir=tmp_path)
    assert fresh.cache_status == "built" and fresh.encoded == len(fresh.texts) == 11
    cached_files = files(tmp_path)
    sidecar = json.loads(cached_files[".json"].read_text())
    assert sidecar["count"] == 11 and sidecar["dims"] == 384 and sidecar["key"]["history_digest"] == history_digest(history)
    assert np.load(cached_files[".npy"], allow_pickle=False).dtype == np.float32

    def must_not_embed(*args, **kwargs):  # stand-in: proves the reload embeds nothing
        raise AssertionError("the model was called on a cached reload")

    monkeypatch.setattr(retrieval, "_encode", must_not_embed)
    again = HistoryIndex.build(history, cache_dir=tmp_path)
    assert again.cache_status == "hit" and again.encoded == 0
    assert np.array_equal(again.vectors(), fresh.vectors())
    for query in QUERIES:  # identical ids and scores, to the last digit, from the cache and a fresh build
        for k, threshold in [(20, 0.5), (20, -1.0), (3, 0.2)]:
            assert again.search(query, k=k, threshold=threshold) == fresh.search(query, k=k, threshold=threshold)


def test_cache_rebuilt_when_the_history_changes(history, tmp_path):
    HistoryIndex.build(history, cache_dir=tmp_path)
    changed = [dict(e) for e in history]
    changed[3]["object"] = "vegan restaurants in Porto"
    index = HistoryIndex.build(changed, cache_dir=tmp_path)
    assert index.cache_status == "built" and index.encoded == 11
    assert index.history_digest != history_digest(history)
    assert len(list(tmp_path.glob("*.npy"))) == 2  # one per history: both stay usable
    assert HistoryIndex.build(changed, cache_dir=tmp_path).cache_status == "hit"
    assert index.search("vegan food in Porto", k=1)[0]["id"] == "u-004"
    other_key = HistoryIndex.build(history, key_fields="all", cache_dir=tmp_path)
    assert other_key.cache_status == "built" and len(list(tmp_path.glob("*.npy"))) == 3


def _truncate(p):
    p.write_bytes(p.read_bytes()[:-100])


def _flip_last_byte(p):
    raw = bytearray(p.read_bytes())
    raw[-1] ^= 0x40
    p.write_bytes(bytes(raw))


def _sidecar_edit(field, value):
    def edit(p):
        doc = json.loads(p.read_text())
        doc[field] = value
        p.write_text(json.dumps(doc))
    return edit


def _consistent_pickle(npy, sidecar):
    """An object array (needs pickle) with a sidecar whose SHA-256 matches it: still refused."""
    import hashlib
    import io

    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}] * 11, dtype=object), allow_pickle=True)
    npy.write_bytes(buf.getvalue())
    _sidecar_edit("vectors_sha256", "sha256:" + hashlib.sha256(buf.getvalue()).hexdigest())(sidecar)


def _consistent_wrong_length(npy, sidecar):
    """Vectors twice too long, with a matching SHA-256: refused for not being unit vectors."""
    import hashlib
    import io

    buf = io.BytesIO()
    np.save(buf, np.load(npy) * 2, allow_pickle=False)
    npy.write_bytes(buf.getvalue())
    _sidecar_edit("vectors_sha256", "sha256:" + hashlib.sha256(buf.getvalue()).hexdigest())(sidecar)


@pytest.mark.parametrize("damage,why", [
    (lambda npy, side: _truncate(npy), "does not match its SHA-256"),
    (lambda npy, side: _flip_last_byte(npy), "does not match its SHA-256"),
    (lambda npy, side: npy.unlink(), "vector file unreadable"),
    (lambda npy, side: side.write_text('{"format": "webfreeze-history-index", "vers'), "sidecar unreadable"),
    (lambda npy, side: side.unlink(), None),
    (lambda npy, side: _sidecar_edit("count", 12)(side), "other texts"),
    (lambda npy, side: _sidecar_edit("dims", 385)(side), "wrong type or shape"),
    (lambda npy, side: _sidecar_edit("key", {"history_digest": "sha256:0"})(side), "another key"),
    (lambda npy, side: _sidecar_edit("version", 99)(side), "another format or version"),
    (_consistent_pickle, "vector file unreadable"),
    (_consistent_wrong_length, "unit length"),
])
def test_damaged_cache_is_rebuilt_never_trusted(history, tmp_path, damage, why):
    fresh = HistoryIndex.build(history, cache_dir=tmp_path)
    f = files(tmp_path)
    damage(f[".npy"], f[".json"])
    index = HistoryIndex.build(history, cache_dir=tmp_path)
    if why is None:  # no sidecar: simply no cache
        assert index.cache_status == "built"
    else:
        assert index.cache_status.startswith("rebuilt: ") and why in index.cache_status
    assert index.encoded == 11 and np.array_equal(index.vectors(), fresh.vectors())
    assert index.search(QUERIES[0]) == fresh.search(QUERIES[0])
    assert HistoryIndex.build(history, cache_dir=tmp_path).cache_status == "hit"  # repaired
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left


def test_unwritable_cache_folder_still_gives_an_index(history, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    index = HistoryIndex.build(history, cache_dir=blocker / "sub")
    assert index.cache_status.startswith("built, not cached: ") and "\n" not in index.cache_status
    assert index.search(QUERIES[0])


def test_default_cache_folder_follows_webfreeze_cache(history, tmp_path, monkeypatch):
    monkeypatch.setenv("WEBFREEZE_CACHE", str(tmp_path))
    assert retrieval.default_cache_dir() == tmp_path / "history-index"
    HistoryIndex.build(history)
    assert len(list((tmp_path / "history-index").glob("*.npy"))) == 1


def test_a_fresh_process_gives_the_same_bytes(history, tmp_path):
    """Run twice, compare bytes: a fresh build in another process against this one's cached index."""
    HistoryIndex.build(history, cache_dir=tmp_path)
    cached = HistoryIndex.build(history, cache_dir=tmp_path)
    assert cached.cache_status == "hit"
    src = tmp_path / "h.jsonl"
    write_history(src, history)
    code = ("import json, sys\n"
            "from webfreeze.personas.history import load_history\n"
            "from webfreeze.personas.retrieval import HistoryIndex\n"
            "ix = HistoryIndex.build(load_history(sys.argv[1]), cache=False)\n"
            "print(json.dumps([ix.search(q, threshold=-1.0) for q in json.loads(sys.argv[2])], sort_keys=True))\n")
    mine = json.dumps([cached.search(q, threshold=-1.0) for q in QUERIES], sort_keys=True)
    # Two processes: one with the export cache this one uses, one that exports the model afresh.
    for env in (dict(os.environ), dict(os.environ, WEBFREEZE_CACHE=str(tmp_path / "fresh-export"))):
        out = subprocess.run([sys.executable, "-c", code, str(src), json.dumps(QUERIES)], capture_output=True,
                             text=True, timeout=600, env=env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == mine
        assert out.stderr == ""  # nothing printed by the export or ONNX Runtime
    assert len(list((tmp_path / "fresh-export" / "onnx-models").glob("*.onnx"))) == 1


# ------------------------------------------------------------------------------------------ the ONNX export
def test_export_cache_is_reused_and_a_damaged_one_exported_again(model, encoder, tmp_path):
    from webfreeze.llm.embeddings import load_encoder

    fp = retrieval._fingerprint(*reversed(retrieval._model_source(retrieval.DEFAULT_MODEL)))
    first = load_encoder(model, "all-MiniLM-L6-v2", fp, tmp_path)
    assert first.status == "exported"
    onnx_file, sidecar = sorted(tmp_path.glob("*.onnx")), sorted(tmp_path.glob("*.json"))
    assert len(onnx_file) == len(sidecar) == 1
    assert json.loads(sidecar[0].read_text())["key"]["tools"]["onnxruntime"]
    want = np.vstack([encoder.encode_one(q) for q in QUERIES])
    again = load_encoder(model, "all-MiniLM-L6-v2", fp, tmp_path)
    assert again.status == "cached"
    for enc in (first, again):  # bit for bit the encoder retrieval uses (its export cache elsewhere)
        assert np.array_equal(np.vstack([enc.encode_one(q) for q in QUERIES]), want)
    raw = bytearray(onnx_file[0].read_bytes())
    raw[len(raw) // 2] ^= 0x01  # one bit of one weight
    onnx_file[0].write_bytes(bytes(raw))
    repaired = load_encoder(model, "all-MiniLM-L6-v2", fp, tmp_path)
    assert repaired.status == "exported"  # the hash did not match: never trusted
    assert np.array_equal(np.vstack([repaired.encode_one(q) for q in QUERIES]), want)
    assert load_encoder(model, "all-MiniLM-L6-v2", fp, tmp_path).status == "cached"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary files left
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the export folder would be")
    uncached = load_encoder(model, "all-MiniLM-L6-v2", fp, blocker / "sub")
    assert uncached.status.startswith("exported, not cached: ") and "\n" not in uncached.status
    assert np.array_equal(np.vstack([uncached.encode_one(q) for q in QUERIES]), want)


def test_missing_onnxruntime_is_one_line(history, tmp_path, monkeypatch):
    """Stand-in: an onnxruntime that cannot be imported (uninstalling it here would break the others)."""
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    monkeypatch.setattr(retrieval, "_ENCODERS", {})
    with pytest.raises(RetrievalError, match=r"needs onnxruntime: pip install") as err:
        HistoryIndex.build(history, cache_dir=tmp_path)
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------------------------------ models
def test_missing_model_folder_is_one_line(history, tmp_path):
    with pytest.raises(RetrievalError, match="no such folder") as err:
        HistoryIndex.build(history, model=str(tmp_path / "no-model"), cache=False)
    assert "\n" not in str(err.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RetrievalError, match="not a sentence-transformers model folder"):
        HistoryIndex.build(history, model=str(tmp_path / "empty"), cache=False)


def test_model_not_on_disk_is_one_line_and_never_downloaded(history):
    # A name absent from the local Hugging Face cache: loaded with local_files_only and the hub
    # offline, so it fails at once instead of downloading.
    with pytest.raises(RetrievalError, match="not on disk") as err:
        HistoryIndex.build(history, model="sentence-transformers/paraphrase-albert-small-v2", cache=False)
    assert "\n" not in str(err.value)


def test_a_model_by_folder_path(history, tmp_path):
    """Any sentence-transformers folder: here the installed MiniLM's, named by its path (its own
    model id in the identity and the cache key, the same vectors)."""
    from webfreeze.llm.embeddings import minilm_path

    by_path = HistoryIndex.build(history, model=str(minilm_path()), cache_dir=tmp_path)
    default = HistoryIndex.build(history, cache_dir=tmp_path)
    assert by_path.identity()["model"] == str(minilm_path().resolve()) and default.cache_status == "built"
    assert np.array_equal(by_path.vectors(), default.vectors())


# ------------------------------------------------------------------------------------------ the handle
def test_open_user_history(history, tmp_path):
    personas = tmp_path / "personas"
    (personas / "p01").mkdir(parents=True)
    write_history(personas / "p01" / "history.jsonl", history)
    handle = open_user_history(personas, "p01", k=3, threshold=0.3, cache_dir=tmp_path / "cache")
    got = handle.search(QUERIES[0])
    assert len(got) == 3 and got == handle.index.search(QUERIES[0], k=3, threshold=0.3)
    assert handle.identity() == {"history_digest": history_digest(history), "model": "all-MiniLM-L6-v2",
                                 "key_fields": ["type", "object"], "k": 3, "threshold": 0.3}


def test_open_user_history_errors_are_one_line(history, tmp_path):
    personas = tmp_path / "personas"
    (personas / "p02").mkdir(parents=True)
    (personas / "p02" / "history.jsonl").write_text('{"timestamp": "2024-01-01 10:00:00"}\n')
    cases = [("p09", "no such persona folder"), ("../x", "not a persona folder's name"),
             ("p02", r"p02/history.jsonl:1: entry has no 'type'")]
    for pid, message in cases:
        with pytest.raises(RetrievalError, match=message) as err:
            open_user_history(personas, pid, cache=False)
        assert "\n" not in str(err.value)
    (personas / "p03").mkdir()
    with pytest.raises(RetrievalError, match="no such history file"):
        open_user_history(personas, "p03", cache=False)
