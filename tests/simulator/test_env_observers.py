"""Resize and intersection observers' callbacks, run by the environment's pump, come in one order on
every episode: resize observers first (as a frame of the browser delivers them), each kind in the
order the page made its observers. Chromium delivers intersection observers in the order of a hash
set, which changed from one episode to the next: TensorBoard 2.21's two chart cards made their menus
in either order, and the DOM snapshot of the same step differed in two episodes of nine."""

from __future__ import annotations

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

HOST = "http://cards.test"
CARDS = 30
# Thirty cards, each watched by an observer of its own (resize and intersection in turn), each
# observer noting its card once.
PAGE = f"""<!doctype html><html><head><title>Cards</title></head><body><h1>Cards</h1><div id=grid></div>
<p id=order>none yet</p><script>
const seen = [];
for (let i = 0; i < {CARDS}; i++) {{
  const card = document.createElement('div');
  card.textContent = 'card ' + i;
  card.style.height = (20 + (i * 7) % 50) + 'px';
  grid.append(card);
  const Kind = i % 2 ? ResizeObserver : IntersectionObserver;
  const watcher = new Kind(() => {{ seen.push(i); order.textContent = 'noted ' + seen.join(' '); watcher.disconnect(); }});
  watcher.observe(card);
}}
</script></body></html>""".encode()


def test_observers_are_called_back_in_the_order_they_were_made(tmp_path):
    path = tmp_path / "cards.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_observers")
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/", status=200, payload=PAGE,
                                  captured_at="2024-03-01T12:00:00Z",
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
    env = WebEnv(EnvConfig(path, backend="browser"))
    orders = []
    try:
        for _ in range(3):
            obs, _ = env.reset(options={"task": {"id": "t", "start_url": HOST + "/", "instruction": "read"}})
            orders.append(next(line.split("StaticText ", 1)[1] for line in obs["axtree_text"].splitlines()
                               if "StaticText 'noted" in line))
    finally:
        env.close()
    resized, intersected = list(range(1, CARDS, 2)), list(range(0, CARDS, 2))
    assert orders == [repr("noted " + " ".join(map(str, resized + intersected)))] * 3, orders
