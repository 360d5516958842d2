"""The layer table of docs/architecture.md ("folder | what it holds | may import"), enforced on the
source. The grants are read from that table, the one place they are written.

Every module of every stage is parsed with ``ast`` and each import it makes of ours, at module level
or inside a function, is checked against what its folder may import. In ``webfreeze/`` (the
orchestration, which may import everything) more rules hold: no module imports a private
(``_name``) name from another module, the modules' top-level imports form no cycle, and no command
module of ``webfreeze/cli/`` imports another's (what two commands share lives outside ``cli/``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
EVERYTHING = None


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_grants(text: str) -> dict[str, dict[str, set[str] | None]]:
    """The table whose header is ``folder | what it holds | may import``: folder -> {stage it may
    import: None (all of it) or the set of its modules named after "only"}. In the last cell each
    backticked name outside parentheses is a stage; a parenthesis after it that starts with
    ``only`` names the stage's modules (backticked) the folder may import, and nothing else of it;
    other parentheses explain. ``everything`` grants every stage, ``nothing of ours`` none."""
    lines = text.splitlines()
    head = next(i for i, line in enumerate(lines)
                if line.startswith("|") and _cells(line) == ["folder", "what it holds", "may import"])
    rows: dict[str, str] = {}
    for line in lines[head + 2:]:
        if not line.startswith("|"):
            break
        cells = _cells(line)
        if not cells[-1]:  # tests/, benchmarks/: not installed, not a stage
            continue
        folder = re.fullmatch(r"`([a-z_]+)/`", cells[0])
        assert folder, f"docs/architecture.md: a row of the layer table names no folder: {line}"
        rows[folder.group(1)] = cells[-1]
    grants: dict[str, dict[str, set[str] | None]] = {}
    for folder, cell in rows.items():
        if cell == "everything":
            grants[folder] = {s: EVERYTHING for s in rows if s != folder}
            continue
        if cell == "nothing of ours":
            grants[folder] = {}
            continue
        granted: dict[str, set[str] | None] = {}
        for name, paren in re.findall(r"`([a-z_]+)`(?:\s*\(([^()]*)\))?", cell):
            only = paren.strip().startswith("only")
            granted[name] = set(re.findall(r"`([a-z_]+)`", paren)) if only else EVERYTHING
        assert set(granted) <= set(rows), f"docs/architecture.md: {folder}/ may import an unknown stage: {cell}"
        grants[folder] = granted
    return grants


MAY_IMPORT = parse_grants(ARCHITECTURE.read_text(encoding="utf-8"))
STAGES = sorted(MAY_IMPORT)

# Imports the table does not grant yet, each with its reason and what ends it. The test fails on any
# other violation, and on an entry here that no longer happens (the list cannot go stale).
KNOWN: dict[tuple[str, str], str] = {}


def _folder(stage: str) -> Path:
    return ROOT / stage


def _module_name(stage: str, path: Path) -> str:
    rel = path.relative_to(_folder(stage)).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(["webfreeze"] + ([] if stage == "webfreeze" else [stage]) + parts)


def _modules() -> dict[str, tuple[str, Path]]:
    """``webfreeze.x.y`` -> (stage, file) for every module of every stage (the demo's data excluded)."""
    out = {}
    for stage in STAGES:
        for path in sorted(_folder(stage).rglob("*.py")):
            if "data" in path.relative_to(_folder(stage)).parts:
                continue
            if stage == "webfreeze" and path.relative_to(_folder(stage)).parts[0] in STAGES:
                continue
            out[_module_name(stage, path)] = (stage, path)
    return out


MODULES = _modules()


def _imports(name: str, path: Path, *, top_only: bool = False):
    """(imported module, imported names or None, line, at module level) for each import of ours."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        at_top = id(node) in top
        if top_only and not at_top:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "webfreeze" or alias.name.startswith("webfreeze."):
                    yield alias.name, None, node.lineno, at_top
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "webfreeze" or target.startswith("webfreeze."):
                yield target, [a.name for a in node.names], node.lineno, at_top


def _resolve(target: str, names: list[str] | None) -> list[str]:
    """The modules an import reaches: ``from webfreeze import agents`` reaches ``webfreeze.agents``."""
    if names is None:
        return [target]
    out = []
    for n in names:
        sub = f"{target}.{n}"
        out.append(sub if sub in MODULES or (ROOT / n).is_dir() and target == "webfreeze" else target)
    return out


def _stage_of(module: str) -> tuple[str, str]:
    """(stage, the module's path inside it) of ``webfreeze.<stage>.<rest>``; the orchestration's
    modules (``webfreeze.cli``, ``webfreeze.runs``...) are stage ``webfreeze``."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in STAGES and parts[1] != "webfreeze":
        return parts[1], ".".join(parts[2:])
    return "webfreeze", ".".join(parts[1:])


def test_the_walk_sees_every_stage():
    stages = {stage for stage, _ in MODULES.values()}
    assert stages == set(STAGES)
    assert len(MODULES) > 150 and "webfreeze.runs.spec" in MODULES and "webfreeze.cli" in MODULES


def _violations(known: dict | None = None) -> list[str]:
    """Every import the table does not grant, apart from ``known`` ones (file, module) (those
    not seen are reported too)."""
    known = KNOWN if known is None else known
    bad, seen = [], set()
    for name, (stage, path) in sorted(MODULES.items()):
        allowed = MAY_IMPORT[stage]
        for target, names, line, _ in _imports(name, path):
            for module in _resolve(target, names):
                other, rest = _stage_of(module)
                if other == stage:
                    continue
                where = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
                if (where, module) in known:
                    seen.add((where, module))
                    continue
                if other not in allowed:
                    bad.append(f"{where}:{line}: {stage} imports {module}")
                    continue
                only = allowed[other]
                if only is not EVERYTHING and rest.split(".")[0] not in only:
                    bad.append(f"{where}:{line}: {stage} may import {other} only for "
                               f"{', '.join(sorted(only))}, not {module}")
    bad += [f"{where}: the known exception for {module} no longer happens: remove it from KNOWN"
            for where, module in sorted(set(known) - seen)]
    return bad


def test_every_import_keeps_to_the_layer_table():
    assert _violations() == []


def test_the_check_sees_a_forbidden_import(tmp_path, monkeypatch):
    """A stage importing upwards, even inside a function, is caught (the check cannot pass by seeing
    nothing); so is a relative import that climbs into another stage."""
    fake = tmp_path / "bad.py"
    fake.write_text("def f():\n    from webfreeze.agents import make_agent\n", encoding="utf-8")
    monkeypatch.setitem(MODULES, "webfreeze.eval.bad", ("eval", fake))
    relative = tmp_path / "worse.py"
    relative.write_text("from ..agents import make_agent\n", encoding="utf-8")
    monkeypatch.setitem(MODULES, "webfreeze.recorder.worse", ("recorder", relative))
    partly = tmp_path / "partly.py"  # (a stage granted in part: only the modules named)
    partly.write_text("from webfreeze.replayer.replay import Replay\n", encoding="utf-8")
    monkeypatch.setitem(MODULES, "webfreeze.recorder.partly", ("recorder", partly))
    found = _violations()
    assert any("eval imports webfreeze.agents" in v for v in found), found
    assert any("recorder imports webfreeze.agents" in v for v in found), found
    assert any("recorder may import replayer only for determinism, matching, not webfreeze.replayer.replay" in v
               for v in found), found


def test_a_stale_exception_is_reported():
    found = _violations({**KNOWN, ("eval/score.py", "webfreeze.agents"): "never happens"})
    assert any("no longer happens" in v and "eval/score.py" in v for v in found), found


def _private_imports() -> list[str]:
    bad = []
    for name, (stage, path) in sorted(MODULES.items()):
        if stage != "webfreeze":
            continue
        for target, names, line, _ in _imports(name, path):
            for n in names or []:
                if n.startswith("_") and not n.startswith("__"):
                    bad.append(f"{path.relative_to(ROOT)}:{line}: {name} imports {target}.{n}")
    return bad


def test_no_private_name_is_imported_across_modules():
    assert _private_imports() == []


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, (stage, path) in MODULES.items():
        if stage != "webfreeze":
            continue
        edges = graph.setdefault(name, set())
        for target, names, _, _ in _imports(name, path, top_only=True):
            for module in _resolve(target, names):
                if module in MODULES and MODULES[module][0] == "webfreeze" and module != name:
                    edges.add(module)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle in ``graph`` (as the path that closes it), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_orchestration_has_no_import_cycle():
    graph = _graph()
    assert len(graph) > 30 and graph["webfreeze.runs.execute"], graph.get("webfreeze.runs.execute")
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))


@pytest.mark.parametrize("graph, cyclic", [({"a": {"b"}, "b": {"c"}, "c": set()}, False),
                                           ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True)])
def test_the_cycle_check_finds_a_cycle(graph, cyclic):
    assert (_cycle(graph) is not None) == cyclic


# ------------------------------------------------------------------------------ the command modules
CLI = "webfreeze.cli"
SHARED_CLI = {"webfreeze.cli.options"}  # the one module every command module may import


def _cli_imports(modules: dict[str, tuple[str, Path]]) -> list[str]:
    """Imports, anywhere in a module (inside functions too), that reach a command module of
    ``webfreeze/cli/`` from another module: a command module may import only ``cli/options.py``,
    and a module outside ``cli/`` only the entry point (``from webfreeze.cli import main``)."""
    bad = []
    for name, (stage, path) in sorted(modules.items()):
        if stage != "webfreeze":
            continue
        for target, names, line, _ in _imports(name, path):
            for module in _resolve(target, names):
                if module != CLI and not module.startswith(CLI + "."):
                    continue
                if module == name or module in SHARED_CLI:
                    continue
                if module == CLI and not name.startswith(CLI + ".") and set(names or ()) <= {"main"}:
                    continue  # the entry point, as `python -m webfreeze` runs it
                where = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)
                bad.append(f"{where}:{line}: {name} imports {module}")
    return bad


def test_no_command_module_imports_another():
    assert [m for m in MODULES if m.startswith(CLI + ".")], "the walk sees no command module"
    assert _cli_imports(MODULES) == []


def test_the_command_check_sees_a_command_importing_another(tmp_path, monkeypatch):
    fake = tmp_path / "fake.py"
    fake.write_text("def f():\n    from webfreeze.cli.bench import bench_group\n", encoding="utf-8")
    monkeypatch.setitem(MODULES, "webfreeze.cli.fake", ("webfreeze", fake))
    demo = tmp_path / "demo.py"
    demo.write_text("from webfreeze.cli import bench\n", encoding="utf-8")
    monkeypatch.setitem(MODULES, "webfreeze.fakedemo", ("webfreeze", demo))
    found = _cli_imports(MODULES)
    assert any("webfreeze.cli.fake imports webfreeze.cli.bench" in v for v in found), found
    assert any("webfreeze.fakedemo imports webfreeze.cli.bench" in v for v in found), found


def test_the_grants_are_read_from_the_architecture_page():
    """The table parses into the grants the rules above rely on (a table the parser misread would
    let everything through or nothing)."""
    assert set(STAGES) == {"common", "archives", "recorder", "replayer", "simulator", "llm", "agents", "personas",
                           "eval", "webfreeze"}
    assert MAY_IMPORT["common"] == {}
    assert MAY_IMPORT["archives"] == {"common": EVERYTHING}
    assert MAY_IMPORT["recorder"]["simulator"] == {"browser", "replay_route"}
    assert MAY_IMPORT["personas"]["simulator"] == {"sites"}
    assert "personas" not in MAY_IMPORT["agents"] and "agents" not in MAY_IMPORT["eval"]
    assert "simulator" not in MAY_IMPORT["replayer"]
    assert set(MAY_IMPORT["webfreeze"]) == set(STAGES) - {"webfreeze"}


def test_the_table_parser_reads_only_and_explanations():
    table = ("| folder | what it holds | may import |\n|---|---|---|\n"
             "| `a/` | x | nothing of ours |\n"
             "| `b/` | x | `a` (why: `c` is not granted) |\n"
             "| `c/` | x | `a`, `b` (only `m` and `n`: these two) |\n"
             "| `tests/` | x | |\n")
    assert parse_grants(table) == {"a": {}, "b": {"a": EVERYTHING}, "c": {"a": EVERYTHING, "b": {"m", "n"}}}
