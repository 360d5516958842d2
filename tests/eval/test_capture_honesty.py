"""`tasks validate` and `drift` tell an incomplete capture from a changed site (issue 49).

A session on a small notes site (served on loopback) saves a note with a form POST and answers
with the site's release, which its start page shows too. Then:

1. the site re-crawled (a crawl never POSTs): the task's POST is not in the new archive. The
   reference still finds its evidence on the start page, but `tasks validate` and `drift` say
   "incomplete capture", naming the reference step and the URL, not "reachable" or "valid";
2. the session recorded again after the site changed its release: everything is captured, and
   drift says the task expired because it changed on the site.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from urllib.parse import parse_qs, urlsplit

import pytest
from cli_runner import run_cli

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

pytestmark = pytest.mark.slow  # two sessions and a crawl, then validations and drifts: about 90 s
try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.get_by_label("Note").fill("hello")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url("**/saved**")
    release = page.locator("#release").inner_text()
    record_answer(page, release, evidence=["Release " + release])
'''


def make_handler(site: dict):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, status: int, body: str, location: str | None = None):
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            if location:
                self.send_header("Location", location)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            u = urlsplit(self.path)
            release = f'<p>Release <span id="release">{site["release"]}</span></p>'
            if u.path == "/":
                self._send(200, f"<!doctype html><title>Notes</title><h1>Notes</h1>{release}"
                                '<form action="/note" method="post"><label>Note <input name="note"></label>'
                                '<button type="submit">Save</button></form>')
            elif u.path == "/saved":
                note = (parse_qs(u.query).get("note") or [""])[0]
                self._send(200, f"<!doctype html><title>Saved</title><p>Saved note: {note}</p>{release}")
            else:
                self._send(404, "not found")

        def do_POST(self):
            form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
            if self.path == "/note":
                self._send(303, "", location="/saved?note=" + (form.get("note") or [""])[0])
            else:
                self._send(404, "not found")

    return Handler


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    """(site, OLD session archive, suite, NEW crawl without the POST, NEW session after a change)."""
    tmp = tmp_path_factory.mktemp("honesty")
    os.environ.setdefault("WEBFREEZE_HOME", str(tmp / "home"))
    site = {"release": "1.0"}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(site))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    script = tmp / "notes.py"
    script.write_text(SCRIPT)
    try:
        r = run_cli("record", "session", url + "/", "--archive", tmp / "old.wfz", "--trajectory", tmp / "notes.json",
                    "--script", script, timeout=300)
        assert r.returncode == 0, r.stderr
        r = run_cli("record", "crawl", url + "/", "--archive", tmp / "recrawl.wfz", "--depth", "0", "--no-check",
                    timeout=300)
        assert r.returncode == 0, r.stderr
        site["release"] = "2.0"
        r = run_cli("record", "session", url + "/", "--archive", tmp / "changed.wfz", "--trajectory",
                    tmp / "notes-2.json", "--script", script, timeout=300)
        assert r.returncode == 0, r.stderr
    finally:
        server.shutdown()
        server.server_close()
    suite = tmp / "suite"
    r = run_cli("tasks", "add", suite, "--reference", tmp / "notes.json", "--answer", "1.0", "--id", "notes",
                "--instruction", "Save the note 'hello' and say which release the site runs.",
                "--archive", tmp / "old.wfz")
    assert r.returncode == 0, r.stderr
    return url, tmp / "old.wfz", suite, tmp / "recrawl.wfz", tmp / "changed.wfz"


def test_validate_says_incomplete_capture_naming_the_step(archives):
    url, old, suite, recrawl, _ = archives
    r = run_cli("tasks", "validate", suite, "--backend", "text", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr  # on its own archive: complete
    assert "1 of 1 tasks reachable on the archive, 0 expired (text backend)" in r.stderr
    r = run_cli("tasks", "validate", suite, "--archive", recrawl, "--backend", "text", timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("incomplete capture: notes (reference step "), r.stdout
    assert f"POST {url}/note (document) was not captured" in lines[0], lines
    assert "0 of 1 tasks reachable on the archive, 0 expired, 1 incomplete capture (text backend)" in r.stderr
    r = run_cli("tasks", "validate", suite, "--archive", recrawl, "--backend", "text", "--json", timeout=600)
    result = json.loads(r.stdout)
    assert result["expired"] == [] and [e["task_id"] for e in result["incomplete"]] == ["notes"]
    entry = result["incomplete"][0]
    # the evidence also stands on the start page: reached, and still not valid
    assert entry["reached"] is True
    assert [(m["method"], m["url"], m["kind"]) for m in entry["misses"]] == [("POST", f"{url}/note", "document")]
    step = entry["misses"][0]["step"]
    reference = json.loads((suite / "references" / "notes.json").read_text())
    assert reference["steps"][step]["action"] == "click" and reference["steps"][step]["target"]["name"] == "Save"


def test_drift_tells_not_captured_from_changed(archives, tmp_path):
    url, old, suite, recrawl, changed = archives
    r = run_cli("drift", old, recrawl, "--suite", suite, "--backend", "text", "--json", timeout=600)
    assert r.returncode == 1, r.stderr[-2000:]
    task = json.loads(r.stdout)["tasks"][0]
    assert task["verdict"] == "incomplete", task
    assert task["why"].startswith("incomplete capture in NEW: reference step ") and f"POST {url}/note" in task["why"]
    r = run_cli("drift", old, changed, "--suite", suite, "--backend", "text", "--json", timeout=600)
    assert r.returncode == 1, r.stderr[-2000:]
    report = json.loads(r.stdout)
    task = report["tasks"][0]
    assert task["verdict"] == "expired" and task["why"].startswith("changed on the site: "), task
    assert "'Release 1.0'" in task["why"] and task["new"]["misses"] == []
    assert report["suite"]["incomplete"] == 0 and report["suite"]["expired"] == 1
