"""``webfreeze record ...``: record live traffic into an archive (proxy, crawl, session, the CA).

The recorder's modules are imported inside the commands: they need the ``record`` extra
(mitmproxy, Playwright), which the other commands do not."""

from __future__ import annotations

import json
import re
import shlex
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import click

from webfreeze.archives import Archive
from webfreeze.bundles.redaction import redact_recording
from webfreeze.cli.options import EXIT_INCOMPLETE, http_credentials_option, not_found, progress_bar, usage_checked
from webfreeze.common.resolve import parse_resolve
from webfreeze.common.text import counted


def redact_options(f):
    """--redact and what it takes (as 'archive redact'): --param, --header, --secret-env."""
    for opt in reversed([
        click.option("--redact", is_flag=True,
                     help="Afterwards, replace the archive's credentials (and a session's typed password values) by "
                          "placeholders, as 'archive redact'."),
        click.option("--param", "redact_params", multiple=True, metavar="NAME",
                     help="--redact: also query parameters, form fields and JSON keys called NAME; repeatable."),
        click.option("--header", "redact_headers", multiple=True, metavar="NAME",
                     help="--redact: also header NAME; repeatable."),
        click.option("--secret-env", "secret_env", multiple=True, metavar="VAR",
                     help="--redact: also the value of environment variable VAR, wherever it occurs; repeatable."),
    ]):
        f = opt(f)
    return f


def _check_redact_options(redact, params, headers, secret_env) -> None:
    if (params or headers or secret_env) and not redact:
        raise click.BadParameter("--param, --header and --secret-env go with --redact", param_hint="--redact")
    if redact:
        from webfreeze.bundles.redaction import secret_env_values

        usage_checked(secret_env_values, secret_env)  # before anything is recorded


@click.group("record")
def record_group() -> None:
    """Record live traffic into an archive (a recording proxy on mitmproxy)."""


@record_group.command("proxy")
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
    from webfreeze.recorder.proxy import RecordingProxy, check_port, recording_into

    table = usage_checked(parse_resolve, resolve)
    check_port(host, port)  # before the archive is made
    with recording_into(archive_path) as arc:
        proxy = RecordingProxy(arc, host=host, port=port, resolve=table, seed_pages=True)
        proxy.run(on_ready=lambda p: click.echo(
            f"recording into {archive_path} through proxy {p.url} (session {p.session_id}); Ctrl-C to stop", err=True))
        click.echo(f"recorded {counted(proxy.recorder.recorded, 'exchange')}", err=True)


def _crawl_state(result, check: bool) -> str:
    """How a crawl ended, in its summary's parentheses: incomplete (pages that miss requests or did
    not load), stopped at --max-pages (said also beside an incomplete state: the queue left is as
    much the user's to know), complete."""
    from webfreeze.recorder.crawl import load_failures

    cut = (f"stopped at --max-pages with {result.queued} URLs queued; run again with a higher --max-pages to go on"
           if result.queued else "")
    if result.incomplete:
        state = f"incomplete: {_pages(len(result.incomplete), 'misses', 'miss')} requests"
    elif load_failures(result.failed):
        state = (f"incomplete: {counted(len(load_failures(result.failed)), 'page')} did not load; crawl again into this "
                 "archive to retry them, or leave them out with --exclude")
    else:
        return cut or ("complete" if check else "complete, unchecked")
    return f"{state}; {cut}" if cut else state


@record_group.command("crawl")
@click.argument("url")
@click.option("--archive", "archive_path", required=True, type=click.Path(dir_okay=False),
              help="Archive to record into; created if it does not exist.")
@click.option("--depth", default=2, show_default=True, type=click.IntRange(0, 50), help="Link depth from URL.")
@click.option("--max-pages", default=100, show_default=True, type=click.IntRange(1),
              help="Stop after visiting this many URLs (pages, failed pages and downloads all count).")
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
@click.option("--exclude", "exclude", multiple=True, metavar="PATTERN",
              help="Do not follow links whose URL matches this regular expression (e.g. '/logout', "
                   "'[?&]format=', 'action=edit'); repeatable.")
@http_credentials_option
@click.option("--login-script", "login_script", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="A Python file defining run(page) that signs in through the site's form (a password read "
                   "from the environment, never written in it): run first on URL, then every page is "
                   "visited with its cookies.")
@click.option("--allow-incomplete", is_flag=True,
              help="Exit 0 even when pages miss requests or did not load (otherwise exit status 3).")
@redact_options
def record_crawl(url, archive_path, depth, max_pages, scope, resolve, screenshots, check, recheck, exclude,
                 http_credentials, login_script, allow_incomplete, redact, redact_params, redact_headers, secret_env):
    """Crawl URL breadth-first in real Chromium through the recording proxy (1920x1080).

    Each page gets a screenshot and a DOM snapshot; every request is recorded. Each page is then
    loaded again from the archive alone, and what that misses is fetched live and checked again; a
    page still missing something is recorded but incomplete (repair with --recheck). A URL answered
    with a download (a CSV export) is recorded and listed as a download. A start page that fails
    (network error, 4xx/5xx) is an error and records nothing; pages failing later are listed.
    Running the same crawl again resumes it.

    Exit status: 0 complete (or stopped at --max-pages), 3 incomplete (pages that miss requests or
    did not load; 0 with --allow-incomplete), 1 an error, 2 a bad option.
    """
    from webfreeze.recorder.crawl import check_url, crawl, exclude_matcher, load_failures, scope_matcher
    from webfreeze.recorder.crawl import recheck as run_recheck
    from webfreeze.recorder.proxy import STREAM_MISSING
    from webfreeze.simulator.replay_route import WEBSOCKET_MISSING, WEBSOCKET_PARTED

    usage_checked(check_url, url)
    usage_checked(scope_matcher, url, scope)  # a bad regex fails before anything starts
    usage_checked(exclude_matcher, exclude)
    _check_redact_options(redact, redact_params, redact_headers, secret_env)
    table = usage_checked(parse_resolve, resolve)
    if recheck and login_script:
        raise click.UsageError("--login-script signs in before pages are visited; --recheck visits none")
    if recheck:
        with Archive.open(archive_path) as arc:
            total = arc.counts()["pages"]
        progress, advance = progress_bar(total, "rechecking", unit="pages")
        with progress:
            result = run_recheck(archive_path, url, depth=depth, scope=scope, resolve=table,
                                 progress=lambda done, _url: advance(1), credentials=http_credentials)
        click.echo(f"{counted(result.pages, 'page')} rechecked; {result.exchanges_this_run} exchanges recorded this run; "
                   f"{len(result.incomplete)} still incomplete")
    else:
        progress, advance = progress_bar(max_pages, "crawling", unit="pages")
        with progress:
            result = crawl(archive_path, url, depth=depth, max_pages=max_pages, scope=scope,
                           progress=lambda done, _url: advance(1), resolve=table, screenshots=screenshots, check=check,
                           exclude=exclude, credentials=http_credentials, login_script=login_script)
        state = _crawl_state(result, check)
        failed = f", {len(result.failed)} failed" if result.failed else ""
        downloads = f", {len(result.downloads)} downloads" if result.downloads else ""
        click.echo(f"{'resumed, ' if result.resumed else ''}{counted(result.pages_this_run, 'page')} and "
                   f"{counted(result.exchanges_this_run, 'exchange')} recorded this run; {counted(result.pages, 'page')} in total"
                   f"{downloads}{failed} ({state})")
        for failed_url, why in result.failed:
            click.echo(f"  failed: {failed_url} ({why})")
        for download_url, name, size in result.downloads:
            click.echo(f"  download: {download_url} ({name}, {size} bytes)")
        if result.unanchored:
            shown = ", ".join(result.unanchored[:3]) + (", ..." if len(result.unanchored) > 3 else "")
            click.echo(f"note: {len(result.unanchored)} links name a fragment that is no element of their page "
                       f"({shown}): a client-side router's routes? A crawl follows only hash routes (#/path) "
                       "and records the page itself; reach others with 'record session'", err=True)
        for page_url, resources in result.broken:
            click.echo(f"  broken: {page_url} ("
                       + "; ".join(f"{kind} {res} answered {code}" for kind, res, code in resources) + ")")
        if result.broken:
            n = len(result.broken)
            click.echo(f"warning: {n} {'page was' if n == 1 else 'pages were'} served without "
                       f"{'its' if n == 1 else 'their'} own scripts or style sheets (the site answered them with an "
                       "error; recorded as given, listed as broken: is the site's deployment whole?)", err=True)
    if redact:
        s = redact_recording(archive_path, params=redact_params, headers=redact_headers, secret_env=secret_env)
        click.echo(f"redacted {archive_path}: {s['secrets']} secrets replaced by placeholders")
        not_found(s, archive_path)
    for page_url, missing in result.incomplete:
        click.echo(f"  incomplete: {page_url} (missing: {', '.join(missing)})")
    sockets_only = [u for u, missing in result.incomplete if all(WEBSOCKET_MISSING in m for m in missing)]
    streams_only = [u for u, missing in result.incomplete
                    if all(WEBSOCKET_MISSING in m or STREAM_MISSING in m for m in missing)]
    if result.incomplete and len(sockets_only) == len(result.incomplete):
        # nothing a live fetch could repair: a WebSocket with no recording, or whose conversation parted
        parted = any(WEBSOCKET_PARTED in m for _, missing in result.incomplete for m in missing)
        # (a message that differs in a clock, a random id or a pointer's coordinates: a rule sets it aside)
        rule = ("; where what differs comes from a clock, a random id or a pointer's coordinates, the replay "
                "rule socket_volatile sets it aside, and --recheck then checks again") if parted else ""
        click.echo(f"{_pages(len(sockets_only), 'opens', 'open')} a WebSocket the replay cannot serve (not recorded, or the "
                   f"page's messages part from the recording; --recheck cannot repair that{rule}; "
                   "docs/replay-and-environment.md, \"WebSockets\")", err=True)
    elif result.incomplete and len(streams_only) == len(result.incomplete):
        # nor a stream that never ends: it is never complete, so never recorded
        click.echo(f"{_pages(len(streams_only), 'keeps', 'keep')} a stream that never ends open (or a WebSocket), which is "
                   "never recorded (--recheck cannot repair that; docs/recording.md)", err=True)
    elif result.incomplete and all(_unresolved(m) for _, missing in result.incomplete for m in missing):
        # the proxy could not resolve their names: a --recheck from this machine fetches them in vain
        names = sorted({urlsplit(_unresolved(m)).hostname or "" for _, missing in result.incomplete for m in missing})
        click.echo(f"{_pages(len(result.incomplete), 'misses', 'miss')} only requests to names that do not resolve from this "
                   f"machine ({', '.join(names)}): the recording could not reach them, and a --recheck here cannot "
                   "either (record where they resolve, or take the pages without them)", err=True)
    elif result.incomplete and login_script:  # (--recheck cannot sign in)
        click.echo(f"{_pages(len(result.incomplete), 'replays', 'replay')} with requests missing; --recheck cannot sign in: "
                   "record them again with --login-script (into a new archive)", err=True)
    elif result.incomplete:
        click.echo(f"{_pages(len(result.incomplete), 'replays', 'replay')} with requests missing; repair with: "
                   + _recheck_command(url, archive_path, depth, scope, resolve,
                                      (redact_params, redact_headers, secret_env) if redact else None), err=True)
    elif load_failures(result.failed):
        click.echo(f"{counted(len(load_failures(result.failed)), 'page')} did not load (listed above as failed)", err=True)
    incomplete = bool(result.incomplete) if recheck else not result.captured_all
    if incomplete and not allow_incomplete:
        sys.exit(EXIT_INCOMPLETE)


# How a name that does not resolve reads in the upstream failure the proxy recorded (the resolver's
# messages on Linux, glibc and musl, and macOS).
UNRESOLVED = re.compile(r"\((?:\[Errno -?\d+\] )?(?:Name or service not known|Temporary failure in name resolution|"
                        r"No address associated with hostname|nodename nor servname provided, or not known|"
                        r"Name does not resolve)\)$")


def _pages(n: int, one: str, many: str) -> str:
    """``n`` pages and the verb that goes with them: ``1 page misses``, ``2 pages miss``."""
    return f"{counted(n, 'page')} {one if n == 1 else many}"


def _unresolved(missing: str) -> str | None:
    """The URL of a crawl's ``missing`` entry (``URL (why)``) whose name did not resolve, else None."""
    if not UNRESOLVED.search(missing):
        return None
    return missing.split(" (", 1)[0]


def _recheck_command(url, archive_path, depth, scope, resolve, redaction=None) -> str:
    """The ``--recheck`` command line for this crawl: its own ``--depth`` and ``--scope`` (they name
    its state document), ``--resolve``, ``--http-credentials`` and ``--redact`` with what it takes
    (``redaction``: the values of ``--param``, ``--header`` and ``--secret-env``; what the repair
    fetches is then redacted as the crawl was), so it runs as printed."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    args = ["webfreeze", "record", "crawl", url, "--archive", str(archive_path)]
    for name, value in (("depth", depth), ("scope", scope)):  # (as given; a default stays one)
        if ctx.get_parameter_source(name) is not ParameterSource.DEFAULT:
            args += [f"--{name}", str(value)]
    for entry in resolve:
        args += ["--resolve", entry]
    credentials = ctx.meta.get("http_credentials")
    if credentials:
        args += ["--http-credentials", credentials]
    if redaction is not None:  # (--param, --header, --secret-env values)
        args.append("--redact")
        for option, values in zip(("--param", "--header", "--secret-env"), redaction):
            for value in values:
                args += [option, value]
    return shlex.join([*args, "--recheck"])


@record_group.command("session")
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
@http_credentials_option
@redact_options
def record_session(url, archive_path, trajectory, headed, script, resolve, instruction, http_credentials, redact,
                   redact_params, redact_headers, secret_env):
    """Record a browsing session and log every action as a reference trajectory.

    Clicks, text entry, selects, form submissions, scrolls and navigations are logged with the
    target's role, accessible name, CSS path and text, plus URL and time.
    """
    from webfreeze.recorder.crawl import check_url
    from webfreeze.recorder.errors import SessionScriptError
    from webfreeze.recorder.session import record_session as run_session

    usage_checked(check_url, url)
    _check_redact_options(redact, redact_params, redact_headers, secret_env)
    if not headed and not script:
        raise click.UsageError("a session needs --headed (a person drives) or --script FILE",
                               click.get_current_context())
    if instruction is not None and not instruction.strip():
        raise click.BadParameter("the instruction must not be empty", param_hint="--instruction")
    try:
        result = run_session(archive_path, url, trajectory, headed=headed, script=script,
                             resolve=usage_checked(parse_resolve, resolve), instruction=instruction,
                             credentials=http_credentials, warn=lambda line: click.echo(f"warning: {line}", err=True))
    except SessionScriptError as exc:
        if not redact or exc.recorded is None or not Path(archive_path).exists():
            raise
        # what the failed script recorded stays in the archive: redacted too, as --redact asked
        # (the steps it logged name the passwords it typed, whatever their fields are called)
        with tempfile.TemporaryDirectory(prefix="wf-redact-") as tmp:
            steps = Path(tmp) / "steps.json"
            steps.write_text(json.dumps({"kind": "reference_trajectory", "steps": exc.recorded}), encoding="utf-8")
            s = redact_recording(archive_path, [steps], params=redact_params, headers=redact_headers,
                                 secret_env=secret_env)
        raise SessionScriptError(f"{exc}; redacted {archive_path}: {s['secrets']} secrets replaced by "
                                 "placeholders") from None
    click.echo(f"{len(result['steps'])} steps written to {trajectory}; exchanges recorded into {archive_path} "
               f"(session {result['archive_session']})")
    if redact:
        s = redact_recording(archive_path, [trajectory], params=redact_params, headers=redact_headers,
                             secret_env=secret_env)
        click.echo(f"redacted {archive_path} and {trajectory}: {s['secrets']} secrets replaced by placeholders")
        not_found(s, archive_path)


@record_group.command("ca")
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

