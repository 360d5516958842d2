"""What docs/contributing.md says about the test suite holds: every test file sits in a stage folder
named in its table, test file names are unique across folders (pytest imports a test file by its bare
name), the files conftest.py marks slow exist, and its scheduling lists for the workers hold."""

from __future__ import annotations

import re
from pathlib import Path

import conftest
import pytest

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


def test_the_scheduling_lists_name_files_that_exist():
    """A renamed file left in LONGEST_FIRST or GROUPS would silently lose its place or its group."""
    files = {p.relative_to(TESTS).as_posix() for p in _test_files()}
    assert set(conftest.GROUPS) <= files, sorted(set(conftest.GROUPS) - files)
    units = files | set(conftest.GROUPS.values())
    assert [u for u in conftest.LONGEST_FIRST if u not in units] == []
    assert not [u for u in conftest.LONGEST_FIRST if u in conftest.GROUPS], "name a group, not one of its files"
    assert len(set(conftest.LONGEST_FIRST)) == len(conftest.LONGEST_FIRST)


def test_a_group_is_one_unit_of_work_for_the_workers():
    xdist = pytest.importorskip("xdist.scheduler")
    config = type("Config", (), {"getvalue": lambda self, name: "loadfile",
                                 "option": type("O", (), {"loadscopereorder": False})()})()
    sched = conftest.pytest_xdist_make_scheduler(config=config, log=None)
    assert isinstance(sched, xdist.LoadFileScheduling)
    units = {sched._split_scope(f"tests/{name}::test_x[a-b]") for name in conftest.GROUPS}
    assert units == {"testbed"}
    assert sched._split_scope("tests/runs/test_bench.py::test_y") == "runs/test_bench.py"
