"""A fetch whose body a page reads as a stream (``response.body.getReader()``, ``pipeThrough``,
``for await``, ``tee``: streamed JSON, React Server Components, chat answers) is read whole before
the page's timers run on, as a body read with ``text()`` or ``json()`` is (replayer/determinism.py
holds the pump for those): the browser backend's settle counts the fetch as in flight until its body
has come, so what the page shows does not depend on how fast the chunks came. Each page here starts
a timer of 0 ms as its fetch answers and reads a body of several megabytes (many chunks); the body
is read before the timer runs, on every reset. (Checked with three busy processes beside it too.)"""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

pytestmark = [pytest.mark.slow]  # (twelve resets of pages reading megabytes: half a minute on 2 cores)
try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark.append(pytest.mark.skip(reason=str(exc)))

SITE = "http://streams.test"
BODY = b"".join(b"line %07d of the streamed answer\n" % i for i in range(120_000))  # 4.2 MB
READS = {
    "reader": """const rd = r.body.getReader(); let n = 0;
      for (;;) { const { done, value } = await rd.read(); if (done) break; n += value.length; } return n;""",
    "decoded": """const rd = r.body.pipeThrough(new TextDecoderStream()).getReader(); let n = 0;
      for (;;) { const { done, value } = await rd.read(); if (done) break; n += value.length; } return n;""",
    "iterated": """let n = 0; for await (const chunk of r.body) { n += chunk.length; } return n;""",
    "teed": """const [a, b] = r.body.tee(); const count = async (s) => { const rd = s.getReader(); let n = 0;
      for (;;) { const { done, value } = await rd.read(); if (done) break; n += value.length; } return n; };
      const [x, y] = await Promise.all([count(a), count(b)]); return x + y;""",
}


def page(read: str) -> bytes:
    return f"""<!doctype html><html><head><title>Stream</title></head><body><p id="log">start</p><script>
const log = (w) => {{ const p = document.getElementById('log'); p.textContent += ' ' + w; }};
async function load() {{
  const r = await fetch('/answer.txt');
  setTimeout(() => log('timer'), 0);
  const n = await (async () => {{ {read} }})();
  log('read ' + n);
}}
load();
</script></body></html>""".encode()


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("streams") / "streams.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_streams")
        files = {"/answer.txt": ("text/plain", BODY), **{f"/{k}": ("text/html", page(v)) for k, v in READS.items()}}
        for rel, (ctype, body) in files.items():
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", ctype)], payload=body, session_id=sid))
    return path


def _log(obs) -> str:
    return next(line.strip() for line in obs["axtree_text"].splitlines() if "start" in line)


@pytest.mark.parametrize("kind", sorted(READS))
def test_a_streamed_body_is_read_before_the_pages_timers_run(archive, kind):
    size = len(BODY) * (2 if kind == "teed" else 1)
    with WebEnv(EnvConfig(archive=archive, backend="browser")) as env:
        seen = set()
        for _ in range(3):
            obs, _ = env.reset(options={"task": {"id": kind, "start_url": f"{SITE}/{kind}", "instruction": "read"}})
            seen.add(_log(obs))
    assert seen == {f"StaticText 'start read {size} timer'"}, seen
