"""Redaction end to end (issue 34) on a small real login site of our own, served on loopback under a
name of its own: a scripted login-and-edit session is recorded by the real recorder (mitmproxy and
Chromium), redacted, and its reference trajectory still validates in both backends on the redacted
archive; the password and the session cookie occur nowhere in the redacted archive (every decoded
blob, header, URL, page and document), suite or cassette; packing the unredacted run refuses."""

from __future__ import annotations

import json
import secrets
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cli_runner import run_cli
from secret_search import everything, holds

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

HOST = "accounts.lab"  # not a reserved test name: its cookies count as credentials
PASSWORD = "c0rrect horse&battery+9"
USER = "alice"


class LoginSite:
    """Log in (a password field; a random session cookie), then edit the display name."""

    def __init__(self):
        self.session = secrets.token_hex(16)
        self.name = "Alice"
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _html(self, body: str, code: int = 200, headers=()):
                data = f"<!doctype html><html><head><title>Accounts</title></head><body>{body}</body></html>".encode()
                self.send_response(code)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _redirect(self, where: str, headers=()):
                self.send_response(303)
                self.send_header("Location", where)
                self.send_header("Content-Length", "0")
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()

            def _logged_in(self) -> bool:
                return f"sid={owner.session}" in (self.headers.get("Cookie") or "")

            def _form(self) -> dict:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                return dict(urllib.parse.parse_qsl(raw))

            def do_GET(self):
                path = urllib.parse.urlsplit(self.path).path
                if path == "/login":
                    self._html('<h1>Sign in</h1><form method="post" action="/login">'
                               '<label>Username <input name="username" type="text"></label>'
                               '<label>Password <input name="password" type="password"></label>'
                               '<button type="submit">Log in</button></form>')
                elif path == "/account" and self._logged_in():
                    self._html(f'<h1>Your account</h1><p id="display">{owner.name}</p>'
                               '<form method="post" action="/account"><label>Display name '
                               '<input name="display_name" type="text"></label><button type="submit">Save</button>'
                               '</form>')
                elif path == "/account":
                    self._redirect("/login")
                else:
                    self._html("<p>not here</p>", 404)

            def do_POST(self):
                form = self._form()
                if self.path == "/login" and form.get("username") == USER and form.get("password") == PASSWORD:
                    self._redirect("/account", [("Set-Cookie", f"sid={owner.session}; Path=/; HttpOnly")])
                elif self.path == "/account" and self._logged_in():
                    owner.name = form.get("display_name", owner.name)
                    self._redirect("/account?saved=1")
                else:
                    self._html("<p>no</p>", 403)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _drive(page):
    from webfreeze.recorder.session import record_answer

    page.set_default_timeout(60_000)
    page.get_by_label("Username").fill(USER)
    page.wait_for_timeout(50)
    page.get_by_label("Password").fill(PASSWORD)
    page.wait_for_timeout(50)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/account")
    page.get_by_label("Display name").fill("Ada L.")
    page.wait_for_timeout(50)
    page.get_by_role("button", name="Save").click()
    page.wait_for_url("**/account?saved=1")
    record_answer(page, "Ada L.", page.locator("#display"))
    page.wait_for_timeout(50)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """(work folder, archive, suite, site session id) of one recorded login-and-edit session."""
    from webfreeze.recorder.session import record_session

    work = tmp_path_factory.mktemp("login")
    site = LoginSite()
    try:
        suite = work / "suite"
        (suite / "references").mkdir(parents=True)
        record_session(work / "login.wfz", f"http://{HOST}/login", suite / "references" / "edit-name.json",
                       driver=_drive, resolve={HOST: ("127.0.0.1", site.port)})
    finally:
        site.close()
    task = {"id": "edit-name", "instruction": "Log in as alice and change the display name to Ada L.",
            "start_url": f"http://{HOST}/login", "category": "accounts",
            "ground_truth": {"answer": {"exact": "Ada L."}, "reference_trajectory": "references/edit-name.json"}}
    (suite / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    (suite / "manifest.json").write_text(json.dumps({"format": "webfreeze-suite", "version": 1, "name": "login",
                                                     "archive": "../login.wfz"}))
    return work, work / "login.wfz", suite, site.session


def test_the_recording_holds_the_secrets_it_must_lose(recorded):
    _, archive, suite, session = recorded
    chunks = everything(archive)
    # (else the test below proves nothing)
    assert holds(chunks, PASSWORD) and holds(chunks, session)
    steps = json.loads((suite / "references" / "edit-name.json").read_text())["steps"]
    assert any(s["action"] == "type" and s["value"] == PASSWORD for s in steps)


def test_redacted_archive_and_suite_hold_no_secret_and_still_validate(recorded, tmp_path):
    from webfreeze.archives import Archive
    from webfreeze.llm import Cassette
    from webfreeze.llm.cassette import request_key

    work, archive, suite, session = recorded
    # an LLM cassette whose observations showed the password and the cookie
    cassette = tmp_path / "c.sqlite"
    request = {"model": "m", "messages": [{"role": "user", "content": f"password {PASSWORD} cookie sid={session}"}]}
    from webfreeze.llm.cassette import canonical_request

    with Cassette(cassette, "record") as c:
        text = canonical_request(request)
        c.store(request_key(request), 0, text, {"text": f"typed {PASSWORD}"}, task_id="edit-name")
    out, suite_out, cas_out = tmp_path / "red.wfz", tmp_path / "suite-red", tmp_path / "c-red.sqlite"
    proc = run_cli("archive", "redact", archive, "-o", out, "--suite", suite, "--suite-out", suite_out,
                   "--cassette", cassette, cas_out)
    assert proc.returncode == 0, proc.stderr
    assert run_cli("archive", "verify", out).returncode == 0
    chunks = everything(out)
    assert not holds(chunks, PASSWORD) and not holds(chunks, session)
    files = [p.read_bytes() for p in suite_out.rglob("*") if p.is_file()]
    assert not holds(files, PASSWORD) and not holds(files, session)
    with Cassette(cas_out, "replay") as c:
        rows = json.dumps(c.rows()).encode()
    assert not holds([rows], PASSWORD) and not holds([rows], session)
    # one secret, one placeholder: the typed value is the one the POST body holds
    typed = [s["value"] for s in json.loads((suite_out / "references" / "edit-name.json").read_text())["steps"]
             if s["action"] == "type" and s["target"]["name"] == "Password"]
    assert typed and typed[0].startswith("wfredacted-")
    with Archive.open(out) as arc:
        posts = [ex.request.body().decode() for ex in arc.exchanges() if ex.method == "POST" and "/login" in ex.url]
        meta = arc.meta()["redaction"]
    assert posts and f"password={typed[0]}" in posts[0]
    assert meta["secrets"] >= 2 and meta["by_kind"]["password"] == 1 and "cookie" in meta["by_kind"]
    assert json.loads((suite_out / "manifest.json").read_text())["archive"] == "../red.wfz"
    for backend in ("text", "browser"):
        proc = run_cli("tasks", "validate", suite_out, "--backend", backend)
        assert proc.returncode == 0, f"{backend}: {proc.stdout}{proc.stderr}"


def test_sharing_the_unredacted_archive_or_run_is_refused(recorded, tmp_path):
    work, archive, suite, session = recorded
    proc = run_cli("archive", "export", archive, "--format", "warc", "-o", tmp_path / "x.warc.gz")
    assert proc.returncode == 1 and "refused" in proc.stderr and "Cookie header" in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.warc.gz").exists()
    proc = run_cli("archive", "pack", archive, "-o", tmp_path / "p.wfz")
    assert proc.returncode == 1 and "refused" in proc.stderr and not (tmp_path / "p.wfz").exists()
    assert run_cli("archive", "pack", archive, "-o", tmp_path / "p.wfz", "--allow-secrets").returncode == 0
    run = tmp_path / "run"
    proc = run_cli("bench", "run", suite, "--agent", "reference", "--backend", "text", "--out", run, "--no-report")
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("bundle", "pack", run, "-o", tmp_path / "b.wfb")
    assert proc.returncode == 1 and "refused" in proc.stderr and not (tmp_path / "b.wfb").exists()
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "password field" in proc.stderr or "Cookie header" in proc.stderr
    assert run_cli("bundle", "pack", run, "-o", tmp_path / "b.wfb", "--allow-secrets").returncode == 0


def test_bundle_pack_redact_shares_no_secret_and_its_run_reproduces(recorded, tmp_path):
    import zipfile

    work, archive, suite, session = recorded
    run = tmp_path / "run"
    proc = run_cli("bench", "run", suite, "--agent", "reference", "--backend", "text", "--out", run)
    assert proc.returncode == 0, proc.stderr
    bundle = tmp_path / "red.wfb"
    proc = run_cli("bundle", "pack", run, "--redact", "-o", bundle, cwd="/")
    assert proc.returncode == 0, proc.stderr
    members = tmp_path / "members"
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(members)
        files = [zf.read(n) for n in zf.namelist()]
    assert not holds(files, PASSWORD) and not holds(files, session)
    (arc,) = list((members / "archive").glob("*.wfz"))
    chunks = everything(arc)
    assert not holds(chunks, PASSWORD) and not holds(chunks, session)
    assert run_cli("bundle", "verify", bundle).returncode == 0
    proc = run_cli("bundle", "run", bundle, "--out", tmp_path / "re")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "identical to the bundled run" in proc.stdout


SCRIPT = f'''
from webfreeze.recorder.session import record_answer


def run(page):
    page.set_default_timeout(60_000)
    page.get_by_label("Username").fill({USER!r})
    page.wait_for_timeout(50)
    page.get_by_label("Password").fill({PASSWORD!r})
    page.wait_for_timeout(50)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/account")
    record_answer(page, "Alice", page.locator("#display"))
    page.wait_for_timeout(50)
'''


def test_record_session_redact_leaves_no_secret_behind(tmp_path):
    site = LoginSite()
    script = tmp_path / "login.py"
    script.write_text(SCRIPT)
    archive, traj = tmp_path / "rec.wfz", tmp_path / "rec.json"
    try:
        proc = run_cli("record", "session", f"http://{HOST}/login", "--archive", archive, "--trajectory", traj,
                       "--script", script, "--resolve", f"{HOST}=127.0.0.1:{site.port}", "--redact")
    finally:
        site.close()
    assert proc.returncode == 0, proc.stderr
    assert "secrets replaced" in proc.stdout
    chunks = everything(archive) + [traj.read_bytes()]
    assert not holds(chunks, PASSWORD) and not holds(chunks, site.session)
    assert run_cli("archive", "verify", archive).returncode == 0
    typed = [s["value"] for s in json.loads(traj.read_text())["steps"] if s["action"] == "type"]
    assert typed == [USER, typed[1]] and typed[1].startswith("wfredacted-")


def test_cassette_redact_on_its_own(recorded, tmp_path):
    from webfreeze.llm import Cassette
    from webfreeze.llm.cassette import canonical_request, request_key

    _, archive, suite, session = recorded
    src = tmp_path / "c.sqlite"
    request = {"model": "m", "messages": [{"role": "user", "content": f"the cookie is sid={session}"}]}
    with Cassette(src, "record") as c:
        c.store(request_key(request), 0, canonical_request(request), {"text": "ok"})
    out = tmp_path / "c-red.sqlite"
    proc = run_cli("cassette", "redact", src, "-o", out, "--archive", archive, "--suite", suite)
    assert proc.returncode == 0, proc.stderr
    assert run_cli("cassette", "verify", out).returncode == 0
    with Cassette(out, "replay") as c:
        (row,) = c.rows()
    assert session not in row["request"] and "wfredacted-" in row["request"]
    from webfreeze.llm.cassette import text_key
    assert row["key"] == text_key(row["request"])  # the key follows the redacted request
    proc = run_cli("cassette", "redact", src, "-o", out, "--archive", archive)
    assert proc.returncode == 1 and "already exists" in proc.stderr


def test_a_redacted_run_lists_its_llm_entries_as_a_re_run_does(tmp_path):
    """A trajectory's ``llm_entries`` are listed sorted by key, as the cassette hands an episode
    what it used; redaction renames the keys (their requests changed), and kept the old order: a
    re-run on the redacted cassette listed them otherwise, so `bundle pack --redact` refused every
    run whose episodes made two LLM calls or more ("does not re-run identically")."""
    import json

    from webfreeze.archives.redact import Redactor
    from webfreeze.bundles.redaction import redact_text_file

    src = tmp_path / "t.json"
    steps = [{"step": 0, "agent_fields": {"llm": {"calls": 2, "keys": ["b2", "a1"]}}}, {"step": 1, "agent_fields": {}}]
    src.write_text(json.dumps({"task_id": "t", "steps": steps, "llm_entries": [["a1", 0], ["b2", 0], ["b2", 1]]}))
    redact_text_file(Redactor(), src, tmp_path / "out" / "t.json", {}, {"a1": "f9", "b2": "c3"}, True)
    got = json.loads((tmp_path / "out" / "t.json").read_text())
    assert got["llm_entries"] == [["c3", 0], ["c3", 1], ["f9", 0]]
    # each step's own keys too, in the order of its calls (the re-run's trajectory names them so)
    assert got["steps"][0]["agent_fields"]["llm"]["keys"] == ["c3", "f9"]


def test_a_redacted_run_of_some_of_the_suite_s_tasks_is_packed(recorded, tmp_path):
    """A run of some tasks (--tasks, --limit) names its selection's digest, of the tasks' lines;
    redaction changes those lines, and `bundle pack --redact` refused such a run as not re-running
    identically (report.json's run.selection.digest): it now swaps that digest too."""
    import shutil

    work, archive, suite, session = recorded
    two = tmp_path / "suite"
    shutil.copytree(suite, two)
    line = json.loads((suite / "tasks.jsonl").read_text())
    # (an instruction holding the password, as Calibre-Web's author wrote one: redaction changes the line)
    line["instruction"] = f"Log in as alice with password {PASSWORD} and change the display name to Ada L."
    (two / "tasks.jsonl").write_text(json.dumps(line) + "\n" + json.dumps({**line, "id": "edit-name-again"}) + "\n")
    manifest = json.loads((suite / "manifest.json").read_text())
    (two / "manifest.json").write_text(json.dumps({**manifest, "archive": str(archive)}))
    run = tmp_path / "run"
    proc = run_cli("bench", "run", two, "--agent", "reference", "--backend", "text", "--tasks", "edit-name",
                   "--out", run)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("bundle", "pack", run, "--redact", "-o", tmp_path / "red.wfb", cwd="/")
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("bundle", "run", tmp_path / "red.wfb", "--out", tmp_path / "re")
    assert proc.returncode == 0 and "identical to the bundled run" in proc.stdout, proc.stdout + proc.stderr
