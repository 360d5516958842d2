"""The recording proxy of a live run: one capture session per episode, and each answer named.

A live run (``bench run --live``, ``--patch-from-live``; webfreeze/runs/live.py) replays through a
replay whose misses, or every request, go to this proxy (replayer/upstream.py). Two things differ
from an ordinary recording proxy, both on the wire only:

- the replay tags each request with its episode (``X-Webfreeze-Episode``); the tag is taken off
  before the site sees the request (so it is neither sent nor recorded) and each tag gets its own
  capture session, ended when the proxy stops;
- each recorded answer carries the archive's id of its exchange (``X-Webfreeze-Exchange``), so the
  replay can serve that very exchange from the archive, byte for byte as a later offline replay
  will. Bodies are buffered, never streamed, so that the header is set before the answer leaves.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from webfreeze.archives import ArchiveError

from .addon import ArchiveRecorder
from .proxy import RecordingProxy, ensure_ca, recording_into

# The wire protocol shared with replayer/upstream.py (the recorder does not import the replayer).
EXCHANGE_HEADER = "X-Webfreeze-Exchange"
EPISODE_HEADER = "X-Webfreeze-Episode"
SESSION_KIND = "live"
# Which capture sessions hold which task's episodes: {"version": 1, "episodes": {task id: [session
# ids, oldest first]}}. A replay of the archive answers each task from its own last episode first
# (replayer/replay.py, Replay.prefer_episode), so it sees what the live episode saw.
EPISODES_DOCUMENT = "live/episodes.json"


class EpisodeRecorder(ArchiveRecorder):
    """:class:`ArchiveRecorder` that files each exchange under its episode's capture session and
    names the recorded exchange in the answer."""

    def __init__(self, archive, tool: str = ""):
        super().__init__(archive, None)
        self.tool = tool
        self.sessions: dict[str, str] = {}  # episode tag -> capture session id
        self.counts: dict[str, int] = {}    # capture session id -> exchanges recorded

    def _session(self, tag: str) -> str:
        sid = self.sessions.get(tag)
        if sid is None:
            task = tag.rsplit(" ", 1)[0] if " " in tag else tag
            sid = self.archive.new_session(SESSION_KIND, source=f"live run, episode of {task}"[:200], tool=self.tool,
                                           info={"task": task, "episode": tag})
            self.sessions[tag] = sid
            self._note_episode(task, sid)
        return sid

    def _note_episode(self, task: str, sid: str) -> None:
        try:
            doc = self.archive.get_document(EPISODES_DOCUMENT)
        except ArchiveError:  # the first episode recorded into this archive
            doc = {"version": 1, "episodes": {}}
        doc.setdefault("episodes", {}).setdefault(task, []).append(sid)
        self.archive.put_document(EPISODES_DOCUMENT, doc)

    def request(self, flow) -> None:
        tag = flow.request.headers.pop(EPISODE_HEADER, None)
        flow.metadata["webfreeze_episode"] = tag or "(no episode)"

    def responseheaders(self, flow) -> None:
        """Never stream: the exchange header must go out with the answer's head."""

    def _file_under(self, flow) -> None:
        # (mitmproxy calls addons on one loop, one at a time: setting the session here is safe)
        self.session_id = self._session(flow.metadata.get("webfreeze_episode") or "(no episode)")

    def response(self, flow) -> None:
        self._file_under(flow)
        super().response(flow)
        exchange = flow.metadata.get("webfreeze_exchange")
        if exchange is not None and flow.response is not None:
            flow.response.headers[EXCHANGE_HEADER] = str(exchange)
            self.counts[self.session_id] = self.counts.get(self.session_id, 0) + 1

    def error(self, flow) -> None:
        self._file_under(flow)
        super().error(flow)

    def end_sessions(self) -> None:
        """End every episode's capture session, with its count of recorded exchanges."""
        for sid in self.sessions.values():
            # (a failing archive: the exchanges themselves are committed already)
            with contextlib.suppress(ArchiveError):
                self.archive.end_session(sid, {"recorded": self.counts.get(sid, 0)})


@contextlib.contextmanager
def live_proxy(archive_path: str | os.PathLike, *, resolve: dict[str, tuple[str, int]] | None = None,
               confdir=None) -> Iterator[RecordingProxy]:
    """A recording proxy on a loopback port of the system's choice, recording a live run into
    ``archive_path`` (created if missing; a new one that ends up empty is removed again); yields
    the running proxy (its ``url``; the CA it signs with is :func:`live_ca_file`). Every episode
    session is ended when the block ends."""
    from mitmproxy import version

    with recording_into(archive_path) as arc:
        proxy = RecordingProxy(arc, port=0, session_kind=SESSION_KIND, resolve=resolve, paused=True,
                               confdir=confdir)
        recorder = EpisodeRecorder(arc, tool=f"webfreeze recorder (live run), mitmproxy {version.VERSION}")
        proxy.recorder = recorder  # (before start: the proxy adds its recorder to mitmproxy then)
        proxy.start()
        try:
            yield proxy
        finally:
            proxy.stop()
            recorder.end_sessions()


def live_ca_file(confdir=None) -> str:
    """The certificate (PEM) of the CA the live proxy signs its HTTPS certificates with."""
    return str(ensure_ca(confdir))
