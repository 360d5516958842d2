"""Bundles end to end: the demo's LLM run (replayed from the shipped cassette) packed into one file,
verified, and re-run in a fresh folder with no network and no API key, reproducing its trajectories
and report byte for byte; a flipped byte is named by `verify` and refused by `run`; each malformed
bundle is refused in one line with nothing written; signing; the WACZ export; a new agent on the
frozen benchmark."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from cli_runner import invoke, run_cli
from no_network import offline_env, offline_prefix

from webfreeze.demo import CASSETTE, LLM_MAX_STEPS, LLM_TASKS, SUITE
from webfreeze.runs.compare import run_difference

# Three of the demo's LLM tasks keep the browser runs short; the cassette they replay is the whole
# shipped one, so the bundle must carry only the entries these tasks used.
TASKS = LLM_TASKS[:3]
BACKEND = "browser"  # the shipped cassette was recorded in the browser backend (see webfreeze/demo)

pytestmark = pytest.mark.slow




@pytest.fixture(scope="module")
def llm_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle-src") / "llm"
    args = ["bench", "run", SUITE, "--agent", "llm", "--llm", "local", "--agent-config", "memory=last-k",
            "--agent-config", "k=3", "--max-steps", LLM_MAX_STEPS, "--cassette", CASSETTE, "--cassette-mode",
            "replay", "--backend", BACKEND, "--workers", "2", "--out", out]
    for t in TASKS:
        args += ["--tasks", t]
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def bundle(llm_run, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("bundle") / "demo-llm.wfb"
    proc = run_cli("bundle", "pack", llm_run, "-o", path)
    assert proc.returncode == 0, proc.stderr
    return path


def test_the_bundle_holds_the_run_and_only_the_cassette_entries_it_used(llm_run, bundle, tmp_path):
    from webfreeze.llm import Cassette

    with zipfile.ZipFile(bundle) as zf:
        names = zf.namelist()
        manifest = json.loads(zf.read("datapackage.json"))
        infos = {i.filename: i for i in zf.infolist()}
        (tmp_path / "c.sqlite").write_bytes(zf.read("runs/llm/llm-cassette.sqlite"))
    assert names[:2] == ["datapackage.json", "datapackage-digest.json"]
    listed = {r["path"]: r for r in manifest["resources"]}
    assert set(names) - {"datapackage.json", "datapackage-digest.json"} == set(listed)
    archive = manifest["contents"]["archive"]
    assert infos[archive].compress_type == zipfile.ZIP_STORED  # already compressed: stored
    assert infos["suite/tasks.jsonl"].compress_type == zipfile.ZIP_DEFLATED
    assert {f"runs/llm/trajectories/{t}.json" for t in TASKS} <= set(listed)
    assert "runs/llm/report.json" in listed and "suite/manifest.json" in listed
    run_manifest = json.loads((llm_run / "manifest.json").read_text())
    with Cassette(tmp_path / "c.sqlite", "replay") as sub, Cassette(CASSETTE, "replay") as shipped:
        assert 0 < len(sub) < len(shipped)  # a subset of the shipped cassette
        rows = [[r["key"], r["n"]] for r in sub.rows()]
        # the run's digest covers what it used: the same from the subset as from the whole cassette
        assert sub.entries_digest(rows) == shipped.entries_digest(rows)
        assert run_manifest["llm"] == {"entries_digest": sub.entries_digest(rows)[0], "calls": len(rows)}
    info = json.loads(run_cli("bundle", "info", bundle, "--json").stdout)
    assert info["runs"][0]["agent"] == "llm" and info["runs"][0]["tasks"] == len(TASKS)


def test_packing_twice_gives_the_same_bytes(llm_run, bundle, tmp_path):
    again = tmp_path / bundle.name  # (the title defaults to the file name)
    proc = run_cli("bundle", "pack", llm_run, "-o", again)
    assert proc.returncode == 0, proc.stderr
    assert again.read_bytes() == bundle.read_bytes()


def test_verify_then_an_offline_run_without_a_key_reproduces_the_run_byte_for_byte(llm_run, bundle, tmp_path):
    proc = run_cli("bundle", "verify", bundle)
    assert proc.returncode == 0, proc.stderr
    assert "ok:" in proc.stdout and "exchanges verified" in proc.stdout
    prefix, how = offline_prefix()
    out = tmp_path / "fresh" / "rerun"
    (tmp_path / "fresh").mkdir()
    proc = run_cli("bundle", "run", bundle, "--out", out, env=offline_env(), cwd=tmp_path / "fresh", prefix=prefix)
    assert proc.returncode == 0, f"({how}) {proc.stderr[-2000:]}"
    assert "llm: identical to the bundled run" in proc.stdout
    rerun = out / "runs" / "llm"
    assert run_difference(llm_run, rerun) is None  # trajectories and report.json, timings aside
    old, new = (json.loads((d / "manifest.json").read_text()) for d in (llm_run, rerun))
    identity = ("suite", "archive", "agent", "agent_settings", "env", "selection", "llm", "versions")
    assert {k: new[k] for k in identity} == {k: old[k] for k in identity}
    assert new["circumstances"]["cassette_mode"] == "replay"
    assert not (rerun / "local-model.log").exists()  # no model was started


def _member_offset(path: Path, name: str) -> int:
    """Where member ``name``'s data starts in the zip file."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(name)
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
    name_len, extra_len = int.from_bytes(header[26:28], "little"), int.from_bytes(header[28:30], "little")
    return info.header_offset + 30 + name_len + extra_len


@pytest.mark.parametrize("member", ["archive/demo.wfz", "runs/llm/report.json"])
def test_a_flipped_byte_is_named_by_verify_and_refused_by_run(bundle, tmp_path, member):
    bad = tmp_path / "bad.wfb"
    data = bytearray(bundle.read_bytes())
    data[_member_offset(bundle, member) + 100] ^= 0x01
    bad.write_bytes(bytes(data))
    proc = run_cli("bundle", "verify", bad)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and f"damaged member {member}" in proc.stderr
    out = tmp_path / "out"
    proc = run_cli("bundle", "run", bad, "--out", out)
    assert proc.returncode == 1 and f"damaged member {member}" in proc.stderr
    assert "Traceback" not in proc.stderr and not out.exists()


# ------------------------------------------------------------------------------------ bad bundles
def _resource(path: str, data: bytes) -> dict:
    return {"name": path.rsplit("/", 1)[-1], "path": path, "bytes": len(data),
            "hash": "sha256:" + hashlib.sha256(data).hexdigest()}


def _write_bundle(path: Path, members: dict, listed: dict | None = None, *, sizes: dict | None = None,
                  compress=zipfile.ZIP_DEFLATED) -> Path:
    """A bundle zip holding ``members`` whose manifest lists ``listed`` (default: the members)."""
    listed = members if listed is None else listed
    resources = [_resource(p, d) for p, d in listed.items()]
    for r in resources:
        r["bytes"] = (sizes or {}).get(r["path"], r["bytes"])
    manifest = (json.dumps({"profile": "data-package", "format": "webfreeze-bundle", "version": 1,
                            "contents": {"archive": "archive/x.wfz", "suite": "suite/", "runs": []},
                            "resources": resources}, indent=1, sort_keys=True) + "\n").encode()
    digest = json.dumps({"path": "datapackage.json", "hash": "sha256:" + hashlib.sha256(manifest).hexdigest()})
    with zipfile.ZipFile(path, "w", compression=compress) as zf:
        zf.writestr("datapackage.json", manifest)
        zf.writestr("datapackage-digest.json", digest)
        for name, data in members.items():
            zf.writestr(name, data)
    return path


GOOD = {"suite/tasks.jsonl": b'{"id": "t"}\n', "archive/x.wfz": b"not really an archive"}


@pytest.mark.parametrize("case, expected", [
    ("zip-slip", "member '../escaped.txt' leads out of the folder"),
    ("absolute", "member '/tmp/abs.txt' is an absolute path"),
    ("unlisted", "member 'suite/extra.json' is not in the manifest"),
    ("missing", "manifest entry 'suite/gone.json' has no member in the zip"),
    ("oversized", "member 'suite/tasks.jsonl' is oversized"),
    ("bomb", "member 'suite/zeros.bin' is a compression bomb"),
])
def test_a_malformed_bundle_is_refused_in_one_line_with_nothing_written(tmp_path, case, expected):
    path = tmp_path / "bad.wfb"
    if case == "zip-slip":
        _write_bundle(path, {**GOOD, "../escaped.txt": b"x"})
    elif case == "absolute":
        _write_bundle(path, {**GOOD, "/tmp/abs.txt": b"x"})
    elif case == "unlisted":
        _write_bundle(path, {**GOOD, "suite/extra.json": b"{}"}, GOOD)
    elif case == "missing":
        _write_bundle(path, GOOD, {**GOOD, "suite/gone.json": b"{}"})
    elif case == "oversized":  # the zip's member is larger than the manifest says
        _write_bundle(path, GOOD, sizes={"suite/tasks.jsonl": 3})
    elif case == "bomb":
        zeros = bytes(64 << 20)  # 64 MiB of zeros deflate to ~64 KiB
        _write_bundle(path, {**GOOD, "suite/zeros.bin": zeros})
    work = tmp_path / "work"
    work.mkdir()
    # the CLI in this process (its entry point, as the console script runs it), then `run` once more
    # as a real process, from inside the folder a zip-slip would escape from
    for args in (["verify", path], ["info", path], ["run", path, "--out", work / "out"],
                 ["export-wacz", path, "-o", work / "x.wacz"]):
        result = invoke("bundle", *args)
        assert result.returncode == 1, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "refused" in lines[0] and expected in lines[0], (args, lines)
        assert list(work.iterdir()) == []  # nothing extracted, nothing written
    proc = run_cli("bundle", "run", path, "--out", work / "out", cwd=work)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1 and expected in proc.stderr
    assert list(work.iterdir()) == [] and not (tmp_path / "escaped.txt").exists()


# ------------------------------------------------------------------------------------ signing, WACZ, agents
def _keys(tmp_path: Path) -> tuple[Path, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate()
    private, public = tmp_path / "key.pem", tmp_path / "key.pub.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    public.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                     serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public


def test_a_signed_bundle_verifies_with_its_key_and_not_with_another(llm_run, tmp_path):
    private, public = _keys(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    _, other_public = _keys(other)
    signed = tmp_path / "signed.wfb"
    assert invoke("bundle", "pack", llm_run, "-o", signed, "--key", private).returncode == 0
    verified = invoke("bundle", "verify", signed, "--key", public)
    assert verified.returncode == 0 and "signature valid" in verified.stdout
    from webfreeze.bundles.pack import BundleError, verify

    assert verify(signed, key=str(public), deep=False)["signature"].startswith("signature valid")
    refused = invoke("bundle", "verify", signed, "--key", other_public)
    code, err = refused.returncode, refused.stderr
    assert code == 1 and "signature is not valid" in err
    assert "not checked against a key you trust" in verify(signed, deep=False)["signature"]
    unsigned = tmp_path / "unsigned.wfb"
    assert invoke("bundle", "pack", llm_run, "-o", unsigned).returncode == 0
    with pytest.raises(BundleError, match="not signed"):
        verify(unsigned, key=str(public), deep=False)


def test_a_suite_alone_is_bundled_with_its_archive_packed(tmp_path):
    from webfreeze.bundles.pack import info, pack, verify

    out = tmp_path / "suite.wfb"
    pack([SUITE], out)
    data = info(out)
    assert data["runs"] == [] and data["archive"] == "archive/demo.wfz" and data["signed"] is False
    assert verify(out)["archive"]["exchanges"] > 0  # the packed archive passes its own verification


def test_export_wacz_gives_a_valid_wacz_and_a_new_agent_runs_on_the_frozen_benchmark(bundle, tmp_path):
    from webfreeze.archives.wacz import open_checked

    wacz = tmp_path / "demo.wacz"
    proc = run_cli("bundle", "export-wacz", bundle, "-o", wacz)
    assert proc.returncode == 0, proc.stderr
    zf, package = open_checked(str(wacz))
    zf.close()
    assert any(r["path"].startswith("archive/") for r in package["resources"])
    out = tmp_path / "new-agent"
    proc = run_cli("bundle", "run", bundle, "--out", out, "--agent", "keyword", "--backend", "text", "--limit", "5",
                   env=offline_env())
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "runs" / "keyword" / "report.json").read_text())
    assert report["suite"]["tasks"] == 5 and report["run"]["agent"]["name"] == "keyword"
