"""The redaction rules on their own (archives/redact.py): what is a secret, how each place is
rewritten, and that placeholders are stable within one redaction and unlinkable across two."""

from __future__ import annotations

import gzip
import json

from webfreeze.archives.redact import PLACEHOLDER_PREFIX, Redactor, _payload, is_secret_name

TOKEN = "tok-9f8e7d6c5b4a"


def test_secret_names_follow_the_documented_list():
    for name in ("password", "new_password1", "access_token", "api_key", "session", "X-Api_Key", "client_secret",
                 "csrfmiddlewaretoken", "csrf_token", "__FORM_TOKEN", "refresh_token"):
        assert is_secret_name(name), name
    for name in ("username", "q", "page", "display_name"):
        assert not is_secret_name(name), name
    assert is_secret_name("otp", {"otp"})
    # a translation file's keys (Syncthing's lang-en.json) map to the same words: no secret there;
    # a key with spaces whose value is something else still holds one
    r = Redactor()
    strings = {"GUI Authentication: Set User and Password": "GUI Authentication: Set User and Password",
               "apiKey": "jLYtKJ7mZq2vW9xPp4sRcUe8nTgHbD3f", "Admin Password": "hunter2x"}
    r.collect_body("application/json", json.dumps(strings).encode())
    assert r.secrets() == ["jLYtKJ7mZq2vW9xPp4sRcUe8nTgHbD3f", "hunter2x"]


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


MULTIPART = (b'--XyZ\r\nContent-Disposition: form-data; name="user"\r\n\r\nalice\r\n'
             b'--XyZ\r\nContent-Disposition: form-data; name="password"\r\n\r\nkitten\r\n'
             b'--XyZ\r\nContent-Disposition: form-data; name="file"; filename="password"\r\n'
             b'Content-Type: text/plain\r\n\r\nkitten\r\n--XyZ--\r\n')


def test_multipart_fields_are_found_and_replaced_by_name():
    from webfreeze.archives.bodykey import body_key

    ct = "multipart/form-data; boundary=XyZ"
    r = Redactor()
    r.collect_body(ct, MULTIPART, "the request body of POST http://x.lab/up")
    assert r.secrets() == ["kitten"]  # short and letters only: in its field, not in the file's bytes
    assert r.findings() == [("param", "multipart field password in the request body of POST http://x.lab/up")]
    out = r.body(ct, MULTIPART)
    ph = r.placeholder("kitten").encode()
    assert b'name="password"\r\n\r\n' + ph + b"\r\n" in out and out.count(b"kitten") == 1  # the file's own bytes
    assert "kitten" in body_key(ct, MULTIPART) and "kitten" not in body_key(ct, out)  # the index holds no secret


def test_responses_give_secrets_json_and_form_fields_and_location_urls():
    r = Redactor()
    refresh = "rt-short1"
    body = ('{"token_type": "bearer",\n "refresh_token" : "%s", "n": 1}' % refresh).encode()
    r.collect_body("application/json", body, "the response body of POST http://x.lab/token")
    r.collect_body("application/x-www-form-urlencoded", b"access_token=ft1&token_type=bearer", "a form response")
    r.collect_headers([("Location", "/landing?token=lt9&state=x")], "the response of GET http://x.lab/auth")
    assert r.secrets() == [refresh, "ft1", "lt9"]
    kinds = [what for _, what in r.findings()]
    assert kinds == ["JSON key refresh_token in the response body of POST http://x.lab/token",
                     "form field access_token in a form response",
                     "query parameter token of the Location header in the response of GET http://x.lab/auth"]
    out = _payload(r, body, [("Content-Type", "application/json")])
    # replaced in place, the formatting kept (a placeholder of the same value as everywhere else)
    assert out == body.replace(refresh.encode(), r.placeholder(refresh).encode())
    form = _payload(r, b"access_token=ft1&token_type=bearer", [("Content-Type", "application/x-www-form-urlencoded")])
    assert form == f"access_token={r.placeholder('ft1')}&token_type=bearer".encode()
    (loc,) = r.headers([("Location", "/landing?token=lt9&state=x")])
    assert loc == ("Location", f"/landing?token={r.placeholder('lt9')}&state=x")


def test_a_value_the_user_names_goes_everywhere_however_short():
    r = Redactor()
    r.add_given("zq7w", "APP_TOKEN")
    assert r.findings() == [("given", "the value of $APP_TOKEN (--secret-env)")]
    assert r.text('<script>t = "zq7w"</script>') == f'<script>t = "{r.placeholder("zq7w")}"</script>'


def test_a_body_beyond_the_decoding_limit_is_refused_not_passed_over(tmp_path):
    import zlib

    from cli_runner import invoke

    from webfreeze.archives import Archive, Exchange
    from webfreeze.archives.content import MAX_DECODED

    c = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    chunk = b"\0" * (1 << 20)
    bomb = b"".join(c.compress(chunk) for _ in range(MAX_DECODED // len(chunk) + 1)) + c.flush()
    src = tmp_path / "a.wfz"
    with Archive.create(src) as arc:
        sid = arc.new_session("crawl")
        arc.add_exchange(Exchange(url="http://x.lab/big", captured_at="2024-05-01T10:00:00Z", status=200,
                                  resp_headers=[("Content-Type", "text/html"), ("Content-Encoding", "gzip"),
                                                ("Set-Cookie", "sid=abcdef123456")],
                                  payload=bomb, session_id=sid))
    r = invoke("archive", "redact", src, "-o", tmp_path / "out.wfz")
    assert r.returncode == 1 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "http://x.lab/big" in r.stderr and "refused rather than passed over" in r.stderr
    assert not (tmp_path / "out.wfz").exists()


def test_page_inputs_are_read_as_a_browser_reads_them():
    """Unquoted values, a ">" inside a quoted value, "/" between attributes, a name that only
    appears inside another attribute's value: each input is read as the browser reads it."""
    page = (b"<form><input type=hidden name=csrf_token value=ab1><input name=\"authenticity_token\" value=\"q>w\">"
            b"<input/name='pw'/value='s3'/><input placeholder=\" name='password' value='x'\" name=q value=kept></form>")
    r = Redactor()
    r.collect_body("text/html", page)
    assert sorted(r.secrets()) == ["ab1", "q>w", "s3"]
    out = r.response_fields("text/html", page)
    assert out == page.replace(b"ab1", r.placeholder("ab1").encode()).replace(
        b"q>w", r.placeholder("q>w").encode()).replace(b"'s3'", f"'{r.placeholder('s3')}'".encode())


def test_a_csrf_token_in_a_meta_tag():
    """Rails puts its CSRF token in <meta name="csrf-token" content=...> (masked afresh in each page,
    so it is found in no form): read like an input, its content for a value; a meta tag that names
    the token's parameter or header holds no secret."""
    page = (b'<head><meta charset=utf-8><meta name="csrf-param" content="authenticity_token">'
            b'<meta name="csrf-token" content="mAsKeD+t0k3n=="><meta name=viewport content=x>'
            b'<meta name="_csrf_header" content="X-CSRF-TOKEN">')
    r = Redactor()
    r.collect_body("text/html; charset=utf-8", page)
    assert r.secrets() == ["mAsKeD+t0k3n=="]
    assert r.findings() == [("param", "meta tag csrf-token")]
    assert r.response_fields("text/html", page) == page.replace(b"mAsKeD+t0k3n==", r.placeholder("mAsKeD+t0k3n==").encode())


def test_secret_parameters_of_a_fragment():
    """An OAuth implicit grant sends its token in the fragment of the Location it redirects to."""
    r = Redactor()
    location = [("Location", "https://app.lab/cb#access_token=ab&token_type=bearer")]
    r.collect_headers(location)
    assert r.secrets() == ["ab"]
    assert r.headers(location) == [("Location", f"https://app.lab/cb#access_token={r.placeholder('ab')}"
                                                "&token_type=bearer")]
    assert r.url("https://app.lab/doc?x=1#section-2") == "https://app.lab/doc?x=1#section-2"


def test_a_placeholder_is_not_redacted_again():
    """An archive redacted once (``record session --redact``) and then again (a second session
    recorded into it with ``--redact``, found with Wagtail's admin login): the first session's
    placeholders stay as they are, so its reference trajectory, which types the first placeholder,
    still matches its login POST and its cookies. A new key would hash the placeholder itself."""
    first = Redactor()
    first.add("s3cret-pass!", "password")
    first.add("a" * 32, "header")
    body = first.body("application/x-www-form-urlencoded", b"username=ed&password=s3cret-pass%21")
    cookie = first.headers([("Cookie", f"sessionid={'a' * 32}")])
    assert PLACEHOLDER_PREFIX.encode() in body and PLACEHOLDER_PREFIX in cookie[0][1]

    again = Redactor()
    again.collect_body("application/x-www-form-urlencoded", body)
    again.collect_headers(cookie)
    assert again.secrets() == []
    assert again.body("application/x-www-form-urlencoded", body) == body
    assert again.headers(cookie) == cookie
    assert again.url(f"http://x.lab/cb?access_token={first.placeholder('a' * 32)}") == \
        f"http://x.lab/cb?access_token={first.placeholder('a' * 32)}"
    set_cookie = [("Set-Cookie", f"sessionid={first.placeholder('a' * 32)}; Path=/"),
                  ("Authorization", f"Bearer {first.placeholder('a' * 32)}")]
    assert again.headers(set_cookie) == set_cookie


def _login_crawl(path, page: bytes) -> None:
    """An archive shaped like a crawl made with --login-script (I Hate Money's): the login itself is
    not recorded, so the pages carry the session cookie and a form's CSRF token, never the password."""
    from webfreeze.archives import Archive, Exchange

    with Archive.create(path) as arc:
        sid = arc.new_session("crawl")
        arc.add_exchange(Exchange(url="http://ihm.test/skitrip/", captured_at="2024-05-01T10:00:00Z", status=200,
                                  req_headers=[("Cookie", "session=eyJwcm9qZWN0IjoxfQ.Zx1-9aBc")],
                                  resp_headers=[("Content-Type", "text/html; charset=utf-8")],
                                  payload=page, session_id=sid))


def test_a_secret_env_value_found_nowhere_is_not_counted_as_replaced(tmp_path, monkeypatch):
    """`--secret-env VAR` names a value to look for; the summary counted it as a secret replaced
    whether or not anything held it (`1 given` for a password a login crawl never records), so a
    mistyped variable or a wrong password looked like a redaction done. Only a value found counts;
    one found nowhere is named in a note."""
    from cli_runner import invoke

    page = (b'<html><body><form method="post" action="/skitrip/add">'
            b'<input id="csrf_token" name="csrf_token" type="hidden" value="IjAxNWM5.axHMKQ.wzjbnTPX">'
            b'<p>Chalet rent</p></form></body></html>')
    src = tmp_path / "crawl.wfz"
    _login_crawl(src, page)
    monkeypatch.setenv("IHM_PASSWORD", "s3cret-ski")
    r = invoke("archive", "redact", src, "-o", tmp_path / "out.wfz", "--secret-env", "IHM_PASSWORD")
    assert r.returncode == 0, r.stderr
    assert "2 secrets replaced (1 cookie, 1 param)" in r.stdout, r.stdout
    assert "note: --secret-env IHM_PASSWORD: its value occurs nowhere in" in r.stderr, r.stderr
    from webfreeze.archives import Archive

    with Archive.open(tmp_path / "out.wfz") as arc:
        assert arc.meta()["redaction"]["by_kind"] == {"cookie": 1, "param": 1}

    # the same value in a page is found, replaced and counted; no note
    held = tmp_path / "held.wfz"
    _login_crawl(held, page.replace(b"Chalet rent", b"Private code: s3cret-ski"))
    r = invoke("archive", "redact", held, "-o", tmp_path / "held-out.wfz", "--secret-env", "IHM_PASSWORD")
    assert r.returncode == 0, r.stderr
    assert "3 secrets replaced (1 cookie, 1 given, 1 param)" in r.stdout, r.stdout
    assert "note:" not in r.stderr, r.stderr


def test_a_short_password_written_in_an_instruction_is_replaced_there(tmp_path):
    """A typed password under 6 characters is replaced only in its field, not wherever the word
    occurs; an instruction that says it ("log in with password pw1") kept it, so the bundle shared
    the password, and an agent that typed it met a login POST holding the placeholder: the task
    could not be done on the redacted archive. The instruction now says the placeholder, wherever
    the whole instruction occurs (the task line, a run's prompts), and the word on a page stays."""
    from webfreeze.archives.redact import collect_suite, redact_suite
    from webfreeze.llm.cassette import canonical_request

    instruction = "Log in as alice with password pw1 (not pw12) and say how many items the vault holds."
    suite = tmp_path / "suite"
    (suite / "references").mkdir(parents=True)
    steps = [{"action": "type", "value": "alice", "target": {"name": "user", "type": "text"}},
             {"action": "type", "value": "pw1", "target": {"name": "pass", "type": "password"}}]
    (suite / "references" / "vault.json").write_text(json.dumps({"steps": steps}))
    task = {"id": "vault", "instruction": instruction, "start_url": "http://vault.test/login",
            "ground_truth": {"answer": {"exact": "3"}, "reference_trajectory": "references/vault.json"}}
    (suite / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    (suite / "manifest.json").write_text(json.dumps({"format": "webfreeze-suite", "version": 1, "name": "v"}))
    r = Redactor()
    collect_suite(suite, r)
    redact_suite(suite, tmp_path / "out", r)
    ph = r.placeholder("pw1")
    said = json.loads((tmp_path / "out" / "tasks.jsonl").read_text())["instruction"]
    assert said == instruction.replace(" pw1 ", f" {ph} ")  # (the word alone: "pw12" is another word)
    typed = json.loads((tmp_path / "out" / "references" / "vault.json").read_text())["steps"][1]["value"]
    assert typed == ph  # (what the agent is told to type is what the reference types)
    assert b"pw1 " not in (tmp_path / "out" / "tasks.jsonl").read_bytes()

    def prompt(goal: str) -> str:  # an LLM agent's request: the goal, then the page, which shows "pw1"
        return canonical_request({"model": "m", "messages": [
            {"role": "system", "content": f"Goal: {goal}"}, {"role": "user", "content": "Page: hint pw1\n"}]})

    # the cassette's prompt, redacted, is the prompt the agent makes from the redacted instruction
    assert r.text(prompt(instruction)) == prompt(said)
    assert r.data(prompt(instruction).encode()) == prompt(said).encode()
    assert r.text("Page: hint pw1") == "Page: hint pw1"  # (the word elsewhere stays)


def test_a_short_password_is_replaced_where_the_instruction_gives_it_and_only_there():
    """(Review of the rule above.) The word is replaced throughout an instruction that gives it as
    the password (quoted, or after a word naming it), not in one that does not ("the test site"),
    not where it is also a value typed into another field (admin / admin: the agent must type the
    user name); a longer instruction holding a shorter one is replaced whole (longest first)."""
    r = Redactor()
    r.collect_trajectory({"instruction": "Sign in with password pw1",
                          "steps": [{"action": "type", "value": "admin", "target": {"name": "user", "type": "text"}},
                                    {"action": "type", "value": "admin", "target": {"name": "pass", "type": "password"}},
                                    {"action": "type", "value": "test", "target": {"name": "pin", "type": "password"}},
                                    {"action": "type", "value": "pw1", "target": {"name": "pw", "type": "password"}}]})
    short = "Sign in with password pw1"
    longer = short + " then change it from pw1 to pw2"
    for text in ("Log in as admin with password admin.", "Use the PIN 'test' on the test site.", longer,
                 "Open the test site."):
        r.collect_instruction(text)
    ph_test, ph_pw1 = r.placeholder("test"), r.placeholder("pw1")
    assert r.text("Log in as admin with password admin.") == "Log in as admin with password admin."
    assert r.text("Use the PIN 'test' on the test site.") == f"Use the PIN '{ph_test}' on the {ph_test} site."
    assert r.text("Open the test site.") == "Open the test site."
    assert r.text(f"Goal: {longer}") == f"Goal: Sign in with password {ph_pw1} then change it from {ph_pw1} to pw2"
    assert r.text(short) == f"Sign in with password {ph_pw1}"  # (the session's own instruction)
    assert r.data(longer.encode()) == f"Sign in with password {ph_pw1} then change it from {ph_pw1} to pw2".encode()
    assert r.data(b"\xff\xfe binary pw1") == b"\xff\xfe binary pw1"


def test_a_short_password_in_a_cassette_is_replaced_where_it_is_a_value():
    """An LLM agent's answer that typed the short password (``{"text": "pw1"}``, ``fill('12', 'pw1')``)
    and the action history of later prompts are replaced with the placeholder, so a re-run from the
    redacted cassette types what the redacted login holds; the word in a page's text stays."""
    r = Redactor()
    r.collect_trajectory({"steps": [{"action": "type", "value": "pw1", "target": {"name": "pass", "type": "password"}}]})
    ph = r.placeholder("pw1")
    assert r.cassette_text(json.dumps({"arguments": json.dumps({"text": "pw1"})})) == \
        json.dumps({"arguments": json.dumps({"text": ph})})
    assert r.cassette_text("fill('12', 'pw1')") == f"fill('12', '{ph}')"
    assert r.cassette_text("Page: the hint is pw1 for tests") == "Page: the hint is pw1 for tests"
    assert r.text("fill('12', 'pw1')") == "fill('12', 'pw1')"  # (archives and pages: the field's value only)
