"""The CLI as a user runs it: help everywhere, version, and the inspection and maintenance commands.

These run the entry point in this process (``cli_here``); the tests that need a second process (a
reader beside a writer holding the archive's lock, the modules a fresh `webfreeze --help` loads)
run the CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cli_runner import command_paths

from webfreeze import __version__
from webfreeze.archives import Archive, Exchange, archive_digest


@pytest.mark.parametrize("path", list(command_paths()), ids=lambda p: " ".join(p) or "webfreeze")
def test_every_command_has_help(cli_here, path):
    result = cli_here(*path, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Usage: webfreeze")
    doc_lines = [ln for ln in result.stdout.splitlines()[1:] if ln.strip()]
    assert doc_lines and not doc_lines[0].strip().startswith("Options:"), "command has no description"


def test_the_command_list_imports_no_command_module():
    """`webfreeze --help` lists every command with its one-line summary (SUMMARIES), each on one
    line of an 80-column terminal, without importing a command's module (they load Playwright,
    Ray, the runner: most of a second)."""
    from webfreeze.cli import COMMANDS, SUMMARIES

    assert set(SUMMARIES) == set(COMMANDS)
    code = ("import atexit, json, sys\n"
            "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
            "from webfreeze.cli import main\n"
            "main(['--help'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, COLUMNS="80"), timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    listed = done.stdout.split("Commands:", 1)[1].splitlines()
    for name, summary in SUMMARIES.items():
        assert f"  {name.ljust(10)}  {summary}" in listed, name
    imported = set(json.loads(done.stderr.strip().splitlines()[-1]))
    assert not {module for module, _attribute, _extra in COMMANDS.values()} & imported


def test_version(cli_here):
    result = cli_here("--version")
    assert result.returncode == 0 and __version__ in result.stdout


@pytest.fixture
def two_archives(tmp_path):
    """A and B: B changes one page, removes one and adds one, and shares a session with A."""
    a, b = tmp_path / "a.wfz", tmp_path / "b.wfz"
    pages = {f"http://site.example/p{i}": f"<p>page {i}</p>".encode() * 20 for i in range(5)}
    with Archive.create(a, description="crawl one") as arc:
        sid = arc.new_session("crawl", session_id="s-a")
        for url, body in pages.items():
            arc.add_exchange(Exchange(url=url, captured_at="2024-01-01T00:00:00Z", status=200,
                                      resp_headers=[("Content-Type", "text/html")], payload=body, session_id=sid))
    pages_b = dict(pages)
    pages_b["http://site.example/p1"] = b"<p>page 1, revised</p>"
    del pages_b["http://site.example/p4"]
    pages_b["http://site.example/new"] = b"<p>new page</p>"
    with Archive.create(b) as arc:
        sid = arc.new_session("crawl", session_id="s-b")
        for url, body in pages_b.items():
            arc.add_exchange(Exchange(url=url, captured_at="2024-02-01T00:00:00Z", status=200,
                                      resp_headers=[("Content-Type", "text/html")], payload=body, session_id=sid))
        arc.add_exchange(Exchange(url="http://img.example/logo.png", captured_at="2024-02-01T00:00:01Z", status=200,
                                  resp_headers=[("Content-Type", "image/png")], payload=b"\x89PNG\r\n\x1a\n\x00\x01",
                                  session_id=sid))
    return a, b


def test_info_json_and_text(cli_here, two_archives):
    a, b = two_archives
    data = json.loads(cli_here("archive", "info", b, "--json").stdout)
    assert data["exchanges"] == 6 and data["hosts"] == {"site.example": 5, "img.example": 1}
    assert data["time_range"] == ["2024-02-01T00:00:00.000000Z", "2024-02-01T00:00:01.000000Z"]
    text = cli_here("archive", "info", a).stdout
    assert "exchanges  5" in text and "crawl one" in text
    # five identical-size pages, each distinct: no dedup; the same body twice would be 2x
    data = json.loads(cli_here("archive", "info", a, "--json").stdout)
    assert data["dedup_ratio"] == 1.0
    # the compression ratio is over every blob, and the text says so beside that total (not beside
    # the payloads' bytes, which a page's screenshot or DOM would make it exceed)
    assert data["compression_ratio"] == round(data["blob_bytes"] / data["stored_blob_bytes"], 3)
    assert data["blob_bytes"] >= data["unique_bytes"]
    line = next(x for x in text.splitlines() if "compression" in x)
    assert line.split()[:2] == ["blob", "bytes"] and f"compression {data['compression_ratio']}x" in line


def test_ls_filters(cli_here, two_archives):
    _, b = two_archives
    lines = cli_here("archive", "ls", b).stdout.splitlines()
    assert len(lines) == 6
    images = cli_here("archive", "ls", b, "--mime", "image/*", "--json").stdout.splitlines()
    assert [json.loads(x)["url"] for x in images] == ["http://img.example/logo.png"]
    assert len(cli_here("archive", "ls", b, "--prefix", "http://site.example/p").stdout.splitlines()) == 4
    assert len(cli_here("archive", "ls", b, "--host", "img.example").stdout.splitlines()) == 1
    assert len(cli_here("archive", "ls", b, "--limit", "2").stdout.splitlines()) == 2
    assert cli_here("archive", "ls", b, "--since", "2030").stdout == ""


def test_show(cli_here, two_archives):
    _, b = two_archives
    out = cli_here("archive", "show", b, "http://site.example/p1").stdout
    assert "HTTP/1.1 200" in out and "Content-Type: text/html" in out and "<p>page 1, revised</p>" in out
    binary = cli_here("archive", "show", b, "http://img.example/logo.png")
    assert "binary body, 10 bytes" in binary.stdout
    missing = cli_here("archive", "show", b, "http://site.example/none")
    assert missing.returncode == 1 and "not in" in missing.stderr


def test_diff(cli_here, two_archives):
    a, b = two_archives
    result = cli_here("archive", "diff", a, b)
    assert result.returncode == 0
    assert sorted(result.stdout.splitlines()) == sorted([
        "~ GET http://site.example/p1", "- GET http://site.example/p4", "+ GET http://site.example/new",
        "+ GET http://img.example/logo.png"])
    assert cli_here("archive", "diff", a, a, "--exit-code").returncode == 0
    assert cli_here("archive", "diff", a, b, "--exit-code").returncode == 1


def test_merge_dedups_and_is_idempotent(cli_here, two_archives, tmp_path):
    a, b = two_archives
    m = tmp_path / "m.wfz"
    assert cli_here("archive", "merge", a, b, "--into", m).returncode == 0
    with Archive.open(m) as arc:
        n_ex = arc.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0]
        n_blobs = arc.conn.execute("SELECT count(*) FROM blobs").fetchone()[0]
    assert n_ex == 11
    assert n_blobs == 5 + 3 + 1  # p0, p2, p3 are shared between A and B; +1 the header dictionary
    assert cli_here("archive", "merge", a, "--into", m).returncode == 0
    with Archive.open(m) as arc:
        assert arc.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 11
    assert cli_here("archive", "verify", m).returncode == 0
    same = cli_here("archive", "merge", m, "--into", m)
    assert same.returncode == 1 and "into itself" in same.stderr


def test_gc_removes_only_unreferenced(cli_here, two_archives):
    _, b = two_archives
    with Archive.open(b, write=True) as arc:
        arc.conn.execute("DELETE FROM exchanges WHERE url='http://site.example/new'")
    dry = cli_here("archive", "gc", b, "--dry-run")
    assert "would remove 1 blob " in dry.stdout
    assert "removed 1 blob " in cli_here("archive", "gc", b).stdout
    assert "removed 0 blobs" in cli_here("archive", "gc", b).stdout
    assert cli_here("archive", "verify", b).returncode == 0
    assert len(cli_here("archive", "ls", b).stdout.splitlines()) == 5


def test_gc_dry_run_only_reads_and_forecasts_the_size(cli, samples, tmp_path):
    from webfreeze.archives.maintenance import gc

    target = tmp_path / "iana.wfz"
    assert cli("archive", "import", samples / "iana.warc.gz", "--to", target).returncode == 0
    with Archive.open(target, write=True) as arc:
        arc.conn.execute("DELETE FROM exchanges WHERE id % 2 = 0")
        # a dry run while another process holds the writer lock: it reads only, so it runs
        dry = cli("archive", "gc", target, "--dry-run")
        assert dry.returncode == 0 and "would remove" in dry.stdout and " -> about " in dry.stdout, dry.stderr
    digest = archive_digest(target)
    forecast = gc(target, dry_run=True)
    assert archive_digest(target) == digest  # nothing written
    real = gc(target)
    assert real["blobs_removed"] == forecast["blobs_removed"] > 0
    assert forecast["file_bytes_after"] < forecast["file_bytes_before"]
    after = real["file_bytes_after"]
    assert abs(forecast["file_bytes_after"] - after) < 0.15 * after, (forecast, real)


def test_meta(cli_here, two_archives):
    a, _ = two_archives
    assert cli_here("archive", "meta", a, "--set", "license=CC-BY-4.0", "--set", "creator=lab").returncode == 0
    meta = json.loads(cli_here("archive", "meta", a).stdout)
    assert meta["license"] == "CC-BY-4.0" and meta["creator"] == "lab"
    assert meta["capture_time_range"] == ["2024-01-01T00:00:00.000000Z"] * 2
    assert meta["tool"] == "webfreeze" and meta["tool_version"] == __version__
    bad = cli_here("archive", "meta", a, "--set", "format=evil")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_pack_keeps_content_and_shrinks(cli_here, samples, tmp_path):
    src, packed = tmp_path / "src.wfz", tmp_path / "packed.wfz"
    assert cli_here("archive", "import", samples / "iana.warc.gz", "--to", src).returncode == 0
    result = cli_here("archive", "pack", src, "-o", packed)
    assert result.returncode == 0, result.stderr
    assert packed.stat().st_size < src.stat().st_size
    assert cli_here("archive", "verify", packed).returncode == 0
    assert cli_here("archive", "diff", src, packed, "--exit-code").returncode == 0
    with Archive.open(src) as a, Archive.open(packed) as b:
        rows_a = [(r.url, r.response.payload_digest, r.headers) for r in a.exchanges()]
        rows_b = [(r.url, r.response.payload_digest, r.headers) for r in b.exchanges()]
        assert rows_a == rows_b
        for r in b.exchanges(status=200, limit=20):
            assert r.payload() == a.get_blob(r.response.payload_digest)
    again = cli_here("archive", "pack", src, "-o", packed)
    assert again.returncode == 1 and "already exists" in again.stderr


def test_show_refuses_what_it_would_ignore(cli_here, samples, tmp_path):
    target = tmp_path / "post.wfz"
    assert cli_here("archive", "import", samples / "post-test.warc.gz", "--to", target).returncode == 0
    wrong = cli_here("archive", "show", target, "http://httpbin.org/post", "--method", "get")
    assert wrong.returncode == 1
    assert wrong.stderr.strip() == \
        f"webfreeze: error: http://httpbin.org/post: no GET capture in {target} (captured with POST)"
    both = cli_here("archive", "show", target, "http://httpbin.org/post", "--headers-only", "-o", tmp_path / "body")
    assert both.returncode == 2 and "--headers-only shows no body" in both.stderr
    assert not (tmp_path / "body").exists()
    if os.path.exists("/dev/full"):
        full = cli_here("archive", "show", target, "http://httpbin.org/post", "-o", "/dev/full")
        assert full.returncode == 1
        assert full.stderr.strip().splitlines() == \
            ["webfreeze: error: /dev/full: cannot write: No space left on device"]
    assert cli_here("archive", "show", target, "http://httpbin.org/post", "--method", "post").returncode == 0


def test_import_says_when_new_archive_metadata_is_not_used(cli_here, samples, tmp_path):
    target = tmp_path / "a.wfz"
    first = cli_here("archive", "import", samples / "example.warc.gz", "--to", target, "--creator", "lab A")
    assert first.returncode == 0 and "warning" not in first.stderr
    again = cli_here("archive", "import", samples / "iana.warc.gz", "--to", target, "--creator", "lab B",
                     "--license", "CC0")
    assert again.returncode == 0
    assert f"warning: {target} exists, so --creator and --license are not used" in again.stderr
    meta = json.loads(cli_here("archive", "meta", target).stdout)
    assert meta["creator"] == "lab A" and meta["license"] == ""


def test_node_keeps_its_compiled_code_unless_told_not_to(tmp_path, monkeypatch):
    """Playwright's driver is a Node program each browser command starts: the CLI points Node's
    compile cache into webfreeze's cache folder, unless the user chose a folder or turned it off."""
    from webfreeze.cli import node_compile_cache

    monkeypatch.setenv("WEBFREEZE_CACHE", str(tmp_path))
    monkeypatch.delenv("NODE_COMPILE_CACHE", raising=False)
    monkeypatch.delenv("NODE_DISABLE_COMPILE_CACHE", raising=False)
    node_compile_cache()
    assert os.environ["NODE_COMPILE_CACHE"] == str(tmp_path / "node-compile-cache")
    monkeypatch.setenv("NODE_COMPILE_CACHE", "/somewhere/else")
    node_compile_cache()
    assert os.environ["NODE_COMPILE_CACHE"] == "/somewhere/else"
    monkeypatch.delenv("NODE_COMPILE_CACHE")
    monkeypatch.setenv("NODE_DISABLE_COMPILE_CACHE", "1")
    node_compile_cache()
    assert "NODE_COMPILE_CACHE" not in os.environ
