"""``webfreeze replay ...``: serve an archive offline, check it against its captures in Chromium,
and list what runs missed."""

from __future__ import annotations

import json
import os
import sys

import click

from webfreeze.archives import Archive
from webfreeze.checks.coverage import coverage, render_text
from webfreeze.cli.options import Timestamp, progress_bar
from webfreeze.common.files import check_output_file
from webfreeze.common.text import counted
from webfreeze.replayer.server import ReplayServer, load_rules_file


@click.group("replay")
def replay_group() -> None:
    """Replay an archive offline: a hermetic, deterministic HTTP(S) server, and checks against captures."""


@replay_group.command("serve")
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
            click.echo(f"# e.g. curl --proxy {srv.url} --noproxy '' --cacert {srv.ca_file} https://HOST/PATH", err=True)
            click.echo(f"# a browser: webfreeze replay browse {archive_path} --mode proxy, or Chromium with "
                       f"--proxy-server={srv.url} --proxy-bypass-list='<-loopback>' (browsers send loopback "
                       "around a proxy otherwise)", err=True)
        else:
            click.echo(f"# e.g. curl {srv.url}/2024id_/https://HOST/PATH (archived bytes), {srv.url}/2024/https://HOST/PATH "
                       f"(replayed), listing at {srv.url}/", err=True)

    server.serve_forever(on_ready=ready)
    click.echo(served_line(server.stats, server.miss_report), err=True)


# The misses `replay browse` lists when it stops (the rest counted).
BROWSE_MISSES_SHOWN = 20


def served_line(s: dict, miss_report) -> str:
    """What a replay server answered, in one line: the archive's answers (those another capture gave,
    the nearest to a request no capture matched, said apart), site models' and misses."""
    fuzzy = s.get("fuzzy", 0)
    return (f"served {counted(s['requests'], 'request')}: {s['hits']} from the archive"
            + (f" ({fuzzy} of them another capture's, the nearest: fuzzy)" if fuzzy else "")
            + f", {s['model']} by site models, {counted(s['misses'], 'miss', 'misses')}"
            + (f" (listed in {miss_report})" if s["misses"] and miss_report else ""))


def browse_flags(mode: str, replay_url: str, profile: str) -> list[str]:
    """Chromium's command-line flags for a person browsing a replay sealed from the network: every
    host name resolved to the replay, no DNS prefetch, a throwaway profile, and in proxy mode the
    replay as the proxy of everything, loopback included (Chromium bypasses proxies for loopback
    unless ``<-loopback>`` says otherwise)."""
    from webfreeze.simulator.browser import CHROMIUM_FLAGS, RENDER_FLAGS

    hostport = replay_url.split("://", 1)[1]
    flags = [f for f in CHROMIUM_FLAGS if f not in RENDER_FLAGS]
    flags += [f"--user-data-dir={profile}", "--no-default-browser-check", "--disable-domain-reliability",
              "--no-pings", "--dns-prefetch-disable", "--disable-features=NetworkPrediction,DnsOverHttps",
              f"--host-resolver-rules=MAP * {hostport}"]
    if mode == "proxy":
        # (HTTPS: the replay's certificates come from the webfreeze CA; the throwaway profile trusts them)
        flags += [f"--proxy-server={replay_url}", "--proxy-bypass-list=<-loopback>", "--ignore-certificate-errors"]
    return flags


def _start_url(archive_path: str, mode: str, replay_url: str, url: str | None, at: str | None = None) -> str:
    """What the browser opens: ``url`` (else the archive's first page record, else its first HTML
    page), as a direct URL in direct mode (at ``at``, else at that page's capture time); the
    listing when the archive has no page."""
    from webfreeze.archives.timeutil import to_timestamp14

    with Archive.open(archive_path) as arc:
        when = None
        if url is None:
            first = next(iter(arc.pages(limit=1)), None) or next(
                iter(arc.exchanges(kind="response", status=200, mime="text/html", limit=1)), None)
            if first is not None:
                url, when = first.url, first.captured_at
        elif mode == "direct":
            ex = next(iter(arc.exchanges(url=url, limit=1)), None)
            when = ex.captured_at if ex is not None else None
    if url is None:
        return replay_url + "/"
    if mode == "proxy":
        return url
    when = at or when
    ts = to_timestamp14(when) if when else "2"
    return f"{replay_url}/{ts}/{url}"


@replay_group.command("browse")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--mode", type=click.Choice(["proxy", "direct"]), default="direct", show_default=True,
              help="direct: open the archive's own URLs (/<timestamp>/<url>, rewritten and sealed); proxy: the "
                   "replay as the browser's proxy for everything, loopback included.")
@click.option("--url", help="Original URL to open (default: the archive's first page).")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of Math.random and crypto in pages.")
@click.option("--at", "when", type=Timestamp(),
              help="Target time (ISO 8601 or 1-14 digits): prefer the captures closest to it (a recorded "
                   "session's start, from 'archive sessions', to browse what that session saw).")
@click.option("--headless", is_flag=True, help="Run the browser without a window (for scripts and tests).")
def replay_browse(archive_path, mode, url, port, seed, when, headless):
    """Serve ARCHIVE and open it in a new Chromium (Debian's, a throwaway profile) set up so that
    nothing reaches the network; until the browser is closed, Ctrl-C or SIGTERM."""
    import signal
    import subprocess
    import tempfile
    import threading
    import time

    from webfreeze.cli.options import Terminated
    from webfreeze.simulator.browser import chromium_path, require_display

    path = chromium_path()
    if not headless:
        require_display("add --headless, or run it on a desktop")
    server = ReplayServer(archive_path, mode=mode, host="127.0.0.1", port=port, miss_report=None, seed=seed,
                          when=when).start()
    profile = tempfile.mkdtemp(prefix="webfreeze-browse-")
    proc = None
    try:
        start = _start_url(archive_path, mode, server.url, url, when)
        cmd = [path, *browse_flags(mode, server.url, profile), *(["--headless=new"] if headless else []), start]
        # (a SIGTERM from here on stops the replay as one while the browser runs does; while the browser
        # starts it waits: raised inside Popen after the fork, it left the browser running)
        try:
            click.echo(f"replaying {archive_path} ({server.matcher.count} exchanges) in {mode} mode at "
                       f"{server.url}", err=True)
            click.echo(f"opened {start}", err=True)
            click.echo("browser: " + " ".join(cmd[:-1]), err=True)
            # (a SIGTERM meanwhile is noted, not raised inside Popen after the fork, and taken after)
            came: list[int] = []
            main = threading.current_thread() is threading.main_thread()  # (only it may set a handler)
            was = signal.signal(signal.SIGTERM, lambda signum, frame: came.append(signum)) if main else None
            try:
                proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
            finally:
                if main:
                    signal.signal(signal.SIGTERM, was)
            if came:
                raise Terminated()
            while proc.poll() is None:
                time.sleep(0.2)
        except (KeyboardInterrupt, Terminated):
            pass
        else:
            click.echo(f"the browser exited (status {proc.returncode})", err=True)  # type: ignore[union-attr]
    finally:
        if proc is not None and proc.poll() is None:
            _stop_group(proc)
        server.stop()
        _remove_profile(profile)
    click.echo(served_line(server.stats, None), err=True)
    misses = list(server.misses)
    for m in misses[:BROWSE_MISSES_SHOWN]:  # (what a person saw missing, with why where the replay said)
        click.echo(f"  missed: {m['method']} {m['url']}" + (f" ({m['why']})" if m.get("why") else ""), err=True)
    if len(misses) > BROWSE_MISSES_SHOWN:
        click.echo(f"  and {len(misses) - BROWSE_MISSES_SHOWN} more", err=True)


def _stop_group(proc) -> None:
    """End the browser and every process it started (its own session's group)."""
    import signal
    import subprocess

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue
        try:  # the browser is gone; any helper of its left behind goes too
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        _gone(proc.pid)
        return


def _gone(group: int, wait_s: float = 5.0) -> None:
    """Wait (``wait_s`` at most) until no process of ``group`` is left to write into the profile."""
    import time

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)


def _remove_profile(profile: str) -> None:
    """Remove the browser's throwaway profile; again while a helper of the browser that was still
    ending wrote into it meanwhile (seen on a loaded machine), for a second at most."""
    import shutil
    import time

    for _ in range(20):
        shutil.rmtree(profile, ignore_errors=True)
        if not os.path.exists(profile):
            return
        time.sleep(0.05)


@replay_group.command("check")
@click.argument("archive_path", metavar="ARCHIVE", type=click.Path(dir_okay=False))
@click.option("--report", "report_dir", default="replay-check", show_default=True, type=click.Path(file_okay=False),
              help="Directory for report.json, report.html and the replayed snapshots; replaced when it holds "
                   "an earlier report, refused when it holds anything else.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the deterministic runtime.")
@click.option("--limit", type=click.IntRange(1), help="Check only the first N page records.")
@click.option("--mode", type=click.Choice(["proxy", "direct"]), default="proxy", show_default=True,
              help="proxy: Chromium with the replay as its proxy; direct: each page at its direct URL "
                   "(/<timestamp>/<url>, rewritten and sealed) in a Chromium with no proxy.")
@click.option("--port", default=0, show_default=True, type=click.IntRange(0, 65535),
              help="The port the replay listens on (0: in direct mode, where it is part of every page's "
                   "address, the first free one from 28400, so that two checks show pages the same "
                   "address; in proxy mode, any free one).")
@click.option("--rules", "rules_file", type=click.Path(dir_okay=False),
              help="JSON file of matching-rule overrides over the archive's, as replay serve takes (recorded "
                   "in the report).")
def replay_check(archive_path, report_dir, seed, limit, mode, port, rules_file):
    """Load every page record through the replay in Chromium and compare it with its capture.

    Reports requests the archive misses, DOM text similarity and screenshot pixel difference per
    page. Exit status 1 when any page has a miss or fails to load.
    """
    from webfreeze.checks.replay_check import check  # (late: Pillow and Playwright, the replay extra)

    rules = load_rules_file(rules_file) if rules_file else None

    with Archive.open(archive_path) as arc:
        total = arc.counts()["pages"]
    progress, advance = progress_bar(min(total, limit or total), "replaying pages", unit="pages")
    with progress:
        report = check(archive_path, report_dir, seed=seed, limit=limit, progress=lambda n, url: advance(1),
                       mode=mode, port=port, rules=rules)
    s = report["summary"]
    n_failed = s.get("requests_failed_at_capture") or 0
    # (a request its site never answered the recording: it replays as recorded, so it is no miss, but
    # the page replays without what that request would have shown; the crawl called it incomplete)
    at_capture = (f"{n_failed} {'request' if n_failed == 1 else 'requests'} failed at capture (its site never "
                  "answered the recording: listed per page in the report), ") if n_failed else ""
    click.echo(f"{counted(s['pages'], 'page')}: {s['pages_with_misses']} with misses "
               f"({counted(s['missed_requests'], 'request')}), "
               f"{at_capture}{s['pages_with_errors']} failed; text similarity mean {s['mean_text_similarity']}"
               + (f" ({s['pages_without_capture_text']} without capture text)" if s["pages_without_capture_text"] else "")
               + ", "
               f"pixel difference mean {s['mean_pixel_difference']}; report in {report_dir}/report.html")
    # (a failure: said above; a page with misses too, which may be what its other text asked for: a
    # router's not-found view at a direct URL fetching what the live page never did, VitePress's)
    unlike = sorted((p["text_similarity"], p["url"]) for p in report["pages"]
                    if p.get("text_similarity") is not None and p["text_similarity"] < UNLIKE_TEXT
                    and not p.get("error") and not p.get("dom_as_received"))
    received = sorted((p["text_similarity"], p["url"]) for p in report["pages"]
                      if p.get("text_similarity") is not None and p["text_similarity"] < UNLIKE_TEXT
                      and not p.get("error") and p.get("dom_as_received"))
    if received:
        click.echo(f"note: {counted(len(received), 'page')} imported from a HAR {'holds' if len(received) == 1 else 'hold'} "
                   "the document as received, not the DOM the page's scripts built, and the replayed page's "
                   f"text differs from it (lowest {received[0][0]:.3f}: {received[0][1]}): a script-drawn page "
                   "is compared with its shell", err=True)
    if unlike:  # (said, though the exit status counts misses and failures)
        lowest, where = unlike[0]
        n = len(unlike)
        click.echo(f"warning: {n} {'page replays' if n == 1 else 'pages replay'} with other text than the capture "
                   f"(text similarity "
                   f"below {UNLIKE_TEXT}; lowest {lowest:.3f}: {where})"
                   + ("; in direct mode a page that reads its own address (a client-side router, or a "
                      "WebSocket whose URL it builds from it: the report's misses say) shows something else: check "
                      "it in proxy mode" if mode == "direct" else ""), err=True)
    looped = sorted(((p["asked_again"]["count"], p["url"], p["asked_again"]) for p in report["pages"]
                     if p.get("asked_again")), key=lambda x: (-x[0], x[1]))
    if looped:  # (said: the page's text may still pass, having lost what the loop never brought)
        count, where, again = looped[0]
        n = len(looped)
        click.echo(f"warning: {n} {'page' if n == 1 else 'pages'} asked one request again and again while "
                   f"{'it' if n == 1 else 'they'} loaded (most: {count} times {again['method']} {again['url']}, on "
                   f"{where}): the replay answers a request asked more often than recorded at once, and a page "
                   "that asks again at once spins (a long poll"
                   + ("; in direct mode every ask gets the capture nearest the page's time, so a handshake "
                      "whose next answer differs, a 409 and its retry, never moves on: check it in proxy mode"
                      if mode == "direct" else "") + ")", err=True)
    if s.get("fuzzy_requests"):
        # (no miss here, where a person browsing gets the nearest capture; an agent does not)
        first = next(p for p in report["pages"] if p.get("fuzzy"))
        n = s["pages_answered_fuzzily"]
        click.echo(f"note: {n} {'page' if n == 1 else 'pages'} got {s['fuzzy_requests']} documents, XHR or WebSockets "
                   f"answered only fuzzily (another capture's, its parameters unlike the page's request): the agent "
                   f"environment's honest matching misses them, or answers them fuzzily where the archive's rules "
                   f"say a parameter may differ (ignorable_params), and its episodes are replay-compromised either "
                   f"way (first: {first['url']}: {first['fuzzy'][0]})", err=True)
    if s["pages_with_misses"] or s["pages_with_errors"]:
        sys.exit(1)


# Below this text similarity to its capture a replayed page is said to show something else (a warning;
# the exit status counts misses and failed loads). Volatile words are set aside before (stable_similarity).
UNLIKE_TEXT = 0.9


@replay_group.command("coverage")
@click.argument("run_dirs", metavar="RUN_DIR...", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the groups as JSON.")
def replay_coverage(run_dirs, as_json):
    """List the requests of the runs' episodes that missed or were answered fuzzily, grouped by host
    and path pattern, with counts and the tasks that made them: what to record next."""
    result = coverage(list(run_dirs))
    click.echo(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False) if as_json else render_text(result))

