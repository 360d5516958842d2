"""The text backend runs no scripts: a page its scripts draw (a single-page application's shell,
as Docsify's ``<div id="app">``) is not shown as an empty page without a word. The agent is told,
the trajectory keeps the line, and the episode is not called replay-compromised for it (the replay
answered as the site did); the browser backend, on the same archive, shows the page."""

from __future__ import annotations

import json

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

T0 = "2024-03-01T12:00:00Z"
HOST = "http://docs.test"
HTML = [("Content-Type", "text/html; charset=utf-8")]
SHELL = b"""<!doctype html><html><head><title>Handbook</title></head><body><div id="app"></div>
<script>fetch('/part/species.html').then(function (r) { return r.text(); })
  .then(function (t) { document.getElementById('app').innerHTML = t; });</script></body></html>"""
SERVED = b"""<!doctype html><html><head><title>Served</title><script src="/app.js"></script></head>
<body><h1>Served</h1><p>Sea otters eat crabs.</p><a href="/">the handbook</a></body></html>"""
EMPTY = b"<!doctype html><html><head><title>Empty</title></head><body><div></div></body></html>"
# AngularJS's templates, which its script fills (Syncthing's GUI); a page of text about templates is not one
TEMPLATED = b"""<!doctype html><html ng-app="gui"><head><title>GUI</title><script src="/app.js"></script></head>
<body><h1>{{thisDeviceName()}}</h1><p ng-if="upgrade">Upgrade To {{version}}</p></body></html>"""
ABOUT = b"""<!doctype html><html><head><title>Jinja</title><script src="/app.js"></script></head>
<body><p>Write {{ name }} and {{ items|length }} in a template.</p></body></html>"""


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("scripts") / "docs.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_text_backend_scripts")
        for url, headers, body in [
            (HOST + "/", HTML, SHELL), (HOST + "/served.html", HTML, SERVED), (HOST + "/empty.html", HTML, EMPTY),
            (HOST + "/gui.html", HTML, TEMPLATED), (HOST + "/jinja.html", HTML, ABOUT),
            (HOST + "/part/species.html", HTML, b"<h1>Species</h1><p>Sea otter: 148 cm</p>"),
            (HOST + "/app.js", [("Content-Type", "text/javascript")], b"void 0;"),
        ]:
            arc.add_exchange(Exchange(session_id=sid, url=url, status=200, resp_headers=headers, payload=body,
                                      captured_at=T0))
    return path


def _task(url: str) -> dict:
    return {"id": "t", "start_url": url, "instruction": "How long is a sea otter?", "snapshot_time": T0}


UNSHOWN = "http://docs.test/ shows nothing without its scripts, and the text backend runs none: " \
          "the browser backend shows this page"


def test_text_backend_says_a_page_drawn_by_scripts_is_not_shown(archive):
    env = WebEnv(EnvConfig(archive, backend="text"))
    try:
        obs, _ = env.reset(options={"task": _task(HOST + "/")})
        assert obs["last_action_error"] == UNSHOWN
        assert "148" not in obs["axtree_text"]
        obs, *_ = env.step(f"goto('{HOST}/served.html')")  # scripts, and a page without them: said nothing
        assert obs["last_action_error"] == "" and "Sea otters eat crabs." in obs["axtree_text"]
        obs, *_ = env.step(f"goto('{HOST}/empty.html')")  # empty, with no script to draw it: what the site gave
        assert obs["last_action_error"] == ""
        obs, *_ = env.step("go_back()")
        obs, *_ = env.step(f"click('{next(e['bid'] for e in obs['elements'] if e['role'] == 'link')}')")
        assert obs["last_action_error"] == UNSHOWN
        trajectory = env.trajectory(stopped=True)
    finally:
        env.close()
    replay = trajectory["replay"]
    assert replay["start"]["note"] == UNSHOWN and "error" not in replay["start"]
    assert replay["compromised"] is False
    assert trajectory["steps"][-1]["error"] == UNSHOWN


def test_text_backend_says_a_page_shows_its_templates_unfilled(archive):
    env = WebEnv(EnvConfig(archive, backend="text"))
    try:
        obs, _ = env.reset(options={"task": _task(HOST + "/gui.html")})
        assert obs["last_action_error"] == ("http://docs.test/gui.html shows its scripts' templates unfilled "
                                            "({{thisDeviceName()}}), and the text backend runs no scripts: the "
                                            "browser backend shows this page")
        obs, *_ = env.step(f"goto('{HOST}/jinja.html')")  # (text about templates, on a page without directives)
        assert obs["last_action_error"] == "" and "{{ name }}" in obs["axtree_text"]
        trajectory = env.trajectory(stopped=True)
    finally:
        env.close()
    assert trajectory["replay"]["start"]["note"].startswith("http://docs.test/gui.html shows its scripts' templates")
    assert trajectory["replay"]["compromised"] is False


def test_browser_backend_shows_the_page_its_scripts_draw(archive):
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    env = WebEnv(EnvConfig(archive, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": _task(HOST + "/")})
    finally:
        env.close()
    assert obs["last_action_error"] == "" and "Sea otter: 148 cm" in obs["axtree_text"]


def test_a_text_run_says_how_many_episodes_started_on_a_page_it_could_not_show(archive, tmp_path, cli):
    # the episode is the agent's (the replay answered as the site did), but a run whose score rests on
    # pages its backend never showed says so once, for the run, with the way out
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "manifest.json").write_text(json.dumps({"format": "webfreeze-suite", "version": 1, "name": "docs",
                                                     "archive": str(archive)}))
    lines = [{"id": tid, "category": "info", "instruction": "How long is a sea otter?", "start_url": url,
              "snapshot_time": T0, "ground_truth": {"answer": {"must_include": ["148"]}}}
             for tid, url in (("shell", HOST + "/"), ("served", HOST + "/served.html"))]
    (suite / "tasks.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "run"
    r = cli("bench", "run", suite, "--agent", "keyword", "--backend", "text", "--out", out, "--max-steps", "3")
    assert r.returncode == 0, r.stderr
    line = ("1 of 2 episode(s) started on a page that shows nothing without its scripts (or their templates "
            "unfilled), which this backend does not run (e.g. shell: http://docs.test/): run them with --backend browser")
    assert f"warning: {line}" in r.stderr
    # said, not kept in report.json: runs packed before it re-run to the same bytes
    assert json.loads((out / "report.json").read_text())["warnings"] == []
    r = cli("eval", "report", out)
    assert r.returncode == 0 and f"warning: {line}" in r.stderr
