"""Anti-forgery tokens in replayed form posts, on Roundup's shape.

Roundup (2.x, the classic template) signs in through a form in its side bar that posts
``__login_name``, ``__login_password``, ``@action=Login``, ``__came_from`` and a nonce
``@csrf`` that differs on every render of the page. An archive holds the start page several
times (a crawl, then each recorded session), each with its own nonce; a task's replay may show
the crawl's form and post its nonce, which only the session's capture answers.

The login's own fields start with ``_``, which honest matching took for a cache buster's: an agent
that typed another user or a wrong password was answered with the recorded ``Welcome alice!``.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.replayer.matching import AGENT_RULES
from webfreeze.replayer.replay import Replay

HOST = "http://roundup.test:8917"
START = HOST + "/tracker/"
HTML = [("Content-Type", "text/html; charset=utf-8")]
FORM = [("Content-Type", "application/x-www-form-urlencoded"),
        ("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")]
WELCOME = START + "?%40ok_message=Welcome+alice%21"


def page(nonce: str) -> bytes:
    return (f"""<!doctype html><html><head><title>List of issues</title></head><body>
<form method="POST" action="{START}"><input name="__login_name"><input type="password"
name="__login_password"><input type="hidden" name="@action" value="Login">
<input type="hidden" name="@csrf" value="{nonce}"><input type="submit" value="Login">
<input type="hidden" name="__came_from" value="{START}"></form></body></html>""").encode()


def login(user: str, password: str, nonce: str, token_field: str = "@csrf") -> bytes:
    return urlencode([("__login_name", user), ("__login_password", password), ("@action", "Login"),
                      (token_field, nonce), ("__came_from", START)]).encode()


def build(path, token_field: str = "@csrf"):
    with new_archive_atomically(path) as arc:
        crawl = arc.new_session("crawl", source="test_form_tokens")
        arc.add_exchange(Exchange(session_id=crawl, url=START, status=200, resp_headers=HTML,
                                  payload=page("CRAWLNONCE1"), captured_at="2026-12-03T23:31:21Z"))
        session = arc.new_session("session", source="test_form_tokens")
        arc.add_exchange(Exchange(session_id=session, url=START, status=200, resp_headers=HTML,
                                  payload=page("SESSIONNONCE2"), captured_at="2026-12-03T23:33:00Z"))
        arc.add_exchange(Exchange(session_id=session, url=START, method="POST", req_headers=FORM,
                                  req_body=login("alice", "alicepw", "SESSIONNONCE2", token_field),
                                  status=302, resp_headers=[("Location", WELCOME)] + HTML, payload=b"",
                                  captured_at="2026-12-03T23:33:02Z"))
        arc.add_exchange(Exchange(session_id=session, url=WELCOME, status=200, resp_headers=HTML,
                                  payload=b"<p>Welcome alice!</p>", captured_at="2026-12-03T23:33:03Z"))
    return path


def test_roundups_csrf_nonce_may_differ(tmp_path):
    archive = build(tmp_path / "roundup.wfz")
    with Replay(archive, rule_defaults=AGENT_RULES) as replay:
        # the crawl's form, posted with the crawl's nonce and the recorded credentials
        status, headers, _ = replay.fetch("POST", START, FORM, login("alice", "alicepw", "CRAWLNONCE1"))
        assert status == 302 and dict(headers)["Location"] == WELCOME, (status, headers)
        assert dict(headers)["X-Webfreeze-Match"] == "fuzzy" and float(dict(headers)["X-Webfreeze-Score"]) == 1.0
        # the session's own form is the exact capture
        status, headers, _ = replay.fetch("POST", START, FORM, login("alice", "alicepw", "SESSIONNONCE2"))
        assert status == 302 and dict(headers)["X-Webfreeze-Match"] == "exact"


@pytest.mark.parametrize("token_field", ["@csrf", "_csrf", "_token", "__RequestVerificationToken", "__FORM_TOKEN"])
def test_a_wrong_login_is_a_miss_not_the_recorded_welcome(tmp_path, token_field):
    archive = build(tmp_path / "roundup.wfz", token_field)
    with Replay(archive, rule_defaults=AGENT_RULES) as replay:
        for user, password in (("alice", "WRONG"), ("mallory", "alicepw"), ("mallory", "WRONG")):
            status, headers, _ = replay.fetch("POST", START, FORM, login(user, password, "CRAWLNONCE1", token_field))
            assert status == 404 and dict(headers)["X-Webfreeze-Miss"] == "1", (user, password, status, headers)
        # the framework's nonce may still differ
        status, headers, _ = replay.fetch("POST", START, FORM, login("alice", "alicepw", "CRAWLNONCE1", token_field))
        assert status == 302 and dict(headers)["X-Webfreeze-Match"] == "fuzzy", (status, headers)
    # a person browsing the archive (replay serve's fuzzy defaults) is still shown the closest answer
    with Replay(archive) as replay:
        status, _, _ = replay.fetch("POST", START, FORM, login("alice", "WRONG", "CRAWLNONCE1", token_field))
        assert status == 302
