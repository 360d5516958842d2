"""Every JSON file under a folder checked against the JSON Schema (docs/formats/) of its format.

The folder is walked; each ``.json`` and ``.jsonl`` file is matched to a schema by where it lies in
the nearest folder of a known kind: a run folder (a ``manifest.json`` of format ``webfreeze-run``),
a suite folder (``webfreeze-suite``), a study folder (``study.json``) or an unpacked bundle
(``datapackage.json``); a context pool is a ``.jsonl`` file whose first line is a pool header. A
JSON file no rule covers is an error too, so a new file format cannot slip in without a schema.
"""

from __future__ import annotations

import fnmatch
import json
import zipfile
from collections import Counter
from functools import cache
from pathlib import Path

from jsonschema import Draft202012Validator

FORMATS = Path(__file__).resolve().parents[2] / "docs" / "formats"
JSON_SUFFIXES = (".json", ".jsonl")

# folder kind -> [(path glob relative to the folder, schema name)]; a .jsonl file's lines are checked one by one
RULES = {
    "run": [("manifest.json", "run-manifest"), ("report.json", "report"), ("tasks.jsonl", "task"),
            ("trajectories/*.json", "trajectory"), ("references/*.json", "reference-trajectory")],
    "suite": [("manifest.json", "suite-manifest"), ("references/*.json", "reference-trajectory")],
    "study": [("study.json", "study-manifest"), ("study-report.json", "study-report"),
              ("study-timings.json", "study-timings")],
    "bundle": [("datapackage.json", "bundle-index"), ("datapackage-digest.json", "bundle-digest")],
}


@cache
def validator(name: str) -> Draft202012Validator:
    schema = json.loads((FORMATS / f"{name}.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def errors_of(name: str, data) -> list[str]:
    """What is wrong with ``data`` as a ``name`` file (empty: it validates)."""
    found = sorted(validator(name).iter_errors(data), key=lambda e: list(e.absolute_path))
    return [f"{list(e.absolute_path)}: {e.message}" for e in found]


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _kind(folder: Path) -> str | None:
    manifest = _read_json(folder / "manifest.json") if (folder / "manifest.json").is_file() else None
    if isinstance(manifest, dict) and manifest.get("format") == "webfreeze-run":
        return "run"
    if isinstance(manifest, dict) and manifest.get("format") == "webfreeze-suite":
        return "suite"
    if (folder / "study.json").is_file():
        return "study"
    if (folder / "datapackage.json").is_file():
        return "bundle"
    return None


def _lines(path: Path) -> list:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def schema_of(path: Path, root: Path) -> str | None:
    """The schema covering ``path`` (a JSON file under ``root``), or None when no rule covers it."""
    folder = path.parent
    while True:
        kind = _kind(folder)
        if kind is not None:
            rel = path.relative_to(folder).as_posix()
            rules = list(RULES[kind])
            if kind == "suite":  # (a suite's manifest may name its tasks file)
                manifest = _read_json(folder / "manifest.json") or {}
                rules.append((str(manifest.get("tasks") or "tasks.jsonl"), "task"))
            for pattern, name in rules:
                if fnmatch.fnmatchcase(rel, pattern) and rel.count("/") == pattern.count("/"):
                    return name
            break
        if folder == root or folder == folder.parent:
            break
        folder = folder.parent
    if path.suffix == ".jsonl":  # a context pool: its first line says so
        first = (path.read_text(encoding="utf-8").splitlines() or [""])[0]
        try:
            if json.loads(first).get("format") == "webfreeze-context-pool":
                return "context-pool-line"
        except (ValueError, AttributeError):
            pass
    return None


def check_tree(root: Path) -> Counter:
    """Validate every JSON file under ``root``; returns how many files each schema covered. Raises
    AssertionError naming each file that does not validate or that no schema covers."""
    root = Path(root)
    problems, counts = [], Counter()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in JSON_SUFFIXES):
        rel = path.relative_to(root).as_posix()
        name = schema_of(path, root)
        if name is None:
            problems.append(f"{rel}: no schema covers this file (add one to docs/formats/ and a rule here)")
            continue
        counts[name] += 1
        try:
            items = _lines(path) if path.suffix == ".jsonl" else [json.loads(path.read_text(encoding="utf-8"))]
        except ValueError as exc:
            problems.append(f"{rel}: not JSON ({exc})")
            continue
        for i, item in enumerate(items):
            where = f"{rel}:{i + 1}" if path.suffix == ".jsonl" else rel
            problems += [f"{where} ({name}) {e}" for e in errors_of(name, item)[:3]]
    assert not problems, f"{len(problems)} problem(s) under {root}:\n" + "\n".join(problems[:20])
    assert counts, f"no JSON file under {root}"
    return counts


def check_bundle(bundle: Path, into: Path) -> Counter:
    """Unpack ``bundle`` (a .wfb) into ``into`` and :func:`check_tree` it."""
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(into)
    return check_tree(into)
