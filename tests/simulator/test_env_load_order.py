"""Load events of the stylesheets, scripts, images and frames a page adds reach its scripts in the
order the page added them, in the agent environment, whatever order the network finishes them in
(as ``fetch`` answers already do). A bundler loads a lazy chunk's stylesheet with a ``link`` and
resolves the chunk's promise from its ``load`` event: two chunks asked for together resolved in
the order their stylesheets happened to finish, and code that read the clock after each
(JupyterLab's API calls, each with ``?<Date.now()>``) swapped values between episodes. A page's own
error listener on the window (an error tracker's) sees each error once, in its turn. What never
loads (a script from ``innerHTML``, which never runs; a lazy frame out of view; a disabled
stylesheet) holds nothing up: no load is counted as stalled."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

HOST = "http://chunks.test"
# The first of each pair is big (slow to come), the second small: the network finishes the second first.
BIG = b"/*" + b"x" * 6_000_000 + b"*/"
PAGE = b"""<!doctype html><html><head><title>Chunks</title></head><body><h1>Chunks</h1><p id=order>none yet</p><script>
const seen = [], errors = [];
addEventListener('error', (e) => { if (e.target !== window) errors.push(e.target.localName); }, true);
const note = (name) => () => { seen.push(name + '@' + (Date.now() % 100000)); order.textContent = 'loaded ' + seen.join(' '); };
const add = (tag, attrs, name) => {
  const el = document.createElement(tag);
  Object.assign(el, attrs);
  el.addEventListener('load', note(name));
  el.addEventListener('error', note(name + '!'));
  (tag === 'link' ? document.head : document.body).append(el);
};
add('link', {rel: 'stylesheet', href: '/big.css'}, 'css-big');
add('link', {rel: 'stylesheet', href: '/small.css'}, 'css-small');
add('img', {src: '/big.svg'}, 'img-big');
add('img', {src: '/small.svg'}, 'img-small');
add('link', {rel: 'stylesheet', href: '/gone.css'}, 'css-gone');
add('iframe', {src: '/frame'}, 'frame');
const box = document.createElement('div');
box.innerHTML = '<script src="/never.js"><\\/script>';
document.body.append(box);
add('link', {rel: 'stylesheet', href: '/off.css', disabled: true}, 'css-off');
add('iframe', {src: '/lazy', loading: 'lazy', style: 'margin-top: 20000px'}, 'lazy-frame');
add('img', {src: '/small.svg?last'}, 'img-last');
setTimeout(() => { document.getElementById('errs').textContent = 'errors ' + errors.join(' '); }, 0);
</script><p id=errs>no errors yet</p></body></html>"""
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>'
BIG_SVG = SVG.replace(b"<rect", b"<!--" + b"y" * 6_000_000 + b"--><rect")


def _archive(path):
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_load_order")
        for rel, ctype, body, status in (("/", "text/html; charset=utf-8", PAGE, 200),
                                         ("/big.css", "text/css", BIG, 200), ("/small.css", "text/css", b"h1{color:red}", 200),
                                         ("/big.svg", "image/svg+xml", BIG_SVG, 200),
                                         ("/small.svg", "image/svg+xml", SVG, 200),
                                         ("/gone.css", "text/plain", b"gone", 404),
                                         ("/frame", "text/html", b"<!doctype html><p>frame</p>", 200),
                                         ("/small.svg?last", "image/svg+xml", SVG, 200)):
            arc.add_exchange(Exchange(session_id=sid, url=HOST + rel, status=status, payload=body,
                                      captured_at="2024-03-01T12:00:00Z", resp_headers=[("Content-Type", ctype)]))


def test_load_events_come_in_the_order_the_page_added_the_elements(tmp_path):
    path = tmp_path / "chunks.wfz"
    _archive(path)
    env = WebEnv(EnvConfig(path, backend="browser"))
    orders, errors, stalls = [], [], []
    try:
        for _ in range(3):
            obs, _ = env.reset(options={"task": {"id": "t", "start_url": HOST + "/", "instruction": "read"}})
            lines = obs["axtree_text"].splitlines()
            orders.append(next(line.split("StaticText ", 1)[1] for line in lines if "StaticText 'loaded" in line))
            errors.append(next(line.split("StaticText ", 1)[1] for line in lines if "StaticText 'errors" in line))
            stalls.append(env.trajectory()["replay"].get("stalled", 0))
    finally:
        env.close()
    names = [[item.split("@")[0] for item in order.strip("'").split()[1:]] for order in orders]
    assert names[0] == ["css-big", "css-small", "img-big", "img-small", "css-gone!", "frame", "img-last"], orders
    assert orders[0] == orders[1] == orders[2], orders  # (the clock read after each, the same every time)
    assert errors == ["'errors link'"] * 3, errors  # (the 404 stylesheet's error, once)
    assert stalls == [0, 0, 0], stalls
