"""Workers under the determinism runtime (issue 43), in the browser backend: a shared worker, a
module worker and a classic worker that imports a helper by a relative URL get the runtime before
their own scripts (seeded streams of their own, the page's clock), their timers run on the pump,
and what they post reaches the page at the same point on every reset."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://workers.test"
PAGE = """<!DOCTYPE html><html><head><title>Workers</title></head><body><ul id="out"></ul><script>
const show = (t) => { const li = document.createElement('li'); li.textContent = t; document.getElementById('out').appendChild(li); };
show('page ' + Math.random().toFixed(8));
const classic = new Worker('w/classic.js');
classic.onmessage = (e) => show(e.data);
const module = new Worker('w/module.js', {type: 'module'});
module.onmessage = (e) => show(e.data);
const shared = new SharedWorker('w/shared.js');
shared.port.onmessage = (e) => show(e.data);
shared.port.postMessage('hello');
</script></body></html>"""
FILES = {
    "/": ("text/html; charset=utf-8", PAGE),
    "/w/classic.js": ("text/javascript", "importScripts('helper.js');\n"
                      "postMessage('classic ' + helper() + ' ' + Math.random().toFixed(8) + ' ' + location.pathname);\n"
                      "setTimeout(() => fetch('data.txt').then((r) => r.text())"
                      ".then((t) => postMessage('classic later ' + t.trim() + ' ' + Date.now())), 300);"),
    "/w/helper.js": ("text/javascript", "function helper() { return 'helped'; }"),
    "/w/data.txt": ("text/plain", "fetched"),
    "/w/module.js": ("text/javascript", "import { word } from './word.js';\n"
                     "postMessage('module ' + word + ' ' + Math.random().toFixed(8));"),
    "/w/word.js": ("text/javascript", "export const word = 'imported';"),
    "/w/shared.js": ("text/javascript", "onconnect = (e) => { const port = e.ports[0];\n"
                     "port.onmessage = (m) => port.postMessage('shared ' + m.data + ' ' + Math.random().toFixed(8)); };"),
}
TASK = {"id": "workers", "start_url": SITE + "/", "instruction": "read the workers"}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("workers") / "workers.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_workers")
        for rel, (ctype, body) in FILES.items():
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", ctype)], payload=body.encode(), session_id=sid))
    return path


def test_every_kind_of_worker_replays_the_same_on_every_reset(archive):
    env = WebEnv(EnvConfig(archive=archive, backend="browser"))
    try:
        texts = {env.reset(options={"task": TASK})[0]["axtree_text"] for _ in range(3)}
        other = env.reset(seed=5, options={"task": TASK})[0]["axtree_text"]
    finally:
        env.close()
    assert len(texts) == 1
    [text] = texts
    lines = {line.split("'")[1].split()[0] + (" later" if " later " in line else ""): line
             for line in text.splitlines() if "StaticText" in line}
    # relative imports (importScripts, a module's import, fetch) resolved against the worker's URL
    assert "classic helped" in lines["classic"] and "/w/classic.js" in lines["classic"]
    assert "module imported" in lines["module"] and "shared hello" in lines["shared"]
    # a timer of 300 virtual ms and its fetch, inside the settle; the clock is the capture time's,
    # 300 ms on when the timer ran (it keeps up with the timers' virtual clock)
    assert "classic later fetched 1767225600300'" in lines["classic later"]
    randoms = [lines[k].split()[-1].rstrip("'") for k in ("page", "module", "shared")]
    assert len(set(randoms)) == 3  # a stream of its own each
    assert other != text  # another seed, other numbers
