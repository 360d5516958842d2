"""`webfreeze replay check`: load every page record through the replay in Chromium and compare.

For each page record of the archive (ordered by id) a fresh browser context loads the page through
the replay server (proxy mode, or ``--mode direct``: its direct URL), waits for the page to settle
as the crawl did (network quiet, then the main thread idle), and takes a DOM snapshot and the kind
of screenshot the capture holds (viewport, full page or none: like with like). In direct mode a
page whose capture holds neither text nor a screenshot, which proves only its misses and its error,
is loaded in one reused tab wiped before each page (:class:`_ReusedTab`). Compared with the capture:

- misses: requests of the page the archive could not answer, and the WebSockets it opened that the
  replay could not serve (no recording of one, or a conversation that parted from the recording:
  :class:`~webfreeze.simulator.replay_route.SocketRoutes` serves the others in the browser);
- failed at capture: requests the archive answers only with the recording proxy's placeholder for
  an exchange whose upstream failed (a connection cut, a TLS failure: the site never answered).
  Listed apart (``failed_at_capture``), never among the misses: the replay answers them as the
  capture went (the archive holds no other answer to give), though Chromium takes a proxy's 502
  for a failed request (one it refuses outright, a cross-origin XHR's 502 without a CORS header or
  a tunnel's, fires no response: found by asking the replay's index, :class:`_Placeholders`), as
  the agent environment and ``replay serve`` count them. ``record crawl`` counts them as missing
  when it checks a page (there the site was asked, and did not answer);
- text similarity: ``difflib`` ratio of the visible text (whitespace-normalised words) of the
  captured and the replayed DOM, 1.0 = identical. The crawl ran the page's scripts on the real
  clock and random numbers, the replay on the seeded runtime (replayer/determinism.py), so the
  words a script writes from them differ by design: a page whose text differs is loaded once more
  as a probe (another seed, the clock a day and a bit later) and the words that change with them
  are set aside (:func:`stable_similarity`; ``volatile_words`` counts them, ``text_similarity_raw``
  is the plain ratio). A page whose capture holds no text (a session's page record without a DOM
  snapshot) has no similarity (None, ``pages_without_capture_text`` in the summary), not 0;
- pixel difference: the share of pixels that differ between the two screenshots (pixels outside
  the smaller image count as different), 0.0 = identical. Both are decoded to RGB first, so a
  capture stored as lossless WebP (crawls now) or PNG (earlier crawls) compares exactly with the
  replay's PNG. A screenshot Chromium did not draw in time (a loaded machine; the compositor is
  woken and asked again first) is the check's failure, not the page's: ``screenshot_error`` (and
  ``screenshots_failed`` in the summary), no pixel difference, the page's other results kept.

Each page replays as a new replay session (ordered repeats start over, seeded runtime, captures
chosen closest to the time the crawl loaded the page: its document's capture, :func:`_loaded_at`),
so the output is a pure function of the archive and the seed: two checks write identical snapshots.
The report directory gets ``report.json``, ``report.html``, ``misses.jsonl`` and ``pages/``.
"""

from __future__ import annotations

import difflib
import html as htmlmod
import io
import json
import os
import shutil
import weakref
from pathlib import Path
from urllib.parse import urldefrag

import lxml.etree
import lxml.html

from webfreeze.archives import Archive, ArchiveError
from webfreeze.replayer.replay import PortInUse
from webfreeze.replayer.server import ReplayServer
from webfreeze.simulator.axtree import BLOCK_TAGS
from webfreeze.simulator.browser import (
    is_download,
    launch_chromium,
    new_context,
    still_screenshot,
    track_inflight,
    track_live_timers,
    wait_settled,
    wait_timers_due,
)
from webfreeze.simulator.provenance import refused_after_answer

REPORT_VERSION = 1


def visible_text(dom: bytes | str, *, shadow: bool = True) -> str:
    """Whitespace-normalised text of an HTML document, scripts, styles and templates left out; an
    open shadow root's content (a ``<template shadowrootmode>``, as the crawl and the check take a
    page's DOM) is text the page shows, and stays, where its host is (not with ``shadow=False``:
    to compare with a snapshot taken without them)."""
    if isinstance(dom, str):
        dom = dom.encode("utf-8")
    if not dom.strip():
        return ""
    try:
        root = lxml.html.document_fromstring(dom)
    except Exception:
        return ""
    for el in list(root.iter("script", "style", "noscript", "template")):
        if shadow and el.tag == "template" and el.get("shadowrootmode"):
            continue
        el.text = ""
        for child in list(el):  # (an inert template's elements too: lxml keeps them as children)
            el.remove(child)
    # Block elements (and br) set apart, as the observation tree's text has them: a table a script
    # built without whitespace between its cells reads as its cells' words, not as one long word.
    lxml.etree.strip_elements(root, lxml.etree.Comment, lxml.etree.ProcessingInstruction, with_tail=False)
    parts = []
    for event, el in lxml.etree.iterwalk(root, events=("start", "end")):
        tag = el.tag.lower() if isinstance(el.tag, str) else None
        if event == "start":
            if tag in BLOCK_TAGS:
                parts.append(" ")
            if tag is not None and el.text:
                parts.append(el.text)
        else:
            if tag in BLOCK_TAGS:
                parts.append(" ")
            if el.tail and el is not root:
                parts.append(el.tail)
    return " ".join("".join(parts).split())


# A page that asked one request this often while it loaded is said to loop (a warning of replay
# check's): the replay answers a request asked again at once, and a page that asks again at once
# spins (a long poll; in direct mode a handshake, Transmission's 409, whose next answer never comes).
LOOP_ASKED = 100


def text_similarity(a: str, b: str) -> float:
    """``difflib`` ratio of two texts' whitespace-separated words (1.0 = identical), 4 places; texts
    whose words differ are never rounded up to 1.0 (a word changed in a long page: 0.9999)."""
    wa, wb = a.split(), b.split()
    if wa == wb:
        return 1.0
    return min(round(difflib.SequenceMatcher(None, wa, wb, autojunk=False).ratio(), 4), 0.9999)


def pixel_difference(png_a: bytes | None, png_b: bytes | None) -> float | None:
    """Share of differing pixels (0..1) between two images (PNG or WebP, any mix: both are decoded
    to RGB and compared pixel by pixel), None when either is missing."""
    if not png_a or not png_b:
        return None
    from PIL import Image, ImageChops  # (late: Pillow, the replay extra)

    a = Image.open(io.BytesIO(png_a)).convert("RGB")
    b = Image.open(io.BytesIO(png_b)).convert("RGB")
    w, h = min(a.width, b.width), min(a.height, b.height)
    total = max(a.width, b.width) * max(a.height, b.height)
    if total == 0:
        return 0.0
    diff = ImageChops.difference(a.crop((0, 0, w, h)), b.crop((0, 0, w, h))).convert("L")
    same = diff.histogram()[0]
    if same == total:
        return 0.0
    return max(round(1.0 - same / total, 6), 0.000001)  # a pixel that differs is never rounded away


# The probe's clock: a day, an hour, a minute and a second and a bit later, so that every field a
# page prints from its clock (date, time of day, milliseconds) differs from the first load's.
PROBE_CLOCK_SHIFT = 90061.001


def stable_similarity(captured: str, replayed: str, probe: str) -> tuple[float, int]:
    """``text_similarity`` of a capture's and a replay's text, with the words the page's scripts
    wrote from the clock and the generator set aside: those the ``probe`` (the same page replayed
    with another seed and a shifted clock) holds otherwise. A run of captured words that stands
    where the replay has as many such words, and nothing else, counts as the same (the capture's
    own clock and random values; its crawl ran on the real ones). Returns (similarity, the number
    of captured words so counted). Any other difference, a word more, less or changed that the
    probe reproduces, still counts against the page."""
    cap, rep, prb = captured.split(), replayed.split(), probe.split()
    volatile: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, rep, prb, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            volatile.update(range(i1, i2))
    if not volatile:
        return text_similarity(captured, replayed), 0
    same = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, cap, rep, autojunk=False).get_opcodes():
        if tag == "replace" and i2 - i1 == j2 - j1 and all(j in volatile for j in range(j1, j2)):
            cap[i1:i2] = rep[j1:j2]
            same += i2 - i1
    return text_similarity(" ".join(cap), replayed), same


def _extra(page_row: dict) -> dict:
    extra = page_row.get("extra")
    if not isinstance(extra, dict):  # the index's JSON text
        try:
            extra = json.loads(extra or "{}")
        except (TypeError, ValueError):
            extra = {}
    return extra if isinstance(extra, dict) else {}


def shot_mode(page_row: dict) -> str:
    """The screenshot a page record holds: ``full``, ``viewport`` or ``none`` (as its crawl's
    ``--screenshots`` said; records made before that option hold full-page ones)."""
    mode = _extra(page_row).get("screenshot")
    if mode in ("full", "viewport", "none"):
        return mode
    return "full" if page_row.get("screenshot") else "none"


def shadow_roots(page_row: dict) -> bool:
    """Whether a page record's DOM snapshot holds the page's open shadow roots (a crawl's since
    they do, ``extra["shadow_roots"]``): the replayed page's is then taken alike; an older
    record's without them, so that like is compared with like."""
    return _extra(page_row).get("shadow_roots") is True


def in_shell(page_row: dict) -> bool:
    """Whether a page record was captured in Chromium's headless shell (a crawl says which
    Chromium captured each page, ``extra["browser"]``, since it crawls in the shell; an older
    record's was the full browser)."""
    return "headless-shell" in str(_extra(page_row).get("browser") or "")


def image_ext(data: bytes | None) -> str:
    """``webp`` or ``png``, from an image's first bytes."""
    return "webp" if data and data[:4] == b"RIFF" and data[8:12] == b"WEBP" else "png"


def check(archive_path: str | os.PathLike, report_dir: str | os.PathLike, *, seed: int = 0,
          limit: int | None = None, progress=None, confdir=None, mode: str = "proxy", port: int = 0,
          rules: dict | None = None) -> dict:
    """Run the check and write the report; returns the report dict. ``mode`` ``direct`` loads each
    page at its direct URL (``/<timestamp>/<url>``, rewritten and sealed) in a Chromium with no
    proxy and no special flags, as a person opening the archive would; its replay listens on
    ``port`` (0: the first free one of :data:`DIRECT_PORTS`, else any). ``rules``: matching-rule
    overrides over the archive's (``replay serve --rules``), recorded in the report."""
    archive_path = Path(archive_path)
    if not archive_path.exists():
        raise ArchiveError(f"{archive_path}: no such archive")
    out = _report_dir(Path(report_dir), archive_path)
    with Archive.open(archive_path) as arc:
        records = list(arc.pages(limit=limit))
        pages = [{"id": p.id, "url": p.url, "title": p.title, "captured_at": p.captured_at, "extra": p.extra,
                  "screenshot": p.screenshot_digest, "loaded_at": _loaded_at(arc, p)} for p in records]
        captured = {p.id: (p.payload(), p.screenshot()) for p in records}
        # the proxy's placeholders for exchanges whose upstream failed (recorder/addon.py's error())
        placeholders = {e.id for e in arc.exchanges(status=502) if e.extra.get("error")}
    if not pages:
        raise ArchiveError(f"{archive_path}: no page records to check (record them with `webfreeze record crawl`)")
    partial = out.with_name(f".{out.name}.partial-{os.getpid()}")
    if partial.exists():
        shutil.rmtree(partial)
    (partial / "pages").mkdir(parents=True)
    try:
        return _check(archive_path, pages, captured, out, partial, seed, confdir, progress, placeholders, mode, port,
                      rules)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)  # no half-written report left behind
        raise


def _loaded_at(arc, page) -> str:
    """When the crawl loaded a page: the capture time of its document (the last exchange of the
    page's URL in its session up to the page record's time), else the record's own time. The page
    record is written after the page has settled, later than the requests its load made: those
    are the captures chosen closest to this time, as the crawl's page saw them. A hash route's page
    (``/#/experiments/1``) was loaded as its document (``/``): the fragment is not requested."""
    url = urldefrag(page.url).url
    for session in (page.session_id, None):
        found = [e.captured_at for e in arc.exchanges(url=url, method="GET", session=session,
                                                      until=page.captured_at)]
        if found:
            return max(found)
    return page.captured_at


def _report_dir(out: Path, archive_path: Path) -> Path:
    """The report directory, resolved; refused when replacing it would delete anything but an
    earlier report (another directory's files, the archive being checked)."""
    out = out.resolve()
    if out.exists():
        if not out.is_dir():
            raise ArchiveError(f"{out}: exists and is not a directory; choose a new --report directory")
        if any(out.iterdir()) and not _holds_report(out):
            raise ArchiveError(f"{out}: exists, is not empty and holds no replay check report; "
                               "choose an empty or new --report directory")
    if out == Path(out.anchor) or out in archive_path.resolve().parents:
        raise ArchiveError(f"{out}: the archive is inside it; choose another --report directory")
    return out


def _holds_report(path: Path) -> bool:
    try:
        return json.loads((path / "report.json").read_text(encoding="utf-8")).get("format") == "webfreeze-replay-check"
    except (OSError, ValueError, AttributeError):
        return False


# Direct mode: the replay's address is every page's own (``location``), which a page may print or
# build URLs from; the check listens on the first of these ports that is free, so that two checks of
# an archive, one after the other, show a page the same address (``--port`` picks one).
DIRECT_PORTS = range(28400, 28416)  # (below Linux's ports for outgoing connections, 32768 up)


def _start_server(archive_path: Path, mode: str, port: int, **settings) -> ReplayServer:
    if mode == "proxy" or port:
        return ReplayServer(archive_path, mode=mode, port=port, **settings).start()
    for candidate in DIRECT_PORTS:
        try:
            return ReplayServer(archive_path, mode=mode, port=candidate, **settings).start()
        except PortInUse:
            continue
    return ReplayServer(archive_path, mode=mode, port=0, **settings).start()  # (all taken: any free one)


def _check(archive_path: Path, pages: list, captured: dict, out: Path, partial: Path, seed: int, confdir,
           progress, placeholders: set[int] = frozenset(), mode: str = "proxy", port: int = 0,
           rules: dict | None = None) -> dict:
    from playwright.sync_api import Error as PlaywrightError  # (late: Playwright, the replay extra)
    from playwright.sync_api import sync_playwright

    from webfreeze.archives.timeutil import to_timestamp14
    from webfreeze.simulator.replay_route import SocketRoutes

    results = []
    server = _start_server(archive_path, mode, port, seed=seed, miss_report=partial / "misses.jsonl", confdir=confdir,
                           rules=rules)
    placeholders = _Placeholders(placeholders, server.replay, direct=mode == "direct")
    sockets = None
    try:
        server.replay.sockets = True  # (the runtime counts socket deliveries: SocketRoutes marks them)
        # (a socket's miss goes into the check's misses.jsonl too, with its reason)
        sockets = SocketRoutes(archive_path, server.replay.rules, direct=mode == "direct",
                               on_miss=lambda url, why: server.replay._log_miss("GET", url, [], "", None, why=why),
                               answered=lambda: server.replay.actions_answered)
        if mode == "proxy":
            # a worker's socket (Playwright routes none) comes to the server through its proxy: the
            # server answers it from the recording, counted with the page's own sockets to its URL,
            # and says when it missed (its own miss report has it), into the list of the page being
            # loaded (_watch)
            server.socket_picker = sockets.pick
            server.on_socket = lambda url, level, why: _server_socket(sockets, url, level)
            server.replay.worker_sockets = True  # (its batches marked: the page's settle waits for them)
        with sync_playwright() as pw:
            proxy = server.url if mode == "proxy" else None
            # the headless shell: the same build drawing the same pixels, at half the cost of a fresh
            # context in the full browser (which opens a window of browser UI per context)
            browser = launch_chromium(pw, proxy=proxy, bypass_internal=False, shell=True)
            full = None  # the full browser, launched for a document that is not HTML (a PDF, JSON)
            tab = _ReusedTab(browser, server.url, placeholders, sockets) if mode == "direct" else None
            for n, rec in enumerate(pages, 1):
                server.reset(seed, when=rec["loaded_at"])
                sockets.reset(server.replay.when)
                target = rec["url"] if mode == "proxy" else \
                    f"{server.url}/{to_timestamp14(rec['loaded_at'])}/{rec['url']}"
                cap_dom, cap_shot = captured[rec["id"]]
                shadow = shadow_roots(rec)  # (the replayed DOM taken as the capture's was)
                cap_text = visible_text(cap_dom or b"")
                used = browser
                if tab is not None and not cap_text and shot_mode(rec) == "none":
                    # nothing to compare but misses and errors: the reused tab (no new renderer)
                    loaded = tab.load(target, PlaywrightError)
                else:
                    loaded = _load(browser, target, placeholders, shot_mode(rec), PlaywrightError, sockets,
                                   shadow=shadow)
                if is_download(loaded["error"]) or (not loaded.get("html", True) and not in_shell(rec)):
                    # not an HTML document: the full browser shows it with a page of its own (the PDF
                    # viewer, the JSON and text views), as the crawl's browser did; like with like
                    # (a crawl in the headless shell took it there, but for a PDF: in_shell)
                    full = full or launch_chromium(pw, proxy=proxy, bypass_internal=False)
                    used = full
                    loaded = _load(full, target, placeholders, shot_mode(rec), PlaywrightError, sockets,
                                   shadow=shadow)
                dom, shot, error = loaded["dom"], loaded["shot"], loaded["error"]
                # one request asked again and again while the page loaded (a loop the replay feeds:
                # a long poll answered at once, a handshake whose next answer never comes)
                looped = max(((n, m, u) for (m, u), n in dict(server.replay.asked).items()), default=None)
                looped = looped if looped is not None and looped[0] >= LOOP_ASKED else None
                rep_text = visible_text(dom)
                similarity = raw = text_similarity(cap_text, rep_text) if cap_text else None
                volatile = 0
                if raw is not None and raw < 1.0 and error is None:
                    # a probe: the same page under another seed and another clock; words it writes
                    # otherwise are the page's scripts' clock and random values (RUNTIME_JS's)
                    server.reset(seed + 1, when=rec["loaded_at"], clock_shift=PROBE_CLOCK_SHIFT)
                    sockets.reset(server.replay.when)
                    report_to, server.replay.miss_report = server.replay.miss_report, None  # (the probe's own)
                    try:
                        probe = _load(used, target, placeholders, "none", PlaywrightError, sockets,
                                      shadow=shadow)
                    finally:
                        server.replay.miss_report = report_to
                    if probe["error"] is None:
                        similarity, volatile = stable_similarity(cap_text, rep_text, visible_text(probe["dom"]))
                stem = f"pages/{rec['id']:06d}"
                (partial / f"{stem}.replay.html").write_bytes(dom)
                if shot:
                    (partial / f"{stem}.replay.png").write_bytes(shot)
                cap_ext = image_ext(cap_shot)
                if cap_shot:
                    (partial / f"{stem}.capture.{cap_ext}").write_bytes(cap_shot)
                results.append({
                    "id": rec["id"], "url": rec["url"], "title": rec["title"] or "",
                    "captured_at": rec["captured_at"], "error": error,
                    "screenshot_error": loaded["screenshot_error"],
                    "misses": loaded["misses"],
                    "failed_at_capture": loaded["failed_at_capture"],
                    # (not misses here: the agent environment's honest matching misses them)
                    "fuzzy": [u for u in loaded["fuzzy"] if u not in loaded["misses"]],
                    "text_similarity": similarity, "text_similarity_raw": raw, "volatile_words": volatile,
                    # (a page record a HAR's import made: its DOM is the document as received, which a
                    # page's scripts then built on: not what the replayed page shows once they ran)
                    **({"dom_as_received": True} if (rec.get("extra") or {}).get("har_page") else {}),
                    **({"asked_again": {"method": looped[1], "url": looped[2], "count": looped[0]}} if looped else {}),
                    "pixel_difference": pixel_difference(cap_shot, shot),
                    "dom": f"{stem}.replay.html", "screenshot": f"{stem}.replay.png" if shot else None,
                    "capture_screenshot": f"{stem}.capture.{cap_ext}" if cap_shot else None,
                })
                if progress:
                    progress(n, rec["url"])
            if tab is not None:
                tab.close()
            browser.close()
            if full is not None:
                full.close()
    finally:
        if sockets is not None:
            sockets.close()
        server.stop()
    sims = [r["text_similarity"] for r in results if r["text_similarity"] is not None]
    diffs = [r["pixel_difference"] for r in results if r["pixel_difference"] is not None]
    report = {
        "format": "webfreeze-replay-check", "version": REPORT_VERSION,
        "archive": archive_path.name, "seed": seed, "mode": mode, **({"rules": rules} if rules else {}),
        "summary": {
            "pages": len(results),
            "pages_with_misses": sum(1 for r in results if r["misses"]),
            "pages_with_errors": sum(1 for r in results if r["error"]),
            "screenshots_failed": sum(1 for r in results if r["screenshot_error"]),
            "missed_requests": sum(len(r["misses"]) for r in results),
            "pages_answered_fuzzily": sum(1 for r in results if r["fuzzy"]),
            "fuzzy_requests": sum(len(r["fuzzy"]) for r in results),
            "requests_failed_at_capture": sum(len(r["failed_at_capture"]) for r in results),
            "pages_without_capture_text": sum(1 for r in results if r["text_similarity"] is None),
            "volatile_words": sum(r["volatile_words"] for r in results),
            "mean_text_similarity": round(sum(sims) / len(sims), 4) if sims else None,
            "min_text_similarity": min(sims) if sims else None,
            "mean_pixel_difference": round(sum(diffs) / len(diffs), 6) if diffs else None,
            "max_pixel_difference": max(diffs) if diffs else None,
        },
        "pages": results,
    }
    (partial / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    (partial / "report.html").write_text(render_html(report), encoding="utf-8")
    if out.exists():
        _report_dir(out, archive_path)  # again: something may have been put there while the check ran
        shutil.rmtree(out)
    partial.rename(out)
    return report


def _server_socket(sockets, url: str, level: str) -> None:
    """The replay server answered (or missed) a WebSocket it got through its proxy (a worker's): a
    miss goes into the list of the page being loaded (``sockets.missed_to``, set by :func:`_watch`),
    a fuzzy answer into its fuzzy list (``sockets.fuzzy_to``)."""
    missed, fuzzy = sockets.missed_to, sockets.fuzzy_to
    if level == "miss" and missed is not None:
        missed.append(url)
    elif level == "fuzzy" and fuzzy is not None:
        fuzzy.append(url)


class _Placeholders(frozenset):
    """The ids of the recording proxy's placeholders (exchanges whose upstream failed), and
    :meth:`answer_only`: whether the replay's index answers a request with nothing else."""

    def __new__(cls, ids, replay, direct: bool = False):
        self = super().__new__(cls, ids)
        self.replay, self.direct = replay, direct
        return self

    def answer_only(self, request) -> bool:
        """Whether every capture the replay could answer ``request`` with (a Playwright request;
        its direct-mode URL read as the URL it stands for) is a placeholder
        (:meth:`~webfreeze.replayer.Replay.failed_upstream`)."""
        if not self:
            return False
        from webfreeze.replayer.websocket import direct_socket_url

        try:
            url = direct_socket_url(request.url) if self.direct else request.url
            return self.replay.failed_upstream(request.method, url, list(request.headers.items()),
                                               request.post_data_buffer) is not None
        except Exception:  # (a request the index cannot read: not said to be a placeholder)
            return False


# The requests the agent environment's honest matching answers fuzzily only with the same meaningful
# parameters (documents, XHR and fetch, event streams; Playwright's resource types), and WebSockets:
# a fuzzy answer to one of them here is a miss there (replayer/matching.py, AGENT_RULES).
HONEST_KINDS = frozenset({"document", "xhr", "fetch", "eventsource"})


def _watch(context, placeholders, sockets) -> tuple:
    """A new page of ``context`` and the lists its loads fill from now on: the URLs that missed
    (failed, answered as a replay miss, or a WebSocket ``sockets`` could not serve), those whose
    capture had failed at record time (``placeholders``), and the documents, XHR and WebSockets
    answered only fuzzily (:data:`HONEST_KINDS`: the agent environment misses them). The page's
    WebSockets are served by ``sockets``, routed on the context before the page is made: a route
    set on a page already made changes how Chromium draws its own pages (the JSON view's
    checkbox), which the crawl's capture, with no route, did not show."""
    missed: list[str] = []
    failed_at_capture: list[str] = []
    fuzzy: list[str] = []
    # a WebSocket the page opens: served in the browser from the archive's recording of it (a miss
    # where there is none, or the conversation parts). One Playwright does not route (a worker's;
    # Chromium fires the page's "websocket" event for those alone): in proxy mode it reaches the
    # replay server, which answers it by the same rule and says when it missed (_server_socket);
    # in direct mode nothing answers it, a miss
    if sockets is not None:
        context.route_web_socket("**/*", lambda ws: sockets.handle(
            ws, on_miss=lambda url, why: (missed.append(url), sockets.on_miss(url, why)),
            on_open=lambda url, level, why=None: fuzzy.append(url) if level == "fuzzy" else None))
        sockets.missed_to, sockets.fuzzy_to = missed, fuzzy
    page = context.new_page()
    answered = weakref.WeakKeyDictionary()  # the requests whose response came -> its status
    placeholder_answers = weakref.WeakSet()  # those answered with a placeholder (failed at capture)
    captured = weakref.WeakSet()  # those answered with a capture the site gave (a recorded 404 too)

    def on_response(resp):
        answered[resp.request] = resp.status
        cap = resp.headers.get("x-webfreeze-capture", "")
        if cap.isdigit() and int(cap) not in placeholders and not resp.headers.get("x-webfreeze-miss"):
            captured.add(resp.request)
        if sockets is not None and _main_document(resp.request, page):
            sockets.document(resp.headers.get("x-webfreeze-capture"))
        if resp.headers.get("x-webfreeze-miss"):
            missed.append(resp.url)
        elif resp.headers.get("x-webfreeze-match") == "fuzzy" and resp.request.resource_type in HONEST_KINDS:
            fuzzy.append(resp.url)
        cap = resp.headers.get("x-webfreeze-capture", "")
        if cap.isdigit() and int(cap) in placeholders:
            failed_at_capture.append(resp.url)
            # no miss only when the archive holds nothing but placeholders for it (as the agent
            # environment counts it): a crawl's check that fetched it again kept a good answer too,
            # which a replay as at another time should give
            only = getattr(placeholders, "answer_only", None)
            if only is None or only(resp.request):
                placeholder_answers.add(resp.request)

    def on_failed(request):
        # (the browser's own resources are not the site's: the full browser's PDF viewer streams the
        # document to itself at a chrome-extension:// URL, and that request may end as failed)
        # (nor one that failed after a good answer came, the page cancelling it while its body came,
        # ERR_ABORTED: a fetch whose body a script never reads, aborted; or the browser refusing it,
        # ERR_BLOCKED_BY: the archive answered it, as the agent environment counts it)
        # (nor one answered with the recording proxy's placeholder: its site never answered the
        # recording, and the replay answers it as the capture went, a failure Chromium reports as
        # one; the browser may take that placeholder for no answer at all, firing no response: a
        # cross-origin XHR, the proxy's 502 carrying no CORS header, or a CONNECT's: asked of the
        # replay's index then)
        # (a script or stylesheet the site answered 404, as recorded: Chromium then fails it, as
        # it did the site's; counted with its answer, not as a miss)
        status = answered.get(request)
        good = status is not None and (status < 400 or request in captured)
        cancelled = good and refused_after_answer(status, str(request.failure or ""))
        if not request.url.startswith(("http:", "https:")) or cancelled:
            return
        only = getattr(placeholders, "answer_only", None)
        if request in placeholder_answers:
            return
        if answered.get(request) is None and only is not None and only(request):
            failed_at_capture.append(request.url)
        else:
            missed.append(request.url)
    page.on("requestfailed", on_failed)
    page.on("response", on_response)
    if sockets is None or sockets.direct:
        page.on("websocket", lambda ws: missed.append(ws.url))
    return page, missed, failed_at_capture, fuzzy


def _main_document(request, page) -> bool:
    try:
        return request.is_navigation_request() and request.frame == page.main_frame
    except Exception:  # a frame already detached
        return False


def _load(browser, target: str, placeholders, shot_kind: str, playwright_error, sockets=None, *,
          shadow: bool = True) -> dict:
    """One page load in a fresh context: its DOM (with its open shadow roots when ``shadow``, as
    the capture's: :func:`shadow_roots`), a screenshot of ``shot_kind`` (like with like: the kind of
    screenshot the capture took), its misses and requests failed at capture, and the error."""
    context = new_context(browser)
    track_live_timers(context)  # (what a timer shows soon after the network is quiet, as the crawl waits)
    page, missed, failed_at_capture, fuzzy = _watch(context, placeholders, sockets)
    inflight = track_inflight(page)
    error = shot_error = None
    dom, shot, html = b"", None, True
    try:
        response = page.goto(target, wait_until="load", timeout=30_000)
        kind = (response.headers.get("content-type") or "").lower() if response is not None else ""
        html = not kind or "html" in kind  # (JSON, text, images: the browser draws them with its own page)
        wait_settled(page, inflight, sockets=sockets)
        wait_timers_due(page, inflight, sockets)
        dom = page.content(include_shadow=shadow).encode("utf-8")
    except playwright_error as exc:
        error = str(exc).splitlines()[0]
    if error is None and shot_kind != "none":
        # the page replayed; a screenshot Chromium did not draw in time (a loaded machine) is the
        # check's own failure, not the page's: reported apart, the page's comparison stands
        try:
            shot = still_screenshot(page, full_page=shot_kind == "full")
        except playwright_error as exc:
            shot_error = str(exc).splitlines()[0]
    context.close()
    return {"dom": dom, "shot": shot, "error": error, "screenshot_error": shot_error, "html": html,
            "misses": sorted(set(missed)), "failed_at_capture": sorted(set(failed_at_capture)),
            "fuzzy": sorted(set(fuzzy))}


class _ReusedTab:
    """Direct mode's load of a page whose capture holds no text and no screenshot: only its misses
    and its error count, and proving them needs no new context per page. One page (one renderer:
    every direct-mode URL is on the replay server's origin) loads each in turn; before each load
    it is taken to ``about:blank`` and the context's state is wiped, so each page starts as in a
    new context: no cookies, no storage of the replay's origin (local, session, IndexedDB, cache
    storage), an empty HTTP cache (a resource is asked of the replay again, as a new context
    would). What a load reports is what :func:`_load` reports, less the screenshot."""

    def __init__(self, browser, origin: str, placeholders, sockets=None):
        self.browser, self.origin, self.placeholders, self.sockets = browser, origin, placeholders, sockets
        self.context = None

    def _open(self) -> None:
        self.context = new_context(self.browser)
        track_live_timers(self.context)
        self.page, self.missed, self.failed_at_capture, self.fuzzy = _watch(self.context, self.placeholders, self.sockets)
        self.cdp = self.context.new_cdp_session(self.page)
        self.cdp.send("Network.enable")
        self.inflight = track_inflight(self.page)

    def _wipe(self) -> None:
        self.page.goto("about:blank")
        self.context.clear_cookies()
        self.cdp.send("Network.clearBrowserCache")
        self.cdp.send("Storage.clearDataForOrigin", {"origin": self.origin, "storageTypes": "all"})
        self.inflight.clear()
        self.missed.clear()
        self.failed_at_capture.clear()
        self.fuzzy.clear()

    def load(self, target: str, playwright_error) -> dict:
        error, dom = None, b""
        if self.context is not None:
            try:
                self._wipe()
            except playwright_error:  # the page before left the tab unusable: a new one
                self.close()
        if self.context is None:
            self._open()
        try:
            self.page.goto(target, wait_until="load", timeout=30_000)
            wait_settled(self.page, self.inflight, sockets=self.sockets)
            wait_timers_due(self.page, self.inflight, self.sockets)
            dom = self.page.content(include_shadow=True).encode("utf-8")
        except playwright_error as exc:
            error = str(exc).splitlines()[0]
        result = {"dom": dom, "shot": None, "error": error, "screenshot_error": None, "misses": sorted(set(self.missed)),
                  "failed_at_capture": sorted(set(self.failed_at_capture)), "fuzzy": sorted(set(self.fuzzy))}
        if error is not None:  # a tab in an unknown state: the next page gets a new one
            self.close()
        return result

    def close(self) -> None:
        if self.context is not None:
            try:
                self.context.close()
            except Exception:
                pass
            self.context = None


def render_html(report: dict) -> str:
    e = htmlmod.escape
    s = report["summary"]
    rows = []
    for r in report["pages"]:
        bad = r["misses"] or r["error"]
        shots = "".join(
            f'<figure><img loading="lazy" src="{e(src)}" alt="{label}"><figcaption>{label}</figcaption></figure>'
            for src, label in ((r["capture_screenshot"], "captured"), (r["screenshot"], "replayed")) if src)
        misses = "".join(f"<li>{e(m)}</li>" for m in r["misses"])
        title = e(r["title"])
        err = f"<p class=err>{e(r['error'])}</p>" if r["error"] else ""
        miss_list = f"<ul class=miss>{misses}</ul>" if misses else ""
        fuzzy = r.get("fuzzy") or []
        if fuzzy:  # (no miss here; the agent environment misses them)
            miss_list += ("<p>answered only fuzzily (the agent environment misses them):</p><ul class=fuzzy>"
                          + "".join(f"<li>{e(u)}</li>" for u in fuzzy) + "</ul>")
        sim = "no capture text" if r["text_similarity"] is None else f"{r['text_similarity']:.3f}"
        pixels = "" if r["pixel_difference"] is None else f"{r['pixel_difference']:.4f}"
        url = e(r["url"])
        rows.append(
            f'<tr class="{"bad" if bad else "ok"}"><td><a href="{url}">{url}</a><br><small>{title}</small>'
            f'{err}{miss_list}</td><td>{len(r["misses"])}</td><td>{sim}</td>'
            f'<td>{pixels}</td><td class="shots">{shots}</td></tr>')
    summary = "".join(f"<tr><th>{e(k.replace('_', ' '))}</th><td>{e(str(v))}</td></tr>" for k, v in s.items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Replay check: {e(report["archive"])}</title>
<style>
body{{font:14px/1.4 system-ui,sans-serif;margin:2em}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;vertical-align:top;text-align:left}}
tr.bad td:first-child{{border-left:4px solid #c00}} tr.ok td:first-child{{border-left:4px solid #2a2}}
.shots{{display:flex;gap:8px}} figure{{margin:0}} img{{width:240px;border:1px solid #999}}
.err,.miss{{color:#c00}}
</style></head><body>
<h1>Replay check: {e(report["archive"])}</h1>
<table class="summary">{summary}</table>
<h2>Pages</h2>
<table class="pages"><tr><th>page</th><th>misses</th><th>text similarity</th><th>pixel difference</th><th>screenshots</th></tr>
{"".join(rows)}
</table></body></html>
"""

