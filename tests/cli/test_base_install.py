"""The base install (``pip install webfreeze``, no extras) as a user gets it: ``webfreeze --help``
and every command's ``--help`` work, and a command whose extra is missing says which one in one
line (exit status 1).

A scratch venv gets the package installed from a wheel built from this checkout (``--no-deps``),
and the base dependencies (pyproject's ``project.dependencies`` and what they require) as this
test's environment installed them, linked into the scratch venv's site-packages one distribution
at a time: offline, and nothing of an extra is importable there (``pip check`` confirms the base
requirements are met). Every command runs from a folder outside the checkout, so the installed
package is the one imported."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _base_distributions() -> dict[str, md.Distribution]:
    """The installed distributions the base requirements need, by normalised name (markers for
    this interpreter; requirements that only an extra asks for are left out)."""
    found: dict[str, md.Distribution] = {}
    todo = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = req.name.lower().replace("_", "-").replace(".", "-")
        if key in found:
            continue
        dist = md.distribution(req.name)
        found[key] = dist
        todo += [Requirement(r) for r in dist.requires or ()]
    return found


def _link_distribution(dist: md.Distribution, site: Path) -> None:
    """Each top-level entry a distribution installed (its packages, modules, shared libraries,
    metadata folder), linked into ``site``."""
    origin = Path(dist.locate_file(""))
    tops = {Path(f).parts[0] for f in dist.files or () if not Path(f).parts[0].startswith("..")}
    for top in sorted(tops - {"__pycache__"}):
        target = site / top
        if not target.exists() and (origin / top).exists():
            target.symlink_to(origin / top)


def _package_source(dest: Path) -> Path:
    """The files a wheel is built from (pyproject, README, the package folders), copied, so that the
    build leaves nothing in the checkout."""
    tool = PYPROJECT["tool"]["setuptools"]
    folders = {"webfreeze", *tool["package-dir"].values()}
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for folder in sorted(folders):
        shutil.copytree(ROOT / folder, dest / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.wfz-shm", "*.wfz-wal", "demo-build-*"))
    return dest


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("base-install")
    wheels = tmp / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", "-w", str(wheels), str(_package_source(tmp / "src"))],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    venv = tmp / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    for dist in _base_distributions().values():
        _link_distribution(dist, site)
    wheel = next(wheels.glob("webfreeze-*.whl"))
    install = subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    work = tmp / "work"  # outside the checkout: the installed package is the one imported
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", WEBFREEZE_HOME=str(tmp / "home"),
               NO_COLOR="1")
    return {"venv": venv, "python": python, "webfreeze": venv / "bin" / "webfreeze", "work": work, "env": env}


def _run(base: dict, *args, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=base["work"], env=base["env"], capture_output=True, text=True,
                          timeout=timeout)


def test_the_scratch_venv_has_the_base_requirements_and_no_extra(base_venv):
    check = _run(base_venv, base_venv["python"], "-m", "pip", "check")
    assert check.returncode == 0, check.stdout + check.stderr
    probe = _run(base_venv, base_venv["python"], "-c", textwrap.dedent("""
        import importlib.util, json, webfreeze
        mods = ["mitmproxy", "playwright", "gymnasium", "werkzeug", "openai", "ray", "mcp", "PIL", "numpy"]
        print(json.dumps({"file": webfreeze.__file__, "found": [m for m in mods if importlib.util.find_spec(m)]}))
    """))
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    assert seen["found"] == []
    assert str(base_venv["venv"]) in seen["file"]  # the installed package, not the checkout


# Every command path and its --help, walked in one process of the scratch venv (a command module that
# cannot import there fails its own path, with the error).
WALK = textwrap.dedent("""
    import contextlib, io, json, sys
    import click
    from webfreeze.cli import cli, main

    def paths(group, prefix=()):
        yield prefix
        if isinstance(group, click.Group):
            ctx = click.Context(group)
            for name in group.list_commands(ctx):
                try:
                    sub = group.get_command(ctx, name)
                except Exception as exc:
                    yield prefix + (name, f"!{type(exc).__name__}: {exc}")
                    continue
                yield from paths(sub, prefix + (name,))

    results = {}
    for path in paths(cli):
        if path and path[-1].startswith("!"):
            results[" ".join(path[:-1])] = {"code": None, "out": path[-1]}
            continue
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main([*path, "--help"])
            except SystemExit as exc:
                code = exc.code
        results[" ".join(path)] = {"code": code, "out": out.getvalue(), "err": err.getvalue()}
    print(json.dumps(results))
""")


def test_every_help_works_without_extras(base_venv):
    walked = _run(base_venv, base_venv["python"], "-c", WALK)
    assert walked.returncode == 0, walked.stderr
    results = json.loads(walked.stdout)
    from cli_runner import command_paths  # the same tree as the full install's

    expected = {" ".join(p) for p in command_paths()}
    assert set(results) == expected
    failed = {path: r for path, r in results.items() if r["code"] != 0 or not r["out"].startswith("Usage: webfreeze")}
    assert failed == {}
    # and as a user types them: `webfreeze --help` and each command's, each in its own process
    from webfreeze.cli import COMMANDS

    for args in [()] + [(name,) for name in sorted(COMMANDS)]:
        result = _run(base_venv, base_venv["webfreeze"], *args, "--help")
        assert result.returncode == 0 and result.stdout.startswith("Usage: webfreeze"), (args, result.stderr)
        assert result.stderr == ""


def _one_line(result: subprocess.CompletedProcess, extra: str) -> None:
    assert result.returncode == 1, (result.returncode, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("webfreeze: error: ") and "Traceback" not in result.stderr
    assert f"pip install 'webfreeze[{extra}]'" in lines[0], lines[0]


def test_a_command_whose_extra_is_missing_names_it_in_one_line(base_venv, tmp_path):
    paths = json.loads(_run(base_venv, base_venv["webfreeze"], "demo", "--print-paths").stdout)
    archive, suite = paths["archive"], paths["suite"]
    out = tmp_path / "out"
    cases = {
        "record": ("record", "ca"),
        "sites": ("sites", "serve", "scholar", "--port", "0"),
        "sim": ("bench", "run", suite, "--agent", "keyword", "--backend", "text", "--limit", "1", "--out", out),
        "replay": ("replay", "check", archive, "--report", out),
        "mcp": ("mcp", suite, "--backend", "text", "--out", out),
        "demo": ("demo", "--backend", "text", "--out", out),
    }
    for extra, args in cases.items():
        result = _run(base_venv, base_venv["webfreeze"], *args)
        _one_line(result, extra)
        assert not out.exists(), f"{args}: a failed command left {out}"
