"""docs/commands.md names every command the CLI has, and no command it does not have.

The table's first cell names a command as ``webfreeze GROUP COMMAND ...``; a row may add sibling
commands after a slash (`` / `verify NAME.wfb` / `info` ``), spelled with or without the group.
"""

from __future__ import annotations

import re
from pathlib import Path

from cli_runner import leaf_command_paths

COMMANDS_DOC = Path(__file__).resolve().parents[2] / "docs" / "commands.md"
WORD = re.compile(r"[a-z][a-z0-9-]*")


def documented_commands(text: str) -> set[tuple[str, ...]]:
    """The command paths the table rows of ``text`` document."""
    found = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        spans = re.findall(r"`([^`]*)`", line.split(" | ")[0])
        words = spans[0].split()
        assert words[0] == "webfreeze", line
        # the first span: webfreeze GROUP [COMMAND] ... (a top-level command such as `demo` has no group)
        named = tuple(w for w in words[1:3] if WORD.fullmatch(w))
        found.add(named)
        for span in spans[1:]:
            more = span.split()
            if more[0] == words[1]:
                more = more[1:]
            found.add((words[1], more[0]))
    return found


def _missing(text: str) -> list[str]:
    documented = documented_commands(text)
    # `webfreeze demo [--out DIR]` documents ("demo",); a longer path matches on its first two words
    return [" ".join(path) for path in leaf_command_paths()
            if path[:2] not in documented and path[:1] not in documented]


def test_every_command_is_in_the_commands_doc():
    missing = _missing(COMMANDS_DOC.read_text(encoding="utf-8"))
    assert not missing, f"commands with no row in docs/commands.md: {missing}"


def test_every_documented_command_exists():
    commands = set(leaf_command_paths())
    stale = sorted(path for path in documented_commands(COMMANDS_DOC.read_text(encoding="utf-8"))
                   if path not in commands)
    assert not stale, f"docs/commands.md documents commands the CLI does not have: {stale}"


def test_a_command_without_a_row_is_found():
    text = COMMANDS_DOC.read_text(encoding="utf-8")
    without = "\n".join(line for line in text.splitlines() if not line.startswith("| `webfreeze tasks add "))
    assert _missing(without) == ["tasks add"]
    # a sibling named after a slash counts: dropping `/ `info`` from the bundle row loses `bundle info`
    assert "bundle info" in _missing(text.replace(" / `info`", ""))
