"""``replay coverage`` names the method of what missed: a form that POSTs to the URL of its own
page (Node-RED's ``http in`` pair, GET and POST ``/order``) misses only its POST when an agent
sends a body nobody recorded, and "miss document /order" alone reads as if the page itself were
not recorded, which it is."""

from __future__ import annotations

import json

from webfreeze.checks.coverage import coverage, render_text


def _run(tmp_path, flagged: list[dict]):
    run = tmp_path / "run"
    (run / "trajectories").mkdir(parents=True)
    steps = [{"step": i, "action": "click('1')", "replay": {"flagged": [f]}} for i, f in enumerate(flagged)]
    (run / "trajectories" / "t1.json").write_text(json.dumps({"task_id": "t1", "replay": {"start": {}},
                                                              "steps": steps}))
    return run


def test_coverage_keeps_a_post_that_missed_apart_from_the_page_s_get(tmp_path):
    post = {"kind": "document", "level": "miss", "method": "POST", "status": 404, "url": "http://shop.test/order"}
    get = dict(post, method="GET", url="http://shop.test/order?x=1")
    result = coverage([_run(tmp_path, [post, post, get])])
    groups = {(g["method"], g["pattern"]): g["count"] for g in result["groups"]}
    assert groups == {("POST", "/order"): 2, ("GET", "/order?x=*"): 1}
    text = render_text(result)
    assert "miss  document    POST shop.test/order\n" in text
    assert "miss  document    GET  shop.test/order?x=*\n" in text


def test_coverage_says_why_a_socket_missed(tmp_path):
    """A WebSocket's miss carries why (no recording of it, or where its conversation parted): the
    listing keeps it, since recording more does not mend a conversation that parted."""
    parted = {"kind": "xhr", "level": "miss", "method": "GET", "status": 0, "url": "ws://app.test/socket?tab=1",
              "why": "a WebSocket whose conversation parted from the recording: the page sent 'ack'"}
    result = coverage([_run(tmp_path, [parted])])
    (group,) = result["groups"]
    assert group["why"] == [parted["why"]]
    assert f"       why: {parted['why']}" in render_text(result).splitlines()
    plain = dict(parted, url="http://app.test/x")
    del plain["why"]
    assert "why" not in coverage([_run(tmp_path / "b", [plain])])["groups"][0]
