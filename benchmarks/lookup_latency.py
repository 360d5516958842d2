"""Lookup latency on a 100,000-exchange archive vs pywb's CDXJ index reader.

The archive holds 100,000 small synthetic exchanges (~50 hosts, varied paths and queries, ~5% form
POSTs, recaptures over two years), built once with ``Archive.create`` in one transaction and cached
under ``bench-out/`` keyed by a data version, the archive format version and a digest of the
archive code (so a change to the store rebuilds it). Alongside it the same 100,000 captures are
written as a per-record-gzip WARC (warcio) with a sorted CDXJ index, which is what pywb serves from.

For 2,000 seeded random queries of each kind (after 200 untimed warm-up queries) we time, per call:

- exact: ``Archive.lookup_exact(method, url, body_key)`` vs pywb ``FileIndexSource`` exact range
  (``key`` .. ``key!``, binary search in the CDXJ file) filtered on method and body key;
- SURT prefix: ``Archive.lookup_surt(prefix, prefix=True, limit=50)`` vs the pywb prefix range, first 50;
- closest: ``Archive.closest(url, when)`` vs the pywb exact range sorted by ``cdx_sort_closest``;
- payload: ``Archive.get_blob(digest)`` vs reading the record at the CDXJ offset/length from the WARC
  with warcio's ``ArcWarcRecordLoader`` (pywb's loader), handle kept open.

Both sides run in this process on the same warm page cache. Ratios are ours / pywb (lower = faster).
"""

from __future__ import annotations

import base64
import hashlib
import io
import itertools
import json
import random
import shutil
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from . import Context, Row, console, percentile, progress

NAME = "lookup_latency"
TITLE = "Lookup latency p50/p99 (100k exchanges)"
DATA_VERSION = "1"
N_EXCHANGES = 100_000
N_QUERIES = 2_000
N_WARMUP = 200
SEED = 100_000
N_HOSTS = 50
T0 = datetime(2022, 1, 1, tzinfo=timezone.utc)
SPAN_S = 2 * 365 * 86_400
_ARCHIVE_SOURCES = ("store.py", "blobs.py", "bodykey.py", "urlkey.py", "timeutil.py", "header_dictionary.py")


def _cache_key() -> str:
    import webfreeze.archives as pkg
    from webfreeze.archives.store import FORMAT_VERSION

    h = hashlib.sha256()
    folder = Path(pkg.__file__).parent
    for name in _ARCHIVE_SOURCES:
        p = folder / name
        if p.exists():
            h.update(name.encode() + b"\0" + p.read_bytes())
    return f"v{DATA_VERSION}-fmt{FORMAT_VERSION}-{h.hexdigest()[:10]}"


# --------------------------------------------------------------------------- the synthetic captures
_WORDS = ("alpha beta gamma delta news sport science tech health travel food music video photo docs api "
          "blog forum shop cart product item search results page about contact help faq policy terms user "
          "profile settings archive list view edit report data stats open source paper index feed").split()


def _hosts(rng: random.Random) -> list[str]:
    tlds = ["com", "org", "net", "edu", "io", "co.uk", "de", "fr"]
    hosts = set()
    while len(hosts) < N_HOSTS:
        name = rng.choice(_WORDS) + rng.choice(_WORDS) + (str(rng.randint(1, 99)) if rng.random() < 0.3 else "")
        hosts.add(("www." if rng.random() < 0.5 else "") + f"{name}.{rng.choice(tlds)}")
    return sorted(hosts)


def _new_url(rng: random.Random, hosts: list[str]) -> str:
    host = hosts[min(int(rng.paretovariate(1.2)) - 1, len(hosts) - 1)]  # a few big hosts, a long tail
    kind = rng.random()
    if kind < 0.45:
        depth = rng.randint(1, 4)
        path = "/" + "/".join(rng.choice(_WORDS) for _ in range(depth))
        path += rng.choice(["", "/", ".html", f"/{rng.randint(1, 99999)}", f"-{rng.randint(1, 999)}.html"])
    elif kind < 0.7:
        path = f"/{rng.choice(_WORDS)}/{rng.randint(1, 10**6)}?" + "&".join(
            f"{rng.choice(_WORDS)}={rng.randint(0, 500)}" for _ in range(rng.randint(1, 4)))
    elif kind < 0.85:
        path = f"/api/v{rng.randint(1, 3)}/{rng.choice(_WORDS)}?id={rng.getrandbits(40):x}&page={rng.randint(1, 50)}"
    else:
        ext = rng.choice(["css", "js", "png", "jpg", "woff2", "svg"])
        path = f"/static/{rng.choice(_WORDS)}/{rng.getrandbits(48):012x}.{ext}"
    return f"https://{host}{path}"


def _payload(rng: random.Random, url: str) -> bytes:
    n = rng.randint(20, 250)
    text = " ".join(rng.choice(_WORDS) for _ in range(n))
    return f"<html><head><title>{url}</title></head><body><p>{text}</p><!-- {rng.getrandbits(64):x} --></body></html>".encode()


def _captures(rng: random.Random):
    """Yield N_EXCHANGES (method, url, body, req_headers, captured_at, payload) tuples."""
    hosts = _hosts(rng)
    urls: list[tuple[str, str, bytes | None, bytes]] = []  # (method, url, body, last payload)
    for _ in range(N_EXCHANGES):
        if urls and rng.random() < 0.65:  # a recapture: often the same payload
            i = rng.randrange(len(urls))
            method, url, body, payload = urls[i]
            if rng.random() < 0.4:
                payload = _payload(rng, url)
                urls[i] = (method, url, body, payload)
        else:
            url = _new_url(rng, hosts)
            if rng.random() < 0.05:
                method, body = "POST", f"q={rng.choice(_WORDS)}&page={rng.randint(1, 9)}&lang=en".encode()
            else:
                method, body = "GET", None
            payload = _payload(rng, url)
            urls.append((method, url, body, payload))
        when = T0 + timedelta(seconds=rng.randrange(SPAN_S), microseconds=rng.randrange(10**6))
        yield method, url, body, when, payload


def _sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def _build(folder: Path) -> None:
    """Build archive.wfa, records.warc.gz, index.cdxj and queries.json in ``folder``."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from webfreeze.archives import Archive, Exchange
    from webfreeze.archives.bodykey import body_key
    from webfreeze.archives.urlkey import surt_key

    rng = random.Random(SEED)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    arc = Archive.create(tmp / "archive.wfa", description="webfreeze lookup benchmark")
    catalog = []  # per exchange: method, url, body_key, surt, iso time, digest, offset, length
    cdxj = []
    with open(tmp / "records.warc.gz", "wb") as wfh, progress() as prog:
        writer = WARCWriter(wfh, gzip=True)
        task = prog.add_task(f"building {N_EXCHANGES:,}-exchange archive + WARC/CDXJ", total=N_EXCHANGES)
        with arc.transaction():
            sid = arc.new_session("bench", source="synthetic", tool="benchmarks")
            for n, (method, url, body, when, payload) in enumerate(_captures(rng)):
                stamp = when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
                date = when.strftime("%a, %d %b %Y %H:%M:%S GMT")
                resp_headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(payload))),
                                ("Date", date), ("Server", "nginx")]
                req_headers = [("Host", url.split("/")[2]), ("User-Agent", "Mozilla/5.0"), ("Accept", "*/*")]
                if body:
                    req_headers.append(("Content-Type", "application/x-www-form-urlencoded"))
                arc.add_exchange(Exchange(url=url, captured_at=stamp, status=200, reason="OK",
                                          resp_headers=resp_headers, payload=payload, method=method,
                                          req_headers=req_headers, req_body=body, session_id=sid))
                offset = wfh.tell()
                writer.write_record(writer.create_warc_record(
                    url, "response", payload=io.BytesIO(payload), length=len(payload),
                    http_headers=StatusAndHeaders("200 OK", resp_headers, protocol="HTTP/1.1"),
                    warc_headers_dict={"WARC-Date": when.strftime("%Y-%m-%dT%H:%M:%SZ")}))
                length = wfh.tell() - offset
                bkey = body_key("application/x-www-form-urlencoded" if body else None, body)
                skey = surt_key(url)
                fields = {"url": url, "mime": "text/html", "status": "200", "digest": _sha1_b32(payload),
                          "length": str(length), "offset": str(offset), "filename": "records.warc.gz"}
                if method != "GET":
                    fields.update(method=method, requestBody=bkey)
                cdxj.append(f"{skey} {when:%Y%m%d%H%M%S} {json.dumps(fields)}\n".encode())
                catalog.append((method, url, bkey, skey, stamp, hashlib.sha256(payload).hexdigest(), offset, length))
                if n % 1000 == 999:
                    prog.advance(task, 1000)
            arc.end_session(sid)
    arc.close()
    cdxj.sort()
    with open(tmp / "index.cdxj", "wb") as fh:
        fh.writelines(cdxj)
    (tmp / "queries.json").write_text(json.dumps(_queries(catalog)))
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)


def _prefix_of(skey: str, rng: random.Random) -> str:
    host, sep, path = skey.partition(")/")
    if not sep or rng.random() < 0.3:
        return host + ")/" if sep else skey
    parts = path.split("/")
    keep = rng.randint(1, max(1, len(parts) - 1))
    return host + ")/" + "/".join(parts[:keep]) + ("/" if keep < len(parts) else "")


def _queries(catalog: list[tuple]) -> dict:
    rng = random.Random(SEED + 1)
    n = N_QUERIES + N_WARMUP
    pick = lambda: [catalog[i] for i in rng.sample(range(len(catalog)), n)]  # noqa: E731
    return {
        "exact": [(c[0], c[1], c[2], c[3]) for c in pick()],
        "prefix": [_prefix_of(c[3], rng) for c in pick()],
        "closest": [(c[1], (T0 + timedelta(seconds=rng.randrange(SPAN_S))).strftime("%Y%m%d%H%M%S")) for c in pick()],
        "blob": [(c[5], c[6], c[7]) for c in pick()],
    }


def dataset(out: Path) -> Path:
    """The cached benchmark data folder, built when missing (older versions are removed)."""
    key = _cache_key()
    folder = out / f"lookup-{N_EXCHANGES // 1000}k-{key}"
    if (folder / "queries.json").exists():
        console.print(f"  reusing cached {folder.name}")
        return folder
    for old in out.glob(f"lookup-{N_EXCHANGES // 1000}k-*"):
        shutil.rmtree(old, ignore_errors=True)
    console.print(f"  building {folder.name} (cached for later runs) ...")
    t0 = time.perf_counter()
    _build(folder)
    console.print(f"  built in {time.perf_counter() - t0:.0f} s")
    return folder


# --------------------------------------------------------------------------- timing
def _time_each(label: str, fn, args: list) -> tuple[list[float], list]:
    """Microseconds per call of ``fn(*a)`` for each ``a`` (the first N_WARMUP untimed) and the results."""
    clock = time.perf_counter_ns
    times, results = [], []
    for a in args[:N_WARMUP]:
        fn(*a)
    with progress() as prog:
        task = prog.add_task(label, total=len(args) - N_WARMUP)
        for i, a in enumerate(args[N_WARMUP:]):
            t0 = clock()
            r = fn(*a)
            times.append((clock() - t0) / 1000)
            results.append(r)
            if i % 200 == 199:
                prog.advance(task, 200)
    return sorted(times), results


def run(ctx: Context) -> list[Row]:
    from pywb.warcserver.index.cdxops import cdx_sort_closest
    from pywb.warcserver.index.indexsource import FileIndexSource
    from warcio.bufferedreaders import DecompressingBufferedReader
    from warcio.recordloader import ArcWarcRecordLoader

    from webfreeze.archives import Archive
    from webfreeze.archives.urlkey import surt_key

    folder = dataset(ctx.out)
    q = json.loads((folder / "queries.json").read_text())
    arc = Archive.open(folder / "archive.wfa")
    source = FileIndexSource(str(folder / "index.cdxj"))
    warc = open(folder / "records.warc.gz", "rb")
    loader = ArcWarcRecordLoader()

    def pywb_range(key: bytes, end_key: bytes):
        return source.load_index({"key": key, "end_key": end_key})

    # --- ours
    def ours_exact(method, url, bkey, _skey):
        return len(arc.lookup_exact(method, url, bkey))

    def ours_prefix(prefix):
        return len(arc.lookup_surt(prefix, prefix=True, limit=50))

    def ours_closest(url, when):
        row = arc.closest(url, when)
        return row.captured_at[:19].replace("-", "").replace(":", "").replace("T", "") if row else None

    def ours_blob(digest, _offset, _length):
        return len(arc.get_blob(digest))

    # --- pywb / warcio
    def pywb_exact(method, url, bkey, skey):
        # The SURT range also holds URLs that canonicalize alike (a trailing slash, www.): keep the
        # exact URL, as lookup_exact does.
        k = skey.encode()
        hits = 0
        for cdx in pywb_range(k, k + b"!"):
            if cdx["url"] == url and cdx.get("method", "GET") == method and cdx.get("requestBody", "") == bkey:
                hits += 1
        return hits

    def pywb_prefix(prefix):
        k = prefix.encode()
        end = k[:-1] + bytes([k[-1] + 1])
        return len(list(itertools.islice(pywb_range(k, end), 50)))

    def pywb_closest(url, when):
        k = surt_key(url).encode()
        best = next(iter(cdx_sort_closest(when, pywb_range(k, k + b"!"), limit=1)), None)
        return best["timestamp"] if best else None

    def pywb_blob(_digest, offset, length):
        warc.seek(offset)
        stream = DecompressingBufferedReader(io.BytesIO(warc.read(length)))
        record = loader.parse_record_stream(stream)
        return len(record.content_stream().read())

    rows: list[Row] = []
    details: dict = {"folder": str(folder), "exchanges": N_EXCHANGES, "queries_per_kind": N_QUERIES,
                     "archive_bytes": (folder / "archive.wfa").stat().st_size,
                     "warc_gz_bytes_responses_only": (folder / "records.warc.gz").stat().st_size,
                     "cdxj_bytes": (folder / "index.cdxj").stat().st_size}
    try:
        for kind, metric, ours_fn, anchor_fn, anchor_name in [
            ("exact", "exact (method, URL, body)", ours_exact, pywb_exact, "pywb CDXJ exact"),
            ("prefix", "SURT prefix, limit 50", ours_prefix, pywb_prefix, "pywb CDXJ prefix"),
            ("closest", "closest in time", ours_closest, pywb_closest, "pywb CDXJ closest"),
            ("blob", "payload fetch", ours_blob, pywb_blob, "warcio record at offset"),
        ]:
            args = [tuple(a) if isinstance(a, list) else (a,) for a in q[kind]]
            t_ours, r_ours = _time_each(f"ours: {kind}", ours_fn, args)
            t_anchor, r_anchor = _time_each(f"anchor: {kind}", anchor_fn, args)
            mismatches = sum(1 for a, b in zip(r_ours, r_anchor) if a != b)
            for pct in (50, 99):
                rows.append(Row("3 lookup", f"{metric} p{pct}", percentile(t_ours, pct), percentile(t_anchor, pct),
                                anchor_name, "us", "lower"))
            details[kind] = {
                "ours_us": {"p50": percentile(t_ours, 50), "p90": percentile(t_ours, 90), "p99": percentile(t_ours, 99),
                            "max": t_ours[-1]},
                "anchor_us": {"p50": percentile(t_anchor, 50), "p90": percentile(t_anchor, 90),
                              "p99": percentile(t_anchor, 99), "max": t_anchor[-1]},
                # Both sides answer the same question: any difference is a bug on one side.
                "answers_differing": mismatches,
                "sample_differences": [(args[N_WARMUP + i], a, b) for i, (a, b) in enumerate(zip(r_ours, r_anchor))
                                       if a != b][:5],
            }
            if mismatches:
                console.print(f"  [yellow]note:[/] {kind}: {mismatches} of {len(r_ours)} answers differ from the anchor")
    finally:
        arc.close()
        warc.close()
    ctx.details[NAME] = details
    return rows
