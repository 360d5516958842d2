"""The README's library tour ("As a library") runs as written: its one ```python block, in a fresh
interpreter (the virtualenv's), from an empty folder, using only the names ``import webfreeze``
gives; what it prints shows each stage did its work."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def library_tour() -> str:
    text = README.read_text(encoding="utf-8")
    assert "\n## As a library\n" in text, "README.md has no 'As a library' section"
    section = text.split("\n## As a library\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    assert len(blocks) == 1, f"the library tour should be one python block, found {len(blocks)}"
    return blocks[0]


def test_the_tour_uses_only_the_front_door():
    tree = ast.parse(library_tour())
    imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert [ast.dump(node) for node in imports] == [ast.dump(ast.parse("import webfreeze as wf").body[0])]
    # every webfreeze name it uses is one the package's front door lists
    import webfreeze

    used = {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "wf"}
    assert used and used <= set(webfreeze.__all__), used - set(webfreeze.__all__)


def test_the_library_tour_runs_as_written(tmp_path):
    env = dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home"))
    env.pop("PYTHONPATH", None)  # the installed package, as a reader has it
    r = subprocess.run([sys.executable, "-c", library_tour()], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    lines = r.stdout.splitlines()
    listed = [line for line in lines if line.startswith("GET http://scholar.test/")]
    assert 1 <= len(listed) <= 3 and all(" -> 200 " in line and " bytes, " in line for line in listed), r.stdout
    assert any(re.fullmatch(r"replayed 200 \d+ bytes", line) for line in lines), r.stdout
    # the keyword baseline answers this task, so the score line is a success
    assert "score scholar-site-info-001 success 1.0" in lines, r.stdout
