"""Integrity of what a bundle shares (issue 44): ``bundle pack`` refuses a damaged archive in one
line naming the record; ``bundle verify`` checks a signature against the key the bundle names even
without ``--key`` (a flipped byte: exit 1, one line), and a valid one stays "not checked against a
key you trust"."""

from __future__ import annotations

import base64
import json
import sqlite3
import zipfile

import pytest
from cli_runner import invoke

from webfreeze.archives import Archive, Exchange, blobs


def _suite(tmp_path):
    arc_path = tmp_path / "site.wfz"
    with Archive.create(arc_path) as arc:
        sid = arc.new_session("crawl")
        for i in range(3):
            arc.add_exchange(Exchange(url=f"http://shop.test/p{i}", captured_at="2024-05-01T10:00:00Z", status=200,
                                      resp_headers=[("Content-Type", "text/html")], session_id=sid,
                                      payload=f"<html><title>p{i}</title><p>page {i}</p></html>".encode()))
    suite = tmp_path / "suite"
    suite.mkdir()
    task = {"id": "t1", "instruction": "Say what page 0 says.", "start_url": "http://shop.test/p0",
            "category": "read", "ground_truth": {"answer": {"exact": "page 0"}}}
    (suite / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    (suite / "manifest.json").write_text(json.dumps({"format": "webfreeze-suite", "version": 1, "name": "tiny",
                                                     "archive": "../site.wfz"}))
    return suite, arc_path


def test_bundle_pack_refuses_a_damaged_archive(tmp_path):
    suite, arc = _suite(tmp_path)
    conn = sqlite3.connect(arc)
    digest, size = conn.execute("SELECT payload, payload_size FROM exchanges WHERE id=2").fetchone()
    codec, stored = blobs.encode(b"Z" * size)
    conn.execute("UPDATE blobs SET codec=?, data=?, stored_size=? WHERE digest=?", (codec, stored, len(stored), digest))
    conn.commit()
    conn.close()
    out = tmp_path / "b.wfb"
    r = invoke("bundle", "pack", suite, "-o", out)
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "damaged" in r.stderr and "exchange 2 GET http://shop.test/p1" in r.stderr and digest in r.stderr
    assert not out.exists()


@pytest.fixture
def keys(tmp_path):
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    key = ed25519.Ed25519PrivateKey.generate()
    private = tmp_path / "key.pem"
    private.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return private


def _rewrite(src, dest, name: str, data: bytes) -> None:
    """A copy of zip ``src`` with member ``name`` replaced (same order, same entry settings)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dest, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, data if info.filename == name else zin.read(info.filename))


def test_a_flipped_signature_byte_fails_verify_without_a_key(tmp_path, keys):
    suite, _ = _suite(tmp_path)
    signed = tmp_path / "signed.wfb"
    assert invoke("bundle", "pack", suite, "-o", signed, "--key", keys).returncode == 0
    ok = invoke("bundle", "verify", signed)
    assert ok.returncode == 0 and "not checked against a key you trust" in ok.stdout, ok.stdout + ok.stderr
    with zipfile.ZipFile(signed) as zf:
        digest = json.loads(zf.read("datapackage-digest.json"))
    value = bytearray(base64.b64decode(digest["signature"]["value"]))
    for i in (0, 17, len(value) - 1):  # a byte of R, one more, a byte of S
        flipped = bytearray(value)
        flipped[i] ^= 0x01
        broken_digest = dict(digest, signature=dict(digest["signature"], value=base64.b64encode(flipped).decode()))
        broken = tmp_path / f"broken-{i}.wfb"
        _rewrite(signed, broken, "datapackage-digest.json",
                 (json.dumps(broken_digest, indent=1, sort_keys=True) + "\n").encode())
        r = invoke("bundle", "verify", broken)
        assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stdout + r.stderr
        assert "signature is broken" in r.stderr and "signed by" not in r.stdout
        r = invoke("bundle", "run", broken, "--out", tmp_path / f"re-{i}")
        assert r.returncode == 1 and "signature is broken" in r.stderr and not (tmp_path / f"re-{i}").exists()


def test_record_redact_options_are_checked_before_anything_is_recorded(tmp_path, monkeypatch):
    """``record crawl|session --redact`` take ``archive redact``'s --param, --header and --secret-env;
    given without --redact, or naming an unset variable, they are usage errors and nothing is made."""
    monkeypatch.delenv("WF_NO_SUCH_TOKEN", raising=False)
    archive = tmp_path / "a.wfz"
    for cmd in (["crawl", "http://site.lab/"],
                ["session", "http://site.lab/", "--trajectory", tmp_path / "t.json", "--script", tmp_path / "s.py"]):
        r = invoke("record", *cmd, "--archive", archive, "--param", "otp")
        assert r.returncode == 2 and "go with --redact" in r.stderr, r.stderr
        r = invoke("record", *cmd, "--archive", archive, "--redact", "--secret-env", "WF_NO_SUCH_TOKEN")
        assert r.returncode == 2 and "WF_NO_SUCH_TOKEN" in r.stderr and "not set" in r.stderr, r.stderr
        assert not archive.exists()
    _, arc = _suite(tmp_path)
    r = invoke("archive", "redact", arc, "-o", tmp_path / "o.wfz", "--secret-env", "WF_NO_SUCH_TOKEN")
    assert r.returncode == 1 and "--secret-env WF_NO_SUCH_TOKEN" in r.stderr and not (tmp_path / "o.wfz").exists()
