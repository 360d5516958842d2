"""Importing every real WARC/ARC file in pywb's sample archive."""

from __future__ import annotations

import json

import pytest

from webfreeze.archives import Archive

# Every file of pywb 2.10.0's sample_archive/warcs and what must happen to it on its own.
# Rejections are by design: `warcio check` itself reports the lying digest in example-extra.warc.
EXPECTED = {
    "bad.arc": "reject",  # Archive-length '-1' and 'abc'
    "dupes.warc.gz": "ok",
    "example-bad.warc.gz.bad": "ok",  # example.warc gzipped as a whole: pywb cannot seek in it, we stream it
    "example-extra.warc": "reject",  # second copy of a record with a wrong WARC-Payload-Digest
    "example-url-agnostic-orig.warc.gz": "ok",
    "example-url-agnostic-revisit.warc.gz": "nothing",  # a revisit whose original is in another file
    "example-wget-1-14.warc.gz": "ok",
    "example-wpull.warc.gz": "ok",
    "example.arc": "ok",
    "example.arc.gz": "ok",
    "example.warc": "ok",
    "example.warc.gz": "ok",
    "example2.warc.gz": "ok",
    "httpbin-resource.warc.gz": "ok",
    "iana.warc.gz": "ok",
    "missing-status-text.warc": "ok",
    "post-test.warc.gz": "ok",
}


def rows(path):
    with Archive.open(path) as arc:
        return [dict(r) for r in arc.conn.execute("SELECT * FROM exchanges ORDER BY id")]  # the format itself


def test_the_sample_list_is_complete(samples):
    assert sorted(p.name for p in samples.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_import_each_sample(name, samples, tmp_path, cli_here):
    target = tmp_path / "a.wfz"
    result = cli_here("archive", "import", samples / name, "--to", target)
    if EXPECTED[name] == "reject":
        assert result.returncode == 1, result.stdout + result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("webfreeze: error:"), result.stderr
        assert "Traceback" not in result.stderr
        assert list(tmp_path.iterdir()) == []  # nothing half-written
        return
    assert result.returncode == 0, result.stderr
    assert bool(rows(target)) == (EXPECTED[name] == "ok")
    verify = cli_here("archive", "verify", target)
    assert verify.returncode == 0, verify.stdout


def test_post_captures_keep_their_bodies(samples, tmp_path, cli_here):
    target = tmp_path / "post.wfz"
    assert cli_here("archive", "import", samples / "post-test.warc.gz", "--to", target).returncode == 0
    posts = [r for r in rows(target) if r["method"] == "POST"]
    assert len(posts) == 3  # as in pywb's own post-test.cdxj
    with Archive.open(target) as arc:
        for r in posts:
            body = arc.get_blob(r["req_body"])
            assert body and r["req_body_size"] == len(body)
            assert r["body_key"].startswith(("form:", "json:", "sha256:"))
        # the urlencoded form is keyed by its sorted fields
        form = [r for r in posts if r["body_key"].startswith("form:")]
        assert form and "foo=bar" in form[0]["body_key"]


def test_revisits_resolve_to_the_original_payload(samples, tmp_path, cli_here):
    target = tmp_path / "dupes.wfz"
    result = cli_here("archive", "import", samples / "dupes.warc.gz", samples / "iana.warc.gz", "--to", target)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr
    all_rows = rows(target)
    # dupes.warc.gz holds only revisits of iana.warc.gz's captures (plus a few responses)
    css = [r for r in all_rows if r["url"] == "http://www.iana.org/_css/2013.1/screen.css"]
    assert len(css) >= 2 and len({r["payload"] for r in css}) == 1 and css[0]["payload_size"] > 1000
    with Archive.open(target) as arc:
        assert b"{" in arc.get_blob(css[-1]["payload"])


def test_revisit_alone_is_reported_not_invented(samples, tmp_path, cli_here):
    target = tmp_path / "alone.wfz"
    result = cli_here("archive", "import", samples / "example-url-agnostic-revisit.warc.gz", "--to", target)
    assert result.returncode == 0
    assert "1 revisit records point at captures that are not in the archive" in result.stderr


def test_url_agnostic_revisit(samples, tmp_path, cli_here):
    target = tmp_path / "ua.wfz"
    result = cli_here("archive", "import", samples / "example-url-agnostic-revisit.warc.gz",
                      samples / "example-url-agnostic-orig.warc.gz", "--to", target)
    assert result.returncode == 0, result.stderr
    r = rows(target)
    assert len(r) == 2 and r[0]["url"] != r[1]["url"] and r[0]["payload"] == r[1]["payload"]
    assert r[0]["payload_size"] > 0


def test_arc_files_import_like_warcs(samples, tmp_path, cli_here):
    a, b = tmp_path / "arc.wfz", tmp_path / "arcgz.wfz"
    assert cli_here("archive", "import", samples / "example.arc", "--to", a).returncode == 0
    assert cli_here("archive", "import", samples / "example.arc.gz", "--to", b).returncode == 0
    ra, rb = rows(a), rows(b)
    assert [(r["url"], r["payload"], r["status"]) for r in ra] == [(r["url"], r["payload"], r["status"]) for r in rb]
    assert ra[0]["url"] == "http://example.com/" and ra[0]["status"] == 200


def test_arc_errors_name_the_record_by_offset_and_url(samples, tmp_path, cli_here):
    """warcio makes up a random WARC-Record-ID for each ARC record: an error names where it is instead."""
    cut = tmp_path / "cut.arc"
    cut.write_bytes((samples / "example.arc").read_bytes()[:1500])
    first = cli_here("archive", "import", cut, "--to", tmp_path / "a.wfz")
    again = cli_here("archive", "import", cut, "--to", tmp_path / "b.wfz")
    assert first.returncode == 1 and first.stderr == again.stderr, (first.stderr, again.stderr)
    assert "record at byte 151 (http://example.com/) is truncated" in first.stderr
    bad = cli_here("archive", "import", samples / "bad.arc", "--to", tmp_path / "c.wfz")
    assert bad.returncode == 1 and "record at byte 0 has a malformed Content-Length '-1'" in bad.stderr
    assert "urn:uuid" not in first.stderr + bad.stderr
    # and no made-up record id is stored either: two imports of an ARC file store the same session info
    infos = []
    for name in ("d.wfz", "e.wfz"):
        assert cli_here("archive", "import", samples / "example.arc", "--to", tmp_path / name).returncode == 0
        with Archive.open(tmp_path / name) as arc:
            infos.append(json.loads(arc.conn.execute("SELECT info FROM sessions").fetchone()[0]))
    assert infos[0] == infos[1] and infos[0]["warcinfo"][0]["record_id"] is None


def test_reimporting_a_file_is_skipped_and_sessions_are_per_file(samples, tmp_path, cli_here):
    target = tmp_path / "a.wfz"
    assert cli_here("archive", "import", samples / "example.warc.gz", "--to", target).returncode == 0
    before = rows(target)
    again = cli_here("archive", "import", samples / "example.warc.gz", samples / "example2.warc.gz", "--to", target)
    assert again.returncode == 0 and "already imported" in again.stdout
    after = rows(target)
    assert after[: len(before)] == before and len(after) > len(before)
    assert len({r["session_id"] for r in after}) == 2


def test_import_is_atomic_across_sources(samples, tmp_path, cli_here):
    target = tmp_path / "a.wfz"
    assert cli_here("archive", "import", samples / "example.warc.gz", "--to", target).returncode == 0
    before = rows(target)
    bad = cli_here("archive", "import", samples / "iana.warc.gz", samples / "example-extra.warc", "--to", target)
    assert bad.returncode == 1
    assert rows(target) == before  # iana.warc.gz was fine but did not land either


def test_revisit_never_borrows_a_near_miss(samples, tmp_path, cli_here):
    """dupes.warc.gz first: its revisit of http://www.iana.org/ must wait for iana.warc.gz rather than
    take the empty body of the http://iana.org 302 that shares its SURT key."""
    results = []
    for i, order in enumerate([("dupes.warc.gz", "iana.warc.gz"), ("iana.warc.gz", "dupes.warc.gz")]):
        target = tmp_path / f"o{i}.wfz"
        assert cli_here("archive", "import", *(samples / n for n in order), "--to", target).returncode == 0
        with Archive.open(target) as arc:
            results.append(sorted((r.url, r.captured_at, r.status, r.response.payload_digest) for r in arc.exchanges()))
    assert results[0] == results[1]
    assert [r for r in results[0] if r[0] == "http://www.iana.org/"]
    with Archive.open(tmp_path / "o0.wfz") as arc:
        for r in arc.exchanges(url="http://www.iana.org/", status=200):
            assert r.response.payload_size == 5678


def test_whole_file_gzip_equals_plain(samples, tmp_path, cli_here):
    import gzip

    whole = tmp_path / "whole.warc.gz"
    whole.write_bytes(gzip.compress((samples / "example.warc").read_bytes()))
    a, b = tmp_path / "plain.wfz", tmp_path / "whole.wfz"
    assert cli_here("archive", "import", samples / "example.warc", "--to", a).returncode == 0
    assert cli_here("archive", "import", whole, "--to", b).returncode == 0
    strip = lambda rows: [{k: v for k, v in r.items() if k != "session_id"} for r in rows]  # noqa: E731
    assert strip(rows(a)) == strip(rows(b)) and rows(a)
