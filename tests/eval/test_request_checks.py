"""The ``requests`` ground truth on its own (eval/request_checks.py): which answers hold a check."""

from __future__ import annotations

from webfreeze.eval.request_checks import evaluate_requests, same_request_url

CHECK = [{"method": "POST", "url": "http://forum.test/topic/3/reply?lang=en"}]


def _trajectory(*answers) -> dict:
    return {"replay": {"start": {"answers": []}}, "steps": [{"replay": {"answers": list(answers)}}]}


def _answer(url: str, level: str = "exact", method: str = "POST") -> dict:
    return {"kind": "document", "method": method, "url": url, "level": level, "status": 302, "main": True}


def test_a_check_reads_urls_as_the_canonical_level_does():
    # (review: a canonical answer, another scheme and a cache buster, read as "never sent")
    assert same_request_url("https://FORUM.test:443/topic/3/reply?_=1709294400123&lang=en#x",
                            "http://forum.test/topic/3/reply?lang=en")
    assert not same_request_url("http://forum.test/topic/3/reply?lang=de", "http://forum.test/topic/3/reply?lang=en")
    assert not same_request_url("http://forum.test/topic/4/reply?lang=en", "http://forum.test/topic/3/reply?lang=en")
    got = evaluate_requests(CHECK, _trajectory(_answer("https://forum.test/topic/3/reply?lang=en&_=1", "canonical")))
    assert got["success"] and got["checks"][0]["detail"] == "sent and answered (canonical, status 302)"


def test_only_answers_as_recorded_hold():
    for level, held in (("exact", True), ("model", True), ("fuzzy", False), ("miss", False), ("live", False)):
        got = evaluate_requests(CHECK, _trajectory(_answer("http://forum.test/topic/3/reply?lang=en", level)))
        assert got["success"] is held, level
        if not held:  # (--patch-from-live sends a POST the archive lacks to the site as it is: not the person's)
            assert got["checks"][0]["detail"] == f"sent, but not answered as recorded ({level})"
    got = evaluate_requests(CHECK, _trajectory(_answer("http://forum.test/topic/3/reply?lang=en", method="GET")))
    assert got["checks"][0]["detail"] == "never sent" and got["score"] == 0.0
    assert evaluate_requests(CHECK, {"steps": []})["checks"][0]["detail"] == "the trajectory records no replay provenance"
