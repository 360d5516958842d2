"""The gzip members of a per-record gzip WARC, inflated on worker threads.

A WARC is normally written with every record compressed as a gzip member of its own, and
inflating is the largest single cost of reading one. Neither warcio nor FastWARC releases Python's
GIL while inflating, so an import reading through them inflates on one core. Here the file is
memory-mapped, the main thread only cuts it into batches at member starts (a gzip header whose
first inflated bytes read ``WARC/``), and worker threads inflate each batch's members with the GIL
released: ISA-L's inflate (the ``isal`` package) when it is installed, zlib otherwise.

Inside a batch every member's end is told by the inflater itself (a gzip member carries its own
end), so bytes that merely look like a gzip header inside compressed data never split a record:
the member is simply fed on until it ends. Anything unusual (a corrupt or truncated member, bytes
between members, a record larger than ``limit``) raises :class:`Unusual`, and the caller reads the
file the careful way instead.
"""

from __future__ import annotations

import mmap
import zlib
from collections.abc import Iterator

try:  # ISA-L inflates about twice as fast as zlib; the results are the same bytes
    from isal import isal_zlib as _inflate_lib
except ImportError:  # pragma: no cover - isal is a base dependency; zlib is the portable fallback
    _inflate_lib = zlib

GZIP_MAGIC = b"\x1f\x8b\x08"  # ID1, ID2 and CM=deflate: how every gzip member starts
BATCH_BYTES = 256 << 10  # compressed bytes per batch: a few dozen typical records
_PROBE_BYTES = 4096  # enough compressed bytes to inflate a record's first five bytes


class Unusual(Exception):
    """The file is not a clean sequence of gzip members (the message says what was seen). An
    internal signal, always caught (not a :class:`WebfreezeError`: one that escaped would be a bug)."""


def open_mapped(fh) -> mmap.mmap:
    """The whole file, memory-mapped read-only (the workers read their batches from it)."""
    return mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)


def _starts_a_record(buf, pos: int) -> bool:
    """Whether a gzip member starting at ``pos`` inflates to a WARC record's first bytes."""
    try:
        return zlib.decompressobj(31).decompress(buf[pos:pos + _PROBE_BYTES], 5) == b"WARC/"
    except zlib.error:
        return False


def batches(buf, size: int, batch_bytes: int = BATCH_BYTES) -> Iterator[tuple[int, int]]:
    """``(start, end)`` byte ranges covering the file, each starting at a member that begins a record.

    A cut is only ever placed where a record starts, so a batch's members end inside it; were a cut
    wrong all the same, the member before it would not end there and :func:`inflate` says so."""
    start = 0
    while start < size:
        end = size
        probe = start + batch_bytes
        while probe < size:
            found = buf.find(GZIP_MAGIC, probe)
            if found < 0:
                break
            if _starts_a_record(buf, found):
                end = found
                break
            probe = found + 1
        yield start, end
        start = end


def check_complete(fh, chunk: int = 1 << 20) -> None:
    """Raise :class:`Unusual` when the gzip stream in ``fh`` (read from its start) ends inside a
    member or holds a member that does not inflate; the message says which member, by byte offset.

    warcio reads a per-record gzip file member by member and stops quietly where the file does: a
    last member cut within its first bytes (which inflate to nothing yet) or inside its trailer,
    or a damaged member, can pass unnoticed. This walks every member to its end instead (inflating
    into a buffer that is thrown away). Anything that does not start like a gzip member (a plain
    file, other bytes after the last member) is left to the reader's own verdict. ``fh`` must be
    seekable.

    zlib, not ISA-L, inflates here: ISA-L fails on some gzip headers (FHCRC; FEXTRA with a name)
    when they arrive split over two calls, as they may at the edge of a read. A member is fed a
    few KiB at first, then more while it goes on, so that what is left over after each member's
    end (copied by zlib) stays in proportion to the member."""
    fh.seek(0)
    buf = b""
    i = 0  # where the next unread byte is in buf
    at = 0  # the file offset of buf[0]
    d = None
    start = 0  # the file offset of the member being inflated
    feed = 0
    ended = False  # the whole file is read into buf
    while True:
        if len(buf) - i < len(GZIP_MAGIC) and not ended:  # too little left to tell a member start
            more = fh.read(chunk)
            at += i
            buf, i = buf[i:] + more, 0
            ended = not more
            continue
        if i == len(buf):  # the end of the file
            if d is not None:
                try:
                    d.flush()  # whatever the output cap held back, which may include the member's end
                except zlib.error as exc:
                    raise Unusual(f"corrupt gzip data in the member at byte {start}: {exc}") from None
                if not d.eof:
                    raise Unusual(f"the file ends inside the gzip member at byte {start}: it is truncated")
            return
        if d is None:
            head = buf[i:i + len(GZIP_MAGIC)]
            if head != GZIP_MAGIC:
                if ended and GZIP_MAGIC.startswith(head):  # the file ends inside a member's first bytes
                    raise Unusual(f"the file ends inside the gzip member at byte {at + i}: it is truncated")
                return  # not gzip from here on: the reader's call
            d = zlib.decompressobj(31)
            start = at + i
            feed = 4096
        piece = memoryview(buf)[i:i + feed]
        try:
            d.decompress(piece, chunk)
        except zlib.error as exc:
            raise Unusual(f"corrupt gzip data in the member at byte {start}: {exc}") from None
        finally:
            piece.release()
        n = min(feed, len(buf) - i)
        if d.eof:
            i += n - len(d.unused_data)
            d = None
        else:
            i += n - len(d.unconsumed_tail)
            feed = min(feed * 2, 256 << 10)


def inflate(buf, start: int, end: int, limit: int) -> list[bytes]:
    """The inflated members in ``buf[start:end]``, in order; raises :class:`Unusual`.

    Runs on a worker thread: the inflating happens with the GIL released."""
    view = memoryview(buf)
    try:
        members = []
        pos = start
        while pos < end:
            d = _inflate_lib.decompressobj(31)
            parts = []
            produced = 0
            fed_to = pos
            while True:
                # feed up to the next place that looks like a member start (or the batch end)
                nxt = buf.find(GZIP_MAGIC, fed_to + 1, end)
                stop = end if nxt < 0 else nxt
                try:
                    out = d.decompress(view[fed_to:stop], limit - produced)
                except Exception as exc:  # zlib.error, isal's IsalError
                    raise Unusual(f"corrupt gzip member at byte {pos}: {exc}") from None
                parts.append(out)
                produced += len(out)
                fed_to = stop
                if d.eof:
                    if d.unused_data:
                        raise Unusual(f"bytes after the gzip member at byte {pos}")
                    break
                if produced >= limit:
                    raise Unusual(f"the record at byte {pos} is larger than {limit} bytes")
                if stop >= end:
                    raise Unusual(f"the gzip member at byte {pos} does not end before byte {end}")
            members.append(parts[0] if len(parts) == 1 else b"".join(parts))
            pos = fed_to
        return members
    finally:
        view.release()
