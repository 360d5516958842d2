"""What an audit of ``bench run`` and ``bench compare`` found: what they cannot read is one line, and
nothing is written."""

from __future__ import annotations

import json

from cli_runner import assert_one_line_error

from webfreeze.demo import SUITE


def test_bench_run_refuses_an_archive_it_cannot_open_and_writes_nothing(tmp_path, cli):
    fake = tmp_path / "fake.wfz"
    fake.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    out = tmp_path / "run"
    r = cli("bench", "run", SUITE, "--agent", "reference", "--backend", "text", "--out", out, "--archive", fake)
    assert_one_line_error(r, contains="archive")
    assert not out.exists()


def test_bench_compare_refuses_runs_it_cannot_read(tmp_path, cli):
    runs = []
    for name, manifest in (("a", "{bad"), ("b", "[]")):
        run = tmp_path / name
        (run / "trajectories").mkdir(parents=True)
        (run / "manifest.json").write_text(manifest)
        runs.append(run)
    assert_one_line_error(cli("bench", "compare", *runs), contains="not a readable run manifest")
    # a trajectory that is not one
    (runs[0] / "manifest.json").write_text("{}")
    (runs[0] / "trajectories" / "t1.json").write_text(json.dumps({"steps": "x"}))
    (runs[1] / "manifest.json").write_text("{}")
    for run in runs:
        (run / "report.json").write_text(json.dumps({"tasks": {}}))
    assert_one_line_error(cli("bench", "compare", *runs), contains="t1.json")
