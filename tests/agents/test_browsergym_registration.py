"""Gymnasium registration in BrowserGym's style (webfreeze/browsergym.py): the demo suite's ids on
import, any suite by register_suite, gym.make giving an environment whose reward is our score and
whose info carries our trajectory, and record_to writing a run folder that eval report scores and
bundles take."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import gymnasium as gym
import pytest

import webfreeze as wf
import webfreeze.browsergym as wb
from webfreeze.agents import TaskView, make_agent
from webfreeze.demo import SUITE
from webfreeze.eval.tasks import load_suite
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.trajectory import dumps, without_timings

DEMO = load_suite(SUITE)


def play_reference(env_id: str, **make_kw) -> tuple[list, dict]:
    """The task's reference actions (our reference agent reads the observation's default keys)
    through gym.make; (rewards, the last info)."""
    env = gym.make(env_id, **make_kw)
    task = DEMO.by_id()[env_id.rsplit(".", 1)[1]]
    agent = make_agent("reference")
    agent.reset(TaskView.from_task(task.raw, task.reference))
    rewards = []
    try:
        obs, info = env.reset()
        assert "axtree_object" in obs and info["task_id"] == task.id
        for _ in range(40):
            obs, reward, terminated, truncated, info = env.step(agent.act(obs)["action"])
            rewards.append(reward)
            if terminated or truncated:
                break
    finally:
        env.close()
    return rewards, info


def test_the_demo_suite_is_registered_on_import():
    ids = wb.registered_ids("demo")
    assert len(ids) == len(DEMO.tasks) == 80
    assert "browsergym/webfreeze.demo.scholar-site-info-001" in ids
    assert gym.spec("browsergym/webfreeze.demo.booking-001").kwargs["task"] == "booking-001"


def test_gym_make_runs_the_reference_to_success_and_records_a_run(tmp_path, cli):
    out = tmp_path / "run"
    tasks = ["scholar-paper-retrieval-001", "shop-001", "booking-001"]
    for tid in tasks:
        rewards, info = play_reference(wb.env_id("demo", tid), backend="text", record_to=out,
                                       headless=True, action_mapping=str)  # (BrowserGym's arguments, ignored)
        assert rewards[-1] == 1.0 and set(rewards[:-1]) <= {0.0}
        assert info["score"] == 1.0 and info["end_reason"] == "answer"
        assert info["trajectory"]["task_id"] == tid and info["trajectory"]["end"]["reason"] == "answer"
        assert {"action_exec_start", "action_exec_stop", "action_exec_timeout"} <= set(info)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["selection"]["ids"] == [t.id for t in DEMO.tasks if t.id in tasks]  # (the suite's order)
    assert manifest["agent"]["name"] == "browsergym" and manifest["complete"] is True
    report = wf.score_run(out)
    assert report["summary"]["overall"]["tasks"] == 3 and report["summary"]["overall"]["success"] == 3
    assert not report.get("warnings")
    done = cli("eval", "report", out)
    assert done.returncode == 0, done.stderr
    done = cli("bundle", "pack", out, "-o", tmp_path / "run.wfb")  # bundles take it
    assert done.returncode == 0, done.stderr
    done = cli("bundle", "verify", tmp_path / "run.wfb")
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr
    # the same actions again give the same trajectories, byte for byte
    again = tmp_path / "again"
    for tid in tasks:
        play_reference(wb.env_id("demo", tid), backend="text", record_to=again)
    for tid in tasks:
        first = json.loads((out / "trajectories" / f"{tid}.json").read_text())
        second = json.loads((again / "trajectories" / f"{tid}.json").read_text())
        assert dumps(without_timings(first)) == dumps(without_timings(second))
    # another run's settings are not mixed into this folder
    with pytest.raises(wb.RegistrationError, match="holds a different run"):
        play_reference(wb.env_id("demo", "shop-001"), backend="text", seed=7, record_to=out)


def test_gym_make_in_the_browser(tmp_path):
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    rewards, info = play_reference(wb.env_id("demo", "scholar-paper-retrieval-001"), record_to=tmp_path / "run")
    assert rewards[-1] == 1.0 and info["trajectory"]["env"]["backend"] == "browser"
    assert wf.score_run(tmp_path / "run")["summary"]["overall"]["success"] == 1


def test_an_unfinished_episode_is_recorded_as_stopped_and_the_chat_is_browsergyms(tmp_path):
    env = gym.make(wb.env_id("demo", "scholar-site-info-001"), backend="text", record_to=tmp_path / "r",
                   max_episode_steps=2)
    try:
        obs, _ = env.reset()
        env.unwrapped.chat.add_message(role="info", msg="shown to nobody")
        env.unwrapped.chat.add_message(role="user", msg="hurry")
        obs, _, terminated, truncated, _ = env.step("noop()")
        assert [m["role"] for m in obs["chat_messages"]] == ["assistant", "user", "user"]
        obs, _, terminated, truncated, _ = env.step("noop()")
        assert truncated and not terminated  # (gym's TimeLimit, from max_episode_steps)
    finally:
        env.close()
    traj = json.loads((tmp_path / "r" / "trajectories" / "scholar-site-info-001.json").read_text())
    assert traj["end"]["reason"] == "stopped" and len(traj["steps"]) == 2


def test_register_suite_and_refusals(tmp_path):
    suite = tmp_path / "mine"
    shutil.copytree(SUITE, suite)
    manifest = json.loads((suite / "manifest.json").read_text())
    manifest.update(name="my-suite", archive=str(SUITE.parent / "demo.wfz"))
    (suite / "manifest.json").write_text(json.dumps(manifest))
    lines = (suite / "tasks.jsonl").read_text().splitlines()[:2]
    (suite / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    ids = wb.register_suite(suite)
    assert ids == [f"browsergym/webfreeze.my-suite.{json.loads(line)['id']}" for line in lines]
    assert wb.register_suite(suite) == ids  # again: nothing changes
    with pytest.raises(wb.RegistrationError, match="taken by"):
        wb.register_suite(SUITE, key="my-suite")
    with pytest.raises(wb.RegistrationError, match="no such"):
        wb.register_suite(tmp_path / "nothing")
    env = gym.make(ids[0], backend="text")
    try:
        obs, _ = env.reset()
        assert obs["goal"] == json.loads(lines[0])["instruction"]
    finally:
        env.close()
    with pytest.raises(wb.RegistrationError, match="viewport"):
        gym.make(ids[0], backend="text", viewport={"width": 800, "height": 600})
    with pytest.raises(wb.RegistrationError, match="wait_for_user_message"):
        gym.make(ids[0], backend="text", wait_for_user_message=True)
    with pytest.raises(TypeError, match="colour"):
        gym.make(ids[0], backend="text", colour="red")


def test_importable_without_browsergym_or_agentlab():
    code = ("import sys; sys.modules['browsergym'] = None; sys.modules['agentlab'] = None\n"
            "import webfreeze.browsergym as wb; print(len(wb.registered_ids('demo')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "80"


def test_a_benchmark_refuses_tasks_its_folder_holds_only_for_its_own_run(tmp_path):
    """``agentlab_benchmark(record_to=...)``'s check before anything is played: a folder these
    environments recorded of the same suite names the tasks played and how many are left; a folder
    another command wrote (whose selection lists tasks chosen, not played) or of another suite is
    left to each reset's check, which says what differs."""
    def folder(name, recorded_by="webfreeze.browsergym", suite=None):
        out = tmp_path / name
        out.mkdir()
        manifest = {"suite": suite or {"name": DEMO.name, "digest": DEMO.digest, "tasks": len(DEMO.tasks)},
                    "selection": {"ids": ["shop-001", "booking-001"]}, "circumstances": {"recorded_by": recorded_by}}
        (out / "manifest.json").write_text(json.dumps(manifest))
        return out

    asked = ["shop-001", "booking-001", "booking-002"]
    with pytest.raises(wb.RegistrationError) as refused:
        wb._refuse_played(folder("ours"), str(SUITE), asked)
    said = str(refused.value)
    assert "already holds an episode of shop-001, booking-001 (2 of 3 asked for, 1 left to play)" in said
    assert "\n" not in said
    wb._refuse_played(folder("ours-again"), str(SUITE), ["booking-002"])  # (nothing played of these)
    wb._refuse_played(folder("bench-run", recorded_by="webfreeze.bench"), str(SUITE), asked)
    wb._refuse_played(folder("other-suite", suite={"name": "x", "digest": "0" * 64, "tasks": 2}), str(SUITE), asked)
    wb._refuse_played(tmp_path / "new", str(SUITE), asked)
