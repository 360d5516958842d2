"""Bad input gets one clear line on stderr, a non-zero exit, and leaves nothing half-written."""

from __future__ import annotations

import gzip
import io
import zipfile
import zlib

import pytest
from cli_runner import assert_one_line_error
from warc_builder import write_warc
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from webfreeze.archives import Archive


def leftovers(tmp_path, keep):
    return sorted(p.name for p in tmp_path.iterdir() if p.name not in keep)


def test_truncated_gzip(samples, tmp_path, cli_here):
    data = (samples / "iana.warc.gz").read_bytes()
    src = tmp_path / "cut.warc.gz"
    src.write_bytes(data[: len(data) // 2])
    assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains="truncated")
    assert leftovers(tmp_path, {"cut.warc.gz"}) == []


@pytest.mark.parametrize("cut", [500, 1500, 2500, 3000])
def test_a_file_cut_inside_a_record_head_says_so(samples, tmp_path, cli_here, cut):
    """Cut where a record's head is incomplete, warcio fails with Python errors of its own (an
    AttributeError on a missing header); the user is told the file is truncated, and where."""
    src = tmp_path / "cut.warc.gz"
    src.write_bytes((samples / "example.warc.gz").read_bytes()[:cut])
    proc = cli_here("archive", "import", src, "--to", tmp_path / "a.wfz")
    assert_one_line_error(proc, contains="it is truncated")
    assert "at byte " in proc.stderr and "Error" not in proc.stderr and "NoneType" not in proc.stderr
    assert leftovers(tmp_path, {"cut.warc.gz"}) == []


def test_truncated_inside_gzip_member(tmp_path, cli_here):
    """A gzip stream cut in the middle of a member (not at a record boundary)."""
    src = tmp_path / "x.warc.gz"
    write_warc(src, [("http://example.com/", b"<html>" + b"a" * 50000 + b"</html>")])
    raw = src.read_bytes()
    src.write_bytes(raw[:-30])
    assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"))
    assert leftovers(tmp_path, {"x.warc.gz"}) == []


def test_malformed_warc_headers(tmp_path, cli_here):
    src = tmp_path / "bad.warc"
    src.write_bytes(b"WARC/1.0\r\nWARC-Type response\r\nContent-Length: 5\r\n\r\nhello\r\n\r\n")
    assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains="WARC-Type")
    src.write_bytes(b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://x/\r\n"
                    b"WARC-Date: 2020-01-01T00:00:00Z\r\n"
                    b"Content-Length: 5\r\n\r\nhello\r\n\r\n")
    assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains="HTTP status line")
    src.write_bytes(b"WARC/1.0\r\nWARC-Type: resource\r\nWARC-Target-URI: http://x/\r\nWARC-Date: yesterday\r\n"
                    b"Content-Length: 5\r\n\r\nhello\r\n\r\n")
    assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains="WARC-Date")
    assert leftovers(tmp_path, {"bad.warc"}) == []


def test_record_whose_digest_lies(tmp_path, cli_here):
    src = tmp_path / "liar.warc"
    body = b"<html>the honest payload</html>"
    write_warc(src, [("http://example.com/", body)], gz=False)
    data = src.read_bytes()
    assert b"WARC-Payload-Digest" in data
    src.write_bytes(data.replace(b"honest", b"HONEST"))  # same length, different bytes
    assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains="digest")
    assert leftovers(tmp_path, {"liar.warc"}) == []


def _member_starts(path, bodies) -> list[int]:
    """Write a per-record gzip WARC of one response per body; the byte offsets of its gzip members."""
    starts = []
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for i, body in enumerate(bodies):
            starts.append(fh.tell())
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            # fixed record ids and dates: the same bytes every run, so a flipped byte always lands
            # on the same deflate data (random ids made some flips decode to a bad header first)
            ids = {"WARC-Record-ID": f"<urn:uuid:00000000-0000-4000-8000-{i:012d}>",
                   "WARC-Date": "2026-01-01T00:00:00Z"}
            writer.write_record(writer.create_warc_record(f"http://example.com/{i}", "response",
                                                          payload=io.BytesIO(body), length=len(body),
                                                          http_headers=http, warc_headers_dict=ids))
    return starts


# warcio stops quietly where such a file does: a last member cut within its first bytes (which
# inflate to nothing yet) or inside its 8-byte trailer, or a stray gzip header after the last one
@pytest.mark.parametrize("where", ["member+1", "member+10", "member+18", "trailer", "stray header"])
@pytest.mark.parametrize("reader", ["fast", "warcio"])
def test_a_last_gzip_member_cut_short_is_truncation(where, reader, tmp_path, cli_here, monkeypatch):
    if reader == "warcio":
        monkeypatch.setenv("WEBFREEZE_NO_FASTWARC", "1")
    else:
        monkeypatch.delenv("WEBFREEZE_NO_FASTWARC", raising=False)
    src = tmp_path / "cut.warc.gz"
    last = _member_starts(src, [b"<html>%d</html>" % i * 50 for i in range(4)])[-1]
    raw = src.read_bytes()
    cut = {"member+1": raw[:last + 1], "member+10": raw[:last + 10], "member+18": raw[:last + 18],
           "trailer": raw[:-3], "stray header": raw + b"\x1f\x8b\x08"}[where]
    src.write_bytes(cut)
    line = assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains="truncated")
    assert f"at byte {len(raw) if where == 'stray header' else last}" in line
    assert leftovers(tmp_path, {"cut.warc.gz"}) == []
    # the whole file, uncut, imports
    src.write_bytes(raw)
    assert cli_here("archive", "import", src, "--to", tmp_path / "a.wfz").returncode == 0


@pytest.mark.parametrize("flip", [12, 30, -8])  # deflate data, and the CRC-32 in the trailer
def test_a_damaged_gzip_member_is_named_by_its_offset(flip, tmp_path, cli_here):
    src = tmp_path / "crc.warc.gz"
    starts = _member_starts(src, [b"<html>%d</html>" % i * 50 for i in range(3)])
    raw = bytearray(src.read_bytes())
    raw[starts[1] + flip if flip > 0 else starts[2] + flip] ^= 0x55
    src.write_bytes(bytes(raw))
    line = assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"),
                                 contains="corrupt gzip data")
    assert f"member at byte {starts[1]}" in line
    assert leftovers(tmp_path, {"crc.warc.gz"}) == []


def _member_with_extras(data: bytes) -> bytes:
    """A gzip member whose header carries FEXTRA, FNAME and FHCRC (rare, but valid gzip)."""
    import struct

    head = b"\x1f\x8b\x08\x0e\0\0\0\0\0\x03" + struct.pack("<H", 4) + b"XY\0\0" + b"record.warc\0"
    head += struct.pack("<H", zlib.crc32(head) & 0xFFFF)
    c = zlib.compressobj(6, zlib.DEFLATED, -15)
    return head + c.compress(data) + c.flush() + struct.pack("<II", zlib.crc32(data), len(data))


@pytest.mark.parametrize("chunk", [1, 7, 13, 29, 64, 1 << 20])
def test_the_gzip_check_reads_any_member_header_split_anywhere(chunk):
    """(ISA-L's inflate failed on such headers when a read split them; the check uses zlib.)"""
    from webfreeze.archives import gzip_members

    members = [_member_with_extras(b"WARC/1.0\r\n" + bytes([65 + i]) * (100 * i)) for i in range(6)]
    whole = b"".join(members)
    gzip_members.check_complete(io.BytesIO(whole), chunk)  # no error
    with pytest.raises(gzip_members.Unusual, match=f"at byte {len(whole) - len(members[-1])}: it is truncated"):
        gzip_members.check_complete(io.BytesIO(whole[:-5]), chunk)


def test_a_wacz_whose_warc_is_cut_short_is_refused(samples, tmp_path, cli_here):
    """The same cut inside a WACZ whose datapackage.json was rewritten to match it."""
    import hashlib
    import json

    arc = tmp_path / "a.wfz"
    assert cli_here("archive", "import", samples / "example.warc.gz", "--to", arc).returncode == 0
    good = tmp_path / "good.wacz"
    assert cli_here("archive", "export", arc, "--format", "wacz", "-o", good).returncode == 0
    bad = tmp_path / "cut.wacz"
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(bad, "w") as zout:
        package = json.loads(zin.read("datapackage.json"))
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.startswith("archive/") and info.filename.endswith(".warc.gz"):
                data = data[:-3]  # inside the last member's trailer
                for res in package["resources"]:
                    if res["path"] == info.filename:
                        res["hash"], res["bytes"] = "sha256:" + hashlib.sha256(data).hexdigest(), len(data)
            if info.filename == "datapackage.json":
                continue
            if info.filename == "datapackage-digest.json":
                continue
            zout.writestr(info, data)
        body = json.dumps(package).encode()
        zout.writestr("datapackage.json", body)
    line = assert_one_line_error(cli_here("archive", "import", bad, "--to", tmp_path / "b.wfz"), contains="truncated")
    assert "cut.wacz: archive/" in line and ".warc.gz: the file ends inside the gzip member at byte" in line
    assert not (tmp_path / "b.wfz").exists()


def test_gzip_decompression_bomb(tmp_path, cli_here):
    src = tmp_path / "bomb.warc.gz"
    size = 96 << 20
    header = (f"WARC/1.0\r\nWARC-Type: resource\r\nWARC-Target-URI: http://example.com/zeros\r\n"
              f"WARC-Date: 2020-01-01T00:00:00Z\r\nWARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-000000000001>\r\n"
              f"Content-Type: application/octet-stream\r\nContent-Length: {size}\r\n\r\n").encode()
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(src, "wb") as fh:
        fh.write(comp.compress(header))
        block = bytes(1 << 20)
        for _ in range(size >> 20):
            fh.write(comp.compress(block))
        fh.write(comp.compress(b"\r\n\r\n"))
        fh.write(comp.flush())
    assert src.stat().st_size < 200_000
    assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains="bomb")
    assert leftovers(tmp_path, {"bomb.warc.gz"}) == []


def test_zip_bomb_wacz(tmp_path, cli_here):
    src = tmp_path / "bomb.wacz"
    with zipfile.ZipFile(src, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("datapackage.json", '{"profile": "data-package", "resources": []}')
        with zf.open("archive/data.warc", "w") as member:
            block = bytes(1 << 20)
            for _ in range(80):
                member.write(block)
    assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains="bomb")
    assert leftovers(tmp_path, {"bomb.wacz"}) == []


@pytest.mark.parametrize("content,expect", [
    (b"just some text\n", "not a WARC, ARC, WACZ or HAR"),
    (b"\x89PNG\r\n\x1a\n" + bytes(100), "not a WARC, ARC, WACZ or HAR"),
    (b"", "empty file"),
    (gzip.compress(b"<html>gzip but not a WARC</html>", mtime=0), "not a WARC, ARC, WACZ or HAR"),
    (b"PK\x03\x04 definitely not a zip", "not a valid zip"),
])
def test_non_archive_files(tmp_path, cli_here, content, expect):
    src = tmp_path / "input.warc"
    src.write_bytes(content)
    assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains=expect)
    assert leftovers(tmp_path, {"input.warc"}) == []


def test_missing_source_and_directory_source(tmp_path, cli_here):
    assert_one_line_error(cli_here("archive", "import", tmp_path / "nope.warc.gz", "--to", tmp_path / "a.wfz"),
                          contains="no such file")
    d = tmp_path / "adir"
    d.mkdir()
    result = cli_here("archive", "import", d, "--to", tmp_path / "a.wfz")
    assert_one_line_error(result, code=2, contains="directory")


def test_archive_already_open_for_writing(samples, tmp_path, cli):
    target = tmp_path / "busy.wfz"
    Archive.create(target).close()
    holder = Archive.open(target, write=True)
    try:
        result = cli("archive", "import", samples / "example.warc.gz", "--to", target)
        assert_one_line_error(result, contains="already open for writing")
    finally:
        holder.close()
    with Archive.open(target) as arc:
        assert arc.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0] == 0
    assert cli("archive", "import", samples / "example.warc.gz", "--to", target).returncode == 0


def test_target_that_is_not_an_archive(samples, tmp_path, cli_here):
    target = tmp_path / "notes.txt"
    target.write_text("my notes")
    assert_one_line_error(cli_here("archive", "import", samples / "example.warc.gz", "--to", target),
                          contains="not a webfreeze archive")
    assert target.read_text() == "my notes"


def test_commands_on_missing_archive(tmp_path, cli_here):
    missing = tmp_path / "missing.wfz"
    for args in (["info", missing], ["ls", missing], ["verify", missing], ["show", missing, "http://x/"],
                 ["export", missing, "--format", "warc", "-o", tmp_path / "o.warc.gz"], ["gc", missing],
                 ["diff", missing, missing]):
        assert_one_line_error(cli_here("archive", *args), contains="no such archive")
    assert leftovers(tmp_path, set()) == []


def test_bad_flags_are_one_line_usage_errors(cli_here, tmp_path):
    assert_one_line_error(cli_here("archive", "import", "--bogus"), code=2, contains="--bogus")
    assert_one_line_error(cli_here("archive", "export", tmp_path / "a.wfz", "--format", "tar", "-o", "x"), code=2,
                          contains="tar")
    assert_one_line_error(cli_here("archive", "nosuchcommand"), code=2, contains="nosuchcommand")


def test_export_to_missing_folder(samples, tmp_path, cli_here):
    arc = tmp_path / "a.wfz"
    assert cli_here("archive", "import", samples / "example.warc.gz", "--to", arc).returncode == 0
    assert_one_line_error(cli_here("archive", "export", arc, "--format", "warc", "-o", tmp_path / "no" / "x.warc.gz"),
                          contains="no such directory")
