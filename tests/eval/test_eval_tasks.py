"""Task suites: loading, validation errors with file and line, the digest, and `webfreeze tasks check`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from webfreeze.eval.tasks import TaskError, load_suite, suite_digest

GOOD = [
    {"id": "info-001", "category": "site-info", "instruction": "How many archives?", "start_url": "http://scholar.test/",
     "ground_truth": {"answer": {"numeric": 10}}},
    {"id": "shop-001", "category": "shop", "instruction": "Add P-0042 twice", "start_url": "http://shop.test/",
     "snapshot_time": "2026-01-02T03:04:05Z",
     "ground_truth": {"final_state": [{"host": "shop.test", "path": "cart.items", "contains": {"sku": "P-0042", "qty": 2}}],
                      "reference_trajectory": "trajectories/shop-001.json"}},
    {"id": "rank-001", "category": "ranking", "instruction": "Rank", "start_url": None,
     "ground_truth": {"candidates": ["a", "b", "c"], "target": "b"}},
]
REFERENCE = {"version": 1, "kind": "reference_trajectory", "start_url": "http://shop.test/", "steps": []}


def make_suite(root: Path, tasks=GOOD, categories=("site-info", "shop", "ranking"), lines: list[str] | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "trajectories").mkdir(exist_ok=True)
    (root / "trajectories" / "shop-001.json").write_text(json.dumps(REFERENCE))
    (root / "manifest.json").write_text(json.dumps({"format": "webfreeze-suite", "version": 1, "name": "demo",
                                                    "archive_digest": None, "categories": list(categories),
                                                    "tasks": "tasks.jsonl"}))
    body = lines if lines is not None else [json.dumps(t) for t in tasks]
    (root / "tasks.jsonl").write_text("\n".join(body) + "\n")
    return root


def test_loads_a_suite_directory(tmp_path):
    suite = load_suite(make_suite(tmp_path / "s"))
    assert suite.name == "demo" and [t.id for t in suite.tasks] == ["info-001", "shop-001", "rank-001"]
    assert suite.counts() == {"ranking": 1, "shop": 1, "site-info": 1}
    assert suite.tasks[1].reference == REFERENCE                     # the path was resolved and loaded
    assert suite.tasks[1].kinds == ["reference_trajectory", "final_state"]
    assert suite.tasks[2].kinds == ["ranking"]
    assert suite.tasks[0].source.endswith("tasks.jsonl:1")


def test_digest_is_sha256_of_canonical_lines(tmp_path):
    suite = load_suite(make_suite(tmp_path / "s"))
    canonical = "".join(json.dumps(t, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n" for t in GOOD)
    assert suite.digest == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    # formatting does not change the digest; content does
    pretty = make_suite(tmp_path / "p", lines=[json.dumps(t, indent=None, separators=(", ", ": "), sort_keys=False)
                                               for t in GOOD])
    assert load_suite(pretty).digest == suite.digest
    changed = [dict(GOOD[0], instruction="How many archives are there?"), *GOOD[1:]]
    assert suite_digest(changed) != suite.digest


def test_bare_jsonl_and_manifest_file(tmp_path):
    root = make_suite(tmp_path / "s")
    bare = load_suite(root / "tasks.jsonl")
    assert len(bare.tasks) == 3 and bare.digest == load_suite(root / "manifest.json").digest


def error_of(path) -> TaskError:
    with pytest.raises(TaskError) as info:
        load_suite(path)
    return info.value


def test_malformed_line_names_file_and_line(tmp_path):
    lines = [json.dumps(GOOD[0]), "", '{"id": "x", "category": ']   # line 3 (blank line 2 is skipped)
    err = error_of(make_suite(tmp_path / "s", lines=lines))
    assert err.line == 3 and err.file.endswith("tasks.jsonl")
    assert str(err).startswith(f"{err.file}:3: not valid JSON")


def test_unknown_ground_truth_kind(tmp_path):
    bad = dict(GOOD[0], ground_truth={"answer": {"exact": "x"}, "screenshot_diff": {}})
    err = error_of(make_suite(tmp_path / "s", tasks=[GOOD[0], bad]))
    assert err.line == 2 and "unknown ground-truth kind 'screenshot_diff'" in str(err)


def test_duplicate_id(tmp_path):
    err = error_of(make_suite(tmp_path / "s", tasks=[GOOD[0], GOOD[2], GOOD[0]]))
    assert err.line == 3 and "duplicate task id 'info-001' (first on line 1)" in str(err)


def test_missing_reference_trajectory_file(tmp_path):
    root = make_suite(tmp_path / "s")
    (root / "trajectories" / "shop-001.json").unlink()
    err = error_of(root)
    assert err.line == 2 and "reference trajectory trajectories/shop-001.json not found" in str(err)


def test_missing_files(tmp_path):
    assert "no such file or directory" in str(error_of(tmp_path / "nope"))
    root = make_suite(tmp_path / "s")
    (root / "tasks.jsonl").unlink()
    err = error_of(root)
    assert err.file.endswith("tasks.jsonl") and "no such file" in str(err)
    (tmp_path / "empty").mkdir()
    assert "manifest.json" in str(error_of(tmp_path / "empty"))


@pytest.mark.parametrize("gt,message", [
    ({"answer": {"exact": "a", "normalised": "a"}}, "exactly one of"),
    ({"answer": {"numeric": "12"}}, "numeric must be a number"),
    ({"answer": {"numeric": 1, "tolerance": -1}}, "tolerance must be a number >= 0"),
    ({"key_nodes": [{"match_function_name": "url_fuzzy_match", "content": {"reference_answer": "x"}}]},
     "unknown match_function_name 'url_fuzzy_match'"),
    ({"candidates": ["a", "b"], "target": "c"}, "target must be one of"),
    ({"final_state": [{"host": "shop.test", "path": "cart", "count": 1, "equals": 1}]}, "exactly one of"),
    ({"rubric": {"site": "x"}}, "rubric needs websites"),
    ({"rubric": {"websites": "shop.test"}}, "websites must be a non-empty list"),
    ({"ranking": {"target": "c", "candidates": ["a", "b"]}}, "ranking.target must be one of"),
    ({}, "non-empty 'ground_truth'"),
])
def test_ground_truth_shapes_are_checked(tmp_path, gt, message):
    err = error_of(make_suite(tmp_path / "s", tasks=[dict(GOOD[0], ground_truth=gt)]))
    assert err.line == 1 and message in str(err)


def test_category_must_be_in_manifest(tmp_path):
    err = error_of(make_suite(tmp_path / "s", categories=("site-info", "shop")))
    assert err.line == 3 and "category 'ranking'" in str(err)


def test_bad_snapshot_time(tmp_path):
    err = error_of(make_suite(tmp_path / "s", tasks=[dict(GOOD[0], snapshot_time="yesterday")]))
    assert "not ISO 8601" in str(err)


# ------------------------------------------------------------------------------ CLI
def test_cli_tasks_check_counts(tmp_path, cli_here):
    root = make_suite(tmp_path / "s")
    r = cli_here("tasks", "check", root)
    assert r.returncode == 0, r.stderr
    assert [line.split() for line in r.stdout.splitlines()[:4]] == [["ranking", "1"], ["shop", "1"], ["site-info", "1"],
                                                                   ["total", "3"]]
    j = cli_here("tasks", "check", root, "--json")
    data = json.loads(j.stdout)
    assert data["categories"] == {"ranking": 1, "shop": 1, "site-info": 1}
    assert data["kinds"] == {"answer": 1, "final_state": 1, "ranking": 1, "reference_trajectory": 1}
    assert data["digest"] == load_suite(root).digest


def test_cli_malformed_line_is_one_line_and_writes_nothing(tmp_path, cli_here):
    root = make_suite(tmp_path / "s", lines=[json.dumps(GOOD[0]), "{not json"])
    before = sorted(p.name for p in root.rglob("*"))
    r = cli_here("tasks", "check", root)
    assert r.returncode == 1
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("webfreeze: error: ") and "tasks.jsonl:2: not valid JSON" in lines[0]
    assert sorted(p.name for p in root.rglob("*")) == before


@pytest.mark.parametrize("tid", ["../../escaped", "sub/x", "..", "a\\b", "x\x00y", " padded", "tab\there"])
def test_a_task_id_must_be_a_file_name(tmp_path, tid):
    """A run writes RUN_DIR/trajectories/<id>.json: an id from a shared suite must not point elsewhere."""
    err = error_of(make_suite(tmp_path / "s", tasks=[GOOD[0], dict(GOOD[2], id=tid)]))
    assert err.line == 2 and "cannot be a file name" in str(err)


@pytest.mark.parametrize("url", ["pypi.test", "pypi.test/simple/", "/relative", "ftp://x.test/", "http://", ""])
def test_a_start_url_must_be_an_http_url(tmp_path, url):
    """A scheme left out is no URL: refused by the check, not found by an agent at its first step."""
    err = error_of(make_suite(tmp_path / "s", tasks=[GOOD[0], dict(GOOD[2], start_url=url)]))
    assert err.line == 2 and "is not an http:// or https:// URL" in str(err)


def test_cli_bench_run_refuses_a_suite_whose_task_id_climbs_out(tmp_path, cli):
    root = make_suite(tmp_path / "s", tasks=[GOOD[0], dict(GOOD[2], id="../../escaped")])
    r = cli("tasks", "check", root)
    assert r.returncode == 1 and "cannot be a file name" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = cli("bench", "run", root, "--agent", "keyword", "--out", tmp_path / "run", "--backend", "text")
    assert r.returncode != 0 and "cannot be a file name" in r.stderr
    assert not (tmp_path / "escaped.json").exists() and not (tmp_path / "run").exists()


def test_cli_bench_run_names_the_tasks_it_cannot_start(tmp_path, cli):
    """A suite may leave start_url null (tasks check accepts it); a run refuses it up front, naming the
    tasks, instead of failing at that task's reset with an API message."""
    root = make_suite(tmp_path / "s")
    assert cli("tasks", "check", root).returncode == 0
    r = cli("bench", "run", root, "--agent", "keyword", "--out", tmp_path / "run", "--backend", "text")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "1 task(s) have no start_url" in r.stderr and "rank-001" in r.stderr
    assert not (tmp_path / "run").exists()
