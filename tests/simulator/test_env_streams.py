"""A fetch whose body a page reads as a stream (``response.body.getReader()``, ``pipeThrough``,
``for await``, ``tee``: streamed JSON, React Server Components, chat answers) is read whole before
the page's timers run on, as a body read with ``text()`` or ``json()`` is (replayer/determinism.py
holds the pump for those): the browser backend's settle counts the fetch as in flight until its body
has come, so what the page shows does not depend on how fast the chunks came. Each page here starts
a timer of 0 ms as its fetch answers and reads a body of several megabytes (many chunks); the body
is read before the timer runs, on every reset. (Checked with three busy processes beside it too.)

A page that does asynchronous work of its own between two reads (a ``Blob`` read per chunk here)
left the stream idle with the network done: the timer ran between two chunks on some resets and
after the last on others, and the page counted 3 to 15 chunks. The replay's runtime now reads a
fetched body whole as soon as the page starts reading it (the pump waits for that, as for a load),
then hands it out in chunks of 64 KiB, each read answered at once; a ``Blob``'s reads are waited
for too. A reader that waits on a timer between two chunks goes on without a stall. The stream
it hands out behaves as Chromium's own does for the page's uses of it (a last test runs one page
in both and compares)."""

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
    "awaited": """let n = 0, c = 0; for await (const chunk of r.body) { await new Blob([chunk]).arrayBuffer();
      n += chunk.length; c++; } return n + ' in ' + c;""",
    "paced": """let n = 0, c = 0; for await (const chunk of r.body) { await new Promise((ok) => setTimeout(ok, 5));
      n += chunk.length; c++; } return n + ' in ' + c;""",
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


# What a page may do with a body's stream besides reading it through: the same answers from the
# replay's stream as from Chromium's (the last test).
USES = """async function uses() {
  const out = [];
  const say = (k, v) => out.push(k + '=' + v);
  let r = await fetch('/answer.txt');
  say('same', r.body === r.body);
  say('stream', r.body instanceof ReadableStream);
  say('used', r.bodyUsed);
  say('cloned', (await r.clone().text()).length);
  const rd = r.body.getReader();
  await rd.read();
  say('used', r.bodyUsed);
  say('locked', r.body.locked);
  rd.releaseLock();
  try { await r.text(); say('text', 'read'); } catch (e) { say('text', e.name); }
  r = await fetch('/answer.txt');
  say('untouched', r.body.locked + ' ' + (await r.text()).length);
  r = await fetch('/answer.txt');
  const byob = r.body.getReader({mode: 'byob'});
  let total = 0;
  for (;;) { const { done, value } = await byob.read(new Uint8Array(100000)); if (done) break; total += value.length; }
  say('byob', total);
  r = await fetch('/answer.txt');
  const cut = r.body.getReader();
  await cut.read();
  await cut.cancel();
  say('cancelled', r.bodyUsed);
  r = await fetch('/answer.txt');
  const [a, b] = r.body.tee();
  const text = a.pipeThrough(new TextDecoderStream()).pipeThrough(new TextEncoderStream());
  const both = await Promise.all([new Response(text).arrayBuffer(), new Response(b).arrayBuffer()]);
  say('teed', both.map((x) => x.byteLength).join('/'));
  r = await fetch('/answer.txt');
  r.body.getReader();
  try { await r.text(); say('locked', 'read'); } catch (e) { say('locked', e.name); }
  r = await fetch('/answer.txt');
  await r.text();
  try { r.body.getReader(); say('after', r.body.locked + ' read'); } catch (e) { say('after', r.body.locked + ' ' + e.name); }
  r = await fetch('/answer.txt');
  const seen = r.body;
  const other = r.clone();
  say('clone', (seen === r.body) + ' ' + (await r.text()).length + ' ' + (await other.text()).length);
  const made = new ReadableStream({start(c) { c.enqueue(new Uint8Array([1, 2, 3])); }});
  const own = new Response(made);
  say('own', own.body === made);
  r = await fetch('/empty');
  say('empty', r.status + ' ' + r.body);
  say('made', await new Response(new Response('abc').body).text());
  return out.join(' ');
}
uses().then((t) => { document.getElementById('log').textContent = 'start ' + t; },
            (e) => { document.getElementById('log').textContent = 'start failed ' + e; });"""
USES_PAGE = f"""<!doctype html><html><head><title>Uses</title></head><body><p id="log">start</p><script>
{USES}
</script></body></html>""".encode()
FILES = {"/answer.txt": (200, "text/plain", BODY), "/empty": (204, "text/plain", b""), "/uses": (200, "text/html", USES_PAGE),
         **{f"/{k}": (200, "text/html", page(v)) for k, v in READS.items()}}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("streams") / "streams.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_streams")
        for rel, (status, ctype, body) in FILES.items():
            arc.add_exchange(Exchange(url=SITE + rel, captured_at="2026-01-01T00:00:00Z", status=status,
                                      reason="OK" if status == 200 else "No Content",
                                      resp_headers=[("Content-Type", ctype)], payload=body, session_id=sid))
    return path


def _log(obs) -> str:
    return next(line.strip() for line in obs["axtree_text"].splitlines() if "start" in line)


@pytest.mark.parametrize("kind", sorted(READS))
def test_a_streamed_body_is_read_before_the_pages_timers_run(archive, kind):
    size = len(BODY) * (2 if kind == "teed" else 1)
    if kind in ("awaited", "paced"):  # (in chunks of 64 KiB, the last one shorter)
        size = f"{size} in {-(-len(BODY) // 65536)}"
    with WebEnv(EnvConfig(archive=archive, backend="browser")) as env:
        seen = set()
        for _ in range(3):
            obs, _ = env.reset(options={"task": {"id": kind, "start_url": f"{SITE}/{kind}", "instruction": "read"}})
            seen.add(_log(obs))
            # the pump held while the body came, not while the page read it: no stall, even for a
            # reader that waits on a timer between two chunks
            assert "stalled" not in env.trajectory()["replay"], env.trajectory()["replay"]
    # (the paced reader's own timer comes due first: its timer of 0 ms runs at the first of them)
    want = f"StaticText 'start timer read {size}'" if kind == "paced" else f"StaticText 'start read {size} timer'"
    assert seen == {want}, seen


def test_the_replays_stream_answers_a_pages_uses_as_chromiums_does(archive):
    from playwright.sync_api import sync_playwright

    from webfreeze.simulator.browser import launch_chromium

    with WebEnv(EnvConfig(archive=archive, backend="browser")) as env:
        obs, info = env.reset(options={"task": {"id": "uses", "start_url": f"{SITE}/uses", "instruction": "read"}})
        replayed = _log(obs)
    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            pg = browser.new_page()

            def answer(route):
                status, ctype, body = FILES[route.request.url.removeprefix(SITE)]
                route.fulfill(status=status, content_type=ctype, body=body)
            pg.route(f"{SITE}/**", answer)
            pg.goto(f"{SITE}/uses")
            pg.wait_for_function("document.getElementById('log').textContent !== 'start'")
            native = pg.text_content("#log")
        finally:
            browser.close()
    assert "failed" not in native, native
    assert replayed == f"StaticText '{native}'"
