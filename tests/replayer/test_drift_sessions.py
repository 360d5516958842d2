"""`drift --suite` replays a task on the newer snapshot among the captures of the session that
recorded it again there, not at the older snapshot's time.

A task's replay starts among the captures nearest its ``snapshot_time`` (its session's start). On a
newer snapshot that is a crawl (logged out) followed by the task's session recorded again (the same
script), the old time put the task among the snapshot's earliest captures, the crawl's: FlaskBB's
login task met the logged-out home page where its session had the logged-in one, and expired,
though nothing on the site had changed.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest
from cli_runner import run_cli

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

HOST = "forum.test"

SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_role("link", name="Log in").click()
    page.wait_for_url("**/login")
    page.get_by_label("User").fill("ada")
    page.get_by_label("Password").fill("s3cret-enough")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("http://forum.test/")
    page.get_by_role("link", name="Inbox").click()
    page.wait_for_url("**/inbox")
    record_answer(page, "3 unread", evidence=["You have 3 unread messages."])
'''


class Forum(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: str = "", headers=()) -> None:
        data = f"<!doctype html><html><head><title>Forum</title></head><body>{body}</body></html>".encode()
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        ada = "user=ada" in (self.headers.get("Cookie") or "")
        if self.path == "/":
            self._send(200, "<h1>Forum</h1><p>Hello ada.</p><a href='/inbox'>Inbox</a>" if ada
                       else "<h1>Forum</h1><p>Hello visitor.</p><a href='/login'>Log in</a>")
        elif self.path == "/login":
            self._send(200, "<form method=post action=/login><label>User <input name=user></label>"
                            "<label>Password <input type=password name=password></label>"
                            "<button>Log in</button></form>")
        elif self.path == "/inbox":
            self._send(200, "<p>You have 3 unread messages.</p>") if ada else self._send(303, "", [("Location", "/login")])
        else:
            self._send(404, "not found")

    def do_POST(self):
        form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
        ok = form.get("user") == ["ada"]
        self._send(303, "", [("Location", "/" if ok else "/login")] + ([("Set-Cookie", "user=ada; Path=/")] if ok else []))


@pytest.mark.slow  # three recordings and two replays of the suite
def test_a_task_recorded_again_is_replayed_among_its_new_sessions_captures(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Forum)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    resolve = ["--resolve", f"{HOST}=127.0.0.1:{server.server_port}"]
    (tmp_path / "login.py").write_text(SCRIPT)
    try:
        def session(archive, out):
            r = run_cli("record", "session", f"http://{HOST}/", "--archive", archive, "--trajectory", out,
                        "--script", tmp_path / "login.py", "--instruction", "How many unread messages has ada?",
                        *resolve, timeout=300)
            assert r.returncode == 0, r.stderr

        session(tmp_path / "old.wfz", tmp_path / "old-ref.json")
        # the newer snapshot: a crawl first (a visitor's pages), then the same session again
        r = run_cli("record", "crawl", f"http://{HOST}/", "--archive", tmp_path / "new.wfz", "--depth", "1",
                    *resolve, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        session(tmp_path / "new.wfz", tmp_path / "new-ref.json")
    finally:
        server.shutdown()
        server.server_close()
    r = run_cli("tasks", "add", tmp_path / "suite", "--reference", tmp_path / "old-ref.json", "--answer", "3 unread",
                "--id", "inbox", "--archive", tmp_path / "old.wfz")
    assert r.returncode == 0, r.stderr
    r = run_cli("drift", tmp_path / "old.wfz", tmp_path / "new.wfz", "--suite", tmp_path / "suite",
                "--backend", "text", "--json", timeout=600)
    report = json.loads(r.stdout)
    (task,) = report["tasks"]
    assert task["verdict"] == "valid", task
    assert r.returncode == 0, r.stderr
