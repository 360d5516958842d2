"""``bundle run`` decides what it refuses before it writes, and leaves no half-written ``--out``
(a suite-only bundle, a bad ``--agent`` setting, a failure while running); a bundled run whose
actions came from outside webfreeze (an MCP client through ``webfreeze mcp``, a Gymnasium loop
through ``webfreeze.browsergym``) is reported as not re-runnable, never re-run into a false
difference."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from cli_runner import run_cli

from webfreeze.archives import archive_digest
from webfreeze.demo import SUITE

TASK = "shop-001"


@pytest.fixture(scope="module")
def suite_bundle(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("suite-bundle") / "ps.wfb"
    proc = run_cli("bundle", "pack", SUITE, "-o", path)
    assert proc.returncode == 0, proc.stderr
    return path


def test_a_suite_alone_is_refused_with_nothing_written_and_the_retry_with_agent_works(suite_bundle, tmp_path):
    out = tmp_path / "psrun"
    proc = run_cli("bundle", "run", suite_bundle, "--out", out)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "holds no runs to re-run (give --agent" in lines[0] and not out.exists()
    # a setting --agent does not take: refused before the folder exists too
    proc = run_cli("bundle", "run", suite_bundle, "--agent", "keyword", "--agent-config", "bogus=1",
                   "--backend", "text", "--out", out)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and "has no setting 'bogus'" in lines[0], proc.stderr
    assert not out.exists()
    # the retry the refusal suggests, into the same --out
    proc = run_cli("bundle", "run", suite_bundle, "--agent", "keyword", "--backend", "text", "--limit", "2",
                   "--out", out)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "runs" / "keyword" / "report.json").read_text())
    assert report["suite"]["tasks"] == 2 and report["run"]["agent"]["name"] == "keyword"
    # the suite travels with a packed copy of its archive, and its manifest names that copy
    assert "not the archive the suite was made for" not in proc.stderr, proc.stderr
    bundled = json.loads((out / "suite" / "manifest.json").read_text())
    assert bundled["archive_digest"] == archive_digest(out / "archive" / "demo.wfz")
    assert bundled["archive_digest"] != json.loads((SUITE / "manifest.json").read_text())["archive_digest"]


def test_a_failure_while_running_removes_what_was_written(suite_bundle, tmp_path):
    from webfreeze.bundles.run import run_bundle
    from webfreeze.runs.spec import RunError

    def fails(config):
        Path(config["out"]).mkdir(parents=True)
        raise RunError("the run stopped")

    out = tmp_path / "new" / "psrun"  # (its parent is made for it, and removed with it)
    with pytest.raises(RunError, match="the run stopped"):
        run_bundle(suite_bundle, out, agent="keyword", run_fn=fails)
    assert not (tmp_path / "new").exists()
    given = tmp_path / "empty"  # an empty folder given: kept, and left empty
    given.mkdir()
    with pytest.raises(RunError):
        run_bundle(suite_bundle, given, agent="keyword", run_fn=fails)
    assert given.is_dir() and list(given.iterdir()) == []


# ------------------------------------------------------------------------ runs driven from outside
def _mcp_run(out: Path) -> None:
    """The smallest real MCP run: the MCP SDK's client, over stdio, answers one task of the demo
    suite through ``webfreeze mcp`` (text backend)."""
    anyio = pytest.importorskip("anyio")
    pytest.importorskip("mcp")
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, env=dict(os.environ),
                                   args=["-m", "webfreeze", "mcp", str(SUITE), "--task", TASK, "--backend", "text",
                                         "--out", str(out)])

    async def main():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("answer", {"text": "I do not know"})
            assert not result.isError, result.content

    anyio.run(main)


@pytest.fixture(scope="module")
def mixed_bundle(tmp_path_factory) -> Path:
    """A bundle of a bench run (``ref``) and an MCP run (``mcp``) of the same task."""
    base = tmp_path_factory.mktemp("mixed")
    proc = run_cli("bench", "run", SUITE, "--agent", "reference", "--backend", "text", "--tasks", TASK,
                   "--out", base / "ref")
    assert proc.returncode == 0, proc.stderr[-2000:]
    _mcp_run(base / "mcp")
    manifest = json.loads((base / "mcp" / "manifest.json").read_text())
    assert manifest["agent"]["name"] == "webfreeze.mcp_server:MCPClient" and manifest["tasks_done"] == 1
    path = base / "mixed.wfb"
    proc = run_cli("bundle", "pack", base / "ref", base / "mcp", "-o", path)
    assert proc.returncode == 0, proc.stderr
    return path


@pytest.mark.slow
def test_an_mcp_run_is_reported_as_not_re_runnable_and_the_others_are_re_run(mixed_bundle, tmp_path):
    out = tmp_path / "re"
    proc = run_cli("bundle", "run", mixed_bundle, "--out", out)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "ref: identical to the bundled run" in proc.stdout and "DIFFERS" not in proc.stdout
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("mcp:")]
    assert len(line) == 1 and line[0].startswith("mcp: could not be re-run: its actions came from outside webfreeze")
    assert "external MCP client, executor 'mcp'" in line[0] and "Traceback" not in proc.stderr
    assert line[0] in proc.stderr.splitlines()  # (said as it goes, on stderr, in the same words)
    assert (out / "runs" / "ref" / "report.json").is_file() and not (out / "runs" / "mcp").exists()
    # the MCP run alone: the same line, and with nothing to re-run nothing is written
    alone = tmp_path / "alone"
    proc = run_cli("bundle", "run", mixed_bundle, "--run", "mcp", "--out", alone)
    assert proc.returncode == 1 and proc.stdout.strip() == line[0], proc.stdout + proc.stderr
    assert not alone.exists()


@pytest.mark.slow
def test_a_gymnasium_run_is_reported_as_not_re_runnable(tmp_path):
    gym = pytest.importorskip("gymnasium")
    import webfreeze.browsergym as wb
    from webfreeze.agents import TaskView, make_agent
    from webfreeze.eval.tasks import load_suite

    run = tmp_path / "gym"
    task = load_suite(SUITE).by_id()[TASK]
    agent = make_agent("reference")
    agent.reset(TaskView.from_task(task.raw, task.reference))
    env = gym.make(wb.env_id("demo", TASK), backend="text", record_to=run)
    try:
        obs, _ = env.reset()
        for _ in range(40):
            obs, _, terminated, truncated, _ = env.step(agent.act(obs)["action"])
            if terminated or truncated:
                break
    finally:
        env.close()
    bundle = tmp_path / "gym.wfb"
    proc = run_cli("bundle", "pack", run, "-o", bundle)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "re"
    proc = run_cli("bundle", "run", bundle, "--out", out)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stdout.startswith("gym: could not be re-run: its actions came from outside webfreeze")
    assert "recorded by 'webfreeze.browsergym'" in proc.stdout and not out.exists()


def test_only_runs_driven_from_outside_are_told_apart_by_their_manifest():
    from webfreeze.bundles.run import played_outside

    assert played_outside({"agent": {"name": "reference"}, "circumstances": {"executor": "local"}}) is None
    assert played_outside({"agent": {"name": "reference"}, "circumstances": {"executor": "ray"}}) is None
    assert played_outside({"agent": {"name": "keyword"}}) is None  # (an older manifest without circumstances)
    assert "a driver outside the runner, executor 'elsewhere'" in played_outside(
        {"agent": {"name": "x:Y", "config": {}}, "circumstances": {"executor": "elsewhere"}})


# ------------------------------------------------------------------ a report scored with --strict-replay
def test_a_run_scored_with_strict_replay_re_runs_identically(tmp_path):
    """``eval report --strict-replay`` adds ``strict_replay`` to report.json; the re-run is scored
    the way the bundled report was, so the bundle re-runs identically (it used to differ at
    ``strict_replay``, worded as a cassette's "only in the stored request")."""
    run = tmp_path / "kw"
    proc = run_cli("bench", "run", SUITE, "--agent", "keyword", "--backend", "text", "--limit", "2", "--out", run)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run_cli("eval", "report", run, "--strict-replay")
    assert proc.returncode == 0, proc.stderr
    assert "strict_replay" in json.loads((run / "report.json").read_text())
    path = tmp_path / "strict.wfb"
    proc = run_cli("bundle", "pack", run, "-o", path)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "re"
    proc = run_cli("bundle", "run", path, "--out", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "kw: identical to the bundled run" in proc.stdout, proc.stdout
    assert "strict_replay" in json.loads((out / "runs" / "kw" / "report.json").read_text())


def test_a_report_difference_names_the_bundle_not_a_stored_request(tmp_path):
    """The line naming a report's first difference speaks of the two runs, not of an LLM request."""
    from webfreeze.runs.compare import run_difference

    for name, report in (("a", {"x": 1, "extra": 2}), ("b", {"x": 1})):
        (tmp_path / name / "trajectories").mkdir(parents=True)
        (tmp_path / name / "report.json").write_text(json.dumps(report))
    line = run_difference(tmp_path / "a", tmp_path / "b", names=("the bundle", "the re-run"))
    assert line == "report.json differs at extra (only in the bundle)", line
    line = run_difference(tmp_path / "b", tmp_path / "a", names=("the bundle", "the re-run"))
    assert line == "report.json differs at extra (only in the re-run)", line
    (tmp_path / "b" / "report.json").write_text(json.dumps({"x": 2}))
    line = run_difference(tmp_path / "b", tmp_path / "a", names=("the bundle", "the re-run"))
    assert line == "report.json differs at extra (only in the re-run)", line
    (tmp_path / "a" / "report.json").write_text(json.dumps({"x": 1}))
    line = run_difference(tmp_path / "b", tmp_path / "a", names=("the bundle", "the re-run"))
    assert line == "report.json differs at x (2 in the bundle, 1 in the re-run)", line
