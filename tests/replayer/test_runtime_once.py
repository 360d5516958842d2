"""The determinism runtime installs itself once per page. The replay injected it into every HTML
answer, an XHR's too (now a document's only, and an XHR asking for ``text/html`` reads as one);
Node-RED's editor fetches its node and plugin configurations as HTML
(``GET /nodes``, ``Accept: text/html``) and appends them with jQuery, which runs their scripts,
the injected runtime first. Run a second time in the page, it wrapped the page's timers again,
in a queue the environment never pumps, then threw (``Cannot redefine property: __wfPump``): the
editor's loader waited for a timer that never fired and stayed at "Loading Palette"."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

T0 = "2024-03-01T12:00:00Z"
HOST = "http://editor.test"
# jQuery's way with an HTML fragment: parse it, then run each of its scripts as a new element
PAGE = b"""<!doctype html><html><head><title>Editor</title></head><body><h1>Flows</h1><p id=state>Loading Palette</p>
<script>
var x = new XMLHttpRequest();
x.open('GET', '/nodes');
x.setRequestHeader('Accept', 'text/html');
x.onload = function () {
  var box = document.createElement('div');
  box.innerHTML = x.responseText;
  box.querySelectorAll('script').forEach(function (old) {
    var s = document.createElement('script');
    s.text = old.text;
    old.remove();
    document.head.appendChild(s);
  });
  document.body.appendChild(box);
  setTimeout(function () { document.getElementById('state').textContent = 'Palette ready: ' + Math.random(); }, 0);
};
x.send();
</script></body></html>"""
NODES = b"""<!-- --- [red-module:node-red/inject] --- -->
<script type="text/javascript">window.registered = (window.registered || 0) + 1;</script>
<p class="palette-node">inject</p>"""


def _episode(archive):
    env = WebEnv(EnvConfig(archive, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": HOST + "/", "instruction": "read"}})
        return obs["axtree_text"]
    finally:
        env.close()


def test_an_html_fragment_an_xhr_fetched_does_not_install_the_runtime_again(tmp_path):
    with new_archive_atomically(tmp_path / "a.wfz") as arc:
        sid = arc.new_session("test", source="test_runtime_once")
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/", status=200, payload=PAGE, captured_at=T0,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/nodes", status=200, payload=NODES, captured_at=T0,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
    first = _episode(tmp_path / "a.wfz")
    assert "Palette ready: 0." in first and "Loading Palette" not in first, first
    assert "inject" in first
    assert _episode(tmp_path / "a.wfz") == first  # (the page's generator not seeded again by the fragment)


def test_a_worker_script_that_throws_runs_once(tmp_path):
    """The runtime starts a classic worker's script with ``importScripts`` and, where that refuses
    the script for its type, reads it with a synchronous XHR; a script that threw an error of its
    own was run a second time that way (its messages sent twice; reviewer). Only the script's own
    load failure falls back now."""
    page = (b"<!doctype html><html><head><title>W</title></head><body><p id=o>none</p><script>"
            b"var got = []; var w = new Worker('/w.js');"
            b"w.onmessage = (e) => { got.push(e.data); document.getElementById('o').textContent = got.join(','); };"
            b"w.onerror = () => { got.push('error'); document.getElementById('o').textContent = got.join(','); };"
            b"</script></body></html>")
    with new_archive_atomically(tmp_path / "w.wfz") as arc:
        sid = arc.new_session("test", source="test_runtime_once")
        for rel, ctype, body in (("/", "text/html", page),
                                 ("/w.js", "text/javascript", b"postMessage('started'); undefinedFunction();")):
            arc.add_exchange(Exchange(session_id=sid, url=HOST + rel, status=200, payload=body, captured_at=T0,
                                      resp_headers=[("Content-Type", ctype)]))
    env = WebEnv(EnvConfig(tmp_path / "w.wfz", backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": HOST + "/", "instruction": "read"}})
    finally:
        env.close()
    # (the error event comes at once; the worker's message waits for the pump's turn)
    assert "StaticText 'error,started'" in obs["axtree_text"], obs["axtree_text"]
