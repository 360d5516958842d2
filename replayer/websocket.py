"""WebSocket replay: which recorded connection answers a page's socket, and the conversation rule.

The recorder keeps each WebSocket's messages as a document ``websocket/<session>/<flow>.json``
(recorder/addon.py: ``url``, ``messages`` with ``from_client``, ``type``, ``content``, ``time``; since
WebSocket replay also ``opened``, the handshake's time, and ``closed_by_client``/``close_code``).
This module is pure (no browser): the in-process replays (simulator/replay_route.py) hand it the
page's socket and send what it says.

**Which recording** (:meth:`SocketIndex.pick`): the socket's URL is matched as the replay matches an
HTTP GET (:class:`~.matching.Matcher` over the recorded connections, with the replay's rules, the
request read as an XHR: exact, canonical, then fuzzy, which the agent's honest rules allow only with
the same meaningful parameters; ``ws``/``wss`` read as ``http``/``https``). Among the equally good
connections, those of the capture session the page's document came from are preferred, else those
of the session of the connection nearest the replay's time (the HTTP replay's "as at ``when``");
within that session, the connections opened at or after the page's document was captured (all of
the session's if none), in order of opening; the k-th socket the page opens to that URL gets the
k-th of them. No recording (or fewer than k): a miss.

**The conversation rule** (:class:`Conversation`; deterministic, not timed): at open, the server
messages recorded before the first client message are sent; each message the page sends is compared
with the next recorded client message: equal (the same type, the exact text or bytes), the server
messages recorded after it up to the next client message are sent; different, the conversation has
parted: a miss, and nothing more is sent on that socket. A page that sends after the recording's
client messages ran out parts too. Server messages the recording got after a pause (pushes) are
sent in order, without the pause: the replay keeps the order, not the timing. A recording that
ended with the server closing is closed after its last message.

**Pushes that follow an action wait for it** (:meth:`Conversation.release`): a site may act by HTTP
and answer on its socket, where the page sends nothing (marimo: a widget's change is a POST, the
kernel's output comes on the socket). A server message recorded after a state-changing request of
the socket's capture session to the socket's host (not GET, HEAD or OPTIONS; asked while the
socket was open: :attr:`Recording.actions`) is sent only once the replay has answered that request
with a capture of the same method, URL and body key (``Replay.actions_answered``); the messages
after it wait with it, so the order holds. The agent environment lets waiting messages through at
the end of a step's settle (simulator/browser_backend.py), then settles again; the replay server
right after it has answered a state-changing request. A page that sends a message while some
wait gets them first, then the answer, and the actions recorded before its message hold nothing
after it (the page went on without them: :meth:`Conversation.ahead` says so).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from urllib.parse import urlsplit

from webfreeze.archives.records import IndexEntry
from webfreeze.archives.timeutil import parse_time

from .matching import Matcher, Rules, closest
from .replay import DIRECT, direct_original

SOCKET_PREFIX = "websocket/"
# How the reason of a socket whose conversation parted begins (the rest: :attr:`Turn.parted`'s quote)
WEBSOCKET_PARTED = "a WebSocket whose conversation parted from the recording"
# Why a served socket is reported once more, at the level ``canonical``: a page's message matched
# the recorded one only with the parts the replay rule ``socket_volatile`` names set aside.
WEBSOCKET_SET_ASIDE = "a message of the page matched the recording only with its socket_volatile parts set aside"
# Why a socket is a miss when no recording matches its URL (what follows it names recordings to the
# same place with other query parameters, if any).
NO_RECORDING = "a WebSocket the archive holds no recording of"
# Why a served socket is reported once more, at the level ``fuzzy``: the page was sent what the server
# sent after an action the page did not take (Conversation.ahead).
WEBSOCKET_AHEAD = "a WebSocket that sent what the server sent after an action the page has not taken"
# What a parted conversation's reason quotes of the page's message (characters).
QUOTE_CHARS = 80
# Where the two part further in than half a quote, quoted from this many characters before it.
QUOTE_CONTEXT = 20


@dataclass(frozen=True)
class Message:
    """One recorded message: ``data`` is text (str) or bytes; ``time`` when it was recorded (seconds
    since the epoch; None in documents that did not keep it)."""

    from_client: bool
    data: str | bytes
    time: float | None = field(default=None, compare=False)


@dataclass
class Recording:
    """One recorded WebSocket connection (a ``websocket/`` document)."""

    name: str
    session_id: str
    url: str
    opened: float  # seconds since the epoch: the handshake's time (old documents: the first message's)
    messages: list[Message]
    server_closed: bool = False
    close_code: int | None = None
    protocol: str | None = None  # the subprotocol the server chose ("": none; None: not recorded)
    # the state-changing HTTP requests (not GET, HEAD or OPTIONS) to the socket's host of the
    # connection's capture session asked while it was open: (time, (method, URL, body key)), in order
    # (SocketIndex.from_archive)
    actions: tuple[tuple[float, tuple[str, str, str]], ...] = ()

    def answer_protocol(self, offered: str) -> str:
        """The subprotocol a replayed handshake answers to a page that offers ``offered`` (its
        ``Sec-WebSocket-Protocol``, comma-separated): the recorded one when the page offers it, else
        (a recording that did not keep it, or a page offering others now) the page's first; "" when
        the page offers none (a browser fails a socket whose answer names one it did not offer,
        and one that asked for subprotocols and got none)."""
        asked = [p.strip() for p in offered.split(",") if p.strip()]
        if not asked:
            return ""
        return self.protocol if self.protocol in asked else asked[0]


def _message(m: dict) -> Message:
    content = m.get("content", "")
    when = float(m["time"]) if isinstance(m.get("time"), (int, float)) else None
    if m.get("type") == "binary":
        try:
            return Message(bool(m.get("from_client")), bytes.fromhex(content), when)
        except (TypeError, ValueError):
            return Message(bool(m.get("from_client")), b"", when)
    return Message(bool(m.get("from_client")), str(content), when)


def read_recording(name: str, doc) -> Recording | None:
    """The recording a ``websocket/<session>/<flow>.json`` document holds (None: not one)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("url"), str) or not isinstance(doc.get("messages"), list):
        return None
    parts = name.split("/")
    session = parts[1] if len(parts) >= 3 else ""
    raw = [m for m in doc["messages"] if isinstance(m, dict)]
    opened = doc.get("opened")
    if not isinstance(opened, (int, float)):
        times = [m.get("time") for m in raw if isinstance(m.get("time"), (int, float))]
        opened = min(times) if times else 0.0
    closed_by_client = doc.get("closed_by_client")
    return Recording(name, session, doc["url"], float(opened), [_message(m) for m in raw],
                     server_closed=closed_by_client is False,
                     close_code=doc.get("close_code") if isinstance(doc.get("close_code"), int) else None,
                     protocol=doc.get("protocol") if isinstance(doc.get("protocol"), str) else None)


def action_key(method: str, url: str, body_key: str) -> tuple[str, str, str]:
    """A recorded request as a socket's actions name it: its method, URL and body key."""
    return method.upper(), url, body_key or ""


def _host(url: str) -> str:
    return urlsplit(url).netloc.lower()


def http_form(url: str) -> str:
    """A socket URL as the matcher reads it: ``ws``/``wss`` as ``http``/``https`` (the recorder
    keeps the handshake's URL, which may say either)."""
    if url[:4].lower() == "wss:":
        return "https:" + url[4:]
    if url[:3].lower() == "ws:":
        return "http:" + url[3:]
    return url


@dataclass
class Pick:
    """The recording that answers a socket (``recording`` None: a miss, ``why`` says so)."""

    recording: Recording | None
    level: str = "miss"
    why: str = ""


class SocketIndex:
    """The recorded WebSocket connections of an archive, matched with ``rules``. Thread-safe: the
    browser backend asks from its loop thread while the replay server answers from its own."""

    def __init__(self, recordings: list[Recording], rules: Rules | None = None):
        self.recordings = recordings
        rows = [IndexEntry(i, "GET", http_form(r.url), "",
                           datetime.fromtimestamp(r.opened, timezone.utc).isoformat(), r.session_id, "", 101)
                for i, r in enumerate(recordings)]
        self.matcher = Matcher(rows, rules or Rules())
        self._lock = threading.Lock()

    @classmethod
    def from_archive(cls, archive, rules: Rules | None = None) -> "SocketIndex":
        recs = []
        for d in archive.documents(prefix=SOCKET_PREFIX):
            try:
                rec = read_recording(d.name, d.body())
            except Exception:  # a damaged document is no recording (the socket is then a miss)
                rec = None
            if rec is not None:
                recs.append(rec)
        if recs:  # (each session's actions: what its sockets' messages may have answered)
            changes: dict[tuple[str, str], list] = {}
            for e in archive.index_entries():
                if e.method.upper() not in ("GET", "HEAD", "OPTIONS"):
                    changes.setdefault((e.session_id, _host(e.url)), []).append(
                        (parse_time(e.captured_at).timestamp(), action_key(e.method, e.url, e.body_key)))
            for i, rec in enumerate(recs):
                mine = sorted(a for a in changes.get((rec.session_id, _host(http_form(rec.url))), ()) if a[0] > rec.opened)
                if mine:
                    recs[i] = replace(rec, actions=tuple(mine))
        return cls(recs, rules)

    def __len__(self) -> int:
        return len(self.recordings)

    def _recorded_otherwise(self, url: str) -> str:
        """What a miss adds when the archive holds sockets to the same host and path with other query
        parameters (an id drawn from the clock or at random on each visit: marimo's ``session_id``)."""
        def place(u: str) -> tuple:
            parts = urlsplit(http_form(u))
            return parts.netloc.lower(), parts.path or "/"
        here = place(url)
        def ws(u: str) -> str:  # (the same socket, recorded as ws: or http:)
            return re.sub(r"^http", "ws", http_form(u))
        others = sorted({ws(r.url) for r in self.recordings if place(r.url) == here})
        if not others:
            return ""
        more = f" and {len(others) - 1} more" if len(others) > 1 else ""
        return (f" at these query parameters (recorded with others: {others[0]}{more}; parameters that may differ, "
                "an id drawn from the clock or at random, go in replay_rules' ignorable_params)")

    def pick(self, url: str, k: int, *, session: str | None = None, after: float | None = None,
             when: float | None = None) -> Pick:
        """The recording for the ``k``-th (from 0) socket a page opens to ``url``: ``session`` and
        ``after`` are the capture session and time of the page's document (None: unknown), ``when``
        the replay's target time (see the module docstring)."""
        with self._lock:
            level, _key, caps, _score = self.matcher.candidates("GET", http_form(url), "", "xhr")
        if not caps:
            return Pick(None, why=NO_RECORDING + self._recorded_otherwise(url))
        same = [c for c in caps if session is not None and c.session_id == session]
        if not same:
            first = closest(caps, when)
            same = [c for c in caps if c.session_id == first.session_id]
        later = [c for c in same if after is None or c.time >= after - 1e-3]
        ordered = sorted(later or same, key=lambda c: (c.time, c.id))
        if k >= len(ordered):
            return Pick(None, why=f"a WebSocket opened {k + 1} times, recorded {len(ordered)} times")
        return Pick(self.recordings[ordered[k].id], level)


def describe(data: str | bytes, start: int = 0) -> str:
    """A message quoted for a miss's reason: a text's first QUOTE_CHARS characters (``'...'``), a
    binary one's as Python writes bytes (``b'Z-\\x12...'``: the text in a protobuf frame, a URL,
    stays readable), cut to about as long; a cut one ends ``...'``. ``start``: quoted from there."""
    data = data[start:]
    if isinstance(data, str):
        return repr(data if len(data) <= QUOTE_CHARS else data[:QUOTE_CHARS] + "...")
    shown = repr(data[:QUOTE_CHARS])
    if len(shown) > QUOTE_CHARS + 3:
        return shown[:QUOTE_CHARS + 2] + "...'"
    return shown[:-1] + "...'" if len(data) > QUOTE_CHARS else shown


def _parting(sent: str | bytes, expected: str | bytes) -> str:
    """Where the page's message and the recorded one part, as the miss's reason: both quoted from
    the start, or, where they agree further than half a quote (a Jupyter kernel message whose
    header's ``date`` differs, past its first 80 bytes), from a little before the first difference
    on, saying where."""
    at = 0
    if type(sent) is type(expected):
        at = next((i for i, (a, b) in enumerate(zip(sent, expected)) if a != b), min(len(sent), len(expected)))
    start = at - QUOTE_CONTEXT if at >= QUOTE_CHARS // 2 else 0
    where = f" (from {'character' if isinstance(sent, str) else 'byte'} {start} on)" if start else ""
    return f"the page sent {describe(sent, start)}, the recording {describe(expected, start)}{where}"


@dataclass
class Turn:
    """What the replay does after an event of the conversation: send ``send`` (in order), then close
    when ``close``; ``parted`` is the miss's reason when the conversation parted here;
    ``set_aside`` when the page's message matched only with its volatile parts set aside, the first
    time in the conversation (reported once: :data:`WEBSOCKET_SET_ASIDE`)."""

    send: list[str | bytes] = field(default_factory=list)
    close: bool = False
    parted: str | None = None
    set_aside: bool = False


class Conversation:
    """One socket's replay of a :class:`Recording` (the rule: the module docstring)."""

    def __init__(self, recording: Recording, volatile: tuple[str, ...] = ()):
        """``volatile``: regular expressions (the replay rule ``socket_volatile``) whose matches in
        a page's message and in the recorded one are set aside when the two are compared."""
        self.recording = recording
        self._messages = recording.messages
        self._volatile = [(re.compile(p), re.compile(p.encode("utf-8"))) for p in volatile]
        self.volatile_matched = 0  # page messages that matched only with their volatile parts set aside
        self._at = 0  # the index of the next recorded message not yet used
        self.parted: str | None = None
        self.served = 0  # server messages sent
        self.matched = 0  # page messages that matched the recording
        self._spoke: float | None = None  # when the recording has the page's last matched message

    def _waits(self, m: Message, answered) -> bool:
        """Whether server message ``m`` waits: it was recorded after an action of the session the
        replay has not answered as recorded (``answered``: the :func:`action_key` of each capture it
        answered a state-changing request with; None: nothing waits), and after the page's last
        message matched (the page went on past the actions before that: :meth:`ahead` says so)."""
        if answered is None or m.time is None:
            return False
        since = self._spoke if self._spoke is not None else float("-inf")
        return any(since < t < m.time and key not in answered for t, key in self.recording.actions)

    def _server_run(self, answered=None) -> list[str | bytes]:
        out = []
        while (self._at < len(self._messages) and not self._messages[self._at].from_client
               and not self._waits(self._messages[self._at], answered)):
            out.append(self._messages[self._at].data)
            self._at += 1
        self.served += len(out)
        return out

    def _ends(self) -> bool:
        return self._at >= len(self._messages) and self.recording.server_closed

    @property
    def held(self) -> bool:
        """Whether server messages wait for an action the page has not taken (:meth:`release`)."""
        return self.parted is None and self._at < len(self._messages) and not self._messages[self._at].from_client

    def open(self, answered=None) -> Turn:
        """The server's messages recorded before the page's first, up to the first that waits for
        an action not yet answered (``answered``: see :meth:`release`)."""
        send = self._server_run(answered)
        return Turn(send, close=self._ends())

    def releasable(self, answered) -> bool:
        """Whether :meth:`release` would send something now."""
        return self.held and not self._waits(self._messages[self._at], answered)

    def release(self, answered) -> Turn:
        """The waiting server messages that the actions answered now let through (``answered``: the
        :func:`action_key` of each capture the replay answered a state-changing request with,
        ``Replay.actions_answered``), up to the next that still waits or the page's next message."""
        if not self.held:
            return Turn()
        send = self._server_run(answered)
        return Turn(send, close=self._ends()) if send else Turn()

    def receive(self, data: str | bytes, answered=None) -> Turn:
        """The page sent ``data``: the recorded answer, or the parting (once; nothing after it).
        Server messages still waiting before the recorded message it matches are sent first, in
        their order (the page went on without the action they followed: :meth:`ahead` says so)."""
        if self.parted is not None:
            return Turn()
        at = self._at
        while at < len(self._messages) and not self._messages[at].from_client:
            at += 1  # (past the server messages that wait)
        if at >= len(self._messages):
            self.parted = f"the page sent {describe(data)} after the recorded conversation ended"
            return Turn(parted=self.parted)
        expected = self._messages[at].data
        if type(expected) is not type(data) or (expected != data and not self._alike(data, expected)):
            self.parted = _parting(data, expected)
            return Turn(parted=self.parted)
        set_aside = expected != data and self.volatile_matched == 0
        if expected != data:
            self.volatile_matched += 1
        waited = [m.data for m in self._messages[self._at:at]]
        self.served += len(waited)
        self._spoke = self._messages[at].time if self._messages[at].time is not None else self._spoke
        self._at = at + 1
        self.matched += 1
        send = waited + self._server_run(answered)
        return Turn(send, close=self._ends(), set_aside=set_aside)

    def _alike(self, a: str | bytes, b: str | bytes) -> bool:
        """Whether two messages of one type are equal once every match of the volatile patterns is
        replaced by the same placeholder in both (a Jupyter kernel message's header ``date``, the
        live clock at recording, the frozen one in replay)."""
        if not self._volatile:
            return False
        if isinstance(a, str) and isinstance(b, str):
            for as_text, _ in self._volatile:
                a, b = as_text.sub("\x00", a), as_text.sub("\x00", b)
            return a == b
        if isinstance(a, bytes) and isinstance(b, bytes):
            for _, as_bytes in self._volatile:
                a, b = as_bytes.sub(b"\x00", a), as_bytes.sub(b"\x00", b)
            return a == b
        return False

    def ahead(self, answered) -> bool:
        """Whether the page has been sent a server message recorded after an action of the session
        (a state-changing HTTP request to the socket's host, asked while the socket was open) that
        this replay has not answered as recorded (``answered``: the :func:`action_key` of each
        capture it answered a state-changing request with): a result of something the page did
        not do. A message equal to one sent before it (a heartbeat) tells nothing. (marimo acts by
        HTTP and answers on its socket, where the page sends nothing for the conversation to wait
        for.)"""
        if not self.recording.actions:
            return False
        seen: set = set()
        last = None
        for m in self._messages[:self._at]:
            if m.from_client:
                continue
            if m.data not in seen and m.time is not None:
                last = m.time if last is None else max(last, m.time)
            seen.add(m.data)
        return last is not None and any(t < last and key not in answered for t, key in self.recording.actions)

    @property
    def whole(self) -> bool:
        """Whether every recorded message has been used and nothing parted."""
        return self.parted is None and self._at >= len(self._messages)


def direct_socket_url(url: str) -> str:
    """A direct-mode socket URL (``ws://replay/<ts>/ws://site/...``, as the replay server's shim
    rewrites a page's) as the URL it stands for; any other URL as it is."""
    parts = urlsplit(url)
    m = DIRECT.match(parts.path + ("?" + parts.query if parts.query else ""))
    return direct_original(m.group(3)) if m else url
