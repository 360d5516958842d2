"""An HTML fragment a page fetches and inserts with its scripts (htmx, jQuery's ``.load()`` and
``.html()``, Turbo streams) runs in the page's runtime. The replay put its runtime into every
answer typed HTML, fetched fragments included: the fragment's copy ran again over the page's, the
clock started over and stopped following the environment's pump (ten 100 ms ticks read 10 ms
apart, not 1000), and the generator was seeded anew. Only documents get the runtime now, and a
runtime finding one already in its global leaves it (jQuery asks for ``text/html``, which reads
as a document's request where the browser sends no ``Sec-Fetch-Dest``)."""

from __future__ import annotations

import re

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SITE = "http://fragments.test"
PAGE = """<!doctype html><html><head><title>Fragments</title></head><body><p id=a>start</p><div id=box></div><script>
let n = 0, t0 = Date.now();
setInterval(() => { n++; document.getElementById('a').textContent = 'tick ' + n + ' after ' + (Date.now() - t0) + ' ms'; }, 100);
fetch('/fragment', {headers: ACCEPT}).then((r) => r.text()).then((t) => {
  document.getElementById('box').appendChild(document.createRange().createContextualFragment(t));  // its scripts run
});
</script></body></html>"""
FRAGMENT = b"<p id=f>fragment <span id=t></span></p><script>document.getElementById('t').textContent = 'ran';</script>"


@pytest.mark.parametrize("accept", ["{}", "{Accept: 'text/html, */*; q=0.01'}"], ids=["fetch", "jquery-accept"])
def test_a_fetched_fragment_runs_in_the_page_s_runtime(tmp_path, accept):
    archive = tmp_path / "a.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_env_fragments")
        for rel, body in (("/", PAGE.replace("ACCEPT", accept).encode()), ("/fragment", FRAGMENT)):
            arc.add_exchange(Exchange(session_id=sid, url=SITE + rel, status=200, payload=body,
                                      captured_at="2026-01-01T00:00:00Z",
                                      resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
    env = WebEnv(EnvConfig(archive, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": SITE + "/", "instruction": "read"}})
        first = obs["axtree_text"]
        obs, *_ = env.step("noop(1000)")
        later = obs["axtree_text"]
    finally:
        env.close()
    assert "StaticText 'ran'" in first, first  # the fragment's script ran
    for text in (first, later):
        n, ms = map(int, re.search(r"tick (\d+) after (\d+) ms", text).groups())
        assert ms >= 100 * n - 1, text  # the clock follows the pump: n ticks of 100 ms, about n x 100 ms
    assert later != first


def test_a_page_fetched_then_navigated_to_gets_its_runtime(tmp_path):
    """A page a script fetched (no runtime: a fetch asks with ``*/*``), then navigated to: the
    browser's cache gave the navigation the fetched copy (its capture said ``max-age``), without
    the runtime, so the clock and generator were real (reviewer). Its answers now ``Vary`` on the
    headers that decide."""
    a = """<!doctype html><html><head><title>A</title></head><body><p id=o>A</p><a href="/b">Go to b</a><script>
fetch('/b').then((r) => r.text()).then((t) => { document.getElementById('o').textContent = 'fetched ' + t.length; });
</script></body></html>"""
    b = """<!doctype html><html><head><title>B</title></head><body><p id=o></p><script>
document.getElementById('o').textContent = 'runtime ' + String(self.__wfRuntime) + ' at ' + Date.now();
</script></body></html>"""
    archive = tmp_path / "cache.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_env_fragments")
        for rel, body in (("/a", a), ("/b", b)):
            arc.add_exchange(Exchange(session_id=sid, url=SITE + rel, status=200, payload=body.encode(),
                                      captured_at="2026-01-01T00:00:00Z",
                                      resp_headers=[("Content-Type", "text/html"), ("Cache-Control", "max-age=31536000")]))
    env = WebEnv(EnvConfig(archive, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": SITE + "/a", "instruction": "read"}})
        assert "fetched " in obs["axtree_text"], obs["axtree_text"]
        bid = re.search(r"\[(\w+)\] link 'Go to b'", obs["axtree_text"]).group(1)
        obs, *_ = env.step(f"click('{bid}')")
    finally:
        env.close()
    assert "StaticText 'runtime 1 at 1767225600000'" in obs["axtree_text"], obs["axtree_text"]
