"""``record crawl``: real Chromium through the recording proxy, breadth-first, resumable.

The crawl runs Chromium's headless shell (what Playwright runs for headless Chromium; a fresh tab
costs a third of the full browser's); a PDF, which the shell takes for a download, is captured and
checked in the full browser (:class:`FullBrowser`, started the first time one is met), in its viewer.

Every page visited gets a page record (screenshot, DOM snapshot, title) and every request the
browser makes is recorded by the proxy. Before its record is written, each page is checked: loaded
again from the archive alone (:mod:`.page_check`), what that misses fetched live and checked again;
a page still missing something is recorded and marked incomplete. The crawl's frontier is a JSON
document in the archive, updated in the same transaction as each page record, so a crawl killed
at any moment resumes where it stopped when run again with the same start URL, scope and depth
(a page whose check was under way is visited again). :func:`recheck` repairs an archive later.

A URL that fails (an authentication refused, a navigation cut short) or downloads is followed by
a new tab (the context, its cookies and cache, stay): it leaves nothing behind that could break
the next page.
A URL the site answers with a download (``Content-Disposition: attachment``, a CSV export) is not
a page: its exchange is recorded, and it is listed in the state's ``downloads``, not as failed.
``exclude`` patterns keep links out of the crawl (a logout link, an export, an edit form).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

from webfreeze.archives import ArchiveError
from webfreeze.archives.maintenance import RECHECK_DOCUMENT
from webfreeze.archives.timeutil import now
from webfreeze.common.aria import OPEN_ROOTS_JS
from webfreeze.common.http import page_url

from .errors import CrawlError, RecordError, SeedFailed, SiteUnreachable
from .page_check import CHECK_TRIES, SAFE_METHODS, PageChecker
from .proxy import STREAM_MISSING, RecordingProxy, recording_into
from .session import one_line_error, script_place

STATE_VERSION = 1
SCREENSHOTS = ("none", "viewport", "full")
WEBP_MAX = 16383  # the WebP format's largest width or height
# Visits of a URL whose capture timed out (a load or a screenshot past 30 s: a loaded machine), each
# in a new tab, before it counts as a page that did not load.
CAPTURE_TRIES = 2
# Captures of a page again after its check's live fetches repaired what its load lost (a script
# whose kept-alive connection the server closed as the proxy reused it, the proxy's 502 recorded).
RECAPTURES = 2
# Lossless WebP effort: Pillow's ``method`` (0-6) and, in lossless mode, ``quality`` (0-100) trade
# encode time for bytes; measured in benchmarks/crawl_size.py (docs/recording.md has the numbers).
WEBP_METHOD = 4
WEBP_EFFORT = 80


@dataclass
class CrawlResult:
    pages: int  # pages recorded (failed ones are not), this run and earlier runs of the same crawl
    pages_this_run: int
    exchanges_this_run: int
    resumed: bool
    complete: bool
    failed: list = field(default_factory=list)  # [url, why] of every page that failed, all runs
    incomplete: list = field(default_factory=list)  # [url, [missing...]] of recorded pages that miss requests
    queued: int = 0  # URLs still queued (a crawl stopped by max_pages)
    downloads: list = field(default_factory=list)  # [url, file name, bytes] of URLs answered with a download
    # links (and a start URL) of this run whose fragment names no element of their page and is no
    # hash route (TiddlyWiki's permalinks, #Apples): not followed, the page itself being recorded
    unanchored: list = field(default_factory=list)
    # [url, [[kind, resource url, status], ...]] of recorded pages whose own scripts or style sheets the
    # site answered with an error (a deployment whose server does not serve its new hashed files yet):
    # recorded as given, and the replay answers the same, so the capture is whole; said all the same
    broken: list = field(default_factory=list)

    @property
    def captured_all(self) -> bool:
        """Whether every page visited replays whole and none failed to load: what the crawl set out
        to capture is in the archive (a crawl stopped by ``max_pages`` may still say so)."""
        return not self.incomplete and not load_failures(self.failed)


# The resources that are a page's own code: without them it shows a shell (no router, no styles).
CODE_TYPES = ("script", "stylesheet")


def _note_navigation(answers: dict, response) -> None:
    """Note the headers of an answer to a navigation of the tab's own (its URL -> headers)."""
    try:
        request = response.request
        if request.is_navigation_request() and request.frame.parent_frame is None:
            answers[response.url] = response.headers
    except Exception:  # (a response of a frame already gone)
        pass


def _note_broken(broken: dict, response) -> None:
    """Note a script or style sheet of the page the site answered with an error status (4xx/5xx)."""
    try:
        kind = response.request.resource_type
        if kind in CODE_TYPES and response.status >= 400 and response.url.startswith(("http:", "https:")):
            broken[(kind, response.url)] = response.status
    except Exception:  # (a response of a frame already gone)
        pass


def scope_prefix(start: str) -> str:
    """The ``prefix`` scope of a start URL, as Browsertrix has it: the URL up to and including the
    last ``/`` of its path (``.../library/index.html`` covers ``.../library/``)."""
    parts = urlsplit(start)
    path = parts.path or "/"
    return f"{parts.scheme}://{parts.netloc}{path[:path.rfind('/') + 1]}"


def page_failure(status) -> str | None:
    """Why a visited page counts as failed (a network error, a 4xx/5xx answer), or None."""
    if isinstance(status, str):
        return status.removeprefix("error: ")
    if status is None:
        return "no response"
    return f"HTTP {status}" if status >= 400 else None


def _same_page(a: str, b: str) -> bool:
    """Whether two URLs name one page as a browser asks for it (``http://a.test`` is
    ``http://a.test/``; the fragment is not sent)."""
    def key(u: str) -> tuple:
        parts = urlsplit(u)
        return parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query
    return key(a) == key(b)


def redirect_failure(url: str, ended: str, failure: str, proxy: RecordingProxy) -> str:
    """``failure`` of a visit to ``url``, said of where its redirects led when that is elsewhere
    (``ended``): the URL that failed, and a hint when ``--resolve`` does not name its host."""
    if _same_page(ended, url):
        return failure
    if failure.startswith("HTTP "):
        return f"it redirected to {ended}, which answered {failure}"
    return f"it redirected to {ended}, which {'' if failure.startswith('did not') else 'failed: '}{failure}" \
           f"{proxy.resolve_hint(ended)}"


def load_failures(failed: list) -> list:
    """The failed pages that did not load at all (a network error, a timeout, no response), as
    opposed to those the site answered with an error status, which the archive holds as the site
    gave them: a crawl with such pages did not capture what it set out to."""
    return [f for f in failed if not str(f[1]).startswith("HTTP ")]


def scope_matcher(start: str, scope: str) -> Callable[[str], bool]:
    """``host``: same host and port; ``prefix``: URLs under the start URL's folder (:func:`scope_prefix`);
    anything else: a regular expression searched in the URL."""
    start_parts = urlsplit(start)
    if scope == "host":
        return lambda u: urlsplit(u).netloc == start_parts.netloc and urlsplit(u).scheme in ("http", "https")
    if scope == "prefix":
        prefix = scope_prefix(start)
        return lambda u: u.startswith(prefix)
    try:
        rx = re.compile(scope)
    except re.error as exc:
        raise CrawlError(f"invalid --scope regular expression {scope!r}: {exc}") from None
    return lambda u: bool(rx.search(u))


def exclude_matcher(patterns) -> Callable[[str], bool]:
    """Whether a URL is left out by one of ``patterns`` (regular expressions searched in the URL,
    as ``--scope``'s), e.g. ``/logout``, ``[?&]format=``, ``action=edit``."""
    compiled = []
    for pattern in patterns or ():
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise CrawlError(f"invalid --exclude regular expression {pattern!r}: {exc}") from None
    return lambda u: any(rx.search(u) for rx in compiled)


def credentials_for(start: str, credentials: tuple[str, str] | None) -> dict | None:
    """Playwright's ``http_credentials`` for a recording that starts at ``start``: the answer to an
    authentication challenge (basic or digest) from the start URL's origin, never from another;
    None without ``credentials`` (user, password). See :func:`open_context`."""
    if credentials is None:
        return None
    parts = urlsplit(start)
    return {"username": credentials[0], "password": credentials[1], "origin": f"{parts.scheme}://{parts.netloc}"}


def basic_authorization(credentials: tuple[str, str]) -> str:
    """The ``Authorization`` value of HTTP basic authentication for (user, password)."""
    import base64

    return "Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode("ascii")


def open_context(browser, start: str, credentials: tuple[str, str] | None):
    """The recording's browser context; with ``credentials``, logged in to the start URL's origin:
    every request to that origin carries ``Authorization: Basic ...`` from the start (so the
    archive holds the pages as the logged-in browser got them, not a ``401`` before each, and a
    replay answers them without a password), and a challenge from it (digest) is answered too.
    No other origin ever gets them."""
    from webfreeze.simulator.browser import new_context

    auth = credentials_for(start, credentials)
    if auth is None:
        return new_context(browser)
    context = new_context(browser, http_credentials=auth)
    basic = basic_authorization(credentials)

    def send(route, request):
        headers = {k: v for k, v in request.headers.items() if k.lower() != "authorization"}
        route.continue_(headers={**headers, "authorization": basic})  # (cookies are added after this)

    context.route(f"{auth['origin']}/**", send)
    return context


# Why a page answered 401 with a challenge (WWW-Authenticate) failed: the crawl had no credentials
# for it, or not the right ones. Not a page the site answered with an error: what a person would see
# after signing in was not captured (the full browser fails such a load, the shell shows the 401).
AUTH_REFUSED = "authentication refused (HTTP 401 with a challenge: give --http-credentials, or the right ones)"


def auth_refused(status, headers: dict | None) -> bool:
    """Whether a visit's answer is a refused authentication: a 401 with a challenge the browser
    answers with credentials (Basic, Digest), or the full browser's own error for it."""
    if isinstance(status, str):
        return "ERR_INVALID_AUTH_CREDENTIALS" in status
    challenge = (headers or {}).get("www-authenticate") or ""
    return status == 401 and re.search(r"(^|[\s,])(basic|digest)\b", challenge, re.IGNORECASE) is not None


# A document the headless shell (the crawl's browser) takes for a download and the full browser
# shows in a page of its own: a PDF, in its viewer (the shell has no PDF viewer).
SHOWN_BY_FULL_BROWSER = ("application/pdf", "application/x-pdf")


def shown_by_full_browser(headers: dict | None) -> bool:
    """Whether a navigation's answer (its response headers, names in lower case) is a document the
    full browser shows and the headless shell downloads: a PDF sent inline, not as an attachment."""
    if not headers:
        return False
    kind = (headers.get("content-type") or "").split(";")[0].strip().lower()
    inline = not (headers.get("content-disposition") or "").strip().lower().startswith("attachment")
    return kind in SHOWN_BY_FULL_BROWSER and inline


class FullBrowser:
    """The full Chromium beside a crawl's headless shell, started the first time a page needs it
    (:func:`shown_by_full_browser`): through the same recording proxy, its context logged in as
    the shell's (the same credentials; the shell's cookies copied in before each visit)."""

    def __init__(self, pw, proxy_url: str, start: str, credentials: tuple[str, str] | None, shell_context=None):
        from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

        self._pw, self._proxy_url, self._start, self._credentials = pw, proxy_url, start, credentials
        self._shell_context = shell_context
        self._browser = self._context = None
        try:  # (the executable, and whether it is another than the shell: else a PDF stays a download)
            path = chromium_path()
            self.distinct = path != chromium_path(shell=True)
        except BrowserUnavailable:
            path, self.distinct = "", False
        self.name = os.path.basename(path)

    def browser(self):
        from webfreeze.simulator.browser import launch_chromium

        if self._browser is None:
            self._browser = launch_chromium(self._pw, proxy=self._proxy_url)
        return self._browser

    def new_page(self):
        """A new tab of the full browser's context, with the shell's cookies as they are now."""
        from webfreeze.simulator.browser import track_live_timers

        if self._context is None:
            self._context = open_context(self.browser(), self._start, self._credentials)
            track_live_timers(self._context)
        if self._shell_context is not None:
            cookies = self._shell_context.cookies()
            if cookies:
                self._context.add_cookies(cookies)
        return self._context.new_page()

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
        self._browser = self._context = None


def check_url(url: str) -> None:
    """Fail in one line on a start URL that is not a well-formed http(s) URL."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise RecordError(f"{url}: not a valid URL (it holds a space or a control character)")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise RecordError(f"{url}: not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RecordError(f"{url}: not an http(s) URL")


def crawl_state_name(start: str, scope: str, depth: int) -> str:
    """The name of a crawl's state document: one per (start URL, scope, depth), so running the same
    crawl again resumes it."""
    return "crawls/" + hashlib.sha256(f"{start}\n{scope}\n{depth}".encode()).hexdigest()[:16] + ".json"


def compact_screenshot(png: bytes) -> bytes:
    """A page record's screenshot as lossless WebP (the same pixels in about a quarter of the
    PNG's bytes; ``replay check`` compares decoded pixels, so nothing is lost); the PNG itself when
    WebP cannot hold it (taller or wider than 16,383 px) or Pillow cannot write WebP."""
    import io

    from PIL import Image, features

    if not features.check("webp"):
        return png
    img = Image.open(io.BytesIO(png))
    if max(img.size) > WEBP_MAX:
        return png
    out = io.BytesIO()
    img.save(out, "WEBP", lossless=True, quality=WEBP_EFFORT, method=WEBP_METHOD)
    data = out.getvalue()
    return data if len(data) < len(png) else png


def hsts_upgrade(asked: str, landed: str | None, proxy: RecordingProxy) -> str | None:
    """The one-line explanation when ``asked`` (an http:// URL) ended on https:// for the same name
    and the proxy's TLS handshake with that name failed: Chromium upgraded the request on its own
    (the name is on its HSTS preload list, or sent Strict-Transport-Security before) and the server
    behind the name speaks plain HTTP. None otherwise."""
    a = urlsplit(asked)
    b = urlsplit(landed or "")
    host = a.hostname or ""
    if a.scheme != "http" or b.scheme != "https" or (b.hostname or "") != host:
        return None
    why = proxy.tls_failed(host)
    if why is None:
        return None
    return (f"{host} is HSTS-preloaded (or sent Strict-Transport-Security): Chromium asks for https://{host}/ "
            f"on its own, and the server behind it does not speak TLS ({why}); serve it over TLS "
            f"(--resolve {host}:443=ADDRESS:PORT) or record it under another name")


def _download(downloads: list) -> tuple[str, int] | str:
    """(file name, bytes) of the download a visit started, once it has finished; a string saying
    why when it failed."""
    download = downloads[0]
    failure = download.failure()  # (waits for the download to end)
    if failure:
        return f"download failed: {failure}"
    size = os.path.getsize(download.path())
    name = download.suggested_filename
    download.delete()
    return name, size


# The links of a page to itself whose fragment names no element of it (an anchor names one): a
# client-side router's routes, as TiddlyWiki's permalinks (#Apples) are.
UNANCHORED_JS = """els => {
__OPEN_ROOTS__  const roots = openRoots();
  return els.filter((e) => {
    if (e.hash.length < 2 || e.href.split('#')[0] !== location.href.split('#')[0]) return false;
    let id = e.hash.slice(1);
    try { id = decodeURIComponent(id); } catch (err) { /* kept as written */ }
    // (an element of an open shadow root counts: a web component's own anchor)
    return !roots.some((r) => r.getElementById(id) || r.querySelector('[name="' + CSS.escape(id) + '"]'));
  }).map((e) => e.href);
}""".replace("__OPEN_ROOTS__", OPEN_ROOTS_JS)


def not_a_route(url: str) -> bool:
    """Whether ``url``'s fragment is one :func:`page_url` drops and no route syntax (``#!``, ``#/``:
    a template's placeholder link, the application's first route) either: a fragment a crawl says
    it did not follow."""
    fragment = urldefrag(url)[1]
    return bool(fragment) and page_url(url) != url and not fragment.startswith(("!", "/"))


def _capture(page, url: str, screenshots: str):
    """Visit ``url`` and capture it once it has loaded what it will still load: (status, title,
    DOM, screenshot, links, final URL, the links :data:`UNANCHORED_JS` finds)."""
    from webfreeze.simulator.browser import still_screenshot, track_inflight, track_websocket_handshakes

    from .page_check import wait_loaded

    inflight = track_inflight(page)
    # (a WebSocket's handshake too: what its server sends at once is part of the page captured)
    stop_sockets = track_websocket_handshakes(page, inflight)
    try:
        if urlsplit(url).fragment and urldefrag(page.url)[0] == urldefrag(url)[0]:
            page.goto("about:blank")  # (a route of the document shown: load it anew, as a person's visit would)
        response = page.goto(url, wait_until="load", timeout=30_000)
        status = response.status if response else None
        landed = response.url if response else page.url
        wait_loaded(page, inflight)
        title = page.title()
        # (open shadow roots in, as declarative ones: what a web component draws in its own root is
        # text the page shows; a page without one gets content()'s very bytes)
        dom = page.content(include_shadow=True).encode("utf-8")
        shot = None if screenshots == "none" else still_screenshot(page, full_page=screenshots == "full")
        links = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        unanchored = [u for u in page.eval_on_selector_all("a[href]", UNANCHORED_JS) if not_a_route(u)]
        return status, title, dom, shot, links, landed, unanchored
    finally:
        stop_sockets()
        for event, handler in inflight.handlers():
            page.remove_listener(event, handler)


def load_login_script(script):
    """The ``run(page)`` of a crawl's ``--login-script`` file; :class:`CrawlError` in one line when
    the file is missing, does not load or defines no ``run``."""
    import runpy

    if not Path(script).is_file():
        raise CrawlError(f"--login-script {script}: no such script (or not a file)")
    try:
        run = runpy.run_path(str(script)).get("run")
    except (Exception, SystemExit) as exc:  # the script's own error, in one line
        raise CrawlError(f"--login-script {script}: cannot load it: {one_line_error(exc)}") from None
    if not callable(run):
        raise CrawlError(f"--login-script {script}: defines no run(page) function")
    return run


def _log_in(browser, context, start: str, run, script, credentials=None) -> None:
    """Run the login script on the start URL in a browser context of its own, then give the crawl's
    ``context`` the cookies it got. Called while the recording proxy is paused: the login's
    exchanges (the form's POST with the password; the start URL's logged-out redirect to the login
    page) are not recorded, and the crawl's context, whose cache the login did not fill, fetches
    through the recording proxy every resource its pages use."""
    from playwright.sync_api import Error as PlaywrightError

    login = open_context(browser, start, credentials)
    try:
        page = login.new_page()
        page.goto(start, wait_until="load")
        run(page)
        context.add_cookies(login.cookies())
    except (Exception, SystemExit) as exc:  # (PlaywrightError, an assertion, sys.exit in the script)
        place = script_place(exc, script)
        raise SeedFailed(f"--login-script {script} failed{' at ' + place if place else ''}: {one_line_error(exc)}") from None
    finally:
        try:
            login.close()
        except PlaywrightError:
            pass


def _cookie_header(context, url: str) -> str | None:
    """The ``Cookie`` value the crawl's browser would send to ``url`` (its login's session)."""
    jar = context.cookies([url])
    return "; ".join(f"{c['name']}={c['value']}" for c in jar) or None


# How long a live fetch of what a check missed may take, its whole answer: a stream that never ends
# (a log streamed as lines) is given up then, and stays missing. (Server-sent events a page keeps
# open, Gradio's heartbeat, are recorded as they stand instead: recorder/addon.py.)
# $WEBFREEZE_STREAM_DEADLINE_S sets another (seconds; a site whose answers take longer, a test).
LIVE_FETCH_DEADLINE_S = 60


def live_fetch_deadline() -> float:
    """:data:`LIVE_FETCH_DEADLINE_S`, or ``$WEBFREEZE_STREAM_DEADLINE_S`` when it is a positive number."""
    try:
        value = float(os.environ.get("WEBFREEZE_STREAM_DEADLINE_S", ""))
    except ValueError:
        return LIVE_FETCH_DEADLINE_S
    return value if value > 0 else LIVE_FETCH_DEADLINE_S


def loaded_at(arc, url: str, session_id: str | None, until: str | None = None) -> str | None:
    """When a page was last loaded: the capture time of its document (the latest ``GET`` of its
    URL, fragment dropped, in ``session_id``, up to ``until``; in any session when that one has
    none), or None. Its check replays it as at this time, as ``replay check`` does: the page's
    own requests come after it, so repeats of a request (Node-RED's ``GET /nodes``, first as JSON,
    then as HTML) are answered in the order the page made them, from the first; replayed as at a
    later time, each would get the last."""
    url = urldefrag(url).url
    for session in (session_id, None):
        found = [e.captured_at for e in arc.exchanges(url=url, method="GET", session=session, until=until)]
        if found:
            return max(found)
    return None


def _self_check(checker, proxy: RecordingProxy, url: str, when: str | None = None,
                auth: tuple[str, str] | None = None, cookies=None, later_now: bool = False) -> tuple[list[str], bool]:
    """Check ``url`` against the archive (:class:`.page_check.PageChecker`), fetch live through the
    proxy what it missed and check again, until a check misses nothing or misses just what the one
    before missed, or the fetches recorded no answer (each failed again: the fetches repaired
    nothing), :data:`CHECK_TRIES` checks at most; returns what is still
    missing (empty: the page replays whole). ``when``: the time the replay is as of, the page's
    load (:func:`loaded_at`; None: now); ``later_now``: the checks after a live fetch replay as at
    now instead, so that what the fetches recorded is the closest capture (a placeholder of a
    dropped connection, repaired). Also returns whether a fetch repaired something (the page as
    captured may then look different).
    ``auth``: (origin, Authorization value) the live fetches to that origin carry, as the crawl's own
    requests do (:func:`open_context`). ``cookies(url)``: the ``Cookie`` value those fetches carry
    (a crawl after a login script: the logged-in browser's), in place of the checker's own."""
    import http.client

    missing: list = []
    error = None
    before = first = None
    streaming: dict[str, str] = {}  # URL -> why its live fetch gave up (a stream that never ends)
    at = when
    # (an event stream the page keeps open, Gradio's heartbeat, is recorded as it stands, so that
    # the check's replay finds it: it would never end, so neither would its live fetch)
    proxy.flush_open_streams()
    for attempt in range(CHECK_TRIES):
        missing, error = checker.check(url, at or now())
        # a form is never sent twice; a WebSocket (ws://) is not fetched: a live fetch cannot record
        # its conversation (the capture's own load does)
        refetch = [m for m in missing if m.method.upper() in SAFE_METHODS and m.url.startswith(("http:", "https:"))]
        now_missing = {(m.method, m.url) for m in missing}
        first = now_missing if first is None else first
        if not refetch or attempt == CHECK_TRIES - 1 or now_missing == before:
            break  # nothing to fetch, no tries left, or the last fetches repaired nothing
        before = now_missing
        answered = False  # (whether a fetch recorded an answer of the site, not another failure)
        for m in refetch:
            headers = list(m.headers)
            if auth and m.url.startswith(auth[0] + "/"):
                headers = [h for h in headers if h[0].lower() != "authorization"] + [("Authorization", auth[1])]
            jar = cookies(m.url) if cookies is not None else None
            if jar:
                headers = [h for h in headers if h[0].lower() != "cookie"] + [("Cookie", jar)]
            try:
                failures = proxy.recorder.failures
                proxy.fetch(m.method, m.url, headers, m.body or None, timeout=30, deadline=live_fetch_deadline())
                # (the proxy's own 502 for an upstream that failed again is no answer; the recorder
                # has counted it by the time the 502 reaches us: mitmproxy runs the error hook first)
                answered = answered or proxy.recorder.failures == failures
            except TimeoutError as exc:
                if STREAM_MISSING in str(exc):  # (the deadline; a read that timed out is an OSError as any)
                    streaming[m.url] = str(exc)
            except (OSError, http.client.HTTPException):
                pass  # still missing at the next check, and said so then
        if not answered:
            # Nothing new to replay: a check now would see what this one saw, but on another clock
            # (a cache buster, ``_=<Date.now()>``, names another URL, fetched and failing again).
            break
        if later_now:
            at = None
    out = [f"{m.url} ({streaming[m.url]})" if m.why == "miss" and m.url in streaming else m.describe()
           for m in missing]
    if error:  # the replayed page itself would not load: not a page that replays whole
        out.append(f"{url} (replay failed: {error})")
    repaired = bool(first - {(m.method, m.url) for m in missing})
    return out, repaired


def crawl(archive_path, start: str, *, depth: int = 2, max_pages: int = 100, scope: str = "host",
          progress: Callable[[int, str], None] | None = None,
          resolve: dict[str, tuple[str, int]] | None = None, screenshots: str = "viewport",
          check: bool = True, exclude=(), credentials: tuple[str, str] | None = None,
          login_script=None) -> CrawlResult:
    """Crawl from ``start`` into the archive (created if missing); resumes an interrupted crawl.

    The start URL is first fetched through the recording proxy, unrecorded (its resolver, its
    certificate policy): a seed that fails (a network error, a 4xx/5xx answer) raises
    :class:`SeedFailed` with nothing recorded. Pages that fail later are not recorded as pages;
    they are listed in the crawl's state document and in :attr:`CrawlResult.failed`.
    ``screenshots``: ``full`` (the whole page), ``viewport`` (the first 1920x1080) or ``none``;
    stored as lossless WebP where the format can hold them (:func:`compact_screenshot`).

    A page is captured once it has loaded what it will still load (stylesheets with their chained
    imports, fonts, images in view), then, with ``check``, checked: loaded again from the archive
    alone; what that replay misses is fetched live through the proxy and the page checked again
    while that repairs something (:data:`CHECK_TRIES` checks at most). A page a live fetch repaired is
    captured again, and checked again, while a fetch still repairs it (:data:`RECAPTURES` times at
    most). A page still missing something is recorded, marked
    ``"complete": false`` with the ``missing`` URLs in its record's ``extra``, listed in the state
    document (``incomplete``) and in :attr:`CrawlResult.incomplete`; the crawl is then not complete.

    A failed URL or a download is followed by a new tab (it cannot break the next). A URL answered with a
    download is recorded as an exchange and listed in :attr:`CrawlResult.downloads`, no page record.
    Links matching an ``exclude`` pattern (:func:`exclude_matcher`) are not followed.
    ``credentials``: (user, password) for HTTP authentication (:func:`open_context`).
    ``login_script``: a Python file defining ``run(page)`` that signs in through the site's own form
    (a password, a CSRF token): run first, on the start URL, in the crawl's browser context, its
    exchanges recorded; the pages are then visited with the cookies it got, and what a check fetches
    again for a page carries them too (:func:`load_login_script`).
    """
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import chromium_path, is_download, launch_chromium, track_live_timers

    if screenshots not in SCREENSHOTS:
        raise CrawlError(f"--screenshots {screenshots!r}: expected one of {', '.join(SCREENSHOTS)}")
    unanchored = {start} if not_a_route(start) else set()  # (the start URL's own fragment, dropped)
    start = page_url(start)
    check_url(start)
    in_scope = scope_matcher(start, scope)
    excluded = exclude_matcher(exclude)
    state_name = crawl_state_name(start, scope, depth)
    login = load_login_script(login_script) if login_script else None
    with recording_into(archive_path) as arc:
        try:
            state = arc.get_document(state_name)
            resumed = True
        except ArchiveError:
            state = {"version": STATE_VERSION, "start": start, "scope": scope, "depth": depth,
                     "queue": [[start, 0]], "seen": [start], "done": 0}
            resumed = False
        state.setdefault("failed", [])
        state.setdefault("incomplete", [])
        state.setdefault("downloads", [])
        state.setdefault("broken", [])
        seen = set(state["seen"])
        proxy = RecordingProxy(arc, port=0, session_kind="crawl", resolve=resolve, paused=True, seed_pages=True).start()
        checker: PageChecker | None = None
        visited = 0
        try:
            if not resumed:
                try:
                    proxy.probe(start)
                except SiteUnreachable as exc:
                    raise SeedFailed(str(exc)) from None
            with sync_playwright() as pw:
                # the headless shell (a fresh tab costs a third of the full browser's); a PDF in the
                # full browser's viewer (FullBrowser), as before, and checked there (PageChecker)
                browser = launch_chromium(pw, proxy=proxy.url, shell=True)
                shell_name = os.path.basename(chromium_path(shell=True))
                context = open_context(browser, start, credentials)
                full = FullBrowser(pw, proxy.url, start, credentials, context)
                track_live_timers(context)  # (a capture waits for the timers due soon: wait_loaded)
                auth = (credentials_for(start, credentials)["origin"], basic_authorization(credentials)) \
                    if credentials else None
                cookies = None
                if login is not None:  # (before the recording starts: the login is not part of the site)
                    _log_in(browser, context, start, login, login_script, credentials)
                    cookies = lambda u: _cookie_header(context, u)  # noqa: E731 (the check's live fetches)
                    state["login_script"] = True  # (--recheck cannot sign in: it refuses this crawl)
                proxy.begin_session()
                before = proxy.recorder.recorded
                checker = PageChecker(browser, archive_path, full=full.browser)
                page, clean = None, False

                def fresh_tab(old):
                    # Every capture in a new tab (the context's cookies and cache stay): what a page
                    # keeps per tab (sessionStorage: NiceGUI's tab id, which its socket's URL
                    # carries) is never carried into the next capture, which holds what a fresh
                    # visit gets, as an agent's episode starts with one.
                    tab = context.new_page()
                    tab.on("download", lambda d: downloads.append(d))  # (Playwright wraps a function)
                    tab.on("response", lambda r: _note_broken(broken, r))
                    tab.on("response", lambda r: _note_navigation(answers, r))
                    if old is not None:
                        old.close()
                    return tab
                downloads: list = []  # what the current tab started downloading
                broken: dict = {}  # (kind, url) -> status: the page's scripts and style sheets answered with an error
                answers: dict = {}  # URL -> the headers of the current tab's navigation answered from it
                while state["queue"] and state["done"] < max_pages:
                    url, level = state["queue"][0]
                    landed = None
                    for _attempt in range(CAPTURE_TRIES):
                        page = fresh_tab(page)
                        downloads.clear()
                        broken.clear()
                        answers.clear()
                        clean = False  # (until this capture has succeeded)
                        try:
                            status, title, dom, shot, links, landed, fragments = _capture(page, url, screenshots)
                            clean = True
                            break
                        except PlaywrightError as exc:
                            title, dom, shot, links, fragments = "", None, None, [], []
                            status = f"error: {str(exc).splitlines()[0]}"
                            if not downloads and is_download(status):  # (its event may come later)
                                try:
                                    downloads.append(page.wait_for_event("download", timeout=30_000))
                                except PlaywrightError:
                                    pass
                            if downloads or "Timeout" not in status:
                                break  # (a timeout, on a loaded machine, is tried again in a new tab)
                    shown, used = page, shell_name  # (the tab that captured the page, and its browser)
                    if downloads and not clean and full.distinct and shown_by_full_browser(answers.get(downloads[0].url)):
                        # a PDF: the full browser shows it in its viewer; captured there (fetched again)
                        _download(downloads)  # (the shell's file, removed)
                        downloads.clear()
                        try:
                            shown = full.new_page()
                            used = full.name
                            status, title, dom, shot, links, landed, fragments = _capture(shown, url, screenshots)
                        except PlaywrightError as exc:
                            title, dom, shot, links, fragments = "", None, None, [], []
                            status = f"error: {str(exc).splitlines()[0]}"
                    if downloads and not clean:  # not a page: the proxy recorded the file, listed as a download
                        got = _download(downloads)
                        if isinstance(got, tuple):
                            state["queue"] = state["queue"][1:]
                            state["done"] += 1
                            state["downloads"].append([url, *got])
                            arc.put_document(state_name, state)
                            if progress:
                                progress(state["done"], url)
                            continue
                        status = f"error: {got}"
                    if auth_refused(status, answers.get(landed or url)):
                        status = f"error: {AUTH_REFUSED}"  # (the page behind it was not captured)
                    failure = page_failure(status)
                    ended = landed or url  # (where redirects led: what failed)
                    if status == 502 and ended in proxy.recorder.upstream_failures:  # the proxy's 502, not the site's
                        failure = f"did not load: {proxy.recorder.upstream_failures[ended]}"
                    upgraded = hsts_upgrade(url, landed or shown.url, proxy) if failure is not None else None
                    failure = upgraded or failure
                    if failure is not None and level == 0 and state["done"] == 0:
                        raise SeedFailed(f"{url}: the start page failed "
                                         f"({upgraded or redirect_failure(url, ended, failure, proxy)})")
                    missing: list[str] = []
                    if check and failure is None:
                        missing, repaired = _self_check(checker, proxy, url, loaded_at(arc, url, proxy.session_id),
                                                        auth=auth, cookies=cookies, later_now=True)
                        recaptures = 0
                        while repaired and recaptures < RECAPTURES:
                            # The capture showed the page without what was fetched since (a stylesheet
                            # cut off): capture it again, now that the site answered, and check that.
                            recaptures += 1
                            first_broken = dict(broken)
                            if shown is page:
                                shown = page = fresh_tab(page)
                            broken.clear()  # (what the new capture's code answered, not the first's)
                            try:
                                status2, title2, dom2, shot2, links2, _, fragments2 = _capture(shown, url, screenshots)
                            except PlaywrightError:
                                status2 = None  # (no response: a failure, below)
                            if page_failure(status2) is not None:
                                # the capture before stands, with what its check found and its code answered
                                broken.clear()
                                broken.update(first_broken)
                                break
                            status, title, dom, shot, links = status2, title2, dom2, shot2, links2
                            fragments = fragments2
                            missing, repaired = _self_check(checker, proxy, url,
                                                            loaded_at(arc, url, proxy.session_id),
                                                            auth=auth, cookies=cookies, later_now=True)
                    if page_url(shown.url) != url and urldefrag(shown.url)[0] == urldefrag(url)[0]:
                        seen.add(page_url(shown.url))  # (a script moved to a route of it: `/` shows `/#/`)
                    target = page_url(landed) if landed and failure is None else url
                    if target != url and in_scope(target) and not excluded(target):
                        # Redirected: this capture is the landing page's (recorded under the URL asked
                        # for, its final_url the landing page), so a link to it is not visited again.
                        seen.add(target)
                        state["queue"] = [state["queue"][0], *(q for q in state["queue"][1:] if q[0] != target)]
                    new = sorted({page_url(link) for link in links} - seen) if level < depth and not failure else []
                    if level < depth and not failure:  # (links the crawl would have followed, were they pages)
                        unanchored.update(u for u in fragments if in_scope(page_url(u)) and not excluded(u))
                    new = [u for u in new if in_scope(u) and not excluded(u)]
                    seen.update(new)
                    state["queue"] = state["queue"][1:] + [[u, level + 1] for u in new]
                    state["seen"] = sorted(seen)
                    state["done"] += 1
                    # ("shadow_roots": its DOM snapshot holds the page's open shadow roots, so replay
                    # check takes the replayed page's alike; an older record's does not)
                    # ("browser": the Chromium that captured it, so that replay check takes what a
                    # browser draws with a page of its own, a JSON document's, in the same one)
                    extra = {"final_url": shown.url, "status": status, "depth": level, "screenshot": screenshots,
                             "shadow_roots": True, "browser": used}
                    if check and failure is None:
                        extra["complete"] = not missing
                        if missing:
                            extra["missing"] = missing
                            state["incomplete"].append([url, missing])
                    # (not the proxy's own 502 for an upstream that failed, nor what the check found
                    # missing: misses, said as such)
                    code_errors = [[kind, res, code] for (kind, res), code in sorted(broken.items())
                                   if res not in proxy.recorder.upstream_failures
                                   and not any(m == res or m.startswith(res + " ") for m in missing)]
                    if code_errors and failure is None:
                        extra["broken"] = code_errors
                        state["broken"].append([url, code_errors])
                    with arc.transaction():  # the page and the frontier land together
                        if failure is None:
                            arc.add_page(session_id=proxy.session_id, url=url, captured_at=now(), title=title,
                                         screenshot=compact_screenshot(shot) if shot else None, dom=dom, extra=extra)
                        else:  # not a recorded page: listed with why (its exchanges stay, as recorded)
                            state["failed"].append([url, failure])
                        arc.put_document(state_name, state)
                    visited += failure is None
                    if shown is not page:
                        shown.close()
                    if progress:
                        progress(state["done"], url)
                checker.shutdown()
                full.close()
                browser.close()
        finally:
            if checker is not None:
                checker.stop_servers()  # (also when the crawl failed: no server thread left behind)
            proxy.stop()
        return CrawlResult(pages=state["done"] - len(state["failed"]) - len(state["downloads"]),
                           pages_this_run=visited, exchanges_this_run=proxy.recorder.recorded - before,
                           resumed=resumed,
                           complete=not state["queue"] and not state["incomplete"] and not load_failures(state["failed"]),
                           failed=state["failed"], incomplete=state["incomplete"], queued=len(state["queue"]),
                           downloads=state["downloads"], unanchored=sorted(unanchored), broken=state["broken"])


def recheck(archive_path, start: str, *, depth: int = 2, scope: str = "host",
            progress: Callable[[int, str], None] | None = None,
            resolve: dict[str, tuple[str, int]] | None = None,
            credentials: tuple[str, str] | None = None) -> CrawlResult:
    """Check every page record of an existing archive again (:func:`crawl`'s check: replayed from
    the archive alone, as at its page's load: :func:`loaded_at`), fetch live through the recording proxy
    what a page misses, and check it again. The crawl of (``start``, ``scope``, ``depth``), when the
    archive holds its state, gets its ``incomplete`` list replaced by what is still missing. No page
    is visited live, no page record added: only the missing exchanges are recorded. ``credentials``:
    as :func:`crawl`'s, for the live fetches to the start URL's origin."""
    from playwright.sync_api import sync_playwright

    from webfreeze.archives import Archive
    from webfreeze.simulator.browser import launch_chromium

    start = page_url(start)
    check_url(start)
    if not os.path.exists(archive_path):
        raise CrawlError(f"{archive_path}: no such archive to recheck")
    checked_at = now()  # (the pages listed next are what the recheck checks: those recorded before it)
    with Archive.open(archive_path) as arc:
        pages = [(p.url, loaded_at(arc, p.url, p.session_id, until=p.captured_at) or p.captured_at)
                 for p in arc.pages()]
    if not pages:
        raise CrawlError(f"{archive_path}: no page records to recheck")
    state_name = crawl_state_name(start, scope, depth)
    with Archive.open(archive_path) as arc:
        try:
            signed_in = bool((arc.get_document(state_name) or {}).get("login_script"))
        except ArchiveError:
            signed_in = False
    if signed_in:
        raise CrawlError(f"{archive_path}: its crawl of {start} signed in with --login-script, and --recheck "
                         "cannot (its live fetches would record the login page): crawl again with --login-script")
    incomplete = []
    auth = (credentials_for(start, credentials)["origin"], basic_authorization(credentials)) if credentials else None
    with recording_into(archive_path) as arc:
        proxy = RecordingProxy(arc, port=0, session_kind="crawl", resolve=resolve, seed_pages=True).start()
        checker = None
        before = proxy.recorder.recorded
        try:
            with sync_playwright() as pw:
                browser = launch_chromium(pw, proxy=proxy.url, shell=True)
                full = FullBrowser(pw, proxy.url, start, credentials)
                checker = PageChecker(browser, archive_path, full=full.browser)
                for n, (url, captured_at) in enumerate(pages, 1):
                    missing, _ = _self_check(checker, proxy, url, captured_at, auth=auth)
                    if missing:
                        incomplete.append([url, missing])
                    if progress:
                        progress(n, url)
                checker.shutdown()
                full.close()
                browser.close()
        finally:
            if checker is not None:
                checker.stop_servers()
            proxy.stop()
        try:
            state = arc.get_document(state_name)
        except ArchiveError:
            state = None
        if state is not None:
            state["incomplete"] = incomplete
            arc.put_document(state_name, state)
        # what every page record misses now (archive info reads it for the pages recorded before)
        arc.put_document(RECHECK_DOCUMENT, {"version": 1, "at": checked_at, "pages": len(pages),
                                            "incomplete": incomplete})
        return CrawlResult(pages=len(pages), pages_this_run=0, exchanges_this_run=proxy.recorder.recorded - before,
                           resumed=True, complete=not incomplete and not (state or {}).get("queue"),
                           failed=(state or {}).get("failed", []), incomplete=incomplete,
                           queued=len((state or {}).get("queue", [])), downloads=(state or {}).get("downloads", []))

