"""DOM snapshots given to the trajectory recorder as functions (serialised late, a bounded number
held at once) give the same steps and the same snapshot files as bytes given at once."""

from __future__ import annotations

import json

from webfreeze.simulator.trajectory import PENDING_DOMS_MAX, TrajectoryRecorder, write_trajectory


def _page(i: int) -> bytes:
    return f"<!DOCTYPE html>\n<html><body><p>page {i % 7}</p></body></html>".encode()


def _record(lazy: bool, n_steps: int, calls: list) -> TrajectoryRecorder:
    rec = TrajectoryRecorder({"id": "t-1"}, {"backend": "text"})
    for i in range(n_steps):
        def make(i=i):
            calls.append(i)
            return _page(i)
        rec.add_step(url=f"http://a.test/{i}", title="t", obs_digest="sha256:0", action=f"click('{i}')",
                     parsed=None, target=None, url_after="http://a.test/", agent={}, error=None, env_ms=1.0,
                     dom=make if lazy else _page(i))
    return rec


def test_late_snapshots_equal_early_ones(tmp_path):
    n = 2 * PENDING_DOMS_MAX + 5
    calls: list = []
    lazy = _record(True, n, calls)
    # no more than the bound wait unserialised; each function runs once
    assert len(lazy._pending_doms) < PENDING_DOMS_MAX
    eager = _record(False, n, [])
    a, b = lazy.data(), eager.data()
    assert sorted(calls) == list(range(n))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert all(s["dom"].startswith("dom/") for s in a["steps"])
    assert lazy.doms == eager.doms and len(lazy.doms) == 7
    for name, rec in (("lazy", lazy), ("eager", eager)):
        write_trajectory(rec.data(), tmp_path / name, {**rec.shots, **rec.doms})
    files = {p.relative_to(tmp_path / "lazy"): p.read_bytes() for p in (tmp_path / "lazy").rglob("*") if p.is_file()}
    assert files == {p.relative_to(tmp_path / "eager"): p.read_bytes()
                     for p in (tmp_path / "eager").rglob("*") if p.is_file()}
