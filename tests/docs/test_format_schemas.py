"""Every file format a user reads or writes has a JSON Schema (draft 2020-12) in docs/formats/, and
what the code writes validates against it: the shipped demo's suites and references, a run of the
demo suite (its manifest, trajectories and report), a study (its file and study.json), and a
bundle's index. Each schema is also shown to reject a file that breaks it (a schema that accepted
anything would pass the rest)."""

from __future__ import annotations

import copy
import json
import tomllib
import zipfile
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

ROOT = Path(__file__).resolve().parents[2]
FORMATS = ROOT / "docs" / "formats"
DEMO = ROOT / "webfreeze" / "demo" / "data"
SUITES = [DEMO / "suite", DEMO / "long-context"]
NAMES = ("task", "suite-manifest", "reference-trajectory", "trajectory", "run-manifest", "report", "study",
         "study-manifest", "bundle-index")


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
@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The keyword baseline and the oracle on a few demo tasks, text backend (seconds)."""
    from cli_runner import invoke

    out = tmp_path_factory.mktemp("schemas") / "run"
    result = invoke("bench", "run", str(DEMO / "suite"), "--agent", "keyword", "--backend", "text",
                    "--tasks", "scholar-*-001", "--tasks", "shop-001", "--tasks", "booking-001", "--out", str(out))
    assert result.returncode == 0, result.stderr
    return out


def test_a_run_validates(run_dir):
    check("run-manifest", json.loads((run_dir / "manifest.json").read_text(encoding="utf-8")))
    check("report", json.loads((run_dir / "report.json").read_text(encoding="utf-8")))
    trajectories = sorted((run_dir / "trajectories").glob("*.json"))
    assert len(trajectories) == 8
    for path in trajectories:
        check("trajectory", json.loads(path.read_text(encoding="utf-8")))
    for line in (run_dir / "tasks.jsonl").read_text(encoding="utf-8").splitlines():
        check("task", json.loads(line))


def test_a_bundle_index_validates(run_dir, tmp_path):
    from cli_runner import invoke

    bundle = tmp_path / "run.wfb"
    result = invoke("bundle", "pack", str(run_dir), "-o", str(bundle))
    assert result.returncode == 0, result.stderr
    with zipfile.ZipFile(bundle) as zf:
        check("bundle-index", json.loads(zf.read("datapackage.json")))


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


def test_a_study_validates(tmp_path):
    from cli_runner import invoke

    path = tmp_path / "study.toml"
    path.write_text(STUDY, encoding="utf-8")
    check("study", tomllib.loads(STUDY))
    result = invoke("study", "run", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "out" / "study.json").read_text(encoding="utf-8"))
    check("study-manifest", manifest)
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
    ("run-manifest", {"format": "webfreeze-run", "version": 1}),
    ("report", {"format": "webfreeze-report", "version": 1}),
    ("study", {"agents": [{"name": "keyword", "colour": "red"}]}),
    ("study-manifest", {"format": "webfreeze-study", "version": 1, "name": "x"}),
    ("bundle-index", {"profile": "data-package", "format": "webfreeze-bundle", "version": 1, "title": "t",
                      "software": "webfreeze 0", "contents": {"archive": "a", "suite": "s", "runs": []},
                      "resources": [{"name": "a", "path": "a", "bytes": 1, "hash": "md5:00"}]}),
]


@pytest.mark.parametrize("name, data", BROKEN, ids=[f"{n}-{i}" for i, (n, _) in enumerate(BROKEN)])
def test_a_schema_rejects_what_breaks_it(name, data):
    with pytest.raises(ValidationError):
        validator(name).validate(copy.deepcopy(data))
