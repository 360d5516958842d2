"""``webfreeze eval export-har``: one HAR 1.2 file per episode of a run, the replay's answers in
order with their match provenance, the same bytes on every export and from every equal run; bad
input is one line and writes nothing."""

from __future__ import annotations

import json
import shutil
import urllib.parse
from pathlib import Path

import jsonschema
import pytest
from cli_runner import run_cli

from webfreeze.demo import ARCHIVE, SUITE
from webfreeze.eval.har import har_text, trajectory_har
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv
from webfreeze.simulator.provenance import LEVELS
from webfreeze.simulator.trajectory import write_trajectory

TASKS = ["shop-001", "scholar-site-info-001"]

# The fields HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/) requires, as a JSON schema.
_NAME_VALUE = {"type": "array", "items": {"type": "object", "required": ["name", "value"],
                                          "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}}
HAR_SCHEMA = {
    "type": "object", "required": ["log"],
    "properties": {"log": {
        "type": "object", "required": ["version", "creator", "entries"],
        "properties": {
            "version": {"const": "1.2"},
            "creator": {"type": "object", "required": ["name", "version"]},
            "pages": {"type": "array", "items": {
                "type": "object", "required": ["startedDateTime", "id", "title", "pageTimings"]}},
            "entries": {"type": "array", "items": {
                "type": "object", "required": ["startedDateTime", "time", "request", "response", "cache", "timings"],
                "properties": {
                    "startedDateTime": {"type": "string",
                                        "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d)$"},
                    "time": {"type": "number", "minimum": 0},
                    "request": {"type": "object", "required": ["method", "url", "httpVersion", "cookies", "headers",
                                                               "queryString", "headersSize", "bodySize"],
                                "properties": {"headers": _NAME_VALUE, "queryString": _NAME_VALUE,
                                               "headersSize": {"type": "integer"}, "bodySize": {"type": "integer"}}},
                    "response": {"type": "object",
                                 "required": ["status", "statusText", "httpVersion", "cookies", "headers", "content",
                                              "redirectURL", "headersSize", "bodySize"],
                                 "properties": {"status": {"type": "integer"}, "headers": _NAME_VALUE,
                                                "content": {"type": "object", "required": ["size", "mimeType"]},
                                                "bodySize": {"type": "integer"}}},
                    "timings": {"type": "object", "required": ["send", "wait", "receive"]},
                }}},
        }}},
}


def bench(out: Path, backend: str, tasks=TASKS) -> Path:
    args = ["bench", "run", str(SUITE), "--agent", "reference", "--backend", backend, "--out", str(out)]
    for t in tasks:
        args += ["--tasks", t]
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("har")
    return {"browser": bench(base / "browser", "browser"), "browser2": bench(base / "browser2", "browser"),
            "text": bench(base / "text", "text")}


def export(run: Path, *extra: str):
    return run_cli("eval", "export-har", str(run), *extra)


def answers_in_order(trajectory: dict) -> list[tuple]:
    """The trajectory's answers, start first, then step by step: what the HAR's entries must be."""
    parts = [(None, trajectory["replay"]["start"])] + [(s["step"], s["replay"]) for s in trajectory["steps"]]
    return [(step, a["method"], a["url"], a["status"], a["level"]) for step, p in parts for a in p["answers"]]


@pytest.mark.parametrize("backend", ["browser", "text"])
def test_each_episode_is_a_valid_har_of_the_answers_in_order(runs, backend):
    run = runs[backend]
    proc = export(run)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(run / "har" / f"{t}.har") for t in sorted(TASKS)]
    for t in TASKS:
        har = json.loads((run / "har" / f"{t}.har").read_text(encoding="utf-8"))
        jsonschema.validate(har, HAR_SCHEMA)
        trajectory = json.loads((run / "trajectories" / f"{t}.json").read_text(encoding="utf-8"))
        entries = har["log"]["entries"]
        got = [(e["_webfreeze"]["step"], e["request"]["method"], e["request"]["url"], e["response"]["status"],
                e["_webfreeze"]["level"]) for e in entries]
        assert got == answers_in_order(trajectory) and got
        # as many entries as the provenance counted requests
        counted = sum(n for by_level in trajectory["replay"]["requests"].values() for n in by_level.values())
        assert len(entries) == counted
        pages = {p["id"] for p in har["log"]["pages"]}
        assert {e["pageref"] for e in entries} == pages and "start" in pages
        first = entries[0]
        assert first["_webfreeze"] == {"step": None, "kind": "document", "main": True, "level": "exact"}
        assert first["request"]["url"] == trajectory["replay"]["start"]["document"]["url"]
        assert first["response"]["content"]["mimeType"].startswith("text/html")
        assert first["response"]["content"]["size"] > 0
        assert all(e["_webfreeze"]["level"] in LEVELS for e in entries)
        assert har["log"]["_webfreeze"]["archive_digest"] == trajectory["env"]["archive_digest"]
    if backend == "browser":  # the browser loads subresources too: stylesheets, scripts, images
        kinds = {e["_webfreeze"]["kind"] for t in TASKS
                 for e in json.loads((run / "har" / f"{t}.har").read_text())["log"]["entries"]}
        assert "subresource" in kinds


def test_exports_are_byte_identical_across_exports_and_equal_runs(runs, tmp_path):
    assert export(runs["browser"], "-o", str(tmp_path / "a")).returncode == 0
    assert export(runs["browser"], "-o", str(tmp_path / "b")).returncode == 0
    assert export(runs["browser2"], "-o", str(tmp_path / "c")).returncode == 0
    for t in TASKS:
        a, b, c = ((tmp_path / d / f"{t}.har").read_bytes() for d in "abc")
        assert a == b == c


def test_a_miss_is_an_entry_with_its_provenance(runs, tmp_path):
    """An episode that asked for a page the archive lacks: the miss is in the HAR, flagged."""
    run = tmp_path / "run"
    shutil.copytree(runs["text"], run)
    env = WebEnv(EnvConfig(ARCHIVE, backend="text"))
    try:
        task = {"id": "scholar-site-info-001", "instruction": "", "start_url": "http://scholar.test/"}
        env.reset(options={"task": task})
        env.step("goto('http://scholar.test/no-such-page')")
        env.step("send_msg_to_user('nothing')")
        write_trajectory(env.trajectory(), run)
    finally:
        env.close()
    assert export(run).returncode == 0
    har = json.loads((run / "har" / "scholar-site-info-001.har").read_text(encoding="utf-8"))
    jsonschema.validate(har, HAR_SCHEMA)
    miss = [e for e in har["log"]["entries"] if e["_webfreeze"]["level"] == "miss"]
    assert [(e["request"]["url"], e["response"]["status"], e["_webfreeze"]["step"]) for e in miss] == \
        [("http://scholar.test/no-such-page", 404, 0)]
    assert har["log"]["_webfreeze"]["replay"]["misses"] == 1


def test_bad_input_is_one_line_and_writes_nothing(runs, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(runs["text"], old)
    shutil.rmtree(old / "har", ignore_errors=True)
    path = old / "trajectories" / "shop-001.json"
    trajectory = json.loads(path.read_text(encoding="utf-8"))
    for s in [trajectory["replay"]["start"], *(s["replay"] for s in trajectory["steps"])]:
        del s["answers"]  # as written before steps recorded their answers
    path.write_text(json.dumps(trajectory), encoding="utf-8")
    (tmp_path / "file").write_text("x")
    (tmp_path / "empty").mkdir()
    cases = [
        ([str(tmp_path / "nowhere")], "no such run directory"),
        ([str(tmp_path / "empty")], "no manifest.json"),
        ([str(old)], "run the task again"),
        ([str(runs["text"]), "-o", str(tmp_path / "file")], "is a file"),
        ([str(runs["text"]), "-o", str(tmp_path / "no" / "such")], "no such directory"),
    ]
    for args, words in cases:
        proc = run_cli("eval", "export-har", *args)
        assert proc.returncode != 0 and words in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (old / "har").exists() and not (tmp_path / "no").exists()


def test_redirects_fuzzy_answers_and_the_frozen_clock():
    """A hand-made trajectory: a fuzzy 302 hop then the page it led to, at a task's snapshot time."""
    hop = {"kind": "document", "level": "fuzzy", "main": True, "method": "GET", "status": 302, "score": 0.7302,
           "url": "http://wiki.test/s?q=a", "capture_url": "http://wiki.test/s?q=b", "mime": "text/html", "size": 0}
    page = {"kind": "document", "level": "exact", "main": True, "method": "GET", "status": 200,
            "url": "http://wiki.test/A", "mime": "text/html", "size": 10}
    post = {"kind": "xhr", "level": "miss", "main": False, "method": "POST", "status": 404, "url": "http://wiki.test/api"}
    start = {"document": None, "requests": {}, "flagged": [], "answers": []}
    step = {"document": {k: v for k, v in hop.items() if k not in ("main", "kind", "mime", "size")},
            "requests": {"document": {"exact": 1, "fuzzy": 1}, "xhr": {"miss": 1}}, "flagged": [], "answers": [hop, page, post]}
    trajectory = {"task_id": "t", "env": {"snapshot_time": "2024-03-05T10:20:30.5+02:00", "backend": "text"},
                  "steps": [{"step": 0, "url_after": "http://wiki.test/A", "replay": step}],
                  "replay": {"start": start, "misses": 1}}
    har = trajectory_har(trajectory, creator_version="9.9")
    jsonschema.validate(har, HAR_SCHEMA)
    entries = har["log"]["entries"]
    assert [e["response"]["redirectURL"] for e in entries] == ["http://wiki.test/A", "", ""]
    assert entries[0]["_webfreeze"] == {"step": 0, "kind": "document", "main": True, "level": "fuzzy", "score": 0.7302,
                                        "capture_url": "http://wiki.test/s?q=b"}
    assert entries[0]["request"]["queryString"] == [{"name": "q", "value": "a"}]
    assert entries[2]["request"]["bodySize"] == -1 and entries[2]["response"]["content"] == {"size": 0,
                                                                                           "mimeType": "x-unknown"}
    assert {e["startedDateTime"] for e in entries} == {"2024-03-05T08:20:30.500Z"}
    assert [p["id"] for p in har["log"]["pages"]] == ["step-0"]  # the start caused nothing: no page
    assert har["log"]["creator"] == {"name": "webfreeze", "version": "9.9"}
    assert har_text(har) == har_text(trajectory_har(trajectory, creator_version="9.9"))


class _LoginSite:
    """A loopback site shaped like I Hate Money's project login: a form posting a project id and a
    private code (and a CSRF token) to /authenticate, answered with a redirect to the project's page."""

    PASSWORD = "s3cret-ski"

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import parse_qs

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code, body=b"", headers=()):
                self.send_response(code)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/":
                    self._send(200, b'<!doctype html><html><head><title>Log in</title></head><body>'
                                    b'<form method="post" action="/authenticate">'
                                    b'<input type="hidden" name="csrf_token" value="IjAxNWM5.axHMKQ">'
                                    b'<label for="id">Project identifier</label><input id="id" name="id">'
                                    b'<label for="pw">Private code</label><input id="pw" name="password" type="password">'
                                    b'<button type="submit">Log in</button></form></body></html>')
                elif self.path == "/skitrip/":
                    self._send(200, b"<!doctype html><html><head><title>Ski trip</title></head>"
                                    b"<body><p>Bob owes 286.90</p></body></html>")
                else:
                    self._send(404, b"not found")

            def do_POST(self):
                form = parse_qs(self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode())
                ok = form.get("password") == [_LoginSite.PASSWORD]
                self._send(302, b"<p>Redirecting...</p>", [("Location", "/skitrip/" if ok else "/")])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_a_form_post_is_exported_with_its_body_and_the_answer_it_got(tmp_path, monkeypatch):
    """A step that posted a form (a login): its entry carries the request the archive holds (headers,
    the form as postData) and the answer the replay gave (the 302 to the project). It was looked up as
    a POST without a body, found nothing, and asked the replay so: the entry said 302 and carried the
    miss page's text (`webfreeze: not in archive: POST ...`) and no postData."""
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("IHM_PASSWORD", _LoginSite.PASSWORD)
    script = tmp_path / "login.py"
    script.write_text('''import os

from webfreeze.recorder.session import record_answer


def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_label("Project identifier").fill("skitrip")
    page.get_by_label("Private code").fill(os.environ["IHM_PASSWORD"])
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/skitrip/")
    record_answer(page, "286.90", locator=page.locator("p"))
''')
    site = _LoginSite()
    try:
        proc = run_cli("record", "session", "http://ihm.test/", "--archive", tmp_path / "ihm.wfz",
                       "--trajectory", tmp_path / "login.json", "--script", script,
                       "--resolve", f"ihm.test=127.0.0.1:{site.port}", timeout=300)
    finally:
        site.close()
    assert proc.returncode == 0, proc.stderr
    suite = tmp_path / "suite"
    proc = run_cli("tasks", "add", suite, "--reference", tmp_path / "login.json", "--archive", tmp_path / "ihm.wfz",
                   "--id", "login", "--answer", "286.90", "--instruction", "How much does Bob owe?")
    assert proc.returncode == 0, proc.stderr
    run = tmp_path / "run"
    proc = run_cli("bench", "run", suite, "--agent", "reference", "--backend", "text", "--out", run)
    assert proc.returncode == 0, proc.stderr
    proc = export(run)
    assert proc.returncode == 0, proc.stderr
    entries = json.loads((run / "har" / "login.har").read_text())["log"]["entries"]
    posts = [e for e in entries if e["request"]["method"] == "POST"]
    assert len(posts) == 1, [(e["request"]["method"], e["request"]["url"]) for e in entries]
    post = posts[0]
    assert post["_webfreeze"]["level"] == "exact"
    assert post["response"]["status"] == 302 and post["response"]["redirectURL"].endswith("/skitrip/")
    assert post["response"]["content"]["text"] == "<p>Redirecting...</p>", post["response"]["content"]
    form = dict(urllib.parse.parse_qsl(post["request"]["postData"]["text"]))
    assert form["id"] == "skitrip" and form["password"] == _LoginSite.PASSWORD, post["request"]
    assert post["request"]["postData"]["mimeType"] == "application/x-www-form-urlencoded"
    assert any(h["name"].lower() == "content-type" for h in post["request"]["headers"]), post["request"]["headers"]
