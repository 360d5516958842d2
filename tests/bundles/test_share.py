"""Sharing safely and portably (issue 34): run folders that pack from any directory, old run
folders that still load, key-free OpenAI-compatible endpoints, and a failed start that leaves no
run folder behind."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from cli_runner import invoke, run_cli
from llm_server import ChatServer, completion

from webfreeze.demo import ARCHIVE, SUITE


@pytest.fixture()
def project(tmp_path) -> Path:
    """A project folder with the demo's suite and archive side by side, as a user lays them out."""
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copytree(SUITE, proj / "suite")
    shutil.copyfile(ARCHIVE, proj / "demo.wfz")
    return proj


def _reference_run(project: Path) -> Path:
    proc = run_cli("bench", "run", "suite", "--agent", "reference", "--backend", "text", "--limit", "2",
                   "--out", "runs/ref", "--no-report", cwd=project)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return project / "runs" / "ref"


def test_a_run_made_in_one_directory_packs_from_the_root(project, tmp_path):
    run = _reference_run(project)
    where = json.loads((run / "manifest.json").read_text())["circumstances"]
    # never relative to the directory the run started from
    assert Path(where["suite_path"]).is_absolute() and Path(where["archive_path"]).is_absolute()
    out = tmp_path / "ref.wfb"
    proc = invoke("bundle", "pack", run, "-o", out, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert "1 run(s)" in proc.stdout


def test_an_old_run_folder_with_cwd_relative_paths_still_packs(project, tmp_path):
    run = _reference_run(project)
    manifest = json.loads((run / "manifest.json").read_text())
    # what the runner wrote before: paths relative to the directory the command ran in
    manifest["circumstances"].update(suite_path="suite", archive_path="suite/../demo.wfz")
    (run / "manifest.json").write_text(json.dumps(manifest))
    proc = invoke("bundle", "pack", run, "-o", tmp_path / "old.wfb", cwd="/")
    assert proc.returncode == 0, proc.stderr


def test_suite_and_archive_can_be_given_and_a_wrong_suite_is_refused(project, tmp_path):
    run = _reference_run(project)
    moved = tmp_path / "moved"
    (project / "suite").rename(moved)
    proc = invoke("bundle", "pack", run, "-o", tmp_path / "a.wfb", cwd="/")
    assert proc.returncode == 1 and "give --suite" in proc.stderr and "Traceback" not in proc.stderr
    proc = invoke("bundle", "pack", run, "--suite", moved, "--archive", project / "demo.wfz", "-o",
                   tmp_path / "b.wfb", cwd="/")
    assert proc.returncode == 0, proc.stderr
    other = tmp_path / "other"
    shutil.copytree(moved, other)
    with open(other / "tasks.jsonl", "a") as f:  # one more task: another suite
        first = (moved / "tasks.jsonl").read_text().splitlines()[0]
        f.write(json.dumps(dict(json.loads(first), id="extra-task")) + "\n")
    proc = invoke("bundle", "pack", run, "--suite", other, "-o", tmp_path / "c.wfb", cwd="/")
    assert proc.returncode == 1 and "is not the suite the runs ran" in proc.stderr
    assert not (tmp_path / "c.wfb").exists()


# ---------------------------------------------------------------------------------- key-free endpoints
def _no_keys() -> dict:
    return {k: v for k, v in os.environ.items() if "KEY" not in k.upper() and "TOKEN" not in k.upper()}


@pytest.fixture()
def chat():
    server = ChatServer(lambda request: (200, completion("ANSWER; nothing", 10, 3)))
    yield server
    server.close()


def test_no_api_key_runs_against_a_key_free_endpoint(chat, tmp_path):
    out = tmp_path / "q"
    proc = run_cli("bench", "run", SUITE, "--agent", "llm", "--llm", f"m@{chat.url}", "--no-api-key",
                   "--backend", "text", "--limit", "1", "--max-steps", "2", "--out", out, "--no-report",
                   env=_no_keys())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert chat.requests, "the endpoint was never called"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["agent"]["config"]["api_key_env"] is None


def test_a_missing_key_is_refused_before_anything_is_written(chat, tmp_path):
    out = tmp_path / "q"
    proc = run_cli("bench", "run", SUITE, "--agent", "llm", "--llm", f"m@{chat.url}", "--llm-key-env", "NONE_NEEDED",
                   "--backend", "text", "--limit", "1", "--out", out, env=_no_keys())
    assert proc.returncode != 0
    assert "NONE_NEEDED is not set" in proc.stderr and "--no-api-key" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists() and not chat.requests
    # the corrected command then runs in the same place
    proc = run_cli("bench", "run", SUITE, "--agent", "llm", "--llm", f"m@{chat.url}", "--no-api-key",
                   "--backend", "text", "--limit", "1", "--max-steps", "2", "--out", out, "--no-report",
                   env=_no_keys())
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_an_empty_api_key_env_means_no_key_in_the_python_api(chat, tmp_path, monkeypatch):
    from webfreeze.runs.execute import run

    for k in list(os.environ):
        if "KEY" in k.upper():
            monkeypatch.delenv(k)
    manifest = run(SUITE, "llm", tmp_path / "py", backend="text", limit=1, max_steps=2,
                   agent_config={"model": "m", "base_url": chat.url, "api_key_env": ""})
    assert manifest["complete"] and chat.requests


# ---------------------------------------------------------------------------------- agents in bundles
PLUGIN = '''
class Answerer:
    """A plug-in agent: answers at once."""

    def reset(self, task_view):
        pass

    def act(self, obs):
        return {"action": "ANSWER; nothing"}
'''


def test_bundle_run_reruns_what_it_can_and_names_the_missing_plugin(project, tmp_path):
    from webfreeze.bundles.pack import info

    plug = tmp_path / "plug"
    plug.mkdir()
    (plug / "wf_test_answerer.py").write_text(PLUGIN)
    with_plugin = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(plug), os.environ.get("PYTHONPATH")])))
    _reference_run(project)
    proc = run_cli("bench", "run", "suite", "--agent", "wf_test_answerer:Answerer", "--backend", "text", "--limit", "2",
                   "--out", "runs/plug", cwd=project, env=with_plugin)
    assert proc.returncode == 0, proc.stderr[-2000:]
    code = json.loads((project / "runs" / "plug" / "manifest.json").read_text())["agent_code"]
    import hashlib
    assert code["module"] == "wf_test_answerer" and code["source_file"] == "wf_test_answerer.py"
    assert code["source_sha256"] == "sha256:" + hashlib.sha256(PLUGIN.encode()).hexdigest()
    proc = run_cli("bench", "run", "suite", "--agent", "reference", "--backend", "text", "--limit", "2",
                   "--out", "runs/ref", cwd=project)  # (the reference run again: it resumes, nothing to do)
    bundle = tmp_path / "b.wfb"
    proc = run_cli("bundle", "pack", project / "runs" / "ref", project / "runs" / "plug", "--with-agent-source",
                   "-o", bundle, cwd="/", env=with_plugin)
    assert proc.returncode == 0, proc.stderr
    runs = {r["name"]: r for r in info(bundle)["runs"]}
    assert runs["plug"]["agent_source"] == "runs/plug/agent/wf_test_answerer.py"
    import zipfile
    with zipfile.ZipFile(bundle) as zf:
        assert zf.read("runs/plug/agent/wf_test_answerer.py").decode() == PLUGIN
    # the plug-in is not installed where the bundle is re-run: the other run still is, and it is named
    proc = run_cli("bundle", "run", bundle, "--out", tmp_path / "re", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ref: identical to the bundled run" in proc.stdout
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("plug:")]
    assert len(line) == 1 and "could not be re-run" in line[0] and "wf_test_answerer" in line[0]
    assert "runs/plug/agent/wf_test_answerer.py" in line[0] and "Traceback" not in proc.stderr
    # --run selects: the reference run alone passes
    proc = run_cli("bundle", "run", bundle, "--out", tmp_path / "re2", "--run", "ref", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "plug" not in proc.stdout
    proc = run_cli("bundle", "run", bundle, "--out", tmp_path / "re3", "--run", "nope", cwd=tmp_path)
    assert proc.returncode == 1 and "holds no run 'nope'" in proc.stderr and not (tmp_path / "re3").exists()


def test_a_run_failing_before_its_first_episode_leaves_no_folder(tmp_path):
    from webfreeze.llm import Cassette

    empty = tmp_path / "empty.sqlite"
    Cassette(empty, "record").close()  # a real cassette holding no call: strict replay misses at once
    out = tmp_path / "r"
    proc = run_cli("bench", "run", SUITE, "--agent", "llm", "--llm", "m@http://127.0.0.1:9/v1", "--no-api-key",
                   "--backend", "text", "--limit", "1", "--cassette", empty, "--cassette-mode", "replay", "--out", out,
                   env=_no_keys())
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not out.exists()


def test_a_study_with_an_unset_key_is_refused_before_its_folder_exists_and_empty_means_none(chat, tmp_path):
    def study(key_env: str) -> Path:
        path = tmp_path / f"s-{key_env or 'none'}.toml"
        path.write_text(f'suite = "{SUITE}"\nbackend = "text"\nmax_steps = 2\n[tasks]\nlimit = 1\n'
                        f'[[agents]]\nname = "llm"\nsettings = {{ model = "m", base_url = "{chat.url}", '
                        f'api_key_env = "{key_env}" }}\n', encoding="utf-8")
        return path

    out = tmp_path / "out"
    proc = run_cli("study", "run", study("WF_UNSET_KEY"), "--out", out, env=_no_keys())
    assert proc.returncode == 1 and "WF_UNSET_KEY is not set" in proc.stderr and "Traceback" not in proc.stderr
    assert not out.exists() and not chat.requests
    proc = run_cli("study", "run", study(""), "--out", out, env=_no_keys())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert chat.requests
