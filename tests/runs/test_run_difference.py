"""webfreeze.runs.compare.run_difference: two run folders equal apart from timings, or the first place
they part, in one line (the check ``bundle run`` and the reproduction tests share)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from webfreeze.common.files import json_text
from webfreeze.runs.compare import compare_runs, run_difference

TRAJ = {"format": "webfreeze-trajectory", "version": 1, "task_id": "t1", "timing": {"total_ms": 12.5},
        "steps": [{"step": 0, "action": "click [3]", "url": "http://shop.test/", "obs_digest": "sha256:aa",
                   "timing": {"env_ms": 3.1}},
                  {"step": 1, "action": "answer [x]", "url": "http://shop.test/p", "obs_digest": "sha256:bb",
                   "timing": {"env_ms": 4.0}}],
        "answer": "x", "end": "answer"}
REPORT = {"format": "webfreeze-report", "summary": {"overall": {"success_rate": 1.0}}, "timings": {"wall_s": 3.0}}


def _run(folder: Path, trajectories: dict, report: dict | None = REPORT) -> Path:
    (folder / "trajectories").mkdir(parents=True)
    for name, traj in trajectories.items():
        (folder / "trajectories" / f"{name}.json").write_text(json_text(traj), encoding="utf-8")
    if report is not None:
        (folder / "report.json").write_text(json_text(report), encoding="utf-8")
    return folder


def _retimed(traj: dict) -> dict:
    out = copy.deepcopy(traj)
    out["timing"]["total_ms"] = 99.0
    for s in out["steps"]:
        s["timing"]["env_ms"] += 7
    return out


def test_runs_equal_apart_from_timings(tmp_path):
    a = _run(tmp_path / "a", {"t1": TRAJ})
    b = _run(tmp_path / "b", {"t1": _retimed(TRAJ)}, dict(REPORT, timings={"wall_s": 9.9}))
    assert run_difference(a, b) is None


def test_a_different_step_is_named(tmp_path):
    other = _retimed(TRAJ)
    other["steps"][1]["action"] = "answer [y]"
    a, b = _run(tmp_path / "a", {"t1": TRAJ}), _run(tmp_path / "b", {"t1": other})
    assert run_difference(a, b) == "trajectory t1.json differs at steps[1].action at char 8"


def test_a_missing_trajectory_or_report_is_named(tmp_path):
    a = _run(tmp_path / "a", {"t1": TRAJ, "t2": dict(TRAJ, task_id="t2")})
    b = _run(tmp_path / "b", {"t1": TRAJ})
    assert run_difference(a, b, names=("the bundle", "the re-run")) == "trajectory t2.json is only in the bundle"
    assert run_difference(b, a) == "trajectory t2.json is only in the second run"
    c = _run(tmp_path / "c", {"t1": TRAJ}, report=None)
    assert run_difference(b, c) == "report.json is only in the first run"
    assert run_difference(c, b) is None  # a reference kept without its report: trajectories are the check


def test_a_different_report_is_named(tmp_path):
    changed = json.loads(json.dumps(REPORT))
    changed["summary"]["overall"]["success_rate"] = 0.5
    a, b = _run(tmp_path / "a", {"t1": TRAJ}), _run(tmp_path / "b", {"t1": TRAJ}, changed)
    assert run_difference(a, b).startswith("report.json differs at summary.overall.success_rate")


def test_stale_steps_skip_only_their_observation_digest(tmp_path):
    other = copy.deepcopy(TRAJ)
    other["steps"][0]["obs_digest"] = "sha256:cc"
    a, b = _run(tmp_path / "a", {"t1": TRAJ}), _run(tmp_path / "b", {"t1": other})
    assert run_difference(a, b, stale=lambda name: {0}) is None
    assert run_difference(a, b, stale=lambda name: {1}).startswith("trajectory t1.json differs at steps[0].obs_digest")


def _with_dom(folder: Path, html: bytes) -> Path:
    """A run whose one trajectory's first step names a DOM snapshot of ``html``, stored."""
    import zstandard

    from webfreeze.simulator.trajectory import DOM_ZSTD_LEVEL, dom_path

    traj = copy.deepcopy(TRAJ)
    traj["steps"][0]["dom"] = dom_path(html)
    traj["end"] = {"reason": "answer"}
    run = _run(folder, {"t1": traj})
    (run / "dom").mkdir()
    (run / dom_path(html)).write_bytes(zstandard.ZstdCompressor(level=DOM_ZSTD_LEVEL).compress(html))
    (run / "manifest.json").write_text(json_text({"format": "webfreeze-run"}), encoding="utf-8")
    return run


def test_bench_compare_shows_html_as_it_is(tmp_path, cli):
    """The snapshots' HTML is shown as text: a script's ``/[/]/`` was read as markup (a crash)."""
    page = '<html><body><script>s.split(/[/]/); n = {}</script></body></html>'
    a, b = _with_dom(tmp_path / "a", page.format(1).encode()), _with_dom(tmp_path / "b", page.format(2).encode())
    r = cli("bench", "compare", a, b)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert "dom (at char" in r.stdout and "/[/]/" in r.stdout, r.stdout


def test_different_dom_snapshots_say_where_they_part(tmp_path):
    """A snapshot's name is its digest: the line shows where the two snapshots' HTML parts."""
    from webfreeze.simulator.trajectory import dom_path

    with_dom = _with_dom
    page = '<html><body><span aria-label="worker {}">Worker messages: 4</span></body></html>'
    a = with_dom(tmp_path / "a", page.format("timer 0.25 1796586018250").encode())
    b = with_dom(tmp_path / "b", page.format("timer 0.25 1796586018251").encode())
    line = run_difference(a, b, names=("the bundle", "the re-run"))
    at = page.index("{") + len("timer 0.25 179658601825")
    assert line.startswith("trajectory t1.json differs at steps[0].dom at char 4; the DOM snapshots part at "
                           f"char {at}: "), line
    assert '8250\\">Worker messages: 4' in line and "in the bundle" in line
    assert '8251\\">Worker messages: 4' in line and line.endswith("in the re-run")
    (row,) = compare_runs(a, b)["tasks"]
    assert row["first_difference"]["field"] == "dom" and row["first_difference"]["parted"] == {
        "at": at, "a": page.format("timer 0.25 1796586018250")[at - 20:at + 40],
        "b": page.format("timer 0.25 1796586018251")[at - 20:at + 40]}, row
    assert row["first_difference"]["a"].startswith("dom/"), row  # (the snapshots' paths, as before)
    (b / dom_path(page.format("timer 0.25 1796586018251").encode())).unlink()  # a run kept without its DOMs
    assert run_difference(a, b) == "trajectory t1.json differs at steps[0].dom at char 4"
    assert "parted" not in compare_runs(a, b)["tasks"][0]["first_difference"]
    # a damaged snapshot is said by its digest alone, not a crash
    (b / dom_path(page.format("timer 0.25 1796586018251").encode())).write_bytes(b"\x28\xb5\x2f\xfd broken")
    assert run_difference(a, b) == "trajectory t1.json differs at steps[0].dom at char 4"
