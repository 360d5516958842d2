"""``webfreeze archive ...``: create, inspect, verify, convert and maintain archives."""

from __future__ import annotations

import json
import os
import sys

import click

from webfreeze.archives import Archive
from webfreeze.archives.content import decode_for_display
from webfreeze.archives.importer import import_files
from webfreeze.archives.maintenance import diff, gc, info, merge, pack, sessions
from webfreeze.archives.urlkey import surt_key
from webfreeze.archives.verify import require_intact, verify
from webfreeze.archives.warc_export import export
from webfreeze.bundles.redaction import SecretsFound, check_shareable, redact
from webfreeze.cli.options import EXIT_ERROR, EXIT_USAGE, SQLITE_MAX_INT, Timestamp, fail, human_bytes, progress_bar
from webfreeze.cli.options import not_found as secret_env_not_found
from webfreeze.common.files import check_output_file, write_output
from webfreeze.common.text import counted
from webfreeze.replayer.matching import Rules
from webfreeze.replayer.websocket import SOCKET_PREFIX


@click.group("archive")
def archive_group() -> None:
    """Create, inspect, verify, convert and maintain archives.

    An archive is one SQLite file (WAL mode) holding the capture index and every payload once,
    keyed by SHA-256 and zstd-compressed. See the README for the layout.
    """


@archive_group.command("import")
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--to", "target", required=True, type=click.Path(dir_okay=False),
              help="Archive to import into; created if it does not exist.")
@click.option("--creator", default="", help="Creator recorded in a new archive's metadata.")
@click.option("--description", default="", help="Description recorded in a new archive's metadata.")
@click.option("--license", "license_", default="", help="Licence recorded in a new archive's metadata.")
def archive_import(sources, target, creator, description, license_):
    """Import WARC (1.0/1.1, plain or gzip), ARC (plain or gzip), WACZ and HAR 1.2 files (Playwright's
    and Chromium DevTools': entries with content, WebSocket conversations with their messages).

    The import is atomic: if any source is bad, nothing lands. A file imported before is skipped.
    """
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
        if s.websockets:
            parts.append(f"{s.websockets} WebSocket conversation{'s' if s.websockets != 1 else ''}")
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


@archive_group.command("export")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["warc", "wacz"]), required=True, help="Output format.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="File to write.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option("--allow-secrets", is_flag=True,
              help="Export even if the archive holds credentials (cookies, Authorization ...); see 'archive redact'.")
def archive_export(archive_path, fmt, output, force, allow_secrets):
    """Export as WARC 1.1 (gzip per record) or WACZ 1.1.1 (with CDXJ index and pages.jsonl).

    Refused when the archive holds a secret that 'archive redact' would replace, unless
    --allow-secrets, and when a blob does not match its digest (a damaged archive).
    """
    _require_intact(archive_path, "nothing was exported")  # integrity first: the refusal reads bodies too
    if not allow_secrets:
        _refuse_secrets(archive_path, "the export")

    with Archive.open(archive_path) as arc:
        total = arc.counts()["exchanges"]
        sockets = sum(1 for _ in arc.documents(prefix=SOCKET_PREFIX))
    progress, advance = progress_bar(total, f"exporting {fmt}", unit="exchanges")
    with progress:
        n = export(archive_path, output, fmt, progress=advance, overwrite=force, verified=True)
    click.echo(f"wrote {n} exchanges to {output} ({human_bytes(os.path.getsize(output))})")
    if sockets:
        # (WARC has no record type for a WebSocket's messages: only the handshake's 101 goes)
        click.echo(f"note: {sockets} WebSocket conversation(s) left out (a WARC holds no WebSocket messages, only "
                   "their handshakes): their pages will not replay from it; 'archive pack' keeps them", err=True)


@archive_group.command("verify")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def archive_verify(archive_path, as_json):
    """Recompute every blob digest and check the index; exit 1 when anything is wrong."""
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


@archive_group.command("info")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def archive_info(archive_path, as_json):
    """Counts, bytes, dedup ratio, hosts and capture time range."""
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
        # (all blobs, the pages' screenshots and DOMs too: more than the payloads above)
        ("blob bytes", f"{human_bytes(data['blob_bytes'])}, stored {human_bytes(data['stored_blob_bytes'])}  "
                       f"compression {data['compression_ratio'] or '-'}x (payloads, screenshots, DOMs, documents)"),
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
    if data.get("incomplete_pages"):
        lines.append(("incomplete", f"{counted(len(data['incomplete_pages']), 'page')} (their crawl's check missed requests: "
                                    "their replays will miss them too)"))
        for page in data["incomplete_pages"][:20]:
            missing = page["missing"]
            more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
            lines.append(("", f"{page['url']} (missing: {missing[0] if missing else '?'}{more})"))
        if len(data["incomplete_pages"]) > 20:
            lines.append(("", f"and {len(data['incomplete_pages']) - 20} more (--json lists all)"))
    for key in ("creator", "description", "license"):
        if data.get(key):
            lines.append((key, data[key]))
    for k, v in lines:
        click.echo(f"{k:>14}  {v}")


@archive_group.command("ls")
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


@archive_group.command("show")
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
        if ex.extra.get("open_stream"):
            click.echo("# an event stream still open when recorded: the body is what had come (a replay ends it there)")
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


@archive_group.command("diff")
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--exit-code", is_flag=True, help="Exit with status 1 when the archives differ.")
def archive_diff(a, b, as_json, exit_code):
    """What B adds (+), removes (-) and changes (~) relative to A, by payload digest."""
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


@archive_group.command("merge")
@click.argument("sources", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--into", "dest", required=True, type=click.Path(dir_okay=False),
              help="Destination archive; created if it does not exist.")
@click.option("--skip-session", "skip", multiple=True, metavar="ID",
              help="Leave this capture session out, with its exchanges, pages and documents (repeatable; "
                   "'archive sessions' lists them): a recording that went wrong.")
def archive_merge(sources, dest, skip):
    """Merge archives into one, deduplicating blobs; sessions already present are skipped.

    With --skip-session, the copy leaves those sessions out, and the blobs nothing refers to
    any more are removed: 'archive merge shop.wfz --into shop-fixed.wfz --skip-session ID' drops a
    session that went wrong."""
    stats = merge(list(sources), dest, skip_sessions=skip)
    said = []
    for key, n in sorted(stats.items()):
        what, _, done = key.partition("_")  # ("sessions", "left_out"): "1 session left out"
        said.append(f"{counted(n, what.removesuffix('s'), what)} {done.replace('_', ' ')}")
    click.echo(f"merged into {dest}: " + ", ".join(said))


@archive_group.command("sessions")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def archive_sessions(archive_path, as_json):
    """List the capture sessions: id, kind, start time, exchanges, pages, source."""
    rows = sessions(archive_path)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        click.echo(f"{r['id']}  {r['kind']:<8} {r['started_at'][:19]}  {counted(r['exchanges'], 'exchange'):>15}  "
                   f"{counted(r['pages'], 'page'):>10}  {r['source']}")


@archive_group.command("gc")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="Report what would be removed, and about how large the file would be, "
                                             "without writing anything.")
def archive_gc(archive_path, dry_run):
    """Remove blobs nothing refers to and compact the file."""
    stats = gc(archive_path, dry_run=dry_run)  # a dry run only reads: no lock, no write
    verb = "would remove" if dry_run else "removed"
    click.echo(f"{verb} {counted(stats['blobs_removed'], 'blob')} ({human_bytes(stats['blob_bytes_freed'])}); file "
               f"{human_bytes(stats['file_bytes_before'])} -> {'about ' if dry_run else ''}"
               f"{human_bytes(stats['file_bytes_after'])}")


@archive_group.command("pack")
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
    _require_intact(archive_path, "nothing was packed")
    if output and not allow_secrets:
        _refuse_secrets(archive_path, "the packed copy")

    with Archive.open(archive_path) as arc:
        total = arc.counts()["blobs"]
    progress, advance = progress_bar(total, "packing", unit="blobs")
    with progress:
        stats = pack(archive_path, output, level=level, progress=advance, verified=True)
    click.echo(f"packed {output or archive_path}: {stats['blobs_recompressed']} of {stats['blobs']} blobs "
               f"recompressed ({stats['deltas']} as deltas against a similar blob); "
               f"{human_bytes(stats['file_bytes_before'])} -> {human_bytes(stats['file_bytes_after'])}")


def _require_intact(archive_path, action: str) -> None:
    """One line and exit 1 when ``archive_path`` is damaged (``archive verify`` finds a problem)."""
    if os.path.isfile(archive_path):  # (the command's own check names a missing archive)
        require_intact(archive_path, action=action)


def _refuse_secrets(archive_path, what: str) -> None:
    """One line and exit 1 when ``archive_path`` holds a credential (see webfreeze.bundles.redaction)."""
    if not os.path.isfile(archive_path):
        return  # (the command's own check names a missing archive)
    try:
        check_shareable(archives=[archive_path], what=what)
    except SecretsFound as exc:
        raise click.ClickException(str(exc)) from None


@archive_group.command("redact")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="The redacted archive (new).")
@click.option("--suite", type=click.Path(file_okay=False),
              help="A suite on ARCHIVE: its reference trajectories' password values are secrets too.")
@click.option("--suite-out", type=click.Path(file_okay=False),
              help="Where the redacted suite goes (naming the redacted archive); with --suite.")
@click.option("--param", "params", multiple=True, metavar="NAME",
              help="Also redact query parameters, form fields and JSON keys called NAME; repeatable.")
@click.option("--header", "headers", multiple=True, metavar="NAME", help="Also redact header NAME; repeatable.")
@click.option("--secret-env", "secret_env", multiple=True, metavar="VAR",
              help="Also replace the value of environment variable VAR wherever it occurs (a secret you know "
                   "that nothing marks as one, such as a token in a page's script); repeatable.")
@click.option("--cassette", "cassettes", multiple=True, nargs=2, type=click.Path(dir_okay=False),
              metavar="SRC OUT", help="Redact LLM cassette SRC into OUT with the same placeholders; repeatable.")
def archive_redact(archive_path, output, suite, suite_out, params, headers, secret_env, cassettes):
    """Write a copy of ARCHIVE with its credentials replaced by stable placeholders.

    Cookie and Set-Cookie values, Authorization and other credential headers, secret query
    parameters / form fields (urlencoded and multipart) / JSON keys of requests and responses
    (token, access_token, refresh_token, api_key, password, session, CSRF tokens, ... and --param),
    values typed into password fields in --suite's reference trajectories, and --secret-env values,
    wherever they occur. The same secret gets the same placeholder (keyed hash; the key is random and never
    stored), so the redacted suite's reference trajectories still replay. See docs/bundles.md.
    """
    with Archive.open(archive_path) as arc:
        total = arc.counts()["exchanges"]
    progress, advance = progress_bar(total, "redacting", unit="exchanges")
    with progress:
        s = redact(archive_path, output, suite=suite, suite_out=suite_out, params=params, headers=headers,
                   cassettes=list(cassettes), secret_env=secret_env, progress=advance)
    kinds = ", ".join(f"{n} {k}" for k, n in s["by_kind"].items()) or "none found"
    click.echo(f"wrote {output}: {s['exchanges']} exchanges ({s['changed']} changed), {s['secrets']} secrets "
               f"replaced ({kinds})")
    secret_env_not_found(s, archive_path)
    if suite_out:
        click.echo(f"wrote {suite_out}: {s['suite_files']} files (its manifest names {output})")
    for c in s["cassettes"]:
        click.echo(f"wrote {c['out']}: {c['calls']} calls ({c['changed']} changed)")


@archive_group.command("meta")
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

