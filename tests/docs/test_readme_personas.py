"""The README's personalised-agents example runs as written from the repository root: in a scratch
folder that holds a non-empty stand-in for every top-level entry of the repository (so an example
writing into `personas/`, a code folder there, fails as it would for a user), the demo data linked
in. Its personas and suite commands run unchanged; the LLM run is checked for what it reads and
writes, and run on its first task for one step when the local model is installed."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def personas_commands() -> list[list[str]]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Personalised agents", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```(?:sh|bash)\n(.*?)```", section, re.DOTALL)
    assert len(block) == 1, "the personalised-agents section has one command block"
    return [shlex.split(line) for line in block[0].replace("\\\n", " ").splitlines() if line.strip()]


def _option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.fixture
def repo_like(tmp_path) -> Path:
    for entry in ROOT.iterdir():
        if entry.name.startswith(".") or entry.name == "webfreeze":
            continue
        if entry.is_dir():
            (tmp_path / entry.name).mkdir()
            (tmp_path / entry.name / "__init__.py").write_text("# the repository's folder of this name\n")
        else:
            (tmp_path / entry.name).write_text("the repository's file of this name\n")
    (tmp_path / "webfreeze" / "demo").mkdir(parents=True)
    (tmp_path / "webfreeze" / "demo" / "data").symlink_to(ROOT / "webfreeze" / "demo" / "data")
    return tmp_path


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    assert args[0] == "webfreeze"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", WEBFREEZE_HOME=str(cwd / "home"))
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_the_personas_example_runs_from_the_repository_root(repo_like):
    generate, tasks, run = personas_commands()
    assert generate[:3] == ["webfreeze", "personas", "generate"] and tasks[:3] == ["webfreeze", "personas", "tasks"]
    assert run[:3] == ["webfreeze", "bench", "run"]
    for args in (generate, tasks):
        result = _run(args, repo_like)
        assert result.returncode == 0, f"{shlex.join(args)}: {result.stderr[-2000:]}"
    # each command reads what the one before wrote (a folder named as one of the repository's would
    # have failed above: the stand-ins are not empty)
    people, suite = _option(generate, "--out"), _option(tasks, "--out")
    assert _option(tasks, "--personas") == people and run[3] == suite
    assert json.loads((repo_like / suite / "manifest.json").read_text())["format"] == "webfreeze-suite"
    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("the local model (xllamacpp) is not installed: the LLM run was not played")
    # one task, one step, a short observation and reply (the last --limit counts): the tiny model reads
    # about 100 tokens a second on one core
    result = _run(run + ["--limit", "1", "--max-steps", "1", "--agent-config", "obs_tokens=200",
                         "--agent-config", "max_tokens=24"], repo_like)
    assert result.returncode == 0, f"{shlex.join(run)}: {result.stderr[-2000:]}"
    assert (repo_like / _option(run, "--out") / "report.json").is_file()
