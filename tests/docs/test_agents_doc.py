"""docs/agents.md's path to AgentLab from a ``make demo`` set-up runs as written, and what it and
docs/install.md say of the extras and of the MCP tools is so.

The bash block under "From a `make demo` set-up" runs literally in one bash (``set -euo pipefail``)
in a scratch folder laid out like the repository root, with two changes a user makes too: the
endpoint and key (the line exporting ``OPENAI_BASE_URL``/``OPENAI_API_KEY``) name a scripted
OpenAI-compatible server on 127.0.0.1, and ``.venv/bin/pip`` records its arguments instead of
installing (no download here): each pip line is then checked against the test venv, which
scripts/bootstrap.sh made with the same packages (the extras exist and are documented, BrowserGym's
core is the version named, AgentLab's folder was installed from the list named, the packages named
besides are in the test venv). ``.venv/bin/python`` and ``.venv/bin/webfreeze`` are this venv's; ``.venv/agentlab``
is bootstrap's AgentLab (the test is skipped, saying so, without it).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import anyio
import pytest
from llm_server import ChatServer, completion

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "docs" / "agents.md"
INSTALL = ROOT / "docs" / "install.md"
AGENTLAB = Path(os.environ.get("WEBFREEZE_AGENTLAB") or ROOT / ".venv" / "agentlab")


def demo_block() -> str:
    text = AGENTS.read_text(encoding="utf-8")
    section = text.split("*From a `make demo` set-up*", 1)[1]
    return re.search(r"```bash\n(.*?)```", section, re.DOTALL).group(1)


def extras() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]


def test_every_extra_is_named_in_the_install_doc():
    text = INSTALL.read_text(encoding="utf-8")
    missing = [name for name in extras() if f"`[{name}]`" not in text]
    assert not missing, f"extras docs/install.md does not name: {missing}"
    assert "agents.md#2-browsergym-and-agentlab" in text  # where the AgentLab path is


def test_the_mcp_tools_in_the_doc_are_the_servers():
    from webfreeze.mcp_tools import build_server

    served = {t.name for t in anyio.run(build_server(None).list_tools)}
    text = AGENTS.read_text(encoding="utf-8")
    table = text.split("### MCP: an agent that speaks the Model Context Protocol", 1)[1].split("\n\n| tool |", 1)[1]
    table = table.split("\n\n", 1)[0]
    documented = set()
    for row in table.splitlines()[1:]:
        first = row.split("|")[1]
        documented |= set(re.findall(r"`(\w+)`", first))
    assert documented == served
    assert "Written by" not in text and "TODO" not in text and "(to be written" not in text.lower()


def _policy(request: dict):
    """A model that reads the goal and the page from AgentLab's prompt (the demo task asks a count)."""
    prompt = "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for m in request.get("messages", [])
                       for p in (m["content"] if isinstance(m.get("content"), list) else [m.get("content") or ""]))
    count = re.search(r"(\d+) e-prints", prompt)
    action = f"send_msg_to_user('{count.group(1)}')" if "How many e-prints" in prompt and count else "noop()"
    text = f"<think>I read the page and the goal.</think>\n<action>\n{action}\n</action>"
    return 200, completion(text, len(prompt) // 4, len(text) // 4, model=request.get("model", "m"))


def _shim(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(0o755)


@pytest.mark.slow
def test_the_agentlab_path_from_a_demo_set_up_runs_as_written(tmp_path):
    if not (AGENTLAB / "agentlab" / "agents" / "generic_agent").is_dir():
        pytest.skip(f"AgentLab is not installed in {AGENTLAB} (scripts/bootstrap.sh installs it; or set "
                    "WEBFREEZE_AGENTLAB)")
    from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    block = demo_block()
    # the endpoint and key: the one line a user fills in
    endpoint = [line for line in block.splitlines() if "OPENAI_BASE_URL=" in line and line.startswith("export ")]
    assert len(endpoint) == 1, endpoint
    server = ChatServer(_policy)
    script = block.replace(endpoint[0], f"export OPENAI_BASE_URL={server.url} OPENAI_API_KEY=test-key")
    # a scratch root: .venv/bin's commands are this venv's, pip only says what it was asked
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    log = tmp_path / "pip-calls.jsonl"
    py = shlex.quote(sys.executable)
    _shim(bin_dir / "python", f'exec {py} "$@"')
    _shim(bin_dir / "webfreeze", f'exec {py} -m webfreeze "$@"')
    _shim(bin_dir / "pip", f'exec {py} -c \'import json, sys; print(json.dumps(sys.argv[1:]))\' "$@" >> {log}')
    (tmp_path / ".venv" / "agentlab").symlink_to(AGENTLAB)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "agentlab-requirements.txt").symlink_to(ROOT / "tests" / "agentlab-requirements.txt")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TIKTOKEN_CACHE_DIR")}
    env.update(HOME=str(tmp_path / "home"), WEBFREEZE_HOME=str(tmp_path / "wf-home"), HF_HUB_OFFLINE="1")
    try:
        done = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=900, check=False)
    finally:
        server.close()
    out, err = done.stdout, done.stderr
    assert done.returncode == 0, f"{out[-3000:]}\n{err[-3000:]}"

    # what pip was asked is what the test venv holds
    calls = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert calls and all(c[0] == "install" for c in calls)
    for call in calls:
        args = call[1:]
        if "-e" in args:
            spec = args[args.index("-e") + 1]
            named = re.fullmatch(r"\.\[([\w,-]+)\]", spec).group(1).split(",")
            assert set(named) <= set(extras()) and {"demo", "browsergym"} <= set(named)
        elif "-r" in args:
            assert args[args.index("--target") + 1] == ".venv/agentlab" and "--no-deps" in args
            listed = ROOT / args[args.index("-r") + 1]
            stamp = AGENTLAB / ".installed-requirements"
            assert listed.is_file()
            if stamp.exists():  # bootstrap installed AgentLab's folder from this very list
                assert stamp.read_bytes() == listed.read_bytes()
        elif any("==" in a for a in args):
            pinned = [a for a in args if "==" in a]
            assert "--no-deps" in args
            for spec in pinned:
                name, version = spec.split("==")
                assert importlib.metadata.version(name) == version
                assert spec in (ROOT / "scripts" / "bootstrap.sh").read_text(encoding="utf-8")
        else:  # what AgentLab imports that a [demo] venv lacks and the test venv has: into the venv
            packages = [a for a in args if not a.startswith("-")]
            assert packages and "--target" not in args, args
            for package in packages:
                assert importlib.metadata.version(package)
    # the tiktoken cache went where the printed line pointed tiktoken, under the user's home
    assert any((tmp_path / "home" / ".cache" / "webfreeze" / "tiktoken").iterdir())
    # the agent played, its calls went through the cassette to the model, and the run was scored
    run = tmp_path / "runs" / "agentlab"
    trajectory = json.loads((run / "trajectories" / "scholar-site-info-001.json").read_text(encoding="utf-8"))
    assert trajectory["steps"][-1]["action"].startswith("send_msg_to_user(")
    assert server.requests and (run / "llm-cassette.sqlite").is_file()
    report = json.loads((run / "report.json").read_text(encoding="utf-8"))
    assert report["tasks"]["scholar-site-info-001"]["outcome"] == "success"
