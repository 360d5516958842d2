"""What an audit of the archive commands' error paths found: outputs that would destroy something are
refused (``show -o``, ``export``), numbers an archive cannot hold and odd records are one-line errors,
a full disk or a read-only archive leaves nothing half-written, and timestamps bound what they name."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cli_runner import assert_one_line_error
from guards import archive_with_a_corrupt_blob, digest
from warc_builder import write_warc


def test_export_refuses_to_replace_what_is_not_a_regular_file(archive, tmp_path, cli_here):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert_one_line_error(cli_here("archive", "export", archive, "--format", "warc", "-o", fifo, "--force"),
                          contains="not a regular file")
    assert fifo.is_fifo()
    folder = tmp_path / "folder"
    folder.mkdir()
    assert_one_line_error(cli_here("archive", "export", archive, "--format", "warc", "-o", folder, "--force"), code=2,
                          contains="is a directory")
    # a missing --format lists the choices on one line
    assert_one_line_error(cli_here("archive", "export", archive, "-o", tmp_path / "x.warc.gz"), code=2, contains="warc")


def test_export_writes_through_a_symbolic_link(archive, tmp_path, cli_here):
    """As `show -o` does: the link stays and the file it names gets the export (the link itself
    used to be replaced by a regular file, with or without --force)."""
    link = tmp_path / "latest.warc.gz"
    link.symlink_to("export-1.warc.gz")  # dangling until the first export
    assert cli_here("archive", "export", archive, "--format", "warc", "-o", link).returncode == 0
    assert link.is_symlink() and (tmp_path / "export-1.warc.gz").is_file()
    first = digest(tmp_path / "export-1.warc.gz")
    assert_one_line_error(cli_here("archive", "export", archive, "--format", "warc", "-o", link),
                          contains="already exists")
    (tmp_path / "export-1.warc.gz").chmod(0o640)
    assert cli_here("archive", "export", archive, "--format", "wacz", "-o", link, "--force").returncode == 0
    assert link.is_symlink() and digest(tmp_path / "export-1.warc.gz") != first
    assert (tmp_path / "export-1.warc.gz").stat().st_mode & 0o777 == 0o640  # a file replaced keeps its mode
    to_archive = tmp_path / "to-archive"
    to_archive.symlink_to(archive)
    assert_one_line_error(cli_here("archive", "export", archive, "--format", "warc", "-o", to_archive, "--force"),
                          contains="which this command reads")
    assert not list(tmp_path.glob(".*partial*"))


def test_numbers_an_archive_cannot_hold_are_usage_errors(archive, cli_here):
    huge = "99999999999999999999999"
    assert_one_line_error(cli_here("archive", "ls", archive, "--status", huge), code=2, contains="--status")
    assert_one_line_error(cli_here("archive", "show", archive, "--id", huge), code=2, contains="--id")


def _warc_with(path, status_line: str | None = None, content_length: str | None = None) -> None:
    body = b"hello"
    http = f"HTTP/1.1 {status_line or '200 OK'}\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\n".encode() + body
    head = ("WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-000000000001>\r\n"
            "WARC-Date: 2020-01-01T00:00:00Z\r\nWARC-Target-URI: http://a.example/\r\n"
            "Content-Type: application/http; msgtype=response\r\n"
            f"Content-Length: {content_length or len(http)}\r\n\r\n").encode()
    path.write_bytes(head + http + b"\r\n\r\n")


@pytest.mark.parametrize("status", ["99999 OK", "-200 OK", "0 OK", "099 OK", "99999999999999999999999 OK"])
def test_import_refuses_impossible_http_statuses(tmp_path, cli_here, status):
    src = tmp_path / "s.warc"
    _warc_with(src, status_line=status)
    assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains="status")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.warc"]


def test_import_of_a_record_with_an_absurd_length_is_one_line(tmp_path, cli_here):
    src = tmp_path / "cl.warc"
    _warc_with(src, content_length="99999999999999999999")
    assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains="malformed record")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cl.warc"]
    # and a valid three-digit status still imports
    ok = tmp_path / "ok.warc"
    write_warc(ok, [("http://a.example/", b"<html>fine</html>")], gz=False)
    assert cli_here("archive", "import", ok, "--to", tmp_path / "b.wfz").returncode == 0


def test_show_takes_a_url_or_an_id_not_both(archive, cli_here):
    proc = cli_here("archive", "show", archive, "http://www.iana.org/", "--id", "3")
    assert_one_line_error(proc, code=2, contains="not both")


@pytest.fixture
def full_disk(tmp_path):
    """A 16 KiB tmpfs: a real full disk (needs root and permission to mount; skipped elsewhere)."""
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)


def test_a_full_disk_leaves_no_partial_files(samples, archive, full_disk, cli):
    # subprocesses: the tmpfs is unmounted afterwards, which a file this process still held would block
    r = cli("archive", "import", samples / "iana.warc.gz", "--to", full_disk / "i.wfz")
    assert_one_line_error(r, contains="full")
    r = cli("archive", "merge", archive, "--into", full_disk / "m.wfz")
    assert_one_line_error(r, contains="full")
    big = next(line for line in cli("archive", "ls", archive, "--json").stdout.splitlines()
               if json.loads(line)["payload_size"] > 100_000)
    r = cli("archive", "show", archive, "--id", str(json.loads(big)["id"]), "--raw", "-o", full_disk / "big")
    assert_one_line_error(r, contains=f"{full_disk / 'big'}: cannot write: No space left")
    assert list(full_disk.iterdir()) == []


def test_a_header_name_that_is_not_ascii_still_exports(tmp_path, cli_here):
    http = b"HTTP/1.1 200 OK\r\n\xff\xfe: \xff\r\nContent-Type: text/html\r\n\r\nbody"
    head = (b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-000000000002>\r\n"
            b"WARC-Date: 2020-01-01T00:00:00Z\r\nWARC-Target-URI: http://a.example/\r\n"
            b"Content-Type: application/http; msgtype=response\r\n"
            b"Content-Length: " + str(len(http)).encode() + b"\r\n\r\n")
    src = tmp_path / "h.warc"
    src.write_bytes(head + http + b"\r\n\r\n")
    assert cli_here("archive", "import", src, "--to", tmp_path / "h.wfz").returncode == 0
    for fmt in ("warc", "wacz"):
        r = cli_here("archive", "export", tmp_path / "h.wfz", "--format", fmt, "-o", tmp_path / f"out.{fmt}")
        assert r.returncode == 0, r.stderr
    again = cli_here("archive", "import", tmp_path / "out.warc", "--to", tmp_path / "again.wfz")
    assert again.returncode == 0, again.stderr
    shown = cli_here("archive", "show", tmp_path / "again.wfz", "http://a.example/")
    assert "body" in shown.stdout and "text/html" in shown.stdout


def _raw_warc(path, records: list[bytes], gz: bool = False) -> None:
    import gzip

    data = b"".join(gzip.compress(r) if gz else r for r in records)
    path.write_bytes(data)


def _record(rtype: str, uri: str, block: bytes, extra: str = "", n: int = 1) -> bytes:
    head = (f"WARC/1.0\r\nWARC-Type: {rtype}\r\nWARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-{n:012d}>\r\n"
            f"WARC-Date: 2020-01-01T00:00:00Z\r\nWARC-Target-URI: {uri}\r\n{extra}"
            f"Content-Type: application/http; msgtype=response\r\nContent-Length: {len(block)}\r\n\r\n").encode()
    return head + block + b"\r\n\r\n"


def test_import_messages_name_the_file_and_the_real_problem(tmp_path, cli_here):
    ok = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\nhello"
    # a gzip member whose checksum does not match
    member = bytearray(__import__("gzip").compress(_record("response", "http://a.example/", ok)))
    member[-8] ^= 0xFF  # the CRC32 in the trailer
    src = tmp_path / "crc.warc.gz"
    src.write_bytes(bytes(member))
    assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains="corrupt gzip")
    # only a revisit whose original is elsewhere: imported, with a warning (not "no records")
    src = tmp_path / "revisit.warc"
    _raw_warc(src, [_record("revisit", "http://a.example/", b"HTTP/1.1 200 OK\r\n\r\n",
                            "WARC-Profile: http://netpreserve.org/warc/1.0/revisit/identical-payload-digest\r\n"
                            "WARC-Payload-Digest: sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n")])
    r = cli_here("archive", "import", src, "--to", tmp_path / "r.wfz")
    assert r.returncode == 0 and "1 revisit records point at captures that are not in the archive" in r.stderr
    (tmp_path / "r.wfz").unlink()
    # a date that parses as ISO 8601 syntax but is no real date: the file is named
    src = tmp_path / "date.warc"
    _raw_warc(src, [_record("response", "http://a.example/", ok).replace(b"2020-01-01T00:00:00Z",
                                                                         b"2020-13-45T99:99:99Z")])
    line = assert_one_line_error(cli_here("archive", "import", src, "--to", tmp_path / "a.wfz"), contains="2020-13-45")
    assert str(src) in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crc.warc.gz", "date.warc", "revisit.warc"]


def test_non_ascii_header_names_survive_export_and_import(tmp_path, cli_here):
    from webfreeze.archives import Archive

    for n, name in enumerate((b"\xff\xfe", "名前".encode())):
        http = b"HTTP/1.1 200 OK\r\n" + name + b": v\r\nContent-Type: text/plain\r\n\r\nbody"
        head = (b"WARC/1.0\r\nWARC-Type: response\r\n"
                b"WARC-Record-ID: <urn:uuid:00000000-0000-0000-0000-000000000003>\r\n"
                b"WARC-Date: 2020-01-01T00:00:00Z\r\nWARC-Target-URI: http://a.example/\r\n"
                b"Content-Type: application/http; msgtype=response\r\n"
                b"Content-Length: " + str(len(http)).encode() + b"\r\n\r\n")
        src = tmp_path / f"h{n}.warc"
        src.write_bytes(head + http + b"\r\n\r\n")
        headers = []
        for step in ("first", "again"):
            arc_path = tmp_path / f"{step}{n}.wfz"
            assert cli_here("archive", "import", src, "--to", arc_path).returncode == 0
            with Archive.open(arc_path) as arc:
                headers.append(next(arc.exchanges()).headers)
            src = tmp_path / f"out{n}.warc"
            if step == "first":
                assert cli_here("archive", "export", arc_path, "--format", "warc", "-o", src).returncode == 0
        assert headers[0] == headers[1] and len(headers[0]) == 2


def test_show_writes_through_devices_and_links(archive, tmp_path, cli_here):
    body = cli_here("archive", "show", archive, "--id", "1", "--raw", "-o", tmp_path / "plain").returncode
    assert body == 0
    expected = (tmp_path / "plain").read_bytes()
    r = subprocess.run([sys.executable, "-m", "webfreeze", "archive", "show", str(archive), "--id", "1", "--raw",
                        "-o", "/dev/stdout"], capture_output=True)
    assert r.returncode == 0 and expected in r.stdout, r.stderr
    target = tmp_path / "target.bin"
    target.write_bytes(b"old")
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    assert cli_here("archive", "show", archive, "--id", "1", "--raw", "-o", link).returncode == 0
    assert link.is_symlink() and target.read_bytes() == expected


def test_revisits_find_their_originals_in_a_later_file_of_the_same_import(tmp_path, cli_here):
    import io

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from webfreeze.archives import Archive

    body = b"<html>the original</html>"
    with open(tmp_path / "orig.warc.gz", "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
        orig = w.create_warc_record("http://a.example/", "response", payload=io.BytesIO(body), http_headers=http,
                                    warc_headers_dict={"WARC-Date": "2020-01-01T00:00:00Z"})
        w.write_record(orig)
    digest = orig.rec_headers.get_header("WARC-Payload-Digest")
    with open(tmp_path / "rev.warc.gz", "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
        w.write_record(w.create_revisit_record("http://a.example/", digest, "http://a.example/",
                                               "2020-01-01T00:00:00Z", http_headers=http,
                                               warc_headers_dict={"WARC-Date": "2020-02-01T00:00:00Z"}))
    for order in (("rev", "orig"), ("orig", "rev")):
        target = tmp_path / f"{'-'.join(order)}.wfz"
        r = cli_here("archive", "import", *(tmp_path / f"{n}.warc.gz" for n in order), "--to", target)
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
        with Archive.open(target) as arc:
            rows = list(arc.exchanges())
            assert len(rows) == 2 and {row.payload() for row in rows} == {body}


def test_reading_a_file_that_is_not_an_archive_leaves_nothing_beside_it(archive, tmp_path, cli):
    # a subprocess: what is left beside the file once the command has exited is the point
    import sqlite3

    other = tmp_path / "other" / "other.sqlite"
    other.parent.mkdir()
    with sqlite3.connect(other) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    trunc = other.parent / "trunc.wfz"
    trunc.write_bytes(archive.read_bytes()[:8192])
    for path, says in ((other, "not a webfreeze archive"),
                       (trunc, "damaged archive: database disk image is malformed")):
        for command in ("info", "verify", "ls", "gc"):
            assert_one_line_error(cli("archive", command, path), contains=says)
    assert sorted(p.name for p in other.parent.iterdir()) == ["other.sqlite", "trunc.wfz"]


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc (a folder nobody can create files in)")
def test_an_archive_that_cannot_be_created_is_named_as_given(samples, cli_here):
    line = assert_one_line_error(cli_here("archive", "import", samples / "example.warc.gz", "--to", "/proc/x.wfz"))
    assert "/proc/x.wfz:" in line and "partial" not in line


def test_pack_errors_name_the_archive_not_the_temporary_copy(tmp_path, cli_here):
    target = archive_with_a_corrupt_blob(tmp_path / "c.wfz")
    line = assert_one_line_error(cli_here("archive", "pack", target, "-o", tmp_path / "p.wfz"), contains="corrupt")
    assert f"{target}:" in line and ".partial" not in line
    assert not (tmp_path / "p.wfz").exists() and [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_merge_checks_every_blob_it_copies(archive, tmp_path, cli_here):
    """A damaged payload in a source stops the merge (it used to be copied unchecked, and only a later
    `verify` of the result found it); the destination is left as it was, or not made at all."""
    from webfreeze.archives import Archive
    from webfreeze.archives.store import Exchange

    bad = tmp_path / "bad.wfz"
    body = ("<html><body>" + "a payload that will be damaged " * 40 + "</body></html>").encode()
    with Archive.create(bad) as arc:
        sid = arc.new_session("crawl")
        arc.add_exchange(Exchange(url="http://example.com/", captured_at="2024-01-01T00:00:00Z", status=200,
                                  resp_headers=[("Content-Type", "text/html")], payload=body, session_id=sid))
        payload = arc.conn.execute("SELECT payload FROM exchanges").fetchone()[0]
        stored = arc.conn.execute("SELECT data FROM blobs WHERE digest=?", (payload,)).fetchone()[0]
    raw = bytearray(bad.read_bytes())
    at = raw.find(stored)
    assert at > 0
    raw[at + len(stored) // 2] ^= 0x01
    bad.write_bytes(bytes(raw))

    new = tmp_path / "new.wfz"
    line = assert_one_line_error(cli_here("archive", "merge", archive, bad, "--into", new), contains=payload)
    assert "nothing was merged" in line
    assert not new.exists() and not list(tmp_path.glob("*new.wfz*"))
    before = digest(archive)
    assert_one_line_error(cli_here("archive", "merge", bad, "--into", archive), contains=payload)
    assert digest(archive) == before
    assert cli_here("archive", "verify", archive).returncode == 0


def test_until_includes_the_whole_period_a_short_timestamp_names(archive, cli_here):
    """pywb pads a "to" time up: --until 2014 means the end of 2014 (it used to mean its first second,
    which listed nothing captured later in 2014)."""
    every = cli_here("archive", "ls", archive).stdout.splitlines()
    assert len(every) == 171  # iana.warc.gz: all captured on 2014-01-26
    for until in ("2014", "201401", "20140126", "2014-01-26"):
        assert cli_here("archive", "ls", archive, "--until", until).stdout.splitlines() == every, until
    for until in ("2013", "20140125", "2014-01-25"):
        assert cli_here("archive", "ls", archive, "--until", until).stdout == "", until
    assert cli_here("archive", "ls", archive, "--since", "2014-01-27").stdout == ""


@pytest.mark.parametrize("value, upper", [
    ("2014", "2014-12-31T23:59:59.999999Z"), ("201402", "2014-02-28T23:59:59.999999Z"),
    ("201602", "2016-02-29T23:59:59.999999Z"), ("2014012620", "2014-01-26T20:59:59.999999Z"),
    ("20140126200624", "2014-01-26T20:06:24.999999Z"), ("2014-01-26", "2014-01-26T23:59:59.999999Z"),
    ("2014-01-26T20:06:24.5Z", "2014-01-26T20:06:24.500000Z"),
    # a partial field counts too (digits padded with 9s, then brought into range)
    ("2014020", "2014-02-09T23:59:59.999999Z"), ("20141", "2014-12-31T23:59:59.999999Z"),
    ("201402150", "2014-02-15T09:59:59.999999Z"), ("2016022", "2016-02-29T23:59:59.999999Z"),
    # ISO times to the hour or minute end with that hour or minute, whatever the offset
    ("2014-01-26T10:00", "2014-01-26T10:00:59.999999Z"), ("2014-01-26T10+05:30", "2014-01-26T05:29:59.999999Z"),
    # ISO months and weeks are whole periods too
    ("2014-02", "2014-02-28T23:59:59.999999Z"), ("2016-02", "2016-02-29T23:59:59.999999Z"),
    ("2014-W05", "2014-02-02T23:59:59.999999Z"), ("2014W05", "2014-02-02T23:59:59.999999Z"),
    ("2014-W05-3", "2014-01-29T23:59:59.999999Z"),
    # a week date or a basic-format date with a time: the same as a calendar date with that time
    ("2014-W05-3T10", "2014-01-29T10:59:59.999999Z"), ("2014W053T10:30", "2014-01-29T10:30:59.999999Z"),
    ("20140126T1030", "2014-01-26T10:30:59.999999Z"), ("20140126T103005", "2014-01-26T10:30:05.999999Z"),
    ("2014-W05T10", "2014-01-27T10:59:59.999999Z"), ("2014W05T10:30", "2014-01-27T10:30:59.999999Z"),
    # years before 1000 keep four digits, so that they sort as text; the last periods of 9999 end
    # with the last instant there is
    ("0999", "0999-12-31T23:59:59.999999Z"), ("9999-12", "9999-12-31T23:59:59.999999Z"),
    ("9999-W52", "9999-12-31T23:59:59.999999Z"), ("9999-12-31", "9999-12-31T23:59:59.999999Z")])
def test_upper_bounds_of_timestamps(value, upper):
    from webfreeze.archives.timeutil import normalize_time, parse_time_upper

    assert normalize_time(parse_time_upper(value)) == upper


@pytest.mark.parametrize("value, lower", [
    ("2014-02", "2014-02-01T00:00:00.000000Z"), ("2014-W05", "2014-01-27T00:00:00.000000Z"),
    ("0999", "0999-01-01T00:00:00.000000Z"), ("09990101000000", "0999-01-01T00:00:00.000000Z")])
def test_lower_bounds_of_timestamps(value, lower):
    from webfreeze.archives.timeutil import normalize_time, to_timestamp14

    assert normalize_time(value) == lower
    assert to_timestamp14(lower) == lower[:4] + lower[5:7] + lower[8:10] + lower[11:13] + lower[14:16] + lower[17:19]


def _as_a_plain_user() -> list[str]:
    """A command prefix under which file permissions bind this process (root passes over them):
    nothing for an ordinary user; for root, setpriv dropping the two capabilities that do it."""
    if os.geteuid() != 0:
        return []
    caps = "-dac_override,-dac_read_search"
    prefix = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}"]
    try:
        ok = subprocess.run([*prefix, "true"], capture_output=True).returncode == 0
    except FileNotFoundError:
        ok = False
    if not ok:
        pytest.skip("cannot drop root's power over file permissions here (no setpriv, or not allowed)")
    return prefix


def test_side_files_a_reader_of_a_read_only_archive_left_are_named_to_a_later_writer(samples, tmp_path):
    prefix = _as_a_plain_user()

    def cli(*args):
        return subprocess.run([*prefix, sys.executable, "-m", "webfreeze", *map(str, args)], capture_output=True,
                              text=True, timeout=120)

    arc = tmp_path / "ro.wfz"
    assert cli("archive", "import", samples / "example.warc.gz", "--to", arc).returncode == 0
    arc.chmod(0o444)
    assert_one_line_error(cli("archive", "meta", arc, "--set", "creator=x"), contains="not writable")
    for args in (["info"], ["ls"], ["verify"], ["show", "http://example.com?example=1"]):
        assert cli("archive", *args[:1], arc, *args[1:]).returncode == 0, args
    sides = sorted(p for p in tmp_path.iterdir() if p != arc)
    assert sides, "SQLite made no side files: this test no longer covers what it is about"
    arc.chmod(0o644)
    # not SQLite's bare "attempt to write a readonly database"
    line = assert_one_line_error(cli("archive", "meta", arc, "--set", "creator=x"), contains="not writable")
    assert any(str(p) in line for p in sides), line
    for p in sides:
        p.unlink()
    assert cli("archive", "meta", arc, "--set", "creator=x").returncode == 0
