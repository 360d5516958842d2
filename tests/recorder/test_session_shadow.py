"""`record session` logs what a person does inside web components (open shadow roots), as a Bokeh
walkthrough found it did not: a click there was logged on the component's host (a nameless
``generic``, the browser's retargeted ``event.target``), a choice in a select was not logged at
all (``change`` stays in the shadow root it happens in), and an answer's element got a CSS path
that starts inside the shadow root. Now the element itself is logged, with a path up the flat tree
(through the slot an element is drawn in, from a shadow root to its host), which is how the
observation describes it; the session becomes a task that ``tasks validate`` reaches in the
browser backend without edits."""

from __future__ import annotations

import http.server
import json
import os
import threading

import pytest

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

# A shop's order forms drawn by a web component, twice on the page (the same ids in both shadow
# roots: an id is unique in its own root alone); its light children are drawn in the component's
# slots (the heading; the order button's label, in place of the slot's fallback "Order"). Choosing
# a colour, typing a quantity and pressing the button shows the order.
HOME = b"""<!doctype html><html><head><title>Order</title></head><body>
<order-form><h2 slot="title">Teapots</h2><span slot="go">Place order</span></order-form>
<order-form><h2 slot="title">Kettles</h2><span slot="go">Place order</span></order-form>
<script>
customElements.define('order-form', class extends HTMLElement {
  connectedCallback() {
    const root = this.attachShadow({mode: 'open'});
    root.innerHTML = '<div class="card"><slot name="title"></slot><div><label for="c">Colour</label>' +
      '<select id="c"><option>Red</option><option>Cobalt</option></select></div>' +
      '<div><input aria-label="Quantity" value="1"></div><div><button class="order"><slot name="go">Order</slot>' +
      '</button></div>' +
      '<div><p id="out">Nothing ordered</p></div></div>';
    root.querySelector('.order').addEventListener('click', () => {
      root.getElementById('out').textContent = 'Ordered ' + root.querySelector('input').value + ' ' +
        root.getElementById('c').value + ' ' + this.querySelector('h2').textContent.toLowerCase();
    });
  }
});
</script></body></html>"""

SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    kettles = page.locator("order-form").nth(1)
    kettles.get_by_role("combobox").select_option("Cobalt")
    kettles.get_by_label("Quantity").fill("3")
    kettles.get_by_text("Place order").click()
    shown = page.get_by_text("Ordered 3 Cobalt kettles")
    shown.wait_for()
    record_answer(page, "3 Cobalt", locator=shown, evidence=["Ordered 3 Cobalt kettles"])
'''


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        body, status = (HOME, 200) if self.path == "/" else (b"not found", 404)
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_steps_in_a_shadow_root_name_the_element_and_replay(tmp_path, cli):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_port}/"
    env = dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home"))
    (tmp_path / "order.py").write_text(SCRIPT)
    try:
        r = cli("record", "session", site, "--archive", tmp_path / "order.wfz", "--trajectory",
                tmp_path / "order.json", "--script", tmp_path / "order.py", timeout=300, env=env)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr
    steps = json.loads((tmp_path / "order.json").read_text())["steps"]
    assert [s["action"] for s in steps] == ["navigate", "select", "type", "click", "answer"], steps
    select, typed, click, answer = steps[1:]
    assert select["target"]["tag"] == "select" and select["value"]["label"] == "Cobalt", select
    assert typed["target"]["tag"] == "input" and typed["value"] == "3", typed
    # the button the slotted text is drawn in, named by what it draws (not its slot's fallback)
    assert click["target"]["tag"] == "button" and click["target"]["name"] == "Place order", click
    # paths from the document's root down the flat tree: the host, then what its shadow root holds,
    # past the shadow root's own ids (both roots have a #c and an #out)
    host = "body:nth-of-type(1) > order-form:nth-of-type(2) > div:nth-of-type(1)"
    assert click["target"]["css"] == host + " > div:nth-of-type(3) > button:nth-of-type(1)", click
    assert answer["target"]["css"] == host + " > div:nth-of-type(4) > p:nth-of-type(1)", answer
    assert select["target"]["css"] == host + " > div:nth-of-type(1) > select:nth-of-type(1)", select
    assert select["target"]["name"] == "Colour", select  # (its label, in its own shadow root)
    suite = tmp_path / "suite"
    r = cli("tasks", "add", suite, "--reference", tmp_path / "order.json", "--answer", "3 Cobalt", "--id", "order",
            "--instruction", "Order three Cobalt kettles.", "--archive", tmp_path / "order.wfz", env=env)
    assert r.returncode == 0, r.stderr
    r = cli("tasks", "validate", suite, "--backend", "browser", "--json", "--out", tmp_path / "v", timeout=600,
            env=env)
    assert r.returncode == 0 and json.loads(r.stdout)["expired"] == [], r.stdout + r.stderr
    actions = [s["action"] for s in json.loads((tmp_path / "v" / "trajectories" / "order.json").read_text())["steps"]]
    assert [a.split("(")[0] for a in actions] == ["select_option", "fill", "click", "send_msg_to_user"], actions
