"""A WebSocket whose page's message matches the recording only with the parts the archive's replay
rule ``socket_volatile`` names set aside (a kernel message's date: the live clock when recorded,
the frozen one in replay). The conversation goes on, and the step says so: the socket's answer is
reported once more, at the level ``canonical``, with why (replay-and-environment.md), whether the
page's socket was served in the browser or a worker's by the replay server. A message equal to the
recorded one adds nothing."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.replayer.websocket import WEBSOCKET_SET_ASIDE
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://kernel.test"
OPENED = 1767225600.5  # (2026-01-01T00:00:00.5Z: after the page's capture)
# the page's first message carries its clock (``date``) when ?dated, else a fixed text
PAGE = """<!DOCTYPE html><html><head><title>Kernel</title></head><body><p id="out">waiting</p><script>
const ws = new WebSocket('ws://kernel.test/channels' + location.search);
ws.onopen = () => ws.send(location.search === '?dated'
  ? JSON.stringify({msg_type: 'kernel_info_request', date: new Date().toISOString()})
  : JSON.stringify({msg_type: 'kernel_info_request', date: 'fixed'}));
ws.onmessage = (e) => { document.getElementById('out').textContent = 'kernel said ' + e.data; };
</script></body></html>"""
WORKER_PAGE = """<!DOCTYPE html><html><head><title>Kernel</title></head><body><p id="out">waiting</p><script>
const w = new Worker('/w.js');
w.onmessage = (e) => { document.getElementById('out').textContent = 'kernel said ' + e.data; };
</script></body></html>"""
WORKER = """const ws = new WebSocket('ws://kernel.test/channels?worker');
ws.onopen = () => ws.send(JSON.stringify({msg_type: 'kernel_info_request', date: new Date().toISOString()}));
ws.onmessage = (e) => postMessage(e.data);"""


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("set-aside") / "kernel.wfz"
    rules = {"socket_volatile": ['"date":"[^"]*"']}
    with new_archive_atomically(path, replay_rules=rules) as arc:
        sid = arc.new_session("test", source="test_env_socket_set_aside")
        for rel, ctype, body in (("/", "text/html; charset=utf-8", PAGE), ("/?dated", "text/html; charset=utf-8", PAGE),
                                 ("/worker", "text/html; charset=utf-8", WORKER_PAGE),
                                 ("/w.js", "text/javascript", WORKER)):
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", ctype)], payload=body.encode(), session_id=sid))
        for n, (query, date) in enumerate((("?dated", "2026-01-01T00:00:00.600Z"), ("", "fixed"),
                                           ("?worker", "2026-01-01T00:00:02.600Z"))):
            arc.put_document(f"websocket/{sid}/channels{n}.json", {
                "version": 1, "url": "ws://kernel.test/channels" + query, "opened": OPENED + n, "closed_by_client": None,
                "close_code": None, "messages": [
                    {"from_client": True, "type": "text", "time": OPENED + n + 0.1,
                     "content": '{"msg_type":"kernel_info_request","date":"%s"}' % date},
                    {"from_client": False, "type": "text", "time": OPENED + n + 0.2, "content": "ready"}]})
    return path


def _sockets(trajectory) -> list[tuple]:
    return [(a["level"], a["status"], a.get("why")) for a in trajectory["replay"]["start"]["answers"]
            if a["url"].startswith("ws:")]


def test_a_message_matched_with_volatile_parts_set_aside_is_reported_canonical(archive):
    env = WebEnv(EnvConfig(archive=archive, backend="browser"))
    try:
        seen = []
        for rel in ("/?dated", "/", "/worker"):
            obs, _ = env.reset(options={"task": {"id": "k", "start_url": SITE + rel, "instruction": "read"}})
            seen.append((obs["axtree_text"], env.trajectory()))
    finally:
        env.close()
    (dated_text, dated), (fixed_text, fixed), (worker_text, worker) = seen
    # the replay's clock is not the recording's: the dates differ, the rule sets them aside
    assert "kernel said ready" in dated_text, dated_text
    assert _sockets(dated) == [("canonical", 101, WEBSOCKET_SET_ASIDE), ("exact", 101, None)]
    assert dated["replay"]["misses"] == 0 and dated["replay"]["compromised"] is False
    # the same message as recorded: the socket's one answer, nothing set aside
    assert "kernel said ready" in fixed_text, fixed_text
    assert _sockets(fixed) == [("exact", 101, None)]
    # a worker's socket, answered by the replay server: told alike
    assert "kernel said ready" in worker_text, worker_text
    assert _sockets(worker) == [("canonical", 101, WEBSOCKET_SET_ASIDE), ("exact", 101, None)]
