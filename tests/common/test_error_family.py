"""One family of errors: every exception class webfreeze defines derives from ``WebfreezeError``
(keeping the builtin base it had, so ``except ValueError`` callers still catch it); the recorder's
and the replayer's own errors are not ``ArchiveError``; the CLI catches classes, never names. (The
recorder's errors at the CLI: tests/recorder/test_recorder_errors.py.)"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import tomllib
from pathlib import Path

import pytest

import webfreeze
from webfreeze.archives import ArchiveError
from webfreeze.common.errors import WebfreezeError

ROOT = Path(__file__).resolve().parents[2]


def _package_names() -> list[str]:
    """``webfreeze`` and every stage package (pyproject maps each stage folder into the namespace,
    so an editable install's ``webfreeze.__path__`` alone does not reach them)."""
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    return sorted({"webfreeze", *listed})


def _all_modules() -> tuple[dict[str, object], list[str]]:
    """Every importable module of the package by name, and the ones left out because an optional
    third-party dependency is not installed."""
    names: set[str] = set()
    for pkg in _package_names():
        mod = importlib.import_module(pkg)
        names.add(pkg)
        names.update(m.name for m in pkgutil.walk_packages(mod.__path__, pkg + "."))
    modules, missing = {}, []
    for name in sorted(names):
        if name.rsplit(".", 1)[-1] == "__main__":
            continue  # `python -m webfreeze`: importing it runs the CLI
        try:
            modules[name] = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] == "webfreeze":
                raise
            missing.append(f"{name} (needs {exc.name})")
    return modules, missing


# Control flow inside one module, always caught there: kept out of the family on purpose, so that
# one escaping by a bug reaches the CLI as an internal error (exit 70), not as a user's one-liner.
INTERNAL_SIGNALS = {
    "webfreeze.archives.fast_import.Fallback",
    "webfreeze.archives.gzip_members.Unusual",
    "webfreeze.replayer.server._TooLarge",
}


@pytest.fixture(scope="module")
def exception_classes() -> dict[str, type]:
    """``module.Class`` -> class, for every Exception subclass defined in webfreeze's modules."""
    modules, _missing = _all_modules()
    assert "webfreeze.recorder.errors" in modules and "webfreeze.cli" in modules, sorted(modules)[:20]
    found = {}
    for mod in modules.values():
        for obj in vars(mod).values():
            if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__.startswith("webfreeze."):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_exception_class_is_a_webfreeze_error(exception_classes):
    # the walk reaches every stage (a walk that found nothing would pass vacuously)
    stages = {name.split(".")[1] for name in exception_classes}
    assert {"archives", "recorder", "replayer", "simulator", "llm", "agents", "personas", "eval", "common",
            "bundles", "runs", "studies"} <= stages, sorted(stages)
    outside = sorted(name for name, cls in exception_classes.items() if not issubclass(cls, WebfreezeError))
    assert outside == sorted(INTERNAL_SIGNALS), f"not derived from WebfreezeError: {outside}"


def test_builtin_bases_are_kept(exception_classes):
    """Callers that catch a builtin (``except ValueError``) still catch what they caught."""
    expected = {
        "webfreeze.simulator.actions.ActionError": ValueError,
        "webfreeze.simulator.axtree.AXTreeError": ValueError,
        "webfreeze.simulator.composition.CompositionError": ValueError,
        "webfreeze.runs.context.ContextError": ValueError,
        "webfreeze.simulator.browser.BrowserUnavailable": RuntimeError,
        "webfreeze.simulator.env.EnvError": RuntimeError,
        "webfreeze.agents.base.AgentError": RuntimeError,
        "webfreeze.llm.errors.CassetteMiss": RuntimeError,
        "webfreeze.runs.spec.RunError": RuntimeError,
        "webfreeze.bundles.pack.DamagedBundle": RuntimeError,
        "webfreeze.studies.spec.StudyError": RuntimeError,
    }
    for name, builtin in expected.items():
        assert issubclass(exception_classes[name], builtin), name


def test_recorder_and_replayer_errors_are_not_archive_errors(exception_classes):
    from webfreeze.recorder import errors as rec

    recorder = {n: c for n, c in exception_classes.items() if n.startswith("webfreeze.recorder.")}
    assert {"RecordError", "ProxyError", "CrawlError", "SeedFailed", "SessionScriptError",
            "SiteUnreachable"} <= {c.__name__ for c in recorder.values()}
    assert [n for n, c in recorder.items() if issubclass(c, ArchiveError)] == []
    assert all(issubclass(c, rec.RecordError) for c in recorder.values())
    assert issubclass(rec.SeedFailed, rec.CrawlError) and rec.SeedFailed.discard
    replay_error = exception_classes["webfreeze.replayer.replay.ReplayError"]
    assert not issubclass(replay_error, ArchiveError) and issubclass(replay_error, WebfreezeError)


def test_the_replay_raises_its_own_errors_and_passes_the_archives_on(tmp_path):
    from webfreeze.replayer import Replay, ReplayError

    with pytest.raises(ReplayError, match="no such archive") as caught:
        Replay(tmp_path / "missing.wfz").open()
    assert not isinstance(caught.value, ArchiveError)
    junk = tmp_path / "junk.wfz"
    junk.write_bytes(b"not an archive at all\n" * 100)
    with pytest.raises(ArchiveError):  # the archive layer's own error, unchanged
        Replay(junk).open()


# ------------------------------------------------------------------------------ the CLI's source
_NAME_ATTRS = {"__name__", "__qualname__"}


def name_comparisons(source: str, class_names: set[str]) -> list[str]:
    """Where ``source`` tells exceptions apart by name: a comparison involving ``x.__name__`` (or
    ``__qualname__``), or any string that is the name of one of our exception classes."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if any(isinstance(n, ast.Attribute) and n.attr in _NAME_ATTRS for n in ast.walk(side)):
                    found.append(f"line {node.lineno}: {ast.unparse(node)}")
                    break
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in class_names:
            found.append(f"line {node.lineno}: the string {node.value!r}")
    return found


def test_the_check_finds_a_comparison_by_name():
    names = {"BrowserUnavailable"}
    assert name_comparisons('if type(e).__name__ != "BrowserUnavailable":\n    raise\n', names)
    assert name_comparisons('ok = e.__class__.__qualname__ in ("X", "Y")\n', names)
    assert name_comparisons('kinds = {"BrowserUnavailable": 3}\n', names)
    assert not name_comparisons('if __name__ == "__main__":\n    main()\nmsg = f"{type(e).__name__}: {e}"\n', names)


def test_no_cli_module_matches_an_exception_by_its_name(exception_classes):
    names = {cls.__name__ for cls in exception_classes.values()} | {"RuntimeError", "ValueError"}
    cli_files = sorted((ROOT / "webfreeze" / "cli").glob("*.py"))
    assert len(cli_files) >= 5, cli_files
    problems = {f.name: hits for f in cli_files if (hits := name_comparisons(f.read_text(), names))}
    assert problems == {}


def test_webfreeze_error_is_in_the_front_door():
    assert webfreeze.WebfreezeError is WebfreezeError
