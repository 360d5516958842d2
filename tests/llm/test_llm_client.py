"""The LLM client against a real OpenAI-compatible HTTP server written here (loopback): the request
it sends, retries with backoff for 429 / 5xx / timeouts / refused connections, no retry for other
4xx, the counters, the concurrency limit, and record -> strict replay through the cassette."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webfreeze.llm import (
    Cassette,
    CassetteMiss,
    LLMClient,
    LLMConfig,
    LLMError,
    ProviderError,
    SlotLimiter,
    build_request,
    canonical_request,
    request_key,
    retry_delay,
)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


class Provider:
    """A chat-completions server on 127.0.0.1 that follows a script, one action per request
    ("ok" once the script is used up): "ok", ("429", retry_after or None), "500", "400",
    ("sleep", seconds) (answers after the client has given up), "no_choices". It keeps every
    request body and header it received, and the most requests it had in flight at once."""

    def __init__(self, delay: float = 0.0):
        self.script: list = []
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.delay = delay
        self.replies = 0
        self.inflight = 0
        self.max_inflight = 0
        self.lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output clean
                pass

            def do_GET(self):
                provider._send(self, 200, {"object": "list", "data": [{"id": "fake-model-1", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with provider.lock:
                    provider.requests.append(body)
                    provider.headers.append({k.lower(): v for k, v in self.headers.items()})
                    action = provider.script.pop(0) if provider.script else "ok"
                    provider.inflight += 1
                    provider.max_inflight = max(provider.max_inflight, provider.inflight)
                self.counted = True
                try:
                    provider._act(self, action, body)
                finally:
                    provider._answered(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def _answered(self, handler) -> None:
        """A request stops being in flight before the first byte of its answer is written: the
        client may read the answer and send its next request before this handler's thread runs
        again, and that request must not be counted beside this one."""
        if getattr(handler, "counted", False):
            handler.counted = False
            with self.lock:
                self.inflight -= 1

    def _send(self, handler, status: int, payload, headers: dict | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self._answered(handler)
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                handler.send_header(k, v)
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left

    def _act(self, handler, action, body) -> None:
        kind = action[0] if isinstance(action, tuple) else action
        if kind == "429":
            retry_after = action[1] if isinstance(action, tuple) else None
            self._send(handler, 429, {"error": {"message": "Rate limit reached", "type": "rate_limit"}},
                       {"Retry-After": retry_after} if retry_after is not None else None)
        elif kind == "500":
            self._send(handler, 500, {"error": {"message": "upstream\nexploded", "type": "server_error"}})
        elif kind == "400":
            self._send(handler, 400, {"error": {"message": "context length exceeded", "type": "invalid_request"}})
        elif kind == "no_choices":
            self._send(handler, 200, {"id": "x", "object": "chat.completion", "model": "fake-model-1"})
        elif kind == "sleep":
            time.sleep(action[1])
            self._send(handler, 200, self._completion(body))
        else:
            if self.delay:
                time.sleep(self.delay)
            self._send(handler, 200, self._completion(body))

    def _completion(self, body) -> dict:
        with self.lock:
            self.replies += 1
            number = self.replies
        last = body["messages"][-1]["content"]
        last = last if isinstance(last, str) else "[parts]"
        return {"id": f"chatcmpl-{number}", "object": "chat.completion", "created": 0, "model": "fake-model-1",
                "system_fingerprint": "fp_test",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": f"reply {number} to {last}"}}],
                "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def provider():
    p = Provider()
    yield p
    p.close()


def fast(provider_or_url, **kw) -> LLMConfig:
    """A config with tiny backoffs (the retry tests wait milliseconds, not seconds), and a timeout
    an ordinary answer meets however loaded the machine is: one that ran out would be retried and
    change the counts the tests check (the timeout tests set their own)."""
    url = provider_or_url if isinstance(provider_or_url, str) else provider_or_url.base_url
    settings = dict(model="fake-model", base_url=url, backoff_s=0.001, max_backoff_s=0.01, timeout_s=60.0)
    settings.update(kw)
    return LLMConfig(**settings)


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # closed again: connections are refused


MESSAGES = [{"role": "system", "content": "You are a web agent."}, {"role": "user", "content": "hello"}]


# ------------------------------------------------------------------------------ the request
def test_chat_sends_every_setting_and_returns_the_completion(provider):
    config = fast(provider, temperature=0.5, top_p=0.9, seed=7, max_tokens=12, stop=("\n\n",),
                  extra={"repeat_penalty": 1.0, "top_k": 0})
    with LLMClient(config) as client:
        c = client.chat(MESSAGES, step=0)
    sent = provider.requests[0]
    assert sent["model"] == "fake-model" and sent["messages"] == MESSAGES
    assert (sent["temperature"], sent["top_p"], sent["seed"], sent["max_tokens"]) == (0.5, 0.9, 7, 12)
    assert sent["stop"] == ["\n\n"] and sent["repeat_penalty"] == 1.0 and sent["top_k"] == 0
    assert provider.headers[0]["authorization"] == "Bearer none"  # no key configured
    assert c.text == "reply 1 to hello" and c.finish_reason == "stop"
    assert c.usage == {"prompt_tokens": 7, "completion_tokens": 3}
    assert (c.model, c.system_fingerprint, c.from_cassette) == ("fake-model-1", "fp_test", False)
    assert c.latency_ms is not None and c.latency_ms >= 0
    # the key covers what was sent; the endpoint, timeout and retries are not in it
    assert c.key == request_key(sent)
    elsewhere = fast(closed_port_url(), temperature=0.5, top_p=0.9, seed=7, max_tokens=12, stop=("\n\n",),
                     extra={"repeat_penalty": 1.0, "top_k": 0}, timeout_s=1.0, max_retries=0)
    assert request_key(build_request(elsewhere, MESSAGES)) == c.key


def test_unset_seed_and_empty_stop_are_left_out_on_the_wire(provider):
    with LLMClient(fast(provider, seed=None)) as client:
        client.chat(MESSAGES)
    assert "seed" not in provider.requests[0] and "stop" not in provider.requests[0]


def test_image_parts_are_sent_as_they_are(provider):
    import base64

    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    messages = [{"role": "user", "content": [{"type": "text", "text": "what is this?"},
                                             {"type": "image_url", "image_url": {"url": url}}]}]
    with LLMClient(fast(provider)) as client:
        client.chat(messages)
    assert provider.requests[0]["messages"][0]["content"][1]["image_url"]["url"] == url


def test_api_key_comes_from_the_named_variable(provider, monkeypatch):
    monkeypatch.setenv("WF_TEST_LLM_KEY", "sk-test-123")
    config = fast(provider, api_key_env="WF_TEST_LLM_KEY")
    with LLMClient(config) as client:
        client.chat(MESSAGES)
    assert provider.headers[0]["authorization"] == "Bearer sk-test-123"
    assert "sk-test-123" not in json.dumps(config.to_dict())  # manifests get the name, never the key
    monkeypatch.delenv("WF_TEST_LLM_KEY")
    with pytest.raises(LLMError, match="WF_TEST_LLM_KEY"):
        LLMClient(config).chat(MESSAGES)


def test_local_model_without_a_server_is_one_clear_line():
    with pytest.raises(LLMError) as err:
        LLMClient(LLMConfig(model="local")).chat(MESSAGES)
    assert "base_url" in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------------------------ retries
def test_429_is_retried_and_counted(provider):
    provider.script = [("429", "0"), ("429", None)]
    with LLMClient(fast(provider)) as client:
        c = client.chat(MESSAGES)
        stats = client.stats
    assert c.text == "reply 1 to hello"
    assert len(provider.requests) == 3
    assert stats["provider_calls"] == 3 and stats["retries"] == 2
    assert stats["provider_errors"] == {"429": 2} and stats["failed_calls"] == 0


def test_5xx_exhausted_is_a_provider_error_with_its_kind(provider):
    provider.script = ["500"] * 5
    with LLMClient(fast(provider, max_retries=2)) as client:
        with pytest.raises(ProviderError) as err:
            client.chat(MESSAGES)
        stats = client.stats
    assert err.value.kind == "5xx" and err.value.attempts == 3
    assert "HTTP 500" in str(err.value) and "after 3 attempts" in str(err.value) and "\n" not in str(err.value)
    assert len(provider.requests) == 3
    assert stats["provider_errors"] == {"5xx": 3} and stats["retries"] == 2 and stats["failed_calls"] == 1


def test_400_is_not_retried(provider):
    provider.script = ["400", "ok"]
    with LLMClient(fast(provider, max_retries=4)) as client:
        with pytest.raises(ProviderError) as err:
            client.chat(MESSAGES)
        stats = client.stats
    assert err.value.kind == "4xx" and err.value.attempts == 1 and "not retried" in str(err.value)
    assert len(provider.requests) == 1
    assert stats["retries"] == 0 and stats["provider_errors"] == {"4xx": 1}


def test_a_server_slower_than_the_timeout_is_retried(provider):
    # the first answer comes long after the client gave up; the timeout is generous for the second,
    # an ordinary answer, which must come in time however loaded the machine is (the stalled
    # handler sleeps on in a daemon thread: neither the client nor the provider's close waits for it)
    provider.script = [("sleep", 30)]
    with LLMClient(fast(provider, timeout_s=10.0, max_retries=2)) as client:
        c = client.chat(MESSAGES)
        stats = client.stats
    assert c.text.startswith("reply ") and len(provider.requests) == 2
    assert stats["provider_errors"] == {"timeout": 1} and stats["retries"] == 1


def test_timeouts_exhausted(provider):
    provider.script = [("sleep", 1.5), ("sleep", 1.5)]
    with LLMClient(fast(provider, timeout_s=0.3, max_retries=1)) as client:
        with pytest.raises(ProviderError) as err:
            client.chat(MESSAGES)
    assert err.value.kind == "timeout" and err.value.attempts == 2 and len(provider.requests) == 2


def test_refused_connections_are_retried_then_reported():
    with LLMClient(fast(closed_port_url(), max_retries=2)) as client:
        with pytest.raises(ProviderError) as err:
            client.chat(MESSAGES)
        stats = client.stats
    assert err.value.kind == "connection" and err.value.attempts == 3
    assert stats["provider_errors"] == {"connection": 3} and stats["provider_calls"] == 3


def test_an_answer_that_is_not_a_completion(provider):
    provider.script = ["no_choices"]
    with LLMClient(fast(provider)) as client:
        with pytest.raises(ProviderError) as err:
            client.chat(MESSAGES)
    assert err.value.kind == "bad_response" and len(provider.requests) == 1


def test_retry_delay_doubles_honours_retry_after_and_caps():
    config = LLMConfig(backoff_s=0.5, max_backoff_s=8.0)
    assert [retry_delay(a, config) for a in (1, 2, 3, 4, 5, 6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert retry_delay(1, config, "3") == 3.0
    assert retry_delay(1, config, "120") == 8.0  # the provider's wish, up to the cap
    assert retry_delay(2, config, "soon") == 1.0  # unreadable: our own backoff
    assert retry_delay(1, config, "Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past
    assert retry_delay(1, config, "-5") == 0.0


# ------------------------------------------------------------------------------ concurrency
def test_concurrency_limit_holds_within_a_process():
    provider = Provider(delay=0.05)
    try:
        with LLMClient(fast(provider, concurrency=2)) as client:
            texts = []
            threads = [threading.Thread(target=lambda i=i: texts.append(
                client.chat([{"role": "user", "content": f"q{i}"}]).text)) for i in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        assert len(texts) == 6 and 1 <= provider.max_inflight <= 2
    finally:
        provider.close()


HOLD_SLOT = """
import sys
from webfreeze.llm import SlotLimiter
limiter = SlotLimiter(1, sys.argv[1])
token = limiter.acquire(timeout=10)
print("held", flush=True)
sys.stdin.readline()
limiter.release(token)
"""


def test_slots_hold_across_processes(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", HOLD_SLOT, str(tmp_path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        limiter = SlotLimiter(1, tmp_path, poll_s=0.01)
        with pytest.raises(LLMError, match="no free LLM call slot"):
            limiter.acquire(timeout=0.2)
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(timeout=10) == 0
        with limiter.slot(timeout=10) as index:
            assert index == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


# ------------------------------------------------------------------------------ through the cassette
def test_record_then_strict_replay_without_the_provider(provider, tmp_path):
    path = tmp_path / "llm-cassette.sqlite"
    asked = [{"role": "user", "content": "same"}]
    with Cassette(path, "record") as cassette, LLMClient(fast(provider), cassette) as client:
        client.begin_episode("task-1")
        recorded = [client.chat(asked, step=i).text for i in range(2)]
        recorded.append(client.chat(MESSAGES, step=2, purpose="memory").text)
    assert recorded == ["reply 1 to same", "reply 2 to same", "reply 3 to hello"]
    provider.close()  # nothing to answer now

    with Cassette(path, "replay") as cassette, LLMClient(fast(provider), cassette) as client:
        client.begin_episode("task-1")
        replayed = [client.chat(asked, step=i) for i in range(3)]  # the third repeats the last recorded
        assert [c.text for c in replayed] == ["reply 1 to same", "reply 2 to same", "reply 2 to same"]
        assert all(c.from_cassette for c in replayed)
        client.begin_episode("task-1")  # a new episode counts from n = 0 again
        assert client.chat(asked, step=0).text == "reply 1 to same"
        assert client.chat(MESSAGES, step=2, purpose="memory").text == "reply 3 to hello"
        stats = client.stats
        assert stats["cassette_hits"] == 5 and stats["provider_calls"] == 0 and stats["prompt_tokens"] == 35
        with pytest.raises(CassetteMiss) as err:
            client.chat([{"role": "user", "content": "never asked"}], step=3)
    assert "task task-1 step 3" in str(err.value)


def test_a_calls_own_max_tokens_is_sent_keyed_and_replayed(provider, tmp_path):
    path = tmp_path / "c.sqlite"
    with Cassette(path, "record") as cassette, LLMClient(fast(provider, max_tokens=12), cassette) as client:
        client.begin_episode("t")
        default = client.chat(MESSAGES, step=0)
        longer = client.chat(MESSAGES, step=0, max_tokens=300)
    assert [r["max_tokens"] for r in provider.requests] == [12, 300]
    # the same messages under another budget are another request: another key, its own answer
    assert longer.key != default.key
    assert request_key(build_request(fast(provider, max_tokens=12), MESSAGES)) == default.key
    assert request_key(build_request(fast(provider, max_tokens=12), MESSAGES, 300)) == longer.key
    provider.close()
    with Cassette(path, "replay") as cassette, LLMClient(fast(provider, max_tokens=12), cassette) as client:
        client.begin_episode("t")
        assert client.chat(MESSAGES, step=0, max_tokens=300).text == longer.text
        assert client.chat(MESSAGES, step=0).text == default.text
        with pytest.raises(CassetteMiss):
            client.chat(MESSAGES, step=1, max_tokens=64)
    for bad in (0, -1, 2.5, True, "9"):
        with pytest.raises(LLMError, match=r"^max_tokens must be an integer >= 1, not "):
            build_request(fast(provider), MESSAGES, bad)


def test_auto_replays_what_is_stored_and_records_the_rest(provider, tmp_path):
    path = tmp_path / "c.sqlite"
    with Cassette(path, "record") as cassette, LLMClient(fast(provider), cassette) as client:
        client.begin_episode("t")
        client.chat(MESSAGES, step=0)
    with Cassette(path, "auto") as cassette, LLMClient(fast(provider), cassette) as client:
        client.begin_episode("t")
        first = client.chat(MESSAGES, step=0)
        second = client.chat(MESSAGES, step=1)  # occurrence n=1 was never stored: called and stored
        new = client.chat([{"role": "user", "content": "new"}], step=2)
    assert first.from_cassette and first.text == "reply 1 to hello"
    assert not second.from_cassette and second.text == "reply 2 to hello"
    assert not new.from_cassette and new.text == "reply 3 to new"
    assert len(provider.requests) == 3
    with Cassette(path, "replay") as cassette:
        assert len(cassette) == 3 and cassette.verify() == []


def test_recording_onto_a_stored_call_answers_with_the_stored_one(provider, tmp_path):
    path = tmp_path / "c.sqlite"
    for _ in range(2):
        with Cassette(path, "record") as cassette, LLMClient(fast(provider), cassette) as client:
            client.begin_episode("t")
            c = client.chat(MESSAGES)
    # the second run called the provider (reply 2) but keeps and answers with the stored reply 1,
    # so that it behaves as its own replay will
    assert len(provider.requests) == 2 and c.text == "reply 1 to hello" and client.stats["already_stored"] == 1


def test_images_are_stored_as_digests(provider, tmp_path):
    import base64
    import hashlib

    url = "data:image/png;base64," + base64.b64encode(PNG).decode()
    messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]
    with Cassette(tmp_path / "c.sqlite", "record") as cassette, LLMClient(fast(provider), cassette) as client:
        c = client.chat(messages)
        (row,) = cassette.rows()
    assert url not in row["request"] and f"sha256:{hashlib.sha256(PNG).hexdigest()}" in row["request"]
    assert c.key == row["key"] == request_key(json.loads(row["request"]))
    assert canonical_request(json.loads(row["request"])) == row["request"]


def test_a_proxy_in_the_environment_does_not_carry_loopback_calls(provider, monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, closed_port_url().removesuffix("/v1"))
    with LLMClient(fast(provider, max_retries=0)) as client:
        assert client.chat(MESSAGES).text == "reply 1 to hello"


# ------------------------------------------------------------------------------ the config
def test_config_from_dict_and_back():
    config = LLMConfig.from_dict({"model": "gpt-x", "api_key_env": "MY_KEY", "stop": ["\n"], "temperature": 0,
                                  "extra": {"top_k": 0}})
    d = config.to_dict()
    assert d["stop"] == ["\n"] and d["temperature"] == 0.0 and d["api_key_env"] == "MY_KEY"
    assert LLMConfig.from_dict(json.loads(json.dumps(d))) == config and hash(config) == hash(LLMConfig.from_dict(d))
    with pytest.raises(LLMError, match="unknown setting 'temprature'"):
        LLMConfig.from_dict({"temprature": 0.5})
    with pytest.raises(LLMError, match="extra may not set seed"):
        LLMConfig(extra={"seed": 3})
    with pytest.raises(LLMError, match="max_tokens must be an integer >= 1"):
        LLMConfig(max_tokens=0)
