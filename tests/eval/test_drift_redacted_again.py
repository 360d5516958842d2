"""A login task recorded again into a newer snapshot, both recordings redacted apart (Roundup): each
redaction draws its own key, so the same password is one placeholder in the task's reference and
another in the new session. `drift` did not find the new session by its steps (the typed password
differed), and where it did (by the instruction) it replayed the old reference, whose placeholder
the new archive never saw: the login missed. `tasks validate --archive NEW` did not look for the new
session at all and replayed at the old session's time, among the new snapshot's crawl (logged in,
no login form): "expired". Both now find the session with placeholders set aside, replay at its
time, and type its placeholder."""

from __future__ import annotations

import json

from session_task import write_suite

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.checks.drift import placeholders_moved, recorded_again, retimed_suite

SITE = "http://tracker.test"
OLD_PW, NEW_PW = "wfredacted-4ecc01f724836b07", "wfredacted-157d7afec6a6f71d"
FORM = (b"<!doctype html><title>Tracker</title><form action=\"/login\" method=\"post\">"
        b"<label>Password <input name=\"password\" type=\"password\"></label><button type=\"submit\">Log in</button></form>")
HOME = b"<!doctype html><title>Home</title><p>Hello, alice</p>"


def _reference(sid: str, t: float, password: str) -> dict:
    steps = [{"action": "navigate", "cause": "goto", "url": SITE + "/", "time": t},
             {"action": "type", "target": {"role": "textbox", "name": "Password", "css": "input[name=password]",
                                           "tag": "input", "text": "", "type": "password"},
              "value": password, "url": SITE + "/", "time": t + 1},
             {"action": "click", "target": {"role": "button", "name": "Log in", "css": "button", "tag": "button",
                                            "text": "Log in"}, "url": SITE + "/", "time": t + 2},
             {"action": "navigate", "cause": "formSubmissionPost", "url": SITE + "/home", "time": t + 2.5},
             {"action": "answer", "value": {"text": "alice", "evidence": ["Hello, alice"]}, "url": SITE + "/home",
              "time": t + 3}]
    for i, s in enumerate(steps):
        s["step"] = i
    return {"version": 1, "kind": "reference_trajectory", "start_url": SITE + "/", "archive_session": sid,
            "instruction": "Log in. Whom does the tracker greet?", "steps": steps}


def _iso(t: float) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _new_snapshot(path, t_crawl: float, t_session: float) -> dict:
    """The newer snapshot: its crawl (logged in: the start page is home, no form) and the task's
    session recorded again, redacted with another key."""
    with new_archive_atomically(path) as arc:
        crawl = arc.new_session("crawl", source="test")
        arc.add_exchange(Exchange(url=SITE + "/", captured_at=_iso(t_crawl), status=200, payload=HOME,
                                  resp_headers=[("Content-Type", "text/html")], session_id=crawl))
        sid = arc.new_session("session", source="test")
        arc.add_exchange(Exchange(url=SITE + "/", captured_at=_iso(t_session), status=200, payload=FORM,
                                  resp_headers=[("Content-Type", "text/html")], session_id=sid))
        arc.add_exchange(Exchange(url=SITE + "/login", method="POST", captured_at=_iso(t_session + 2), status=303,
                                  payload=b"", resp_headers=[("Location", SITE + "/home")], session_id=sid,
                                  req_headers=[("Content-Type", "application/x-www-form-urlencoded")],
                                  req_body=f"password={NEW_PW}".encode()))
        arc.add_exchange(Exchange(url=SITE + "/home", captured_at=_iso(t_session + 2.5), status=200, payload=HOME,
                                  resp_headers=[("Content-Type", "text/html")], session_id=sid))
        again = _reference(sid, t_session, NEW_PW)
        arc.put_document(f"trajectories/{sid}.json", again)
    return again


def test_the_task_recorded_again_is_found_and_types_the_new_placeholder(tmp_path, cli):
    t_old, t_crawl, t_session = 1767225600.0, 1767225660.0, 1767232800.0  # (the crawl nearest the old time)
    reference = _reference("old-session-id", t_old, OLD_PW)
    again = _new_snapshot(tmp_path / "new.wfz", t_crawl, t_session)
    assert recorded_again(tmp_path / "new.wfz", reference)["archive_session"] == again["archive_session"]
    assert placeholders_moved(reference, again) == {OLD_PW: NEW_PW}
    task = {"id": "login", "category": "forms", "instruction": reference["instruction"], "start_url": SITE + "/",
            "snapshot_time": _iso(t_old), "ground_truth": {"answer": {"exact": "alice"}}}
    suite = write_suite(tmp_path / "suite", tmp_path / "old.wfz", "tracker", [(task, reference)])
    copy = retimed_suite(suite, tmp_path / "new.wfz", tmp_path / "work")
    line = json.loads((copy / "tasks.jsonl").read_text())
    assert line["snapshot_time"].startswith(_iso(t_session)[:19]) and NEW_PW in json.dumps(line) and OLD_PW not in json.dumps(line)
    r = cli("tasks", "validate", suite, "--archive", tmp_path / "new.wfz", "--backend", "text", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["expired"] == [] and json.loads(r.stdout)["incomplete"] == []
