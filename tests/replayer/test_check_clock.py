"""Under the browser's own timers (``replay check``, the crawl's check, people browsing ``replay
serve``), the runtime's clock still goes 1 ms per reading, but a timer's callback reads at least
the time it was due: ``setTimeout(f, 60)`` set at clock t runs f at t + 60 or later. Code that
checks on the clock that its wait has passed (lodash's ``debounce``, as MLflow's charts and most
search boxes use) otherwise found 2 ms gone after each 60 ms timer and set another, for seconds:
``replay check`` saw a page whose debounced request was never sent, and called it whole."""

from __future__ import annotations

import json

import pytest
from static_site import static_site

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

# lodash's debounce in a few lines: the wait is checked on the clock when the timer fires
PAGE = b"""<!doctype html><html><head><title>Chart</title></head><body><p id="out">drawing</p><script>
function debounce(fn, wait) {
  let last = 0, timer = null;
  function expired() {
    const since = Date.now() - last;
    if (since >= wait) { timer = null; fn(); } else { timer = setTimeout(expired, wait - since); }
  }
  return function () { last = Date.now(); if (!timer) timer = setTimeout(expired, wait); };
}
const draw = debounce(() => fetch('/data.json').then((r) => r.json()).then((d) => {
  document.getElementById('out').textContent = 'drawn: ' + d.series;
}), 60);
draw(); draw();
let every = 0;
const tick = setInterval(() => { every++; if (every === 3) { clearInterval(tick);
  document.title = 'ticks at ' + (performance.now() >= 120 ? 'time' : 'too soon'); } }, 40);
</script></body></html>"""
DATA = json.dumps({"series": "requests per day"}).encode()


def test_replay_check_sees_what_a_debounced_script_draws(tmp_path, monkeypatch, cli):
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    archive = tmp_path / "chart.wfz"
    with static_site({"/": PAGE, "/data.json": (DATA, "application/json")}) as port:
        r = cli("record", "crawl", "http://chart.test/", "--resolve", f"chart.test=127.0.0.1:{port}",
                "--archive", archive, "--depth", "0", "--no-check", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    report_dir = tmp_path / "report"
    r = cli("replay", "check", archive, "--report", report_dir, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (page,) = json.loads((report_dir / "report.json").read_text())["pages"]
    html = (report_dir / page["dom"]).read_bytes()
    assert b"drawn: requests per day" in html  # the debounce ended and its request was answered
    assert b"<title>ticks at time</title>" in html  # an interval of 40 ms: its third run reads 120 ms or more
