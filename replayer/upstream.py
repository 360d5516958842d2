"""Where a replay sends the requests it does not answer from the archive: an upstream HTTP proxy.

A replay is hermetic by default. Two kinds of run give it an :class:`Upstream` (always a recording
proxy that some orchestration started, never the network itself):

- ``live``: every request goes upstream. The recording proxy commits each exchange to the archive
  before it answers, and names the exchange in a response header (:data:`EXCHANGE_HEADER`), so the
  replay answers with that very exchange read back from the archive: built, injected and served
  exactly as a later offline replay of the archive will serve it.
- ``miss``: only a request the archive cannot answer goes upstream (pywb's live+record
  collections do the same); its answer is labelled ``live`` in the replay's provenance.

Each request carries the episode's tag (:data:`EPISODE_HEADER`), which the recording proxy strips
before the site sees it and turns into one capture session per episode. This module speaks plain
HTTP(S) through the proxy with the standard library; it imports nothing of the recorder (the
replayer never does), the two meet only on the wire.
"""

from __future__ import annotations

import html
import http.client
import re
import ssl
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from webfreeze.common.errors import WebfreezeError

# Set by the recording proxy on every answer it recorded: the archive's id of the exchange.
EXCHANGE_HEADER = "X-Webfreeze-Exchange"
# Set by the replay on every request it sends upstream: the episode it belongs to.
EPISODE_HEADER = "X-Webfreeze-Episode"
# Written into a live run's archive by its recording proxy: task id -> the capture sessions of its
# episodes (the replay answers a task from its own episode first).
EPISODES_DOCUMENT = "live/episodes.json"
UPSTREAM_MODES = ("live", "miss")
TIMEOUT_S = 30.0

# Not forwarded: http.client writes its own Host, length and connection handling; the proxy's own
# headers are ours to set.
_NOT_FORWARDED = frozenset({"host", "content-length", "connection", "keep-alive", "proxy-connection",
                            "proxy-authorization", "transfer-encoding", "te", "upgrade", "trailer",
                            EPISODE_HEADER.lower(), EXCHANGE_HEADER.lower()})


class UpstreamError(WebfreezeError):
    """An upstream that cannot be used (a bad proxy URL, an unknown mode): one line."""


@dataclass
class Fetched:
    """What the upstream answered: ``exchange_id`` names the archived exchange when the recording
    proxy recorded one; ``failure`` says why the site gave no usable answer (the network failed,
    the proxy timed out, the site answered 5xx), else None."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    body: bytes
    exchange_id: int | None
    failure: str | None = None


class Upstream:
    """A recording proxy at ``proxy`` (``http://127.0.0.1:PORT``), trusted with ``ca_file`` (the CA
    that signs its HTTPS certificates); ``mode`` is ``live`` or ``miss`` (see the module)."""

    def __init__(self, proxy: str, *, ca_file: str | None = None, mode: str = "live",
                 timeout: float = TIMEOUT_S):
        if mode not in UPSTREAM_MODES:
            raise UpstreamError(f"unknown upstream mode {mode!r} ({' or '.join(UPSTREAM_MODES)})")
        parts = urlsplit(proxy)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise UpstreamError(f"upstream proxy {proxy!r}: expected http://HOST:PORT")
        self.proxy = proxy
        self.host, self.port = parts.hostname, parts.port
        self.ca_file = ca_file
        self.mode = mode
        self.timeout = timeout
        self.episode: str | None = None
        self.fetches = 0  # requests sent upstream (all of them, failed ones too)
        self.failures: list[dict] = []  # this episode's site failures (see take_failures)
        self._lock = threading.Lock()
        self._ctx: ssl.SSLContext | None = None

    @classmethod
    def from_settings(cls, settings: dict | None) -> Upstream | None:
        """An upstream from plain settings ``{"proxy", "ca_file", "mode"[, "timeout"]}`` (what crosses
        into worker processes), or None for none."""
        if not settings:
            return None
        return cls(settings["proxy"], ca_file=settings.get("ca_file"), mode=settings.get("mode", "live"),
                   timeout=float(settings.get("timeout") or TIMEOUT_S))

    def begin_episode(self, tag: str) -> None:
        """Tag every request from now on with ``tag`` (one capture session per tag upstream) and
        forget the last episode's failures."""
        with self._lock:
            self.episode = tag
            self.failures = []

    def take_failures(self) -> list[dict]:
        """The site failures of documents seen since the last call (``url``, ``status``, ``cause``)."""
        with self._lock:
            got, self.failures = self.failures, []
        return got

    def note_failure(self, method: str, url: str, status: int, cause: str) -> None:
        """Remember a site failure of this episode (the replay calls it for documents)."""
        with self._lock:
            self.failures.append({"method": method.upper(), "url": url, "status": status, "cause": cause})

    def _context(self) -> ssl.SSLContext:
        if self._ctx is None:
            self._ctx = ssl.create_default_context(cafile=self.ca_file) if self.ca_file else \
                ssl.create_default_context()
        return self._ctx

    def fetch(self, method: str, url: str, headers=(), body: bytes = b"") -> Fetched:
        """Send one request through the proxy as a browser would (HTTPS inside a CONNECT tunnel) and
        return what came back; never raises for the network: a failure is a :class:`Fetched` with
        status 0 or the proxy's 502, and ``failure`` set."""
        self.fetches += 1
        parts = urlsplit(url)
        sent = [(k, v) for k, v in headers if k.lower() not in _NOT_FORWARDED and not k.startswith(":")]
        if self.episode is not None:
            sent.append((EPISODE_HEADER, self.episode))
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self._context())
            conn.set_tunnel(parts.hostname, parts.port or 443)
            target = urlunsplit(("", "", parts.path or "/", parts.query, ""))
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            target = url
        try:
            conn.putrequest(method.upper(), target, skip_accept_encoding=True)
            for k, v in sent:
                conn.putheader(k, v)
            if body or method.upper() in ("POST", "PUT", "PATCH"):
                conn.putheader("Content-Length", str(len(body or b"")))
            conn.endheaders(body or None)
            resp = conn.getresponse()
            data = resp.read()
            got = [(k, v) for k, v in resp.getheaders()]
            status, reason = resp.status, resp.reason
        except TimeoutError:
            return Fetched(0, "", [], b"", None, f"timed out after {self.timeout:g} s")
        except (OSError, http.client.HTTPException) as exc:
            why = _tunnel_failure(exc) or str(exc) or type(exc).__name__
            return Fetched(0, "", [], b"", None, why)
        finally:
            conn.close()
        ids = [v for k, v in got if k.lower() == EXCHANGE_HEADER.lower()]
        exchange_id = int(ids[0]) if ids and ids[0].isdigit() else None
        got = [(k, v) for k, v in got if k.lower() != EXCHANGE_HEADER.lower()]
        failure = None
        if exchange_id is None:  # the proxy answered for a site it could not reach
            failure = _proxy_failure(data) or f"the recording proxy answered {status} {reason}".rstrip()
        elif status >= 500:
            failure = f"the site answered {status} {reason}".rstrip()
        return Fetched(status, reason, got, data, exchange_id, failure)


def _tunnel_failure(exc: BaseException) -> str | None:
    """The reason in a CONNECT that the proxy refused ("Tunnel connection failed: 502 ...")."""
    text = str(exc)
    return text if text.startswith("Tunnel connection failed") else None


def _proxy_failure(body: bytes) -> str | None:
    """mitmproxy's words in its own error page (502 for a site it could not reach), as one line."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", body.decode("utf-8", "replace")))
    words = text.split()
    # (the page says its status twice, as title and heading)
    while len(words) >= 6 and words[:3] == words[3:6]:
        words = words[3:]
    return " ".join(words)[:300] or None
