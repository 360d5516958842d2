"""The agent boundary: task views without ground truth, oracles, plug-in agents (module:Class and
entry points) across worker processes, task selection, the library front door, Gymnasium conformance."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
from cli_runner import run_cli

from webfreeze.demo import ARCHIVE, SUITE

# A plug-in agent as a researcher would write it, in a module of its own. It logs, per process,
# each construction and every task view it is given, and answers at once.
PROBE = '''
import json, os
from webfreeze.agents import Agent, TaskView

LOG = os.environ["PROBE_LOG"]


def _log(**entry):
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(dict(entry, pid=os.getpid()), sort_keys=True) + "\\n")


class Probe(Agent):
    name = "probe"

    def __init__(self, answer="nothing"):
        self.answer = answer
        _log(event="init")

    def config(self):
        return {"answer": self.answer}

    def setup(self, services):
        super().setup(services)
        _log(event="setup", cassette=services.cassette)

    def reset(self, task):
        _log(event="reset", type=type(task).__name__, view=task.to_dict(), reference=task.reference,
             attrs=sorted(vars(task)))

    def act(self, obs):
        _log(event="act", keys=sorted(obs))
        return {"action": "send_msg_to_user(%r)" % self.answer, "thought": "probe"}


class Oracle(Probe):
    oracle = True


class NotAnAgent:
    pass
'''


@pytest.fixture
def plugin(tmp_path):
    """A folder on PYTHONPATH with the probe module and an installed distribution declaring it
    in the webfreeze.agents entry-point group."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "probe_agent.py").write_text(PROBE, encoding="utf-8")
    dist = lib / "probe_agent-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: probe-agent\nVersion: 1.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[webfreeze.agents]\nprobe = probe_agent:Probe\n", encoding="utf-8")
    log = tmp_path / "probe.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(lib), os.environ.get("PYTHONPATH", "")]),
               PROBE_LOG=str(log))
    return env, log


def _entries(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def test_a_module_class_agent_runs_on_two_workers_and_never_sees_ground_truth(plugin, tmp_path):
    env, log = plugin
    out = tmp_path / "run"
    proc = run_cli("bench", "run", SUITE, "--agent", "probe_agent:Probe", "--workers", "2", "--backend", "text",
                   "--tasks", "scholar-*", "--limit", "6", "--out", out, "--agent-config", "answer=42", env=env)
    assert proc.returncode == 0, proc.stderr
    entries = _entries(log)
    inits = [e for e in entries if e["event"] == "init"]
    setups = [e for e in entries if e["event"] == "setup"]
    resets = [e for e in entries if e["event"] == "reset"]
    # the main process builds one to check the settings (and, for the local-model question, one
    # more); each worker builds exactly one and sets it up once, then resets it per task
    worker_pids = {e["pid"] for e in setups}
    assert len(worker_pids) == 2 and len(setups) == 2
    assert all(sum(1 for i in inits if i["pid"] == pid) == 1 for pid in worker_pids)
    assert len(resets) == 6 and {e["pid"] for e in resets} <= worker_pids
    suite_lines = {json.loads(x)["id"]: json.loads(x) for x in (SUITE / "tasks.jsonl").read_text().splitlines()}
    for e in resets:
        assert e["type"] == "TaskView" and e["reference"] is None
        view = e["view"]
        assert set(view) == {"id", "category", "instruction", "start_url", "snapshot_time", "handles"}
        line = suite_lines[view["id"]]
        assert view["instruction"] == line["instruction"] and view["start_url"] == line["start_url"]
        text = json.dumps(e)
        assert "ground_truth" not in text and "reference_trajectory" not in text
        # nothing of the answer's ground truth reaches the agent
        assert json.dumps(line["ground_truth"]["answer"]) not in text
    acts = [e for e in entries if e["event"] == "act"]
    assert acts and all("ground_truth" not in e["keys"] for e in acts)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["agent"] == {"name": "probe_agent:Probe", "config": {"answer": 42}, "oracle": False}
    assert manifest["selection"]["tasks"] == ["scholar-*"] and manifest["selection"]["limit"] == 6
    ids = manifest["selection"]["ids"]
    assert len(ids) == 6 and all(i.startswith("scholar-") for i in ids)
    assert ids == [i for i in suite_lines if i.startswith("scholar-")][:6]  # the suite's order
    assert sorted(p.stem for p in (out / "trajectories").glob("*.json")) == sorted(ids)
    assert [json.loads(x)["id"] for x in (out / "tasks.jsonl").read_text().splitlines()] == ids
    report = json.loads((out / "report.json").read_text())
    assert sorted(report["tasks"]) == sorted(ids) and report["run"]["agent"]["oracle"] is False


def test_only_an_oracle_gets_the_reference_and_its_run_is_labelled(plugin, tmp_path):
    env, log = plugin
    out = tmp_path / "oracle"
    proc = run_cli("bench", "run", SUITE, "--agent", "probe_agent:Oracle", "--backend", "text",
                   "--tasks", "booking-00[12]", "--out", out, "--no-report", env=env)
    assert proc.returncode == 0, proc.stderr
    resets = [e for e in _entries(log) if e["event"] == "reset"]
    assert [e["view"]["id"] for e in resets] == ["booking-001", "booking-002"]
    assert all(e["reference"]["kind"] == "reference_trajectory" and e["reference"]["steps"] for e in resets)
    assert all("ground_truth" not in json.dumps(e["view"]) for e in resets)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["agent"]["oracle"] is True and manifest["agent"]["label"] == "upper bound"


def test_an_installed_entry_point_names_an_agent(plugin, tmp_path):
    env, log = plugin
    out = tmp_path / "ep"
    proc = run_cli("bench", "run", SUITE, "--agent", "probe", "--backend", "text", "--limit", "1", "--out", out,
                   "--no-report", env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "manifest.json").read_text())["agent"]["name"] == "probe"
    assert [e["view"]["id"] for e in _entries(log) if e["event"] == "reset"] == ["scholar-site-info-001"]


@pytest.mark.parametrize("agent, message", [
    ("nosuchagent", "unknown agent 'nosuchagent'"),
    ("no_such_module:Agent", "cannot import 'no_such_module'"),
    ("probe_agent:Missing", "'probe_agent' has no 'Missing'"),
    ("probe_agent:NotAnAgent", "is not an agent class"),
])
def test_a_bad_agent_name_is_one_line(plugin, tmp_path, agent, message):
    env, _ = plugin
    proc = run_cli("bench", "run", SUITE, "--agent", agent, "--backend", "text", "--out", tmp_path / "x", env=env)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "x").exists()


def test_a_selection_that_matches_nothing_is_refused(tmp_path, cli):
    proc = cli("bench", "run", SUITE, "--agent", "keyword", "--backend", "text", "--tasks", "nothing-*",
               "--out", tmp_path / "x")
    assert proc.returncode == 1 and "no task id matches 'nothing-*'" in proc.stderr
    assert not (tmp_path / "x").exists()


def test_the_front_door_runs_and_scores_a_suite(tmp_path):
    import webfreeze as wf

    manifest = wf.run(SUITE, "reference", tmp_path / "ref", backend="text", tasks="booking-001")  # one glob
    assert manifest["complete"] and manifest["agent"]["oracle"] is True
    assert manifest["selection"]["tasks"] == ["booking-001"] and manifest["selection"]["ids"] == ["booking-001"]
    report = wf.score_run(tmp_path / "ref")
    assert report["tasks"]["booking-001"]["success"] is True
    with pytest.raises(wf.RunError, match="no setting 'colour'"):
        wf.run(SUITE, "reference", tmp_path / "x", colour="red")
    for name in ("open_archive", "import_warc", "ReplayServer", "WebEnv", "EnvConfig", "Agent", "make_agent",
                 "load_suite", "score_task", "LLMClient", "Cassette"):
        assert getattr(wf, name) is not None


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_gymnasium_check_env_passes(backend):
    from gymnasium.utils.env_checker import check_env

    import webfreeze as wf

    for suite in (SUITE, None):  # a suite's first task, or the archive's first page
        env = wf.WebEnv(wf.EnvConfig(ARCHIVE, backend=backend, suite=suite))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # the checker reports some failures as warnings only
                check_env(env, skip_render_check=True)
            obs, info = env.reset()
            assert obs in env.observation_space
            assert info["task_id"] == ("scholar-site-info-001" if suite else "explore")
            obs, reward, *_ = env.step("click('999999')")
            assert reward == 0.0 and "999999" in obs["last_action_error"] and obs in env.observation_space
        finally:
            env.close()


def test_the_final_reward_can_be_the_task_score():
    import webfreeze as wf
    from webfreeze.agents import TaskView, make_agent

    suite = wf.load_suite(SUITE)
    task = suite.by_id()["booking-001"]
    for reward_kind, expected in (("score", 1.0), ("zero", 0.0)):
        env = wf.WebEnv(wf.EnvConfig(ARCHIVE, backend="text", suite=SUITE, reward=reward_kind,
                                     site_models=_site_models(suite)))
        try:
            agent = make_agent("reference")
            agent.reset(TaskView.from_task(task.raw, task.reference))
            obs, _ = env.reset(options={"task": "booking-001"})
            rewards = []
            for _ in range(30):
                obs, reward, term, trunc, info = env.step(agent.act(obs)["action"])
                rewards.append(reward)
                if term or trunc:
                    break
            assert rewards[-1] == expected and all(r == 0.0 for r in rewards[:-1])
            assert ("score" in info) == (reward_kind == "score")
        finally:
            env.close()
    from webfreeze.simulator.env import EnvError

    with pytest.raises(EnvError, match="unknown reward"):
        wf.WebEnv(wf.EnvConfig(ARCHIVE, backend="text", reward="money"))


def _site_models(suite):
    from webfreeze.simulator.site_models import SimulatedSiteModel

    return [SimulatedSiteModel(kind, host) for host, kind in suite.manifest["site_models"].items()]
