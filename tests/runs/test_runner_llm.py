"""The runner with LLM agents: cassettes it cannot use are refused up front, a provider that keeps
failing ends an episode as an infrastructure error (run again on resume), worker start-up failures
are one line, and minimal plug-in classes run. LLM calls go to a real HTTP server on loopback."""

from __future__ import annotations

import json
import os

import pytest
from cli_runner import run_cli
from llm_server import ChatServer, completion

from webfreeze.demo import SUITE


class Provider(ChatServer):
    """An OpenAI-compatible chat server: answers 500 while ``failing``, else one ANSWER action."""

    def __init__(self):
        self.failing = True
        super().__init__(self._respond)

    @property
    def posts(self) -> int:
        return len(self.requests)

    def _respond(self, request):
        if self.failing:
            return 500, {"error": {"message": "upstream overloaded"}}
        return 200, completion("Thought: it says so\nAction: ANSWER; 320", 10, 5)


@pytest.fixture
def provider():
    p = Provider()
    yield p
    p.close()


def _one_line_error(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_a_provider_that_keeps_failing_is_an_infrastructure_error_and_resume_runs_it_again(provider, tmp_path):
    out = tmp_path / "run"
    args = ("bench", "run", SUITE, "--agent", "llm", "--llm", f"m@{provider.url}", "--llm-key-env", "WF_TEST_KEY",
            "--backend", "text", "--tasks", "scholar-site-info-001", "--out", out)
    env = dict(os.environ, WF_TEST_KEY="not-a-secret")
    proc = run_cli(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    traj = json.loads((out / "trajectories" / "scholar-site-info-001.json").read_text())
    assert traj["end"]["reason"] == "error" and traj["end"]["cause"] == "provider"
    assert "500" in traj["end"]["detail"] or "5xx" in traj["end"]["detail"]
    assert provider.posts == 5  # the first try and 4 retries
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["overall"]["infrastructure_errors"] == 1
    # the provider is back: resuming runs the task again (its failure was not the agent's)
    provider.failing = False
    proc = run_cli(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    traj = json.loads((out / "trajectories" / "scholar-site-info-001.json").read_text())
    assert traj["end"]["reason"] == "answer" and traj["answer"] == "320"
    report = json.loads((out / "report.json").read_text())
    assert report["tasks"]["scholar-site-info-001"]["success"] is True
    assert report["summary"]["overall"]["infrastructure_errors"] == 0
    assert report["tasks"]["scholar-site-info-001"]["llm"] == {"calls": 1, "prompt_tokens": 10, "completion_tokens": 5}


def test_a_missing_api_key_stops_the_run_in_one_line(provider, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "WF_TEST_KEY"}
    proc = run_cli("bench", "run", SUITE, "--agent", "llm", "--llm", f"m@{provider.url}", "--llm-key-env", "WF_TEST_KEY",
                   "--backend", "text", "--limit", "2", "--out", tmp_path / "run", env=env)
    assert "WF_TEST_KEY" in _one_line_error(proc)
    assert provider.posts == 0 and not list((tmp_path / "run" / "trajectories").glob("*.json"))


@pytest.mark.parametrize("setup, message", [
    (("--cassette-mode", "replay"), "--cassette-mode replay needs --cassette FILE"),
    (("--cassette-mode", "replay", "--cassette", "{tmp}/none.sqlite"), "no such cassette to replay"),
    (("--cassette", "{tmp}/nodir/c.sqlite"), "no such directory"),
    (("--cassette", "{tmp}/text.sqlite"), "text.sqlite"),
])
def test_a_cassette_the_run_cannot_use_is_refused_before_anything_runs(provider, tmp_path, setup, message):
    (tmp_path / "text.sqlite").write_text("this is not a database\n" * 100)
    args = [a.replace("{tmp}", str(tmp_path)) for a in setup]
    proc = run_cli("bench", "run", SUITE, "--agent", "llm", "--llm", f"m@{provider.url}", "--backend", "text",
                   "--limit", "1", "--out", tmp_path / "run", *args)
    assert message in _one_line_error(proc)
    assert not (tmp_path / "run").exists() and provider.posts == 0


PLUGIN = '''
from webfreeze.agents import AgentError


class Bare:  # no base class, no config(), setup() or close(): only what an agent must have
    def reset(self, task):
        self.n = 0

    def act(self, obs):
        return {"action": "send_msg_to_user('320')"}


class Broken:
    def setup(self, services):
        raise AgentError("my model file is missing")

    def reset(self, task):
        pass

    def act(self, obs):
        return {"action": "noop()"}
'''


@pytest.fixture
def plugin_env(tmp_path):
    (tmp_path / "bare_agents.py").write_text(PLUGIN, encoding="utf-8")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))


def test_a_bare_class_with_reset_and_act_runs(plugin_env, tmp_path):
    out = tmp_path / "bare"
    proc = run_cli("bench", "run", SUITE, "--agent", "bare_agents:Bare", "--backend", "text", "--workers", "2",
                   "--limit", "2", "--out", out, env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["agent"]["config"] == {} and manifest["circumstances"]["workers"] == 2
    report = json.loads((out / "report.json").read_text())
    assert report["tasks"]["scholar-site-info-001"]["success"] is True
    # a trajectory cut short (by hand, or a full disk) is run again when the run is resumed
    cut = out / "trajectories" / "scholar-site-info-001.json"
    cut.write_text(cut.read_text()[:100])
    proc = run_cli("bench", "run", SUITE, "--agent", "bare_agents:Bare", "--backend", "text", "--workers", "2",
                   "--limit", "2", "--out", out, env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    assert "1 of 2 tasks already ran" in proc.stderr
    assert json.loads(cut.read_text())["answer"] == "320"


@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_agent_that_cannot_start_in_a_worker_is_one_line(plugin_env, tmp_path, workers):
    proc = run_cli("bench", "run", SUITE, "--agent", "bare_agents:Broken", "--backend", "text", "--workers", workers,
                   "--limit", "2", "--out", tmp_path / "broken", env=plugin_env)
    assert _one_line_error(proc).endswith("my model file is missing")
