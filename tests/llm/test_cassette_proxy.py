"""The cassette proxy: an OpenAI-compatible endpoint on 127.0.0.1 in front of our LLM cassette, for
agents we did not write. Real parts only: a real upstream server on loopback (tests/llm_server.py),
the real proxy, the ``openai`` package as the client, a real SQLite cassette, and the CLI command
in its own process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pytest
from llm_server import ChatServer, completion

from webfreeze.llm.cassette import Cassette
from webfreeze.llm.cassette_proxy import CassetteProxy, ProxyRefusal, flatten_for_local
from webfreeze.llm.errors import LLMError

ROOT = Path(__file__).resolve().parents[2]
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))
# as AgentLab sends them: content as a list of text parts
MESSAGES = [{"role": "system", "content": [{"type": "text", "text": "You are a web agent."}]},
            {"role": "user", "content": [{"type": "text", "text": "Goal: count the e-prints."},
                                         {"type": "text", "text": "[12] link 'About'"}]}]


def echo(request: dict):
    """An upstream whose answer depends on the request (and on how often it was asked)."""
    echo.count = getattr(echo, "count", 0) + 1
    last = request["messages"][-1]["content"]
    said = last if isinstance(last, str) else " | ".join(p["text"] for p in last)
    return 200, completion(f"answer {echo.count} to {said}", 11, 5, model="upstream-model", call_id=f"id-{echo.count}")


def post(url: str, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with NO_PROXY.open(request, timeout=60) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def ask(url: str, content: str = "hello") -> tuple[int, bytes]:
    return post(url, {"model": "gpt-test", "messages": [{"role": "user", "content": content}], "temperature": 0})


@pytest.fixture
def upstream():
    echo.count = 0
    server = ChatServer(echo)
    yield server
    server.close()


def test_record_then_strict_replay_answers_the_same_bytes_without_the_upstream(tmp_path, upstream):
    cassette = tmp_path / "c.sqlite"
    with CassetteProxy(cassette, "record", upstream=upstream.url, log=None) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="k", http_client=openai.DefaultHttpxClient(trust_env=False))
        reply = client.chat.completions.create(model="gpt-test", messages=MESSAGES, temperature=0.1)
        recorded = [ask(proxy.base_url, "one"), ask(proxy.base_url, "two"), ask(proxy.base_url, "one")]
    assert reply.choices[0].message.content == "answer 1 to Goal: count the e-prints. | [12] link 'About'"
    assert reply.model == "upstream-model" and reply.usage.total_tokens == 16
    assert [s for s, _ in recorded] == [200, 200, 200]
    # the same request asked twice is two calls (n = 0, 1), answered in recorded order
    assert json.loads(recorded[2][1])["choices"][0]["message"]["content"] == "answer 4 to one"
    assert len(upstream.requests) == 4
    upstream.close()  # the upstream is gone: only the cassette can answer now
    with CassetteProxy(cassette, "replay", log=None) as proxy:
        replayed = [ask(proxy.base_url, "one"), ask(proxy.base_url, "two"), ask(proxy.base_url, "one")]
        assert proxy.stats["cassette_hits"] == 3 and proxy.stats["upstream_calls"] == 0
    assert replayed == recorded  # byte for byte
    with Cassette(cassette, "replay") as c:
        rows = c.rows()
    assert len(rows) == 4 and {r["purpose"] for r in rows} == {"proxy"} and {r["mode"] for r in rows} == {"record"}
    # the client's request is stored as sent: AgentLab's list of text parts included
    assert any(json.loads(r["request"])["messages"] == MESSAGES for r in rows)


def test_a_strict_replay_miss_is_an_http_error_with_one_line(tmp_path, upstream):
    cassette = tmp_path / "c.sqlite"
    with CassetteProxy(cassette, "record", upstream=upstream.url, log=None) as proxy:
        proxy.begin_episode("task-1")
        assert ask(proxy.base_url, "stored question")[0] == 200
    with CassetteProxy(cassette, "replay", log=None) as proxy:
        proxy.begin_episode("task-1")
        status, body = ask(proxy.base_url, "stored questioM")
        # the openai package does not retry a 422 (it would a 5xx): the agent learns at once
        client = openai.OpenAI(base_url=proxy.base_url, api_key="k", max_retries=2,
                               http_client=openai.DefaultHttpxClient(trust_env=False))
        with pytest.raises(openai.UnprocessableEntityError):
            client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "new"}])
        assert proxy.stats["misses"] == 2 and len(proxy.misses) == 2
    assert status == 422
    message = json.loads(body)["error"]["message"]
    assert "\n" not in message and message == proxy.misses[0]
    assert message.startswith("strict replay: no stored LLM call for task task-1 step 0 (proxy)")
    assert "messages[0].content at char 14" in message  # where it differs from the nearest stored one


def test_auto_answers_what_is_stored_and_records_the_rest(tmp_path, upstream):
    cassette = tmp_path / "c.sqlite"
    with CassetteProxy(cassette, "auto", upstream=upstream.url, log=None) as proxy:
        first = ask(proxy.base_url, "a")
    with CassetteProxy(cassette, "auto", upstream=upstream.url, log=None) as proxy:
        again, new = ask(proxy.base_url, "a"), ask(proxy.base_url, "b")
        assert proxy.stats["cassette_hits"] == 1 and proxy.stats["upstream_calls"] == 1
    assert again == first
    assert json.loads(new[1])["choices"][0]["message"]["content"] == "answer 2 to b"
    with Cassette(cassette, "replay") as c:
        assert len(c) == 2


def test_upstream_failures_are_one_line_and_store_nothing(tmp_path):
    server = ChatServer(lambda request: (400, {"error": {"message": "model\nnot found"}}))
    cassette = tmp_path / "c.sqlite"
    try:
        with CassetteProxy(cassette, "record", upstream=server.url, log=None) as proxy:
            status, body = ask(proxy.base_url)
    finally:
        server.close()
    assert status == 502
    message = json.loads(body)["error"]["message"]
    assert message.startswith(f"upstream {server.url} failed (not retried): HTTP 400") and "\n" not in message
    with Cassette(cassette, "replay") as c:
        assert len(c) == 0


def test_requests_a_cassette_cannot_hold_are_refused(tmp_path, upstream):
    with CassetteProxy(tmp_path / "c.sqlite", "record", upstream=upstream.url, log=None) as proxy:
        streamed = post(proxy.base_url, {"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True})
        several = post(proxy.base_url, {"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 3})
        not_chat = post(proxy.base_url, {"model": "m"})
    assert [streamed[0], several[0], not_chat[0]] == [400, 400, 400]
    assert "stream" in json.loads(streamed[1])["error"]["message"]
    assert upstream.requests == []


def test_local_flattening_joins_text_parts_and_refuses_images():
    flat = flatten_for_local({"model": "m", "messages": MESSAGES})
    assert flat["messages"][1]["content"] == "Goal: count the e-prints.\n[12] link 'About'"
    assert flat["messages"][0] == {"role": "system", "content": "You are a web agent."}
    image = {"role": "user", "content": [{"type": "text", "text": "see"},
                                         {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}
    with pytest.raises(ProxyRefusal, match=r"messages\[0\] holds an image: the local model reads text only"):
        flatten_for_local({"messages": [image]})


def test_a_local_proxy_refuses_an_image_in_one_line(tmp_path):
    cassette = tmp_path / "c.sqlite"
    Cassette(cassette, "record").close()
    # strict replay starts no model: the refusal comes before anything is looked up
    with CassetteProxy(cassette, "replay", local=True, log=None) as proxy:
        status, body = post(proxy.base_url, {"model": "m", "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}]})
    assert status == 400 and "reads text only" in json.loads(body)["error"]["message"]


def test_settings_that_cannot_work_are_refused():
    with pytest.raises(LLMError, match="give an upstream URL or the local model"):
        CassetteProxy("c.sqlite", "record")
    with pytest.raises(LLMError, match="not both"):
        CassetteProxy("c.sqlite", "auto", upstream="http://127.0.0.1:1/v1", local=True)
    with pytest.raises(LLMError, match="unknown cassette mode"):
        CassetteProxy("c.sqlite", "live", upstream="http://127.0.0.1:1/v1")


def _cli(*args, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "webfreeze", "cassette", "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


def test_cassette_serve_replays_and_says_each_miss_in_one_line(tmp_path, upstream):
    cassette = tmp_path / "c.sqlite"
    with CassetteProxy(cassette, "record", upstream=upstream.url, log=None) as proxy:
        recorded = ask(proxy.base_url, "q")
    serve = _cli(str(cassette), "--mode", "replay")
    try:
        line = serve.stdout.readline().strip()
        assert line.startswith("OPENAI_BASE_URL=http://127.0.0.1:"), line
        url = line.split("=", 1)[1]
        assert ask(url, "q") == recorded
        assert ask(url, "other")[0] == 422
    finally:
        serve.send_signal(signal.SIGINT)
        _, err = serve.communicate(timeout=60)
    lines = err.splitlines()
    assert sum(ln.startswith("cassette proxy: strict replay: no stored LLM call") for ln in lines) == 1
    assert lines[-1] == "stopped: 2 calls, 1 from the cassette, 0 upstream, 1 misses"
    assert "Traceback" not in err


def test_cassette_serve_errors_are_one_line(tmp_path):
    for args, says in (([str(tmp_path / "none.sqlite"), "--mode", "replay"], "no such cassette"),
                       ([str(tmp_path / "c.sqlite"), "--mode", "record"], "give an upstream URL")):
        done = _cli(*args)
        _, err = done.communicate(timeout=60)
        assert done.returncode == 1, err
        assert err.count("\n") == 1 and err.startswith("webfreeze: error: ") and says in err, err
    assert not (tmp_path / "c.sqlite").exists()  # nothing half-written
