"""`tasks validate` names a request the archive holds with another body as such, not as "not captured".

TiddlyWiki saves a tiddler with a PUT whose JSON carries the time of the change (``modified``):
the session records it, the replay of the same click sends the replay clock's time, and honest
matching turns the recorded PUT down. The archive holds that PUT; saying it "was not captured"
sends the author to record it again, which cannot help. The line says that it was captured only
with another request body, and where the fields that may differ are listed.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

PAGE = b"""<!doctype html><title>wiki</title><p>Carrots are orange.</p>
<button onclick="fetch('/recipes/default/tiddlers/Carrots', {method: 'PUT',
  headers: {'Content-Type': 'application/json'},
  body: JSON.stringify({title: 'Carrots', text: 'Carrots are purple.', modified: new Date().toISOString(),
                        nonce: String(Math.random())})})
  .then(r => { document.querySelector('p').textContent = 'Saved ' + r.status; })">Save</button>"""

SCRIPT = '''
from webfreeze.recorder.session import record_answer

def run(page):
    page.wait_for_function("performance.getEntriesByName('first-paint').length > 0")
    page.get_by_role("button", name="Save").click()
    page.get_by_text("Saved 204").wait_for()
    record_answer(page, "204", evidence=["Saved 204"])
'''


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self._send(200, PAGE)

    def do_PUT(self):  # noqa: N802 (the method's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        self._send(204, b"")

    def _send(self, status, body):
        self.send_response(status)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_put_captured_with_another_body_is_named_so(tmp_path, monkeypatch, cli):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    script = tmp_path / "save.py"
    script.write_text(SCRIPT)
    archive, ref, suite = tmp_path / "wiki.wfz", tmp_path / "save.json", tmp_path / "suite"
    try:
        rec = cli("record", "session", "http://wiki.test/", "--resolve", f"wiki.test=127.0.0.1:{server.server_address[1]}",
                  "--archive", archive, "--trajectory", ref, "--script", script, timeout=300)
    finally:
        server.shutdown()
    assert rec.returncode == 0, rec.stderr
    added = cli("tasks", "add", suite, "--reference", ref, "--archive", archive, "--id", "save", "--answer", "204",
                "--instruction", "Save the Carrots tiddler.")
    assert added.returncode == 0, added.stderr
    result = cli("tasks", "validate", suite, "--backend", "browser", "--json", timeout=300)
    assert result.returncode == 1, result.stderr
    (entry,) = json.loads(result.stdout)["incomplete"]
    assert entry["reason"] == ("reference step 1: PUT http://wiki.test/recipes/default/tiddlers/Carrots (xhr) was "
                               "captured only with another request body (a field drawn at random or from the clock "
                               "may go in replay_rules' ignorable_params; a field that says what was asked for, an "
                               "RPC's method, a form's words, means the archive lacks this request: record the task's "
                               "session into it)"), entry
    assert entry["misses"][0]["captured"] == "body"


def test_a_get_whose_url_is_captured_is_not_said_to_differ_in_its_body(tmp_path):
    # a GET has no body: missed although its URL is in the archive, it missed for another cause
    from webfreeze.archives import Exchange, new_archive_atomically
    from webfreeze.checks.drift import note_captured

    url = "http://wiki.test/recipes/Carrots.tid"
    with new_archive_atomically(tmp_path / "a.wfz") as arc:
        sid = arc.new_session("test", source="test_miss_words")
        for method in ("GET", "PUT"):
            arc.add_exchange(Exchange(session_id=sid, url=url, method=method, status=200, payload=b"ok",
                                      captured_at="2024-03-01T12:00:00Z", resp_headers=[("Content-Type", "text/plain")]))
    notes = note_captured(tmp_path / "a.wfz", [{"step": 1, "kind": "xhr", "method": m, "url": url} for m in ("GET", "PUT")])
    assert [n.get("captured") for n in notes] == [None, "body"], notes


def test_a_request_captured_with_other_query_parameters_points_at_the_rule():
    # Gradio's GET /gradio_api/queue/data?session_hash=<random>: the replayed page draws another
    # hash; the line says where the parameters that may differ are listed, as it does for a body
    from webfreeze.eval.authoring import describe_miss

    miss = {"step": 5, "kind": "xhr", "method": "GET", "captured": "query",
            "url": "http://gradio.test/gradio_api/queue/data?session_hash=gkjublrq9ll"}
    said = ("reference step 5: GET http://gradio.test/gradio_api/queue/data?session_hash=gkjublrq9ll (xhr) was "
            "captured only with other query parameters ({}a parameter drawn at random or from the clock may go in "
            "replay_rules' ignorable_params; one that says what was asked for, a search's words, means the archive "
            "lacks this request: record the task's session into it)")
    assert describe_miss(miss) == said.format("")
    assert describe_miss({**miss, "differs": ["session_hash"]}) == said.format("differing here: session_hash; ")


def test_the_line_names_the_parameters_that_differ_and_a_body_too_long_to_compare(tmp_path):
    """Roundup's search for words the archive never saw (`@search_text=vpn`, captured with other
    words): the line names the parameter that differs (a search's words: recording it again is the
    remedy, not the rule). Syncthing's PUT of its whole configuration (6 KB of JSON): too long for
    the index to keep field by field, so ignorable_params cannot help, and the line says so."""
    import json as jsonmod

    from webfreeze.archives import Exchange, new_archive_atomically
    from webfreeze.checks.drift import note_captured
    from webfreeze.eval.authoring import describe_miss

    search = "http://roundup.test/tracker/issue?@columns=title&@search_text={}&@sort=-activity"
    with new_archive_atomically(tmp_path / "a.wfz") as arc:
        sid = arc.new_session("test", source="test_miss_words")
        for words in ("printer", "mail"):
            arc.add_exchange(Exchange(session_id=sid, url=search.format(words), status=200, payload=b"ok",
                                      captured_at="2024-03-01T12:00:00Z", resp_headers=[("Content-Type", "text/html")]))
        arc.add_exchange(Exchange(session_id=sid, url="http://st.test/rest/config", method="PUT", status=200,
                                  payload=b"", captured_at="2024-03-01T12:00:01Z", resp_headers=[],
                                  req_headers=[("Content-Type", "application/json")],
                                  req_body=jsonmod.dumps({"folders": [{"id": f"f{i}", "path": "/x" * 20}
                                                                      for i in range(20)]}).encode()))
    notes = note_captured(tmp_path / "a.wfz", [
        {"step": 3, "kind": "document", "method": "GET", "url": search.format("vpn")},
        {"step": 4, "kind": "xhr", "method": "PUT", "url": "http://st.test/rest/config"}])
    assert [(n.get("captured"), n.get("differs")) for n in notes] == [("query", ["@search_text"]), ("long_body", None)]
    assert "(differing here: @search_text; " in describe_miss(notes[0])
    assert describe_miss(notes[1]).endswith("was captured only with another request body, too long for the replay "
                                            "to compare field by field (only equal bodies match, whatever "
                                            "replay_rules' ignorable_params say)")


def _posts(path, *posts) -> None:
    """An archive at ``path`` holding one POST exchange per ``(url, status, body, req_headers)``."""
    from webfreeze.archives import Exchange, new_archive_atomically

    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_miss_words")
        for url, status, body, headers in posts:
            arc.add_exchange(Exchange(session_id=sid, url=url, method="POST", status=status, payload=b"{}",
                                      captured_at="2024-03-01T12:00:00Z", req_body=body, req_headers=headers,
                                      resp_headers=[("Content-Type", "application/json")]))


def test_a_post_captured_with_other_redaction_placeholders_is_named_so(tmp_path):
    # Verdaccio's login POST, recorded and redacted once per snapshot (record session --redact): the
    # same password has another placeholder in each, so the reference of the first never matches the
    # second's POST; drift called the task an incomplete capture without saying why
    from webfreeze.checks.drift import note_captured
    from webfreeze.eval.authoring import describe_miss

    url, form = "http://npm.test/-/verdaccio/sec/login", "http://npm.test/-/verdaccio/sec/form"
    json_type = [("Content-Type", "application/json")]
    _posts(tmp_path / "a.wfz", (url, 200, b'{"username":"walker","password":"wfredacted-34631aefe71de6ec"}', json_type),
           (form, 200, b'{"username":"walker","password":"walkpass123"}', json_type))
    notes = note_captured(tmp_path / "a.wfz", [{"step": 5, "kind": "xhr", "method": "POST", "url": u} for u in (url, form)])
    assert [n.get("captured") for n in notes] == ["redacted", "body"], notes
    assert describe_miss(notes[0]) == (
        "reference step 5: POST http://npm.test/-/verdaccio/sec/login (xhr) was captured only with another "
        "request body, holding redaction placeholders (each redaction draws its own key: an archive redacted "
        "apart from the one the reference was redacted with holds other placeholders for the same secrets; "
        "compare archives before redaction, or record the task again on this one)")


def test_a_post_captured_only_as_another_kind_is_named_so(tmp_path):
    # Wagtail's editor: the replay's clock ran past the 2 s after which it autosaves (an XHR POST to
    # the edit page) before the session's first keystroke, which came sooner live; the archive holds
    # that URL's POST only as the form's submission (a document, its CSRF token redacted). The line
    # said "redaction placeholders", which had nothing to do with it.
    from webfreeze.checks.drift import note_captured
    from webfreeze.eval.authoring import describe_miss

    url = "http://cms.test/admin/pages/3/edit/"
    _posts(tmp_path / "a.wfz", (url, 302, b"csrfmiddlewaretoken=wfredacted-1a2b3c4d5e6f7a8b",
                                [("Content-Type", "application/x-www-form-urlencoded"), ("Sec-Fetch-Dest", "document")]))
    misses = [{"step": 10, "kind": kind, "method": "POST", "url": url} for kind in ("xhr", "document")]
    notes = note_captured(tmp_path / "a.wfz", misses)
    assert [n.get("captured") for n in notes] == ["kind", "redacted"], notes
    assert describe_miss(notes[0]).startswith(f"reference step 10: POST {url} (xhr) was captured only as another "
                                              "kind of request (a form's submission, say), never as this one")


def test_a_beacon_captured_with_another_body_is_not_called_another_kind(tmp_path):
    # A beacon (navigator.sendBeacon) is sent with Sec-Fetch-Dest "empty", as an XHR is, but the
    # replay counts it among the subresources: a miss of it whose archive holds the same POST with
    # another body was called "captured only as another kind of request". Only a document against
    # no document is another kind.
    from webfreeze.checks.drift import note_captured

    url = "http://stats.test/beacon"
    _posts(tmp_path / "a.wfz", (url, 204, b'{"seen": 1}', [("Content-Type", "text/plain"), ("Sec-Fetch-Dest", "empty")]))
    misses = [{"step": 2, "kind": kind, "method": "POST", "url": url} for kind in ("subresource", "xhr", "document")]
    notes = note_captured(tmp_path / "a.wfz", misses)
    assert [n.get("captured") for n in notes] == ["body", "body", "kind"], notes


def test_a_parted_socket_in_an_archive_without_the_task_s_session_says_to_record_it_there(tmp_path):
    # Streamlit on a newer snapshot (drift, `tasks validate --archive NEW`) whose sessions were not
    # all recorded again: the task's socket was answered from another session's conversation, which
    # the page's first action parted from, and the line said recording again "will not mend it".
    # Recording the task's session into NEW mended it: the line now says so. An archive that holds
    # the reference's session keeps the pausing advice.
    from webfreeze.archives import Exchange, new_archive_atomically
    from webfreeze.checks.drift import note_captured
    from webfreeze.eval.authoring import PARTED_HINT, WEBSOCKET_PARTED_WORDS, describe_miss

    with new_archive_atomically(tmp_path / "a.wfz") as arc:
        sid = arc.new_session("session", source="test_miss_words")
        arc.add_exchange(Exchange(session_id=sid, url="http://st.test/", status=200, payload=b"<p>app</p>",
                                  captured_at="2024-03-01T12:00:00Z", resp_headers=[("Content-Type", "text/html")]))
    why = f"{WEBSOCKET_PARTED_WORDS}: the page sent b'Z...' after the recorded conversation ended"
    miss = {"step": 1, "kind": "xhr", "method": "GET", "url": "ws://st.test/_stcore/stream", "why": why}
    elsewhere = {"archive_session": "a344e1ae5d1b45e3", "start_url": "http://st.test/", "steps": []}
    (note,) = note_captured(tmp_path / "a.wfz", [miss], elsewhere)
    assert (note["session"], note["reference_session"]) == ("absent", "a344e1ae5d1b45e3")
    said = describe_miss(note)
    assert said.endswith("this archive holds no session of this task (its reference was recorded in session "
                         "a344e1ae5d1b45e3, not in this archive), so the socket was answered from another session's "
                         "conversation: record the task's session into this archive (record session ... --archive)")
    assert "will not mend it" not in said
    (kept,) = note_captured(tmp_path / "a.wfz", [miss], {**elsewhere, "archive_session": sid})
    assert "session" not in kept and describe_miss(kept).endswith(PARTED_HINT)
