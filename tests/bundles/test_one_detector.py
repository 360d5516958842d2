"""One detector for refusal and redaction (issue 44): what ``archive export`` / ``archive pack -o`` /
``bundle pack`` refuse is exactly what ``archive redact`` replaces. Each archive below holds one
secret in one place; the refusal names it, and once redacted nothing is left to refuse."""

from __future__ import annotations

import gzip
import json

import pytest
from cli_runner import invoke

from webfreeze.archives import Archive, Exchange
from webfreeze.bundles.redaction import archive_findings

SECRET = "s3cr-et-Val"  # letters, digits and a dash: replaced wherever it occurs
SHORT = "kq"            # an ordinary short value: replaced only where it is found
HTML = [("Content-Type", "text/html; charset=utf-8")]
JSON_CT = [("Content-Type", "application/json")]


def _ex(url, *, method="GET", req_headers=(), req_body=None, resp_headers=HTML, payload=b"<p>ok</p>", status=200):
    return Exchange(url=url, captured_at="2024-05-01T10:00:00Z", status=status, method=method,
                    req_headers=list(req_headers), req_body=req_body, resp_headers=list(resp_headers),
                    payload=payload)


# place -> (exchange, what the refusal names)
CASES = {
    "query": (_ex(f"http://a.lab/x?api_key={SHORT}"), "query parameter api_key"),
    "plain-text form": (_ex("http://a.lab/t", method="POST", req_body=f"grant=1&token={SHORT}".encode(),
                            req_headers=[("Content-Type", "text/plain")]), "form field token"),
    "json without its type": (_ex("http://a.lab/j", method="POST", req_body=json.dumps({"pw": SHORT}).encode()),
                              "JSON key pw"),
    "json number": (_ex("http://a.lab/n", method="POST", req_body=b'{"pin_password": 4821}',
                        req_headers=JSON_CT), "JSON key pin_password"),
    "multipart": (_ex("http://a.lab/m", method="POST",
                      req_headers=[("Content-Type", "multipart/form-data; boundary=B")],
                      req_body=f'--B\r\nContent-Disposition: form-data; name="password"\r\n\r\n{SHORT}\r\n--B--\r\n'
                      .encode()), "multipart field password"),
    "page input": (_ex("http://a.lab/f", payload=f'<form><input type="hidden" name="csrf_token" value="{SHORT}">'
                                                 f'</form>'.encode()), "form field csrf_token (a page's input)"),
    "json response": (_ex("http://a.lab/r", resp_headers=JSON_CT,
                          payload=f'{{"a": 1, "refresh_token" :  "{SHORT}"}}'.encode()), "JSON key refresh_token"),
    "gzip json response": (_ex("http://a.lab/g", resp_headers=JSON_CT + [("Content-Encoding", "gzip")],
                               payload=gzip.compress(json.dumps({"access_token": SECRET}).encode())),
                           "JSON key access_token"),
    "location": (_ex("http://a.lab/l", status=302, resp_headers=[("Location", f"/in?token={SHORT}")], payload=b""),
                 "query parameter token of the Location header"),
    "cookie": (_ex("http://a.lab/c", req_headers=[("Cookie", f"theme={SHORT}")]), "cookie theme"),
    "set-cookie": (_ex("http://a.lab/s", resp_headers=HTML + [("Set-Cookie", f"sid={SECRET}; Path=/")]),
                   "cookie sid (Set-Cookie header)"),
    "api key header": (_ex("http://a.lab/k", req_headers=[("X-API-Key", SHORT)]), "X-API-Key header"),
    "bearer": (_ex("http://a.lab/b", req_headers=[("Authorization", f"Bearer {SECRET}")]), "Bearer credential"),
}


def _archive(path, ex):
    with Archive.create(path) as arc:
        sid = arc.new_session("crawl")
        ex.session_id = sid
        arc.add_exchange(ex)
        # the same page again, on a reserved test name: never refused
        arc.add_exchange(Exchange(url="http://shop.test/", captured_at="2024-05-01T10:00:00Z", status=200,
                                  resp_headers=HTML + [("Set-Cookie", "shop=abc123def")], payload=b"<p>demo</p>",
                                  session_id=sid))
    return path


@pytest.mark.parametrize("place", sorted(CASES))
def test_what_is_refused_is_what_redaction_replaces(place, tmp_path):
    ex, named = CASES[place]
    src = _archive(tmp_path / "a.wfz", ex)
    found = archive_findings(src)
    assert len(found) == 1 and named in found[0][1], found
    out = tmp_path / "x.warc.gz"
    r = invoke("archive", "export", src, "--format", "warc", "-o", out)
    assert r.returncode == 1 and named in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()
    red = tmp_path / "red.wfz"
    assert invoke("archive", "redact", src, "-o", red).returncode == 0
    assert archive_findings(red) == []  # nothing left that a refusal would name
    r = invoke("archive", "export", red, "--format", "warc", "-o", out)
    assert r.returncode == 0, r.stderr
    assert invoke("archive", "verify", red).returncode == 0


def test_a_recorded_sessions_typed_password_in_the_archive_is_refused_and_replaced(tmp_path):
    """A session's reference trajectory is also kept in its archive (``trajectories/<id>.json``):
    a short password typed there is found (the refusal names the document) and replaced."""
    src = tmp_path / "a.wfz"
    with Archive.create(src) as arc:
        sid = arc.new_session("session")
        ex = _ex("http://a.lab/login")
        ex.session_id = sid
        arc.add_exchange(ex)
        arc.put_document(f"trajectories/{sid}.json", {"start_url": "http://a.lab/login", "steps": [
            {"action": "type", "target": {"name": "Password", "type": "password"}, "value": "pw1",
             "url": "http://a.lab/login"}]})
    (found,) = archive_findings(src)
    assert found == ("password", f"a value typed into a password field in document trajectories/{sid}.json")
    red = tmp_path / "red.wfz"
    assert invoke("archive", "redact", src, "-o", red).returncode == 0
    assert archive_findings(red) == []
    with Archive.open(red) as arc:
        (step,) = arc.get_document(f"trajectories/{sid}.json")["steps"]
    assert step["value"].startswith("wfredacted-")


# On a reserved test name the refusal passes over what the site issued (its cookies, its tokens),
# never what a person supplied: `record crawl --resolve radicale.test=127.0.0.1:PORT` with
# `--http-credentials` points a test name at a real server with a real password.
SUPPLIED = {
    "basic credential": (_ex("http://cal.test/", req_headers=[("Authorization", "Basic YWxpY2U6d29uZGVy")]),
                         ("authorization", "the Basic credential of the Authorization header in the request of "
                                           "GET http://cal.test/")),
    "proxy credential": (_ex("http://cal.test/p", req_headers=[("Proxy-Authorization", "Basic cHJveHk6cHc=")]),
                         ("authorization", "the Basic credential of the Proxy-Authorization header")),
    "posted password": (_ex("http://cal.test/login", method="POST", req_body=b"user=alice&password=kq9",
                            req_headers=[("Content-Type", "application/x-www-form-urlencoded")]),
                        ("password", "the value of field password in the request of POST http://cal.test/login")),
    "json password": (_ex("http://cal.test/api", method="POST", req_body=b'{"login": {"passwd": "kq9"}}',
                          req_headers=JSON_CT), ("password", "the value of field passwd")),
    "typed password": (None, ("password", "a value typed into a password field in document trajectories/")),
    "client secret": (_ex("http://cal.test/token", method="POST", req_body=b"client_secret=kq9&grant=1",
                          req_headers=[("Content-Type", "application/x-www-form-urlencoded")]),
                      ("password", "the value of field client_secret")),
}


def test_on_a_test_name_a_field_redaction_keeps_is_not_refused(tmp_path):
    """Only fields redaction replaces are refused (else "redact it first" would lead nowhere):
    passengers=2, a PIN or a passphrase posted to a test name pass."""
    src = tmp_path / "a.wfz"
    with Archive.create(src) as arc:
        sid = arc.new_session("session")
        e = _ex("http://cal.test/book", method="POST", req_body=b"passengers=2&pin=4821&passphrase=open+sesame",
                req_headers=[("Content-Type", "application/x-www-form-urlencoded")])
        e.session_id = sid
        arc.add_exchange(e)
    assert archive_findings(src) == []


@pytest.mark.parametrize("place", sorted(SUPPLIED))
def test_on_a_test_name_what_a_person_supplied_is_still_refused(place, tmp_path):
    ex, (kind, named) = SUPPLIED[place]
    src = tmp_path / "a.wfz"
    with Archive.create(src) as arc:
        sid = arc.new_session("session")
        for e in [ex or _ex("http://cal.test/login"),
                  _ex("http://cal.test/s", resp_headers=HTML + [("Set-Cookie", f"sid={SECRET}; Path=/")]),
                  _ex(f"http://cal.test/q?token={SHORT}")]:  # (site-issued: not refused on a test name)
            e.session_id = sid
            arc.add_exchange(e)
        if ex is None:
            arc.put_document(f"trajectories/{sid}.json", {"start_url": "http://cal.test/login", "steps": [
                {"action": "type", "target": {"name": "Password", "type": "password"}, "value": "kq9",
                 "url": "http://cal.test/login"}]})
    (found,) = archive_findings(src)
    assert found[0] == kind and found[1].startswith(named), found
    out = tmp_path / "x.wacz"
    r = invoke("archive", "export", src, "--format", "wacz", "-o", out)
    assert r.returncode == 1 and "refused" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not out.exists()
    red = tmp_path / "red.wfz"
    assert invoke("archive", "redact", src, "-o", red).returncode == 0
    assert archive_findings(red) == []
    assert invoke("archive", "export", red, "--format", "wacz", "-o", out).returncode == 0
