"""Import throughput vs ``warcio index`` over the same file.

The anchor is warcio's ``Indexer`` (what the ``warcio index`` CLI runs), in-process, with the CLI's
default fields and its output sent to /dev/null. Ours is ``import_files`` into a fresh archive
(create, read, verify digests, compress, index, commit, checkpoint) - strictly more work than
indexing. (The old goal of >= 1x ``warcio index`` is retired: that anchor does less work than an
import must; the rows are reported without a goal.) MB/s are compressed input bytes per second; each figure
is the median of several runs after one untimed warm-up.
"""

from __future__ import annotations

import gzip
import math
import os
import time
from pathlib import Path
from types import SimpleNamespace

from warcio.checker import Checker
from warcio.indexer import Indexer

from . import Context, Row, console, median_time, remove_archive_files
from .corpus import five_crawls

NAME = "import_speed"
TITLE = "Import throughput vs warcio index"
CLI_FIELDS = "offset,warc-type,warc-target-uri"  # `warcio index` defaults
# The same CLI asked for HTTP fields parses every HTTP header block too, as an import must.
HTTP_FIELDS = CLI_FIELDS + ",http:status,http:content-type"
TARGET_SECONDS = 2.5  # per side and file: enough runs for a stable median


def _warcio_index(path: Path, fields: str = CLI_FIELDS) -> None:
    Indexer(fields, [str(path)], os.devnull).process_all()


def _warcio_check(path: Path) -> None:
    """What ``warcio check`` runs: every record read and its block and payload digests verified
    (part of what an import does; it neither hashes for storage nor compresses nor writes)."""
    if Checker(SimpleNamespace(inputs=[str(path)], verbose=False)).process_all() != 0:
        raise RuntimeError(f"warcio check found problems in {path}")


def _repeats(seconds_per_run: float) -> int:
    return max(3, min(25, math.ceil(TARGET_SECONDS / max(seconds_per_run, 1e-6))))


def _measure(ctx: Context, label: str, path: Path) -> tuple[list[Row], dict]:
    from webfreeze.archives.importer import import_files

    target = ctx.scratch / "import-speed.wfa"
    size = path.stat().st_size

    def reset() -> None:
        remove_archive_files(target)

    def ours() -> None:
        import_files(target, [path])

    # Warm-up (imports, page cache), which also tells how many runs fit the time budget.
    t0 = time.perf_counter()
    _warcio_index(path)
    t_w = time.perf_counter() - t0
    reset()
    t0 = time.perf_counter()
    ours()
    t_o = time.perf_counter() - t0

    anchor_s, anchor_runs = median_time(lambda: _warcio_index(path), _repeats(t_w), label=f"warcio index {label}")
    http_s, http_runs = median_time(lambda: _warcio_index(path, HTTP_FIELDS), _repeats(t_w),
                                    label=f"warcio index -f ...http:status {label}")
    check_s, check_runs = median_time(lambda: _warcio_check(path), _repeats(t_w), label=f"warcio check {label}")
    ours_s, ours_runs = median_time(ours, _repeats(t_o), setup=reset, label=f"import_files {label}")
    reset()
    with gzip.open(path, "rb") as fh:
        raw = sum(len(c) for c in iter(lambda: fh.read(1 << 20), b""))
    rows = [
        Row("2 import", f"{label} ({size / 1e6:.1f} MB gz)", size / ours_s / 1e6, size / anchor_s / 1e6,
            "warcio index", "MB/s", "higher"),
        Row("2 import", f"{label}, vs index with HTTP fields", size / ours_s / 1e6, size / http_s / 1e6,
            "warcio index -f +http", "MB/s", "higher", note="anchor parses HTTP headers too"),
        Row("2 import", f"{label}, vs digest check", size / ours_s / 1e6, size / check_s / 1e6,
            "warcio check", "MB/s", "higher", note="anchor verifies every digest too"),
    ]
    detail = {"file": str(path), "bytes": size, "uncompressed_bytes": raw,
              "warcio_index_s": anchor_runs, "warcio_index_http_s": http_runs, "warcio_check_s": check_runs,
              "import_files_s": ours_runs,
              "warcio_index_median_s": anchor_s, "warcio_check_median_s": check_s, "import_files_median_s": ours_s}
    return rows, detail


def run(ctx: Context) -> list[Row]:
    from webfreeze.samples import pywb_sample_archive

    iana = pywb_sample_archive() / "warcs" / "iana.warc.gz"
    crawl = five_crawls(ctx.out)[0]
    rows, details = [], {}
    for label, path in [("iana.warc.gz", iana), ("crawl-1.warc.gz", crawl)]:
        console.print(f"  timing {label} ...")
        measured, detail = _measure(ctx, label, path)
        rows.extend(measured)
        details[label] = detail
    ctx.details[NAME] = details
    return rows
