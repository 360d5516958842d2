"""A scripted `record session` of one page served on loopback, made a task and validated: the path a
benchmark author takes, for tests of what a session logs and whether the reference agent replays it."""

from __future__ import annotations

import http.server
import json
import os
import threading
from pathlib import Path


def serve_page(html: str) -> http.server.ThreadingHTTPServer:
    """A loopback server (started) that answers ``/`` with ``html`` and anything else with 404."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = html.encode() if self.path == "/" else b"not found"
            self.send_response(200 if self.path == "/" else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def record_session(cli, tmp_path, html: str, script: str, name: str) -> list[dict]:
    """Record ``script`` (a session script's source) on ``html`` into ``<name>.wfz`` and
    ``<name>.json`` under ``tmp_path``; the trajectory's steps."""
    server = serve_page(html)
    os.environ.setdefault("WEBFREEZE_HOME", str(tmp_path / "home"))
    (tmp_path / f"{name}.py").write_text(script)
    try:
        r = cli("record", "session", f"http://127.0.0.1:{server.server_port}/", "--archive", tmp_path / f"{name}.wfz",
                "--trajectory", tmp_path / f"{name}.json", "--script", tmp_path / f"{name}.py", timeout=300)
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr
    return json.loads((tmp_path / f"{name}.json").read_text())["steps"]


def validate_as_task(cli, tmp_path, name: str, answer: str, instruction: str) -> dict:
    """The session ``name`` (:func:`record_session`) added as a task and validated in the browser
    backend; asserts it is reachable (none expired, none incomplete) and returns the report."""
    suite = tmp_path / "suite"
    r = cli("tasks", "add", suite, "--reference", tmp_path / f"{name}.json", "--answer", answer, "--id", name,
            "--instruction", instruction, "--archive", tmp_path / f"{name}.wfz")
    assert r.returncode == 0, r.stderr
    r = cli("tasks", "validate", suite, "--backend", "browser", "--json", "--out", tmp_path / "v", timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["expired"] == [] and report["incomplete"] == [], report
    return report


def write_suite(suite, archive, name: str, tasks: list[tuple[dict, dict]]) -> Path:
    """A suite folder written by hand: its manifest (naming ``archive``), ``tasks.jsonl`` and each
    task's reference trajectory in ``references/<id>.json`` (``tasks``: (task line, reference))."""
    suite = Path(suite)
    (suite / "references").mkdir(parents=True)
    lines = []
    for task, reference in tasks:
        (suite / "references" / f"{task['id']}.json").write_text(json.dumps(reference))
        lines.append(json.dumps({**task, "ground_truth": {**task["ground_truth"],
                                                          "reference_trajectory": f"references/{task['id']}.json"}}))
    (suite / "manifest.json").write_text(json.dumps({"format": "webfreeze-suite", "version": 1, "name": name,
                                                     "tasks": "tasks.jsonl", "archive": str(archive)}))
    (suite / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    return suite
