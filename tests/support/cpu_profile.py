"""CPU time per test, children included, for finding what makes the suite slow (docs/contributing.md,
"Where the suite's CPU goes"). Opt-in, as a pytest plugin on a machine where cgroup v1's cpuacct
controller is writable (root in most containers):

    .venv/bin/python -m pytest -n 3 --dist loadfile --no-loadscope-reorder -p cpu_profile

Each pytest process (an xdist worker, or the one process) moves itself into a cpuacct group of its
own, which every process it starts then joins (Chromium, servers, the CLI, the local model), and
writes one JSON line per test to ``$WEBFREEZE_CPU_PROFILE`` (default ``.cache/cpu-profile``),
``<worker>.jsonl``: ``{"id", "cpu", "wall"}`` in seconds. A module or session fixture counts
towards the test that built it, so totals per file are the useful figure:
``.venv/bin/python tests/support/cpu_profile.py [FOLDER]`` prints them, heaviest first. Lines are
appended: give each run an empty folder, or its figures add to the last run's.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

CGROUP = Path("/sys/fs/cgroup/cpuacct/webfreeze-tests")


def _folder() -> Path:
    return Path(os.environ.get("WEBFREEZE_CPU_PROFILE", ".cache/cpu-profile"))


def _worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "main")


class _Profile:
    def __init__(self, group: Path, out: Path):
        self.usage = group / "cpuacct.usage"
        self.out = out

    def cpu_s(self) -> float:
        return int(self.usage.read_text()) / 1e9

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        cpu, wall = self.cpu_s(), time.monotonic()
        yield
        line = {"id": item.nodeid, "cpu": round(self.cpu_s() - cpu, 2), "wall": round(time.monotonic() - wall, 2)}
        with self.out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")


def pytest_configure(config):
    group = CGROUP / _worker()
    try:
        group.mkdir(parents=True, exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError as exc:
        raise pytest.UsageError(f"cpu_profile needs a writable cgroup v1 cpuacct controller ({CGROUP.parent}): "
                                f"{exc.strerror or exc}") from None
    out = _folder()
    out.mkdir(parents=True, exist_ok=True)
    config.pluginmanager.register(_Profile(group, out / f"{_worker()}.jsonl"), "cpu_profile_recorder")


def per_file(folder: Path) -> list[tuple[str, float, float, int]]:
    """(file, CPU seconds, wall seconds, tests) for every file in ``folder``'s profiles, heaviest first."""
    totals: dict[str, list] = defaultdict(lambda: [0.0, 0.0, 0])
    for path in folder.glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            test = json.loads(line)
            row = totals[test["id"].split("::", 1)[0]]
            row[0] += test["cpu"]
            row[1] += test["wall"]
            row[2] += 1
    return sorted(((name, *row) for name, row in totals.items()), key=lambda r: -r[1])


if __name__ == "__main__":
    rows = per_file(Path(sys.argv[1]) if len(sys.argv) > 1 else _folder())
    total = sum(r[1] for r in rows) or 1.0
    print(f"{total / 60:.1f} CPU-minutes in {len(rows)} files")
    for name, cpu, wall, tests in rows:
        print(f"{cpu:8.1f} CPU-s {100 * cpu / total:5.1f}% {wall:8.1f} s wall {tests:5d} tests  {name}")
