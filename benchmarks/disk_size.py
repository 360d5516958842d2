"""Bytes on disk: an archive vs the same content as WARC.gz.

(a) pywb's ``iana.warc.gz`` imported into a fresh archive; (b) five weekly crawls of one site
(~10% of pages change between crawls, see ``corpus``) imported into one archive, against the sum
of the five WARC.gz files. Each archive is measured twice: as ``import_files`` leaves it (fast
capture-time compression) and after ``archive pack`` (the form one shares: zstd 19, deltas against
similar blobs, an archive-specific header dictionary). Bytes = the SQLite file plus its -wal file,
if one is left. The goals apply to the packed form, which is what is compared with a WARC.gz
someone would share.
"""

from __future__ import annotations

from pathlib import Path

from . import Context, Row, archive_bytes, console
from .corpus import five_crawls

NAME = "disk_size"
TITLE = "Bytes on disk vs WARC.gz"


def _breakdown(path: Path) -> dict:
    """Where the archive's bytes go (for the people tuning compression)."""
    from webfreeze.archives.maintenance import storage

    out = storage(path)  # only the archives package knows the archive's tables
    del out["screenshot_bytes"], out["screenshot_bytes_stored"]
    return out


def _import(ctx: Context, name: str, sources: list[Path]) -> tuple[Path, int]:
    from webfreeze.archives.importer import import_files

    target = ctx.fresh_path(name)
    import_files(target, sources)
    return target, archive_bytes(target)


def _pack(ctx: Context, name: str, src: Path) -> tuple[Path, int]:
    from webfreeze.archives.maintenance import pack

    target = ctx.fresh_path(name)
    pack(src, target)
    return target, archive_bytes(target)


def run(ctx: Context) -> list[Row]:
    from webfreeze.samples import pywb_sample_archive

    rows: list[Row] = []
    details: dict = {}

    iana = pywb_sample_archive() / "warcs" / "iana.warc.gz"
    console.print("  importing iana.warc.gz ...")
    arc, ours = _import(ctx, "iana.wfa", [iana])
    details["iana"] = {"warc_gz_bytes": iana.stat().st_size, "archive_bytes": ours, "breakdown": _breakdown(arc)}
    rows.append(Row("1a size", "pywb iana.warc.gz, as imported", ours, iana.stat().st_size, "iana.warc.gz",
                    "bytes", "lower"))
    console.print("  packing it ...")
    packed, ours_packed = _pack(ctx, "iana-packed.wfa", arc)
    details["iana"]["packed_bytes"] = ours_packed
    details["iana"]["breakdown_packed"] = _breakdown(packed)
    rows.append(Row("1a size", "pywb iana.warc.gz, packed", ours_packed, iana.stat().st_size, "iana.warc.gz",
                    "bytes", "lower", 0.7))

    crawls = five_crawls(ctx.out)
    warc_total = sum(f.stat().st_size for f in crawls)
    rows.append(Row("1b size", "5 crawls as WARC.gz (anchor)", warc_total, warc_total, "sum of 5 WARC.gz",
                    "bytes", "lower", note="the anchor itself"))

    console.print("  importing the first crawl alone ...")
    arc1, one = _import(ctx, "crawl1.wfa", crawls[:1])
    rows.append(Row("1b size", "1 crawl (compression only)", one, crawls[0].stat().st_size, "crawl-1 WARC.gz",
                    "bytes", "lower", note="no cross-crawl dedup possible"))

    console.print("  importing all five crawls into one archive ...")
    arc5, five = _import(ctx, "crawls5.wfa", crawls)
    rows.append(Row("1b size", "5 crawls, ~10% pages change, as imported", five, warc_total, "sum of 5 WARC.gz",
                    "bytes", "lower"))
    console.print("  packing the five-crawl archive ...")
    packed5, five_packed = _pack(ctx, "crawls5-packed.wfa", arc5)
    rows.append(Row("1b size", "5 crawls, ~10% pages change, packed", five_packed, warc_total, "sum of 5 WARC.gz",
                    "bytes", "lower", 0.3))
    details["five_crawls"] = {
        "warc_gz_bytes": [f.stat().st_size for f in crawls],
        "archive_bytes_one_crawl": one,
        "archive_bytes_five_crawls": five,
        "archive_bytes_five_crawls_packed": five_packed,
        "breakdown_five_crawls_packed": _breakdown(packed5),
        "breakdown_one_crawl": _breakdown(arc1),
        "breakdown_five_crawls": _breakdown(arc5),
    }
    ctx.details[NAME] = details
    return rows
