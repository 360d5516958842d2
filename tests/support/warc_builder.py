"""Small WARC files written here by warcio, for tests that need an archive's input of a known shape."""

from __future__ import annotations

import io

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter


def write_warc(path, records, gz=True):
    """Write ``records``, (url, body) pairs, as HTML response records to ``path`` (gzipped per record)."""
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=gz)
        for url, body in records:
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html"), ("Content-Length", str(len(body)))],
                                    protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body),
                                                          length=len(body), http_headers=http))
