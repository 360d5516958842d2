"""Every file format a user reads or writes has a JSON Schema (draft 2020-12) in docs/formats/, and
what the code writes validates against it: every JSON file of the shipped demo data, of the demo's
agents' runs, of a study and of a bundle (tests/support/schema_walk.py walks them; a JSON file no
schema covers fails; tests/testbed/test_testbed.py walks a test-bed run, its bundle and its re-run
the same way). Each schema is also shown to reject a file that breaks it (a schema that accepted
anything would pass the rest)."""

from __future__ import annotations

import copy
import json
import shutil
import tomllib
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from schema_walk import check_bundle, check_tree

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ROOT / "docs" / "formats"
DEMO = ROOT / "webfreeze" / "demo" / "data"
SUITES = [DEMO / "suite", DEMO / "long-context"]
NAMES = ("task", "suite-manifest", "reference-trajectory", "trajectory", "run-manifest", "report", "study",
         "study-manifest", "study-report", "study-timings", "bundle-index", "bundle-digest", "context-pool-line")


def validator(name: str) -> Draft202012Validator:
    schema = json.loads((FORMATS / f"{name}.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def check(name: str, data) -> None:
    errors = sorted(validator(name).iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, f"{name}: " + "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])


def test_every_format_has_a_valid_schema_and_no_other_is_there():
    assert sorted(p.name.removesuffix(".schema.json") for p in FORMATS.glob("*.schema.json")) == sorted(NAMES)
    for name in NAMES:
        schema = json.loads((FORMATS / f"{name}.schema.json").read_text(encoding="utf-8"))
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("suite", SUITES, ids=lambda p: p.name)
def test_the_shipped_suites_validate(suite):
    manifest = json.loads((suite / "manifest.json").read_text(encoding="utf-8"))
    check("suite-manifest", manifest)
    lines = [json.loads(line) for line in (suite / manifest.get("tasks", "tasks.jsonl")).read_text().splitlines()
             if line.strip()]
    assert lines
    for task in lines:
        check("task", task)
    references = sorted((suite / "references").glob("*.json"))
    assert references
    for path in references:
        check("reference-trajectory", json.loads(path.read_text(encoding="utf-8")))


# ------------------------------------------------------------------------------ what the code writes
# Every JSON file a command writes is walked (tests/support/schema_walk.py): each validates against
# its format's schema, and a JSON file no schema covers fails (a new format needs a schema).
@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory):
    """The demo's three agents as ``webfreeze demo`` runs them (DEMO_OUT/<agent>), on a few tasks: the
    oracle and the keyword baseline in the text backend, the LLM agent on one task in the browser
    backend with its calls replayed from the shipped cassette (about half a minute in all)."""
    from cli_runner import invoke

    from webfreeze.demo import CASSETTE, LLM_MAX_STEPS

    out = tmp_path_factory.mktemp("schemas") / "demo"
    tasks = ["--tasks", "scholar-*-001", "--tasks", "shop-001", "--tasks", "booking-001"]
    for agent in ("reference", "keyword"):
        result = invoke("bench", "run", str(DEMO / "suite"), "--agent", agent, "--backend", "text", *tasks,
                        "--out", str(out / agent))
        assert result.returncode == 0, result.stderr
    result = invoke("bench", "run", str(DEMO / "suite"), "--agent", "llm", "--llm", "local", "--cassette", str(CASSETTE),
                    "--cassette-mode", "replay", "--max-steps", str(LLM_MAX_STEPS), "--backend", "browser",
                    "--tasks", "shop-001", "--out", str(out / "llm"))
    assert result.returncode == 0, result.stderr
    return out


def test_every_json_file_of_the_demo_runs_validates(demo_runs):
    counts = check_tree(demo_runs)
    assert counts["run-manifest"] == counts["report"] == counts["task"] == 3
    assert counts["trajectory"] == 8 + 8 + 1 and counts["reference-trajectory"] == 8 + 8 + 1
    llm = json.loads((demo_runs / "llm" / "trajectories" / "shop-001.json").read_text(encoding="utf-8"))
    assert llm["steps"] and all("llm" in step["agent_fields"] for step in llm["steps"])  # (the richest steps)


def test_every_json_file_of_the_shipped_demo_data_validates():
    counts = check_tree(DEMO)
    assert counts["suite-manifest"] == len(SUITES) and counts["context-pool-line"] == 1


def test_every_json_file_of_a_bundle_and_its_re_run_validates(demo_runs, tmp_path):
    from cli_runner import invoke

    bundle = tmp_path / "run.wfb"
    result = invoke("bundle", "pack", str(demo_runs / "keyword"), "-o", str(bundle))
    assert result.returncode == 0, result.stderr
    counts = check_bundle(bundle, tmp_path / "unpacked")
    assert counts["bundle-index"] == counts["bundle-digest"] == counts["run-manifest"] == counts["suite-manifest"] == 1
    result = invoke("bundle", "run", str(bundle), "--out", str(tmp_path / "rerun"))  # what a re-run writes too
    assert result.returncode == 0, result.stderr
    counts = check_tree(tmp_path / "rerun")
    assert counts["run-manifest"] == 2 and counts["suite-manifest"] == 1


def test_a_json_file_no_schema_covers_or_that_breaks_its_schema_fails_the_walk(demo_runs, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(demo_runs / "keyword", run)
    (run / "notes.json").write_text("{}", encoding="utf-8")
    with pytest.raises(AssertionError, match=r"notes\.json: no schema covers this file"):
        check_tree(run)
    (run / "notes.json").unlink()
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    del manifest["agent"]
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    with pytest.raises(AssertionError, match=r"manifest\.json \(run-manifest\)"):
        check_tree(run)


STUDY = f"""
name = "schemas"
suite = "{DEMO / 'suite'}"
backend = "text"
max_steps = 3
repeats = 2

[tasks]
categories = ["site-info", "shopping"]
per_category = 1

[[agents]]
name = "keyword"

[[agents]]
name = "reference"
"""


def test_every_json_file_of_a_study_validates(tmp_path):
    from cli_runner import invoke

    path = tmp_path / "study.toml"
    path.write_text(STUDY, encoding="utf-8")
    check("study", tomllib.loads(STUDY))
    result = invoke("study", "run", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    counts = check_tree(tmp_path / "out")
    assert counts["study-manifest"] == counts["study-report"] == counts["study-timings"] == 1
    assert counts["run-manifest"] == 4
    manifest = json.loads((tmp_path / "out" / "study.json").read_text(encoding="utf-8"))
    assert manifest["complete"] and len(manifest["cells"]) == 4


@pytest.mark.parametrize("example", sorted((ROOT / "examples" / "studies").glob("*.toml")), ids=lambda p: p.stem)
def test_the_example_studies_validate(example):
    check("study", tomllib.loads(example.read_text(encoding="utf-8")))


# ------------------------------------------------------------------------------ the schemas can fail
BROKEN = [
    ("task", {"id": "t", "category": "c", "instruction": "i", "ground_truth": {"guess": 1}}),
    ("task", {"id": "t", "category": "c", "instruction": "i"}),
    ("suite-manifest", {"format": "webfreeze-suite", "version": 2, "name": "x"}),
    ("reference-trajectory", {"version": 1, "kind": "reference_trajectory", "start_url": "http://a/", "steps": {}}),
    ("trajectory", {"format": "webfreeze-trajectory", "version": 1, "task_id": "t", "steps": [],
                    "end": {"reason": "bored"}}),
    # replay provenance: a level no rule gives; an episode's sums without its start
    ("trajectory", {"format": "webfreeze-trajectory", "version": 1, "task_id": "t", "end": {"reason": "answer"},
                    "steps": [{"action": "noop()", "replay": {"document": None, "requests": {"xhr": {"approximate": 1}},
                                                              "flagged": [], "answers": []}}]}),
    ("trajectory", {"format": "webfreeze-trajectory", "version": 1, "task_id": "t", "steps": [],
                    "end": {"reason": "answer"}, "replay": {"requests": {}, "documents": {}, "fuzzy_documents": 0,
                                                            "fuzzy_xhr": 0, "misses": 0, "compromised": False}}),
    ("run-manifest", {"format": "webfreeze-run", "version": 1}),
    ("report", {"format": "webfreeze-report", "version": 1}),
    ("study", {"agents": [{"name": "keyword", "colour": "red"}]}),
    ("study-manifest", {"format": "webfreeze-study", "version": 1, "name": "x"}),
    ("study-report", {"format": "webfreeze-study-report", "version": 1, "study": {"name": "x"}}),
    ("study-timings", {"format": "webfreeze-study-timings", "version": 1, "cells": {"a": {"elapsed_s": 1}}}),
    ("bundle-digest", {"path": "datapackage.json", "hash": "md5:00"}),
    ("context-pool-line", {"format": "webfreeze-context-pool", "version": 1}),
    ("context-pool-line", {"id": "x", "steps": "none"}),
    ("bundle-index", {"profile": "data-package", "format": "webfreeze-bundle", "version": 1, "title": "t",
                      "software": "webfreeze 0", "contents": {"archive": "a", "suite": "s", "runs": []},
                      "resources": [{"name": "a", "path": "a", "bytes": 1, "hash": "md5:00"}]}),
]


@pytest.mark.parametrize("name, data", BROKEN, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BROKEN)])
def test_a_schema_rejects_what_breaks_it(name, data):
    with pytest.raises(ValidationError):
        validator(name).validate(copy.deepcopy(data))
