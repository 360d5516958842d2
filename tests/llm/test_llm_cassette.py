"""The LLM cassette: canonical requests and keys, recorded order, strict-replay misses that say
where a request changed, content digests, info, verify, merge, many writers, and the CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
import subprocess
import sys

import pytest

from webfreeze.llm import (
    Cassette,
    CassetteError,
    CassetteMiss,
    LLMClient,
    LLMConfig,
    LLMError,
    build_request,
    canonical_request,
    first_difference,
    merge,
    request_key,
    verify_file,
)

CONFIG = LLMConfig(model="test-model", base_url="http://127.0.0.1:9/v1")  # never called: replay only


def messages(goal: str, view: str = "[1] link 'Home'") -> list:
    return [{"role": "system", "content": "You are a web agent. Reply with Thought and Action."},
            {"role": "user", "content": f"Goal: {goal}\nView:\n{view}"}]


def answer(text: str, model: str = "provider-model-1", prompt: int = 10, completion: int = 2) -> dict:
    return {"text": text, "finish_reason": "stop", "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
            "model": model, "system_fingerprint": "fp1", "latency_ms": 12.5}


def put(cassette: Cassette, msgs: list, text: str, *, n: int = 0, task_id="t1", step=0, purpose="act", **kw):
    """Store a call as the client would for ``msgs`` under CONFIG; returns its key."""
    request_text = canonical_request(build_request(CONFIG, msgs))
    key = request_key(build_request(CONFIG, msgs))
    cassette.store(key, n, request_text, answer(text, **kw), task_id=task_id, step=step, purpose=purpose)
    return key


# ------------------------------------------------------------------------------ keys
def test_canonical_request_is_sorted_compact_and_keeps_unicode():
    text = canonical_request({"b": 1, "a": {"d": "é→", "c": [1.5, None]}})
    assert text == '{"a":{"c":[1.5,null],"d":"é→"},"b":1}'
    assert request_key({"a": {"c": [1.5, None], "d": "é→"}, "b": 1}) == hashlib.sha256(text.encode()).hexdigest()


def test_image_data_urls_are_keyed_by_the_digest_of_their_bytes():
    def request(png: bytes) -> dict:
        url = "data:image/png;base64," + base64.b64encode(png).decode()
        return {"model": "m", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": url, "detail": "low"}}]}]}

    a, b = b"\x89PNG first", b"\x89PNG second"
    text = canonical_request(request(a))
    assert f'"url":"sha256:{hashlib.sha256(a).hexdigest()}"' in text and "base64" not in text
    assert '"detail":"low"' in text
    assert request_key(request(a)) == request_key(request(a)) != request_key(request(b))


def test_zero_and_zero_point_zero_give_one_key():
    assert LLMConfig(temperature=0, top_p=1).to_dict() == LLMConfig(temperature=0.0, top_p=1.0).to_dict()
    assert request_key(build_request(LLMConfig(temperature=0), messages("x"))) == \
        request_key(build_request(LLMConfig(temperature=0.0), messages("x")))


def test_not_json_is_one_line():
    with pytest.raises(LLMError, match="not plain JSON"):
        canonical_request({"messages": [{"role": "user", "content": b"bytes"}]})


def test_first_difference_names_the_place():
    a = {"messages": [{"content": "same"}, {"content": "abcdef"}], "temperature": 0.0}
    assert first_difference(a, a) is None
    assert first_difference(a, {**a, "messages": [{"content": "same"}, {"content": "abcxef"}]}) == \
        "messages[1].content at char 3"
    assert first_difference(a, {**a, "temperature": 0.7}) == "temperature (0.0 vs stored 0.7)"
    assert first_difference(a, {**a, "messages": a["messages"][:1]}) == "messages has 2 items, the stored one 1"
    assert first_difference({**a, "top_k": 0}, a) == "top_k (not in the stored request)"


# ------------------------------------------------------------------------------ order and misses
def test_identical_requests_answer_in_recorded_order_then_the_last_repeats(tmp_path):
    path = tmp_path / "c.sqlite"
    with Cassette(path, "record") as cassette:
        for n, text in enumerate(["first", "second"]):
            put(cassette, messages("g"), text, n=n)
        put(cassette, messages("other"), "other answer")
    with Cassette(path, "replay") as cassette:
        client = LLMClient(CONFIG, cassette)
        client.begin_episode("t1")
        assert [client.chat(messages("g")).text for _ in range(4)] == ["first", "second", "second", "second"]
        assert client.chat(messages("other")).text == "other answer"
        client.begin_episode("t2")
        assert client.chat(messages("g")).text == "first"
        assert client.stats["cassette_hits"] == 6 and client.stats["provider_calls"] == 0


def test_record_on_an_existing_cassette_keeps_what_is_there(tmp_path):
    path = tmp_path / "c.sqlite"
    with Cassette(path, "record") as cassette:
        key = put(cassette, messages("g"), "old")
    with Cassette(path, "record") as cassette:
        text = canonical_request(build_request(CONFIG, messages("g")))
        held, inserted = cassette.store(key, 0, text, answer("new"))
        assert (held["text"], inserted) == ("old", False)
        held, inserted = cassette.store(key, 1, text, answer("new"))
        assert (held["text"], inserted) == ("new", True)
        assert len(cassette) == 2


def test_a_strict_miss_names_task_step_and_where_the_nearest_request_differs(tmp_path):
    path = tmp_path / "c.sqlite"
    view = "\n".join(f"[{i}] link 'Paper {i}'" for i in range(40))
    with Cassette(path, "record") as cassette:
        put(cassette, messages("find paper 7", view), "Action: Click [7]", task_id="arxiv-12", step=3)
        put(cassette, messages("unrelated"), "x", task_id="arxiv-99", step=3)
    changed = view.replace("'Paper 25'", "'Paper 25 (v2)'")
    with Cassette(path, "replay") as cassette:
        client = LLMClient(CONFIG, cassette)
        client.begin_episode("arxiv-12")
        with pytest.raises(CassetteMiss) as err:
            client.chat(messages("find paper 7", changed), step=3)
    message = str(err.value)
    char = messages("find paper 7", view)[1]["content"].index("'Paper 25'") + len("'Paper 25")
    assert "\n" not in message
    assert "task arxiv-12 step 3 (act)" in message
    assert f"nearest stored request: task arxiv-12 step 3, differing at messages[1].content at char {char}" in message
    assert err.value.task_id == "arxiv-12" and err.value.step == 3 and err.value.nearest["task_id"] == "arxiv-12"


def test_a_miss_in_an_empty_cassette(tmp_path):
    Cassette(tmp_path / "c.sqlite", "record").close()
    with Cassette(tmp_path / "c.sqlite", "replay") as cassette:
        client = LLMClient(CONFIG, cassette)
        with pytest.raises(CassetteMiss, match="holds no calls"):
            client.chat(messages("g"), step=0)


def test_replay_reads_only(tmp_path):
    path = tmp_path / "c.sqlite"
    with pytest.raises(CassetteError, match="no such cassette"):
        Cassette(path, "replay")
    with Cassette(path, "record") as cassette:
        put(cassette, messages("g"), "a")
        digest = cassette.digest()
    with Cassette(path, "replay") as cassette:
        with pytest.raises(CassetteError, match="strict replay"):
            put(cassette, messages("h"), "b")
        assert cassette.digest() == digest
    with pytest.raises(LLMError, match="unknown cassette mode"):
        Cassette(path, "rewind")


def test_a_foreign_or_damaged_file_is_refused_without_being_changed(tmp_path):
    foreign = tmp_path / "archive.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE exchanges (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    for mode in ("record", "replay"):
        with pytest.raises(CassetteError, match="not an LLM cassette"):
            Cassette(foreign, mode)
    tables = [r[0] for r in sqlite3.connect(foreign).execute("SELECT name FROM sqlite_master")]
    assert tables == ["exchanges"]

    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(CassetteError) as err:
        Cassette(garbage, "replay")
    assert "damaged or not a cassette" in str(err.value) and "\n" not in str(err.value)

    newer = tmp_path / "newer.sqlite"
    Cassette(newer, "record").close()
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'version'")
    conn.commit()
    conn.close()
    with pytest.raises(CassetteError, match="version 2 is newer"):
        Cassette(newer, "replay")


# ------------------------------------------------------------------------------ digest, info, verify
def test_digest_is_over_content_not_file_bytes(tmp_path):
    calls = [(messages(f"goal {i}"), f"answer {i}") for i in range(5)]
    with Cassette(tmp_path / "a.sqlite", "record") as a, Cassette(tmp_path / "b.sqlite", "record") as b:
        for msgs, text in calls:
            put(a, msgs, text)
        for msgs, text in reversed(calls):
            put(b, msgs, text)
        assert a.digest() == b.digest() and a.digest().startswith("sha256:")
        put(b, messages("one more"), "x")
        assert a.digest() != b.digest()


def test_info_counts(tmp_path):
    with Cassette(tmp_path / "c.sqlite", "record") as cassette:
        put(cassette, messages("g"), "a", task_id="t1", step=0)
        put(cassette, messages("g"), "b", n=1, task_id="t1", step=1)
        put(cassette, messages("h"), "c", task_id="t2", step=0, purpose="memory", model="provider-model-2",
            prompt=100, completion=20)
        info = cassette.info()
    assert (info["calls"], info["distinct_requests"], info["tasks"]) == (3, 2, 2)
    assert info["purposes"] == {"act": 2, "memory": 1}
    assert info["models"] == ["provider-model-1", "provider-model-2"] and info["request_models"] == ["test-model"]
    assert (info["prompt_tokens"], info["completion_tokens"]) == (120, 24)
    assert info["modes"] == ["record"] and info["format"] == "webfreeze-llm-cassette" and info["version"] == 1


def test_verify_finds_tampered_rows(tmp_path):
    path = tmp_path / "c.sqlite"
    with Cassette(path, "record") as cassette:
        key = put(cassette, messages("g"), "a")
        put(cassette, messages("h"), "b")
        assert cassette.verify() == []
    conn = sqlite3.connect(path)
    conn.execute("UPDATE calls SET request = replace(request, 'Goal: g', 'Goal: G') WHERE key = ?", (key,))
    conn.execute("UPDATE calls SET response = '{not json' WHERE key != ?", (key,))
    conn.commit()
    conn.close()
    problems = verify_file(path)
    assert any(p == f"call {key[:12]}/0: key is not the SHA-256 of its request" for p in problems)
    assert any(p.endswith("response is not JSON") for p in problems) and len(problems) == 2
    assert verify_file(tmp_path / "missing.sqlite") == [f"{tmp_path / 'missing.sqlite'}: no such cassette"]


# ------------------------------------------------------------------------------ merge
def test_merge_is_a_union_that_keeps_the_first_answer(tmp_path):
    a, b, out = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "out.sqlite"
    with Cassette(a, "record") as ca, Cassette(b, "record") as cb:
        put(ca, messages("shared"), "same")
        put(cb, messages("shared"), "same")  # a duplicate
        put(ca, messages("disputed"), "from a")
        put(cb, messages("disputed"), "from b")  # a conflict
        put(cb, messages("only b"), "b's")
    stats = merge(out, [a, b])
    assert {k: stats[k] for k in ("sources", "read", "calls", "duplicates", "conflicts")} == \
        {"sources": 2, "read": 5, "calls": 3, "duplicates": 1, "conflicts": 1}
    with Cassette(out, "replay") as merged:
        client = LLMClient(CONFIG, merged)
        assert client.chat(messages("disputed")).text == "from a"
        assert client.chat(messages("only b")).text == "b's"
        assert merged.digest() == stats["digest"] and merged.verify() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.sqlite", "b.sqlite", "out.sqlite"]  # no temp left

    with pytest.raises(CassetteError, match="already exists"):
        merge(out, [b])
    assert merge(out, [b], force=True)["calls"] == 3
    with pytest.raises(CassetteError, match="which this command reads"):
        merge(a, [a, b], force=True)
    with pytest.raises(CassetteError, match="no such cassette"):
        merge(tmp_path / "new.sqlite", [a, tmp_path / "missing.sqlite"])
    assert not (tmp_path / "new.sqlite").exists()


# ------------------------------------------------------------------------------ many writers
WRITER = """
import sys
from webfreeze.llm import Cassette, LLMConfig, build_request, canonical_request, request_key
config = LLMConfig(model="test-model")
worker = sys.argv[2]
with Cassette(sys.argv[1], "record") as cassette:
    for i in range(40):
        request = build_request(config, [{"role": "user", "content": f"worker {worker} call {i}"}])
        cassette.store(request_key(request), 0, canonical_request(request),
                       {"text": f"answer {worker}/{i}", "finish_reason": "stop", "usage": {}},
                       task_id=f"task-{worker}", step=i, purpose="act")
"""


def test_many_processes_write_one_cassette(tmp_path):
    path = tmp_path / "shared.sqlite"
    workers = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(w)], stderr=subprocess.PIPE, text=True)
               for w in range(3)]
    errors = [p.communicate(timeout=120)[1] for p in workers]
    assert [p.returncode for p in workers] == [0, 0, 0], errors
    with Cassette(path, "replay") as cassette:
        assert len(cassette) == 120 and cassette.info()["tasks"] == 3 and cassette.verify() == []


# ------------------------------------------------------------------------------ the CLI
def test_cli_info_verify_merge(tmp_path, cli_here):
    a, b, out = tmp_path / "a.sqlite", tmp_path / "b.sqlite", tmp_path / "out.sqlite"
    with Cassette(a, "record") as ca, Cassette(b, "record") as cb:
        put(ca, messages("g"), "a")
        put(cb, messages("h"), "b", task_id="t2")
        digest_a = ca.digest()

    r = cli_here("cassette", "info", a, "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["calls"] == 1 and info["digest"] == digest_a

    r = cli_here("cassette", "merge", out, a, b)
    assert r.returncode == 0, r.stderr
    assert "2 calls from 2 cassettes" in r.stdout
    r = cli_here("cassette", "merge", out, a, b)
    assert r.returncode == 1
    assert r.stderr.strip() == f"webfreeze: error: {out}: already exists (use --force to replace it)"

    conn = sqlite3.connect(out)
    conn.execute("UPDATE calls SET request = request || ' '")
    conn.commit()
    conn.close()
    r = cli_here("cassette", "verify", out)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1
    assert "request is not in canonical form (and 1 more)" in r.stderr

    r = cli_here("cassette", "merge", "--force", out, a, b)
    assert r.returncode == 0, r.stderr
    r = cli_here("cassette", "verify", out)
    assert r.returncode == 0 and r.stdout.startswith(f"{out}: ok, 2 calls, sha256:")
    missing = tmp_path / "missing.sqlite"
    r = cli_here("cassette", "info", missing)
    assert r.returncode == 1 and r.stderr.strip() == f"webfreeze: error: {missing}: no such cassette"
