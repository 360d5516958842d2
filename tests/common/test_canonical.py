"""The determinism primitives in webfreeze.common (canonical JSON, file digests) keep every identity
computed before they existed: cassette keys, suite and history digests, study identities. Each
check runs over real inputs (the shipped demo cassette, suites and context pool, a generated
persona history) or pins the exact bytes, so a change of spelling fails here first."""

from __future__ import annotations

import hashlib
import json
import math
import sqlite3
from pathlib import Path

import pytest

from webfreeze.common.canonical import canonical_bytes, canonical_json
from webfreeze.common.digests import file_digest, file_sha256
from webfreeze.eval.tasks import canonical_line, load_suite
from webfreeze.llm.cassette import canonical_request, request_key
from webfreeze.personas.generate import generate_persona
from webfreeze.personas.history import history_digest
from webfreeze.studies.spec import digest_of

DATA = Path(__file__).resolve().parents[2] / "webfreeze" / "demo" / "data"


# ------------------------------------------------------------------ the spelling itself
def test_canonical_json_spelling_is_pinned():
    value = {"b": [1, 2.5, True, None, {"z": "\u00e9\u2603", "a": "\U0001F600"}], "a": "x\"\\\n", "\u00e9": 0.0,
             "n": -0, "big": 10**20, "tiny": 1e-7}
    want = ('{"a":"x\\"\\\\\\n","b":[1,2.5,true,null,{"a":"\U0001F600","z":"\u00e9\u2603"}],'
            '"big":100000000000000000000,"n":0,"tiny":1e-07,"\u00e9":0.0}')
    assert canonical_json(value) == want
    assert canonical_bytes(value) == want.encode("utf-8")
    # what the six copies it replaced wrote, spelled out: sorted keys, compact, non-ASCII as itself
    assert canonical_json(value) == json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_nan_is_spelled_by_default_and_refused_when_strict():
    # task, history and study digests always accepted NaN (json.loads reads it); the cassette never did
    assert canonical_json([math.nan, math.inf, -math.inf]) == "[NaN,Infinity,-Infinity]"
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan}, allow_nan=False)
    with pytest.raises(ValueError):
        canonical_bytes([math.inf], allow_nan=False)


# ------------------------------------------------------------------ real inputs
def test_the_shipped_demo_cassette_keys_are_unchanged():
    with sqlite3.connect(DATA / "llm-cassette.sqlite") as conn:
        rows = conn.execute("SELECT key, request, response FROM calls").fetchall()
    assert len(rows) > 50
    for key, request, response in rows:
        assert canonical_request(json.loads(request)) == request
        assert request_key(json.loads(request)) == key
        assert canonical_json(json.loads(response), allow_nan=False) == response


def test_the_demo_suite_digest_is_the_one_its_context_pool_recorded():
    header = json.loads((DATA / "context-pool.jsonl").read_text(encoding="utf-8").splitlines()[0])
    recorded = {s["suite"]["digest"] for s in header["sources"] if s["suite"]["name"] == "webfreeze-demo"}
    suite = load_suite(DATA / "suite")
    assert suite.digest in recorded
    assert suite.digest == "sha256:fb9136b1ce3fc554aeadc97af527bcee01e71489d2de0d8b95e255529104402b"
    assert load_suite(DATA / "long-context").digest == (
        "sha256:d3b3f0db96d8d4f2a59846afe8e8ca390490a05fc2913149f2c62ae9706a56de")


def test_suite_lines_are_canonical_json():
    suite = load_suite(DATA / "suite")
    for task in suite.tasks:
        assert canonical_line(task.raw) == canonical_json(task.raw)


def test_persona_history_digests_are_unchanged():
    # the values the per-module copies computed for these generated histories (same seed, same bytes)
    assert history_digest(generate_persona("p01", 0).entries) == (
        "sha256:13e405a7aea8ef39f0c7afe9dc56966a8cc53f1e645cc56d20636fb6d4e8c582")
    assert history_digest(generate_persona("p07", 3).entries) == (
        "sha256:bddb5d74c5b645207b84d7a87ea178a0f0164da2e4ef40c74e82e49115e256d8")


def test_study_identity_is_the_canonical_digest():
    normalised = {"name": "s", "suites": ["../suite"], "seed": 0, "agents": [{"name": "llm", "settings": {"k": 3}}],
                  "description": "caf\u00e9"}
    assert digest_of(normalised) == "sha256:" + hashlib.sha256(canonical_bytes(normalised)).hexdigest()
    assert digest_of(normalised) == "sha256:5fe5cd100383b7108e3d53ba5d8514cd9e65cc3cb6d2d66006670104df74b003"


# ------------------------------------------------------------------ file digests
def test_file_digest_reads_large_files_in_chunks_and_names_the_algorithm(tmp_path):
    p = tmp_path / "f.bin"
    data = bytes(range(256)) * 20_000  # 5 MB: more than one read
    p.write_bytes(data)
    assert file_sha256(p) == hashlib.sha256(data).hexdigest()
    assert file_digest(p) == "sha256:" + hashlib.sha256(data).hexdigest()
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert file_digest(empty) == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    with pytest.raises(FileNotFoundError):
        file_digest(tmp_path / "missing")
