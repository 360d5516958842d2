"""A browser run records the replay's page runtime among its versions, and where two runs (or a
bundled run and its re-run) differ, the versions they differ in are named beside the difference: a
page whose timing or randomness matters can part two runs made by different runtimes or browsers.
A run made before a version was recorded still re-runs as identical."""

from __future__ import annotations

import json
import shutil

import pytest

from webfreeze.bundles.run import compare_run
from webfreeze.demo import SUITE
from webfreeze.runs.compare import compare_runs, version_differences
from webfreeze.simulator import browser
from webfreeze.simulator.browser import page_runtime_digest

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


def _json(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_a_browser_run_records_the_page_runtime_and_a_text_run_does_not(runs):
    digest = _json(runs["browser"] / "manifest.json")["versions"]["page_runtime"]
    assert digest == page_runtime_digest() and len(digest) == 16
    assert _json(runs["browser"] / "report.json")["run"]["versions"]["page_runtime"] == digest
    assert "page_runtime" not in _json(runs["text"] / "manifest.json")["versions"]
    # and the web-font hinting the browser drew with (this machine's fontconfig's)
    assert _json(runs["browser"] / "manifest.json")["versions"]["font_hinting"] == browser.FONT_HINTING
    assert browser.FONT_HINTING in ("none", "slight", "medium", "full")


def test_every_run_records_how_requests_are_matched(runs, monkeypatch):
    """A change in how a request is matched (the default ignorable fields, which form fields may
    differ) can answer a re-run differently on the same archive: every run names it."""
    from webfreeze.replayer import matching

    for backend in ("browser", "text"):
        assert _json(runs[backend] / "manifest.json")["versions"]["replay_matching"] == matching.matching_digest()
    before = matching.matching_digest()
    monkeypatch.setattr(matching, "MATCHING_VERSION", matching.MATCHING_VERSION + 1)
    assert matching.matching_digest() != before
    monkeypatch.undo()
    monkeypatch.setattr(matching, "AGENT_RULES", {**matching.AGENT_RULES, "fuzzy_xhr": True})
    assert matching.matching_digest() != before


def test_the_digest_follows_what_pages_are_made_to_see(monkeypatch):
    before = page_runtime_digest()
    monkeypatch.setattr(browser, "TIMER_CAP", browser.TIMER_CAP + 1)  # the pump's bound, not the script's text
    assert page_runtime_digest() != before
    monkeypatch.undo()
    from webfreeze.replayer import determinism

    monkeypatch.setattr(determinism, "STALL_MS", determinism.STALL_MS + 1)
    assert page_runtime_digest() != before


def _other_runtime_copy(run, dest):
    """A copy of ``run`` as another page runtime would have made it: its manifest names another
    runtime and its trajectory's answer differs."""
    shutil.copytree(run, dest)
    manifest = _json(dest / "manifest.json")
    manifest["versions"]["page_runtime"] = "0" * 16
    (dest / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    path = dest / "trajectories" / f"{TASK}.json"
    traj = _json(path)
    traj["answer"] = "something else"
    path.write_text(json.dumps(traj), encoding="utf-8")
    return dest


def test_bench_compare_names_the_versions_two_runs_differ_in(runs, tmp_path, cli):
    digest = page_runtime_digest()
    same = tmp_path / "same"
    shutil.copytree(runs["browser"], same)
    assert compare_runs(runs["browser"], same)["versions"] == []
    other = _other_runtime_copy(runs["browser"], tmp_path / "other")
    result = compare_runs(runs["browser"], other)
    assert result["versions"] == [{"name": "page_runtime", "a": digest, "b": "0" * 16}]
    r = cli("bench", "compare", runs["browser"], other)
    assert r.returncode == 1
    assert f"versions differ: page_runtime {digest} (A), {'0' * 16} (B)" in r.stderr
    # a run that did not record it (made before it was): said so, not as a value
    old = tmp_path / "old"
    shutil.copytree(runs["browser"], old)
    manifest = _json(old / "manifest.json")
    del manifest["versions"]["page_runtime"]
    (old / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    r = cli("bench", "compare", old, other)
    assert f"page_runtime not recorded (A), {'0' * 16} (B)" in r.stderr


def test_bench_compare_names_the_settings_two_runs_differ_in(runs, tmp_path, cli):
    """A text run against a browser run (the same suite, agent and archive) parts at step 0: the
    line under the table says the backends differ, and a text run has no browser (it did not
    fail to record one)."""
    result = compare_runs(runs["text"], runs["browser"])
    assert result["settings"] == [{"name": "backend", "a": "text", "b": "browser"}]
    r = cli("bench", "compare", runs["text"], runs["browser"])
    assert r.returncode == 1
    assert "settings differ: backend text (A), browser (B)" in r.stderr, r.stderr
    assert "browser none (text backend) (A)" in r.stderr and "not recorded" not in r.stderr, r.stderr
    # another archive (a later snapshot), another seed: named too
    other = tmp_path / "other"
    shutil.copytree(runs["browser"], other)
    manifest = _json(other / "manifest.json")
    manifest["archive"]["digest"] = "sha256:" + "ab" * 32
    manifest["env"]["seed"] = 7
    (other / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert [d["name"] for d in compare_runs(runs["browser"], other)["settings"]] == ["archive", "seed"]
    r = cli("bench", "compare", runs["browser"], other)
    assert "settings differ: archive " in r.stderr and "sha256:abababababab (B), seed 0 (A), 7 (B)" in r.stderr, \
        r.stderr
    assert compare_runs(runs["browser"], runs["browser"])["settings"] == []


def test_python_is_compared_to_its_minor_release():
    def m(v):
        return {"versions": {"python": v}}
    assert version_differences(m("3.11.7"), m("3.11.9")) == []
    assert version_differences(m("3.11.7"), m("3.12.1")) == [{"name": "python", "a": "3.11.7", "b": "3.12.1"}]


def test_a_bundled_run_that_differs_names_the_versions_too(runs, tmp_path):
    other = _other_runtime_copy(runs["browser"], tmp_path / "rerun")
    line = compare_run(runs["browser"], other)
    assert line.startswith(f"trajectory {TASK}.json differs")
    assert line.endswith(f"; versions differ: page_runtime {page_runtime_digest()} in the bundle, "
                         f"{'0' * 16} here")
    assert compare_run(runs["browser"], runs["browser"]) is None


def test_a_run_made_before_the_runtime_was_recorded_still_reruns_as_identical(runs, tmp_path):
    old = tmp_path / "old"  # the same run as an older webfreeze wrote it: no page_runtime anywhere
    shutil.copytree(runs["browser"], old)
    for name, versions in (("manifest.json", lambda d: d["versions"]), ("report.json", lambda d: d["run"]["versions"])):
        data = _json(old / name)
        del versions(data)["page_runtime"]
        (old / name).write_text(json.dumps(data), encoding="utf-8")
    assert compare_run(old, runs["browser"]) is None
    # but a version the bundled run recorded and the re-run gives otherwise is a difference
    changed = tmp_path / "changed"
    shutil.copytree(runs["browser"], changed)
    data = _json(changed / "report.json")
    data["run"]["versions"]["page_runtime"] = "0" * 16
    (changed / "report.json").write_text(json.dumps(data), encoding="utf-8")
    assert compare_run(changed, runs["browser"]).startswith("report.json differs at run.versions.page_runtime")
