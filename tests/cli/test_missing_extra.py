"""The one helper that names a missing extra (cli/options.py): which extra it names, and that its
table of extras is pyproject's. (The base install end to end: test_base_install.py.)"""

from __future__ import annotations

import tomllib
from pathlib import Path

from webfreeze.cli import COMMANDS
from webfreeze.cli.options import EXTRA_INCLUDES, EXTRA_MODULES, MissingExtra, extra_modules, missing_extra

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
EXTRAS = PYPROJECT["project"]["optional-dependencies"]


def _missing(name: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(f"No module named {name!r}", name=name)


def test_the_command_s_extra_is_named_when_it_brings_the_module():
    err = missing_extra(_missing("playwright"), "sim")  # bench run: sim includes replay, which brings Playwright
    assert isinstance(err, MissingExtra)
    assert str(err) == ("this command needs the 'sim' extra, which is not installed (no module named "
                        "'playwright'): pip install 'webfreeze[sim]'")
    assert "'webfreeze[mcp]'" in str(missing_extra(_missing("gymnasium.spaces"), "mcp"))


def test_else_the_first_extra_that_brings_it():
    assert "'webfreeze[ray]'" in str(missing_extra(_missing("ray"), "sim"))
    assert "'webfreeze[record]'" in str(missing_extra(_missing("mitmproxy"), None))


def test_a_module_of_ours_or_of_no_extra_is_a_bug_not_a_missing_extra():
    assert missing_extra(_missing("webfreeze.common.nothing"), "sim") is None
    assert missing_extra(_missing("no_such_package"), "sim") is None
    assert missing_extra(ModuleNotFoundError("no name"), "sim") is None


def test_the_table_names_pyproject_s_extras():
    assert set(EXTRA_MODULES) | set(EXTRA_INCLUDES) <= set(EXTRAS)
    # an extra that includes others says so in pyproject too
    for extra, included in EXTRA_INCLUDES.items():
        for other in included:
            assert any("webfreeze[" in req and other in req.split("[", 1)[1] for req in EXTRAS[extra]), (extra, other)
    assert {"mitmproxy", "playwright", "werkzeug", "gymnasium"} <= extra_modules("agents") | extra_modules("record")


def test_every_command_names_an_extra_of_pyproject_or_none():
    for name, (_module, _attribute, extra) in COMMANDS.items():
        assert extra is None or extra in EXTRAS, name
