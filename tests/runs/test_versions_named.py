"""A browser run records the replay's page runtime among its versions, and where two runs (or a
bundled run and its re-run) differ, the versions they differ in are named beside the difference: a
page whose timing or randomness matters can part two runs made by different runtimes or browsers."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from webfreeze.bundles.run import compare_run
from webfreeze.demo import SUITE
from webfreeze.replayer.determinism import RUNTIME_DIGEST, RUNTIME_JS
from webfreeze.runs.compare import compare_runs

TASK = "scholar-site-info-001"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from cli_runner import run_cli

    root = tmp_path_factory.mktemp("versions")
    out = {}
    for backend in ("browser", "text"):
        out[backend] = root / backend
        r = run_cli("bench", "run", SUITE, "--agent", "reference", "--backend", backend, "--tasks", TASK,
                    "--out", out[backend])
        assert r.returncode == 0, r.stderr
    return out


def _manifest(run):
    return json.loads((run / "manifest.json").read_text(encoding="utf-8"))


def test_a_browser_run_records_the_page_runtime_and_a_text_run_does_not(runs):
    assert RUNTIME_DIGEST == hashlib.sha256(RUNTIME_JS.encode()).hexdigest()[:16]
    assert _manifest(runs["browser"])["versions"]["page_runtime"] == RUNTIME_DIGEST
    assert "page_runtime" not in _manifest(runs["text"])["versions"]


def _other_runtime_copy(run, dest):
    """A copy of ``run`` as another page runtime would have made it: its manifest names another
    runtime and its trajectory's answer differs."""
    shutil.copytree(run, dest)
    manifest = _manifest(dest)
    manifest["versions"]["page_runtime"] = "0" * 16
    (dest / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    path = dest / "trajectories" / f"{TASK}.json"
    traj = json.loads(path.read_text(encoding="utf-8"))
    traj["answer"] = "something else"
    path.write_text(json.dumps(traj), encoding="utf-8")
    return dest


def test_bench_compare_names_the_versions_two_runs_differ_in(runs, tmp_path, cli):
    same = tmp_path / "same"
    shutil.copytree(runs["browser"], same)
    assert compare_runs(runs["browser"], same)["versions"] == []
    other = _other_runtime_copy(runs["browser"], tmp_path / "other")
    result = compare_runs(runs["browser"], other)
    assert result["versions"] == [{"name": "page_runtime", "a": RUNTIME_DIGEST, "b": "0" * 16}]
    r = cli("bench", "compare", runs["browser"], other)
    assert r.returncode == 1
    assert f"versions differ: page_runtime {RUNTIME_DIGEST} (A) vs {'0' * 16} (B)" in r.stderr


def test_a_bundled_run_that_differs_names_the_versions_too(runs, tmp_path):
    other = _other_runtime_copy(runs["browser"], tmp_path / "rerun")
    line = compare_run(runs["browser"], other)
    assert line.startswith(f"trajectory {TASK}.json differs")
    assert line.endswith(f"; versions differ: page_runtime {RUNTIME_DIGEST} in the bundle, {'0' * 16} here")
    # equal runs say nothing of versions
    assert compare_run(runs["browser"], runs["browser"]) is None
