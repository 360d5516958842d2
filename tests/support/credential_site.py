"""A small site of our own (a werkzeug WSGI application on loopback) that hands out and asks for
fifteen kinds of credential, for the redaction tests (tests/bundles/test_credential_kinds.py).

Every secret is drawn at random when the site starts (``CredentialSite.secrets``: kind -> value),
so a test can search every byte of an output for each one. The session script (``SCRIPT``) signs
in through the form, then makes the site's API calls from the page with ``page.evaluate``: the
values it sends appear in the traffic only, never in a page, except where the site itself puts
them in a page (the CSRF field, the token in an inline script, the JSON answers)."""

from __future__ import annotations

import base64
import json
import secrets
import threading

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

HOST = "vault.lab"  # not a reserved test name: its credentials count
USER = "alice"

# kind -> what the refusal (or the findings) must name for it (a part of its line)
NAMED = {
    "basic": "Basic credential",
    "bearer": "Bearer credential",
    "api_key_header": "X-API-Key header",
    "session_cookie": "cookie vsid",
    "csrf_hidden": "form field csrf_token",
    "csrf_json": "JSON key csrf",
    "password_form": "form field password",
    "password_multipart": "multipart field password",
    "password_json": "JSON key password",
    "access_token_query": "query parameter access_token",
    "refresh_token_response": "JSON key refresh_token",
    "jwt_storage": "JSON key id_token",  # (found first where the site hands it over)
    "location_token": "query parameter token",
    "form_response_token": "form field access_token",
}


def _token(n: int = 24) -> str:
    return secrets.token_urlsafe(n)[:n]


class CredentialSite:
    """The site, served on 127.0.0.1 at ``port`` until :meth:`close`."""

    def __init__(self):
        jwt_body = base64.urlsafe_b64encode(json.dumps({"sub": USER, "n": _token(8)}).encode()).rstrip(b"=").decode()
        self.secrets = {
            "basic": f"{USER}:Basic-{_token(10)}",  # sent base64-encoded (below)
            "bearer": "bt-" + _token(),
            "api_key_header": "ak-" + _token(),
            "session_cookie": secrets.token_hex(16),
            "csrf_hidden": "ch-" + _token(),
            "csrf_json": "cj-" + _token(),
            "password_form": "Form-pw-" + _token(6),
            "password_multipart": "".join(secrets.choice("abcdefghjkmnpqrstuvwxyz") for _ in range(7)),  # short, letters
            "password_json": "Json-pw-" + _token(6),
            "access_token_query": "at-" + _token(),
            "refresh_token_response": "rt-" + _token(),
            "inline_script": "inline-" + _token(),
            "jwt_storage": f"eyJhbGciOiJIUzI1NiJ9.{jwt_body}.{_token(20)}",
            "location_token": "lt-" + _token(),
            "form_response_token": "ft-" + _token(),
        }
        self.basic_header = "Basic " + base64.b64encode(self.secrets["basic"].encode()).decode()
        self.seen: list[str] = []
        self.server = make_server("127.0.0.1", 0, self.app, threaded=True)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def values(self) -> dict:
        """Every value to search for: the secrets, the Basic credential as it is sent (its user and
        password only ever travel base64-encoded)."""
        out = dict(self.secrets, basic=self.basic_header.split(" ", 1)[1])
        return out

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------------------ the site
    def _html(self, body: str, **kw) -> Response:
        return Response(f"<!doctype html><html><head><title>Vault</title></head><body>{body}</body></html>",
                        content_type="text/html; charset=utf-8", **kw)

    def _json(self, value, status: int = 200) -> Response:
        return Response(json.dumps(value), status=status, content_type="application/json")

    def app(self, environ, start_response):
        req = Request(environ)
        self.seen.append(f"{req.method} {req.full_path}")
        return self.route(req)(environ, start_response)

    def route(self, req: Request) -> Response:
        s = self.secrets
        logged_in = req.cookies.get("vsid") == s["session_cookie"]
        path = req.path
        if path == "/login" and req.method == "GET":
            return self._html('<h1>Sign in</h1><form method="post" action="/login">'
                              f'<input type="hidden" name="csrf_token" value="{s["csrf_hidden"]}">'
                              '<label>Username <input name="username" type="text"></label>'
                              '<label>Password <input name="password" type="password"></label>'
                              '<button type="submit">Log in</button></form>')
        if path == "/login":
            form = req.form
            if form.get("username") == USER and form.get("password") == s["password_form"] \
                    and form.get("csrf_token") == s["csrf_hidden"]:
                resp = Response(status=303, headers={"Location": "/app"})
                resp.set_cookie("vsid", s["session_cookie"], path="/", httponly=True)
                return resp
            return self._html("<p>no</p>", status=403)
        if not logged_in:
            return self._html("<p>sign in first</p>", status=401)
        if path == "/app":
            # a token the page's own script holds, never sent anywhere: only --secret-env can name it
            # (the page shows the API key: a secret an agent on this page sees)
            return self._html(f'<h1>Your vault</h1><p id="items">3 items</p><p>Your API key: {s["api_key_header"]}</p>'
                              f'<script>window.APP_TOKEN = "{s["inline_script"]}";</script>')
        if path == "/api/basic":
            ok = req.headers.get("Authorization") == self.basic_header
            return self._json({"ok": ok}, 200 if ok else 401)
        if path == "/api/bearer":
            ok = req.headers.get("Authorization") == f"Bearer {s['bearer']}"
            return self._json({"ok": ok}, 200 if ok else 401)
        if path == "/api/key":
            ok = req.headers.get("X-API-Key") == s["api_key_header"]
            return self._json({"ok": ok}, 200 if ok else 401)
        if path == "/api/csrf":
            return self._json({"csrf": s["csrf_json"]})
        if path == "/api/change":
            ok = req.headers.get("X-CSRF-Token") == s["csrf_json"]
            return self._json({"ok": ok}, 200 if ok else 403)
        if path == "/api/upload":
            ok = req.form.get("password") == s["password_multipart"]
            return self._json({"ok": ok, "size": len(req.files["file"].read()) if "file" in req.files else 0})
        if path == "/api/json-login":
            data = req.get_json(silent=True) or {}
            ok = data.get("password") == s["password_json"]
            return self._json({"ok": ok, "id_token": s["jwt_storage"]} if ok else {"ok": False}, 200 if ok else 403)
        if path == "/api/me":
            ok = req.headers.get("X-Access-Token") == s["jwt_storage"]
            return self._json({"user": USER if ok else None}, 200 if ok else 401)
        if path == "/api/data":
            ok = req.args.get("access_token") == s["access_token_query"]
            return self._json({"rows": [1, 2, 3] if ok else []}, 200 if ok else 401)
        if path == "/api/token":
            return self._json({"token_type": "bearer", "expires_in": 3600, "refresh_token": s["refresh_token_response"]})
        if path == "/oauth/authorize":
            return Response(status=302, headers={"Location": f"/oauth/landing?token={s['location_token']}&state=x"})
        if path == "/oauth/landing":
            return self._html("<p>linked</p>")
        if path == "/oauth/form-token":
            return Response(f"access_token={s['form_response_token']}&token_type=bearer",
                            content_type="application/x-www-form-urlencoded")
        return self._html("<p>not here</p>", status=404)


def session_script(site: CredentialSite) -> str:
    """The ``record session --script`` file: sign in through the form (the password typed into a
    password field), then every API call, from the page."""
    s = site.secrets
    calls = {
        "basic": site.basic_header, "bearer": s["bearer"], "key": s["api_key_header"],
        "multipart": s["password_multipart"], "json": s["password_json"], "query": s["access_token_query"],
    }
    return f'''
import json

from webfreeze.recorder.session import record_answer

CALLS = json.loads({json.dumps(json.dumps(calls))})
JS = """async (c) => {{
  const j = async (r) => {{ const x = await r; return x.json(); }};
  await j(fetch('/api/basic', {{headers: {{Authorization: c.basic}}}}));
  await j(fetch('/api/bearer', {{headers: {{Authorization: 'Bearer ' + c.bearer}}}}));
  await j(fetch('/api/key', {{headers: {{'X-API-Key': c.key}}}}));
  const csrf = (await j(fetch('/api/csrf'))).csrf;
  await j(fetch('/api/change', {{method: 'POST', headers: {{'X-CSRF-Token': csrf}}, body: 'x'}}));
  const fd = new FormData(); fd.append('user', 'alice'); fd.append('password', c.multipart);
  await j(fetch('/api/upload', {{method: 'POST', body: fd}}));
  const login = await j(fetch('/api/json-login', {{method: 'POST', headers: {{'Content-Type': 'application/json'}},
                                                 body: JSON.stringify({{user: 'alice', password: c.json}})}}));
  localStorage.setItem('jwt', login.id_token);
  await j(fetch('/api/me', {{headers: {{'X-Access-Token': localStorage.getItem('jwt')}}}}));
  await j(fetch('/api/data?access_token=' + encodeURIComponent(c.query)));
  await j(fetch('/api/token', {{method: 'POST', body: 'grant_type=refresh'}}));
  await fetch('/oauth/authorize');
  await (await fetch('/oauth/form-token', {{method: 'POST', body: 'code=1'}})).text();
  return true;
}}"""


def run(page):
    page.set_default_timeout(60_000)
    page.get_by_label("Username").fill({USER!r})
    page.wait_for_timeout(50)
    page.get_by_label("Password").fill({s["password_form"]!r})
    page.wait_for_timeout(50)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/app")
    page.evaluate(JS, CALLS)
    record_answer(page, "3 items", page.locator("#items"))
    page.wait_for_timeout(50)
'''
