"""The replay answerer: what a replayed request gets, decided without sockets.

:class:`Replay` holds one open archive and everything a replay decides: request matching
(:mod:`.matching`), ordered repeats, site models (:mod:`.hooks`), the determinism runtime injected
into HTML (:mod:`.determinism`), JSONP callback renaming, pywb's rules for direct URLs
(``/<timestamp>[id_]/<url>``) and self-redirects, range requests, the miss policy and miss report,
and the HTTP response it builds (cached, ready to send). The replay server (:mod:`.server`, proxy
and direct modes) only parses HTTP and writes these answers to sockets; the simulator's text
backend asks a :class:`Replay` directly (:meth:`Replay.fetch`), with no server at all.
"""

from __future__ import annotations

import contextlib
import http
import json
import logging
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from urllib.parse import parse_qsl, quote, unquote, urljoin, urlsplit

from webfreeze.archives import Archive, ArchiveError
from webfreeze.archives.content import DecodeError, content_encoding
from webfreeze.archives.store import UNFINISHED_PREFIX
from webfreeze.archives.timeutil import parse_time, to_timestamp14
from webfreeze.archives.urlkey import surt_key
from webfreeze.common.errors import WebfreezeError
from webfreeze.common.files import check_output_file
from webfreeze.common.http import header_value

from .decoding import decode_bounded
from .determinism import inject as inject_script
from .determinism import page_seed, parsed_as_xml, runtime_script
from .hooks import ReplayRequest, ReplayResponse, SiteModel, host_key
from .matching import (
    HTML_MIMES,
    SAFE_METHODS,
    Matcher,
    Rules,
    Sequencer,
    answerable,
    asks_for_document,
    closest,
    request_body_key,
    request_kind,
)
from .upstream import EPISODES_DOCUMENT, Upstream

log = logging.getLogger("webfreeze.replay")

CACHE_BYTES = 256 * 1024 * 1024
ON_MISS = ("404", "502", "abort")
MISS_STATUS = {"404": 404, "502": 502}  # (abort: no status, the connection is dropped)
DIRECT = re.compile(r"^/(\d{1,14})(?:([a-z]{2})_)?/(.+)$", re.DOTALL)
_PLAIN_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_LOOSE_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)(?::|%3a)(?:/|%2f)+", re.IGNORECASE)


def direct_original(original: str) -> str:
    """The URL a direct-mode path names after its ``/<ts>[xx_]/``, read as pywb reads it: a URL
    without a scheme is ``http://`` (leading slashes dropped: ``//host/path``); a scheme whose colon
    or slashes a client percent-encoded (pip quotes the colon of the links it follows:
    ``http%3A//host/...``; a URL encoded whole: ``http%3A%2F%2Fhost%2Fpath``) or whose second slash
    was lost (``http:/host``) is read back as ``scheme://``. Up to the first ``/``, ``?`` or ``#``
    left in it, the URL is decoded; the rest is kept as written (its escapes are its own)."""
    if _PLAIN_SCHEME.match(original):
        return original
    m = _LOOSE_SCHEME.match(original)
    if m is None:
        return "http://" + original.lstrip("/")
    rest = original[m.end():]
    cut = re.search(r"[/?#]", rest)
    head, tail = (rest[:cut.start()], rest[cut.start():]) if cut else (rest, "")
    return f"{m.group(1).lower()}://{unquote(head)}{tail}"


HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te",
    "trailer", "transfer-encoding", "upgrade", "content-length", "alt-svc",
})
NO_BODY_STATUS = frozenset({204, 304}) | set(range(100, 200))


class ReplayError(WebfreezeError):
    """A replay could not start (no such archive, port in use, bad rules): one line for the user.
    Not an :class:`ArchiveError`: those the archive raises (a damaged or locked one) come through as
    themselves."""


class PortInUse(ReplayError):
    """The replay server's port is taken (a caller that can take another port catches this)."""


# Chromium's own background traffic (component and model updates) that its launch flags do not stop
# entirely. In replay it is sent through this server so that it fails here instead of reaching for
# the network; it is not a page's request, so it is counted (stats "browser_own") but kept out of
# the miss list and report, whose content would otherwise change from run to run (its URLs carry
# random query strings).
BROWSER_INTERNAL_HOSTS = ["update.googleapis.com", "clients2.google.com", "clients2.googleusercontent.com",
                          "optimizationguide-pa.googleapis.com", "content-autofill.googleapis.com",
                          "safebrowsingohttpgateway.googleapis.com", "edgedl.me.gvt1.com", "redirector.gvt1.com"]
# ... and the browser's own requests to hosts a site may also use, by the start of their path and a
# query parameter that names the browser (Google's own pages ask the same path with another
# `source`): a desktop Chromium's check of who is signed in (a person opening `replay serve` in their own
# browser: every page load asked for it, and the miss report listed it beside the site's misses).
BROWSER_INTERNAL_PATHS = [("accounts.google.com", "/ListAccounts", "source=ChromiumBrowser")]


def is_browser_own(url: str) -> bool:
    """Whether ``url`` is the browser's own background traffic, not a page's request
    (:data:`BROWSER_INTERNAL_HOSTS`, :data:`BROWSER_INTERNAL_PATHS`)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return host in BROWSER_INTERNAL_HOSTS or any(
        host == h and parts.path.startswith(prefix) and asked in parts.query.split("&")
        for h, prefix, asked in BROWSER_INTERNAL_PATHS)


# Characters left as they are when a capture's URL is written into a response header.
URL_SAFE = ":/?&=%#;+,@!$~*()[]'"


# The request headers that decide whether an HTML answer gets the runtime (asks_for_document).
_INJECT_VARY = ("Accept", "Sec-Fetch-Dest", "X-Requested-With")


def _vary(headers: list[tuple[str, str]], names) -> list[tuple[str, str]]:
    """``headers`` whose ``Vary`` also names ``names`` (one header, the capture's names first)."""
    had = [v for k, v in headers if k.lower() == "vary"]
    listed = [n.strip() for v in had for n in v.split(",") if n.strip()]
    if "*" in listed:
        return headers
    low = {n.lower() for n in listed}
    value = ", ".join(listed + [n for n in names if n.lower() not in low])
    return [(k, v) for k, v in headers if k.lower() != "vary"] + [("Vary", value)]


@dataclass(slots=True)
class Answered:
    """How one request was answered (``Replay.answers``): level ``exact``, ``canonical``,
    ``fuzzy`` (with its score and the URL of the capture served), ``model`` or ``miss`` (with the
    best fuzzy score turned down, if any)."""

    method: str
    url: str
    level: str
    status: int
    score: float | None = None
    capture_url: str | None = None
    # What was sent back (for a HAR export of an episode): the body's media type and length in
    # bytes as served (None for a miss, whose body is our own note).
    mime: str | None = None
    size: int | None = None
    open_stream: bool = False  # an event stream still open when recorded: ended after its events
    capture: int | None = None  # the id of the exchange served (None: a miss, a site model's answer)
    why: str | None = None  # a fuzzy repeat's reason (REPEAT_WHY's text)


def _block_value(block: bytes, name: bytes) -> str | None:
    """The value of header ``name`` (lower case) in a ``Name: value\r\n`` block, or None."""
    for line in block.split(b"\r\n"):
        key, sep, value = line.partition(b":")
        if sep and key.strip().lower() == name:
            return value.strip().decode("latin-1")
    return None


# The header that marks an answer from an event stream still open when recorded (its events, then
# the end the replay gives it): provenance notes it (simulator/provenance.py OPEN_STREAM_WHY), and
# the replay runtime's EventSource keeps such a stream open at its end, as the site did
# (replayer/determinism.py). A cross-origin answer exposes it to that script (CORS hides the rest).
OPEN_STREAM_HEADER = "X-Webfreeze-Open-Stream"

# The requests each recorded session asked and got no answer to before it ended (a long poll the
# site was holding): ``unfinished/<session>.json``, ``{"version": 1, "requests": ["GET URL", ...]}``.
# Asked again beyond its recorded answers (or never answered at all), such a request is held: the
# answer carries HELD_HEADER, which the pumped runtime never delivers to the page (as the site held
# it), and which the replay server, without the runtime's timers, keeps open instead of answering.
HELD_HEADER = "X-Webfreeze-Held"
HELD_WHY = ("held: the recording asked this again and got no answer before it ended (the site was holding it, "
            "a long poll); never answered here either")

# The requests a replay session counts (``Replay.asked``: method and URL -> how often asked since the
# last reset; what ``replay check`` reads to tell a page asking one request again and again).
ASKED_KEYS = 10_000

# Why a repeated request was answered fuzzily (its capture matched exactly): the header the browser
# backend's provenance reads (its value a key of REPEAT_WHY), and the answer's ``why``.
REPEAT_HEADER = "X-Webfreeze-Repeat"
REPEAT_WHY = {
    "differ": "asked more often than recorded, and its recorded answers differ: the last stands in for one "
              "the recording never saw",
    "made": "a submission whose recorded answer says it made something, sent once more than recorded: the "
            "recording never saw the site's answer to it",
}


@dataclass
class Built:
    """A ready-to-send archived response (without the status line's connection headers)."""

    status: int
    reason: str
    header_block: bytes  # "Name: value\r\n" lines, hop-by-hop and length removed
    body: bytes
    range_ok: bool
    size: int  # bytes counted against the cache
    open_stream: bool = False  # events a page kept open, recorded as they stood (recorder/addon.py)


def _status_line(status: int, reason: str) -> bytes:
    if not reason:
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = "Unknown"
    return f"HTTP/1.1 {status} {reason}\r\n".encode("latin-1", "replace")


def _header_block(headers) -> bytes:
    return "".join(f"{k}: {v}\r\n" for k, v in headers).encode("latin-1", "replace")


def _miss_cors(method: str, headers, expose: str = "X-Webfreeze-Miss, X-Webfreeze-Score") -> bytes | None:
    """The CORS headers of a miss answered to a request that names its origin (a page's script
    asking another origin): the page reads the miss (a 404) as it would the live site's answer,
    rather than a network error that says nothing; None when the request names none. A preflight
    is granted what it asks for (the request that follows is a miss all the same). ``expose``: the
    headers of ours the page's script may read (a held answer's mark, :meth:`Replay._held`)."""
    origin = header_value(headers, "origin")
    if not origin:
        return None
    lines = [f"Access-Control-Allow-Origin: {origin}", "Access-Control-Allow-Credentials: true", "Vary: Origin",
             f"Access-Control-Expose-Headers: {expose}"]
    if method.upper() == "OPTIONS":
        asked = header_value(headers, "access-control-request-method")
        if asked:
            lines.append(f"Access-Control-Allow-Methods: {asked}")
        wanted = header_value(headers, "access-control-request-headers")
        if wanted:
            lines.append(f"Access-Control-Allow-Headers: {wanted}")
    return "".join(f"{line}\r\n" for line in lines if "\r" not in line and "\n" not in line).encode("latin-1", "replace")


def simple_response(status: int, content_type: str, body: bytes, extra: bytes = b"") -> tuple[bytes, bytes]:
    """(head, body) of a response made here rather than taken from the archive (a miss, an error,
    the listing; the server's own answers to bad requests)."""
    head = (_status_line(status, "") + f"Content-Type: {content_type}\r\n".encode("latin-1") + extra
            + f"Content-Length: {len(body)}\r\n".encode())
    return head, body


class ResponseCache:
    """Least-recently-used cache of :class:`Built` responses, bounded in bytes."""

    def __init__(self, limit: int = CACHE_BYTES):
        self.limit = limit
        self.used = 0
        self._items: OrderedDict = OrderedDict()

    def get(self, key):
        item = self._items.get(key)
        if item is not None:
            self._items.move_to_end(key)
        return item

    def put(self, key, item: Built) -> None:
        if item.size > self.limit // 4:
            return
        self._items[key] = item
        self.used += item.size
        while self.used > self.limit:
            _, old = self._items.popitem(last=False)
            self.used -= old.size

    def clear(self) -> None:
        self._items.clear()
        self.used = 0

class Replay:
    """The answers of one archive's replay, without sockets. :meth:`open` it (or use ``with``),
    then :meth:`answer` requests (HTTP/1.1 head and body, as a server sends them) or
    :meth:`fetch` them (status, headers, body, for an in-process client); :meth:`reset` starts a
    new session (ordered repeats, site model state, target time); :meth:`close` at the end.
    Not thread-safe for answers: one thread (the server's event loop) asks at a time."""

    def __init__(self, archive_path: str | Path, *, on_miss: str = "404", miss_report: str | Path | None = None,
                 inject: bool = True, seed: int = 0, rules: dict | None = None, when: str | None = None,
                 cache_bytes: int = CACHE_BYTES, rule_defaults: dict | None = None,
                 timers: bool = False, upstream: Upstream | None = None):
        """``rules`` override the archive's stored ``replay_rules``, which override ``rule_defaults``
        (the agent environment lays :data:`~.matching.AGENT_RULES` there; ``replay serve`` nothing).
        ``upstream`` (live runs only, :mod:`.upstream`): a recording proxy that answers every request
        (mode ``live``) or the misses (mode ``miss``); None, the default, keeps the replay hermetic."""
        if on_miss not in ON_MISS:
            raise ReplayError(f"--on-miss must be one of {', '.join(ON_MISS)}")
        self.archive_path = Path(archive_path)
        self.on_miss = on_miss
        self.miss_report = Path(miss_report) if miss_report else None
        self.inject = inject
        # The injected runtime also takes over the page's timers (the agent environment pumps them;
        # determinism.py): never for people browsing, whose pages must run on their own.
        self.timers = timers
        # The in-process replays that serve WebSockets (simulator/replay_route.py) set this: the
        # runtime then counts a page's pending socket deliveries (determinism.SOCKET_MARK).
        self.sockets = False
        # ...and, where a replay server answers workers' sockets too, with marks (its proxy, in
        # replay check), this: a worker's pending deliveries count in its page's (determinism.py).
        self.worker_sockets = False
        self.upstream = upstream
        self.preferred_session: str | None = None  # (a live run's archive: see prefer_episode)
        self._episodes: dict = {}
        self._failed_ids: dict[int, bool] = {}  # capture id -> a failed upstream's placeholder
        self.seed = seed
        self.rule_overrides = rules or {}
        self.rule_defaults = rule_defaults or {}
        # When a list: every answer is appended to it as an :class:`Answered` record (the text
        # backend's provenance); None (the default) costs nothing.
        self.answers: list | None = None
        self._strict = False
        self.when = self.default_when = parse_time(when).timestamp() if when else None
        self.clock_shift = 0.0  # (seconds; reset() sets it for one session: a probe, see there)
        self.cache = ResponseCache(cache_bytes)
        self.sequencer = Sequencer()
        self.asked: dict = {}  # (method, url) -> how often asked this session (ASKED_KEYS at most)
        self.unfinished: frozenset = frozenset()  # (method, url) a recording asked and got no answer to
        # the capture that answered this session's last state-changing request (-1: none answered
        # it; None: none asked yet): repeated requests are answered from what followed it
        self._last_change: int | None = None
        # whether a state-changing request of this session was answered fuzzily or not at all:
        # the site's state has left the recording's
        self._diverged = False
        # the captures this session's state-changing requests were answered with, by id, and their
        # requests (method, URL, body key: replayer/websocket.py action_key): what the sequencer
        # and a socket's messages that followed another action of its session are checked against
        self.changes_answered: dict[int, tuple[str, str, str]] = {}
        self.models: dict[str, SiteModel] = {}
        self._last_capture: str | None = None
        self.model_state: dict[str, dict] = {}
        self.misses: list[dict] = []
        self.stats = {"requests": 0, "hits": 0, "misses": 0, "errors": 0, "model": 0, "bad_requests": 0}
        self._miss_file = None
        self._state_lock = threading.RLock()
        self.archive: Archive | None = None
        self.matcher: Matcher | None = None
        self.rules: Rules | None = None

    # ------------------------------------------------------------------ opening and closing
    def open(self) -> "Replay":
        """Open the archive and build the match index (the replay rules are checked here)."""
        if not self.archive_path.exists():
            raise ReplayError(f"{self.archive_path}: no such archive")
        if self.miss_report is not None:  # appended to on the first miss: refuse a bad path now
            check_output_file(self.miss_report, protect=[self.archive_path], what="miss report", devices_ok=True)
        self.archive = Archive.open(self.archive_path)
        try:
            stored = self.archive.meta().get("replay_rules") or {}
            try:  # checked together: an override may mend what the archive stores
                self.rules = Rules.from_dict({**self.rule_defaults, **(stored if isinstance(stored, dict) else {}),
                                             **self.rule_overrides})
            except (TypeError, ValueError) as exc:
                where = "the archive's replay_rules" + (" with the --rules overrides" if self.rule_overrides else "")
                raise ReplayError(f"bad replay rules ({where}): {exc}") from None
            self.matcher = Matcher.from_archive(self.archive, self.rules)
            self._episodes = self._live_episodes()
            self._strict = bool(self.matcher.strict_kinds)
            self.unfinished = self._unfinished()
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self._miss_file:
            self._miss_file.close()
            self._miss_file = None
        if self.archive is not None:
            self.archive.close()
            self.archive = None

    def __enter__(self) -> "Replay":
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ sessions and site models
    def register(self, model: SiteModel) -> None:
        """Let ``model`` answer requests for its hosts (before the archive)."""
        with self._state_lock:
            for h in model.hosts:
                self.models[h.lower()] = model
            self.model_state.pop(model.name, None)  # (fresh, on first use)

    @property
    def actions_answered(self) -> set[tuple[str, str, str]]:
        """The requests (method, URL, body key) of the captures this session's state-changing
        requests were answered with."""
        return set(self.changes_answered.values())

    def reset(self, seed: int | None = None, when: str | None = None, *, clock_shift: float = 0.0) -> None:
        """Start a new replay session: ordered repeats start over, site models get fresh state;
        ``when`` (ISO 8601 or 1-14 digits) sets the target time captures are chosen closest to.
        ``clock_shift`` (seconds) moves the runtime's clock of every page away from its capture time:
        a probe (``replay check`` finds with it the words a page's scripts write from the clock), 0
        for every replay people or agents see."""
        with self._state_lock:
            if seed is not None:
                self.seed = seed
            self.clock_shift = float(clock_shift)
            # a session without a time of its own goes back to the server's (no carry-over between tasks)
            self.when = parse_time(when).timestamp() if when is not None else self.default_when
            self.sequencer.reset()
            self._last_change = None
            self.changes_answered = {}
            self._diverged = False
            self.cache.clear()  # injected pages depend on the seed
            # Fresh site models, each built when first asked (a model's initial state depends only on
            # the seed; most episodes touch one site model of many, or none).
            self.model_state.clear()
            self.misses = []
            self.asked = {}

    def _unfinished(self) -> frozenset:
        """The requests (method, URL) a recorded session asked that got no answer before it ended
        (``unfinished/<session>.json``, recorder/session.py): the site was holding them, a long poll."""
        out = set()
        for doc in self.archive.documents(prefix=UNFINISHED_PREFIX):
            try:
                body = doc.body()
            except Exception:  # (a damaged document: nothing held by it)
                continue
            for line in (body.get("requests") or []) if isinstance(body, dict) else []:
                method, _, url = str(line).partition(" ")
                if method and url:
                    out.add((method.upper(), url))
        return frozenset(out)

    def _live_episodes(self) -> dict:
        """A live run's archive: task id -> its episodes' capture sessions (recorder/live.py writes
        the document); {} for any other archive."""
        if EPISODES_DOCUMENT not in self.archive.document_names():
            return {}
        doc = self.archive.get_document(EPISODES_DOCUMENT)
        episodes = doc.get("episodes") if isinstance(doc, dict) else None
        return {str(k): v for k, v in episodes.items() if isinstance(v, list) and v} if isinstance(episodes, dict) else {}

    def prefer_episode(self, task_id: str | None) -> None:
        """Answer this replay session from the capture session of ``task_id``'s last live episode
        first (the archive of a live run records one per episode): repeated requests, and pages
        whose runtime clock starts at their capture time, then come as that episode saw them. A
        task the archive has no episode of (any archive not made by a live run) changes nothing."""
        sessions = self._episodes.get(str(task_id)) if task_id is not None else None
        self.preferred_session = sessions[-1] if sessions else None

    def _state_of(self, model: SiteModel) -> dict:
        """``model``'s state in this session, made from the seed when first asked for (the lock held)."""
        state = self.model_state.get(model.name)
        if state is None:
            state = self.model_state[model.name] = model.initial_state(self.seed)
        return state

    def site_state(self) -> dict:
        """Every site model's exported state, by model name (JSON-serialisable)."""
        with self._state_lock:
            seen = {}
            for model in self.models.values():
                seen[model.name] = model.export_state(self._state_of(model))
            return json.loads(json.dumps(seen, sort_keys=True))


    # ------------------------------------------------------------------ answering
    def failed_upstream(self, method: str, url: str, headers=(), body: bytes | None = b"") -> str | None:
        """The match level, when every capture this replay could answer the request with is the
        recording proxy's placeholder for an upstream that failed (a ``502`` whose site never
        answered the recording: recorder/addon.py's ``error``); else None. For a browser that refused
        such a placeholder and reports no answer at all (a cross-origin XHR: the 502 carries no CORS
        header), so that it is counted as the answer the capture had, not as a miss."""
        headers = list(headers or ())
        kind = (lambda: request_kind(headers, url)) if self._strict else None
        level, _, caps, _ = self.matcher.candidates(method, url, request_body_key(headers, body or b""), kind)
        if not caps or any(c.status != 502 for c in caps):
            return None
        with self._state_lock:
            known = self._failed_ids
            for c in caps:
                if c.id not in known:
                    known[c.id] = bool(self.archive.exchange(c.id).extra.get("error"))
            return level if all(known[c.id] for c in caps) else None

    def fetch(self, method: str, url: str, headers: list[tuple[str, str]] | None = None,
              body: bytes = b"") -> tuple[int, list[tuple[str, str]], bytes]:
        """(status, headers, body) of one replayed request, as :meth:`answer` gives it to a server
        (status 0 and nothing else where ``--on-miss abort`` would drop the connection)."""
        head, data = self.answer(method, url, list(headers or []), body)
        if data is None:  # --on-miss abort
            return 0, [], b""
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        return status, [tuple(line.split(": ", 1)) for line in lines[1:] if ": " in line], data

    def answer(self, method: str, url: str, headers: list[tuple[str, str]], body: bytes, *,
               when: float | None = None, ordered: bool = True, inject: bool | None = None,
               skip_self_redirects: bool = False, capture: int | None = None):
        """(status line + headers bytes, body bytes or None for abort) for one replayed request;
        ``inject=False`` answers with the archived bytes whatever the server's setting (``id_``);
        ``skip_self_redirects`` passes over captures that redirect to their own URL (pywb's rule);
        ``capture``: the exchange to answer with when it is among the request's candidates (an
        episode answered again from its trajectory, ``eval export-har``)."""
        self.stats["requests"] += 1
        key0 = (method.upper(), url)  # (how often each request came this session)
        if key0 in self.asked or len(self.asked) < ASKED_KEYS:
            self.asked[key0] = self.asked.get(key0, 0) + 1
        inject = self.inject if inject is None else inject and self.inject
        if inject and not asks_for_document(headers, url):
            # an HTML answer to a fetch, an XHR or a script (an htmx fragment, a worker's script served
            # as text/html): the page's runtime is there already, and the bytes are what it asked for
            inject = False
        hk = host_key(url)
        model = self.models.get(hk)
        answers = self.answers
        changes = method.upper() not in SAFE_METHODS
        if model is not None:
            resp = self._ask_model(model, method, url, headers, body)
            if resp is not None:
                if changes:
                    self._last_change = -1
                self.stats["model"] += 1
                if answers is not None:
                    answers.append(Answered(method.upper(), url, "model", resp.status,
                                            mime=header_value(resp.headers, "content-type"), size=len(resp.body)))
                return self._serialise_plain(self._inject_model(resp, url) if inject else resp, method, "model")
        if self.upstream is not None and self.upstream.mode == "live" and _may_go_live(url):  # live runs
            return self._answer_live(method, url, headers, body, inject, "exact")
        bkey = request_body_key(headers, body)
        # (the kind is read only when the rules keep some kinds from fuzzy answers, and a request
        # reaches the fuzzy level: people's replay and exact hits pay nothing for it)
        kind = (lambda: request_kind(headers, url)) if self._strict else None
        level, key, caps, score = self.matcher.candidates(method, url, bkey, kind)
        if not caps and method.upper() == "HEAD":  # HEAD is answered from a GET capture's headers
            level, key, caps, score = self.matcher.candidates("GET", url, bkey, kind)
        if not caps and self.upstream is not None and _may_go_live(url):  # patching misses (mode "miss")
            return self._answer_live(method, url, headers, body, inject, "live")
        held = (method.upper(), url) in self.unfinished and not asks_for_document(headers, url)
        if level not in ("exact", "canonical") and held:
            return self._held(method, url, headers)  # (asked in the recording, never answered: held)
        if not caps:
            if changes:
                self._last_change = -1
                self._diverged = True
            if answers is not None:
                answers.append(Answered(method.upper(), url, "miss", MISS_STATUS.get(self.on_miss, 0),
                                        round(score, 4) if score else None))
            return self._miss(method, url, headers, bkey, score)
        target = when if when is not None else self.when
        # a live run's archive: the task's own episode first (its answers, and its loads' times)
        pref = self.preferred_session
        own = [c for c in caps if c.session_id == pref] if pref is not None else []
        full = answerable(caps, headers)
        # A recorded 304 passed over for a full answer (no validator asked) stands for a page the
        # recording browser loaded from its cache at the 304's time: when it is the capture nearest
        # the session's time, the page's runtime clock starts then, not when the body was fetched
        # (a hash-routed application's shell, revalidated by every page of a crawl).
        loaded = None
        if len(full) < len(caps) and target is not None:
            near = closest(own or caps, target)
            loaded = near.captured_at if near.status == 304 else None
        caps = [c for c in full if c.session_id == pref] or full if own else full
        repeat = None  # (why a repeat is fuzzy: a key of REPEAT_WHY)
        chosen = next((c for c in caps if c.id == capture), None) if capture is not None else None
        if chosen is not None:
            cap = chosen
        elif ordered:
            cap, again = self.sequencer.pick(key, caps, target, (self._last_change, self.matcher.antecedent,
                                                                 self.changes_answered))
            if again and held:
                # asked once more than answered, where the recording's own next ask got no answer
                # before it ended: the site was holding it (a long poll), and holds it here
                return self._held(method, url, headers)
            if again and (changes or self._diverged) and self._answers_differ(caps):
                # asked more often than recorded, and the site answered it differently each time:
                # the last answer stands in for one the recording never saw (a state-changing
                # request, or any once the site's state has left the recording's)
                level, score, repeat = "fuzzy", 1.0, "differ"
            elif again and changes and self._made_something(caps):
                # a submission whose answer says it made something (a redirect after the POST, a
                # 201), sent once more: the site would have made it again, or refused a spent
                # token (Roundup's new issue), which the recording never saw
                level, score, repeat = "fuzzy", 1.0, "made"
        else:
            cap = closest(caps, target)
        if changes:
            self._last_change = cap.id
            self.changes_answered[cap.id] = (cap.method.upper(), cap.url, cap.body_key or "")
            self._diverged = self._diverged or level == "fuzzy"
        cap_id, cap_url = cap.id, cap.url
        built = self._build(cap_id, inject, loaded)
        if skip_self_redirects and 300 <= built.status < 400 and _redirects_to_itself(built, cap_url):
            other = self._other_than_self_redirect(method, url, bkey, target, inject)
            if other is not None:
                (cap_id, cap_url), built = other
        self.stats["hits"] += 1
        if level == "fuzzy":
            self.stats["fuzzy"] = self.stats.get("fuzzy", 0) + 1
            # what the browser backend's provenance reads: the score and the capture served instead
            extra = (f"X-Webfreeze-Match: fuzzy\r\nX-Webfreeze-Capture: {cap_id}\r\nX-Webfreeze-Score: {score:.4f}"
                     f"\r\nX-Webfreeze-Capture-Url: {quote(cap_url, safe=URL_SAFE)}\r\n"
                     + (f"{REPEAT_HEADER}: {repeat}\r\n" if repeat else "")).encode("latin-1", "replace")
        else:
            extra = f"X-Webfreeze-Match: {level}\r\nX-Webfreeze-Capture: {cap_id}\r\n".encode()
        if built.open_stream:
            extra += f"{OPEN_STREAM_HEADER}: 1\r\n".encode()
            if _block_value(built.header_block, b"access-control-allow-origin") is not None:
                extra += f"Access-Control-Expose-Headers: {OPEN_STREAM_HEADER}\r\n".encode()
        if answers is not None:
            answers.append(Answered(method.upper(), url, level, built.status,
                                    round(score, 4) if level == "fuzzy" else None,
                                    cap_url if level == "fuzzy" else None,
                                    _block_value(built.header_block, b"content-type"), len(built.body),
                                    built.open_stream, cap_id, REPEAT_WHY.get(repeat or "")))
        if level == "canonical" or level == "fuzzy":
            built = self._rewrite_jsonp(built, cap_url, url)
        return self._serialise(built, method, headers, extra)

    def _made_something(self, caps: list) -> bool:
        """Whether every recorded answer of ``caps`` says the request made something: ``201
        Created``, or a ``302``/``303`` redirect (a form's Post/Redirect/Get: a new issue, a saved
        page, a login). A ``301`` moves a URL and a ``200`` may only read (a GraphQL query, Dash's
        callbacks): neither says so."""
        return bool(caps) and all(c.status in (201, 302, 303) for c in caps)

    def _answers_differ(self, caps: list) -> bool:
        """Whether the recorded answers of ``caps`` (their status or payload) are not all alike. A
        ``304 Not Modified`` differs from none: it says the browser's copy was current, which a
        conditional request (a page's stylesheet asked again) is answered with beside the full
        answer it revalidated."""
        with self._state_lock:
            seen = {(row["status"], row["payload"]) for row in (self.archive.exchange_row(c.id) for c in caps)
                    if row and row["status"] != 304}
        return len(seen) > 1

    def _answer_live(self, method: str, url: str, headers, body: bytes, inject: bool, level: str):
        """Send the request to the upstream recording proxy, then answer with the exchange it
        recorded, read back from the archive and built as any archived answer (so an offline replay
        of the archive serves the same bytes). ``level`` is what provenance calls the answer:
        ``exact`` in a live run (what the replay of its archive will say), ``live`` for a patched
        miss. A site that failed (no exchange, or a 5xx document) is noted on the upstream."""
        got = self.upstream.fetch(method, url, headers, body)
        self.stats["live"] = self.stats.get("live", 0) + 1
        document = request_kind(headers, url) == "document"
        if got.failure and document:
            self.upstream.note_failure(method, url, got.status, got.failure)
        if got.exchange_id is None:
            self.stats["live_failures"] = self.stats.get("live_failures", 0) + 1
            if level == "exact" and got.status == 502:
                # The recorder kept the failure as a bare 502 exchange: answered as its replay will.
                if self.answers is not None:
                    self.answers.append(Answered(method.upper(), url, level, 502, size=0))  # (as replayed)
                return _status_line(502, "Bad Gateway") + b"X-Webfreeze-Match: exact\r\nContent-Length: 0\r\n", b""
            if self.answers is not None:
                self.answers.append(Answered(method.upper(), url, "miss", got.status or 502))
            text = f"webfreeze: the live site failed: {method.upper()} {url}: {got.failure}\n"
            head, data = simple_response(got.status or 502, "text/plain; charset=utf-8", text.encode("utf-8", "replace"),
                                         b"X-Webfreeze-Miss: 1\r\nCache-Control: no-store\r\n")
            return head, (b"" if method.upper() == "HEAD" else data)
        built = self._build(got.exchange_id, inject)
        if self.answers is not None:  # (described as the replay of the archive will describe it)
            self.answers.append(Answered(method.upper(), url, level, built.status,
                                         mime=_block_value(built.header_block, b"content-type"), size=len(built.body),
                                         capture=got.exchange_id))
        return self._serialise(built, method, headers,
                               f"X-Webfreeze-Match: {level}\r\nX-Webfreeze-Capture: {got.exchange_id}\r\n".encode())

    def _ask_model(self, model: SiteModel, method, url, headers, body) -> ReplayResponse | None:
        req = ReplayRequest(method.upper(), url, list(headers), body or b"")
        with self._state_lock:
            try:  # (its state made here when first asked for: a model's failure to make it is its bug too)
                return model.handle(req, self._state_of(model))
            except Exception as exc:  # a model bug answers 500 and is logged; the server stays up
                log.exception("site model %s failed on %s %s", model.name, method, url)
                self.stats["errors"] += 1
                return ReplayResponse(500, [("Content-Type", "text/plain")],
                                      f"webfreeze: site model {model.name} failed: {exc}\n".encode())

    def _inject_model(self, resp: ReplayResponse, url: str) -> ReplayResponse:
        """A site model's HTML page gets the same runtime as archived pages: its clock starts at the
        target time (else the archive's last capture), its random numbers from the run's seed."""
        ctype = header_value(resp.headers, "content-type", "").lower()
        if not self.inject or not ctype.startswith(HTML_MIMES) or resp.status in (204, 304) or resp.status < 200:
            return resp  # error pages too: a model's 404 page runs the site's scripts like any other
        try:
            html = decode_bounded(resp.body, content_encoding(resp.headers))
        except DecodeError:
            return resp
        if self.when is not None:
            at = datetime.fromtimestamp(self.when, timezone.utc).isoformat()
        else:
            if self._last_capture is None:
                span = self.archive.capture_range()
                self._last_capture = span[1] if span else "1970-01-01T00:00:00Z"
            at = self._last_capture
        body = inject_script(html, runtime_script(self._clock(at), page_seed(self.seed, url), timers=self.timers,
                                                        sockets=self.sockets, worker_sockets=self.worker_sockets),
                             xml=parsed_as_xml(ctype))
        drop = ("content-encoding", "content-security-policy", "content-security-policy-report-only", "etag",
                "content-md5", "digest", "content-length")
        return ReplayResponse(resp.status, [(k, v) for k, v in resp.headers if k.lower() not in drop], body,
                              resp.reason)

    def _held(self, method: str, url: str, headers):
        """The answer to a request the recording got no answer to (:data:`UNFINISHED_PREFIX`; a
        script's, never a document: an empty page would stand for one the site never finished): empty,
        marked :data:`HELD_HEADER` (the pumped runtime never gives it to the page; a replay server
        without it keeps the request open instead), ``exact`` with :data:`HELD_WHY`."""
        self.stats["held"] = self.stats.get("held", 0) + 1
        if self.answers is not None:
            self.answers.append(Answered(method.upper(), url, "exact", 200, mime=None, size=0, why=HELD_WHY))
        # (nosniff: Chromium waits for a body's first bytes to sniff an XHR's type, and reports no
        # response to a page's settle before them; held open, none come)
        extra = (f"X-Webfreeze-Match: exact\r\n{HELD_HEADER}: 1\r\nCache-Control: no-store\r\n"
                 "X-Content-Type-Options: nosniff\r\n").encode()
        extra += _miss_cors(method, headers, expose=HELD_HEADER) or b""
        head, data = simple_response(200, "text/plain; charset=utf-8", b"", extra)
        return head, b"" if method.upper() == "HEAD" else data

    def _miss(self, method, url, headers, bkey, score):
        if is_browser_own(url):  # the browser's own, not a page's
            with self._state_lock:
                self.stats["browser_own"] = self.stats.get("browser_own", 0) + 1
        else:
            self._log_miss(method, url, headers, bkey, score)
        if self.on_miss == "abort":
            return None, None
        body = f"webfreeze: not in archive: {method.upper()} {url}\n".encode("utf-8", "replace")
        # the best score honest matching turned down, as the text backend's provenance has it
        scored = f"X-Webfreeze-Score: {score:.4f}\r\n".encode() if score else b""
        cors = _miss_cors(method, headers)
        if cors is not None and method.upper() == "OPTIONS" and header_value(headers, "access-control-request-method"):
            # another origin's preflight: let the request itself come, to be answered as a miss too
            head, _ = simple_response(204, "text/plain; charset=utf-8", b"",
                                      b"X-Webfreeze-Miss: 1\r\nCache-Control: no-store\r\n" + cors)
            return head, b""
        head, body = simple_response(404 if self.on_miss == "404" else 502, "text/plain; charset=utf-8", body,
                             b"X-Webfreeze-Miss: 1\r\nCache-Control: no-store\r\n" + scored + (cors or b""))
        return head, (b"" if method.upper() == "HEAD" else body)

    def _log_miss(self, method, url, headers, bkey, score, why: str | None = None) -> None:
        """Count a miss and list it (``misses``, the miss report); ``why``: a WebSocket's reason (no
        recording of it, or what the page said when its conversation parted)."""
        self.stats["misses"] += 1
        referer = header_value(headers, "referer")
        entry = {"method": method.upper(), "url": url, "body_key": bkey, "referer": referer,
                 "best_fuzzy_score": round(score, 4) if score else None, "on_miss": self.on_miss}
        if why:  # (the replay server's WebSockets and tunnels: one line on what was not answered)
            entry["why"] = why
        with self._state_lock:
            self.misses.append(entry)
            if self.miss_report is not None:
                try:
                    if self._miss_file is None:
                        self._miss_file = open(self.miss_report, "a", encoding="utf-8")
                    self._miss_file.write(json.dumps(entry, sort_keys=True) + "\n")
                    self._miss_file.flush()
                except OSError as exc:  # a folder that refuses files (root passes the access check)
                    log.warning("cannot write the miss report %s (%s): misses are only counted from now on",
                                self.miss_report, exc.strerror or exc)
                    if self._miss_file is not None:
                        with contextlib.suppress(OSError):
                            self._miss_file.close()
                    self._miss_file = None
                    self.miss_report = None

    def _other_than_self_redirect(self, method: str, url: str, bkey: str, when: float | None, inject: bool):
        """pywb's rule for a capture that redirects to its own URL (the same SURT key, such as
        http -> https or a trailing slash): it would loop in replay, so the closest capture of the
        same SURT key that does not is answered instead; None when there is none."""
        found = [r for r in self.archive.lookup_surt(surt_key(url))
                 if r.method.upper() == method.upper() and r.body_key == bkey and r.kind == "response"]
        found.sort(key=lambda r: (abs(parse_time(r.captured_at).timestamp() - when) if when is not None else 0,
                                  r.captured_at, r.id))
        for r in found:
            built = self._build(r.id, inject)
            if not (300 <= built.status < 400 and _redirects_to_itself(built, r.url)):
                return (r.id, r.url), built
        return None

    def _build(self, exchange_id: int, inject: bool, loaded_at: str | None = None) -> Built:
        """The answer of capture ``exchange_id``; an HTML page's runtime clock starts at its capture
        time, or at ``loaded_at`` (when the recording browser loaded it: a revalidation's time)."""
        key = (exchange_id, inject, loaded_at)
        built = self.cache.get(key)
        if built is not None:
            return built
        ex = self.archive.exchange(exchange_id)
        resp = ex.response
        headers = resp.headers
        body = resp.payload(verify=True)  # once: the response is cached
        status = resp.status
        mime = resp.mime
        out_headers = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP]
        page = mime.startswith(HTML_MIMES) and status >= 200 and status not in (204, 304) and ex.method != "HEAD"
        if page and self.inject and not inject:
            # the runtime goes into a document's answer, not a fetch's (asks_for_document): the
            # browser's cache must not give this one to a navigation (a page fetched, then
            # navigated to); a document's answer keeps its captured headers
            out_headers = _vary(out_headers, _INJECT_VARY)
        if inject and page:  # (error pages run scripts too)
            try:
                html = decode_bounded(body, content_encoding(headers))
            except DecodeError:
                html = None
            if html is not None:
                seed = page_seed(self.seed, ex.url)
                body = inject_script(html, runtime_script(self._clock(loaded_at or ex.captured_at), seed,
                                                          timers=self.timers, sockets=self.sockets,
                                                          worker_sockets=self.worker_sockets),
                                     xml=parsed_as_xml(mime))
                drop = ("content-encoding", "content-security-policy", "content-security-policy-report-only",
                        "etag", "content-md5", "digest")
                out_headers = [(k, v) for k, v in out_headers if k.lower() not in drop]
        if status == 200:  # the serialiser says Accept-Ranges itself: the capture's (nginx sends it) is not repeated
            out_headers = [(k, v) for k, v in out_headers if k.lower() != "accept-ranges"]
        built = Built(status, resp.reason, _header_block(out_headers), body,
                      range_ok=status == 200, size=len(body) + 512, open_stream=bool(ex.extra.get("open_stream")))
        self.cache.put(key, built)
        return built

    def _clock(self, captured_at: str) -> str:
        """Where a page's runtime clock starts: its capture time, moved by this session's ``clock_shift``."""
        if not self.clock_shift:
            return captured_at
        return datetime.fromtimestamp(parse_time(captured_at).timestamp() + self.clock_shift, timezone.utc).isoformat()

    def _rewrite_jsonp(self, built: Built, captured_url: str, url: str) -> Built:
        """A JSONP body names the captured callback; answer with the one the page asked for."""
        names = self.rules.jsonp_params
        old = {k: v for k, v in parse_qsl(urlsplit(captured_url).query) if k.lower() in names}
        new = {k: v for k, v in parse_qsl(urlsplit(url).query) if k.lower() in names}
        for k, v in new.items():
            o = old.get(k)
            if o and o != v:
                head = built.body[:512]
                i = head.find(o.encode() + b"(")
                if i >= 0 and not head[:i].strip(b" \t\r\n;/*"):
                    body = built.body[:i] + v.encode() + built.body[i + len(o):]
                    return Built(built.status, built.reason, built.header_block, body, built.range_ok, len(body) + 512)
        return built

    def _serialise(self, built: Built, method: str, req_headers, extra: bytes):
        status, body = built.status, built.body
        head_extra = b""
        if built.range_ok:
            rng = header_value(req_headers, "range")
            if rng:
                part = _parse_range(rng, len(body))
                if part == "unsatisfiable":
                    head = (_status_line(416, "") + f"Content-Range: bytes */{len(body)}\r\n".encode()
                            + extra + b"Content-Length: 0\r\n")
                    return head, b""
                if part is not None:
                    start, end = part
                    status = 206
                    head_extra = f"Content-Range: bytes {start}-{end}/{len(body)}\r\n".encode()
                    body = body[start:end + 1]
            head_extra += b"Accept-Ranges: bytes\r\n"
        reason = built.reason if status == built.status else ""
        head = _status_line(status, reason) + built.header_block + head_extra + extra
        if status not in NO_BODY_STATUS:
            head += f"Content-Length: {len(body)}\r\n".encode()
        else:
            body = b""
        return head, (b"" if method.upper() == "HEAD" else body)

    def _serialise_plain(self, resp: ReplayResponse, method: str, level: str):
        headers = [(k, v) for k, v in resp.headers if k.lower() not in HOP_BY_HOP]
        head = (_status_line(resp.status, resp.reason) + _header_block(headers)
                + f"X-Webfreeze-Match: {level}\r\nContent-Length: {len(resp.body)}\r\n".encode())
        return head, (b"" if method.upper() == "HEAD" else resp.body)

    # ------------------------------------------------------------------ direct mode and control

    # ------------------------------------------------------------------ pywb's direct URLs and the listing
    def direct(self, target: str, method: str, headers, body):
        m = DIRECT.match(target)
        ts, modifier, original = m.group(1), m.group(2), m.group(3)
        original = direct_original(original)
        try:
            when = parse_time(ts).timestamp()
        except ArchiveError:
            return self._plain(400, f"bad timestamp {ts}\n")
        if len(ts) == 14 and self.when is not None and when <= self.when < when + 1:
            # the session's own time (``replay check`` sets each page record's) falls within the
            # second the URL names: it picks among that second's captures as the crawl saw them
            when = self.when
        return self.answer(method, original, headers, body, when=when, ordered=False,
                           inject=False if modifier == "id" else None, skip_self_redirects=True)


    def listing(self, target: str):
        q = dict(parse_qsl(urlsplit(target).query))
        try:
            page = max(1, int(q.get("page", "1")))
        except ValueError:
            page = 1
        per = 500
        rows = list(self.archive.exchanges(kind="response", order="url", limit=per + 1, offset=(page - 1) * per))
        more = len(rows) > per
        items = []
        for r in rows[:per]:
            ts = to_timestamp14(r.captured_at)
            quoted = quote(r.url, safe=':/?&=%#;+,@!$~*()[]')
            link = f"/{ts}id_/{quoted}"
            # a page (an HTML answer a GET had) replayed too: what a person browsing wants to open
            replayed = (f'<a href="{escape(f"/{ts}/{quoted}")}">replay</a>'
                        if r.method == "GET" and 200 <= r.status < 300 and (r.mime or "").startswith(HTML_MIMES) else "")
            items.append(f"<tr><td>{escape(r.method)}</td><td>{r.status}</td><td>{escape(r.mime)}</td>"
                         f"<td>{escape(r.captured_at)}</td><td>{replayed}</td>"
                         f"<td><a href=\"{escape(link)}\">{escape(r.url)}</a></td></tr>")
        nav = f'<p><a href="/?page={page + 1}">next page</a></p>' if more else ""
        html = (f"<!doctype html><html><head><meta charset=utf-8><title>webfreeze replay: "
                f"{escape(self.archive_path.name)}</title></head><body><h1>{escape(self.archive_path.name)}</h1>"
                f"<p>{self.matcher.count} exchanges; archived bytes at <code>/&lt;timestamp&gt;id_/&lt;url&gt;</code>, "
                f"replayed pages at <code>/&lt;timestamp&gt;/&lt;url&gt;</code>."
                f" Page {page}.</p><table><tr><th>method</th><th>status</th><th>type</th><th>captured</th>"
                f"<th>page</th><th>url (archived bytes)</th></tr>{''.join(items)}</table>{nav}</body></html>").encode("utf-8")
        return simple_response(200, "text/html; charset=utf-8", html)

    def _plain(self, status: int, text: str):
        return simple_response(status, "text/plain; charset=utf-8", text.encode("utf-8", "replace"))


def _may_go_live(url: str) -> bool:
    """Whether a request may be sent upstream: never the browser's own background traffic."""
    return not is_browser_own(url)


def _redirects_to_itself(built: Built, url: str) -> bool:
    """Whether an archived redirect's Location has the SURT key of the URL it was captured for."""
    m = re.search(rb"(?im)^location:[ \t]*(.*?)[ \t]*\r?$", built.header_block)
    if not m:
        return False
    target = urljoin(url, m.group(1).decode("latin-1"))
    return surt_key(target) == surt_key(url)


def _parse_range(value: str, size: int):
    """(start, end) for one ``bytes=`` range, 'unsatisfiable', or None to ignore the header."""
    value = value.strip()
    if not value.lower().startswith("bytes=") or "," in value:
        return None
    spec = value[6:].strip()
    try:
        first, _, last = spec.partition("-")
        if first == "":
            n = int(last)
            if n <= 0:
                return "unsatisfiable"
            return max(0, size - n), size - 1
        start = int(first)
        end = int(last) if last else size - 1
    except ValueError:
        return None
    if start >= size or end < start:
        return "unsatisfiable"
    return start, min(end, size - 1)


def load_rules_file(path: str | Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReplayError(f"{path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ReplayError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ReplayError(f"{path}: replay rules must be a JSON object")
    try:
        Rules.from_dict(data)
    except (TypeError, ValueError) as exc:
        raise ReplayError(f"{path}: {exc}") from None
    return data

