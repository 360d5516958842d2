"""Edge cases found in review: odd paths, overwrites, packed merges, POST display, reproducible exports."""

from __future__ import annotations

import gzip
import json
import stat

import pytest

from webfreeze.archives import Archive


@pytest.mark.parametrize("folder", ["h#sh", "q?m", "pc%41", "sp ace"])
def test_archive_paths_with_uri_characters(samples, tmp_path, cli_here, folder):
    d = tmp_path / folder
    d.mkdir()
    target = d / "a.wfz"
    assert cli_here("archive", "import", samples / "example.warc.gz", "--to", target).returncode == 0
    assert sorted(p.name for p in d.iterdir() if not p.name.endswith(("-wal", "-shm"))) == ["a.wfz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder]  # nothing written beside the folder
    assert json.loads(cli_here("archive", "info", target, "--json").stdout)["exchanges"] == 3
    packed = d / "p.wfz"
    assert cli_here("archive", "pack", target, "-o", packed).returncode == 0
    merged = d / "m.wfz"
    assert cli_here("archive", "merge", target, packed, "--into", merged).returncode == 0
    assert cli_here("archive", "verify", merged).returncode == 0


def test_export_never_clobbers_by_accident(samples, tmp_path, cli_here):
    arc = tmp_path / "a.wfz"
    assert cli_here("archive", "import", samples / "example.warc.gz", "--to", arc).returncode == 0
    onto_self = cli_here("archive", "export", arc, "--format", "warc", "-o", arc, "--force")
    assert onto_self.returncode == 1 and "which this command reads" in onto_self.stderr
    assert cli_here("archive", "verify", arc).returncode == 0
    other = tmp_path / "notes.txt"
    other.write_text("keep me")
    refused = cli_here("archive", "export", arc, "--format", "warc", "-o", other)
    assert refused.returncode == 1 and "already exists" in refused.stderr and other.read_text() == "keep me"
    assert cli_here("archive", "export", arc, "--format", "warc", "-o", other, "--force").returncode == 0
    assert other.read_bytes()[:2] == b"\x1f\x8b"
    assert stat.S_IMODE(other.stat().st_mode) & 0o044  # readable by others, like any file the user writes


def test_exports_are_byte_reproducible(samples, tmp_path, cli_here):
    arc = tmp_path / "a.wfz"
    imported = cli_here("archive", "import", samples / "post-test.warc.gz", samples / "example.warc.gz", "--to", arc)
    assert imported.returncode == 0
    for fmt in ("warc", "wacz"):
        a, b = tmp_path / f"1.{fmt}", tmp_path / f"2.{fmt}"
        # (pywb's post-test sample sends a cookie: a public sample, shared knowingly)
        assert cli_here("archive", "export", arc, "--format", fmt, "-o", a, "--allow-secrets").returncode == 0
        assert cli_here("archive", "export", arc, "--format", fmt, "-o", b, "--allow-secrets").returncode == 0
        assert a.read_bytes() == b.read_bytes(), fmt


def test_a_packed_archive_exports_the_same_warc_and_a_redacted_one_other_ids(samples, tmp_path, cli_here):
    """`archive pack` changes how headers are stored (a dictionary trained on them), not what they
    say: its WARC is the original's byte for byte. A redacted copy is another archive, which says
    other things: no record of its WARC has an id of the original's."""
    import re

    arc, packed, red = tmp_path / "a.wfz", tmp_path / "p.wfz", tmp_path / "r.wfz"
    assert cli_here("archive", "import", samples / "post-test.warc.gz", samples / "example.warc.gz",
                    "--to", arc).returncode == 0
    assert cli_here("archive", "pack", arc, "-o", packed, "--allow-secrets").returncode == 0
    assert cli_here("archive", "redact", arc, "-o", red).returncode == 0
    with Archive.open(arc) as a, Archive.open(packed) as p:
        assert a.meta()["header_dictionary"] != p.meta()["header_dictionary"]  # (else this proves nothing)
    out = {}
    for name, src in (("a", arc), ("p", packed), ("r", red)):
        out[name] = tmp_path / f"{name}.warc.gz"
        assert cli_here("archive", "export", src, "--format", "warc", "-o", out[name], "--allow-secrets").returncode == 0
    assert out["a"].read_bytes() == out["p"].read_bytes()
    ids = {k: re.findall(rb"WARC-Record-ID: (<[^>]+>)", gzip.decompress(out[k].read_bytes())) for k in ("a", "r")}
    assert len(ids["a"]) == len(ids["r"]) and not set(ids["a"]) & set(ids["r"])


def test_exported_request_lines_are_http(samples, tmp_path, cli_here):
    arc, out = tmp_path / "a.wfz", tmp_path / "a.warc.gz"
    assert cli_here("archive", "import", samples / "post-test.warc.gz", "--to", arc).returncode == 0
    assert cli_here("archive", "export", arc, "--format", "warc", "-o", out, "--allow-secrets").returncode == 0
    text = gzip.decompress(out.read_bytes()).decode("latin-1")
    lines = [ln for ln in text.split("\r\n") if ln.startswith(("GET ", "POST "))]
    assert lines and all(ln.endswith(" HTTP/1.1") for ln in lines), lines


def test_merging_packed_archives_stays_valid(tmp_path, cli_here):
    from webfreeze.archives import Exchange

    page = "<html><body>" + " ".join(f"paragraph {i} of a long page about archives" for i in range(400))
    versions = [page + f" edition {n}</body></html>" for n in range(3)]
    paths = []
    for name, picks in (("a", (0, 1)), ("b", (1, 2))):
        raw = tmp_path / f"{name}.wfz"
        with Archive.create(raw, license="CC0", replay_rules={"ignore_params": ["_"]}) as arc:
            sid = arc.new_session("crawl", session_id=f"s-{name}")
            for k, v in enumerate(picks):
                arc.add_exchange(Exchange(url="http://site.example/page", captured_at=f"2024-0{k + 1}-01T00:00:00Z",
                                          status=200, resp_headers=[("Content-Type", "text/html")],
                                          payload=versions[v].encode(), session_id=sid))
        packed = tmp_path / f"{name}-packed.wfz"
        assert cli_here("archive", "pack", raw, "-o", packed).returncode == 0
        paths.append(packed)
    with Archive.open(paths[1]) as arc:
        assert arc.conn.execute("SELECT count(*) FROM blobs WHERE codec='zstd-delta'").fetchone()[0] == 1
    merged = tmp_path / "merged.wfz"
    assert cli_here("archive", "merge", paths[1], paths[0], "--into", merged).returncode == 0
    assert cli_here("archive", "merge", paths[1], "--into", paths[0]).returncode == 0
    for target in (merged, paths[0]):
        assert cli_here("archive", "verify", target).returncode == 0
        with Archive.open(target) as arc:
            bodies = {r.payload().decode() for r in arc.exchanges()}
            assert bodies == set(versions)
    meta = json.loads(cli_here("archive", "meta", merged).stdout)
    assert meta["license"] == "CC0" and meta["replay_rules"] == {"ignore_params": ["_"]}
    repacked = tmp_path / "repacked.wfz"
    assert cli_here("archive", "pack", merged, "-o", repacked).returncode == 0
    assert cli_here("archive", "pack", repacked).returncode == 0  # packing twice keeps it valid
    assert cli_here("archive", "verify", repacked).returncode == 0
    assert cli_here("archive", "diff", merged, repacked, "--exit-code").returncode == 0


def test_show_post_captures(samples, tmp_path, cli_here):
    arc = tmp_path / "p.wfz"
    assert cli_here("archive", "import", samples / "post-test.warc.gz", "--to", arc).returncode == 0
    rows = [json.loads(x) for x in cli_here("archive", "ls", arc, "--method", "POST", "--json").stdout.splitlines()]
    first = next(r for r in rows if "foo=bar&test=abc" in r["body_key"])
    out = cli_here("archive", "show", arc, "--id", first["id"]).stdout
    assert "POST http://httpbin.org/post" in out and "foo=bar&test=abc" in out
    # SURT matching: host case does not matter
    assert cli_here("archive", "show", arc, "http://HTTPBIN.org/post", "--headers-only").returncode == 0
    assert cli_here("archive", "show", arc).returncode == 2
    bad_out = cli_here("archive", "show", arc, "--id", first["id"], "-o", tmp_path / "nope" / "x")
    assert bad_out.returncode == 1 and bad_out.stdout == ""


def test_response_without_target_uri_is_one_line(tmp_path, cli_here):
    src = tmp_path / "x.warc"
    src.write_bytes(b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Date: 2020-01-01T00:00:00Z\r\n"
                    b"Content-Type: application/http;msgtype=response\r\nContent-Length: 38\r\n\r\n"
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi\r\n\r\n")
    result = cli_here("archive", "import", src, "--to", tmp_path / "a.wfz")
    assert result.returncode == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("webfreeze: error:") and "internal error" not in result.stderr
