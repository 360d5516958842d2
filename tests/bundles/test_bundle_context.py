"""Bundles of long-context runs: the filler pool and, for an A2-only run, the A1 run's manifest,
tasks and exactly the A1 trajectories it used travel in the bundle; `bundle run` re-runs under the
same condition from those members, offline and without a key, to the same bytes; a pool or an A1
trajectory changed since the run is refused in one line, when packing and when re-running.

Real parts: the demo archive replayed in the text backend, the reference agent on the shipped
long-context suite, the shipped filler pool (copied, so a test may change its copy), the real CLI
in subprocesses (the re-runs in a network namespace of their own when this machine allows it)."""

from __future__ import annotations

import hashlib
import json
import shutil
import zipfile
from pathlib import Path

import pytest
from cli_runner import invoke, run_cli
from no_network import offline_env, offline_prefix

from webfreeze.demo import SUITE
from webfreeze.runs.compare import run_difference

LC_SUITE = Path(SUITE).parent / "long-context"
SHIPPED_POOL = Path(SUITE).parent / "context-pool.jsonl"
# A small target keeps the bundled runs quick; the shipped pool's short trajectories still make
# up several fillers at 1,500 tokens, beside A1 and A2.
CONTEXT = ("--context", "1500")
A1_TASKS = ("lc-01-a1", "lc-04-a1")


def _bench(out: Path, pool: Path, *args) -> None:
    proc = run_cli("bench", "run", LC_SUITE, "--agent", "reference", "--backend", "text", *CONTEXT,
                   "--context-pool", pool, "--out", out, *args)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """A1 and A2 in one run (`both`), an A2-only run taking A1 from it (`a2only`), and each packed."""
    base = tmp_path_factory.mktemp("lc-bundle")
    pool = base / "pool.jsonl"
    shutil.copyfile(SHIPPED_POOL, pool)
    both, a2only = base / "both", base / "a2only"
    _bench(both, pool, "--tasks", "lc-01-*", "--tasks", "lc-04-*")
    _bench(a2only, pool, "--tasks", "lc-0[14]-a2", "--context-a1-run", both)
    out = {"pool": pool, "both": both, "a2only": a2only}
    for name in ("both", "a2only"):
        bundle = base / f"{name}.wfb"
        proc = invoke("bundle", "pack", out[name], "-o", bundle)
        assert proc.returncode == 0, proc.stderr
        out[f"{name}.wfb"] = bundle
    return out


def _names(bundle: Path) -> list[str]:
    with zipfile.ZipFile(bundle) as zf:
        return zf.namelist()


def test_the_bundles_hold_the_pool_and_exactly_the_a1_trajectories_used(runs, tmp_path):
    digest = hashlib.sha256(runs["pool"].read_bytes()).hexdigest()
    pool_member = f"context/pools/{digest}.jsonl"
    for name in ("both", "a2only"):
        with zipfile.ZipFile(runs[f"{name}.wfb"]) as zf:
            manifest = json.loads(zf.read("datapackage.json"))
            assert zf.read(pool_member) == runs["pool"].read_bytes()
        (entry,) = manifest["contents"]["runs"]
        assert entry["context"]["pool"] == pool_member
        assert manifest["contents"]["context"]["pools"] == [pool_member]
    # A1 and A2 in one run: A1's trajectories are the run's own, no A1 run travels
    assert not [n for n in _names(runs["both.wfb"]) if n.startswith("context/a1/")]
    # the A2-only run: the A1 run's manifest, tasks and the A1 trajectories it used, nothing else of it
    a1 = sorted(n for n in _names(runs["a2only.wfb"]) if n.startswith("context/a1/"))
    assert a1 == ["context/a1/both/manifest.json", "context/a1/both/tasks.jsonl",
                  *(f"context/a1/both/trajectories/{t}.json" for t in A1_TASKS)]
    info = json.loads(invoke("bundle", "info", runs["a2only.wfb"], "--json").stdout)
    assert info["context"]["a1_runs"] == ["context/a1/both/"]
    assert info["runs"][0]["context"]["a1_run"] == "context/a1/both/"
    # packing the same inputs twice gives the same bytes
    again = tmp_path / runs["a2only.wfb"].name
    assert invoke("bundle", "pack", runs["a2only"], "-o", again).returncode == 0
    assert again.read_bytes() == runs["a2only.wfb"].read_bytes()


@pytest.mark.parametrize("name", ["both", "a2only"])
def test_bundle_run_reruns_the_long_context_run_offline_byte_for_byte(runs, tmp_path, name):
    prefix, how = offline_prefix()
    out = tmp_path / "rerun"
    proc = run_cli("bundle", "verify", runs[f"{name}.wfb"])
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("bundle", "run", runs[f"{name}.wfb"], "--out", out, env=offline_env(), cwd=tmp_path, prefix=prefix)
    assert proc.returncode == 0, f"({how}) {proc.stderr[-2000:]}"
    assert f"{name}: identical to the bundled run" in proc.stdout
    rerun = out / "runs" / name
    assert run_difference(runs[name], rerun) is None  # trajectories and report.json, timings aside
    old, new = (json.loads((d / "manifest.json").read_text()) for d in (runs[name], rerun))
    assert new["context"] == old["context"] and new["context"]["pool"]["digest"]
    # the condition came from the bundle's members, not from where the run lay
    assert new["circumstances"]["context_pool"].startswith(str(out.resolve() / "context" / "pools"))
    if name == "a2only":
        assert new["context"]["a1_run"]["tasks"] == list(A1_TASKS)
        assert new["circumstances"]["context_a1_run"] == str(out.resolve() / "context" / "a1" / "both")
    a2 = json.loads((rerun / "trajectories" / "lc-01-a2.json").read_text())
    assert a2["context"]["fillers"] and a2["context"]["target_tokens"] == 1500


def _one_line_refusal(proc, *expected: str) -> None:
    err = proc.stderr.strip()
    assert proc.returncode == 1 and "Traceback" not in err and len(err.splitlines()) == 1, err
    for text in expected:
        assert text in err, err


def _moved(run: Path, dest: Path, **circumstances) -> Path:
    """A copy of ``run`` whose manifest says its pool / A1 run lay elsewhere (``circumstances``)."""
    shutil.copytree(run, dest)
    manifest = json.loads((dest / "manifest.json").read_text())
    manifest["circumstances"].update({k: str(v) for k, v in circumstances.items()})
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return dest


def _changed_pool(pool: Path, dest: Path) -> Path:
    lines = pool.read_text(encoding="utf-8").splitlines(keepends=True)
    entry = json.loads(lines[1])
    entry["instruction"] = "an instruction changed after the run"
    lines[1] = json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n"
    dest.write_text("".join(lines), encoding="utf-8")
    return dest


def _changed_trajectory(data: bytes) -> bytes:
    traj = json.loads(data)
    traj["answer"] = "an answer changed after the run"
    return (json.dumps(traj, indent=1, sort_keys=True) + "\n").encode()


def test_pack_refuses_a_changed_pool_or_a1_trajectory_in_one_line(runs, tmp_path):
    pool = _changed_pool(runs["pool"], tmp_path / "pool.jsonl")
    run = _moved(runs["both"], tmp_path / "both", context_pool=pool.resolve())
    out = tmp_path / "x.wfb"
    _one_line_refusal(invoke("bundle", "pack", run, "-o", out), str(pool), "is not the filler pool both ran with")
    assert not out.exists() and not list(tmp_path.glob(".x.wfb*"))
    a1 = tmp_path / "a1"
    shutil.copytree(runs["both"], a1)
    path = a1 / "trajectories" / "lc-04-a1.json"
    path.write_bytes(_changed_trajectory(path.read_bytes()))
    run = _moved(runs["a2only"], tmp_path / "a2only", context_a1_run=a1.resolve())
    _one_line_refusal(invoke("bundle", "pack", run, "-o", out), "its A1 trajectories are not the ones a2only used")
    assert not out.exists()
    # the A1 run's timings are not what A2 used: a trajectory whose timings alone changed still packs
    shutil.copyfile(runs["both"] / "trajectories" / "lc-04-a1.json", path)
    traj = json.loads(path.read_text())
    traj["timing"] = {"total_ms": 123456.0}
    path.write_text(json.dumps(traj, indent=1, sort_keys=True) + "\n")
    assert invoke("bundle", "pack", run, "-o", out).returncode == 0


def _repacked(bundle: Path, dest: Path, changes: dict) -> Path:
    """``bundle`` with members replaced by ``changes`` (name -> bytes) and its datapackage.json
    listing their new digests, as a lab re-packing a changed bundle would make it: each member
    matches the manifest, only the runs' own digests can tell."""
    with zipfile.ZipFile(bundle) as zf:
        infos = zf.infolist()
        data = {i.filename: zf.read(i) for i in infos}
    manifest = json.loads(data["datapackage.json"])
    for r in manifest["resources"]:
        if r["path"] in changes:
            data[r["path"]] = changes[r["path"]]
            r["bytes"] = len(changes[r["path"]])
            r["hash"] = "sha256:" + hashlib.sha256(changes[r["path"]]).hexdigest()
    data["datapackage.json"] = (json.dumps(manifest, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode()
    data["datapackage-digest.json"] = json.dumps(
        {"path": "datapackage.json", "hash": "sha256:" + hashlib.sha256(data["datapackage.json"]).hexdigest()}).encode()
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in infos:
            zf.writestr(i.filename, data[i.filename])
    return dest


@pytest.mark.parametrize("what", ["pool", "a1"])
def test_bundle_run_refuses_a_changed_pool_or_a1_trajectory_with_nothing_written(runs, tmp_path, what):
    bundle = runs["a2only.wfb"]
    with zipfile.ZipFile(bundle) as zf:
        manifest = json.loads(zf.read("datapackage.json"))
        if what == "pool":
            member = manifest["contents"]["runs"][0]["context"]["pool"]
            changed = _changed_pool(runs["pool"], tmp_path / "p.jsonl").read_bytes()
            expected = f"{member} is not the filler pool it ran with"
        else:
            member = "context/a1/both/trajectories/lc-01-a1.json"
            changed = _changed_trajectory(zf.read(member))
            expected = "the A1 trajectories under context/a1/both/ are not the ones it used"
    repacked = _repacked(bundle, tmp_path / "repacked.wfb", {member: changed})
    out = tmp_path / "out"
    for args in (("verify", repacked), ("run", repacked, "--out", out)):
        _one_line_refusal(run_cli("bundle", *args), "refused: run a2only", expected)
        assert not out.exists()
    # the same change without re-listing its digest: refused (its size or its digest) before
    # anything is written
    with zipfile.ZipFile(bundle) as zf, zipfile.ZipFile(tmp_path / "damaged.wfb", "w") as bad:
        for i in zf.infolist():
            bad.writestr(i, changed if i.filename == member else zf.read(i))
    _one_line_refusal(run_cli("bundle", "run", tmp_path / "damaged.wfb", "--out", out), member)
    assert not out.exists()
