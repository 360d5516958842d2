"""An application that sends every call by POST to one URL (Transmission's JSON-RPC: a first call
answered 409 with a session id, the same call again answered 200, then other calls) exported to
HAR. The trajectory sorts a step's answers (by kind, method, URL, level, status), not in the order
sent, and keeps no request body: the export guessed each entry's request as the first capture of
that method, URL and status not taken yet, then asked the replay again with it, which answered in
its own order. Entries came out with one call's status and another call's answer, and the 409's
HTML error page got the determinism runtime (asked as a document). Each answer now names the
exchange that answered (``capture``): every entry holds that exchange's request and answer, and
an XHR's answer is the archived bytes. A HAR entry for a replay's miss imports as nothing."""

from __future__ import annotations

import json

import pytest
from cli_runner import run_cli

from webfreeze.archives import Archive, Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv
from webfreeze.simulator.trajectory import write_trajectory

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://rpc.test"
T0 = "2026-01-01T00:00:0%dZ"
PAGE = b"""<!DOCTYPE html><html><head><title>Torrents</title></head><body><ul id="out"></ul><script>
const out = (t) => { const li = document.createElement('li'); li.textContent = t; document.getElementById('out').append(li); };
const call = (method, id) => fetch('/rpc', {method: 'POST', headers: Object.assign({'Content-Type': 'application/json'},
  id ? {'X-Session-Id': id} : {}), body: JSON.stringify({method})});
(async () => {
  let r = await call('session-get');
  const id = r.headers.get('X-Session-Id');
  out(r.status + ' ' + id);
  r = await call('session-get', id); out(r.status + ' ' + (await r.json()).version);
  r = await call('torrent-get', id); out(r.status + ' ' + (await r.json()).torrents);
})();
</script></body></html>"""
CALLS = [  # (body, status, content type, answer)
    (b'{"method":"session-get"}', 409, "text/html", b"<h1>409: Conflict</h1><p>Your request had an invalid session id.</p>"),
    (b'{"method":"session-get"}', 200, "application/json", b'{"version":"3.00"}'),
    (b'{"method":"torrent-get"}', 200, "application/json", b'{"torrents":"sample-data.bin"}'),
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rpc")
    path = tmp / "rpc.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_har_rpc_pairs")
        arc.add_exchange(Exchange(url=SITE + "/", captured_at=T0 % 1, status=200, reason="OK",
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")], payload=PAGE,
                                  session_id=sid))
        for i, (body, status, ctype, answer) in enumerate(CALLS):
            arc.add_exchange(Exchange(url=SITE + "/rpc", method="POST", captured_at=T0 % (2 + i), status=status,
                                      reason="OK" if status == 200 else "Conflict",
                                      resp_headers=[("Content-Type", ctype), ("X-Session-Id", "abc")],
                                      payload=answer, req_headers=[("Content-Type", "application/json")],
                                      req_body=body, session_id=sid))
    env = WebEnv(EnvConfig(path, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "rpc", "start_url": SITE + "/", "instruction": "read"}})
        env.step("send_msg_to_user('sample-data.bin')")
        text = obs["axtree_text"]
        out = tmp / "run"
        write_trajectory(env.trajectory(), out)
    finally:
        env.close()
    (out / "manifest.json").write_text(json.dumps({"circumstances": {"archive_path": str(path)}}))
    proc = run_cli("eval", "export-har", out, "-o", tmp / "har")
    assert proc.returncode == 0, proc.stderr
    return {"tmp": tmp, "out": out, "archive": path, "text": text}


def test_each_rpc_entry_holds_its_own_request_and_answer(run):
    assert "200 3.00" in run["text"] and "200 sample-data.bin" in run["text"], run["text"]
    trajectory = json.loads((run["out"] / "trajectories" / "rpc.json").read_text())
    posts = [a for a in trajectory["replay"]["start"]["answers"] if a["method"] == "POST"]
    assert sorted(a["status"] for a in posts) == [200, 200, 409] and all(isinstance(a["capture"], int) for a in posts)
    entries = json.loads((run["tmp"] / "har" / "rpc.har").read_text())["log"]["entries"]
    got = sorted((e["request"]["postData"]["text"].encode(), e["response"]["status"], e["response"]["content"]["text"].encode())
                 for e in entries if e["request"]["method"] == "POST")
    assert got == sorted((body, status, answer) for body, status, _, answer in CALLS), got
    # imported back: the same three calls, nothing else of the RPC's
    proc = run_cli("archive", "import", run["tmp"] / "har" / "rpc.har", "--to", run["tmp"] / "back.wfz")
    assert proc.returncode == 0, proc.stderr
    with Archive.open(run["tmp"] / "back.wfz") as arc:
        back = sorted((ex.request.payload(), ex.status, ex.body()) for ex in arc.exchanges() if ex.method == "POST")
    assert back == got


def test_a_replay_s_miss_in_a_har_imports_as_nothing(run, tmp_path):
    har = json.loads((run["tmp"] / "har" / "rpc.har").read_text())
    entry = json.loads(json.dumps(har["log"]["entries"][0]))
    entry["request"]["url"] = SITE + "/missing"
    entry["response"].update(status=404, content={"size": 0, "mimeType": "text/plain"})
    entry["_webfreeze"]["level"] = "miss"
    har["log"]["entries"].append(entry)
    (tmp_path / "miss.har").write_text(json.dumps(har))
    proc = run_cli("archive", "import", tmp_path / "miss.har", "--to", tmp_path / "miss.wfz")
    assert proc.returncode == 0, proc.stderr
    with Archive.open(tmp_path / "miss.wfz") as arc:
        assert not [ex for ex in arc.exchanges() if ex.url == SITE + "/missing"]
