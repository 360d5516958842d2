"""The browser backend's settle rule: a page's timers run by the pump (replayer/determinism.py,
simulator/browser.py), so an observation of a JavaScript-rendered page is the same on every run,
however slow or busy the machine, and shows what the page's own code reaches within the rule's
virtual horizon (not what the wall clock allowed)."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import time

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.replayer.determinism import runtime_script
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://timers.test"
# What search pages such as Sphinx's do, slowed down: a status that pulses while work is pending,
# an index loaded by an inserted script, results fetched one by one with a body read each, and
# shown one per short timer; beside it a clock that ticks forever and an animation loop.
PAGE = """<!DOCTYPE html><html><head><title>Timers</title></head><body>
<h1>Search</h1><p id="status">Searching</p><ul id="results"></ul>
<p id="clock">tick 0</p><p id="frames">frames 0</p>
<button type="button" id="more" onclick="later()">show later</button><p id="later"></p>
<script>
let pulse = 0, ticks = 0, frames = 0;
const status = document.getElementById('status');
const pulser = setInterval(() => { pulse = (pulse + 1) % 4; status.textContent = 'Searching' + '.'.repeat(pulse); }, 100);
setInterval(() => { ticks++; document.getElementById('clock').textContent = 'tick ' + ticks; }, 400);
(function spin() { frames++; document.getElementById('frames').textContent = 'frames ' + frames; requestAnimationFrame(spin); })();
window.setIndex = (names) => {
  let i = 0;
  const next = () => {
    if (i >= names.length) { clearInterval(pulser); status.textContent = 'Found ' + names.length; return; }
    const name = names[i++];
    fetch('/doc/' + name + '.json').then((r) => r.json()).then((doc) => {
      const li = document.createElement('li'); li.textContent = doc.title + ': ' + doc.summary;
      document.getElementById('results').appendChild(li);
      setTimeout(next, 5);
    });
  };
  setTimeout(next, 200);
};
function later() { setTimeout(() => { document.getElementById('later').textContent = 'shown later'; }, 600); }
document.addEventListener('DOMContentLoaded', () => {
  setTimeout(() => { const s = document.createElement('script'); document.body.appendChild(s); s.src = '/index.js'; }, 50);
});
</script></body></html>"""
DOCS = {f"d{i}": {"title": f"Doc {i}", "summary": f"about stacks, part {i}"} for i in range(6)}
FILES = {
    "/": ("text/html; charset=utf-8", PAGE.encode()),
    "/index.js": ("text/javascript", f"setIndex({json.dumps(sorted(DOCS))});".encode()),
    **{f"/doc/{k}.json": ("application/json", json.dumps(v).encode()) for k, v in DOCS.items()},
}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("timers") / "timers.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_timers")
        for rel, (ctype, body) in FILES.items():
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", ctype)], payload=body, session_id=sid))
    return path


TASK = {"id": "timers", "start_url": SITE + "/", "instruction": "read the results"}


def _digest(obs) -> str:
    return hashlib.sha256(obs["axtree_text"].encode()).hexdigest()


def _burn(stop_at: float) -> None:
    while time.monotonic() < stop_at:
        pass


def test_a_javascript_page_settles_to_the_same_observation_every_time(archive):
    env = WebEnv(EnvConfig(archive=archive, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": TASK})
        first = obs["axtree_text"]
        # everything the page's own code reaches within the horizon, whatever the clock said
        for doc in DOCS.values():
            assert f"{doc['title']}: {doc['summary']}" in first
        assert "Found 6" in first and "Searching" not in first
        # the clock ticked by virtual time: 1000 virtual ms after the settle began, plus what the
        # fetches' waits did not count (virtual time stands still while a load is pending)
        assert "tick 2" in first, first
        digests = {_digest(obs)}
        # the same again, and the same on a machine made busy by other processes
        burners = [multiprocessing.Process(target=_burn, args=(time.monotonic() + 20,)) for _ in range(3)]
        for b in burners:
            b.start()
        try:
            for _ in range(5):
                obs, _ = env.reset(options={"task": TASK})
                digests.add(_digest(obs))
        finally:
            for b in burners:
                b.terminate()
                b.join()
        assert len(digests) == 1
    finally:
        env.close()


def _number(obs, word: str) -> int:
    line = next(line for line in obs["axtree_text"].splitlines() if f"'{word} " in line)
    return int(line.split(f"{word} ")[1].split("'")[0])


def test_timers_an_action_starts_run_in_its_settle_and_waits_are_virtual(archive):
    env = WebEnv(EnvConfig(archive=archive, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": TASK})
        # every settle is TIMER_HORIZON_MS (1000) of the page's time: ticks of 400 ms at 400, 800
        assert _number(obs, "tick") == 2
        bid = next(e["bid"] for e in env.tree.descriptions if e["name"] == "show later")
        obs, *_ = env.step(f"click('{bid}')")
        assert "shown later" in obs["axtree_text"]  # 600 virtual ms after the click, inside the horizon
        assert _number(obs, "tick") == 5  # 2000 ms
        obs, *_ = env.step("noop(4000)")
        assert _number(obs, "tick") == 17  # a wait of 4000 ms is 4000 ms more of the page's time: 7000 ms
        # an endless animation loop runs a bounded number of frames per settle (one per 16 virtual ms)
        assert _number(obs, "frames") == 7000 // 16 + 1
        obs, *_ = env.step("noop(8000)")
        assert _number(obs, "tick") == 40  # a long wait is whole too (up to MAX_WAIT_MS): 16000 ms
    finally:
        env.close()


def test_people_browsing_keep_the_browsers_own_timers():
    """Without ``timers`` (``replay serve``, ``replay check``) the clock and randomness are the
    runtime's, the timers, fetch and workers' messages the browser's own: a timer runs by the wall
    clock with no pump, and its callback reads the clock at least its delay after it was set."""
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import launch_chromium

    plain = runtime_script("2026-01-01T00:00:00Z", 1).decode()
    pumped = runtime_script("2026-01-01T00:00:00Z", 1, timers=True).decode()
    probe = """() => [typeof window.__wfPump, /\\[native code\\]/.test(String(setTimeout)),
                      /\\[native code\\]/.test(String(fetch)), Date.now()]"""
    waits = """async () => { const t0 = Date.now(); const p0 = performance.now();
                               for (let i = 0; i < 50; i++) performance.now();  // (perf read more: Date keeps its own)
                               await new Promise((done) => setTimeout(done, 40.7));
                               const t1 = Date.now(), p1 = performance.now();
                               let later = null; setTimeout(() => { later = Date.now(); }, 2 ** 31 + 5);  // (wraps: at once)
                               await new Promise((done) => setTimeout(done, 20));
                               return [t1 - t0, p1 - p0, later - t1]; }"""
    with sync_playwright() as pw:
        browser = launch_chromium(pw, shell=True)
        try:
            states = []
            for script in (plain, pumped):
                # (a page each: set_content writes into the same window, whose runtime, once
                # installed, stays as it was: tests/replayer/test_runtime_once.py)
                page = browser.new_page()
                page.set_content(f"<html><head>{script}</head><body></body></html>")
                states.append(page.evaluate(probe))
                if script is plain:
                    waited = page.evaluate(waits)
        finally:
            browser.close()
    midnight = 1767225600000  # 2026-01-01T00:00:00Z: both clocks are the runtime's
    assert states[0][:3] == ["undefined", False, True] and midnight <= states[0][3] < midnight + 1000
    # (1 ms per reading alone: 1 or 2); a whole number of ms, as the browser's delay is; a delay
    # past 2^31 - 1 wraps as the browser's does, without moving the clock weeks on
    assert 40 <= waited[0] < 50 and waited[0] == int(waited[0]), waited  # (Date: not moved by perf's 50 reads)
    assert 90 <= waited[1] < 100, waited  # (perf: its 50 reads and the wait)
    assert 0 < waited[2] < 1000, waited
    assert states[1][:3] == ["function", False, False] and midnight <= states[1][3] < midnight + 1000


# lodash's debounce (Verdaccio's package search, many autocomplete boxes): the timer's callback
# checks on Date.now() that the wait has passed, and sets a timer for the rest when it has not.
DEBOUNCE_PAGE = """<!DOCTYPE html><html><head><title>Debounce</title></head><body>
<label>Search <input id="q"></label><p id="out">no search</p><p id="stamp"></p>
<script>
function debounce(fn, wait) {
  let timer, last;
  function expired() {
    const since = Date.now() - last;
    if (since >= wait) { timer = undefined; fn(); } else { timer = setTimeout(expired, wait - since); }
  }
  return function () { last = Date.now(); if (timer === undefined) timer = setTimeout(expired, wait); };
}
const search = debounce(() => { document.getElementById('out').textContent = 'searched ' + q.value; }, 300);
q.addEventListener('input', search);
const t0 = Date.now();
setTimeout(() => { document.getElementById('stamp').textContent = 'waited ' + (Date.now() - t0 >= 500); }, 500);
</script></body></html>"""


def test_the_clock_keeps_up_with_virtual_timers(tmp_path):
    """A timer that runs at virtual time T reads a Date.now() at least T after its page began, so a
    debounce that checks the clock fires within the settle, as it does in a browser."""
    path = tmp_path / "debounce.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_timers")
        arc.add_exchange(Exchange(url=SITE + "/debounce", captured_at="2026-01-01T00:00:00Z", status=200,
                                  reason="OK", resp_headers=[("Content-Type", "text/html; charset=utf-8")],
                                  payload=DEBOUNCE_PAGE.encode(), session_id=sid))
    env = WebEnv(EnvConfig(archive=path, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "debounce", "start_url": SITE + "/debounce",
                                             "instruction": "search"}})
        assert "waited true" in obs["axtree_text"], obs["axtree_text"]
        bid = next(e["bid"] for e in env.tree.descriptions if e["role"] == "textbox")
        obs, *_ = env.step(f"fill('{bid}', 'tiny', True)")
        assert "searched tiny" in obs["axtree_text"], obs["axtree_text"]
    finally:
        env.close()
