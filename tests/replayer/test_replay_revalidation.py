"""What a recording browser's revalidations leave in an archive must not reach a replayed page
that asks without a validator: a recorded 304 (an empty body) answers only a conditional request;
and a form's anti-forgery token, fresh on every page a site serves, does not make a replayed login
a miss."""

from __future__ import annotations

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.replayer import Replay
from webfreeze.replayer.matching import AGENT_RULES

SITE = "http://reval.test"
CSS = b"body { color: #123456 }"


def _archive(path):
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_replay_revalidation")
        add = lambda **kw: arc.add_exchange(Exchange(captured_at="2026-01-01T00:00:00Z", session_id=sid, **kw))  # noqa: E731
        # a page load, then two more pages whose loads revalidated the stylesheet
        add(url=SITE + "/s.css", status=200, reason="OK",
            resp_headers=[("Content-Type", "text/css"), ("Last-Modified", "Thu, 01 Jan 2026 00:00:00 GMT")],
            payload=CSS)
        for _ in range(2):
            add(url=SITE + "/s.css", status=304, reason="Not Modified",
                req_headers=[("If-Modified-Since", "Thu, 01 Jan 2026 00:00:00 GMT")],
                resp_headers=[("Last-Modified", "Thu, 01 Jan 2026 00:00:00 GMT")], payload=b"")
        # a login form served twice (a crawl, then a session), each with its own token, and the
        # session's post of it
        for token in ("crawltoken", "sessiontoken"):
            add(url=SITE + "/login/", status=200, reason="OK", resp_headers=[("Content-Type", "text/html")],
                payload=f'<form method="post"><input name="csrfmiddlewaretoken" value="{token}"></form>'.encode())
        add(url=SITE + "/login/", method="POST", status=302, reason="Found",
            req_headers=[("Content-Type", "application/x-www-form-urlencoded")],
            req_body=b"csrfmiddlewaretoken=sessiontoken&username=ann&password=pw",
            resp_headers=[("Location", "/admin/")], payload=b"")
    return path


def test_a_recorded_304_answers_only_a_conditional_request(tmp_path):
    with Replay(_archive(tmp_path / "a.wfz")) as replay:
        for _ in range(3):  # every load of a fresh page gets the stylesheet, never an empty 304
            status, _, body = replay.fetch("GET", SITE + "/s.css")
            assert (status, body) == (200, CSS)
        status, _, body = replay.fetch("GET", SITE + "/s.css",
                                       [("If-Modified-Since", "Thu, 01 Jan 2026 00:00:00 GMT")])
        assert status in (200, 304)


def test_a_login_posted_with_another_pages_token_replays_for_agents(tmp_path):
    with Replay(_archive(tmp_path / "a.wfz"), rule_defaults=AGENT_RULES) as replay:
        replay.answers = []
        form = [("Content-Type", "application/x-www-form-urlencoded")]
        status, headers, _ = replay.fetch("POST", SITE + "/login/", form,
                                          b"csrfmiddlewaretoken=crawltoken&username=ann&password=pw")
        assert status == 302 and dict((k.lower(), v) for k, v in headers)["location"] == "/admin/"
        assert replay.answers[-1].level == "fuzzy"  # and the step's provenance says so
        # another user's post is not the recorded one: a miss, not a substitution
        status, _, _ = replay.fetch("POST", SITE + "/login/", form,
                                    b"csrfmiddlewaretoken=crawltoken&username=bob&password=pw")
        assert status == 404
