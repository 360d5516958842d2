"""The ``webfreeze`` command line.

Every error a user can cause is printed as one line on stderr with a non-zero exit status:
1 for a problem with the data or the environment, 2 for a bad command line.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import sys
import threading

import click

from webfreeze import __version__
from webfreeze.archives import Archive, ArchiveError
from webfreeze.common.errors import WebfreezeError
from webfreeze.common.files import check_output_file, write_output

EXIT_ERROR = 1
EXIT_USAGE = 2
SQLITE_MAX_INT = 2**63 - 1  # the largest number an archive's integer columns can hold


class Timestamp(click.ParamType):
    """A time on the command line: ISO 8601 or a 1-14 digit pywb-style timestamp, checked as the
    command line is read (a bad one is a usage error) and passed on in the archive's canonical form.
    ``upper``: the latest instant it names (``--until 2014`` includes all of 2014), as pywb pads."""

    name = "TIME"

    def __init__(self, upper: bool = False):
        self.upper = upper

    def convert(self, value, param, ctx):
        from webfreeze.archives.timeutil import normalize_time, parse_time, parse_time_upper

        try:
            return normalize_time(parse_time_upper(value) if self.upper else parse_time(value))
        except ArchiveError as exc:
            self.fail(str(exc), param, ctx)


def fail(message: str, code: int = EXIT_ERROR) -> None:
    """Print one error line and exit (a message of several lines is joined into one when short, as
    click's list of choices; else its first line is kept, as a browser's launch log)."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    joined = " ".join(lines)
    if len(lines) > 1 and len(joined) > 200:
        joined = lines[0]
    ctx = click.get_current_context(silent=True)
    if code == EXIT_USAGE and ctx is not None and not joined.endswith("--help')"):
        joined += f" (see '{ctx.command_path} --help')"  # as click's own usage errors say it
    click.echo(f"webfreeze: error: {joined}", err=True)
    sys.exit(code)


def usage_checked(check, *args):
    """``check(*args)``, with the error it raises for a bad option value (an ArchiveError for a
    time, a RecordError for a URL, a scope or a --resolve entry: any WebfreezeError) turned into a
    usage error (exit status 2, with a pointer to --help)."""
    try:
        return check(*args)
    except WebfreezeError as exc:
        raise click.UsageError(str(exc), click.get_current_context()) from None


def progress_bar(total: int, description: str, *, unit: str = "bytes"):
    """A rich progress bar on stderr (silent when stderr is not a terminal) and its advance function."""
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeRemainingColumn, TransferSpeedColumn)

    console = Console(stderr=True)
    counter = [DownloadColumn(), TransferSpeedColumn()] if unit == "bytes" else [MofNCompleteColumn()]
    progress = Progress(TextColumn("{task.description}"), BarColumn(), *counter, TimeRemainingColumn(),
                        console=console, transient=True, disable=not console.is_terminal)
    task = progress.add_task(description, total=total)
    return progress, lambda n: progress.advance(task, n)


def human_bytes(n: int | float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="webfreeze")
def cli() -> None:
    """Record websites into content-addressed archives, replay them offline and deterministically,
    and benchmark web agents against the replay."""


# ============================================================================== archive
@cli.group()
def archive() -> None:
    """Create, inspect, verify, convert and maintain archives.

    An archive is one SQLite file (WAL mode) holding the capture index and every payload once,
    keyed by SHA-256 and zstd-compressed. See the README for the layout.
    """


@archive.command("import")
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--to", "target", required=True, type=click.Path(dir_okay=False),
              help="Archive to import into; created if it does not exist.")
@click.option("--creator", default="", help="Creator recorded in a new archive's metadata.")
@click.option("--description", default="", help="Description recorded in a new archive's metadata.")
@click.option("--license", "license_", default="", help="Licence recorded in a new archive's metadata.")
def archive_import(sources, target, creator, description, license_):
    """Import WARC (1.0/1.1, plain or gzip), ARC (plain or gzip) and WACZ files.

    The import is atomic: if any source is bad, nothing lands. A file imported before is skipped.
    """
    from webfreeze.archives.importer import import_files

    given = [name for name, value in (("--creator", creator), ("--description", description),
                                      ("--license", license_)) if value]
    if given and os.path.exists(target):
        click.echo(f"warning: {target} exists, so {' and '.join(given)} {'is' if len(given) == 1 else 'are'} not "
                   "used (they describe a new archive); change its metadata with 'webfreeze archive meta --set'",
                   err=True)
    total = sum(os.path.getsize(s) for s in sources if os.path.isfile(s))
    progress, advance = progress_bar(total, "importing")
    with progress:
        results = import_files(target, list(sources), progress=advance,
                               create_meta={"creator": creator, "description": description, "license": license_})
    for r in results:
        if r.skipped:
            click.echo(f"{r.source}: already imported (session {r.session_id}), skipped")
            continue
        s = r.stats
        parts = [f"{s.exchanges} exchanges", f"{s.requests_paired} requests paired", f"{s.revisits} revisits resolved"]
        if s.resources:
            parts.append(f"{s.resources} resource records")
        if r.pages:
            parts.append(f"{r.pages} pages")
        click.echo(f"{r.source}: " + ", ".join(parts))
        if s.unresolved_revisits:
            click.echo(f"  warning: {len(s.unresolved_revisits)} revisit records point at captures that are not in "
                       f"the archive and were skipped (import the original WARC too), e.g. {s.unresolved_revisits[0]}",
                       err=True)
        for kind, n in sorted(s.skipped.items()):
            click.echo(f"  note: {n} {kind} record(s) not stored", err=True)
        if s.warnings:
            click.echo(f"  note: {s.warnings} record(s) had a missing separator line (tolerated)", err=True)
    click.echo(f"imported into {target}")


@archive.command("export")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["warc", "wacz"]), required=True, help="Output format.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="File to write.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option("--allow-secrets", is_flag=True,
              help="Export even if the archive holds credentials (cookies, Authorization ...); see 'archive redact'.")
def archive_export(archive_path, fmt, output, force, allow_secrets):
    """Export as WARC 1.1 (gzip per record) or WACZ 1.1.1 (with CDXJ index and pages.jsonl).

    Refused when the archive holds a credential it can recognise, unless --allow-secrets.
    """
    from webfreeze.archives.warc_export import export

    if not allow_secrets:
        _refuse_secrets(archive_path, "the export")

    with Archive.open(archive_path) as arc:
        total = arc.counts()["exchanges"]
    progress, advance = progress_bar(total, f"exporting {fmt}", unit="exchanges")
    with progress:
        n = export(archive_path, output, fmt, progress=advance, overwrite=force)
    click.echo(f"wrote {n} exchanges to {output} ({human_bytes(os.path.getsize(output))})")


@archive.command("verify")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def archive_verify(archive_path, as_json):
    """Recompute every blob digest and check the index; exit 1 when anything is wrong."""
    from webfreeze.archives.verify import verify

    with Archive.open(archive_path) as arc:
        total = arc.counts()["blob_bytes"]
    progress, advance = progress_bar(total, "verifying")
    with progress:
        report = verify(archive_path, progress=advance)
    if as_json:
        click.echo(json.dumps({"ok": report.ok, "blobs_checked": report.blobs_checked,
                               "exchanges_checked": report.exchanges_checked,
                               "problems": [{"where": p.where, "what": p.what} for p in report.problems]}, indent=2))
    else:
        for p in report.problems:
            click.echo(f"BAD {p}")
        status = "ok" if report.ok else f"{len(report.problems)} problem(s)"
        click.echo(f"{archive_path}: {report.blobs_checked} blobs, {report.exchanges_checked} exchanges checked: {status}")
    sys.exit(0 if report.ok else EXIT_ERROR)


@archive.command("info")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def archive_info(archive_path, as_json):
    """Counts, bytes, dedup ratio, hosts and capture time range."""
    from webfreeze.archives.maintenance import info

    data = info(archive_path)
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    rng = data["time_range"] or ["-", "-"]
    lines = [
        ("archive", data["path"]),
        ("exchanges", data["exchanges"]),
        ("pages", data["pages"]),
        ("documents", data["documents"]),
        ("sessions", data["sessions"]),
        ("blobs", data["blobs"]),
        ("payload bytes", f"{human_bytes(data['payload_bytes'])} ({data['payload_bytes']})"),
        ("unique bytes", f"{human_bytes(data['unique_bytes'])}  dedup {data['dedup_ratio'] or '-'}x"),
        ("stored bytes", f"{human_bytes(data['stored_blob_bytes'])}  compression {data['compression_ratio'] or '-'}x"),
        ("file size", human_bytes(data["file_bytes"])),
        ("captured", f"{rng[0]} .. {rng[1]}"),
        ("hosts", ", ".join(f"{h or '(none)'} ({n})" for h, n in list(data["hosts"].items())[:10])
         + (f" and {len(data['hosts']) - 10} more" if len(data["hosts"]) > 10 else "")),
        ("statuses", ", ".join(f"{k}: {v}" for k, v in data["statuses"].items())),
    ]
    if data.get("failed_pages"):
        lines.append(("failed pages", f"{len(data['failed_pages'])} (crawled, not recorded as pages)"))
        lines += [("", f"{f['url']} ({f['why']})") for f in data["failed_pages"][:20]]
        if len(data["failed_pages"]) > 20:
            lines.append(("", f"and {len(data['failed_pages']) - 20} more (--json lists all)"))
    for key in ("creator", "description", "license"):
        if data.get(key):
            lines.append((key, data[key]))
    for k, v in lines:
        click.echo(f"{k:>14}  {v}")


@archive.command("ls")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--prefix", help="Only URLs under this URL prefix (compared in SURT form).")
@click.option("--host", help="Only this host.")
@click.option("--mime", help="Only this media type (wildcards: 'image/*').")
@click.option("--status", type=click.IntRange(0, 999), help="Only this HTTP status.")
@click.option("--method", help="Only this HTTP method.")
@click.option("--since", type=Timestamp(), help="Captured at or after (ISO 8601 or 1-14 digit timestamp).")
@click.option("--until", type=Timestamp(upper=True),
              help="Captured at or before; a short timestamp includes its whole period (2014: all of 2014).")
@click.option("--limit", type=click.IntRange(min=1), help="At most this many lines.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def archive_ls(archive_path, prefix, host, mime, status, method, since, until, limit, as_json):
    """List captured URLs: time, status, method, type, size, URL."""
    with Archive.open(archive_path) as arc:
        for ex in arc.exchanges(host=host, prefix=prefix, mime=mime, status=status, method=method,
                                since=since, until=until, order="time", limit=limit):
            resp = ex.response
            if as_json:
                click.echo(json.dumps({"id": ex.id, "captured_at": ex.captured_at, "status": ex.status,
                                       "method": ex.method, "mime": resp.mime,
                                       "payload_size": resp.payload_size, "url": ex.url,
                                       "payload": resp.payload_digest, "body_key": ex.body_key}))
            else:
                click.echo(f"{ex.captured_at}  {ex.status}  {ex.method:<6} "
                           f"{(resp.mime or '-'):<24} {resp.payload_size:>9}  {ex.url}")


@archive.command("show")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.argument("url", required=False)
@click.option("--id", "exchange_id", type=click.IntRange(1, SQLITE_MAX_INT),
              help="Show exchange number ID (as `ls --json` prints it).")
@click.option("--at", "when", type=Timestamp(), help="Pick the capture closest to this time (default: the latest).")
@click.option("--method", default=None, help="HTTP method (default: any).")
@click.option("--raw", is_flag=True, help="Print the body as stored (no content decoding).")
@click.option("--headers-only", is_flag=True, help="Print the request and response headers only.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the body to this file instead.")
def archive_show(archive_path, url, exchange_id, when, method, raw, headers_only, output):
    """Show one capture of URL (or exchange --id): request line, headers and body, response
    status, headers and body. URLs match in SURT form (host case, www., query order)."""
    from webfreeze.archives.urlkey import surt_key

    if not url and exchange_id is None:
        fail("give a URL or --id", EXIT_USAGE)
    if url and exchange_id is not None:
        fail("give a URL or --id, not both", EXIT_USAGE)
    if output and headers_only:
        fail("--headers-only shows no body, so -o would have nothing to write: give one of them", EXIT_USAGE)
    if output:
        check_output_file(output, protect=[archive_path], devices_ok=True)
    with Archive.open(archive_path) as arc:
        if exchange_id is not None:
            ex = arc.exchange(exchange_id)
        elif when:
            ex = arc.closest(url, when, method=method)
        else:
            found = [r for r in arc.lookup_surt(surt_key(url)) if not method or r.method == method.upper()]
            ex = found[-1] if found else None
        if ex is None:
            methods = sorted({r.method for r in arc.lookup_surt(surt_key(url))}) if url and method else []
            if methods:
                fail(f"{url}: no {method.upper()} capture in {archive_path} (captured with {', '.join(methods)})")
            fail(f"{url or f'exchange {exchange_id}'}: not in {archive_path}")
        req, resp = ex.request, ex.response
        body = resp.payload()
        req_body = req.payload()
        click.echo(f"# exchange {ex.id}, captured {ex.captured_at}, payload sha256:{resp.payload_digest}")
        if req.captured:
            click.echo(f"{ex.method} {ex.url}")
            for k, v in req.headers:
                click.echo(f"{k}: {v}")
            if req_body and not headers_only:
                click.echo("")
                click.echo(req_body.decode("utf-8", "replace") if _looks_textual("", req_body)
                           else f"# binary request body, {len(req_body)} bytes")
            click.echo("")
        click.echo(f"{resp.http_version} {resp.status} {resp.reason}".rstrip())
        resp_headers = resp.headers
        for k, v in resp_headers:
            click.echo(f"{k}: {v}")
        if headers_only:
            return
        click.echo("")
        if not raw:
            from webfreeze.archives.content import decode_for_display

            body = decode_for_display(body, resp_headers)
        if output:
            write_output(output, body)
            click.echo(f"# body ({len(body)} bytes) written to {output}")
        elif _looks_textual(resp.mime, body):
            click.echo(body.decode("utf-8", "replace"))
        else:
            click.echo(f"# binary body, {len(body)} bytes; use -o FILE to save it")


def _looks_textual(mime: str | None, body: bytes) -> bool:
    mime = mime or ""
    if mime.startswith("text/") or mime.endswith(("json", "xml", "javascript")) or "+xml" in mime:
        return True
    return b"\x00" not in body[:1024] and bool(body)


@archive.command("diff")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--exit-code", is_flag=True, help="Exit with status 1 when the archives differ.")
def archive_diff(a, b, as_json, exit_code):
    """What B adds (+), removes (-) and changes (~) relative to A, by payload digest."""
    from webfreeze.archives.maintenance import diff

    entries = diff(a, b)
    marks = {"added": "+", "removed": "-", "changed": "~"}
    for e in entries:
        if as_json:
            click.echo(json.dumps(e.__dict__))
        else:
            suffix = f"  [{e.body_key}]" if e.body_key else ""
            click.echo(f"{marks[e.change]} {e.method} {e.url}{suffix}")
    if not as_json:
        counts = {k: sum(1 for e in entries if e.change == k) for k in marks}
        click.echo(f"{counts['added']} added, {counts['removed']} removed, {counts['changed']} changed", err=True)
    sys.exit(1 if exit_code and entries else 0)


@archive.command("merge")
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--into", "dest", required=True, type=click.Path(dir_okay=False),
              help="Destination archive; created if it does not exist.")
def archive_merge(sources, dest):
    """Merge archives into one, deduplicating blobs; sessions already present are skipped."""
    from webfreeze.archives.maintenance import merge

    stats = merge(list(sources), dest)
    click.echo(f"merged into {dest}: " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in sorted(stats.items())))


@archive.command("gc")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Report what would be removed, and about how large the file would be, "
                                             "without writing anything.")
def archive_gc(archive_path, dry_run):
    """Remove blobs nothing refers to and compact the file."""
    from webfreeze.archives.maintenance import gc

    stats = gc(archive_path, dry_run=dry_run)  # a dry run only reads: no lock, no write
    verb = "would remove" if dry_run else "removed"
    click.echo(f"{verb} {stats['blobs_removed']} blobs ({human_bytes(stats['blob_bytes_freed'])}); file "
               f"{human_bytes(stats['file_bytes_before'])} -> {'about ' if dry_run else ''}"
               f"{human_bytes(stats['file_bytes_after'])}")


@archive.command("pack")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Write the packed copy here and leave ARCHIVE untouched (default: pack in place).")
@click.option("--level", type=click.IntRange(1, 22), default=None, help="zstd level (default 19).")
@click.option("--allow-secrets", is_flag=True,
              help="With -o: write the copy even if the archive holds credentials; see 'archive redact'.")
def archive_pack(archive_path, output, level, allow_secrets):
    """Recompress for sharing: every blob at a high zstd level, then compact the file.

    Capture and import compress fast; pack trades CPU for bytes once, before you share an archive.
    Contents and digests do not change. A copy (-o) is refused when the archive holds a credential
    it can recognise, unless --allow-secrets.
    """
    from webfreeze.archives.maintenance import pack

    if output and not allow_secrets:
        _refuse_secrets(archive_path, "the packed copy")

    with Archive.open(archive_path) as arc:
        total = arc.counts()["blobs"]
    progress, advance = progress_bar(total, "packing", unit="blobs")
    with progress:
        stats = pack(archive_path, output, level=level, progress=advance)
    click.echo(f"packed {output or archive_path}: {stats['blobs_recompressed']} of {stats['blobs']} blobs "
               f"recompressed ({stats['deltas']} as deltas against a similar blob); "
               f"{human_bytes(stats['file_bytes_before'])} -> {human_bytes(stats['file_bytes_after'])}")


def _refuse_secrets(archive_path, what: str) -> None:
    """One line and exit 1 when ``archive_path`` holds a credential (see webfreeze.redaction)."""
    from webfreeze.redaction import SecretsFound, check_shareable

    if not os.path.isfile(archive_path):
        return  # (the command's own check names a missing archive)
    try:
        check_shareable(archives=[archive_path], what=what)
    except SecretsFound as exc:
        raise click.ClickException(str(exc)) from None


@archive.command("redact")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="The redacted archive (new).")
@click.option("--suite", type=click.Path(file_okay=False),
              help="A suite on ARCHIVE: its reference trajectories' password values are secrets too.")
@click.option("--suite-out", type=click.Path(file_okay=False),
              help="Where the redacted suite goes (naming the redacted archive); with --suite.")
@click.option("--param", "params", multiple=True, metavar="NAME",
              help="Also redact query parameters, form fields and JSON keys called NAME; repeatable.")
@click.option("--header", "headers", multiple=True, metavar="NAME", help="Also redact header NAME; repeatable.")
@click.option("--cassette", "cassettes", multiple=True, nargs=2, type=click.Path(dir_okay=False),
              metavar="SRC OUT", help="Redact LLM cassette SRC into OUT with the same placeholders; repeatable.")
def archive_redact(archive_path, output, suite, suite_out, params, headers, cassettes):
    """Write a copy of ARCHIVE with its credentials replaced by stable placeholders.

    Cookie and Set-Cookie values, Authorization and other credential headers, secret query
    parameters / form fields / JSON keys (token, access_token, api_key, password, session, ... and
    --param), and values typed into password fields in --suite's reference trajectories, wherever
    they occur. The same secret gets the same placeholder (keyed hash; the key is random and never
    stored), so the redacted suite's reference trajectories still replay. See docs/bundles.md.
    """
    from webfreeze.redaction import redact

    with Archive.open(archive_path) as arc:
        total = arc.counts()["exchanges"]
    progress, advance = progress_bar(total, "redacting", unit="exchanges")
    with progress:
        s = redact(archive_path, output, suite=suite, suite_out=suite_out, params=params, headers=headers,
                   cassettes=list(cassettes), progress=advance)
    kinds = ", ".join(f"{n} {k}" for k, n in s["by_kind"].items()) or "none found"
    click.echo(f"wrote {output}: {s['exchanges']} exchanges ({s['changed']} changed), {s['secrets']} secrets "
               f"replaced ({kinds})")
    if suite_out:
        click.echo(f"wrote {suite_out}: {s['suite_files']} files (its manifest names {output})")
    for c in s["cassettes"]:
        click.echo(f"wrote {c['out']}: {c['calls']} calls ({c['changed']} changed)")


@archive.command("meta")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--set", "assignments", multiple=True, metavar="KEY=VALUE",
              help="Set creator, description or license (repeatable); replay_rules takes JSON.")
def archive_meta(archive_path, assignments):
    """Print the archive's metadata (with its capture time range), or set fields of it."""
    editable = {"creator", "description", "license", "replay_rules"}
    if not assignments:
        with Archive.open(archive_path) as arc:
            meta = arc.meta()
            span = arc.capture_range()
            meta["capture_time_range"] = list(span) if span else None  # derived, never stored
            click.echo(json.dumps(meta, indent=2, sort_keys=True))
        return
    updates = {}
    for item in assignments:
        key, sep, value = item.partition("=")
        if not sep or key not in editable:
            fail(f"--set expects KEY=VALUE with KEY one of {', '.join(sorted(editable))}", EXIT_USAGE)
        if key == "replay_rules":
            from webfreeze.replayer.matching import Rules

            try:
                value = json.loads(value)
            except ValueError:
                fail("replay_rules must be JSON", EXIT_USAGE)
            if not isinstance(value, dict):
                fail("replay_rules must be a JSON object", EXIT_USAGE)
            try:
                Rules.from_dict(value)
            except (TypeError, ValueError) as exc:
                fail(f"bad replay_rules: {exc}", EXIT_USAGE)
        updates[key] = value
    with Archive.open(archive_path, write=True) as arc:
        with arc.transaction():
            for k, v in updates.items():
                arc.set_meta(k, v)
    click.echo(f"updated {', '.join(sorted(updates))}")


# ============================================================================== record
@cli.group()
def record() -> None:
    """Record live traffic into an archive (a recording proxy on mitmproxy)."""


@record.command("proxy")
@click.option("--archive", "archive_path", required=True, type=click.Path(dir_okay=False),
              help="Archive to record into; created if it does not exist.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one).")
@click.option("--resolve", "resolve", multiple=True, metavar="HOST[:PORT]=ADDRESS:PORT",
              help="Connect to ADDRESS:PORT for HOST while URLs keep HOST (like curl's --resolve); repeatable.")
def record_proxy(archive_path, host, port, resolve):
    """Run a recording HTTP/HTTPS proxy until Ctrl-C; every exchange is committed as it completes.

    Point any client at it (HTTPS clients must trust the CA that `webfreeze record ca` prints).
    """
    from webfreeze.recorder.proxy import RecordingProxy, check_port, parse_resolve, recording_into

    table = usage_checked(parse_resolve, resolve)
    check_port(host, port)  # before the archive is made
    with recording_into(archive_path) as arc:
        proxy = RecordingProxy(arc, host=host, port=port, resolve=table)
        proxy.run(on_ready=lambda p: click.echo(
            f"recording into {archive_path} through proxy {p.url} (session {p.session_id}); Ctrl-C to stop", err=True))
        click.echo(f"recorded {proxy.recorder.recorded} exchanges", err=True)


@record.command("crawl")
@click.argument("url")
@click.option("--archive", "archive_path", required=True, type=click.Path(dir_okay=False),
              help="Archive to record into; created if it does not exist.")
@click.option("--depth", default=2, show_default=True, type=click.IntRange(0, 50), help="Link depth from URL.")
@click.option("--max-pages", default=100, show_default=True, type=click.IntRange(1), help="Stop after this many pages.")
@click.option("--scope", default="host", show_default=True,
              help="Which links to follow: host (same host), prefix (URLs starting with URL up to its last '/') "
                   "or a regular expression.")
@click.option("--resolve", "resolve", multiple=True, metavar="HOST[:PORT]=ADDRESS:PORT",
              help="Connect to ADDRESS:PORT for HOST while URLs keep HOST (like curl's --resolve); repeatable.")
@click.option("--screenshots", type=click.Choice(["none", "viewport", "full"]), default="viewport", show_default=True,
              help="Each page's screenshot: the first 1920x1080 (viewport), the whole page (full) or none.")
@click.option("--check/--no-check", default=True, show_default=True,
              help="Check each page by loading it again from the archive alone; fetch what it misses.")
@click.option("--recheck", is_flag=True,
              help="Visit no page: check every page record of the archive again and fetch live what one misses.")
@click.option("--redact", is_flag=True,
              help="Afterwards, replace the archive's credentials by placeholders (as 'archive redact').")
def record_crawl(url, archive_path, depth, max_pages, scope, resolve, screenshots, check, recheck, redact):
    """Crawl URL breadth-first in real Chromium through the recording proxy (1920x1080).

    Each page gets a screenshot and a DOM snapshot; every request is recorded. Each page is then
    loaded again from the archive alone, and what that misses is fetched live and checked again; a
    page still missing something is recorded but incomplete (exit status 1; repair with --recheck).
    A start page that fails (network error, 4xx/5xx) is an error and records nothing; pages failing
    later are listed. Running the same crawl again resumes it.
    """
    from webfreeze.recorder.crawl import check_url, crawl, load_failures, scope_matcher
    from webfreeze.recorder.crawl import recheck as run_recheck
    from webfreeze.recorder.proxy import parse_resolve

    usage_checked(check_url, url)
    usage_checked(scope_matcher, url, scope)  # a bad regex fails before anything starts
    table = usage_checked(parse_resolve, resolve)
    if recheck:
        from webfreeze.archives import Archive

        with Archive.open(archive_path) as arc:
            total = arc.counts()["pages"]
        progress, advance = progress_bar(total, "rechecking", unit="pages")
        with progress:
            result = run_recheck(archive_path, url, depth=depth, scope=scope, resolve=table,
                                 progress=lambda done, _url: advance(1))
        click.echo(f"{result.pages} pages rechecked; {result.exchanges_this_run} exchanges recorded this run; "
                   f"{len(result.incomplete)} still incomplete")
    else:
        progress, advance = progress_bar(max_pages, "crawling", unit="pages")
        with progress:
            result = crawl(archive_path, url, depth=depth, max_pages=max_pages, scope=scope,
                           progress=lambda done, _url: advance(1), resolve=table, screenshots=screenshots, check=check)
        if result.incomplete:
            state = f"incomplete: {len(result.incomplete)} pages miss requests"
        elif load_failures(result.failed):
            state = (f"incomplete: {len(load_failures(result.failed))} pages did not load; "
                     "crawl them again into this archive")
        elif result.queued:
            state = f"stopped at --max-pages with {result.queued} URLs queued; run again with a higher --max-pages to go on"
        else:
            state = "complete" if check else "complete, unchecked"
        failed = f", {len(result.failed)} failed" if result.failed else ""
        click.echo(f"{'resumed, ' if result.resumed else ''}{result.pages_this_run} pages and "
                   f"{result.exchanges_this_run} exchanges recorded this run; {result.pages} pages in total{failed} ({state})")
        for failed_url, why in result.failed:
            click.echo(f"  failed: {failed_url} ({why})")
    if redact:
        from webfreeze.redaction import redact_recording

        s = redact_recording(archive_path)
        click.echo(f"redacted {archive_path}: {s['secrets']} secrets replaced by placeholders")
    for page_url, missing in result.incomplete:
        click.echo(f"  incomplete: {page_url} (missing: {', '.join(missing)})")
    if result.incomplete:
        click.echo(f"{len(result.incomplete)} pages replay with requests missing; repair with: webfreeze record crawl "
                   f"{url} --archive {archive_path} --recheck", err=True)
        sys.exit(1)


@record.command("session")
@click.argument("url")
@click.option("--archive", "archive_path", required=True, type=click.Path(dir_okay=False),
              help="Archive to record into; created if it does not exist.")
@click.option("--trajectory", "trajectory", required=True, type=click.Path(dir_okay=False),
              help="Where to write the reference trajectory (JSON).")
@click.option("--headed", is_flag=True, help="Show the browser and let a person drive it; close it to finish.")
@click.option("--script", type=click.Path(dir_okay=False),
              help="A Python file defining run(page) (a Playwright page) that drives the session.")
@click.option("--resolve", "resolve", multiple=True, metavar="HOST[:PORT]=ADDRESS:PORT",
              help="Connect to ADDRESS:PORT for HOST while URLs keep HOST (like curl's --resolve); repeatable.")
@click.option("--instruction", default=None, metavar="TEXT",
              help="The task this session performs, kept in the trajectory (tasks add takes it from there).")
@click.option("--redact", is_flag=True,
              help="Afterwards, replace the archive's credentials and the trajectory's password values by "
                   "placeholders (as 'archive redact').")
def record_session(url, archive_path, trajectory, headed, script, resolve, instruction, redact):
    """Record a browsing session and log every action as a reference trajectory.

    Clicks, text entry, selects, form submissions, scrolls and navigations are logged with the
    target's role, accessible name, CSS path and text, plus URL and time.
    """
    from webfreeze.recorder.crawl import check_url
    from webfreeze.recorder.proxy import parse_resolve
    from webfreeze.recorder.session import record_session as run_session

    usage_checked(check_url, url)
    if not headed and not script:
        raise click.UsageError("a session needs --headed (a person drives) or --script FILE",
                               click.get_current_context())
    if instruction is not None and not instruction.strip():
        raise click.BadParameter("the instruction must not be empty", param_hint="--instruction")
    result = run_session(archive_path, url, trajectory, headed=headed, script=script,
                         resolve=usage_checked(parse_resolve, resolve), instruction=instruction)
    click.echo(f"{len(result['steps'])} steps written to {trajectory}; exchanges recorded into {archive_path} "
               f"(session {result['archive_session']})")
    if redact:
        from webfreeze.redaction import redact_recording

        s = redact_recording(archive_path, [trajectory])
        click.echo(f"redacted {archive_path} and {trajectory}: {s['secrets']} secrets replaced by placeholders")


@record.command("ca")
def record_ca():
    """Print where the recording CA certificate is (created on first use) and how to trust it."""
    from webfreeze.recorder.proxy import ensure_ca

    path = ensure_ca()
    click.echo(str(path))
    click.echo(f"# trust it for one client:   curl --cacert {path} ...  |  SSL_CERT_FILE={path}", err=True)
    click.echo(f"# system-wide (Debian):      cp {path} /usr/local/share/ca-certificates/webfreeze.crt && "
               "update-ca-certificates", err=True)
    click.echo("# a browser: import it as an authority under Settings > Privacy and security > Certificates",
               err=True)


# ============================================================================== sites
@cli.group()
def sites() -> None:
    """Simulated live sites (deterministic for a seed) that stand in for the web in tests and demos."""


@sites.command("serve")
@click.argument("name", type=click.Choice(["scholar", "shop", "booking", "shop2", "dine", "hotels", "clinic", "start"]))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the generated content.")
@click.option("--tls-cert", type=click.Path(dir_okay=False), help="Serve HTTPS with this PEM certificate (chain).")
@click.option("--tls-key", type=click.Path(dir_okay=False), help="The certificate's PEM key (if not in --tls-cert).")
def sites_serve(name, host, port, seed, tls_cert, tls_key):
    """Serve a simulated site until Ctrl-C.

    scholar: a preprint archive shaped like arxiv.org; shop: a store with search, filters and a cart;
    booking: restaurants, doctors and hotels with availability and a reservation form; shop2, dine,
    hotels, clinic: competing shop, restaurant, hotel and clinic sites for personalised tasks; start:
    a page linking them all (docs/sites.md).
    """
    from webfreeze.simulator.sites import SITES
    from webfreeze.simulator.sites.common import SiteServer, tls_context

    if tls_key and not tls_cert:
        raise click.UsageError("--tls-key needs --tls-cert", click.get_current_context())
    try:
        ctx = tls_context(tls_cert, tls_key) if tls_cert else None
        server = SiteServer(SITES[name](seed), host, port, log_requests=True, ssl_context=ctx)
    except OSError as exc:
        fail(f"{exc.strerror or exc}")
    click.echo(f"serving {name} (seed {seed}) at {server.url}/  (Ctrl-C to stop)", err=True)
    try:
        server.serve_forever()
    except (KeyboardInterrupt, Terminated):
        click.echo("stopped", err=True)


# ============================================================================== replay
@cli.group()
def replay() -> None:
    """Replay an archive offline: a hermetic, deterministic HTTP(S) server, and checks against captures."""


@replay.command("serve")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--mode", type=click.Choice(["proxy", "direct"]), default="proxy", show_default=True,
              help="proxy: use as the browser's HTTP/HTTPS proxy; direct: pywb's URLs, archived bytes at "
                   "/<timestamp>id_/<url>, replayed pages at /<timestamp>/<url>.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8090, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one).")
@click.option("--on-miss", type=click.Choice(["404", "502", "abort"]), default="404", show_default=True,
              help="Answer for a request the archive cannot match (abort: drop the connection).")
@click.option("--miss-report", type=click.Path(dir_okay=False), default="replay-misses.jsonl", show_default=True,
              help="JSONL file that gets one line per miss (created on the first miss).")
@click.option("--no-inject", is_flag=True, help="Do not inject the deterministic runtime into HTML pages.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of Math.random and crypto in pages.")
@click.option("--at", "when", type=Timestamp(),
              help="Target time (ISO 8601 or 1-14 digits): prefer the captures closest to it.")
@click.option("--rules", "rules_file", type=click.Path(dir_okay=False),
              help="JSON file of matching-rule overrides (see README, 'Replay', Matching).")
def replay_serve(archive_path, mode, host, port, on_miss, miss_report, no_inject, seed, when, rules_file):
    """Serve ARCHIVE until Ctrl-C; nothing is ever fetched from the network."""
    from webfreeze.replayer.server import ReplayServer, load_rules_file

    rules = load_rules_file(rules_file) if rules_file else None
    if miss_report is not None:
        default = click.get_current_context().get_parameter_source("miss_report") == click.core.ParameterSource.DEFAULT
        if default and not os.access(os.path.dirname(os.path.abspath(miss_report)), os.W_OK):
            click.echo(f"warning: the current folder is not writable; misses are not written to {miss_report}", err=True)
            miss_report = None
        elif rules_file:  # appended to on the first miss: never the rules file (the server checks the rest)
            check_output_file(miss_report, protect=[rules_file], what="miss report", devices_ok=True)
    server = ReplayServer(archive_path, mode=mode, host=host, port=port, on_miss=on_miss, miss_report=miss_report,
                          inject=not no_inject, seed=seed, rules=rules, when=when)

    def ready(srv):
        click.echo(f"replaying {archive_path} ({srv.matcher.count} exchanges) in {mode} mode at {srv.url}  "
                   "(Ctrl-C to stop)", err=True)
        if mode == "proxy":
            click.echo(f"# e.g. curl --proxy {srv.url} --cacert {srv.ca_file} https://HOST/PATH", err=True)
        else:
            click.echo(f"# e.g. curl {srv.url}/2024id_/https://HOST/PATH (archived bytes), {srv.url}/2024/https://HOST/PATH "
                       f"(replayed), listing at {srv.url}/", err=True)

    server.serve_forever(on_ready=ready)
    s = server.stats
    click.echo(f"served {s['requests']} requests: {s['hits']} from the archive, {s['model']} by site models, "
               f"{s['misses']} misses" + (f" (listed in {server.miss_report})" if s["misses"] and server.miss_report
                                          else ""), err=True)


@replay.command("check")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--report", "report_dir", default="replay-check", show_default=True, type=click.Path(file_okay=False),
              help="Directory for report.json, report.html and the replayed snapshots; replaced when it holds "
                   "an earlier report, refused when it holds anything else.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the deterministic runtime.")
@click.option("--limit", type=click.IntRange(1), help="Check only the first N page records.")
def replay_check(archive_path, report_dir, seed, limit):
    """Load every page record through the replay in Chromium and compare it with its capture.

    Reports requests the archive misses, DOM text similarity and screenshot pixel difference per
    page. Exit status 1 when any page has a miss or fails to load.
    """
    from webfreeze.archives import Archive
    from webfreeze.replay_check import check

    with Archive.open(archive_path) as arc:
        total = arc.counts()["pages"]
    progress, advance = progress_bar(min(total, limit or total), "replaying pages", unit="pages")
    with progress:
        report = check(archive_path, report_dir, seed=seed, limit=limit, progress=lambda n, url: advance(1))
    s = report["summary"]
    click.echo(f"{s['pages']} pages: {s['pages_with_misses']} with misses ({s['missed_requests']} requests), "
               f"{s['pages_with_errors']} failed; text similarity mean {s['mean_text_similarity']}, "
               f"pixel difference mean {s['mean_pixel_difference']}; report in {report_dir}/report.html")
    if s["pages_with_misses"] or s["pages_with_errors"]:
        sys.exit(1)


@replay.command("coverage")
@click.argument("run_dirs", metavar="RUN_DIR...", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the groups as JSON.")
def replay_coverage(run_dirs, as_json):
    """List the requests of the runs' episodes that missed or were answered fuzzily, grouped by host
    and path pattern, with counts and the tasks that made them: what to record next."""
    from webfreeze.replay_coverage import coverage, render_text

    result = coverage(list(run_dirs))
    click.echo(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False) if as_json else render_text(result))


# the eval and tasks groups live in cli_eval.py
from webfreeze.cli_eval import register as _register_eval  # noqa: E402

_register_eval(cli)

# bench run|compare, tasks validate and demo live in cli_bench.py
from webfreeze.cli_bench import register as _register_bench  # noqa: E402

_register_bench(cli)

# cassette info|verify|merge live in cli_llm.py
from webfreeze.cli_llm import register as _register_llm  # noqa: E402

_register_llm(cli)

# personas generate|tasks live in cli_personas.py
from webfreeze.cli_personas import register as _register_personas  # noqa: E402

_register_personas(cli)

# bundle pack|verify|run|info|export-wacz live in cli_bundle.py
from webfreeze.cli_bundle import register as _register_bundle  # noqa: E402

_register_bundle(cli)

# study run|report live in cli_study.py
from webfreeze.cli_study import register as _register_study  # noqa: E402

_register_study(cli)

# the context group (filler pools for long-context runs) lives in cli_context.py
from webfreeze.cli_context import register as _register_context  # noqa: E402

_register_context(cli)
from webfreeze.cli_mcp import register as _register_mcp  # noqa: E402  (mcp; eval export-har)
_register_mcp(cli)


# ============================================================================== entry point
class Terminated(BaseException):
    """SIGTERM, raised in the main thread wherever it is, so that the clean-up Ctrl-C gets runs too
    (partial outputs and temporary archives removed, sessions closed)."""


def _on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM during the clean-up ends the process
    raise Terminated()


def main(argv: list[str] | None = None) -> None:
    """Run the CLI with one-line errors and meaningful exit codes."""
    installed = threading.current_thread() is threading.main_thread()
    if installed:
        previous = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _run(argv)
    except Terminated:  # one that came while an error was being reported
        fail("terminated", 128 + signal.SIGTERM)
    finally:
        if installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _run(argv: list[str] | None) -> None:
    try:
        cli.main(args=argv, prog_name="webfreeze", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # a group named alone: its help, as `--help` shows it
        click.echo(exc.ctx.get_help() if exc.ctx else exc.format_message(), err=True)
        sys.exit(EXIT_USAGE)
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        fail(f"{exc.format_message()}{hint}", EXIT_USAGE)
    except click.ClickException as exc:
        fail(exc.format_message())
    except click.exceptions.Abort:
        fail("interrupted", 130)  # Ctrl-C (click turns KeyboardInterrupt into Abort)
    except WebfreezeError as exc:  # every error a user can cause (common/errors.py's family): one line
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted", 130)
    except Terminated:
        fail("terminated", 128 + signal.SIGTERM)
    except BrokenPipeError:
        sys.stderr.close()  # output piped into `head`: not an error
        sys.exit(0)
    except OSError as exc:
        fail(f"{str(exc.filename) + ': ' if exc.filename else ''}{exc.strerror or exc}")
    except sqlite3.Error as exc:  # disk full, a locked or damaged file
        fail(f"archive storage error: {exc}")
    except Exception as exc:  # a bug: still one line, with a way to see more
        if os.environ.get("WEBFREEZE_DEBUG"):
            raise
        fail(f"internal error: {type(exc).__name__}: {exc} (set WEBFREEZE_DEBUG=1 for a traceback)", 70)
    sys.exit(0)


if __name__ == "__main__":
    main()
