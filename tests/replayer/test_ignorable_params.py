"""A parameter that ``replay_rules``' ``ignorable_params`` lists may differ, in the score too.

Gradio's queue, as a page asks for it: ``POST /gradio_api/queue/join`` with a JSON body carrying
the inputs and a ``session_hash`` the page draws at random, then ``GET
/gradio_api/queue/data?session_hash=...``, the answer streamed as server-sent events. A replayed
page draws another hash (seeded, not the recording's): with ``session_hash`` made ignorable, the
POST (whose other fields are equal) was answered, but the GET, whose only parameter is the hash,
scored the two random strings' likeness (~0.1), under the threshold, and missed: the prediction
never came and the task was an "incomplete capture".
"""

from __future__ import annotations

import json

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.replayer.matching import AGENT_RULES
from webfreeze.replayer.replay import Replay

T0 = "2026-12-03T20:00:00Z"
HOST = "http://gradio.test"
EVENTS = (b'data: {"msg":"process_completed","output":{"data":["Hello Ada! Mars orbits at 1.52 AU."]}}\n\n'
          b'data: {"msg":"close_stream","event_id":null}\n\n')
XHR = [("Accept", "text/event-stream"), ("Content-Type", "application/json"), ("Sec-Fetch-Dest", "empty")]


def build(path):
    join = json.dumps({"data": ["Ada", "Mars"], "fn_index": 0, "trigger_id": 6, "session_hash": "v2kvzz5c37"})
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_ignorable_params")
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/gradio_api/queue/join?", method="POST",
                                  req_headers=[("Content-Type", "application/json")], req_body=join.encode(),
                                  status=200, resp_headers=[("Content-Type", "application/json")],
                                  payload=b'{"event_id":"5a44"}', captured_at=T0))
        arc.add_exchange(Exchange(session_id=sid, url=HOST + "/gradio_api/queue/data?session_hash=v2kvzz5c37",
                                  req_headers=XHR, status=200,
                                  resp_headers=[("Content-Type", "text/event-stream; charset=utf-8")],
                                  payload=EVENTS, captured_at=T0))
    return path


def test_an_ignorable_parameter_does_not_lower_the_score(tmp_path):
    archive = build(tmp_path / "gradio.wfz")
    rules = {"ignorable_params": ["session_hash"]}
    with Replay(archive, rule_defaults=AGENT_RULES, rules=rules) as replay:
        join = json.dumps({"data": ["Ada", "Mars"], "fn_index": 0, "trigger_id": 6, "session_hash": "q81mzt0k2e"})
        status, headers, body = replay.fetch("POST", HOST + "/gradio_api/queue/join?",
                                             [("Content-Type", "application/json")], join.encode())
        assert status == 200 and body == b'{"event_id":"5a44"}', (status, body)
        status, headers, body = replay.fetch("GET", HOST + "/gradio_api/queue/data?session_hash=q81mzt0k2e", XHR)
        assert status == 200 and body == EVENTS, (status, headers, body)
        assert dict(headers)["X-Webfreeze-Match"] == "fuzzy" and float(dict(headers)["X-Webfreeze-Score"]) == 1.0
        # other inputs are still another request: a miss, not the recorded prediction
        join = json.dumps({"data": ["Ada", "Venus"], "fn_index": 0, "trigger_id": 6, "session_hash": "q81mzt0k2e"})
        status, _, _ = replay.fetch("POST", HOST + "/gradio_api/queue/join?",
                                    [("Content-Type", "application/json")], join.encode())
        assert status == 404
    # without the rule, the hash is meaningful: the agent's replay misses it, honestly
    with Replay(archive, rule_defaults=AGENT_RULES) as replay:
        status, _, _ = replay.fetch("GET", HOST + "/gradio_api/queue/data?session_hash=q81mzt0k2e", XHR)
        assert status == 404
