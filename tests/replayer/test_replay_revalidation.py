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


def _spa_archive(path):
    """A hash-routed application as a crawl records it (MLflow's UI): the shell document loaded once
    (200), then revalidated by each later page's load (304), the pages told apart only by their
    fragments, each page's script printing "created N seconds ago" from the clock."""
    shell = b"<!DOCTYPE html><html><head><title>MLflow</title></head><body><div id=root></div></body></html>"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_replay_revalidation")
        arc.add_exchange(Exchange(url=SITE + "/", captured_at="2026-12-03T20:08:14Z", session_id=sid, status=200,
                                  reason="OK", payload=shell,
                                  resp_headers=[("Content-Type", "text/html"), ("ETag", '"v1"')]))
        for at in ("2026-12-03T20:08:41Z", "2026-12-03T20:09:15Z"):
            arc.add_exchange(Exchange(url=SITE + "/", captured_at=at, session_id=sid, status=304,
                                      reason="Not Modified", req_headers=[("If-None-Match", '"v1"')],
                                      resp_headers=[("ETag", '"v1"')], payload=b""))
    return path


def _clock_ms(body: bytes) -> int:
    import re
    return int(re.search(rb'\(\{"t":(\d+),"s":', body).group(1))


def test_a_document_answered_for_a_revalidation_keeps_the_revalidations_clock(tmp_path):
    """The page a crawl loaded at 20:08:41 got a 304 and showed the body of 20:08:14 from the
    browser's cache; its scripts read 20:08:41 from the clock. A replay of that page answers the
    200 (the request has no validator) and starts the page's clock when the page was loaded, not
    when the body was first fetched: "56 seconds ago" stays 56, not 28."""
    from webfreeze.archives.timeutil import parse_time

    ms = lambda at: int(parse_time(at).timestamp() * 1000)  # noqa: E731
    with Replay(_spa_archive(tmp_path / "spa.wfz")) as replay:
        for at in ("2026-12-03T20:08:14Z", "2026-12-03T20:08:41Z", "2026-12-03T20:09:15Z"):
            replay.reset(0, when=at)
            status, _, body = replay.fetch("GET", SITE + "/")
            assert status == 200 and b'id=root' in body
            assert _clock_ms(body) == ms(at), at
        # a request with the validator is answered by the recorded 304, which has no page to run
        replay.reset(0, when="2026-12-03T20:08:41Z")
        status, _, body = replay.fetch("GET", SITE + "/", [("If-None-Match", '"v1"')])
        assert status == 304 and body == b""


def test_a_live_runs_page_clock_comes_from_the_episode_it_is_served_from(tmp_path):
    """A live run's archive holds each task's episode as a session of its own, and the replay
    serves the task's page from its episode's captures; the page's clock was taken from the
    capture nearest the replay's time among all sessions: another episode's revalidation (a 304)
    started the page's clock at that episode's load, not at the one whose body it was given."""
    from webfreeze.archives.timeutil import parse_time
    from webfreeze.replayer.upstream import EPISODES_DOCUMENT

    path = tmp_path / "live.wfz"
    page = b"<!doctype html><html><head><title>p</title></head><body>p</body></html>"
    with new_archive_atomically(path) as arc:
        sessions = {}
        for name, (full, revalidated) in {"a": ("00:00", "00:10"), "b": ("00:20", "00:30")}.items():
            sid = sessions[name] = arc.new_session("live", source=f"episode {name}")
            arc.add_exchange(Exchange(url=SITE + "/page", captured_at=f"2026-01-01T{full}:00Z", session_id=sid,
                                      status=200, reason="OK", resp_headers=[("Content-Type", "text/html"),
                                                                              ("ETag", '"p"')], payload=page))
            arc.add_exchange(Exchange(url=SITE + "/page", captured_at=f"2026-01-01T{revalidated}:00Z",
                                      session_id=sid, status=304, reason="Not Modified",
                                      req_headers=[("If-None-Match", '"p"')], resp_headers=[("ETag", '"p"')],
                                      payload=b""))
        # an episode that loaded the page from its browser's cache alone: a 304, its body elsewhere
        sid = sessions["c"] = arc.new_session("live", source="episode c")
        arc.add_exchange(Exchange(url=SITE + "/page", captured_at="2026-01-01T00:40:00Z", session_id=sid,
                                  status=304, reason="Not Modified", req_headers=[("If-None-Match", '"p"')],
                                  resp_headers=[("ETag", '"p"')], payload=b""))
        arc.put_document(EPISODES_DOCUMENT, {"episodes": {"t1": [sessions["b"]], "t2": [sessions["c"]]}})
    def clock(at: str) -> bytes:
        return f'"t":{int(parse_time(at).timestamp() * 1000)},'.encode()

    with Replay(path) as replay:
        replay.reset(0, when="2026-01-01T00:11:00Z")  # nearest of all: episode a's revalidation
        replay.prefer_episode("t1")
        status, _, body = replay.fetch("GET", SITE + "/page")
        assert status == 200 and clock("2026-01-01T00:20:00Z") in body, body[:400]
        replay.reset(0, when="2026-01-01T00:11:00Z")
        replay.prefer_episode("t2")  # the page as episode c saw it: a body, its clock at c's load
        status, _, body = replay.fetch("GET", SITE + "/page")
        assert status == 200 and b"<body>p</body>" in body
        assert clock("2026-01-01T00:40:00Z") in body, body[:400]
