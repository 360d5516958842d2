"""A script chunk the reference's click imports, missing from the archive, is an incomplete capture,
not a changed site.

VitePress loads its search box as a chunk (`import('/assets/chunks/VPLocalSearchBox.<hash>.js')`)
when the Search button is clicked; a crawl never clicks it. A session that searched, validated on a
crawl of the same, unchanged site, failed at its next step ("no searchbox 'Search' on this page")
and `tasks validate` called it expired, `drift` "changed on the site": only a missed document or
XHR counted as an incomplete capture. A reference that does not reach its ground truth while its
replay missed a request of any kind is now an incomplete capture naming it; a reached one keeps
the old rule (a missed image does not make a reached task incomplete).
"""

from __future__ import annotations

import http.server
import json
import os
import threading

import pytest
from cli_runner import run_cli

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = b"""<!doctype html><html><head><title>Harbor</title></head><body><h1>Harbor</h1>
<button id="open" type="button">Search</button><div id="box"></div>
<script type="module">
document.getElementById('open').addEventListener('click', async () => {
  const {mount} = await import('/assets/chunks/SearchBox.3f9a.js');
  mount(document.getElementById('box'));
});
</script></body></html>"""

CHUNK = b"""export function mount(el) {
  const input = document.createElement('input');
  input.type = 'search';
  input.setAttribute('aria-label', 'Search docs');
  input.addEventListener('input', () => {
    out.textContent = input.value === 'lease' ? 'The default lease_seconds is 300.' : '';
  });
  const out = document.createElement('p');
  out.id = 'hit';
  el.append(input, out);
}
"""

SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_role("button", name="Search").click()
    box = page.get_by_role("searchbox", name="Search docs")
    box.wait_for()
    box.press_sequentially("lease")
    hit = page.get_by_text("lease_seconds is 300")
    hit.wait_for()
    record_answer(page, "300", locator=hit, evidence=["The default lease_seconds is 300."])
'''


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        body, ctype = {"/": (PAGE, "text/html; charset=utf-8"),
                       "/assets/chunks/SearchBox.3f9a.js": (CHUNK, "text/javascript")}.get(
            self.path, (b"not found", "text/plain"))
        self.send_response(200 if body != b"not found" else 404)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    """(the session's archive, its suite, a crawl of the same site that never opened the search)."""
    tmp = tmp_path_factory.mktemp("chunks")
    os.environ.setdefault("WEBFREEZE_HOME", str(tmp / "home"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    resolve = f"docs.test=127.0.0.1:{server.server_port}"
    script = tmp / "search.py"
    script.write_text(SCRIPT)
    try:
        r = run_cli("record", "session", "http://docs.test/", "--archive", tmp / "old.wfz", "--trajectory",
                    tmp / "search.json", "--script", script, "--resolve", resolve, timeout=300)
        assert r.returncode == 0, r.stderr
        r = run_cli("record", "crawl", "http://docs.test/", "--archive", tmp / "crawl.wfz", "--depth", "0",
                    "--resolve", resolve, timeout=300)
        assert r.returncode == 0, r.stderr
    finally:
        server.shutdown()
        server.server_close()
    suite = tmp / "suite"
    r = run_cli("tasks", "add", suite, "--reference", tmp / "search.json", "--answer", "300", "--id", "lease",
                "--instruction", "Search the docs: what is the default lease_seconds?", "--archive", tmp / "old.wfz")
    assert r.returncode == 0, r.stderr
    return tmp / "old.wfz", suite, tmp / "crawl.wfz"


CHUNK_URL = "http://docs.test/assets/chunks/SearchBox.3f9a.js"


def test_validate_calls_a_missed_chunk_an_incomplete_capture(archives):
    old, suite, crawl = archives
    r = run_cli("tasks", "validate", suite, "--backend", "browser", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr  # on the session's own archive: reached, complete
    r = run_cli("tasks", "validate", suite, "--archive", crawl, "--backend", "browser", "--json", timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["expired"] == [], result
    (entry,) = result["incomplete"]
    assert entry["task_id"] == "lease" and entry["reached"] is False
    assert [(m["method"], m["url"], m["kind"]) for m in entry["misses"]] == [("GET", CHUNK_URL, "subresource")]
    assert f"GET {CHUNK_URL} (subresource) was not captured" in entry["reason"], entry


def test_drift_says_incomplete_in_new_not_changed_on_the_site(archives):
    old, suite, crawl = archives
    r = run_cli("drift", old, crawl, "--suite", suite, "--backend", "browser", "--json", timeout=600)
    assert r.returncode == 1, r.stderr[-2000:]
    task = json.loads(r.stdout)["tasks"][0]
    assert task["verdict"] == "incomplete", task
    assert task["why"].startswith("incomplete capture in NEW: reference step ") and CHUNK_URL in task["why"], task
