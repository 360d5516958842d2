"""`replay check` run as a user runs it, and what makes its report short of exact: for the tests
that prove an archive replays every page from itself (issue 45: direct and proxy mode on each test
bed application and the demo)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def replay_check(archive, report: Path, mode: str, home, timeout: float = 900) -> dict:
    """``webfreeze replay check ARCHIVE --mode MODE``: its report (the command's exit status and
    stderr under ``"_run"``)."""
    r = subprocess.run([sys.executable, "-m", "webfreeze", "replay", "check", str(archive), "--mode", mode,
                        "--report", str(report)], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "WEBFREEZE_HOME": str(home)})
    assert r.returncode == 0, r.stdout[-1000:] + r.stderr[-2000:]
    got = json.loads((report / "report.json").read_text(encoding="utf-8"))
    assert got["mode"] == mode
    return got


def inexact_pages(report: dict) -> list[tuple]:
    """The pages that miss a request, fail to load or whose text is not their capture's."""
    return [(p["url"], p["misses"], p["error"], p["text_similarity"]) for p in report["pages"]
            if p["misses"] or p["error"] or p["text_similarity"] != 1.0]
