"""The LLM agent end to end on the real local model (SmolLM2-135M behind llama.cpp's server): a
live run records a cassette, a strict replay of it gives byte-identical trajectories and reports in
both backends, and a changed prompt makes strict replay fail in one line naming the task and step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_runner import run_cli

from webfreeze.demo import SUITE
from webfreeze.runs.compare import run_difference

TASKS = ("scholar-site-info-001", "shop-001")
STEPS = "2"

pytestmark = pytest.mark.slow


def _comparable_trajectories(run: Path) -> dict:
    from webfreeze.simulator.trajectory import without_timings

    return {p.name: without_timings(json.loads(p.read_text(encoding="utf-8")))
            for p in sorted((run / "trajectories").glob("*.json"))}




def _run(cli, out: Path, backend: str, *more):
    # a short observation and a short reply: reading the prompt (about 100 tokens a second on one
    # core) and writing (the tiny model often writes until the limit) are its time on 2 cores; what is
    # proven depends on neither
    args = ["bench", "run", SUITE, "--agent", "llm", "--agent-config", "obs_tokens=200", "--agent-config",
            "max_tokens=24", "--backend", backend,
            "--max-steps", STEPS, "--out", out]
    for t in TASKS:
        args += ["--tasks", t]
    return cli(*args, *map(str, more), timeout=900)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One live run per backend on the local model, recording its cassette."""
    tmp = tmp_path_factory.mktemp("llm-live")
    runs = {}
    for backend in ("text", "browser"):
        out = tmp / f"live-{backend}"
        proc = _run(run_cli, out, backend, "--llm", "local")
        assert proc.returncode == 0, proc.stderr
        runs[backend] = out
    return runs


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_a_live_run_records_and_strict_replay_reproduces_it(recorded, backend, tmp_path, cli):
    live = recorded[backend]
    cassette = live / "llm-cassette.sqlite"
    manifest = json.loads((live / "manifest.json").read_text())
    assert cassette.is_file() and manifest["llm"]["calls"] > 0
    assert manifest["llm"]["entries_digest"].startswith("sha256:")
    assert manifest["circumstances"]["cassette_mode"] == "record"
    assert manifest["circumstances"]["local_model"]["id"] == "smollm2-135m-instruct-q4_1"
    assert manifest["agent"]["name"] == "llm" and manifest["agent"]["oracle"] is False
    assert manifest["agent"]["config"]["prompt_digest"].startswith("sha256:")
    trajectories = _comparable_trajectories(live)
    assert sorted(trajectories) == [f"{t}.json" for t in sorted(TASKS)]
    calls = 0
    for traj in trajectories.values():
        assert traj["steps"], traj["end"]
        for step in traj["steps"]:
            fields = step["agent_fields"]
            assert fields["llm"]["calls"] >= 1 and fields["llm"]["prompt_tokens"] > 0
            assert fields["memory"]["strategy"] == "last-k"
            assert isinstance(fields["reply"], str)
            calls += fields["llm"]["calls"]
    assert calls == manifest["llm"]["calls"]  # every call the agent made is in the cassette
    report = json.loads((live / "report.json").read_text())
    assert report["summary"]["overall"]["llm_calls"] == calls

    replay = tmp_path / "replay"
    proc = _run(cli, replay, backend, "--cassette", cassette, "--cassette-mode", "replay")
    assert proc.returncode == 0, proc.stderr
    assert run_difference(live, replay) is None  # trajectories and report.json, timings aside
    again = json.loads((replay / "manifest.json").read_text())
    assert again["llm"] == manifest["llm"] and again["circumstances"]["cassette_mode"] == "replay"
    # every call was answered from the cassette, none by a model (no server was started)
    hits = sum(s["timing"].get("cassette_hits", 0) for p in (replay / "trajectories").glob("*.json")
               for s in json.loads(p.read_text())["steps"])
    assert hits == calls and not (replay / "local-model.log").exists()


def test_a_changed_prompt_fails_strict_replay_naming_task_and_step(recorded, tmp_path, cli):
    from webfreeze.agents.llm_agent import DEFAULT_PROMPT, PROMPTS_DIR

    prompts = tmp_path / "prompts"
    shutil.copytree(PROMPTS_DIR / DEFAULT_PROMPT, prompts)
    system = prompts / "system.txt"
    system.write_text(system.read_text(encoding="utf-8").replace("web", "Web", 1), encoding="utf-8")
    cassette = recorded["text"] / "llm-cassette.sqlite"
    proc = _run(cli, tmp_path / "changed", "text", "--cassette", cassette, "--cassette-mode", "replay",
                "--agent-config", f"prompt={prompts}")
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"task {TASKS[0]}" in lines[0] and "step 0" in lines[0], lines[0]
    assert "strict replay: no stored LLM call" in lines[0] and "messages[0].content at char 10" in lines[0]
