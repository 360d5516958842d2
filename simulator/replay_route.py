"""An archive answering a browser context's requests in process: every request a Playwright
context makes goes to a :class:`webfreeze.replayer.Replay` of the archive, never to the network.

This is the replay the recorder's page check loads a just-recorded page through
(:mod:`webfreeze.recorder.page_check`): it lives here, behind the simulator, because the recorder
may import only the simulator's browser side, and the simulator may import the replayer (the layer
table of docs/architecture.md). What the replay answers with a miss, or with the recording proxy's placeholder
for an exchange whose upstream failed (the site never answered), is kept as :class:`Missing`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from urllib.parse import urlsplit

from webfreeze.archives.content import DecodeError, decode_content
from webfreeze.common.http import header_value
from webfreeze.replayer import Replay
from webfreeze.replayer.replay import BROWSER_INTERNAL_HOSTS


@dataclass(frozen=True)
class Missing:
    """A request of the replayed page the archive could not answer (``why``: ``miss``, or the
    upstream failure its recorded placeholder holds)."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    why: str

    def describe(self) -> str:
        """The URL, and why it is missing when that is not a plain miss."""
        return self.url if self.why == "miss" else f"{self.url} ({self.why})"


class ReplayRoute:
    """Routes a browser context's requests to a replay of ``archive_path``: :meth:`attach` a context
    once, then load pages inside :meth:`serving`, which opens the archive anew (its match index then
    holds what was recorded a moment ago) and collects what the replay could not answer."""

    def __init__(self, archive_path, *, seed: int = 0):
        self.archive_path = archive_path
        self.seed = seed
        self._replay = None
        self.missing: dict[tuple[str, str], Missing] = {}
        self._failed_ids: dict[int, str | None] = {}

    def attach(self, context) -> None:
        """Answer every request of ``context`` from the archive (outside :meth:`serving`: aborted)."""
        context.route("**/*", self._answer)

    @contextlib.contextmanager
    def serving(self, when: str):
        """The replay, as at ``when``, for the pages loaded in this block; :attr:`missing` starts empty."""
        self.missing, self._failed_ids = {}, {}
        with Replay(self.archive_path, seed=self.seed) as replay:
            replay.reset(self.seed, when=when)
            self._replay = replay
            try:
                yield self
            finally:
                self._replay = None

    def _upstream_failure(self, headers) -> str | None:
        cap = header_value(headers, "x-webfreeze-capture")
        if not cap or not cap.isdigit():
            return None
        cid = int(cap)
        if cid not in self._failed_ids:
            self._failed_ids[cid] = self._replay.archive.exchange(cid).extra.get("error")
        return self._failed_ids[cid]

    def _answer(self, route, request) -> None:
        from playwright.sync_api import Error as PlaywrightError  # (late: the replay extra)

        try:
            replay = self._replay
            if replay is None:  # a request of a page being left, between checks
                route.abort()
                return
            body = request.post_data_buffer or b""
            headers = list(request.headers.items())
            status, resp_headers, data = replay.fetch(request.method, request.url, headers, body)
            internal = (urlsplit(request.url).hostname or "") in BROWSER_INTERNAL_HOSTS
            why = "miss" if status == 0 or header_value(resp_headers, "x-webfreeze-miss") else \
                self._upstream_failure(resp_headers)
            if why and not internal:
                self.missing.setdefault((request.method, request.url),
                                        Missing(request.method, request.url, tuple(headers), body, why))
            if status == 0:
                route.abort()
                return
            # Playwright hands the body to Chromium as the decoded entity: take the content coding
            # off here (the archive keeps it as the site sent it).
            coding = header_value(resp_headers, "content-encoding")
            if coding:
                try:
                    data = decode_content(data, coding)
                    resp_headers = [(k, v) for k, v in resp_headers
                                    if k.lower() not in ("content-encoding", "content-length")]
                except DecodeError:
                    pass
            route.fulfill(status=status, headers=_header_dict(resp_headers), body=data)
        except PlaywrightError:
            pass  # the page went away meanwhile


def _header_dict(headers) -> dict[str, str]:
    """Playwright takes headers as a dict: repeated ones (Set-Cookie) joined as Chromium reads them."""
    out: dict[str, str] = {}
    for k, v in headers:
        key = k.lower()
        out[key] = f"{out[key]}\n{v}" if key in out else v
    return out
