"""A page whose scripts go on after the network went quiet and then ``import()`` a module that sets
its timer (Gradio's ``gr.Timer``: its component's chunk comes from a chain of dynamic imports).
The settle took "no request for 30 ms" and a painted frame for settled and ran the page's timers
to their horizon; the import, sent while the page painted, was no load the runtime knew of, so
the module's ``setInterval`` was set with the horizon already reached, and the first observation
showed no tick, now and then (1 reset in 12 on Gradio). The settle now settles again when the
network moved while the page painted."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://import-chain.test"
BUSY_MS = 120  # the page's work between its data and its import: longer than the settle's quiet period
PAGE = """<!DOCTYPE html><html><head><title>Ticker</title></head><body><p id="t">no tick</p><script>
addEventListener('load', () => {
  fetch('/data.json').then((r) => r.json()).then((data) => {
    const t0 = new Event('x').timeStamp;  // (real time: the runtime's clocks are virtual)
    while (new Event('x').timeStamp - t0 < %d);
    import('/step.js').then((m) => m.go(data.every));
  });
});
</script></body></html>""" % BUSY_MS
# the next link of the chain: a module that works as long again when it is run, then imports the ticker
STEP = """const t0 = new Event('x').timeStamp;
while (new Event('x').timeStamp - t0 < %d);
export async function go(every) { (await import('/ticker.js')).start(every); }""" % BUSY_MS
TICKER = """export function start(every) {
  let n = 0;
  setInterval(() => { document.getElementById('t').textContent = 'tick ' + (++n); }, every);
}"""


def test_a_timer_set_by_an_imported_module_ticks_alike_on_every_reset(tmp_path):
    archive = tmp_path / "chain.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_env_import_chain")
        for rel, ctype, body in (("/", "text/html; charset=utf-8", PAGE), ("/data.json", "application/json", '{"every": 400}'),
                                 ("/step.js", "text/javascript", STEP), ("/ticker.js", "text/javascript", TICKER)):
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", ctype)], payload=body.encode(), session_id=sid))
    seen = []
    with WebEnv(EnvConfig(archive, backend="browser")) as env:
        for _ in range(4):
            obs, _ = env.reset(options={"task": {"id": "t", "start_url": SITE + "/", "instruction": "read"}})
            seen.append(next(line.strip() for line in obs["axtree_text"].splitlines() if "tick" in line))
    # the interval set at virtual time 0 ran within the first settle's horizon (1000 ms): at 400 and 800
    assert seen == ["StaticText 'tick 2'"] * 4, seen
