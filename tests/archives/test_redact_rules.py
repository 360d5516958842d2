"""The redaction rules on their own (archives/redact.py): what is a secret, how each place is
rewritten, and that placeholders are stable within one redaction and unlinkable across two."""

from __future__ import annotations

import gzip
import json

from webfreeze.archives.redact import PLACEHOLDER_PREFIX, Redactor, _payload, is_secret_name

TOKEN = "tok-9f8e7d6c5b4a"


def test_secret_names_follow_the_documented_list():
    for name in ("password", "new_password1", "access_token", "api_key", "session", "X-Api_Key", "client_secret"):
        assert is_secret_name(name), name
    for name in ("csrfmiddlewaretoken", "username", "q", "page", "display_name"):
        assert not is_secret_name(name), name
    assert is_secret_name("csrfmiddlewaretoken", {"csrfmiddlewaretoken"})


def test_headers_keep_names_schemes_and_attributes():
    r = Redactor()
    r.collect_headers([("Authorization", f"Bearer {TOKEN}"), ("Cookie", "a=one1234; theme=dark")])
    r.collect_headers([("Set-Cookie", "sid=abcdef123456; Path=/; HttpOnly")])
    out = dict(r.headers([("Authorization", f"Bearer {TOKEN}"), ("Cookie", "a=one1234; theme=dark"),
                          ("Set-Cookie", "sid=abcdef123456; Path=/; HttpOnly"), ("Accept", "text/html")]))
    assert out["Authorization"] == f"Bearer {r.placeholder(TOKEN)}"
    assert out["Cookie"] == f"a={r.placeholder('one1234')}; theme={r.placeholder('dark')}"
    assert out["Set-Cookie"] == f"sid={r.placeholder('abcdef123456')}; Path=/; HttpOnly"
    assert out["Accept"] == "text/html"
    assert r.kinds == {"authorization": 1, "cookie": 3}


def test_params_bodies_and_json_keys():
    r = Redactor(params=["otp"])
    r.collect_url(f"http://x.lab/cb?code=1&access_token={TOKEN}&otp=12")
    r.collect_body("application/json", json.dumps({"user": "a", "auth": {"api_key": "k-123456789"}}).encode())
    r.collect_body("application/x-www-form-urlencoded", b"username=a&pw=s+3cr%26t!")
    assert set(r.secrets()) == {TOKEN, "12", "k-123456789", "s 3cr&t!"}
    url = r.url(f"http://x.lab/cb?code=1&access_token={TOKEN}&otp=12")
    assert url == f"http://x.lab/cb?code=1&access_token={r.placeholder(TOKEN)}&otp={r.placeholder('12')}"
    body = r.body("application/x-www-form-urlencoded", b"username=a&pw=s+3cr%26t!")
    assert body == f"username=a&pw={r.placeholder('s 3cr&t!')}".encode()
    # a long secret goes wherever it appears; a short one ("12") only where it was found
    assert r.text('{"echo": "k-123456789", "n": 12}') == f'{{"echo": "{r.placeholder("k-123456789")}", "n": 12}}'


def test_encoded_payloads_are_redone_and_placeholders_are_stable_but_unlinkable():
    r = Redactor()
    r.add(TOKEN, "header")
    page = f"<p>token {TOKEN}</p>".encode()
    out = _payload(r, gzip.compress(page), [("Content-Encoding", "gzip")])
    assert gzip.decompress(out) == f"<p>token {r.placeholder(TOKEN)}</p>".encode()
    same = gzip.compress(b"<p>nothing</p>", mtime=0)
    assert _payload(r, same, [("Content-Encoding", "gzip")]) is same  # unchanged bytes are kept
    assert r.placeholder(TOKEN) == r.placeholder(TOKEN) and r.placeholder(TOKEN).startswith(PLACEHOLDER_PREFIX)
    assert Redactor().placeholder(TOKEN) != r.placeholder(TOKEN)  # a new key each redaction
    assert TOKEN not in json.dumps(r.rules())


def test_password_values_of_trajectories():
    r = Redactor()
    traj = {"steps": [{"action": "type", "target": {"name": "Password", "css": "#id_password"}, "value": "hunter2"},
                      {"action": "type", "target": {"name": "Search", "css": "#q"}, "value": "shoes"},
                      {"action": "type", "target": {"type": "password", "name": "PIN code"}, "value": "4321"}]}
    r.collect_trajectory(traj)
    assert sorted(r.secrets()) == ["4321", "hunter2"]


def test_password_values_typed_by_an_agent_in_a_run():
    from webfreeze.archives.redact import redact_trajectory

    r = Redactor()
    step = {"action": "fill('8', 'pw1')", "parsed": {"kind": "fill", "bid": "8", "text": "pw1"}, "typed": "pw1",
            "target": {"name": "Password", "role": "textbox"}}
    r.collect_trajectory({"steps": [step]})
    assert r.secrets() == ["pw1"]
    (out,) = redact_trajectory(r, {"steps": [step]})["steps"]
    ph = r.placeholder("pw1")
    assert out["action"] == f"fill('8', '{ph}')" and out["typed"] == ph and out["parsed"]["text"] == ph


def test_only_secrets_that_look_generated_are_replaced_everywhere():
    r = Redactor()
    r.add("accepted", "cookie")      # an ordinary word: only where it was found
    r.add("s000002", "cookie")       # letters and digits: everywhere
    r.add("sunshine", "password")    # a typed password: everywhere, however weak
    text = "accepted s000002 sunshine"
    assert r.text(text) == f"accepted {r.placeholder('s000002')} {r.placeholder('sunshine')}"
    assert r.headers([("Cookie", "consent=accepted")]) == [("Cookie", f"consent={r.placeholder('accepted')}")]


def test_short_secrets_in_json_bodies_are_replaced_in_their_field():
    r = Redactor()
    body = json.dumps({"user": "a", "pin": 1234, "password": "pw1"}).encode()
    r.collect_body("application/json", body)
    out = json.loads(r.body("application/json", body))
    assert out == {"user": "a", "pin": 1234, "password": r.placeholder("pw1")}
    plain = b'{"user": "a"}'
    assert r.body("application/json", plain) == plain  # nothing to replace: the bytes are kept
