"""``tasks validate --backend text`` on MoinMoin 2's edit page: its visible OK button sits outside
the form and submits it by a script (it clicks the form's hidden submit button). The text backend
runs no scripts, so the replayed click leaves the agent on the edit page, and the validation said
only ``reference step 4: the pages did not show 'Lens cleaning: every Wednesday.'``: the step that
went wrong, the click, was not named. The line (and the JSON) now say where the recorded click led
and where the replayed one stayed. A task whose evidence also stood on the page the click stayed on
(Django Oscar's mini-basket on a product page, its "View basket" a script's button) validated with
nothing said: it now validates with a warning naming the click."""

from __future__ import annotations

import json

from webfreeze.archives import Exchange, new_archive_atomically

T0 = "2026-12-04T02:55:30Z"
HOST = "http://moin.test"
EDIT = b"""<!doctype html><html><head><title>Modify Maintenance</title></head><body>
<button class="moin-button" onclick="document.getElementById('save').click()">OK</button>
<form method="post" action="/+modify/Maintenance"><textarea name="text">Lamp checks.</textarea>
<input type="submit" id="save" value="OK" style="display: none"></form></body></html>"""
SAVED = b"""<!doctype html><html><head><title>Maintenance</title></head><body>
<p>Lamp checks.</p><p>Lens cleaning: every Wednesday.</p></body></html>"""
HTML = [("Content-Type", "text/html; charset=utf-8")]


def _suite(tmp_path, edit=EDIT):
    archive = tmp_path / "moin.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_validate_stalled_click")
        arc.add_exchange(Exchange(session_id=sid, url=f"{HOST}/+modify/Maintenance", status=200, captured_at=T0,
                                  payload=edit, resp_headers=HTML))
        arc.add_exchange(Exchange(session_id=sid, url=f"{HOST}/+modify/Maintenance", method="POST", status=302,
                                  captured_at=T0, payload=b"", req_body=b"text=Lamp+checks.",
                                  req_headers=[("Content-Type", "application/x-www-form-urlencoded")],
                                  resp_headers=[("Location", "/Maintenance")]))
        arc.add_exchange(Exchange(session_id=sid, url=f"{HOST}/Maintenance", status=200, captured_at=T0,
                                  payload=SAVED, resp_headers=HTML))
    suite = tmp_path / "suite"
    (suite / "references").mkdir(parents=True)
    ok = {"role": "button", "name": "OK", "css": "body > button", "tag": "button", "text": "OK"}
    reference = {"version": 1, "kind": "reference_trajectory", "start_url": f"{HOST}/+modify/Maintenance",
                 "viewport": {"width": 1920, "height": 1080}, "recorded_by": "script", "steps": [
                     {"action": "navigate", "cause": "goto", "url": f"{HOST}/+modify/Maintenance", "step": 0},
                     {"action": "click", "target": ok, "value": None, "url": f"{HOST}/+modify/Maintenance", "step": 1},
                     {"action": "submit", "target": {"role": "form", "name": "", "css": "form", "tag": "form"},
                      "value": None, "url": f"{HOST}/+modify/Maintenance", "step": 2},
                     {"action": "navigate", "cause": "formSubmissionPost", "url": f"{HOST}/Maintenance", "step": 3},
                     {"action": "answer", "target": None, "url": f"{HOST}/Maintenance", "step": 4,
                      "value": {"text": "every Wednesday", "evidence": ["Lens cleaning: every Wednesday."]}}]}
    (suite / "references" / "edit.json").write_text(json.dumps(reference))
    (suite / "manifest.json").write_text(json.dumps({"format": "webfreeze-suite", "version": 1, "name": "moin",
                                                     "tasks": "tasks.jsonl", "archive": str(archive)}))
    task = {"id": "edit", "category": "edit", "instruction": "Add the lens cleaning day to Maintenance.",
            "start_url": f"{HOST}/+modify/Maintenance", "snapshot_time": T0,
            "ground_truth": {"answer": {"exact": "every Wednesday"}, "reference_trajectory": "references/edit.json"}}
    (suite / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    return suite


def test_an_expired_text_task_names_the_click_that_led_nowhere(tmp_path, cli):
    suite = _suite(tmp_path)
    r = cli("tasks", "validate", suite, "--backend", "text", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    (expired,) = json.loads(r.stdout)["expired"]
    assert expired["stalled"] == {"step": 1, "action": "click button 'OK'", "recorded": f"{HOST}/Maintenance",
                                  "stayed": f"{HOST}/+modify/Maintenance"}, expired
    r = cli("tasks", "validate", suite, "--backend", "text")
    assert r.returncode == 1
    line = next(x for x in r.stdout.splitlines() if x.startswith("expired: edit"))
    assert "reference step 4: the pages did not show 'Lens cleaning: every Wednesday.'" in line, line
    assert (f"reference step 1 (click button 'OK') went on to {HOST}/Maintenance in the session; replayed, "
            f"it stayed on {HOST}/+modify/Maintenance") in line, line


def test_a_reached_task_whose_click_led_nowhere_is_warned_of(tmp_path, cli):
    preview = EDIT.replace(b"<form", b"<p>Preview: Lens cleaning: every Wednesday.</p><form")
    suite = _suite(tmp_path, preview)
    r = cli("tasks", "validate", suite, "--backend", "text", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads(r.stdout)
    assert result["expired"] == [] and result["incomplete"] == [], result
    assert result["stalled"] == [{"task_id": "edit", "stalled": {
        "step": 1, "action": "click button 'OK'", "recorded": f"{HOST}/Maintenance",
        "stayed": f"{HOST}/+modify/Maintenance"}}], result
    r = cli("tasks", "validate", suite, "--backend", "text")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (f"warning: edit reached its answer, but reference step 1 (click button 'OK') went on to "
            f"{HOST}/Maintenance in the session; replayed, it stayed on {HOST}/+modify/Maintenance") in r.stderr, r.stderr
    assert "1 of 1 tasks reachable" in r.stderr, r.stderr
