"""`record crawl --login-script`: a crawl behind a site's own login form (a password and a CSRF
token, as Wagtail's and Django's admin have), on a small real server of our own on loopback, with
real Chromium and mitmproxy. Without a way to sign in, a crawl of such a site records its login
page under every URL."""

from __future__ import annotations

import json
import os
import secrets
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webfreeze.archives import Archive
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

HOST = "cms.test"
PASSWORD = "harbour-Tide-7741!"

LOGIN_SCRIPT = '''
import os


def run(page):
    page.set_default_timeout(5_000)  # (a wrong password: the wait for the dashboard fails soon)
    page.wait_for_url("**/login/**")
    page.get_by_label("Username").fill("editor")
    page.get_by_label("Password").fill(os.environ["CMS_PASSWORD"])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/admin/pages/")
'''


class CmsSite:
    """``/admin/`` and its pages need a session; anyone else is sent to ``/login/?next=...``, a
    form with a CSRF token (in a cookie and a hidden field) and a password, which signs in to the
    page explorer. The dashboard's stylesheet (behind the login too) is cut off mid-body the
    first time, so the crawl's check of the dashboard misses it and fetches it again live."""

    def __init__(self):
        self.sessions: set[str] = set()
        self.css_served = 0  # /admin/site.css, behind the login: its first answer is cut off mid-body
        self.served: list[tuple[str, str, bool]] = []  # (method, path, with a session)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _cookies(self) -> dict:
                out = {}
                for part in (self.headers.get("Cookie") or "").split(";"):
                    k, _, v = part.strip().partition("=")
                    if k:
                        out[k] = v
                return out

            def _send(self, code, body=b"", headers=()):
                self.send_response(code)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _page(self, title, body, headers=()):
                css = '<link rel="stylesheet" href="/admin/site.css">' if title == "Dashboard" else ""
                html = (f"<!doctype html><html><head><title>{title}</title>{css}</head>"
                        f"<body><h1>{title}</h1>{body}</body></html>").encode()
                self._send(200, html, [("Content-Type", "text/html; charset=utf-8"), *headers])

            def do_GET(self):
                path = urllib.parse.urlsplit(self.path).path
                logged = self._cookies().get("sessionid") in owner.sessions
                owner.served.append(("GET", path, logged))
                if path == "/login/":
                    token = secrets.token_hex(16)
                    self._page("Sign in", '<form method="post" action="/login/">'
                               f'<input type="hidden" name="csrfmiddlewaretoken" value="{token}">'
                               '<label for="u">Username</label><input id="u" name="username">'
                               '<label for="p">Password</label><input id="p" name="password" type="password">'
                               '<button type="submit">Sign in</button></form>',
                               [("Set-Cookie", f"csrftoken={token}; Path=/")])
                elif path.startswith("/admin/") and not logged:
                    self._send(302, headers=[("Location", f"/login/?next={path}")])
                elif path == "/admin/site.css":
                    owner.css_served += 1
                    css = b"h1 { color: rgb(0, 90, 40); } /* the dashboard's own style */" * 20
                    if owner.css_served == 1:  # the connection closes early: the crawl's check misses it
                        self.send_response(200)
                        self.send_header("Content-Type", "text/css")
                        self.send_header("Content-Length", str(len(css)))
                        self.end_headers()
                        self.wfile.write(css[:40])
                        self.wfile.flush()
                        self.close_connection = True
                        return
                    self._send(200, css, [("Content-Type", "text/css")])
                elif path == "/admin/":
                    self._page("Dashboard", '<a href="/admin/pages/">Pages</a> <a href="/admin/images/">Images</a>')
                elif path == "/admin/pages/":
                    self._page("Page explorer", '<a href="/admin/pages/7/edit/">Visiting the lab</a>')
                elif path in ("/admin/images/", "/admin/pages/7/edit/"):
                    self._page("Images" if "images" in path else "Editing Visiting the lab", "<p>ok</p>")
                else:
                    self._send(404, b"not found", [("Content-Type", "text/plain")])

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                form = dict(urllib.parse.parse_qsl(body))
                owner.served.append(("POST", self.path, False))
                ok = (form.get("csrfmiddlewaretoken") == self._cookies().get("csrftoken")
                      and form.get("username") == "editor" and form.get("password") == PASSWORD)
                if not ok:
                    self._page("Sign in", "<p>wrong password</p>")
                    return
                session = secrets.token_hex(16)
                owner.sessions.add(session)
                self._send(302, headers=[("Location", "/admin/pages/"), ("Set-Cookie", f"sessionid={session}; Path=/")])

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def cms():
    site = CmsSite()
    yield site
    site.close()


def _crawl(cli, tmp_path, cms, *extra, password=PASSWORD):
    env = dict(os.environ, WEBFREEZE_HOME=str(tmp_path / "home"), CMS_PASSWORD=password)
    return cli("record", "crawl", f"http://{HOST}/admin/", "--archive", tmp_path / "cms.wfz", "--depth", "2",
               "--resolve", f"{HOST}=127.0.0.1:{cms.port}", *extra, env=env, timeout=600)


def test_a_crawl_signs_in_with_a_login_script_then_visits_the_pages_behind_it(tmp_path, cli, cms):
    script = tmp_path / "login.py"
    script.write_text(LOGIN_SCRIPT)
    result = _crawl(cli, tmp_path, cms, "--login-script", script, "--redact", "--secret-env", "CMS_PASSWORD")
    assert result.returncode == 0, result.stderr
    assert "4 pages in total (complete)" in result.stdout, result.stdout
    with Archive.open(tmp_path / "cms.wfz") as arc:
        pages = {p.url: p.title for p in arc.pages()}
        assert pages == {f"http://{HOST}/admin/": "Dashboard", f"http://{HOST}/admin/pages/": "Page explorer",
                         f"http://{HOST}/admin/images/": "Images",
                         f"http://{HOST}/admin/pages/7/edit/": "Editing Visiting the lab"}, pages
        # the stylesheet cut off at capture, fetched again by the page's check: with the session's
        # cookies, so the site answered it (not with its login page, recorded for the stylesheet)
        styles = [ex.status for ex in arc.exchanges() if ex.url == f"http://{HOST}/admin/site.css"]
        assert styles and set(styles) == {200}, styles
        assert not [ex.url for ex in arc.exchanges() if ex.url.startswith(f"http://{HOST}/login/?next=/admin/site")]
        # the login is not recorded: not its form's POST (the password), nor the start URL's
        # logged-out redirect to the login page (which a replay with no time would answer first)
        assert not [ex for ex in arc.exchanges() if ex.method == "POST"]
        assert not [ex.url for ex in arc.exchanges() if "/login/" in ex.url]
        assert {ex.status for ex in arc.exchanges() if ex.url == f"http://{HOST}/admin/"} == {200}
        everything = json.dumps([[ex.url, list(ex.request.headers), list(ex.response.headers), ex.request.body_key]
                                 for ex in arc.exchanges()])
    assert PASSWORD not in everything and urllib.parse.quote_plus(PASSWORD) not in everything
    # every admin page the crawl visited was served to the signed-in browser
    assert cms.css_served >= 2 and all(logged for _, path, logged in cms.served if path == "/admin/site.css")
    visited = [(path, logged) for method, path, logged in cms.served if method == "GET" and path != "/login/"]
    assert ("/admin/pages/7/edit/", True) in visited and ("/admin/images/", True) in visited
    assert ("/admin/pages/", False) not in visited


def test_a_login_script_that_fails_is_one_line_and_records_no_page(tmp_path, cli, cms):
    script = tmp_path / "login.py"
    script.write_text(LOGIN_SCRIPT)
    result = _crawl(cli, tmp_path, cms, "--login-script", script, password="wrong")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    # the script's line, and what it waited for (Playwright's first line says only "Timeout 5000ms exceeded.")
    assert len(lines) == 1 and f"--login-script {script} failed at login.py:11: TimeoutError" in lines[0], result.stderr
    assert 'waiting for navigation to "**/admin/pages/"' in lines[0], result.stderr
    assert not (tmp_path / "cms.wfz").exists()  # a new archive whose start failed is not kept


def test_login_script_usage_errors(tmp_path, cli, cms):
    result = _crawl(cli, tmp_path, cms, "--login-script", tmp_path / "nope.py")
    assert result.returncode == 1 and "no such script" in result.stderr
    script = tmp_path / "login.py"
    script.write_text(LOGIN_SCRIPT)
    result = _crawl(cli, tmp_path, cms, "--login-script", script, "--recheck")
    assert result.returncode == 2 and "--recheck visits none" in result.stderr


def test_recheck_refuses_a_crawl_that_signed_in(tmp_path, cli, cms):
    # its live fetches would go without the session and record the login page for what was missing
    script = tmp_path / "login.py"
    script.write_text(LOGIN_SCRIPT)
    assert _crawl(cli, tmp_path, cms, "--login-script", script).returncode == 0
    result = _crawl(cli, tmp_path, cms, "--recheck")
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "signed in with --login-script, and --recheck cannot" in lines[0], result.stderr
