"""Fifteen kinds of credential on a site of our own (tests/support/credential_site.py), recorded by
the real recorder (mitmproxy and Chromium): shared as it is, the refusal names each kind; after
``archive redact``, ``bundle pack --redact`` and ``record session --redact`` no value occurs in any
byte of the outputs (decoded blobs, zip members, WARC and WACZ exports); the redacted suite still
validates and the redacted bundle re-runs identically (issue 44)."""

from __future__ import annotations

import gzip
import json
import re
import zipfile
from pathlib import Path

import pytest
from cli_runner import run_cli
from credential_site import HOST, NAMED, USER, CredentialSite, session_script
from secret_search import everything, holds

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

ENV = "VAULT_APP_TOKEN"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(work folder, archive, suite, site values) of one recorded session on the site, unredacted."""
    work = tmp_path_factory.mktemp("vault")
    site = CredentialSite()
    script = work / "vault.py"
    script.write_text(session_script(site))
    suite = work / "suite"
    (suite / "references").mkdir(parents=True)
    try:
        proc = run_cli("record", "session", f"http://{HOST}/login", "--archive", work / "vault.wfz",
                       "--trajectory", suite / "references" / "vault.json", "--script", script,
                       "--resolve", f"{HOST}=127.0.0.1:{site.port}", timeout=180)
    finally:
        site.close()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    task = {"id": "vault", "instruction": "Sign in as alice and say how many items the vault holds.",
            "start_url": f"http://{HOST}/login", "category": "accounts",
            "ground_truth": {"answer": {"exact": "3 items"}, "reference_trajectory": "references/vault.json"}}
    (suite / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    (suite / "manifest.json").write_text(json.dumps({"format": "webfreeze-suite", "version": 1, "name": "vault",
                                                     "archive": "../vault.wfz"}))
    return work, work / "vault.wfz", suite, site.values(), script


def _env(values: dict) -> dict:
    import os

    return dict(os.environ, **{ENV: values["inline_script"]})


def _left(chunks, values: dict) -> list[str]:
    return sorted(kind for kind, v in values.items() if holds(chunks, v))


def _warc_bytes(path) -> bytes:
    """A WARC's records, gzip members undone."""
    return gzip.decompress(path.read_bytes())


def test_every_kind_was_recorded_and_the_refusal_names_each(recorded, tmp_path):
    from webfreeze.bundles.redaction import archive_findings

    work, archive, suite, values, _ = recorded
    chunks = everything(archive) + [(suite / "references" / "vault.json").read_bytes()]
    assert sorted(set(values) - set(_left(chunks, values))) == []  # (else what follows proves nothing)
    findings = " | ".join(what for _, what in archive_findings(archive))
    for kind, named in NAMED.items():
        assert named in findings, (kind, findings)
    # one line, the first finding, nothing written
    out = tmp_path / "x.warc.gz"
    proc = run_cli("archive", "export", archive, "--format", "warc", "-o", out)
    assert proc.returncode == 1 and "refused" in proc.stderr and not out.exists(), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert any(named in proc.stderr for named in NAMED.values()), proc.stderr
    # a suite packed alone: its archive is packed into a copy on the way, and the refusal names
    # the user's file, not the copy
    bundle = tmp_path / "vault.wfb"
    proc = run_cli("bundle", "pack", suite, "-o", bundle)
    assert proc.returncode == 1 and "refused" in proc.stderr and not bundle.exists(), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    named = re.search(r"\(archive (.+?)\); redact it first", proc.stderr)
    assert named and Path(named.group(1)).resolve() == archive.resolve(), proc.stderr


def test_archive_redact_leaves_no_value_in_any_output(recorded, tmp_path):
    work, archive, suite, values, _ = recorded
    out, suite_out = tmp_path / "red.wfz", tmp_path / "suite-red"
    proc = run_cli("archive", "redact", archive, "-o", out, "--suite", suite, "--suite-out", suite_out,
                   "--secret-env", ENV, env=_env(values))
    assert proc.returncode == 0, proc.stderr
    assert run_cli("archive", "verify", out).returncode == 0
    files = [p.read_bytes() for p in suite_out.rglob("*") if p.is_file()]
    assert _left(everything(out) + files, values) == []
    # nothing is left for the refusal: the redacted archive exports without --allow-secrets
    warc, wacz = tmp_path / "red.warc.gz", tmp_path / "red.wacz"
    proc = run_cli("archive", "export", out, "--format", "warc", "-o", warc)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("archive", "export", out, "--format", "wacz", "-o", wacz)
    assert proc.returncode == 0, proc.stderr
    with zipfile.ZipFile(wacz) as zf:
        members = [zf.read(n) for n in zf.namelist()]
        members += [gzip.decompress(zf.read(n)) for n in zf.namelist() if n.endswith(".gz")]
    assert _left([_warc_bytes(warc), *members], values) == []
    for backend in ("text", "browser"):
        proc = run_cli("tasks", "validate", suite_out, "--backend", backend)
        assert proc.returncode == 0, f"{backend}: {proc.stdout}{proc.stderr}"


@pytest.mark.slow
def test_bundle_pack_redact_leaves_no_value_and_re_runs_identically(recorded, tmp_path):
    work, archive, suite, values, _ = recorded
    run = tmp_path / "run"
    proc = run_cli("bench", "run", suite, "--agent", "reference", "--backend", "text", "--out", run)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("bundle", "pack", run, "-o", tmp_path / "plain.wfb")
    assert proc.returncode == 1 and "refused" in proc.stderr and not (tmp_path / "plain.wfb").exists()
    bundle = tmp_path / "red.wfb"
    # the vault's page shows its API key: the agent saw a secret there, and pack says where
    proc = run_cli("bundle", "pack", run, "--redact", "--secret-env", ENV, "-o", bundle, cwd="/", env=_env(values))
    assert proc.returncode == 1 and not bundle.exists(), proc.stderr
    assert "a secret was visible to the agent" in proc.stderr and "in vault step" in proc.stderr, proc.stderr
    # which secret: what and where it was found, never its value
    assert "(the X-API-Key header value in the request of GET http://vault.lab/api/key" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = run_cli("bundle", "pack", run, "--redact", "--secret-env", ENV, "--allow-visible-secrets", "-o", bundle,
                   cwd="/", env=_env(values))
    assert proc.returncode == 0, proc.stderr
    members = tmp_path / "members"
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(members)
        files = [zf.read(n) for n in zf.namelist()]
    (arc,) = list((members / "archive").glob("*.wfz"))
    assert _left(files + everything(arc), values) == []
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run_cli("bundle", "run", bundle, "--out", "re", cwd=elsewhere)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "identical to the bundled run" in proc.stdout


@pytest.mark.slow
def test_record_session_redact_leaves_no_value_behind(recorded, tmp_path):
    site = CredentialSite()
    script = tmp_path / "vault.py"
    script.write_text(session_script(site))
    archive, traj = tmp_path / "rec.wfz", tmp_path / "rec.json"
    try:
        proc = run_cli("record", "session", f"http://{HOST}/login", "--archive", archive, "--trajectory", traj,
                       "--script", script, "--resolve", f"{HOST}=127.0.0.1:{site.port}", "--redact",
                       "--secret-env", ENV, env=_env(site.values()), timeout=180)
    finally:
        site.close()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    values = site.values()
    assert _left(everything(archive) + [traj.read_bytes()], values) == []
    assert run_cli("archive", "verify", archive).returncode == 0
    typed = [s["value"] for s in json.loads(traj.read_text())["steps"] if s["action"] == "type"]
    assert typed[0] == USER and typed[1].startswith("wfredacted-")


def test_record_crawl_redact_takes_the_same_options(tmp_path):
    """A crawl of the sign-in page with --redact: its CSRF field is found and replaced; the crawl
    takes --param and --secret-env as 'archive redact' does."""
    site = CredentialSite()
    archive = tmp_path / "crawl.wfz"
    try:
        proc = run_cli("record", "crawl", f"http://{HOST}/login", "--archive", archive, "--depth", "0",
                       "--resolve", f"{HOST}=127.0.0.1:{site.port}", "--no-check", "--redact", "--param", "username",
                       "--secret-env", ENV, env=_env(site.values()), timeout=180)
    finally:
        site.close()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "secrets replaced" in proc.stdout
    chunks = everything(archive)
    assert not holds(chunks, site.secrets["csrf_hidden"])
    assert b"wfredacted-" in b"".join(chunks)
    assert run_cli("archive", "verify", archive).returncode == 0
