"""Running the ``webfreeze`` CLI from tests: in a subprocess as a user would, or in this process.

``run_cli`` is the one subprocess runner (conftest's ``cli`` fixture is this function): real exit
codes, real signals, a fresh interpreter, the environment and folder a test gives it. ``invoke``
calls the entry point ``webfreeze.cli.main`` in this process with its output captured: for help
text and error shapes, where a new interpreter (about a second each) proves nothing more.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import click
from click.testing import CliRunner

import webfreeze.cli


def run_cli(*args, cwd: str | os.PathLike | None = None, env: Mapping[str, str] | None = None,
            timeout: float = 900, prefix: Sequence[str] = ()) -> subprocess.CompletedProcess:
    """Run ``python -m webfreeze ARGS`` in a subprocess and return its completed process (text output).

    ``env`` replaces the whole environment (pass ``dict(os.environ, ...)`` to add to it); ``prefix`` is a
    command the interpreter runs under (e.g. ``unshare -n ...`` for a process with no network).
    """
    return subprocess.run([*prefix, sys.executable, "-m", "webfreeze", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=None if env is None else dict(env), timeout=timeout)


@dataclass
class CliResult:
    """What one in-process CLI call gave: the same three fields a completed process has."""

    returncode: int
    stdout: str
    stderr: str
    args: list[str]


def invoke(*args, cwd: str | os.PathLike | None = None, env: Mapping[str, str | None] | None = None) -> CliResult:
    """Call ``webfreeze.cli.main(args)`` in this process with stdout and stderr captured.

    ``env`` holds overrides of the current environment (a value None removes the name), undone
    afterwards, as is the change of folder. Use it for commands that start no worker processes and
    need no signals; anything else goes through :func:`run_cli`.
    """
    argv = [str(a) for a in args]
    # a process's environment and folder end with it; in this process a command's changes to them
    # would reach the next test, so both are put back
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    try:
        with contextlib.chdir(cwd or saved_cwd), CliRunner().isolation(env=env) as (out, err, _):
            try:
                webfreeze.cli.main(argv)
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            stdout = out.getvalue().decode("utf-8", "replace")
            stderr = err.getvalue().decode("utf-8", "replace")
    finally:
        for name in set(os.environ) - set(saved_env):
            del os.environ[name]
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
    return CliResult(code, stdout, stderr, argv)


def assert_one_line_error(result, *, code: int = 1, contains: str = "") -> str:
    """Assert the shape every user-facing error has: one ``webfreeze: error:`` line on stderr and exit ``code``."""
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("webfreeze: error:"), lines[0]
    assert contains.lower() in lines[0].lower(), lines[0]
    return lines[0]


def command_paths(group: click.Command | None = None, prefix: tuple[str, ...] = ()):
    """Every command path of the CLI, the root ``()`` first, groups before their commands (as each
    group lists them: the main group imports its command modules on first use)."""
    group = webfreeze.cli.cli if group is None else group
    yield prefix
    if isinstance(group, click.Group):
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            yield from command_paths(group.get_command(ctx, name), prefix + (name,))


def leaf_command_paths() -> list[tuple[str, ...]]:
    """The paths of the commands that run something (no groups): ``("archive", "import")``, ``("demo",)``."""
    leaves = []
    for path in command_paths():
        cmd = webfreeze.cli.cli
        for name in path:
            cmd = cmd.get_command(click.Context(cmd), name)
        if path and not isinstance(cmd, click.Group):
            leaves.append(path)
    return leaves
