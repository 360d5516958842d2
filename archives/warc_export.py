"""``archive export``: write an archive as WARC 1.1 (gzip per record) or as a WACZ.

Each exchange becomes a ``response`` record (or ``resource`` for captures without an HTTP envelope)
followed by its ``request`` record, linked by WARC-Concurrent-To, so warcio, pywb and py-wacz read
it as they would a crawler's output. A payload already written once is written again as an
identical-payload-digest ``revisit`` record pointing at the first, so deduplication survives export. Payloads whose
transfer coding was removed on capture are
framed again as a single chunk, so the HTTP headers stay true to the original response.
"""

from __future__ import annotations

import io
import os
import tempfile
import uuid
from collections.abc import Callable

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from webfreeze.common.files import check_output_file, replacing
from webfreeze.common.http import header_value

from .errors import ArchiveError
from .store import Archive, extra_of
from .timeutil import normalize_time, to_warc_date
from .verify import require_intact
from .wacz import page_entry, write_wacz
from .warc_import import OPEN_STREAM_TRUNCATED


def _chunked(body: bytes, *, ended: bool = True) -> bytes:
    """``body`` in HTTP's chunked coding; not ``ended`` (an event stream still coming when recorded),
    without the last chunk: the record holds what had come when the connection went."""
    last = b"0\r\n\r\n" if ended else b""
    if not body:
        return last
    return b"%x\r\n" % len(body) + body + b"\r\n" + last


def _request_target(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def write_warc(archive: Archive, fh, *, progress: Callable[[int], None] | None = None) -> int:
    """Write every exchange of ``archive`` to the binary file ``fh`` as gzipped WARC 1.1."""
    writer = WARCWriter(fh, gzip=True, warc_version="WARC/1.1")
    meta = archive.meta()
    # Exports are byte-reproducible: record ids and the warcinfo date derive from the archive (its
    # creation time, which `archive pack` keeps: a packed copy, whose headers are stored another way
    # and say the same, exports the same; a redacted copy is a new archive, with new ids).
    namespace = uuid.uuid5(uuid.NAMESPACE_URL, f"webfreeze:{meta.get('created_at')}")

    def record_id(*parts) -> str:
        return f"<urn:uuid:{uuid.uuid5(namespace, '/'.join(map(str, parts)))}>"

    info = {
        "software": f"webfreeze {meta.get('tool_version', '')}".strip(),
        "format": "WARC File Format 1.1",
        "description": meta.get("description") or "",
        "creator": meta.get("creator") or "",
        "license": meta.get("license") or "",
    }
    warcinfo = writer.create_warcinfo_record("data.warc.gz", {k: v for k, v in info.items() if v})
    warcinfo.rec_headers.replace_header("WARC-Record-ID", record_id("warcinfo"))
    warcinfo.rec_headers.replace_header("WARC-Date", to_warc_date(normalize_time(meta.get("created_at") or "1970")))
    writer.write_record(warcinfo)
    count = 0
    written: dict[str, tuple[str, str, str]] = {}  # blob digest -> (WARC payload digest, URL, date) of its record
    for row in archive.exchange_rows():
        payload = archive.get_blob(row["payload"], verify=True)
        extra = extra_of(row)
        date = to_warc_date(row["captured_at"])
        warc_headers = {"WARC-Date": date, "WARC-Record-ID": record_id(row["id"], "response")}
        if extra.get("ip"):
            warc_headers["WARC-IP-Address"] = extra["ip"]
        if extra.get("open_stream"):  # (events still coming when recorded: what had come, WARC 1.1 5.13)
            warc_headers["WARC-Truncated"] = OPEN_STREAM_TRUNCATED
        if row["kind"] == "resource":
            # the last Content-Type wins, as it did when this was a loop over all of them
            ctype = header_value(reversed(archive.row_headers(row, "resp_headers")), "content-type",
                                 row["mime"] or "application/octet-stream")
            rec = writer.create_warc_record(row["url"], "resource", payload=io.BytesIO(payload),
                                            length=len(payload), warc_content_type=ctype,
                                            warc_headers_dict=warc_headers)
            writer.write_record(rec)
            count += 1
            if progress:
                progress(1)
            continue
        resp_headers = archive.row_headers(row, "resp_headers")
        statusline = f"{row['status']} {row['reason'] or ''}".rstrip()
        http = _HttpHeaders(statusline, resp_headers, protocol=row["http_version"] or "HTTP/1.1")
        first = written.get(row["payload"])
        if first is not None and row["payload_size"] > 0:
            # Same payload as an earlier record: an identical-payload-digest revisit, as crawlers write.
            resp = writer.create_revisit_record(row["url"], first[0], first[1], first[2], http_headers=http,
                                                warc_headers_dict=warc_headers)
        else:
            body = _chunked(payload, ended=not extra.get("open_stream")) if extra.get("dechunked") else payload
            resp = writer.create_warc_record(row["url"], "response", payload=io.BytesIO(body), length=len(body),
                                             http_headers=http, warc_headers_dict=warc_headers)
        writer.write_record(resp)
        if first is None:
            written[row["payload"]] = (resp.rec_headers.get_header("WARC-Payload-Digest"), row["url"], date)
        if row["req_headers"] is not None:
            req_body = archive.get_blob(row["req_body"], verify=True) if row["req_body"] else b""
            req_line = f"{row['method']} {_request_target(row['url'])} HTTP/1.1"
            req_http = _HttpHeaders(req_line, archive.row_headers(row, "req_headers"), protocol="HTTP/1.1",
                                        is_http_request=True)
            req = writer.create_warc_record(
                row["url"], "request", payload=io.BytesIO(req_body), length=len(req_body), http_headers=req_http,
                warc_headers_dict={"WARC-Date": date, "WARC-Record-ID": record_id(row["id"], "request"),
                                   "WARC-Concurrent-To": resp.rec_headers.get_header("WARC-Record-ID")},
            )
            writer.write_record(req)
        count += 1
        if progress:
            progress(1)
    return count


class _HttpHeaders(StatusAndHeaders):
    """HTTP headers as written: warcio percent-encodes values that are not ASCII (RFC 8187), but a
    header *name* that is not ASCII (an invalid line the import kept) made it fail. Such a block is
    written as UTF-8, which warcio reads back first: the same header comes out on import."""

    def to_ascii_bytes(self, filter_func=None):
        try:
            return super().to_ascii_bytes(filter_func)
        except UnicodeEncodeError:
            return self.to_str(filter_func).encode("utf-8") + b"\r\n"

def export(archive_path: str | os.PathLike, out: str | os.PathLike, fmt: str,
           progress: Callable[[int], None] | None = None, *, overwrite: bool = False, verified: bool = False) -> int:
    """Export to ``out`` atomically (written beside it, renamed into place when complete).

    An existing ``out`` is replaced only with ``overwrite``, and never when it is the archive."""
    # never the archive; an existing file only with overwrite; never a directory or a device (the
    # export is renamed into place: it would replace them)
    out = check_output_file(out, overwrite=overwrite, protect=[archive_path])
    if out.is_symlink():  # written through: the file the link names is made or replaced, the link stays
        out = check_output_file(os.path.realpath(out), overwrite=overwrite, protect=[archive_path])
    # the export writes fresh WARC digests over the bytes it reads: they must be the archive's own
    if not verified:  # (``verified``: the caller ran the same checks just before)
        require_intact(archive_path, action="nothing was exported")
    with Archive.open(archive_path) as arc, replacing(out) as tmp:
        if fmt == "warc":
            with open(tmp, "wb") as fh:
                count = write_warc(arc, fh, progress=progress)
        elif fmt == "wacz":
            count = _export_wacz(arc, tmp, progress)
        else:
            raise ArchiveError(f"unknown export format {fmt!r}")
    return count


def _export_wacz(arc: Archive, tmp: str, progress) -> int:
    fd, warc_tmp = tempfile.mkstemp(prefix="webfreeze-export-", suffix=".warc.gz")
    try:
        with os.fdopen(fd, "wb") as fh:
            count = write_warc(arc, fh, progress=progress)
        meta = arc.meta()
        pages = [page_entry(p["url"], p["captured_at"], p["title"], f"p{p['id']}") for p in arc.page_rows()]
        if not pages:
            # No page records (an imported crawl): list the HTML documents as the pages.
            for row in arc.exchange_rows("method='GET' AND status=200 AND mime IN ('text/html','application/xhtml+xml')"):
                pages.append(page_entry(row["url"], row["captured_at"], None, f"e{row['id']}"))
        created = to_warc_date(normalize_time(meta.get("created_at") or "1970"))
        write_wacz(warc_tmp, pages, tmp, title=meta.get("description") or arc.path.stem,
                   description=meta.get("description") or "", software=f"webfreeze {meta.get('tool_version', '')}",
                   created=created.split(".")[0].rstrip("Z") + "Z")
        return count
    finally:
        os.unlink(warc_tmp)
