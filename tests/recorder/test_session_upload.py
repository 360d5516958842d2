"""`record session` logs a file chosen for a file input as an ``upload`` step, on Roundup's shape.

Roundup's issue form (the classic template) is a ``multipart/form-data`` form with a file input
``@file`` beside the change note: a person attaches a log to an issue. The recorder heard the
file input's ``input`` event and logged a ``type`` step whose value was the browser's
``C:\\fakepath\\error.log``; the reference agent then tried ``fill()`` on the file input ("an input
that cannot be filled (a checkbox, radio or button)"), posted the form without the file, and
``tasks validate`` called the task an incomplete capture whose request body differed, pointing at
``ignorable_params``, which would only have hidden the missing file.

Now the step is an ``upload`` with the files' names, sizes and types, and the reference agent says
at that step that it cannot replay an upload (the recording keeps no file's bytes).
"""

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

PAGE = b"""<!doctype html><html><head><title>Issue 5</title></head><body><h1>Issue 5</h1>
<form method="POST" action="/issue5" enctype="multipart/form-data">
<table><tr><th>Change Note</th><td><textarea name="@note"></textarea></td></tr>
<tr><th>File</th><td><input type="file" name="@file"></td></tr></table>
<input type="submit" value="Submit Changes"></form></body></html>"""

SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.locator("input[name='@file']").set_input_files(FILE)
    page.locator("textarea").fill("Attached the server log.")
    page.get_by_role("button", name="Submit Changes").click()
    page.wait_for_url("**/issue5?ok=1")
    record_answer(page, "error.log", evidence=["error.log"])
'''


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/":
            body = PAGE
        elif self.path == "/issue5?ok=1":
            body = b"<!doctype html><title>Issue 5</title><p>issue 5 files edited ok</p><a href='/file1'>error.log</a>"
        else:
            body = b"not found"
        self.send_response(200 if body != b"not found" else 404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(302)
        self.send_header("Location", "/issue5?ok=1")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_file_chosen_is_an_upload_step_the_reference_agent_names(tmp_path, cli):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site = f"http://127.0.0.1:{server.server_port}/"
    os.environ.setdefault("WEBFREEZE_HOME", str(tmp_path / "home"))
    log = tmp_path / "error.log"
    log.write_text("ERROR login timeout after 30s\n")
    (tmp_path / "attach.py").write_text(f"FILE = {str(log)!r}\n" + SCRIPT)
    try:
        r = cli("record", "session", site, "--archive", tmp_path / "issue.wfz", "--trajectory",
                tmp_path / "attach.json", "--script", tmp_path / "attach.py", timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "attach.json").read_text()
    assert "fakepath" not in text
    steps = [s for s in json.loads(text)["steps"] if s["action"] not in ("scroll", "navigate")]
    assert [s["action"] for s in steps] == ["upload", "type", "click", "submit", "answer"], steps
    [chosen] = steps[0]["value"]["files"]  # (its type is what the browser's MIME table says of .log)
    assert (chosen["name"], chosen["size"], type(chosen["type"])) == ("error.log", 30, str), steps[0]
    assert steps[0]["target"]["tag"] == "input"
    suite = tmp_path / "suite"
    r = cli("tasks", "add", suite, "--reference", tmp_path / "attach.json", "--answer", "error.log", "--id", "attach",
            "--instruction", "Attach error.log to issue 5. What is the file called?", "--archive", tmp_path / "issue.wfz")
    assert r.returncode == 0, r.stderr
    r = cli("tasks", "validate", suite, "--backend", "text", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads(r.stdout)
    [expired] = report["expired"]
    assert report["incomplete"] == [], report
    assert "a file upload (error.log)" in expired["reason"] and "cannot replay" in expired["reason"], expired
