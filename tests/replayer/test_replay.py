"""The replay server over real sockets: matching levels, ordered repeats, direct and proxy modes
(TLS through CONNECT with the webfreeze CA), misses, ranges, injection, site models, bad input."""

from __future__ import annotations

import gzip
import http.client
import json
import re
import socket
import ssl
import time
from urllib.parse import quote

import pytest

from webfreeze.archives import Archive, Exchange, new_archive_atomically
from webfreeze.replayer.hooks import ReplayResponse, SiteModel
from webfreeze.replayer.matching import Rules, canonical_url
from webfreeze.replayer.rewrite import SEAL_CSP
from webfreeze.replayer.server import ReplayServer

T0 = "2024-03-01T12:00:00Z"


def build_archive(path, exchanges, **meta):
    """An archive holding ``exchanges`` (dicts of Exchange fields), one capture session (or one per
    name an exchange gives as ``session``)."""
    with new_archive_atomically(path, **meta) as arc:
        sessions: dict = {}
        for ex in exchanges:
            ex = dict(ex)
            name = ex.pop("session", "")
            if name not in sessions:
                sessions[name] = arc.new_session("test", source=f"test_replay {name}".strip())
            ex.setdefault("captured_at", T0)
            ex.setdefault("resp_headers", [("Content-Type", "text/plain")])
            arc.add_exchange(Exchange(session_id=sessions[name], **ex))
    return path


def text(url, body, when=T0, **kw):
    return {"url": url, "payload": body.encode() if isinstance(body, str) else body, "status": 200,
            "captured_at": when, **kw}


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("home")


@pytest.fixture(scope="module")
def site_archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("arc") / "site.wfz"
    page = b"<!doctype html><html><head><title>t</title></head><body><p id=x></p></body></html>"
    return build_archive(path, [
        text("http://site.test/exact?a=1", "exact-body"),
        text("http://site.test/news?id=7&sort=new", "news-7"),
        text("http://site.test/api/list?page=3&_=1700000000000", "list-page-3"),
        text("http://site.test/api/list?page=9&_=1700000000001", "list-page-9"),
        text("http://site.test/search?q=quantum+computing&n=10", "search-quantum"),
        text("http://site.test/search?q=neural+networks&n=10", "search-neural"),
        text("http://site.test/app.js?v=123", "console.log(1)", resp_headers=[("Content-Type", "application/javascript")]),
        text("http://site.test/jsonp?callback=jQuery111_222&id=5", "jQuery111_222({\"id\": 5});",
             resp_headers=[("Content-Type", "application/javascript")]),
        text("http://site.test/counter", "first", when="2024-03-01T12:00:01Z"),
        text("http://site.test/counter", "second", when="2024-03-01T12:00:02Z"),
        text("http://site.test/counter", "third", when="2024-03-01T12:00:03Z"),
        text("http://site.test/timed", "january", when="2024-01-01T00:00:00Z"),
        text("http://site.test/timed", "june", when="2024-06-01T00:00:00Z"),
        {"url": "http://site.test/form", "method": "POST", "status": 200, "payload": b"posted-ab",
         "req_headers": [("Content-Type", "application/x-www-form-urlencoded")], "req_body": b"b=2&a=1",
         "captured_at": T0, "resp_headers": [("Content-Type", "text/plain")]},
        {"url": "http://site.test/api/json", "method": "POST", "status": 200, "payload": b"json-answer",
         "req_headers": [("Content-Type", "application/json")], "req_body": b'{"q": {"x": 1, "y": [1, 2]}}',
         "captured_at": T0, "resp_headers": [("Content-Type", "application/json")]},
        {"url": "https://site.test/page", "status": 200, "payload": gzip.compress(page, mtime=0),
         "resp_headers": [("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", "gzip"),
                          ("Content-Security-Policy", "script-src 'self'"), ("Transfer-Encoding", "chunked")],
         "captured_at": T0},
        text("http://site.test/big.bin", bytes(range(256)) * 40, resp_headers=[("Content-Type", "application/octet-stream")]),
        # as nginx serves a static file: the replay must not say Accept-Ranges a second time
        text("http://site.test/logo.svg", "<svg/>", resp_headers=[("Content-Type", "image/svg+xml"),
                                                                 ("Accept-Ranges", "bytes")]),
        {"url": "http://site.test/moved", "status": 302, "payload": b"",
         "resp_headers": [("Location", "http://site.test/exact?a=1")], "captured_at": T0},
    ])


@pytest.fixture
def server(site_archive, home, tmp_path):
    srv = ReplayServer(site_archive, mode="proxy", confdir=home, miss_report=tmp_path / "misses.jsonl").start()
    yield srv
    srv.stop()


def proxied(srv, method, url, body=None, headers=None):
    """A request through the replay server as an HTTP proxy (absolute-form)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    conn.request(method, url, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp, data


# ---------------------------------------------------------------------------- matching
def test_canonical_form_drops_cache_busters_and_trackers():
    r = Rules()
    url = ("HTTP://Site.Test:80/p?b=2&a=1&_=1700000000000&cb=77&uncache=1&utm_source=x&fbclid=abc&callback=jQuery1_2"
           "&cachebust=1700000000123&ts=170000000012345&keep=yes&_=notnumber")
    assert canonical_url(url, r) == "site.test/p?_=notnumber&a=1&b=2&keep=yes"
    assert canonical_url("https://site.test:443/p?b=1&a=2#frag", r) == canonical_url("http://SITE.test/p?a=2&b=1", r)
    # a short number under a *ts* name is data, not an epoch
    assert "ts=42" in canonical_url("http://a.test/?ts=42", r)
    # a "+" in a path is a plus (MoinMoin's item "Q&A + Notes" is not "Q&A   Notes"); escapes of
    # the same character are one
    assert canonical_url("http://wiki.test/Q&A%20+%20Notes", r) != canonical_url("http://wiki.test/Q&A%20%20%20Notes", r)
    assert canonical_url("http://wiki.test/a%2Bb", r) == canonical_url("http://wiki.test/a+b", r)
    assert canonical_url("http://wiki.test/a%20b", r) == canonical_url("http://wiki.test/a b", r)
    # a bare epoch as the query, a parameter without a value (JupyterLab's `/api/me?1796588621569`,
    # a new one per request: every API call of a replayed JupyterLab missed)
    assert canonical_url("http://lab.test/api/me?1796588621569", r) == "lab.test/api/me"
    assert canonical_url("http://lab.test/api/me?x=1&1796588621", r) == "lab.test/api/me?x=1"
    assert canonical_url("http://a.test/?123", r) == "a.test/?123="  # (a short number: data)
    assert canonical_url("http://books.test/isbn?0306406152", r) == "books.test/isbn?0306406152="  # (no epoch)
    assert canonical_url("http://a.test/?1796588621569=7", r) == "a.test/?1796588621569=7"  # (it has a value)
    assert canonical_url("http://lab.test/api/me?1796588621569", Rules(drop_epoch_keys=False)) != "lab.test/api/me"


def test_exact_canonical_and_fuzzy_levels(server):
    resp, body = proxied(server, "GET", "http://site.test/exact?a=1")
    assert (resp.status, body, resp.getheader("X-Webfreeze-Match")) == (200, b"exact-body", "exact")
    resp, body = proxied(server, "GET", "http://SITE.test/news?sort=new&id=7&utm_campaign=spring&fbclid=zz")
    assert (body, resp.getheader("X-Webfreeze-Match")) == (b"news-7", "canonical")
    resp, body = proxied(server, "GET", "https://site.test/news?id=7&sort=new")  # recorded over http
    assert (body, resp.getheader("X-Webfreeze-Match")) == (b"news-7", "canonical")
    # fuzzy: nearest number wins, the `_` buster weighs little
    resp, body = proxied(server, "GET", "http://site.test/api/list?page=8&_=1999999999999")
    assert (body, resp.getheader("X-Webfreeze-Match")) == (b"list-page-9", "fuzzy")
    resp, body = proxied(server, "GET", "http://site.test/api/list?page=2")
    assert body == b"list-page-3"
    # fuzzy: string similarity
    resp, body = proxied(server, "GET", "http://site.test/search?q=quantum+computers&n=10")
    assert body == b"search-quantum"
    # static files: the query is ignored
    resp, body = proxied(server, "GET", "http://site.test/app.js?v=999")
    assert (body, resp.getheader("X-Webfreeze-Match")) == (b"console.log(1)", "fuzzy")


def test_jsonp_callback_is_renamed(server):
    resp, body = proxied(server, "GET", "http://site.test/jsonp?id=5&callback=jQuery999_1")
    assert resp.getheader("X-Webfreeze-Match") == "canonical"
    assert body == b'jQuery999_1({"id": 5});'


def test_repeated_requests_are_answered_in_recorded_order_then_the_last_repeats(server):
    bodies = [proxied(server, "GET", "http://site.test/counter")[1] for _ in range(5)]
    assert bodies == [b"first", b"second", b"third", b"third", b"third"]
    server.reset()
    assert proxied(server, "GET", "http://site.test/counter")[1] == b"first"


def test_a_repeated_request_is_answered_from_what_followed_the_last_change(tmp_path, home):
    """A queue as Gradio's: each action ``POST /queue/join``s (its body names the action), then
    ``GET /queue/data`` brings that action's result. Recorded A, then B; replayed B first, each
    data request gets the result of the join the page made, not the first recorded; a repeated
    request with no join between (the poll before any action) keeps recorded order."""
    json_ctype = [("Content-Type", "application/json")]

    def at(second):
        return f"2024-03-01T12:00:{second:02d}Z"
    path = build_archive(tmp_path / "queue.wfz", [
        text("http://app.test/queue/data", "idle-1", at(0)),
        text("http://app.test/queue/data", "idle-2", at(1)),
        {**text("http://app.test/queue/join", '{"event_id": "a"}', at(2), resp_headers=json_ctype),
         "method": "POST", "req_body": b'{"fn": "A"}', "req_headers": json_ctype},
        text("http://app.test/queue/data", "done A", at(3)),
        {**text("http://app.test/queue/join", '{"event_id": "b"}', at(4), resp_headers=json_ctype),
         "method": "POST", "req_body": b'{"fn": "B"}', "req_headers": json_ctype},
        text("http://app.test/queue/data", "done B", at(5)),
        text("http://app.test/queue/data", "done B again", at(6)),
    ])
    with ReplayServer(path, mode="proxy", confdir=home) as srv:
        def join(fn):
            return proxied(srv, "POST", "http://app.test/queue/join", body=b'{"fn": "%s"}' % fn,
                           headers={"Content-Type": "application/json"})[1]

        def data():
            resp, body = proxied(srv, "GET", "http://app.test/queue/data")
            return body.decode(), resp.getheader("X-Webfreeze-Match")
        got = [data(), data()]
        assert join(b"B") == b'{"event_id": "b"}'
        got += [data(), data(), data()]
        assert join(b"A") == b'{"event_id": "a"}'
        got += [data(), data()]
    assert got == [("idle-1", "exact"), ("idle-2", "exact"),
                   ("done B", "exact"), ("done B again", "exact"), ("done B again", "exact"),
                   ("done A", "exact"), ("done A", "exact")]


def test_what_followed_the_page_s_join_answers_even_from_another_session(tmp_path, home):
    """Two actions of a Gradio app recorded as two capture sessions, the queue's stream at the same
    URL in both (its session hash comes from the seeded page). Replayed at the second session's
    time, the first session's action gets the stream that followed its own join, not the second
    session's (which the time alone picks, and served as exact: the wrong answer, unflagged)."""
    json_ctype = [("Content-Type", "application/json")]

    def join(fn, second, session):
        return {**text("http://app.test/queue/join?", '{"event_id": "%s"}' % fn.lower(),
                       f"2024-03-01T12:{second:02d}:00Z", resp_headers=json_ctype),
                "method": "POST", "req_body": b'{"fn": "%s"}' % fn.encode(), "req_headers": json_ctype,
                "session": session}
    path = build_archive(tmp_path / "two.wfz", [
        join("Greet", 0, "greet"),
        {**text("http://app.test/queue/data?session_hash=s1", "greeted", "2024-03-01T12:00:01Z"), "session": "greet"},
        join("Square", 10, "calc"),
        {**text("http://app.test/queue/data?session_hash=s1", "squared", "2024-03-01T12:10:01Z"), "session": "calc"},
    ])
    got = []
    for fn in (b"Greet", b"Square"):
        with ReplayServer(path, mode="proxy", confdir=home, when="2024-03-01T12:10:00Z") as srv:
            proxied(srv, "POST", "http://app.test/queue/join?", body=b'{"fn": "%s"}' % fn,
                    headers={"Content-Type": "application/json"})
            resp, body = proxied(srv, "GET", "http://app.test/queue/data?session_hash=s1")
            got.append((body.decode(), resp.getheader("X-Webfreeze-Match")))
    assert got == [("greeted", "exact"), ("squared", "exact")]
    # a request the target time's session answered before any action of its own stays that
    # session's, whatever the page posted (a beacon recorded only in the other session)
    path = build_archive(tmp_path / "beacon.wfz", [
        {**text("http://app.test/api/log", "logged", "2024-03-01T12:00:00Z"), "method": "POST", "req_body": b"e=1",
         "req_headers": [("Content-Type", "application/x-www-form-urlencoded")], "session": "a"},
        {**text("http://app.test/api/items", "march items", "2024-03-01T12:00:01Z"), "session": "a"},
        {**text("http://app.test/api/items", "april items", "2024-04-01T12:00:01Z"), "session": "b"},
    ])
    with ReplayServer(path, mode="proxy", confdir=home, when="2024-04-01T12:00:00Z") as srv:
        proxied(srv, "POST", "http://app.test/api/log", body=b"e=1",
                headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert proxied(srv, "GET", "http://app.test/api/items")[1] == b"april items"


def test_a_state_changing_request_asked_more_often_than_recorded_is_fuzzy_when_its_answers_differ(tmp_path, home):
    """``POST /increment`` was recorded twice, answered 1 then 2: a third is answered with the
    last, but as fuzzy (the site would have said 3). ``POST /ping``, recorded twice with the same
    answer, stays exact; so does a ``GET`` asked more often than recorded (the last one repeats),
    until the site's state has left the recording's (that third increment): then it is fuzzy too."""
    form = [("Content-Type", "application/x-www-form-urlencoded")]
    path = build_archive(tmp_path / "counter.wfz", [
        {**text("http://app.test/increment", "1", "2024-03-01T12:00:00Z"), "method": "POST", "req_body": b"by=1",
         "req_headers": form},
        {**text("http://app.test/increment", "2", "2024-03-01T12:00:01Z"), "method": "POST", "req_body": b"by=1",
         "req_headers": form},
        {**text("http://app.test/ping", "pong", "2024-03-01T12:00:02Z"), "method": "POST", "req_body": b"x=1",
         "req_headers": form},
        {**text("http://app.test/ping", "pong", "2024-03-01T12:00:03Z"), "method": "POST", "req_body": b"x=1",
         "req_headers": form},
        text("http://app.test/count", "one", "2024-03-01T12:00:04Z"),
        text("http://app.test/count", "two", "2024-03-01T12:00:05Z"),
    ])
    with ReplayServer(path, mode="proxy", confdir=home) as srv:
        def ask(method, url, body=None):
            resp, data = proxied(srv, method, url, body=body, headers=dict(form) if body else None)
            return data.decode(), resp.getheader("X-Webfreeze-Match")
        got = [ask("GET", "http://app.test/count") for _ in range(3)]
        got += [ask("POST", "http://app.test/ping", b"x=1") for _ in range(3)]
        got += [ask("POST", "http://app.test/increment", b"by=1") for _ in range(3)]
        got += [ask("GET", "http://app.test/count")]
        srv.reset()  # (a new episode starts where the recording did)
        got += [ask("GET", "http://app.test/count")]
    assert got == [("one", "exact"), ("two", "exact"), ("two", "exact"),
                   ("pong", "exact"), ("pong", "exact"), ("pong", "exact"),
                   ("1", "exact"), ("2", "exact"), ("2", "fuzzy"),
                   ("two", "fuzzy"), ("one", "exact")]


def test_a_submission_that_made_something_sent_again_is_fuzzy(tmp_path, home):
    """Roundup's new issue: ``POST /issue`` recorded once, answered with a redirect to the issue
    made. Sent again (an agent's second click on Submit), the site would have made another issue,
    or refused the spent CSRF token; the recording never saw either: the second answer is fuzzy.
    A ``POST`` answered ``200`` (it may only read) stays exact however often it is sent."""
    form = [("Content-Type", "application/x-www-form-urlencoded")]
    path = build_archive(tmp_path / "tracker.wfz", [
        {**text("http://app.test/issue", "", "2024-03-01T12:00:00Z"), "method": "POST", "req_body": b"title=x",
         "req_headers": form, "status": 303, "resp_headers": [("Location", "http://app.test/issue4")]},
        {**text("http://app.test/search", "found", "2024-03-01T12:00:01Z"), "method": "POST", "req_body": b"q=x",
         "req_headers": form},
    ])
    with ReplayServer(path, mode="proxy", confdir=home) as srv:
        def ask(url, body):
            resp, _ = proxied(srv, "POST", url, body=body, headers=dict(form))
            return resp.status, resp.getheader("X-Webfreeze-Match"), resp.getheader("X-Webfreeze-Repeat")
        got = [ask("http://app.test/search", b"q=x") for _ in range(2)]
        got += [ask("http://app.test/issue", b"title=x") for _ in range(2)]
    assert got == [(200, "exact", None), (200, "exact", None), (303, "exact", None), (303, "fuzzy", "made")]
    # the text backend's provenance says why (the browser backend's reads the header)
    from webfreeze.replayer.replay import REPEAT_WHY, Replay

    with Replay(path) as replay:
        replay.answers = []
        for _ in range(2):
            replay.answer("POST", "http://app.test/issue", form, b"title=x")
        assert [(a.level, a.why) for a in replay.answers] == [("exact", None), ("fuzzy", REPEAT_WHY["made"])]


def test_a_revalidated_resource_asked_again_after_divergence_stays_exact(tmp_path, home):
    """A stylesheet recorded in full and then as ``304 Not Modified`` (the recording browser
    revalidating its copy): asked with a validator more often than recorded, once the episode has
    left the recording (a state-changing request asked again, its answers differing), the last
    answer stands and stays exact, since a 304 differs from no full answer. Wagtail's admin: every
    stylesheet and script of an episode was called fuzzy after one autosave the session never sent."""
    form = [("Content-Type", "application/x-www-form-urlencoded")]
    path = build_archive(tmp_path / "revalidated.wfz", [
        {**text("http://app.test/save", "saved 1", "2024-03-01T12:00:00Z"), "method": "POST", "req_body": b"a=1",
         "req_headers": form},
        {**text("http://app.test/save", "saved 2", "2024-03-01T12:00:01Z"), "method": "POST", "req_body": b"a=1",
         "req_headers": form},
        text("http://app.test/core.css", "body{}", "2024-03-01T12:00:02Z"),
        {**text("http://app.test/core.css", "", "2024-03-01T12:00:03Z"), "status": 304},
    ])
    with ReplayServer(path, mode="proxy", confdir=home) as srv:
        def ask(method, url, body=None, headers=None):
            resp, data = proxied(srv, method, url, body=body, headers=headers)
            return resp.status, resp.getheader("X-Webfreeze-Match")
        got = [ask("POST", "http://app.test/save", b"a=1", dict(form)) for _ in range(3)]
        got += [ask("GET", "http://app.test/core.css", headers={"If-Modified-Since": "Fri, 01 Mar 2024 12:00:02 GMT"})
                for _ in range(3)]
    assert got[:3] == [(200, "exact"), (200, "exact"), (200, "fuzzy")]  # (the episode has left the recording)
    assert [level for _, level in got[3:]] == ["exact"] * 3, got


def test_target_time_picks_the_closest_capture(site_archive, home):
    with ReplayServer(site_archive, mode="proxy", confdir=home, when="2024-05-20T00:00:00Z") as srv:
        assert proxied(srv, "GET", "http://site.test/timed")[1] == b"june"
    with ReplayServer(site_archive, mode="proxy", confdir=home, when="2024-02-01") as srv:
        assert proxied(srv, "GET", "http://site.test/timed")[1] == b"january"


def test_post_bodies_compare_as_fields(server):
    ctype = {"Content-Type": "application/x-www-form-urlencoded"}
    resp, body = proxied(server, "POST", "http://site.test/form", body=b"a=1&b=2", headers=ctype)
    assert (body, resp.getheader("X-Webfreeze-Match")) == (b"posted-ab", "exact")
    boundary = "XyZ123"
    multipart = "".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
                        for k, v in (("b", "2"), ("a", "1"))) + f"--{boundary}--\r\n"
    resp, body = proxied(server, "POST", "http://site.test/form", body=multipart.encode(),
                         headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert body == b"posted-ab"
    resp, body = proxied(server, "POST", "http://site.test/api/json", body=b'{"q":{"y":[1,2],"x":1}}',
                         headers={"Content-Type": "application/json"})
    assert (body, resp.getheader("X-Webfreeze-Match")) == (b"json-answer", "exact")
    # a different form value falls to fuzzy (same path, body fields compared)
    resp, body = proxied(server, "POST", "http://site.test/form", body=b"a=1&b=3", headers=ctype)
    assert (body, resp.getheader("X-Webfreeze-Match")) == (b"posted-ab", "fuzzy")


def test_miss_is_a_marked_404_and_a_report_line(server, tmp_path):
    resp, body = proxied(server, "GET", "http://elsewhere.test/nothing?x=1", headers={"Referer": "http://site.test/"})
    assert resp.status == 404 and resp.getheader("X-Webfreeze-Miss") == "1"
    lines = [json.loads(line) for line in (tmp_path / "misses.jsonl").read_text().splitlines()]
    assert lines == [{"method": "GET", "url": "http://elsewhere.test/nothing?x=1", "body_key": "",
                      "referer": "http://site.test/", "best_fuzzy_score": None, "on_miss": "404"}]


def test_a_miss_asked_from_another_origin_carries_cors_headers(server):
    """A page's script on another origin reads a miss as the 404 it is (not a network error): the
    miss names the origin as allowed; a preflight is granted what it asks, and counted as a miss."""
    resp, body = proxied(server, "GET", "http://api.test/missing", headers={"Origin": "http://site.test"})
    assert resp.status == 404 and resp.getheader("X-Webfreeze-Miss") == "1" and body.startswith(b"webfreeze: not in")
    assert resp.getheader("Access-Control-Allow-Origin") == "http://site.test"
    assert resp.getheader("Access-Control-Allow-Credentials") == "true"
    resp, body = proxied(server, "OPTIONS", "http://api.test/other", headers={
        "Origin": "http://site.test", "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "x-custom"})
    assert (resp.status, body) == (204, b"") and resp.getheader("X-Webfreeze-Miss") == "1"
    assert (resp.getheader("Access-Control-Allow-Methods"), resp.getheader("Access-Control-Allow-Headers")) == \
        ("PUT", "x-custom")
    assert [m["url"] for m in server.misses][-2:] == ["http://api.test/missing", "http://api.test/other"]
    resp, _ = proxied(server, "GET", "http://api.test/plain")  # (no origin named: no CORS headers)
    assert resp.status == 404 and resp.getheader("Access-Control-Allow-Origin") is None


def test_the_browsers_own_update_traffic_is_refused_but_not_reported_as_a_miss(server, tmp_path):
    """Chromium's component-update requests (sent through the replay proxy so that they fail there)
    carry random query strings: reported, they would make two replay checks' miss reports differ.
    A desktop Chromium's sign-in check is its own as well, the rest of its host is not."""
    resp, _ = proxied(server, "GET", "http://update.googleapis.com/service/update2/json?cup2key=13:98765")
    assert resp.status == 404 and resp.getheader("X-Webfreeze-Miss") == "1"
    assert server.misses == [] and server.stats["misses"] == 0 and server.stats["browser_own"] == 1
    assert not (tmp_path / "misses.jsonl").exists() or (tmp_path / "misses.jsonl").read_text() == ""
    proxied(server, "GET", "http://elsewhere.test/nothing")  # a page's miss is still reported
    assert [m["url"] for m in server.misses] == ["http://elsewhere.test/nothing"]
    # a desktop Chromium's sign-in check (a person's own browser on `replay serve`) is the browser's
    # too; the same host's other paths may be a site's (a recorded Google login) and are reported
    proxied(server, "POST", "http://accounts.google.com/ListAccounts?gpsia=1&source=ChromiumBrowser&json=standard")
    proxied(server, "GET", "http://accounts.google.com/signin")
    proxied(server, "GET", "http://accounts.google.com/ListAccounts?source=ogb")  # (a Google page's own)
    assert server.stats["browser_own"] == 2
    assert [m["url"] for m in server.misses] == ["http://elsewhere.test/nothing", "http://accounts.google.com/signin",
                                                 "http://accounts.google.com/ListAccounts?source=ogb"]


@pytest.mark.parametrize("on_miss", ["502", "abort"])
def test_on_miss_modes(site_archive, home, on_miss):
    with ReplayServer(site_archive, mode="proxy", confdir=home, on_miss=on_miss) as srv:
        if on_miss == "502":
            resp, _ = proxied(srv, "GET", "http://elsewhere.test/")
            assert resp.status == 502 and resp.getheader("X-Webfreeze-Miss") == "1"
        else:
            with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
                proxied(srv, "GET", "http://elsewhere.test/")
        assert proxied(srv, "GET", "http://site.test/exact?a=1")[1] == b"exact-body"


def test_html_gets_the_runtime_first_in_head_decoded_and_without_csp(site_archive, home):
    with ReplayServer(site_archive, mode="direct", confdir=home) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("GET", "/20240301/https://site.test/page")  # pywb's replay URL: the injected form
        resp = conn.getresponse()
        body = resp.read()
        assert resp.status == 200 and resp.getheader("Content-Encoding") is None
        # the archived policy is gone; direct mode's seal (replayer/rewrite.py) is the only one
        assert resp.getheader("Content-Security-Policy") == SEAL_CSP and resp.getheader("Transfer-Encoding") is None
        assert body.startswith(b"<!doctype html><html><head><script>(function(){")
        assert b'"t":1709294400000' in body  # 2024-03-01T12:00:00Z in ms, the clock's start
        assert body.endswith(b"<title>t</title></head><body><p id=x></p></body></html>")
        conn.request("GET", "/20240301id_/https://site.test/page")  # id_: identity, the archived bytes
        resp = conn.getresponse()
        assert resp.getheader("Content-Encoding") == "gzip"
        assert gzip.decompress(resp.read()).startswith(b"<!doctype html><html><head><title>")
    with ReplayServer(site_archive, mode="direct", confdir=home, inject=False) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("GET", "/2024id_/https://site.test/page")
        resp = conn.getresponse()
        assert resp.getheader("Content-Encoding") == "gzip"
        assert gzip.decompress(resp.read()).startswith(b"<!doctype html><html><head><title>")


def test_direct_mode_listing_head_range_and_redirect(site_archive, home):
    with ReplayServer(site_archive, mode="direct", confdir=home) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("GET", "/")
        resp = conn.getresponse()
        listing = resp.read().decode()
        assert resp.status == 200 and "/20240301120001id_/http://site.test/counter" in listing
        # an HTML page is linked replayed too (the runtime in it), not only as its archived bytes
        page = re.search(r'<a href="(/\d{14})/https://site.test/page">replay</a>', listing)
        assert page and f'href="{page.group(1)}id_/https://site.test/page"' in listing, listing
        assert '<a href="/20240301120001/http://site.test/counter">' not in listing  # (not HTML)
        conn.request("HEAD", "/2024id_/http://site.test/big.bin")
        resp = conn.getresponse()
        assert resp.read() == b"" and resp.getheader("Content-Length") == "10240"
        conn.request("GET", "/2024id_/http://site.test/big.bin", headers={"Range": "bytes=256-511"})
        resp = conn.getresponse()
        assert resp.status == 206 and resp.getheader("Content-Range") == "bytes 256-511/10240"
        assert resp.read() == bytes(range(256))
        conn.request("GET", "/2024id_/http://site.test/big.bin", headers={"Range": "bytes=-16"})
        resp = conn.getresponse()
        assert resp.status == 206 and resp.read() == bytes(range(240, 256))
        conn.request("GET", "/2024id_/http://site.test/big.bin", headers={"Range": "bytes=99999-"})
        resp = conn.getresponse()
        assert resp.status == 416 and resp.read() == b""
        conn.request("GET", "/2024id_/site.test/moved")  # no scheme: http
        resp = conn.getresponse()
        # (the redirect stays inside the archive, in the form it was asked in: the seal)
        assert resp.status == 302 and resp.getheader("Location") == "/2024id_/http://site.test/exact?a=1"
        resp.read()
        conn.request("GET", "/_webfreeze/status")
        status = json.loads(conn.getresponse().read())
        assert status["exchanges"] == 19 and status["hits"] >= 5


def test_https_through_connect_with_the_webfreeze_ca(server):
    ctx = ssl.create_default_context(cafile=str(server.ca_file))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
    conn.set_tunnel("site.test", 443)
    for _ in range(3):  # keep-alive inside the tunnel
        conn.request("GET", "/page")
        resp = conn.getresponse()
        body = resp.read()
        assert resp.status == 200 and b"<title>t</title>" in body
    assert conn.sock.getpeercert()["subjectAltName"] == (("DNS", "site.test"),)
    conn.close()


class CartModel(SiteModel):
    """A tiny stateful host for the hook: POST /cart/add appends, GET /cart lists."""

    hosts = ("site.test",)
    name = "cart"

    def initial_state(self, seed):
        return {"items": []}

    def handle(self, request, state):
        if request.path == "/cart/add" and request.method == "POST":
            state["items"].append(request.form()["sku"])
            return ReplayResponse(303, [("Location", "/cart")])
        if request.path == "/cart":
            return ReplayResponse(200, [("Content-Type", "application/json")], json.dumps(state["items"]).encode())
        return None


def test_site_model_answers_first_and_exports_state(server):
    server.register(CartModel())
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    assert proxied(server, "POST", "http://site.test/cart/add", b"sku=P1", form)[0].status == 303
    proxied(server, "POST", "http://site.test/cart/add", b"sku=P2", form)
    resp, body = proxied(server, "GET", "http://site.test/cart")
    assert json.loads(body) == ["P1", "P2"] and resp.getheader("X-Webfreeze-Match") == "model"
    assert proxied(server, "GET", "http://site.test/exact?a=1")[1] == b"exact-body"  # falls through
    assert server.site_state() == {"cart": {"items": ["P1", "P2"]}}
    server.reset()
    assert server.site_state() == {"cart": {"items": []}}


# ---------------------------------------------------------------------------- faults
def raw_exchange(port, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def test_malformed_requests_get_400_and_the_server_stays_up(server):
    for junk in (b"\x16\x03\x01\x02\x00garbage\r\n\r\n", b"GET / HTTP/1.1\r\nBad Header\r\n\r\n",
                 b"GET /\x00 HTTP/1.1\r\n\r\n", b"POST http://site.test/form HTTP/1.1\r\nContent-Length: -5\r\n\r\n"):
        answer = raw_exchange(server.port, junk)
        assert answer.startswith(b"HTTP/1.1 400 "), (junk, answer[:80])
    huge = b"GET http://site.test/x HTTP/1.1\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n"
    assert raw_exchange(server.port, huge).startswith(b"HTTP/1.1 431 ")
    assert proxied(server, "GET", "http://site.test/exact?a=1")[1] == b"exact-body"
    assert server.stats["bad_requests"] == 5


def test_clients_hanging_up_mid_response_do_not_hurt_others(server):
    for _ in range(50):
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"GET http://site.test/big.bin HTTP/1.1\r\nHost: site.test\r\n\r\n" * 20)
        s.recv(100)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on close
        s.close()
    resp, body = proxied(server, "GET", "http://site.test/big.bin")
    assert resp.status == 200 and body == bytes(range(256)) * 40
    # every connection gone from the server, so every request it read was answered (or failed)
    deadline = time.monotonic() + 60
    while server._conns:
        assert time.monotonic() < deadline, f"{len(server._conns)} connection(s) still open after 60 s"
        time.sleep(0.05)
    assert server.stats["errors"] == 0


def test_pipelined_requests_are_answered_in_order(server):
    reqs = b"".join("GET http://site.test/counter HTTP/1.1\r\nHost: site.test\r\n\r\n".encode() for _ in range(3))
    reqs += b"GET http://site.test/exact?a=1 HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n"
    out = raw_exchange(server.port, reqs)
    assert [out.index(w) for w in (b"first", b"second", b"third", b"exact-body")] == sorted(
        out.index(w) for w in (b"first", b"second", b"third", b"exact-body"))


# ---------------------------------------------------------------------------- pywb's sample captures
def test_a_captured_accept_ranges_is_said_once(server):
    resp, data = proxied(server, "GET", "http://site.test/logo.svg")
    assert data == b"<svg/>"
    said = [v for k, v in resp.getheaders() if k.lower() == "accept-ranges"]
    assert said == ["bytes"]
    resp, data = proxied(server, "GET", "http://site.test/logo.svg", headers={"Range": "bytes=0-1"})
    assert (resp.status, data) == (206, b"<s")
    assert [v for k, v in resp.getheaders() if k.lower() == "accept-ranges"] == ["bytes"]


def test_pywb_post_and_revisit_captures(samples, tmp_path, home, cli):
    for name in ("post-test.warc.gz", "dupes.warc.gz"):
        r = cli("archive", "import", samples / name, "--to", tmp_path / f"{name}.wfz")
        assert r.returncode == 0, r.stderr
    with ReplayServer(tmp_path / "post-test.warc.gz.wfz", mode="proxy", confdir=home) as srv:
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        resp, body = proxied(srv, "POST", "http://httpbin.org/post", b"test=abc&foo=bar", form)
        assert resp.getheader("X-Webfreeze-Match") == "exact"
        assert json.loads(body)["form"] == {"foo": "bar", "test": "abc"}
        body = proxied(srv, "POST", "http://httpbin.org/post", b"A=1&B=%5B%5D&C=3", form)[1]
        assert json.loads(body)["form"] == {"A": "1", "B": "[]", "C": "3"}
        body = proxied(srv, "POST", "http://httpbin.org/post?foo=bar", b"data=^", form)[1]
        assert json.loads(body)["args"] == {"foo": "bar"} and json.loads(body)["form"] == {"data": "^"}
    with Archive.open(tmp_path / "dupes.warc.gz.wfz") as arc:
        ids = [r.id for r in arc.lookup_exact("GET", "http://example.com")]
        original = arc.exchange(ids[0]).payload()
    assert len(ids) == 2 and len(original) == 1270
    with ReplayServer(tmp_path / "dupes.warc.gz.wfz", mode="proxy", confdir=home, inject=False) as srv:
        answers = [proxied(srv, "GET", "http://example.com/") for _ in range(3)]
        assert [int(r.getheader("X-Webfreeze-Capture")) for r, _ in answers] == [ids[0], ids[1], ids[1]]
        assert all(b == original for _, b in answers)  # the revisit resolves to the original payload


# ---------------------------------------------------------------------------- the CLI
def test_cli_errors_are_one_line(site_archive, tmp_path, cli):
    r = cli("replay", "serve", tmp_path / "missing.wfz", "--port", "0")
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0 and "no such archive" in r.stderr
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        r = cli("replay", "serve", site_archive, "--mode", "direct", "--port", str(s.getsockname()[1]))
    assert r.returncode == 1 and "port already in use" in r.stderr and r.stderr.count("\n") == 1
    bad = tmp_path / "rules.json"
    bad.write_text('{"fuzzy_treshold": 0.3}')
    r = cli("replay", "serve", site_archive, "--rules", bad)
    assert r.returncode == 1 and "unknown replay rule(s): fuzzy_treshold" in r.stderr
    r = cli("replay", "check", site_archive, "--report", tmp_path / "rep")
    assert r.returncode == 1 and "no page records" in r.stderr and not (tmp_path / "rep").exists()
    r = cli("replay", "serve", site_archive, "--on-miss", "418")
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_cli_serve_direct_until_sigterm(site_archive, tmp_path):
    import signal
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "webfreeze", "replay", "serve", str(site_archive), "--mode",
                             "direct", "--port", str(port), "--miss-report", str(tmp_path / "m.jsonl")],
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120  # (the server's start, slow on a loaded machine)
        while True:
            try:
                # (a safety net: the server listens before it has answered anything, on a loaded machine)
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("GET", "/2024id_/" + quote("http://site.test/exact?a=1", safe=":/?="))
                assert conn.getresponse().read() == b"exact-body"
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        conn.request("GET", "/2024id_/http://nowhere.test/")
        assert conn.getresponse().status == 404
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "served 2 requests: 1 from the archive, 0 by site models, 1 miss" in err
    assert json.loads((tmp_path / "m.jsonl").read_text())["url"] == "http://nowhere.test/"


def test_a_damaged_blob_is_a_500_and_one_log_line(tmp_path, home, caplog):
    """A blob stored raw (incompressible) and one stored as zstd, each damaged in one byte: the first
    is caught by its SHA-256 (recomputed once per response the replay builds), the second by the
    zstd frame checksum; each request gets a 500 naming the blob, the others are served."""
    import logging
    import random
    import sqlite3

    noise = random.Random(3).randbytes(3000)
    path = build_archive(tmp_path / "d.wfz", [
        text("http://site.test/noise.bin", noise, resp_headers=[("Content-Type", "application/octet-stream")]),
        text("http://site.test/page.txt", "words " * 500),
        text("http://site.test/fine.txt", "fine " * 300),
    ])
    conn = sqlite3.connect(path)
    rows = {url: conn.execute("SELECT b.digest, b.codec, b.data FROM exchanges e JOIN blobs b ON b.digest = e.payload "
                              "WHERE e.url=?", (url,)).fetchone()
            for url in ("http://site.test/noise.bin", "http://site.test/page.txt")}
    assert rows["http://site.test/noise.bin"][1] == "raw" and rows["http://site.test/page.txt"][1] == "zstd"
    for digest, _, data in rows.values():
        damaged = bytearray(data)
        damaged[len(damaged) // 2] ^= 0x20
        conn.execute("UPDATE blobs SET data=? WHERE digest=?", (bytes(damaged), digest))
    conn.commit()
    conn.close()
    srv = ReplayServer(path, mode="proxy", confdir=home, miss_report=tmp_path / "misses.jsonl").start()
    try:
        with caplog.at_level(logging.ERROR):
            for url, (digest, codec, _) in rows.items():
                caplog.clear()
                resp, body = proxied(srv, "GET", url)
                assert resp.status == 500 and f"blob sha256:{digest} is corrupt".encode() in body, (codec, body)
                errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
                assert len(errors) == 1 and digest in errors[0].getMessage()
            resp, body = proxied(srv, "GET", "http://site.test/fine.txt")
            assert (resp.status, body) == (200, b"fine " * 300)
    finally:
        srv.stop()


def test_a_miss_report_that_cannot_be_written_only_stops_the_report(site_archive, home, tmp_path, caplog):
    """The path is checked when the server starts, but the file is made on the first miss, which can
    still fail: here its folder is removed meanwhile (root, passing every access check, meets the
    same in /proc). It used to be a 500 and a traceback."""
    import logging

    (tmp_path / "gone").mkdir()
    srv = ReplayServer(site_archive, mode="proxy", confdir=home, miss_report=tmp_path / "gone" / "misses.jsonl").start()
    (tmp_path / "gone").rmdir()
    try:
        with caplog.at_level(logging.WARNING):
            for n in range(2):
                resp, _ = proxied(srv, "GET", f"http://elsewhere.test/{n}")
                assert resp.status == 404 and resp.getheader("X-Webfreeze-Miss") == "1"
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "cannot write the miss report" in warnings[0], warnings
        assert srv.miss_report is None and srv.stats["misses"] == 2 and len(srv.misses) == 2
    finally:
        srv.stop()
    assert not (tmp_path / "gone").exists()
