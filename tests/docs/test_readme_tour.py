"""The README's five-minute tour runs as written: its ```bash blocks, in order, in one bash with
``set -euo pipefail``, the virtualenv's ``webfreeze`` first on PATH (as after
``source .venv/bin/activate``), in a scratch folder laid out like the repository root (the demo
data linked in). Also: the README stays a short page for users."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def tour_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    tour = text.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", tour, re.DOTALL)


def test_readme_is_short_and_links_exist():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) < 15_000
    assert "make demo" in text and "make test" in text
    for link in re.findall(r"\]\(([^)#]+)\)", text):
        if not link.startswith(("http://", "https://")):
            assert (ROOT / link).exists(), link
    assert len(tour_blocks()) >= 5


def test_the_tour_runs_as_written(tmp_path):
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    if not shutil.which("curl"):
        pytest.skip("curl is not installed")
    (tmp_path / "webfreeze" / "demo").mkdir(parents=True)
    (tmp_path / "webfreeze" / "demo" / "data").symlink_to(ROOT / "webfreeze" / "demo" / "data")
    script = "set -euo pipefail\n" + "\n".join(tour_blocks())
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
               WEBFREEZE_HOME=str(tmp_path / "home"))
    r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    assert "<title>" in r.stdout  # the replayed page
    assert (tmp_path / "tour.wacz").stat().st_size > 0
    assert (tmp_path / "runs" / "tour" / "report.json").exists()
