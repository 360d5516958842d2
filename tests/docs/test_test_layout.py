"""What docs/contributing.md says about the test suite holds: every test file sits in a stage folder
named in its table, test file names are unique across folders (pytest imports a test file by its bare
name), and the files conftest.py marks slow exist."""

from __future__ import annotations

import re
from pathlib import Path

import conftest

TESTS = Path(__file__).resolve().parents[1]
CONTRIBUTING = TESTS.parent / "docs" / "contributing.md"


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def _documented_folders() -> set[str]:
    text = CONTRIBUTING.read_text(encoding="utf-8")
    return set(re.findall(r"^\| `tests/([a-z_]+)/` \|", text, re.M))


def test_every_test_file_is_in_a_documented_stage_folder():
    folders = _documented_folders()
    assert {"archives", "replayer", "cli", "support"} <= folders  # the table is read at all
    misplaced = [p.relative_to(TESTS).as_posix() for p in _test_files()
                 if len(p.relative_to(TESTS).parts) < 2 or p.relative_to(TESTS).parts[0] not in folders]
    assert not misplaced, f"test files outside the folders docs/contributing.md lists: {misplaced}"


def test_test_file_names_are_unique():
    seen: dict[str, list[str]] = {}
    for p in _test_files():
        seen.setdefault(p.name, []).append(p.relative_to(TESTS).as_posix())
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}


def test_the_files_marked_slow_exist():
    missing = sorted(f for f in conftest.SLOW_FILES if not (TESTS / f).is_file())
    assert not missing, f"conftest.SLOW_FILES names files that are not there: {missing}"
