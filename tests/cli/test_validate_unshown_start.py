"""``tasks validate --backend text`` on a single-page application (MLflow's UI: a shell whose script
draws every page) called each task expired with "no link 'iris-classifier' on this page" and no
word of why: the start page shows nothing without its scripts, which ``bench run`` says in a warning
and the episode's start note keeps. The validation's line and its JSON say it too."""

from __future__ import annotations

import json

from session_task import write_suite

from webfreeze.archives import Exchange, new_archive_atomically

T0 = "2026-12-03T20:11:57Z"
HOST = "http://runs.test"
SHELL = b"""<!doctype html><html><head><title>MLflow</title></head><body><div id="root"></div>
<script>document.getElementById('root').innerHTML = '<a href="#/experiments/2">iris-classifier</a>';</script>
</body></html>"""
NOTE = (f"{HOST}/ shows nothing without its scripts, and the text backend runs none: "
        "the browser backend shows this page")


def _suite(tmp_path):
    archive = tmp_path / "runs.wfz"
    with new_archive_atomically(archive) as arc:
        sid = arc.new_session("test", source="test_validate_unshown_start")
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/", status=200, captured_at=T0, payload=SHELL,
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")]))
    reference = {"version": 1, "kind": "reference_trajectory", "start_url": HOST + "/",
                 "viewport": {"width": 1920, "height": 1080}, "recorded_by": "script", "steps": [
                     {"action": "navigate", "cause": "goto", "url": HOST + "/", "step": 0, "time": 1.0},
                     {"action": "click", "target": {"role": "link", "name": "iris-classifier", "css": "#root > a",
                                                    "tag": "a", "text": "iris-classifier"},
                      "value": None, "url": HOST + "/", "step": 1, "time": 2.0},
                     {"action": "answer", "target": None, "value": {"text": "0.9839"}, "url": HOST + "/#/experiments/2",
                      "step": 2, "time": 3.0}]}
    task = {"id": "acc", "category": "lookup", "instruction": "What is the run's accuracy?",
            "start_url": HOST + "/", "snapshot_time": T0, "ground_truth": {"answer": {"exact": "0.9839"}}}
    suite = write_suite(tmp_path / "suite", archive, "runs", [(task, reference)])
    return suite


def test_an_expired_text_task_says_its_start_page_shows_nothing_without_scripts(tmp_path, cli):
    suite = _suite(tmp_path)
    r = cli("tasks", "validate", suite, "--backend", "text", "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    expired = json.loads(r.stdout)["expired"]
    assert [e["task_id"] for e in expired] == ["acc"]
    assert expired[0]["start_note"] == NOTE
    r = cli("tasks", "validate", suite, "--backend", "text")
    assert r.returncode == 1
    line = next(x for x in r.stdout.splitlines() if x.startswith("expired: acc"))
    assert "reference step 1: no link 'iris-classifier' on this page" in line
    assert f"the start page {HOST}/ shows nothing without its scripts" in line, line
