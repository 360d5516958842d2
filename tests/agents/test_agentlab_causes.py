"""Episodes that AgentLab's experiment loop (browsergym-experiments' ExpArgs, unmodified) ends with an
exception: the trajectory says the episode ended in an error, with AgentLab's err_msg and its cause
(the agent's own error, or infrastructure: a provider or network failure in its LLM calls), and the
report counts the two apart. The agent's arguments and AgentLab's version are the run's identity:
a second configuration under the same name is refused, as is a task played again into the same
run folder unless asked.

browsergym-experiments and AgentLab live in .venv/agentlab (scripts/bootstrap.sh): the episodes run
in a process of their own with it on the path; without it this test is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runner import run_cli

import webfreeze as wf

ROOT = Path(__file__).resolve().parents[2]
AGENTLAB = Path(os.environ.get("WEBFREEZE_AGENTLAB") or ROOT / ".venv" / "agentlab")

pytestmark = pytest.mark.skipif(
    not (AGENTLAB / "browsergym" / "experiments").is_dir(),
    reason=f"browsergym-experiments is not installed in {AGENTLAB} (scripts/bootstrap.sh installs it)")

# argv: RUN_DIR EXP_ROOT then TASK:HOW:NAME:TEMPERATURE:OVERWRITE... (HOW: agent, to raise; answer;
# provider, to ask AgentLab's own chat model through our cassette proxy, whose upstream is
# $WF_UPSTREAM: nothing listens there)
DRIVER = r"""
import contextlib, json, os, sys
from dataclasses import dataclass
import bgym
from browsergym.experiments.loop import AbstractAgentArgs, ExpArgs
from webfreeze.browsergym import RegistrationError, agentlab_benchmark, llm_cassette


HOW = {"now": "answer"}  # what the agent does in the episode being played (not one of its arguments)


class Scripted(bgym.Agent):
    def __init__(self):
        self.how = HOW["now"]
        self.action_set = bgym.HighLevelActionSet(subsets=["chat", "infeas", "bid", "nav"], multiaction=False)

    def get_action(self, obs):
        if self.how == "agent":
            raise ValueError("could not parse the model's answer: no <action> tag")
        if self.how == "provider":  # (one try, no wait: AgentLab's defaults wait a minute between tries)
            from agentlab.llm.chat_api import OpenAIChatModel
            OpenAIChatModel("gpt-4o-mini", max_retry=1, min_retry_wait_time=0)([{"role": "user", "content": "hi"}])
        return "send_msg_to_user('320')", {}  # (the loop then counts tokens: tiktoken loads its encoding)


@dataclass
class ScriptedArgs(AbstractAgentArgs):
    temperature: float = 0.0

    def make_agent(self):
        return Scripted()


run_dir, exp_root, *plays = sys.argv[1:]
upstream = os.environ.get("WF_UPSTREAM")
block = llm_cassette(record_to=run_dir, upstream=upstream, mode="auto") if upstream else contextlib.nullcontext()
with block:
    for play in plays:
        task, how, name, temperature, overwrite = play.split(":")
        try:
            bench = agentlab_benchmark("demo", tasks=[task], backend="text", record_to=run_dir, agent=name,
                                       **({"overwrite": True} if overwrite == "1" else {}))
        except RegistrationError as exc:  # (refused before AgentLab plays anything)
            print(json.dumps({"task": task, "refused": str(exc)}), flush=True)
            continue
        HOW["now"] = how
        exp = ExpArgs(agent_args=ScriptedArgs(agent_name=name, temperature=float(temperature)),
                      env_args=bench.env_args_list[0], enable_debug=False)
        exp.prepare(exp_root)
        exp.run()
        print(json.dumps({"task": task, "err_msg": exp.err_msg}), flush=True)
"""


def _tiktoken_cache(tmp: Path) -> Path:
    """tiktoken's cache with cl100k_base in it (BrowserGym's loop counts the agent's tokens with it),
    set up by the command docs/agents.md names; without it tiktoken would download it, and fail here."""
    cache = tmp / "tiktoken"
    if not cache.is_dir():
        done = run_cli("browsergym", "tiktoken-cache", str(cache))
        assert done.returncode == 0 and done.stdout.strip() == f"export TIKTOKEN_CACHE_DIR={cache}", done.stderr
    return cache


def run_plays(tmp_path, run_dir, *plays: str, offline_tokenizer: bool = True, upstream: str | None = None) -> list[dict]:
    """The plays in one process; without ``offline_tokenizer``, tiktoken's download of its encoding
    fails (nothing here reaches the internet): an infrastructure failure, for real. With
    ``upstream``, inside an ``llm_cassette`` block recording into ``run_dir`` from that endpoint."""
    cache = _tiktoken_cache(tmp_path) if offline_tokenizer else tmp_path / "empty-cache"
    cache.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(AGENTLAB), os.environ.get("PYTHONPATH", "")]),
               TIKTOKEN_CACHE_DIR=str(cache), **({"WF_UPSTREAM": upstream} if upstream else {}))
    done = subprocess.run([sys.executable, "-c", DRIVER, str(run_dir), str(tmp_path / "agentlab"), *plays],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_crashes_are_recorded_with_their_cause_and_configurations_do_not_mix(tmp_path):
    run = tmp_path / "run"
    results = run_plays(tmp_path, run, "scholar-site-info-001:agent:lab:0.0:0",
                        "scholar-site-info-003:answer:lab:0.0:0")
    results[1:1] = run_plays(tmp_path, run, "scholar-site-info-002:answer:lab:0.0:0", offline_tokenizer=False)
    assert [r["err_msg"] is not None for r in results] == [True, True, False]
    crashed = json.loads((run / "trajectories" / "scholar-site-info-001.json").read_text())
    end = crashed["end"]
    assert end["reason"] == "error" and end["cause"] == "agent"
    assert end["err_msg"] == results[0]["err_msg"] and "ValueError" in end["err_msg"]
    assert "could not parse the model's answer" in end["detail"] and "\n" not in end["detail"]
    down = json.loads((run / "trajectories" / "scholar-site-info-002.json").read_text())["end"]
    assert down["reason"] == "error" and down["cause"] == "provider" and "ConnectionError" in down["err_msg"]
    # the report counts them apart: one the agent's, one infrastructure's
    overall = wf.score_run(run)["summary"]["overall"]
    assert (overall["other_errors"], overall["infrastructure_errors"], overall["tasks"]) == (1, 1, 3)
    # the agent's arguments and AgentLab's version are the run's
    manifest = json.loads((run / "manifest.json").read_text())
    config = manifest["agent"]["config"]
    assert config["args"] == {"agent_name": "lab", "temperature": 0.0}
    assert config["class"].endswith("ScriptedArgs") and "agentlab" in config
    # another configuration under the same name: refused (the episode ends in that error, nothing
    # written); a task played already: refused unless asked
    before = (run / "trajectories" / "scholar-site-info-003.json").read_bytes()
    later = run_plays(tmp_path, run, "scholar-site-info-004:answer:lab:0.7:0", "scholar-site-info-003:answer:lab:0.0:0",
                      "scholar-site-info-001:answer:lab:0.0:1")
    assert "holds a different run (its agent differ)" in later[0]["err_msg"]
    assert not (run / "trajectories" / "scholar-site-info-004.json").exists()
    # (a task played already: refused when the benchmark is made, before AgentLab's loop, which would
    # log the error and go on as if it had played)
    assert "already holds an episode of scholar-site-info-003 (1 of 1 asked for, 0 left to play); " \
           "record_to another folder" in later[1]["refused"]
    assert "err_msg" not in later[1]
    assert later[2]["err_msg"] is None
    assert json.loads((run / "trajectories" / "scholar-site-info-001.json").read_text())["end"]["reason"] == "answer"
    assert (run / "trajectories" / "scholar-site-info-003.json").read_bytes() == before


ACTION_SETS = r"""
import json
import webfreeze.browsergym as wb
out = {}
for backend in ("browser", "text"):
    bench = wb.agentlab_benchmark("demo", tasks=["scholar-site-info-001"], backend=backend)
    args = bench.high_level_action_set_args
    out[backend] = {"actions": list(args.make_action_set().action_set), "multiaction": args.multiaction}
print(json.dumps(out))
"""


def test_what_agentlab_is_handed_is_what_each_backend_does():
    from browsergym.core.action.highlevel import ACTION_SUBSETS

    from webfreeze.simulator.actions import TEXT_REFUSED

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(AGENTLAB), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", ACTION_SETS], capture_output=True, text=True, timeout=300, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    every = {"noop"} | {f.__name__ for s in ("chat", "infeas", "bid", "coord", "nav", "tab") for f in ACTION_SUBSETS[s]}
    assert set(got["browser"]["actions"]) == every
    assert set(got["text"]["actions"]) == every - TEXT_REFUSED
    assert not got["browser"]["multiaction"] and not got["text"]["multiaction"]  # one action a step


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_unreachable_provider_behind_the_cassette_is_infrastructure(tmp_path):
    """AgentLab's own chat model, through our cassette proxy, whose upstream does not answer: the proxy
    says 502 upstream_error, AgentLab raises its RetryError, and the episode is infrastructure's."""
    run = tmp_path / "run"
    [result] = run_plays(tmp_path, run, "scholar-site-info-001:provider:lab:0.0:0",
                         upstream=f"http://127.0.0.1:{_closed_port()}/v1")
    end = json.loads((run / "trajectories" / "scholar-site-info-001.json").read_text())["end"]
    assert "RetryError" in result["err_msg"] and "upstream_error" in end["err_msg"], result
    assert end["reason"] == "error" and end["cause"] == "provider"
    overall = wf.score_run(run)["summary"]["overall"]
    assert (overall["other_errors"], overall["infrastructure_errors"]) == (0, 1)
