"""WACZ (Web Archive Collection Zipped, 1.1.1): checked reading and writing.

Reading trusts nothing: every member path is checked for escapes, every member's size against its
compressed size (zip bombs), and every resource listed in ``datapackage.json`` against its
declared SHA-256 and size before a byte of it is imported.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from datetime import datetime
from pathlib import PurePosixPath

from .errors import BadInput
from .timeutil import normalize_time
from .warc_import import BOMB_MIN_BYTES, BOMB_RATIO, CHUNK

WACZ_VERSION = "1.1.1"


def _safe_name(name: str) -> bool:
    p = PurePosixPath(name)
    return not (name.startswith("/") or "\\" in name or ".." in p.parts or (p.parts and ":" in p.parts[0]))


def open_checked(path: str) -> tuple[zipfile.ZipFile, dict]:
    """Open a WACZ, verify it, and return ``(zipfile, datapackage)``; raises BadInput otherwise."""
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise BadInput("not a WACZ file (not a valid zip archive)") from None
    try:
        infos = {}
        for info in zf.infolist():
            if not _safe_name(info.filename):
                raise BadInput(f"unsafe member path {info.filename!r} (escapes the package)")
            if info.file_size > BOMB_MIN_BYTES and info.file_size > BOMB_RATIO * max(info.compress_size, 1):
                raise BadInput(
                    f"member {info.filename!r} expands {info.compress_size} bytes to {info.file_size}: "
                    "refusing a likely zip bomb"
                )
            infos[info.filename] = info
        if "datapackage.json" not in infos:
            raise BadInput("not a valid WACZ: datapackage.json is missing")
        try:
            package = json.loads(zf.read("datapackage.json"))
        except ValueError:
            raise BadInput("not a valid WACZ: datapackage.json is not JSON") from None
        if not isinstance(package, dict) or not isinstance(package.get("resources"), list):
            raise BadInput("not a valid WACZ: datapackage.json has no resources list")
        if "datapackage-digest.json" in infos:
            _check_digest_file(zf)
        for res in package["resources"]:
            _check_resource(zf, infos, res)
        return zf, package
    except BaseException:
        zf.close()
        raise


def _check_digest_file(zf: zipfile.ZipFile) -> None:
    try:
        meta = json.loads(zf.read("datapackage-digest.json"))
        declared = meta["hash"]
    except (ValueError, KeyError, TypeError):
        raise BadInput("not a valid WACZ: datapackage-digest.json is malformed") from None
    algo, _, value = str(declared).partition(":")
    if algo not in ("sha256", "md5"):
        raise BadInput(f"datapackage-digest.json uses unsupported hash {algo!r}")
    actual = hashlib.new(algo, zf.read("datapackage.json")).hexdigest()
    if actual != value:
        raise BadInput("datapackage.json does not match its digest in datapackage-digest.json")


def _check_resource(zf: zipfile.ZipFile, infos: dict, res) -> None:
    if not isinstance(res, dict) or not isinstance(res.get("path"), str):
        raise BadInput("not a valid WACZ: a datapackage resource has no path")
    name = res["path"]
    if not _safe_name(name):
        raise BadInput(f"unsafe resource path {name!r} in datapackage.json")
    if name not in infos:
        raise BadInput(f"datapackage.json lists {name!r}, which is not in the package")
    declared = str(res.get("hash", ""))
    algo, _, value = declared.partition(":")
    if algo not in ("sha256", "md5") or not value:
        raise BadInput(f"resource {name!r} has no usable hash in datapackage.json")
    h = hashlib.new(algo)
    size = 0
    with zf.open(name) as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            h.update(chunk)
            size += len(chunk)
    if h.hexdigest() != value:
        raise BadInput(f"resource {name!r} does not match its {algo} hash in datapackage.json")
    if "bytes" in res and res["bytes"] != size:
        raise BadInput(f"resource {name!r} is {size} bytes, datapackage.json says {res['bytes']}")


def warc_members(package: dict) -> list[str]:
    """The WARC files a checked package holds, in datapackage order."""
    return [r["path"] for r in package["resources"]
            if r["path"].startswith("archive/") and r["path"].endswith((".warc", ".warc.gz"))]


def read_pages(zf: zipfile.ZipFile, package: dict) -> list[dict]:
    """Page entries from ``pages/*.jsonl`` (url, ts, title), skipping the header line."""
    pages = []
    for r in package["resources"]:
        path = r["path"]
        if not (path.startswith("pages/") and path.endswith(".jsonl")):
            continue
        for line in zf.read(path).decode("utf-8", "replace").splitlines():
            line = line.strip()
            if not line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                raise BadInput(f"{path}: a line is not JSON") from None
            if isinstance(entry, dict) and "url" in entry:
                pages.append(entry)
    return pages


# ------------------------------------------------------------------------------------ writing
def write_wacz(warc_path: str, pages: list[dict], out_path: str, *, title: str, description: str,
               software: str, created: str) -> None:
    """Package an exported WARC as a WACZ: WARC, sorted CDXJ, pages.jsonl and datapackage.json."""
    from cdxj_indexer import CDXJIndexer

    workdir = tempfile.mkdtemp(prefix="webfreeze-wacz-")
    try:
        cdxj = os.path.join(workdir, "index.cdxj")
        CDXJIndexer(output=cdxj, inputs=[warc_path], sort=True, post_append=True,
                    filename="data.warc.gz").process_all()
        pages_lines = [json.dumps({"format": "json-pages-1.0", "id": "pages", "title": "All Pages"})]
        for i, p in enumerate(pages):
            entry = {"id": p.get("id") or f"page-{i}", "url": p["url"], "ts": p["ts"]}
            if p.get("title"):
                entry["title"] = p["title"]
            pages_lines.append(json.dumps(entry, sort_keys=True))
        pages_file = os.path.join(workdir, "pages.jsonl")
        with open(pages_file, "w", encoding="utf-8") as fh:
            fh.write("\n".join(pages_lines) + "\n")
        members = [
            ("archive/data.warc.gz", warc_path),
            ("indexes/index.cdxj", cdxj),
            ("pages/pages.jsonl", pages_file),
        ]
        resources = []
        for name, src in members:
            h = hashlib.sha256()
            with open(src, "rb") as fh:
                for chunk in iter(lambda: fh.read(CHUNK), b""):
                    h.update(chunk)
            resources.append({"name": os.path.basename(name), "path": name,
                              "hash": f"sha256:{h.hexdigest()}", "bytes": os.path.getsize(src)})
        package = {
            "profile": "data-package",
            "wacz_version": WACZ_VERSION,
            "title": title,
            "description": description,
            "created": created,
            "modified": created,
            "software": software,
            "mainPageURL": pages[0]["url"] if pages else None,
            "mainPageDate": pages[0]["ts"] if pages else None,
            "resources": resources,
        }
        package = {k: v for k, v in package.items() if v is not None}
        package_bytes = json.dumps(package, indent=2).encode("utf-8")
        digest = {"path": "datapackage.json", "hash": f"sha256:{hashlib.sha256(package_bytes).hexdigest()}"}
        stamp = datetime.strptime(created[:19], "%Y-%m-%dT%H:%M:%S").timetuple()[:6]
        stamp = max(stamp, (1980, 1, 1, 0, 0, 0))  # the zip format starts in 1980

        def entry(name: str, compress: int) -> zipfile.ZipInfo:
            info = zipfile.ZipInfo(name, date_time=stamp)  # fixed times: the same archive, the same bytes
            info.compress_type = compress
            info.external_attr = 0o644 << 16
            return info

        with zipfile.ZipFile(out_path, "w", allowZip64=True) as zf:
            # WARCs are already gzip-compressed; store them so replay tools can seek into them.
            for name, src in members:
                compress = zipfile.ZIP_STORED if name.endswith(".gz") else zipfile.ZIP_DEFLATED
                with open(src, "rb") as fh, zf.open(entry(name, compress), "w", force_zip64=True) as dst:
                    for chunk in iter(lambda: fh.read(CHUNK), b""):
                        dst.write(chunk)
            zf.writestr(entry("datapackage.json", zipfile.ZIP_DEFLATED), package_bytes)
            zf.writestr(entry("datapackage-digest.json", zipfile.ZIP_DEFLATED), json.dumps(digest, indent=2))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def page_entry(url: str, captured_at: str, title: str | None, page_id: str) -> dict:
    """A pages.jsonl entry for a stored page (ISO timestamp, as py-wacz and ReplayWeb.page read it)."""
    ts = normalize_time(captured_at)
    return {"id": page_id, "url": url, "ts": ts.replace(".000000Z", "Z"), "title": title or ""}
