"""Request matching: which archived exchange answers a replayed request.

Levels, tried in order (the first level with a candidate wins):

1. ``exact``: method, URL and canonical request-body key (``archives.bodykey``) are equal.
2. ``canonical``: equal after canonicalisation: scheme ignored (http and https are one site, as
   in SURT keys), host lower-cased, default port and fragment dropped, the path's escapes read
   (a ``+`` in a path stays a plus), query parameters sorted, and cache busters and trackers removed (see
   :class:`Rules`; by default numeric ``_``, ``cb``, ``uncache``, ``utm_*``, ``fbclid``, ``gclid``,
   JSONP callback names, and parameters whose name contains ``bust`` or ``ts`` holding a 13-15
   digit epoch).
3. ``fuzzy``: captures under the same host and path with the same method, scored by how
   similar their query (and request body fields) are: equal values score 1, two numbers score by
   their relative distance, two JSON values recursively, other strings by ``difflib`` ratio; a
   parameter missing on one side scores 0; parameters starting with ``_`` weigh
   ``Rules.underscore_weight``. The best score wins if it reaches ``Rules.fuzzy_threshold``. For
   static files (by extension or MIME type: scripts, styles, images, fonts, media) the query is
   ignored when ``Rules.ignore_static_query`` is on.
4. Among candidates that are equally good, the capture closest in time to the target time.

**Honest matching for documents and XHR** (``Rules.fuzzy_documents`` / ``Rules.fuzzy_xhr`` off, the
agent environment's default, :data:`AGENT_RULES`): a document navigation or an XHR/fetch (as
:func:`request_kind` tells from the request's headers) is answered at the fuzzy level only by a
capture whose *meaningful* query parameters and form fields are equal to the request's, the same
names with the same values; the ignorable ones may differ: cache busters and trackers (dropped by
the canonical form already), query parameters starting with ``_`` and the names
``Rules.ignorable_params`` lists (a form field starting with ``_``, such as Roundup's
``__login_password``, is meaningful unless listed there).
Anything else is a miss, so an agent is never shown another search's results. Static
subresources (by the request's URL or the capture's type) stay fuzzy. ``replay serve`` keeps the
fuzzy defaults, which suit a person browsing an archive.

Repeated identical requests are answered in recorded order: the n-th time the same request
(same level and key) is asked in one replay session it gets the n-th capture of that key, then the
last one repeats (:class:`Sequencer`). With a target time, the sequence starts at the capture
closest to it and continues in recorded order within that capture's session, so a crawl repeated a
month later does not interleave with the first. Where the captures of a repeated request followed
different state-changing requests (a ``POST``, ``PUT``, ``PATCH`` or ``DELETE``: its *antecedent*,
the last one asked before it in its capture session, :meth:`Matcher.antecedent`), the request is
answered from the captures that followed the state-changing request the replay answered last, when
there are any, in recorded order: a queue's ``GET .../queue/data`` after each ``POST
.../queue/join`` answers the join the page made, whatever the order of the actions.

A state-changing request asked again once its captures are used up, whose captures' answers differ
(the site's answer depended on what came before: Gradio's ``queue/join`` names each event anew), is
answered with the last one, as ``fuzzy``: the site would have answered something else. Once a
state-changing request was answered fuzzily or not at all, so is any request past its captures whose answers
differ (``Replay.answer``).

Request bodies compare as fields: form-encoded and multipart bodies (boundary ignored) by their
fields, JSON by flattened leaves, anything else by SHA-256; that is what ``body_key`` encodes.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import threading
from bisect import bisect_left
from dataclasses import dataclass, fields
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from webfreeze.archives.bodykey import body_key as compute_body_key
from webfreeze.archives.timeutil import normalize_time, parse_time
from webfreeze.common.http import header_value, host_port

STATIC_EXTENSIONS = frozenset(
    "js mjs css png jpg jpeg gif webp avif svg ico bmp woff woff2 ttf otf eot mp4 webm ogg mp3 wav m4a "
    "flac mov m3u8 ts map".split()
)
STATIC_MIME_PREFIXES = ("image/", "font/", "audio/", "video/", "text/css", "application/javascript",
                        "text/javascript", "application/font", "application/x-font")
_DIGITS = re.compile(r"^\d+$")
_JSONP_NAME = re.compile(r"^[A-Za-z_$][\w$.]*$")


@dataclass
class Rules:
    """Matching rules. Stored per archive (meta ``replay_rules``) and overridable per run."""

    canonical: bool = True
    fuzzy: bool = True
    # Parameters always dropped from the canonical form.
    drop_params: tuple[str, ...] = ("cb", "uncache", "fbclid", "gclid", "msclkid", "_hsenc", "_hsmi")
    drop_prefixes: tuple[str, ...] = ("utm_",)
    # Parameters dropped when their value is all digits.
    drop_numeric_params: tuple[str, ...] = ("_",)
    # JSONP callback parameter names: dropped when their value looks like a function name.
    jsonp_params: tuple[str, ...] = ("callback", "jsonp", "jsoncallback")
    # Names containing one of these, holding a 13-15 digit epoch (or 10 digits, seconds), are dropped.
    epoch_name_parts: tuple[str, ...] = ("bust", "ts")
    # A parameter without a value whose name is a 13-15 (or 10) digit epoch (of 2001-2033: starting
    # with 1; not an ISBN-10 such as `?0306406152`) is dropped.
    drop_epoch_keys: bool = True
    fuzzy_threshold: float = 0.5
    underscore_weight: float = 0.1
    ignore_static_query: bool = True
    # Fuzzy answers for document navigations and for XHR/fetch requests. On by default (a person
    # browsing); the agent environment and ``tasks validate`` turn both off (AGENT_RULES) unless the
    # archive's or the suite's replay_rules turn them on again.
    fuzzy_documents: bool = True
    fuzzy_xhr: bool = True
    # Parameter and form-field names that may differ when fuzzy_documents/fuzzy_xhr are off (besides
    # the cache busters and trackers the canonical form drops, and names starting with "_"). The
    # default: the anti-forgery tokens of common frameworks (Django, Flask-WTF, Rails, Drupal,
    # Roundup's ``@csrf``, Express's and Spring's ``_csrf``, Laravel's ``_token``, ASP.NET's
    # ``__RequestVerificationToken``, Trac's ``__FORM_TOKEN``, WordPress's ``_wpnonce``), a fresh
    # nonce on every form the site serves, which a replayed form can never repeat. Names compare
    # without regard to case.
    # Regular expressions whose matches in a WebSocket message the page sends, and in the recorded
    # one it is compared with, are set aside in that comparison (replayer/websocket.py): the parts
    # an application writes from the clock (a Jupyter kernel message's header "date"). None by default.
    socket_volatile: tuple[str, ...] = ()
    ignorable_params: tuple[str, ...] = ("csrfmiddlewaretoken", "csrf_token", "csrftoken", "authenticity_token",
                                         "form_token", "form_build_id", "@csrf", "_csrf", "_token",
                                         "__requestverificationtoken", "__form_token", "_wpnonce")

    def ignorable(self) -> frozenset[str]:
        """``ignorable_params``, lower-cased: the set names are looked up in (lower-cased)."""
        return frozenset(n.lower() for n in self.ignorable_params)

    @classmethod
    def from_dict(cls, data: dict | None) -> "Rules":
        if not data:
            return cls()
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown replay rule(s): {', '.join(unknown)}")
        kwargs = {}
        for k, v in data.items():
            default = known[k].default
            if isinstance(default, tuple):  # a list of strings in JSON, a tuple here
                if not isinstance(v, (list, tuple)) or not all(isinstance(x, str) for x in v):
                    raise ValueError(f"replay rule {k} must be a list of strings, not {json.dumps(v)}")
                v = tuple(v)
                if k == "socket_volatile":
                    for pattern in v:
                        try:
                            re.compile(pattern)
                        except re.error as exc:
                            raise ValueError(f"replay rule socket_volatile: {json.dumps(pattern)} is not a regular "
                                             f"expression ({exc})") from None
            elif isinstance(default, bool):
                if v not in (True, False):  # (0 and 1 count)
                    raise ValueError(f"replay rule {k} must be true or false, not {json.dumps(v)}")
                v = bool(v)
            elif isinstance(default, float):
                top = 1 if k == "fuzzy_threshold" else math.inf  # a score; a weight relative to 1
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= top:
                    raise ValueError(f"replay rule {k} must be a number from 0{' to 1' if top == 1 else ' up'}, "
                                     f"not {json.dumps(v)}")
                v = float(v)
            kwargs[k] = v
        return cls(**kwargs)

    def to_dict(self) -> dict:
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v for f in fields(self)}

    # ------------------------------------------------------------------ canonical URLs
    def keep_param(self, name: str, value: str) -> bool:
        low = name.lower()
        if low in self.drop_params or low.startswith(self.drop_prefixes):
            return False
        if low in self.drop_numeric_params and _DIGITS.match(value):
            return False
        if low in self.jsonp_params and _JSONP_NAME.match(value):
            return False
        if any(part in low for part in self.epoch_name_parts) and _DIGITS.match(value) and _epoch_length(value):
            return False
        if self.drop_epoch_keys and value == "" and _DIGITS.match(name) and _epoch_length(name) and name[0] == "1":
            return False  # (a bare epoch as the query: JupyterLab's `/api/me?1796588621569`; 2001 to 2033)
        return True


def _epoch_length(digits: str) -> bool:
    """Whether a run of digits is as long as an epoch: 13-15 (milliseconds) or 10 (seconds)."""
    return 13 <= len(digits) <= 15 or len(digits) == 10


# What the agent environment and ``tasks validate`` lay under the archive's and the suite's rules.
AGENT_RULES = {"fuzzy_documents": False, "fuzzy_xhr": False}
# How a request is matched to a capture, as a number bumped whenever that changes in a way the
# default rules do not show (2: form fields starting with "_" count in honest matching; 3: a "+" in
# a URL's path is a plus in the canonical form, no longer a space; 4: a valueless epoch parameter,
# `?1796588621569`, is dropped). Part of
# :func:`matching_digest`, which run manifests record (``versions.replay_matching``).
MATCHING_VERSION = 4


def matching_digest() -> str:
    """What decides how a replay answers a request, as one digest: :data:`MATCHING_VERSION`, the
    default :class:`Rules` and :data:`AGENT_RULES`. Two runs whose digests differ may be answered
    differently on the same archive (``bench compare`` says so)."""
    import dataclasses
    import hashlib
    import json

    parts = {"version": MATCHING_VERSION, "rules": dataclasses.asdict(Rules()), "agent_rules": AGENT_RULES}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=list).encode("ascii")).hexdigest()[:16]
# Requests that change nothing on the site (RFC 9110, 9.2.1): the others are state-changing.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_DOCUMENT_DESTS = frozenset({"document", "iframe", "frame", "embed", "object"})


def request_kind(headers, url: str) -> str:
    """``document``, ``xhr`` (XHR, fetch, event streams) or ``subresource``, from the request's
    ``Sec-Fetch-Dest`` when the browser sends it (secure origins only), else from its ``Accept``
    (a navigation asks for ``text/html``, an image for ``image/*``, a style sheet for ``text/css``)
    and the URL's extension. A script without an extension reads as ``xhr`` here; the matcher still
    treats it as static when its capture's type says so."""
    dest = ""
    accept = ""
    for k, v in headers:
        low = k.lower()
        if low == "sec-fetch-dest":
            dest = v.strip().lower()
        elif low == "accept":
            accept = v.lower()
    if dest:
        if dest in _DOCUMENT_DESTS:
            return "document"
        return "xhr" if dest == "empty" else "subresource"
    if is_static(url) or accept.startswith(("image/", "text/css", "font/", "audio/", "video/")):
        return "subresource"
    return "document" if "text/html" in accept else "xhr"


# The media types of a document a browser parses as a page (HTML, or XHTML as XML).
HTML_MIMES = ("text/html", "application/xhtml+xml")


def asks_for_document(headers, url: str) -> bool:
    """Whether a request may be for a document, which gets the runtime: a browser's navigation or
    frame (``Sec-Fetch-Dest``, else an ``Accept`` naming ``text/html``), or a client that says
    neither (a tool: no ``Accept`` at all). A page's fetch, XHR or script asks with another
    ``Accept`` (``*/*``), or its ``Sec-Fetch-Dest`` names no document, or says ``X-Requested-With``."""
    if any(k.lower() == "sec-fetch-dest" for k, _ in headers):
        return request_kind(headers, url) == "document"
    if any(k.lower() == "x-requested-with" for k, _ in headers):
        return False  # (jQuery's XHR, which asks for text/html when it loads a fragment)
    accept = [v for k, v in headers if k.lower() == "accept"]
    return not accept or "text/html" in accept[0].lower()


def split_url(url: str) -> tuple[str, str, str, list[tuple[str, str]]]:
    """(scheme, host[:port], path, query pairs) with scheme/host lower-cased and default port dropped.
    A URL that cannot be split (an unclosed IPv6 bracket) is all path: it matches only itself."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "", "", url, []
    return parts.scheme.lower(), host_port(parts), parts.path or "/", parse_qsl(parts.query, keep_blank_values=True)


def canonical_url(url: str, rules: Rules) -> str:
    """The canonical form used by the ``canonical`` level (documented in the module docstring).

    The scheme is left out, as in SURT keys: a page recorded over http answers https and back.
    """
    _, netloc, path, query = split_url(url)
    kept = sorted((k, v) for k, v in query if rules.keep_param(k, v))
    path = quote(unquote(path), safe="/:@!$&'()*+,;=~%-._")  # (a "+" in a path is a plus, not a space)
    return f"{netloc}{path}?{urlencode(kept)}" if kept else f"{netloc}{path}"


def path_key(url: str) -> str:
    """Host and path without scheme or query: the pool fuzzy matching scores."""
    _, netloc, path, _ = split_url(url)
    return f"{netloc}{path}"


def is_static(url: str, mime: str | None = None) -> bool:
    try:
        path = urlsplit(url).path
    except ValueError:  # a malformed URL (an unclosed IPv6 bracket) as some archives hold
        path = ""
    ext = path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    if ext in STATIC_EXTENSIONS:
        return True
    return bool(mime) and mime.startswith(STATIC_MIME_PREFIXES)


# ---------------------------------------------------------------------- similarity
def _number(v: str) -> float | None:
    try:
        f = float(v)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def value_similarity(a, b) -> float:
    """Similarity of two parameter values in [0, 1]."""
    if a == b:
        return 1.0
    if isinstance(a, str) and isinstance(b, str):
        na, nb = _number(a), _number(b)
        if na is not None and nb is not None:
            return 1.0 / (1.0 + abs(na - nb) / max(abs(na), abs(nb), 1.0))
        ja, jb = _json(a), _json(b)
        if isinstance(ja, (dict, list)) and isinstance(jb, (dict, list)):
            return json_similarity(ja, jb)
        return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return json_similarity(a, b)
    return value_similarity(json.dumps(a), json.dumps(b))


def _json(v: str):
    if not v or v[0] not in "[{":
        return None
    try:
        return json.loads(v)
    except ValueError:
        return None


def json_similarity(a, b) -> float:
    """Recursive comparison: dicts by key, lists by position, leaves by :func:`value_similarity`."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys = set(a) | set(b)
        if not keys:
            return 1.0
        return sum(json_similarity(a[k], b[k]) if k in a and k in b else 0.0 for k in keys) / len(keys)
    if isinstance(a, list) and isinstance(b, list):
        n = max(len(a), len(b))
        if n == 0:
            return 1.0
        return sum(json_similarity(x, y) for x, y in zip(a, b)) / n
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return 0.0
    return value_similarity(str(a) if not isinstance(a, str) else a, str(b) if not isinstance(b, str) else b)


def fields_similarity(qa: list[tuple[str, str]], qb: list[tuple[str, str]], underscore_weight: float,
                      ignorable: tuple[str, ...] | frozenset[str] = ()) -> float:
    """Weighted similarity of two parameter lists (repeated names compared in order). A name in
    ``ignorable`` (``Rules.ignorable_params``: its values may differ; compared lower-cased) counts
    as equal where both lists have it: a random session id or a form's nonce says nothing of which
    capture is meant."""
    if not isinstance(ignorable, frozenset):
        ignorable = frozenset(n.lower() for n in ignorable)
    da: dict[str, list[str]] = {}
    db: dict[str, list[str]] = {}
    for k, v in qa:
        da.setdefault(k, []).append(v)
    for k, v in qb:
        db.setdefault(k, []).append(v)
    names = set(da) | set(db)
    if not names:
        return 1.0
    total = score = 0.0
    for name in names:
        w = underscore_weight if name.startswith("_") else 1.0
        va, vb = da.get(name, []), db.get(name, [])
        n = max(len(va), len(vb))
        total += w * n
        score += w * (min(len(va), len(vb)) if name.lower() in ignorable
                      else sum(value_similarity(x, y) for x, y in zip(va, vb)))
    return score / total if total else 1.0


def body_fields(key: str) -> list[tuple[str, str]] | None:
    """The fields behind a body key (``form:`` / ``json:``), or None when only equality can tell."""
    if key.startswith(("form:", "json:")):
        return parse_qsl(key.split(":", 1)[1], keep_blank_values=True)
    return None


# ---------------------------------------------------------------------- the index
@dataclass(slots=True)
class Capture:
    id: int
    method: str
    url: str
    body_key: str
    captured_at: str
    session_id: str
    mime: str
    time: float  # seconds since the epoch, for "closest in time"
    static: bool  # a static file (its query may be ignored in fuzzy matching)
    status: int = 200  # the recorded answer's status (a 304 answers only a conditional request)


class Matcher:
    """An in-memory index over an archive's exchanges, built once per replay."""

    def __init__(self, rows, rules: Rules | None = None):
        """``rows``: the archive's index entries (``Archive.index_entries()``: id, method, url,
        body_key, captured_at, session_id, mime)."""
        self.rules = rules or Rules()
        self.exact: dict[tuple, list[Capture]] = {}
        self.canonical: dict[tuple, list[Capture]] = {}
        self.by_path: dict[tuple, list[Capture]] = {}
        self._query: dict[int, list[tuple[str, str]]] = {}
        self._ignorable = self.rules.ignorable()
        self.count = 0
        # capture session -> (captured_at, id) of its state-changing requests, in order (antecedent)
        self._changes: dict[str, list[tuple[str, int]]] = {}
        for r in rows:
            t = normalize_time(r.captured_at)
            mime = (r.mime or "").lower()
            cap = Capture(r.id, r.method.upper(), r.url, r.body_key or "", t,
                          r.session_id, mime, parse_time(t).timestamp(), is_static(r.url, mime),
                          getattr(r, "status", 200))
            self.exact.setdefault((cap.method, cap.url, cap.body_key), []).append(cap)
            self.canonical.setdefault((cap.method, canonical_url(cap.url, self.rules), cap.body_key), []).append(cap)
            self.by_path.setdefault((cap.method, path_key(cap.url)), []).append(cap)
            if cap.method not in SAFE_METHODS:
                self._changes.setdefault(cap.session_id, []).append((cap.captured_at, cap.id))
            self.count += 1
        for table in (self.exact, self.canonical, self.by_path):
            for caps in table.values():
                caps.sort(key=lambda c: (c.captured_at, c.id))
        for marks in self._changes.values():
            marks.sort()

    def antecedent(self, cap: Capture) -> int | None:
        """The id of the state-changing request (not GET, HEAD or OPTIONS) asked last before ``cap``
        in its capture session (by the time each was asked, then the order recorded); None when
        none was."""
        marks = self._changes.get(cap.session_id)
        if not marks:
            return None
        i = bisect_left(marks, (cap.captured_at, cap.id))
        return marks[i - 1][1] if i else None

    @classmethod
    def from_archive(cls, archive, rules: Rules | None = None) -> "Matcher":
        return cls(archive.index_entries(kind="response"), rules)

    @property
    def strict_kinds(self) -> frozenset:
        """The request kinds fuzzy matching answers only when their meaningful parameters are equal."""
        r = self.rules
        return frozenset(k for k, fuzzy in (("document", r.fuzzy_documents), ("xhr", r.fuzzy_xhr)) if not fuzzy)

    def candidates(self, method: str, url: str, body_key: str = "", kind=None
                   ) -> tuple[str, tuple, list[Capture], float]:
        """(level, key, equally good captures oldest first, score); level '' when nothing matches.
        ``kind`` (:func:`request_kind`): a ``document`` or ``xhr`` request the rules keep from fuzzy
        answers is answered fuzzily only by a capture with the same meaningful parameters (see the
        module docstring); None: no such check (every request fuzzy, as before). ``kind`` may be a
        function giving it: it is then asked only when a request reaches the fuzzy level."""
        method = method.upper()
        key = (method, url, body_key)
        caps = self.exact.get(key)
        if caps:
            return "exact", ("exact",) + key, caps, 1.0
        if self.rules.canonical:
            ckey = (method, canonical_url(url, self.rules), body_key)
            caps = self.canonical.get(ckey)
            if caps:
                return "canonical", ("canonical",) + ckey, caps, 1.0
        if self.rules.fuzzy:
            pool = self.by_path.get((method, path_key(url)))
            if pool:
                if callable(kind):
                    kind = kind()
                return self._fuzzy(method, url, body_key, pool, kind is not None and kind in self.strict_kinds)
        return "", (), [], 0.0

    def _meaningful(self, pairs: list[tuple[str, str]] | None, body: bool = False) -> list[tuple[str, str]] | None:
        """The parameters whose values must be equal under honest matching (sorted). A query
        parameter starting with ``_`` is a cache buster's (``_=1712...``, ``_ts``, ``_dc``) and may
        differ; a form field is what the person typed or chose, whatever its name (Roundup's
        ``__login_name`` and ``__login_password``), so only ``ignorable_params`` may differ there."""
        if pairs is None:
            return None
        ignorable = self._ignorable
        return sorted((k, v) for k, v in pairs
                      if (body or not k.startswith("_")) and k.lower() not in ignorable)

    def _fuzzy(self, method: str, url: str, body_key: str, pool: list[Capture], strict: bool = False):
        rules = self.rules
        q = [(k, v) for k, v in split_url(url)[3] if rules.keep_param(k, v)]
        bf = body_fields(body_key)
        static = rules.ignore_static_query and is_static(url)
        best: list[Capture] = []
        best_score = -1.0
        refused = 0.0  # the best score of a capture honest matching turned down (for the miss report)
        if strict and not is_static(url):
            mq, mbf = self._meaningful(q), self._meaningful(bf, body=True)
        else:
            strict = False
        for cap in pool:
            if rules.ignore_static_query and (static or cap.static):
                s = 1.0 if cap.body_key == body_key else 0.5
            else:
                cq = self._query.get(cap.id)
                if cq is None:
                    cq = [(k, v) for k, v in split_url(cap.url)[3] if rules.keep_param(k, v)]
                    self._query[cap.id] = cq
                s = fields_similarity(q, cq, rules.underscore_weight, self._ignorable)
                cbf = body_fields(cap.body_key) if body_key != cap.body_key else bf
                if body_key != cap.body_key:
                    s = (s + (fields_similarity(bf, cbf, rules.underscore_weight, self._ignorable)
                              if bf is not None and cbf is not None else 0.0)) / 2
                if strict and not cap.static and (
                        self._meaningful(cq) != mq
                        or (body_key != cap.body_key and (mbf is None or self._meaningful(cbf, body=True) != mbf))):
                    refused = max(refused, s)
                    continue
            if s > best_score + 1e-12:
                best, best_score = [cap], s
            elif abs(s - best_score) <= 1e-12:
                best.append(cap)
        if best_score < rules.fuzzy_threshold:
            return "", (), [], max(best_score, refused)
        return "fuzzy", ("fuzzy", method, url, body_key), best, best_score


CONDITIONAL_HEADERS = ("if-none-match", "if-modified-since")


def answerable(caps: list[Capture], headers) -> list[Capture]:
    """The captures that may answer a request with these headers: a recorded ``304 Not Modified``
    (a browser revalidating what it had cached while recording) only answers a conditional request;
    an unconditional one gets the full answers (all of them, when there is nothing else)."""
    if not any(c.status == 304 for c in caps) or any(k.lower() in CONDITIONAL_HEADERS for k, _ in headers):
        return caps
    return [c for c in caps if c.status != 304] or caps


def closest(caps: list[Capture], when: float | None) -> Capture:
    """The capture closest in time to ``when`` (ties to the earlier); the first without a time."""
    if when is None or len(caps) == 1:
        return caps[0]
    times = [c.time for c in caps]
    i = bisect_left(times, when)
    options = [caps[j] for j in (i - 1, i) if 0 <= j < len(caps)]
    return min(options, key=lambda c: (abs(c.time - when), c.time, c.id))


class Sequencer:
    """Ordered answers for repeated identical requests within one replay session (thread-safe)."""

    def __init__(self):
        self._seen: dict[tuple, int] = {}
        self._served: dict[tuple, set[int]] = {}  # key -> the captures answered with (by after)
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._seen.clear()
            self._served.clear()

    def pick(self, key: tuple, caps: list[Capture], when: float | None, after=None) -> tuple[Capture, bool]:
        """The capture answering the next ``key`` request, and whether it answered this request
        before in this session (a repeat past what was recorded). ``after``: (the id of the capture
        that answered this session's last state-changing request, or -1 for one no capture
        answered, or None before any; the function giving a capture's antecedent id): when only
        some of ``caps`` followed that capture, the first of those not answered with yet (else the
        last of them), in place of the n-th. When none of the captures from the target time on
        followed it, each of them followed a state-changing request this session has not made
        (``after``'s third item, when given: the captures it answered them with), and others
        followed the page's (another capture session's, or earlier in the same one: Gradio's queue
        stream after the join the page made, recorded in another session), those others answer:
        what followed the request the page made, not the result of one it did not make."""
        everywhere = []
        made = None
        if after is not None and len(caps) > 1:
            last, antecedent = after[0], after[1]
            made = after[2] if len(after) > 2 else None
            everywhere = [c for c in caps if antecedent(c) == last]
        if len(caps) > 1 and when is not None:
            # The sequence starts at the capture closest to the target time and goes on in recorded
            # order within its capture session.
            first = closest(caps, when)
            caps = [c for c in caps if c.session_id == first.session_id
                    and (c.captured_at, c.id) >= (first.captured_at, first.id)]
        ids = {c.id for c in everywhere}
        followed = [c for c in caps if c.id in ids]
        # (only after a request the page made that a capture answered: before any, every session's
        # first captures "followed" nothing, and the target time decides)
        elsewhere = bool(everywhere) and not followed and after[0] not in (None, -1) and made is not None \
            and all(_followed_unmade(c, after[1], made) for c in caps)
        if elsewhere:
            followed = everywhere
        elif len(followed) == len(caps):
            followed = []  # (all of them followed it: the order decides)
        with self._lock:
            n = self._seen.get(key, 0)
            self._seen[key] = n + 1
            served = self._served.setdefault(key, set())
            if followed:
                cap = next((c for c in followed if c.id not in served), followed[-1])
            else:
                cap = caps[min(n, len(caps) - 1)]
            again = cap.id in served
            served.add(cap.id)
        return cap, again


def _followed_unmade(cap: Capture, antecedent, made) -> bool:
    """Whether ``cap`` followed a state-changing request (its capture) that is not among ``made``."""
    before = antecedent(cap)
    return before is not None and before not in made


def request_body_key(headers: list[tuple[str, str]], body: bytes | None) -> str:
    return compute_body_key(header_value(headers, "content-type"), body)
