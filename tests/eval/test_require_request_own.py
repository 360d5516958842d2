"""A ``requests`` check compares method and URL. An application that sends every call to one URL by
POST (Transmission's JSON-RPC: its page polls ``POST /transmission/rpc`` from the moment it loads)
made ``--require-request 'POST .../rpc'`` a check that held for an agent that did nothing: the
page's own polls answered it, and such an agent scored above the reference. ``tasks add`` refuses a
required request its session sent before the person's first action (and does not offer one in its
note), saying why; one sent only after it is required as before."""

from __future__ import annotations

import json

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.cli.tasks import _session_sent, _session_sent_before
from webfreeze.eval.authoring import TaskError, add_task, first_action_time

SITE = "http://rpc.test"
T0 = 1767225600.0  # 2026-01-01T00:00:00Z


def _iso(t: float) -> str:
    return "2026-01-01T00:%02d:%06.3fZ" % divmod(t - T0, 60)


@pytest.fixture()
def recorded(tmp_path):
    """A session: the page opens and polls POST /rpc; the person clicks Start at T0 + 10 (POST /rpc
    once more, with another body) and saves a note (POST /note) at T0 + 12."""
    path = tmp_path / "rpc.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_require_request_own")
        arc.add_exchange(Exchange(url=SITE + "/", captured_at=_iso(T0 + 1), status=200, reason="OK",
                                  resp_headers=[("Content-Type", "text/html")], payload=b"<p>list</p>", session_id=sid))
        for t, body in ((T0 + 2, b'{"method":"torrent-get"}'), (T0 + 10.5, b'{"method":"torrent-start"}'),
                        (T0 + 11, b'{"method":"torrent-get"}')):
            arc.add_exchange(Exchange(url=SITE + "/rpc", method="POST", captured_at=_iso(t), status=200, reason="OK",
                                      resp_headers=[("Content-Type", "application/json")], payload=b"{}",
                                      req_headers=[("Content-Type", "application/json")], req_body=body, session_id=sid))
        arc.add_exchange(Exchange(url=SITE + "/note", method="POST", captured_at=_iso(T0 + 12.5), status=200,
                                  reason="OK", resp_headers=[("Content-Type", "text/plain")], payload=b"ok",
                                  req_headers=[("Content-Type", "application/x-www-form-urlencoded")],
                                  req_body=b"text=hi", session_id=sid))
    steps = [{"action": "navigate", "cause": "goto", "url": SITE + "/", "time": T0 + 1},
             {"action": "scroll", "value": {"x": 0, "y": 10, "by": "user"}, "url": SITE + "/", "time": T0 + 5},
             {"action": "click", "target": {"role": "button", "name": "Start", "css": "#start", "tag": "button",
                                            "text": "Start"}, "url": SITE + "/", "time": T0 + 10},
             {"action": "click", "target": {"role": "button", "name": "Save", "css": "#save", "tag": "button",
                                            "text": "Save"}, "url": SITE + "/", "time": T0 + 12},
             {"action": "answer", "value": {"text": "Seeding", "evidence": []}, "url": SITE + "/", "time": T0 + 13}]
    for i, s in enumerate(steps):
        s["step"] = i
    reference = tmp_path / "start.json"
    reference.write_text(json.dumps({"version": 1, "kind": "reference_trajectory", "start_url": SITE + "/",
                                     "archive_session": sid, "steps": steps}))
    return {"archive": path, "sid": sid, "reference": reference, "tmp": tmp_path}


def _add(recorded, suite: str, requests: list[str]) -> dict:
    return add_task(recorded["tmp"] / suite, recorded["reference"], None, archive=recorded["archive"],
                    instruction="Start the torrent.", requests=requests, session_sent=_session_sent,
                    sent_before=_session_sent_before)


def test_a_request_the_page_sends_on_its_own_cannot_be_required(recorded):
    reference = json.loads(recorded["reference"].read_text())
    assert first_action_time(reference) == T0 + 10  # (the click, not the page opened nor the scroll)
    assert _session_sent_before(recorded["archive"], recorded["sid"], T0 + 10) == [f"POST {SITE}/rpc"]
    with pytest.raises(TaskError, match=r"--require-request 'POST http://rpc.test/rpc': its session sent that "
                                        r"request before its first action \(the page sends it on its own\)"):
        _add(recorded, "s1", [f"POST {SITE}/rpc"])
    assert not (recorded["tmp"] / "s1").exists()
    # a request sent only after the person acted is required as before
    task = _add(recorded, "s2", [f"POST {SITE}/note"])
    assert task["ground_truth"]["requests"] == [{"method": "POST", "url": f"{SITE}/note"}]
    # unrequired: the note offers the note's POST, not the page's own polling
    task = _add(recorded, "s3", [])
    assert task["unrequired"] == [f"POST {SITE}/note"]


def test_tasks_validate_warns_of_a_check_the_page_s_own_requests_hold(recorded, cli):
    """A suite written before the refusal (add_task without ``sent_before``): `tasks validate` warns
    that the check holds for an agent that does nothing, and an expired line names the check that
    failed (it used to say only ``ended by answer; answer '...'``)."""
    suite = recorded["tmp"] / "old-suite"
    add_task(suite, recorded["reference"], None, archive=recorded["archive"], instruction="Start the torrent.",
             requests=[f"POST {SITE}/rpc", f"POST {SITE}/note"], session_sent=_session_sent)
    r = cli("tasks", "validate", suite, "--backend", "text", "--json")
    assert json.loads(r.stdout)["own_requests"] == [{"task_id": "start", "request": f"POST {SITE}/rpc"}], r.stdout
    r = cli("tasks", "validate", suite, "--backend", "text")
    assert (f"warning: start's requests check POST {SITE}/rpc holds for an agent that does nothing: its session "
            "sent that request before its first action") in r.stderr, r.stderr
    assert "requests check POST http://rpc.test/note" not in r.stderr


def test_an_expired_line_names_the_request_never_sent(recorded, cli):
    """The reference reached the answer but never sent the required request: the expired line says
    which (Transmission's speed-limit task read only ``ended by answer; answer '250'``)."""
    reference = json.loads(recorded["reference"].read_text())
    reference["steps"] = [s for s in reference["steps"] if s["action"] in ("navigate", "answer")]
    path = recorded["tmp"] / "answer-only.json"
    path.write_text(json.dumps(reference))
    suite = recorded["tmp"] / "said-suite"
    add_task(suite, path, None, archive=recorded["archive"], instruction="Save a note.",
             requests=[f"POST {SITE}/note"], session_sent=_session_sent, sent_before=_session_sent_before)
    r = cli("tasks", "validate", suite, "--backend", "text")
    assert r.returncode == 1
    assert r.stdout.splitlines() == [f"expired: answer-only (ended by answer; answer 'Seeding'; requests: POST "
                                     f"{SITE}/note never sent)"], r.stdout
