"""AgentLab unchanged: AgentLab's GenericAgent (PyPI agentlab 0.4.2, unmodified, its shipped
AGENT_3_5 configuration) runs 3 demo tasks through ``browsergym/webfreeze.demo.*`` the way AgentLab
runs experiments (ExpArgs/EnvArgs), against a real OpenAI-compatible server on 127.0.0.1 that
answers like a model would: from the prompt AgentLab built out of our observation (the goal, the
accessibility tree's bids and text). The run folder it leaves is scored by our evaluators.

AgentLab is not in the shared environment (its dependencies conflict with ours): scripts/bootstrap.sh
installs it with --no-deps into .venv/agentlab (or set WEBFREEZE_AGENTLAB to such a folder); without
it this test is skipped, saying so.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from cli_runner import run_cli
from llm_server import ChatServer, completion

import webfreeze as wf
from webfreeze.demo import SUITE
from webfreeze.llm.cassette import Cassette
from webfreeze.llm.local import LOCAL_MODEL_ID
from webfreeze.runs.compare import comparable_trajectory
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

ROOT = Path(__file__).resolve().parents[2]
AGENTLAB = Path(os.environ.get("WEBFREEZE_AGENTLAB") or ROOT / ".venv" / "agentlab")
TASKS = ["scholar-site-info-001", "scholar-site-info-009", "scholar-rules-accounts-010"]
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"

pytestmark = pytest.mark.skipif(
    not (AGENTLAB / "agentlab" / "agents" / "generic_agent").is_dir(),
    reason=f"AgentLab is not installed in {AGENTLAB} (scripts/bootstrap.sh installs it; or set WEBFREEZE_AGENTLAB)")


def _text(request: dict) -> str:
    parts = []
    for message in request.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
    return "\n".join(parts)


def _link(prompt: str, name: str) -> str:
    m = re.search(rf"\[(\w+)\] link {re.escape(repr(name))}", prompt)
    assert m, f"no link {name!r} in the prompt AgentLab built"
    return m.group(1)


def policy(prompt: str) -> str:
    """What a competent model would answer: read the goal and the page from the prompt."""
    if "How many e-prints" in prompt:
        count = re.search(r"(\d+) e-prints", prompt).group(1)
        return f"send_msg_to_user('{count}')"
    if "Computation and Language (cs.CL)" in prompt:
        total = re.search(r"Total of (\d+) entries", prompt)
        return f"send_msg_to_user('{total.group(1)}')" if total else f"click('{_link(prompt, 'Computation and Language')}')"
    if "peer-reviewed by the site" in prompt:
        if "are not peer-reviewed" in prompt:
            return "send_msg_to_user('No: they are not peer-reviewed by the site.')"
        return f"click('{_link(prompt, 'About')}')"
    return "noop()"


def respond(request: dict):
    prompt = _text(request)
    action = policy(prompt)
    text = f"<think>I read the page and the goal.</think>\n<action>\n{action}\n</action>"
    return 200, completion(text, len(prompt) // 4, len(text) // 4, model=request.get("model", "m"))


def _tiktoken_cache(tmp: Path) -> Path:
    """tiktoken's cache with cl100k_base in it, set up by `webfreeze browsergym tiktoken-cache` from
    the offline copy we ship with (tiktoken would download it, and nothing here reaches the internet)."""
    cache = tmp / "tiktoken"
    done = run_cli("browsergym", "tiktoken-cache", str(cache))
    assert done.returncode == 0, done.stderr
    assert (cache / hashlib.sha1(CL100K_URL.encode()).hexdigest()).is_file()
    return cache


@pytest.mark.parametrize("backend", ["browser", "text"])
def test_agentlab_generic_agent_runs_unchanged_and_the_run_is_scored(tmp_path, backend):
    if backend == "browser":
        try:
            chromium_path()
        except BrowserUnavailable as exc:
            pytest.skip(str(exc))
    server = ChatServer(respond)
    run_dir, exp_root = tmp_path / "run", tmp_path / "agentlab"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(AGENTLAB), str(ROOT / "tests" / "support"),
                                                       os.environ.get("PYTHONPATH", "")]),
               OPENAI_BASE_URL=server.url, OPENAI_API_KEY="test-key", LITELLM_LOCAL_MODEL_COST_MAP="True",
               TIKTOKEN_CACHE_DIR=str(_tiktoken_cache(tmp_path)), HF_HUB_OFFLINE="1")
    try:
        done = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "agentlab_driver.py"), str(run_dir),
                               str(exp_root), backend, "6", *TASKS],
                              capture_output=True, text=True, timeout=900, env=env, check=False)
    finally:
        server.close()
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [r["task"] for r in results] == TASKS
    assert all(r["error"] is None for r in results), results
    # AgentLab's own record: the reward it got is our score
    for r in results:
        summary = json.loads((Path(r["exp_dir"]) / "summary_info.json").read_text())
        assert summary["cum_reward"] == 1.0 and summary["terminated"] is True, summary
    # the model saw our observation through AgentLab's prompt: the goal and the tree's bids
    prompts = [_text(q) for q in server.requests]
    assert len(prompts) == 5  # 1 + 2 + 2 steps
    assert all("[" in p and "RootWebArea" in p for p in prompts)
    # and the run folder is a run like any other
    report = wf.score_run(run_dir)
    assert report["summary"]["overall"]["tasks"] == 3
    assert report["summary"]["overall"]["success"] == 3, report["summary"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["agent"]["name"] == "agentlab-GenericAgent" and manifest["env"]["backend"] == backend
    traj = json.loads((run_dir / "trajectories" / "scholar-site-info-009.json").read_text())
    assert [s["parsed"]["kind"] for s in traj["steps"]] == ["click", "answer"]


# AgentLab's driver inside webfreeze.browsergym.llm_cassette: every call the agent makes goes
# through the cassette proxy. argv: MODE CASSETTE|- UPSTREAM|local|- SMALL(0/1) DRIVER-ARGS... (a
# cassette "-": the run folder's own llm-cassette.sqlite)
CASSETTE_DRIVER = """
import json, sys
import agentlab_driver
from webfreeze.browsergym import llm_cassette

mode, cassette, upstream, small, *rest = sys.argv[1:]
if small == "1":  # a short prompt and reply for the tiny local model (~100 prompt tokens a second), set as AgentLab lets one
    agentlab_driver.AGENT_3_5.flags.max_prompt_tokens = 1100
    agentlab_driver.AGENT_3_5.chat_model_args.max_new_tokens = 32
    agentlab_driver.AGENT_3_5.agent_name = "GenericAgent-local"
with llm_cassette(None if cassette == "-" else cassette, mode, record_to=rest[0], upstream=None if upstream in ("-", "local") else upstream,
                  local=upstream == "local") as proxy:
    rc = agentlab_driver.main(rest)
print("PROXY " + json.dumps({"stats": proxy.stats, "misses": proxy.misses}))
sys.exit(rc)
"""


def _run_through_cassette(tmp_path, name, mode, cassette, upstream, tasks, *, backend="text", max_steps=6,
                          small=False, timeout=900):
    run_dir, exp_root = tmp_path / name, tmp_path / f"{name}-agentlab"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(AGENTLAB), str(ROOT / "tests" / "support"),
                                                       os.environ.get("PYTHONPATH", "")]),
               OPENAI_API_KEY="test-key", LITELLM_LOCAL_MODEL_COST_MAP="True",
               TIKTOKEN_CACHE_DIR=str(tmp_path / "tiktoken"), HF_HUB_OFFLINE="1")
    env.pop("OPENAI_BASE_URL", None)  # the proxy's, set by llm_cassette, is the only one
    env.pop("NO_PROXY", None)
    env.pop("no_proxy", None)
    # a dead HTTP proxy in the environment: the agent's calls must reach ours directly all the same
    env.update(HTTP_PROXY="http://127.0.0.1:9", http_proxy="http://127.0.0.1:9")
    done = subprocess.run([sys.executable, "-c", CASSETTE_DRIVER, mode, str(cassette), upstream, "1" if small else "0",
                           str(run_dir), str(exp_root), backend, str(max_steps), *tasks],
                          capture_output=True, text=True, timeout=timeout, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    proxy = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("PROXY "))[6:])
    return run_dir, results, proxy


def test_agentlab_calls_go_through_the_cassette_and_replay_strictly_without_the_server(tmp_path):
    """Recorded through the cassette proxy against the scripted server, then replayed strictly with
    the server gone: the same trajectories, byte for byte, and the run folder says which cassette
    answered (so a bundle takes it)."""
    _tiktoken_cache(tmp_path)
    server = ChatServer(respond)
    cassette = tmp_path / "recorded" / "llm-cassette.sqlite"
    try:
        recorded, results, proxy = _run_through_cassette(tmp_path, "recorded", "record", "-", server.url, TASKS)
    finally:
        server.close()
    assert all(r["error"] is None for r in results), results
    assert proxy["stats"]["upstream_calls"] == 5 and proxy["stats"]["calls"] == 5 and proxy["misses"] == []
    assert len(server.requests) == 5
    replayed, results, proxy = _run_through_cassette(tmp_path, "replayed", "replay", cassette, "-", TASKS)
    assert all(r["error"] is None for r in results), results
    assert proxy["stats"]["cassette_hits"] == 5 and proxy["stats"]["upstream_calls"] == 0 and proxy["misses"] == []
    for task in TASKS:  # byte for byte but for the timing fields (how long a step took)
        a, b = (json.loads((d / "trajectories" / f"{task}.json").read_text()) for d in (recorded, replayed))
        assert comparable_trajectory(a) == comparable_trajectory(b), task
        assert [s["action"] for s in a["steps"]] == [s["action"] for s in b["steps"]]
    traj = json.loads((recorded / "trajectories" / "scholar-site-info-009.json").read_text())
    assert len(traj["llm_entries"]) == 2  # the episode's two calls, named as a run's are
    with Cassette(cassette, "replay") as c:
        rows = c.rows()
    assert sorted((r["task_id"], r["step"]) for r in rows) == [
        ("scholar-rules-accounts-010", 0), ("scholar-rules-accounts-010", 1), ("scholar-site-info-001", 0),
        ("scholar-site-info-009", 0), ("scholar-site-info-009", 1)]
    m1, m2 = (json.loads((d / "manifest.json").read_text()) for d in (recorded, replayed))
    assert m1["llm"]["calls"] == 5 and m1["llm"] == m2["llm"]
    assert m1["circumstances"]["cassette"] == "llm-cassette.sqlite" and m1["circumstances"]["cassette_mode"] == "record"
    assert m2["circumstances"]["cassette"] == str(cassette.resolve()) and m2["circumstances"]["cassette_mode"] == "replay"
    assert wf.score_run(recorded)["summary"]["overall"]["success"] == 3
    bundle = tmp_path / "r.wfb"
    for args in (["pack", str(recorded), "-o", str(bundle)], ["info", str(bundle)]):
        done = subprocess.run([sys.executable, "-m", "webfreeze", "bundle", *args], capture_output=True, text=True,
                              timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
    with zipfile.ZipFile(bundle) as z:
        assert any(n.endswith("/llm-cassette.sqlite") for n in z.namelist()), z.namelist()


def test_agentlab_workers_know_the_ids_without_importing_us(tmp_path):
    """AgentLab's parallel studies send each experiment's ExpArgs to a worker process (pickled) and
    make the environment there by task name: the worker must find browsergym/webfreeze.* ids
    though its code never imports webfreeze.browsergym."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(AGENTLAB), os.environ.get("PYTHONPATH", "")]),
               LITELLM_LOCAL_MODEL_COST_MAP="True")
    sent = tmp_path / "exp.pkl"
    suite = tmp_path / "mine"  # a suite of our own: registered in the parent process only
    shutil.copytree(SUITE, suite)
    manifest = json.loads((suite / "manifest.json").read_text())
    manifest.update(name="mine", archive=str(SUITE.parent / "demo.wfz"))
    (suite / "manifest.json").write_text(json.dumps(manifest))
    make = ("import pickle, sys\n"
            "from agentlab.agents.generic_agent import AGENT_3_5\n"
            "from browsergym.experiments.loop import ExpArgs\n"
            "import webfreeze.browsergym as wb\n"
            f"wb.register_suite({str(suite)!r})\n"
            "bench = wb.agentlab_benchmark('mine', tasks=['booking-001'], backend='text')\n"
            "open(sys.argv[1], 'wb').write(pickle.dumps(ExpArgs(agent_args=AGENT_3_5, env_args=bench.env_args_list[0])))\n")
    work = ("import pickle, sys\n"
            "exp = pickle.loads(open(sys.argv[1], 'rb').read())\n"
            "env = exp.env_args.make_env(action_mapping=None, exp_dir=sys.argv[2])\n"
            "obs, info = env.reset(seed=0)\n"
            "print(info['task_id'], obs['url'])\n"
            "env.close()\n")
    for code, args in ((make, [sent]), (work, [sent, tmp_path])):
        done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                              timeout=300, env=env, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["booking-001", "http://booking.test/"]


@pytest.mark.slow
@pytest.mark.local_model
def test_agentlab_against_the_local_model_once_through_the_cassette(tmp_path):
    """GenericAgent against --llm local: AgentLab sends content as lists of text parts, which the
    proxy flattens for SmolLM2's chat template (it answered HTTP 500 to them). The tiny model is no
    agent: what is checked is that every call was answered and recorded, the run folder is scored,
    and a strict replay of the cassette gives the same trajectory."""
    _tiktoken_cache(tmp_path)
    task = TASKS[:1]
    # one step, GenericAgent's prompt cut to 1,100 tokens (AgentLab's own shrinking): the model reads
    # about 100 tokens a second on one core
    recorded, results, proxy = _run_through_cassette(tmp_path, "local", "record", "-", "local", task,
                                                     max_steps=1, small=True, timeout=1800)
    assert [r["task"] for r in results] == task
    stats = proxy["stats"]
    assert stats["upstream_calls"] >= 1 and stats["upstream_errors"] == 0 and stats["refused"] == 0, proxy
    with Cassette(recorded / "llm-cassette.sqlite", "replay") as c:
        rows = c.rows()
    assert len(rows) == stats["upstream_calls"]
    assert {json.loads(r["response"])["model"] for r in rows} == {LOCAL_MODEL_ID}
    # the request is stored as AgentLab sent it: its content a list of text parts
    assert any(isinstance(m["content"], list) for m in json.loads(rows[0]["request"])["messages"])
    report = wf.score_run(recorded)
    assert report["summary"]["overall"]["tasks"] == 1
    manifest = json.loads((recorded / "manifest.json").read_text())
    assert manifest["llm"]["calls"] == len(rows) and manifest["circumstances"]["cassette_mode"] == "record"
    replayed, _, proxy = _run_through_cassette(tmp_path, "local-replay", "replay", recorded / "llm-cassette.sqlite",
                                               "-", task, max_steps=1, small=True)
    assert proxy["stats"]["upstream_calls"] == 0 and proxy["misses"] == []
    name = f"{task[0]}.json"
    a, b = (json.loads((d / "trajectories" / name).read_text()) for d in (recorded, replayed))
    assert comparable_trajectory(a) == comparable_trajectory(b)
