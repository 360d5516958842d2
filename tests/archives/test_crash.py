"""Crash safety and corruption detection on real files and real processes."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from webfreeze.archives import Archive, Exchange


def big_warc(path, n_records=120, size=512 * 1024, seed=7):
    """An uncompressed WARC of incompressible pages, large enough that importing takes a while."""
    import random

    rnd = random.Random(seed)
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=False)
        for i in range(n_records):
            body = rnd.randbytes(size)
            http = StatusAndHeaders("200 OK", [("Content-Type", "application/octet-stream"),
                                               ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(f"http://big.example/{i}", "response",
                                                          payload=io.BytesIO(body), length=len(body),
                                                          http_headers=http))


def count(path):
    with Archive.open(path) as arc:
        return arc.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0]


def kill_midway(args, watch, min_bytes=8 << 20, timeout=60, sig=signal.SIGKILL):
    """Start the CLI, send it ``sig`` once ``watch`` (a file it writes) has grown past ``min_bytes``;
    returns what it printed on stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "webfreeze", *map(str, args)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError("the import finished before it could be killed; make the input larger")
            if os.path.exists(watch) and os.path.getsize(watch) > min_bytes:
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the import never started writing")
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
    else:  # caught: the clean-up runs, then one line and the shell's code for "killed by SIGTERM"
        assert proc.returncode == 128 + sig, err
        assert err.strip().splitlines() == ["webfreeze: error: terminated"], err
    return err


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_during_import_into_existing_archive(samples, tmp_path, cli_here, sig):
    target = tmp_path / "a.wfz"
    assert cli_here("archive", "import", samples / "iana.warc.gz", "--to", target).returncode == 0
    before = count(target)
    src = tmp_path / "big.warc"
    big_warc(src)
    kill_midway(["archive", "import", src, "--to", target], watch=f"{target}-wal", sig=sig)
    # reopens, verifies, and holds exactly what had completed (the killed import is all-or-nothing)
    verify = cli_here("archive", "verify", target)
    assert verify.returncode == 0, verify.stdout
    assert count(target) == before
    # and the archive is writable again: the lock died with the process, or was given back
    assert cli_here("archive", "import", samples / "example.warc.gz", "--to", target).returncode == 0
    assert count(target) > before


def test_sigkill_during_import_into_new_archive(tmp_path, cli_here, samples):
    target = tmp_path / "new.wfz"
    src = tmp_path / "big.warc"
    big_warc(src)
    kill_midway(["archive", "import", src, "--to", target], watch=_partial(tmp_path, "new.wfz"))
    assert not target.exists()  # never half-written under its real name
    # the next run clears the dead run's temporary files and succeeds
    assert cli_here("archive", "import", samples / "example.warc.gz", "--to", target).returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.warc", "new.wfz"]


def _partial(folder, name):
    """The file a new archive is built in (private until it is complete: no WAL, pages go there)."""
    class Watch(os.PathLike):
        def __fspath__(self):
            found = [p for p in folder.iterdir() if p.name.startswith(f".{name}.partial-") and p.name[-1].isdigit()]
            return str(found[0]) if found else str(folder / "none-yet")
    return Watch()


def test_sigterm_during_import_into_new_archive_leaves_nothing(tmp_path, samples):
    target = tmp_path / "new.wfz"
    src = tmp_path / "big.warc"
    big_warc(src)
    kill_midway(["archive", "import", src, "--to", target], watch=_partial(tmp_path, "new.wfz"),
                sig=signal.SIGTERM)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.warc"]  # the temporary archive is gone too


def test_sigterm_during_export_leaves_no_partial_file(tmp_path, cli):
    archive = tmp_path / "big.wfz"
    src = tmp_path / "big.warc"
    big_warc(src, n_records=60)
    assert cli("archive", "import", src, "--to", archive).returncode == 0
    os.unlink(src)
    out = tmp_path / "out.warc.gz"
    out.write_bytes(b"an older export")

    class Temp(os.PathLike):  # the export is written beside OUT under a temporary name, then renamed
        def __fspath__(self):
            found = [p for p in tmp_path.iterdir() if p.name.startswith(".out.warc.gz.")]
            return str(found[0]) if found else str(tmp_path / "none-yet")

    kill_midway(["archive", "export", archive, "--format", "warc", "-o", out, "--force"], watch=Temp(), min_bytes=4 << 20,
                sig=signal.SIGTERM)
    assert out.read_bytes() == b"an older export"  # the old file is untouched, and no temporary file is left
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("big.wfz")) == ["out.warc.gz"]


def test_committed_exchanges_survive_a_kill(tmp_path):
    """Exchanges written one transaction each (as the recorder will) are all there after SIGKILL."""
    target = tmp_path / "rec.wfz"
    Archive.create(target).close()
    script = f"""
import sys
from webfreeze.archives import Archive, Exchange
arc = Archive.open({str(target)!r}, write=True)
sid = arc.new_session("record")
i = 0
while True:
    arc.add_exchange(Exchange(url=f"http://site.example/{{i}}", captured_at="2024-01-01T00:00:00Z", status=200,
                              resp_headers=[("Content-Type", "text/plain")], payload=str(i).encode() * 100,
                              session_id=sid))
    print(i, flush=True)
    i += 1
"""
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    done = -1
    try:
        for line in proc.stdout:
            done = int(line)
            if done >= 300:
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    with Archive.open(target) as arc:
        n = arc.conn.execute("SELECT count(*) FROM exchanges").fetchone()[0]
        assert n >= done + 1  # every exchange reported as written is there
        from webfreeze.archives.verify import verify

        assert verify(target).ok


def test_flipped_byte_in_one_blob_is_named_by_verify(tmp_path, cli_here):
    target = tmp_path / "f.wfz"
    with Archive.create(target) as arc:
        sid = arc.new_session("crawl")
        for i in range(20):
            body = (f"<html><body><h1>Page {i}</h1>" + "lorem ipsum dolor sit amet " * (40 + i) + "</body></html>")
            arc.add_exchange(Exchange(url=f"http://example.com/page/{i}", captured_at="2024-01-01T00:00:00Z",
                                      status=200, resp_headers=[("Content-Type", "text/html")],
                                      payload=body.encode(), session_id=sid))
    with Archive.open(target) as arc:
        victim = arc.lookup_exact("GET", "http://example.com/page/7")[0]
        stored = arc.conn.execute("SELECT data FROM blobs WHERE digest=?", (victim.response.payload_digest,)).fetchone()[0]
    raw = bytearray(target.read_bytes())
    at = raw.find(stored)
    assert at > 0 and raw.find(stored, at + 1) == -1
    raw[at + len(stored) // 2] ^= 0x01
    target.write_bytes(bytes(raw))
    result = cli_here("archive", "verify", target)
    assert result.returncode == 1
    bad = [line for line in result.stdout.splitlines() if line.startswith("BAD ")]
    assert len(bad) == 1, result.stdout
    assert f"exchange {victim.id} GET http://example.com/page/7:" in bad[0]
    assert victim.response.payload_digest in bad[0]


def _strace_works() -> bool:
    import shutil

    if not shutil.which("strace"):
        return False
    probe = subprocess.run(["strace", "-o", os.devnull, "true"], capture_output=True)
    return probe.returncode == 0  # a container without ptrace rights refuses it


def test_a_new_archive_is_on_disk_before_and_after_its_rename(samples, tmp_path):
    """A power cut cannot be caused in a test; what it would lose can be seen in the system calls
    (strace, a Debian package the set-up installs): the new archive's file is synced before it is
    renamed into place, and its folder after, so that neither its bytes nor its name can be lost
    once the command has said it is done. Both for `archive import` and `archive pack -o`."""
    if not _strace_works():
        pytest.skip("strace is missing or may not trace here (no ptrace rights)")
    target, packed = tmp_path / "a.wfz", tmp_path / "p.wfz"
    for args, final in ((["archive", "import", str(samples / "example.warc.gz"), "--to", str(target)], target),
                        (["archive", "pack", str(target), "-o", str(packed)], packed)):
        log = tmp_path / f"{final.name}.strace"
        subprocess.run(["strace", "-f", "-e", "trace=openat,fsync,fdatasync,rename,renameat2", "-o", str(log),
                        sys.executable, "-m", "webfreeze", *args], check=True, capture_output=True)
        calls = [line.split(None, 1)[1] for line in log.read_text().splitlines() if " " in line]
        renamed = [i for i, c in enumerate(calls) if c.startswith("rename") and f"{final.name}\")" in c]
        assert len(renamed) == 1, calls[-20:]
        r = renamed[0]
        paths, synced = {}, []  # what each descriptor was opened on; (call index, path) of each sync
        for i, c in enumerate(calls):
            if c.startswith("openat(") and c.rsplit("= ", 1)[-1].split()[0].isdigit():
                paths[c.rsplit("= ", 1)[1].split()[0]] = c.split('"')[1]
            elif c.startswith(("fsync(", "fdatasync(")):
                # (the descriptor: "fsync(5) = 0", or "fsync(5 <unfinished ...>" when another thread's
                # call came in between, which strace -f then shows resumed on a line of its own)
                synced.append((i, paths.get(c[c.index("(") + 1:].split(")")[0].split()[0])))
        partial = f".{final.name}.partial-"
        assert [p for i, p in synced if i < r and p and os.path.basename(p).startswith(partial)
                and not p.endswith(("-wal", "-shm", "-journal"))], calls[max(0, r - 20):r + 1]
        assert [p for i, p in synced if i > r and p in (str(final.parent), ".")], calls[r:]
