"""Interoperability with the reference tools, on real WARCs nobody here wrote (pywb's samples).

Every check runs the real programs in subprocesses, as a user would: our CLI, ``warcio check``,
pywb's ``wb-manager`` and ``wayback`` server, and py-wacz's ``wacz create`` / ``wacz validate``.

* round trip: sample -> import -> export WARC -> import: the same index rows and payloads;
* ``warcio check`` accepts every export;
* pywb replays our export exactly as it replays the original sample (and as our archive stores it);
* WACZ: our export validates with py-wacz and imports back unchanged; py-wacz's own WACZ imports;
  broken WACZs are refused with one error line and leave nothing behind.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import subprocess
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from pathlib import Path

import pytest
from cli_runner import run_cli
from pywb_tools import fetch, free_port, ok, tool, ts14
from warcio.archiveiterator import ArchiveIterator

from webfreeze.archives import Archive

# The columns of the index that a round trip must preserve (ids and session ids are per import).
COLUMNS = ("captured_at", "method", "url", "surt", "body_key", "status", "reason", "mime", "http_version", "kind",
           "req_headers", "req_body", "resp_headers", "payload", "payload_size")
HEADER_COLUMNS = ("req_headers", "resp_headers")

# name -> the pywb sample files imported together
CASES = {
    "iana": ["iana.warc.gz"],
    "dupes+iana": ["dupes.warc.gz", "iana.warc.gz"],
    "post-test": ["post-test.warc.gz"],
    "example": ["example.warc.gz"],
    "wget-1-14": ["example-wget-1-14.warc.gz"],
    "arc": ["example.arc.gz"],
    "url-agnostic": ["example-url-agnostic-orig.warc.gz", "example-url-agnostic-revisit.warc.gz"],
}



def run_tool(name: str, *args, cwd=None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(tool(name)), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


# ------------------------------------------------------------------------------------ reading archives
def _decoded_headers(arc: Archive, row, column: str):
    """A header column as a list of pairs (None when the request side was not captured)."""
    if row[column] is None:
        return None
    return [tuple(h) for h in arc.decode_headers(row[column])]


def index_rows(path: Path) -> list[tuple]:
    """The round-trip-relevant columns of every exchange, in id (= import) order.

    Header lists are compared decoded: their stored bytes may be compressed, and what must survive
    a round trip is the headers, not one compressor run's output.
    """
    out = []
    with Archive.open(path) as arc:
        for row in arc.conn.execute("SELECT * FROM exchanges ORDER BY id"):
            out.append(tuple(_decoded_headers(arc, row, c) if c in HEADER_COLUMNS else row[c] for c in COLUMNS))
    return out


def payload_digests(path: Path) -> list[tuple[str, str, str | None, str | None]]:
    """(stored payload digest, SHA-256 of the stored bytes, same two for the request body) per exchange."""
    out = []
    with Archive.open(path) as arc:
        for row in arc.conn.execute("SELECT payload, req_body FROM exchanges ORDER BY id"):
            req = row["req_body"]
            out.append((row["payload"], hashlib.sha256(arc.get_blob(row["payload"])).hexdigest(), req,
                        hashlib.sha256(arc.get_blob(req)).hexdigest() if req else None))
    return out


def db_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------------------------------ the round trips
class RoundTrip:
    """One sample set imported, exported as WARC, and the export imported again."""

    def __init__(self, name: str, sources: list[Path], folder: Path):
        self.name = name
        self.sources = sources
        folder.mkdir()
        self.source_archive = folder / "source.wfz"
        self.export = folder / "export.warc.gz"
        self.again = folder / "again.wfz"
        self.import_result = ok(run_cli("archive", "import", *sources, "--to", self.source_archive, timeout=120))
        # (pywb's post-test sample sends a cookie: a public sample, shared knowingly)
        self.export_result = ok(run_cli("archive", "export", self.source_archive, "--format", "warc",
                                        "-o", self.export, "--allow-secrets", timeout=120))
        self.reimport_result = ok(run_cli("archive", "import", self.export, "--to", self.again, timeout=120))


@pytest.fixture(scope="module")
def roundtrip(samples, tmp_path_factory):
    """name -> RoundTrip, built on first use and shared by the tests of this module."""
    root = tmp_path_factory.mktemp("roundtrip")
    built: dict[str, RoundTrip] = {}

    def get(name: str) -> RoundTrip:
        if name not in built:
            built[name] = RoundTrip(name, [samples / f for f in CASES[name]], root / name)
        return built[name]

    return get


@pytest.mark.parametrize("name", list(CASES))
def test_warc_round_trip_keeps_every_index_row(name, roundtrip):
    rt = roundtrip(name)
    before, after = index_rows(rt.source_archive), index_rows(rt.again)
    assert before, f"{name}: nothing was imported"
    assert len(after) == len(before)
    for i, (a, b) in enumerate(zip(before, after)):
        diffs = {c: (x, y) for c, x, y in zip(COLUMNS, a, b) if x != y}
        assert not diffs, f"{name}: exchange #{i + 1} ({a[2]}) changed in the round trip: {diffs}"
    assert before == after
    # The payloads themselves, not only the index: same digests, and the bytes hash to them.
    digests_before, digests_after = payload_digests(rt.source_archive), payload_digests(rt.again)
    assert digests_before == digests_after
    for stored, actual, req_stored, req_actual in digests_before:
        assert stored == actual and req_stored == req_actual
    # Our own revisit records (written for repeated payloads) must all resolve on the way back.
    assert "warning" not in rt.reimport_result.stderr, rt.reimport_result.stderr


@pytest.mark.parametrize("name", list(CASES))
def test_exported_warc_passes_warcio_check(name, roundtrip):
    rt = roundtrip(name)
    result = run_tool("warcio", "check", rt.export, timeout=60)
    assert result.returncode == 0, f"warcio check failed on the export of {name}:\n{result.stdout}\n{result.stderr}"


def _request_bodies_in(path: Path) -> list[tuple[str, bytes]]:
    """(target URI, request body) of every request record, read by warcio itself."""
    out = []
    with open(path, "rb") as fh:
        for record in ArchiveIterator(fh):
            if record.rec_type == "request":
                out.append((record.rec_headers.get_header("WARC-Target-URI"), record.content_stream().read()))
    return out


def test_post_captures_keep_their_request_bodies(roundtrip, samples):
    rt = roundtrip("post-test")
    originals = _request_bodies_in(samples / "post-test.warc.gz")
    assert originals, "post-test.warc.gz holds request records"
    for path in (rt.source_archive, rt.again):
        with Archive.open(path) as arc:
            rows = list(arc.conn.execute("SELECT * FROM exchanges ORDER BY id"))
            posts = [r for r in rows if r["method"] == "POST"]
            assert posts, f"{path.name}: no POST capture"
            stored = []
            for r in rows:
                assert r["req_headers"] is not None, f"{r['url']}: request side missing"
                if r["method"] == "POST":
                    assert r["req_body"] is not None and r["req_body_size"] > 0, f"{r['url']}: POST without a body"
                    assert r["body_key"].startswith(("form:", "json:", "sha256:")), r["body_key"]
                if r["req_body"]:
                    stored.append((r["url"], arc.get_blob(r["req_body"])))
        assert sorted(stored) == sorted(originals), f"{path.name}: request bodies differ from the sample's"
    # And our exported WARC carries the same request bodies, as warcio reads them.
    assert sorted(_request_bodies_in(rt.export)) == sorted(originals)


# ------------------------------------------------------------------------------------ pywb replay

def replay(base: str, coll: str, ts: str, url: str, **kw) -> tuple[int, dict, bytes]:
    """Fetch ``url`` raw (id_) from collection ``coll``.

    pywb answers some URLs with its own 307 to a canonical form (``http://example.com`` ->
    ``http://example.com/``); that redirect is pywb's, not an archived response (we only ask for
    captures archived with status 200), so follow it while it stays inside the same collection.
    """
    target = f"{base}/{coll}/{ts}id_/{url}"
    for _ in range(4):
        status, headers, body = fetch(target, **kw)
        location = headers.get("location", "")
        if status in (301, 302, 307, 308) and location.startswith(f"{base}/{coll}/") and "id_/" in location:
            target = location
            continue
        return status, headers, body
    raise AssertionError(f"{url}: pywb redirects in circles")


def _decode_content(body: bytes, coding: str) -> bytes:
    coding = coding.strip().lower()
    if coding in ("gzip", "x-gzip"):
        return gzip.decompress(body)
    if coding == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -zlib.MAX_WBITS)
    if coding == "br":
        import brotli

        return brotli.decompress(body)
    return body


def expected_replay_body(payload: bytes, stored_headers, served_headers: dict) -> bytes:
    """What pywb should serve for a stored payload.

    We store the entity with transfer coding removed and content coding kept; pywb in id_ mode
    also removes chunking and, since we accept every coding, keeps the content coding. Should it
    decode anyway (no Content-Encoding on its answer), the honest comparison is the decoded payload.
    """
    coding = next((v for k, v in stored_headers if k.lower() == "content-encoding"), "")
    if coding and coding.lower() != "identity" and "content-encoding" not in served_headers:
        return _decode_content(payload, coding)
    return payload


@pytest.fixture(scope="module")
def pywb_server(roundtrip, samples, tmp_path_factory):
    """One pywb ``wayback`` on loopback with, per case, collection ``orig-N`` (the sample WARCs)
    and ``ours-N`` (our export)."""
    wb_manager, wayback = tool("wb-manager"), tool("wayback")
    root = tmp_path_factory.mktemp("pywb")
    colls = {}
    for i, name in enumerate(CASES):
        rt = roundtrip(name)
        orig, ours = f"orig-{i}", f"ours-{i}"
        for coll, files in ((orig, rt.sources), (ours, [rt.export])):
            ok(subprocess.run([str(wb_manager), "init", coll], cwd=root, capture_output=True, text=True, timeout=60))
            ok(subprocess.run([str(wb_manager), "add", coll, *map(str, files)], cwd=root, capture_output=True,
                              text=True, timeout=60))
        colls[name] = (orig, ours)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(root / "wayback.log", "wb")
    proc = subprocess.Popen([str(wayback), "-p", str(port), "-b", "127.0.0.1"], cwd=root, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"wayback exited with {proc.returncode}:\n{(root / 'wayback.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"wayback did not answer within 30 s:\n{(root / 'wayback.log').read_text()[-3000:]}")
            time.sleep(0.2)
        yield base, colls
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


@pytest.mark.parametrize("name", list(CASES))
def test_pywb_replays_our_export_like_the_original(name, roundtrip, pywb_server):
    base, colls = pywb_server
    orig, ours = colls[name]
    rt = roundtrip(name)
    with Archive.open(rt.source_archive) as arc:
        rows = list(arc.conn.execute("SELECT * FROM exchanges ORDER BY id"))
        # Payloads of every GET 200 capture per (url, second): pywb resolves to the second only.
        by_key: dict[tuple[str, str], list] = {}
        for r in rows:
            if r["method"] == "GET" and r["status"] == 200:
                by_key.setdefault((r["url"], ts14(r["captured_at"])), []).append(
                    (arc.get_blob(r["payload"]), _decoded_headers(arc, r, "resp_headers")))
        posts = [(r["url"], ts14(r["captured_at"]), arc.get_blob(r["req_body"]),
                  next((v for k, v in _decoded_headers(arc, r, "req_headers") if k.lower() == "content-type"), None),
                  arc.get_blob(r["payload"]), _decoded_headers(arc, r, "resp_headers"))
                 for r in rows if r["method"] == "POST" and r["status"] == 200 and r["req_body"]]
    assert by_key or posts, f"{name}: nothing to replay"
    problems = []
    for (url, ts), captures in by_key.items():
        o_status, _, o_body = replay(base, orig, ts, url)
        e_status, e_headers, e_body = replay(base, ours, ts, url)
        if (o_status, e_status) != (200, 200):
            problems.append(f"{url} @{ts}: pywb status {o_status} from the original, {e_status} from our export")
            continue
        expected = [expected_replay_body(p, h, e_headers) for p, h in captures]
        if o_body != e_body or o_body not in expected:
            problems.append(f"{url} @{ts}: our archive stores {[len(x) for x in expected]} bytes, pywb serves "
                            f"{len(o_body)} bytes from the original sample, {len(e_body)} from our export")
    # POST captures: pywb matches them by request body, so replay them with the recorded body.
    for url, ts, req_body, ctype, payload, headers in posts:
        o_status, _, o_body = replay(base, orig, ts, url, data=req_body, content_type=ctype)
        e_status, e_headers, e_body = replay(base, ours, ts, url, data=req_body, content_type=ctype)
        if (o_status, e_status) != (200, 200) or o_body != e_body or e_body != expected_replay_body(
                payload, headers, e_headers):
            problems.append(f"POST {url} @{ts}: original {o_status}/{len(o_body)} bytes, export "
                            f"{e_status}/{len(e_body)} bytes, stored {len(payload)} bytes")
    assert not problems, f"{name}: {len(problems)} replay difference(s):\n" + "\n".join(problems[:20])


# ------------------------------------------------------------------------------------ WACZ
@pytest.fixture(scope="module")
def wacz_export(roundtrip, tmp_path_factory) -> Path:
    rt = roundtrip("iana")
    out = tmp_path_factory.mktemp("wacz") / "iana.wacz"
    ok(run_cli("archive", "export", rt.source_archive, "--format", "wacz", "-o", out, timeout=120))
    return out


def test_exported_wacz_validates_with_py_wacz(wacz_export):
    result = run_tool("wacz", "validate", "-f", wacz_export, timeout=120)
    assert result.returncode == 0, f"wacz validate:\n{result.stdout}\n{result.stderr}"
    assert "invalid" not in result.stdout.lower()


def test_exported_wacz_imports_back_unchanged(wacz_export, roundtrip, tmp_path):
    rt = roundtrip("iana")
    target = tmp_path / "from-wacz.wfz"
    result = ok(run_cli("archive", "import", wacz_export, "--to", target))
    assert "warning" not in result.stderr, result.stderr
    assert index_rows(target) == index_rows(rt.source_archive)
    assert payload_digests(target) == payload_digests(rt.source_archive)
    with zipfile.ZipFile(wacz_export) as zf:
        listed = [json.loads(line) for line in zf.read("pages/pages.jsonl").decode().splitlines()[1:] if line]
    with Archive.open(target) as arc:
        pages = [p.url for p in arc.pages()]
    assert listed and sorted(pages) == sorted(p["url"] for p in listed)


def _rebuild(good: Path, out: Path, *, drop=(), replace=None, add=None) -> Path:
    """Copy a WACZ member by member, dropping, replacing or adding members."""
    replace = replace or {}
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if info.filename in drop:
                continue
            data = replace[info.filename] if info.filename in replace else src.read(info.filename)
            dst.writestr(copy.copy(info), data)  # writestr updates the ZipInfo: never touch src's
        for name, data in (add or {}).items():
            dst.writestr(zipfile.ZipInfo(name), data)
    return out


def _broken_waczs(good: Path, folder: Path, samples: Path) -> dict[str, tuple[Path, str]]:
    """name -> (broken WACZ, a word the one-line error must contain)."""
    with zipfile.ZipFile(good) as zf:
        warc = zf.read("archive/data.warc.gz")
    flipped = bytearray(warc)
    flipped[len(flipped) // 2] ^= 0xFF
    cases = {
        "no-datapackage": (_rebuild(good, folder / "a.wacz", drop={"datapackage.json"}), "datapackage.json"),
        "path-escape": (_rebuild(good, folder / "b.wacz", add={"../evil.txt": b"gotcha\n"}), "evil.txt"),
        "warc-bytes-altered": (_rebuild(good, folder / "c.wacz", replace={"archive/data.warc.gz": bytes(flipped)}),
                               "data.warc.gz"),
        # A perfectly valid WARC, just not the one datapackage.json vouches for.
        "warc-swapped": (_rebuild(good, folder / "c2.wacz",
                                  replace={"archive/data.warc.gz": (samples / "example.warc.gz").read_bytes()}),
                         "data.warc.gz"),
        "digest-mismatch": (_rebuild(good, folder / "d.wacz", replace={"datapackage-digest.json": json.dumps(
            {"path": "datapackage.json", "hash": "sha256:" + hashlib.sha256(b"something else").hexdigest()})}),
                            "datapackage"),
    }
    with zipfile.ZipFile(cases["path-escape"][0]) as zf:
        assert "../evil.txt" in zf.namelist()  # zipfile kept the hostile name as written
    return cases


BROKEN = ["no-datapackage", "path-escape", "warc-bytes-altered", "warc-swapped", "digest-mismatch"]


@pytest.mark.parametrize("case", BROKEN)
def test_broken_wacz_is_refused_and_leaves_nothing(case, wacz_export, samples, tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    wacz, word = _broken_waczs(wacz_export, inputs, samples)[case]
    out = tmp_path / "out"
    out.mkdir()
    target = out / "broken.wfz"
    result = run_cli("archive", "import", wacz, "--to", target, timeout=120)
    assert result.returncode == 1, f"{case}: exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("webfreeze: error:"), f"{case}: stderr was {result.stderr!r}"
    assert word in lines[0], f"{case}: the error does not say what is wrong: {lines[0]}"
    assert "Traceback" not in result.stdout + result.stderr
    assert db_files(out) == [], f"{case}: left behind {db_files(out)}"
    assert not (tmp_path / "evil.txt").exists() and not (out.parent.parent / "evil.txt").exists()


@pytest.mark.parametrize("case", ["no-datapackage", "warc-bytes-altered", "digest-mismatch"])
def test_py_wacz_agrees_the_broken_waczs_are_invalid(case, wacz_export, samples, tmp_path):
    """The reference validator refuses them too, so the cases above test real breakage."""
    wacz, _ = _broken_waczs(wacz_export, tmp_path, samples)[case]
    result = run_tool("wacz", "validate", "-f", wacz, timeout=120)
    assert result.returncode != 0, f"py-wacz accepted {case}:\n{result.stdout}"


def test_broken_wacz_into_existing_archive_changes_nothing(wacz_export, roundtrip, samples, tmp_path):
    rt = roundtrip("example")
    inputs = tmp_path / "in"
    inputs.mkdir()
    bad, _ = _broken_waczs(wacz_export, inputs, samples)["warc-swapped"]
    out = tmp_path / "out"
    out.mkdir()
    target = out / "existing.wfz"
    target.write_bytes(rt.source_archive.read_bytes())
    before = index_rows(target)
    files_before = db_files(out)
    result = run_cli("archive", "import", bad, "--to", target)
    assert result.returncode == 1, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("webfreeze: error:"), result.stderr
    assert index_rows(target) == before
    assert not [n for n in db_files(out) if "partial" in n], db_files(out)
    assert set(db_files(out)) - set(files_before) <= {"existing.wfz-wal", "existing.wfz-shm"}


def test_py_wacz_created_wacz_imports_with_its_pages(samples, roundtrip, tmp_path):
    rt = roundtrip("iana")
    wacz = tmp_path / "py-wacz.wacz"
    ok(run_tool("wacz", "create", "-o", wacz, "--detect-pages", samples / "iana.warc.gz", cwd=tmp_path,
                timeout=120))
    ok(run_tool("wacz", "validate", "-f", wacz, timeout=120))
    with zipfile.ZipFile(wacz) as zf:
        lines = [json.loads(line) for line in zf.read("pages/pages.jsonl").decode().splitlines() if line.strip()]
    listed = sorted((p["url"], p["ts"]) for p in lines if "url" in p and p.get("ts"))
    assert listed, "py-wacz detected no pages in iana.warc.gz"
    target = tmp_path / "py-wacz.wfz"
    result = ok(run_cli("archive", "import", wacz, "--to", target))
    assert f"{len(listed)} pages" in result.stdout, result.stdout
    # The WACZ carries iana.warc.gz unchanged, so the captures are exactly those of a direct import.
    assert index_rows(target) == index_rows(rt.source_archive)
    with Archive.open(target) as arc:
        pages = sorted((p.url, p.captured_at) for p in arc.pages())
    assert [u for u, _ in pages] == [u for u, _ in listed]
    assert [ts14(t) for _, t in pages] == [ts14(t) for _, t in listed]
