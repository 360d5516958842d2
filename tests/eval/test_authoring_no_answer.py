"""`tasks add --answer` on a session that logged no answer: the reference ends with that answer.

A walkthrough (Swagger UI in front of json-server) recorded a session whose script never called
`record_answer`, gave the answer to `tasks add` as docs/authoring.md says for such sessions, and
`tasks validate` called the task expired: the reference agent, at the end of a trajectory with no
answer step, answers 'done', which the answer check fails. The copied reference now ends with the
author's answer; a session that logged one is copied as it was. No browser: sessions written by hand.
"""

from __future__ import annotations

import json

from webfreeze.eval.authoring import add_task, recorded_answer


def session(path, answer=None):
    t0 = 1_700_000_000.0
    steps = [{"step": 0, "action": "navigate", "url": "http://ui.test/", "cause": "goto", "time": t0},
             {"step": 1, "action": "click", "target": {"role": "button", "name": "Execute", "css": "button",
                                                       "tag": "button", "text": "Execute"},
              "value": None, "url": "http://ui.test/#op", "time": t0 + 1}]
    if answer is not None:
        steps.append({"step": 2, "action": "answer", "value": {"text": answer}, "url": "http://ui.test/", "time": t0 + 2})
    path.write_text(json.dumps({"kind": "reference_trajectory", "start_url": "http://ui.test/",
                                "archive_session": "s0", "steps": steps}))
    return path


def test_a_session_without_answer_gets_the_authors_answer(tmp_path):
    suite = tmp_path / "suite"
    obj = add_task(suite, session(tmp_path / "t.json"), "Walden", instruction="Add a book", task_id="t",
                   match="normalised")
    ref = json.loads((suite / "references" / "t.json").read_text())
    assert obj["answer_added"] is True
    assert recorded_answer(ref) == "Walden"
    last = ref["steps"][-1]
    assert (last["step"], last["url"]) == (2, "http://ui.test/#op")


def test_a_session_with_an_answer_is_copied_as_it_was(tmp_path):
    suite = tmp_path / "suite"
    src = json.loads(session(tmp_path / "t.json", "Walden").read_text())
    obj = add_task(suite, tmp_path / "t.json", "Walden", instruction="Add a book", task_id="t")
    assert obj["answer_added"] is False
    assert json.loads((suite / "references" / "t.json").read_text()) == src
