"""Authoring on real applications (issue 32, first "Done when"): scripted sessions recorded on the
test bed's live applications (Datasette, the Sphinx docs, the Django admin) with ``record session
--script --resolve`` into a copy of each application's crawl, turned into tasks with ``webfreeze
tasks add`` as a user would, then ``tasks validate`` passes every task in both backends and the
reference agent scores 100% with an efficiency of exactly 1.00 in both, while the applications'
access logs see no request.

The scripts are files under tests/testbed/sessions/APP/ (``run(page)``, ``START``,
``INSTRUCTION``). Between them: searches submitted with Enter (Datasette's filter form, the Django
admin's change list, Sphinx's search box), typed URLs (``page.goto`` mid-session), logins (Django),
forms submitted with their buttons (Datasette's filter, a Django change form saved) and link chains.

Sphinx's search box is shown, and its results drawn, by JavaScript: a task through it cannot pass
in the text backend, which runs no scripts. It is a suite of its own whose manifest names the
browser backend; in the text backend ``tasks validate`` must call it expired and say that the
browser backend passes it.

Everything is recorded once, by one module-scoped fixture; each backend validates and runs all of
an application's tasks in one command.
"""

from __future__ import annotations

import json
import re
import runpy
import shutil
import sqlite3
from pathlib import Path

import pytest

from testbed.fixtures import webfreeze
from webfreeze.agents.reference import fold_text, visible_text
from webfreeze.archives.timeutil import parse_time
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

SESSIONS = Path(__file__).resolve().parent / "sessions"
APPS = ["datasette", "sphinx", "django"]
BACKENDS = ["text", "browser"]
# Each application's tasks: (task id, session script under sessions/APP/). The answers of
# Datasette's tasks come from its database (below); the others' are the documents' own words.
TASKS = {
    "datasette": [("data-travel-count", "genre_filter_enter"), ("data-author-books", "author_link_chain"),
                  ("data-peru-authors", "typed_url_country_form")],
    "sphinx": [("docs-retries", "typed_url_retries"), ("docs-lease-before", "changelog_link_chain"),
               ("docs-max-waiting", "next_link_chain")],
    "django": [("admin-storms-isbn", "login_search_enter"), ("admin-shelf-save", "typed_url_shelf_save"),
               ("admin-public-room", "public_link_chain")],
}
ANSWERS = {"docs-retries": "5", "docs-lease-before": "120", "docs-max-waiting": "50000",
           "docs-requeue": "tidepool requeue jobs.pool JOB_ID",
           "admin-storms-isbn": "978-0-00-000007-3", "admin-shelf-save": "Reading room",
           "admin-public-room": "Reading room"}
# The JavaScript search of the Sphinx site: browser backend only (module docstring).
JS_SUITE = ("sphinx", [("docs-requeue", "search_enter")])


def _datasette_answers(db: Path) -> dict[str, str]:
    with sqlite3.connect(db) as conn:
        one = lambda sql: str(conn.execute(sql).fetchone()[0])  # noqa: E731
        return {"data-travel-count": one("SELECT count(*) FROM books WHERE genre = 'travel'"),
                "data-author-books": one("SELECT count(*) FROM books WHERE author_id ="
                                         " (SELECT author_id FROM books WHERE id = 1)"),
                "data-peru-authors": one("SELECT count(*) FROM authors WHERE country = 'Peru'")}


def _author(testbed, app, suite: Path, archive: Path, tasks, answers: dict, work: Path) -> None:
    """Record each task's session on the live ``app`` into ``archive`` and add it to ``suite`` with
    the real CLI; any failure fails the fixture with the command's error."""
    for task_id, script_name in tasks:
        script = SESSIONS / app.name / f"{script_name}.py"
        meta = runpy.run_path(str(script))
        trajectory = work / f"{task_id}.json"
        r = webfreeze("record", "session", app.base_url + meta["START"], "--archive", archive,
                      "--trajectory", trajectory, "--script", script, "--resolve", app.resolve,
                      "--instruction", meta["INSTRUCTION"], home=testbed.home)
        assert r.returncode == 0, f"record session {script.name}: {r.stderr[-2000:]}"
        new = [] if suite.exists() else ["--archive", archive]
        r = webfreeze("tasks", "add", suite, "--reference", trajectory, "--id", task_id,
                      "--answer", answers[task_id], "--category", app.name, *new, home=testbed.home)
        assert r.returncode == 0, f"tasks add {task_id}: {r.stderr[-2000:]}"


@pytest.fixture(scope="module")
def authored(testbed, tmp_path_factory):
    """{app: suite folder} plus "sphinx-js", all recorded once for the module."""
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    work = tmp_path_factory.mktemp("authoring")
    suites = {}
    for name in APPS:
        app = testbed.app(name)
        archive = work / f"{name}.wfz"
        shutil.copyfile(testbed.crawl(name), archive)  # the shared crawl stays as it was
        answers = dict(ANSWERS)
        if name == "datasette":
            answers.update(_datasette_answers(app.log_path.parent / "testbed.db"))
        suites[name] = work / f"{name}-suite"
        _author(testbed, app, suites[name], archive, TASKS[name], answers, work)
        if name == JS_SUITE[0]:
            suites["sphinx-js"] = work / "sphinx-js-suite"
            _author(testbed, app, suites["sphinx-js"], archive, JS_SUITE[1], answers, work)
            # the suite runs with the browser backend unless told otherwise (docs/authoring.md)
            manifest = suites["sphinx-js"] / "manifest.json"
            data = json.loads(manifest.read_text())
            manifest.write_text(json.dumps({**data, "backend": "browser"}, indent=2) + "\n")
    return suites


def _references(suite: Path) -> dict[str, list[dict]]:
    return {p.stem: json.loads(p.read_text())["steps"] for p in sorted((suite / "references").glob("*.json"))}


def test_the_sessions_cover_enter_typed_urls_logins_forms_and_link_chains(authored):
    """What the scripts did is what their references log, and between them they cover every kind of
    step issue 32 names."""
    refs = {}
    for suite in authored.values():
        refs.update(_references(suite))
    assert len(refs) == 10
    for name, tasks in TASKS.items():
        assert len(tasks) >= 3 and all(task in refs for task, _ in tasks), name

    def kinds(steps):
        return [s["action"] for s in steps]

    enter = {t for t, steps in refs.items()
             if any(s["action"] == "press" and s["value"] == "Enter" and s["target"]["role"] in ("textbox", "searchbox")
                    for s in steps)}
    assert {"data-travel-count", "admin-storms-isbn", "docs-requeue"} <= enter
    typed = {t for t, steps in refs.items() if any(s.get("cause") == "goto" for s in steps[1:])}
    assert {"data-peru-authors", "docs-retries", "admin-shelf-save"} <= typed
    logins = {t for t, steps in refs.items()
              if any(s["action"] == "type" and s["target"]["name"].startswith("Password") for s in steps)}
    assert {"admin-storms-isbn", "admin-shelf-save"} <= logins
    buttons = {t for t, steps in refs.items()
               if any(s["action"] == "click" and s["target"]["role"] == "button" for s in steps)
               and "submit" in kinds(steps)}
    assert {"data-peru-authors", "admin-shelf-save"} <= buttons
    chains = {t for t, steps in refs.items()
              if sum(s["action"] == "click" and s["target"]["role"] == "link" for s in steps) >= 2}
    assert {"data-author-books", "docs-lease-before", "docs-max-waiting", "admin-public-room"} <= chains
    assert all(steps[-1]["action"] == "answer" for steps in refs.values())


@pytest.mark.parametrize("name", APPS)
def test_every_task_validates_and_the_oracle_scores_exactly_one_in_both_backends(testbed, authored, name, tmp_path):
    suite, app = authored[name], testbed.app(name)
    lines = [json.loads(x) for x in (suite / "tasks.jsonl").read_text().splitlines()]
    assert [t["id"] for t in lines] == [t for t, _ in TASKS[name]]
    # each task replays as of its own session (the Django logins need it: every session loads
    # /admin/, a redirect before the login and the index after it, and so did the crawl)
    refs = _references(suite)
    for t in lines:
        assert parse_time(t["snapshot_time"]).timestamp() == pytest.approx(refs[t["id"]][0]["time"], abs=0.001), t
    mark = app.mark()
    for backend in BACKENDS:
        r = webfreeze("tasks", "validate", suite, "--backend", backend, home=testbed.home)
        out = r.stdout + r.stderr  # the summary goes to stderr
        assert r.returncode == 0, out[-2000:]
        assert f"3 of 3 tasks reachable on the archive, 0 expired ({backend} backend)" in out, out

        run = tmp_path / backend
        r = webfreeze("bench", "run", suite, "--agent", "reference", "--backend", backend, "--out", run,
                      home=testbed.home)
        assert r.returncode == 0, r.stderr[-2000:]
        report = json.loads((run / "report.json").read_text())
        for task, res in report["tasks"].items():
            assert res["outcome"] == "success", (backend, task, res["outcome"], res.get("end_reason"))
            assert res["behaviour"]["efficiency_ratio"] == 1.0, (backend, task, res["behaviour"])
            assert res["replay"]["misses"] == 0, (backend, task, res["replay"])
        overall = report["summary"]["overall"]
        assert (overall["success_rate"], overall["mean_efficiency"], overall["tasks"]) == (1.0, 1.0, 3), overall
    assert app.requests_since(mark) == []  # the leak canary: validate and runs never reached the app


def test_the_javascript_search_validates_in_the_browser_and_says_so_in_text(testbed, authored, tmp_path):
    """Sphinx's search box is hidden until searchtools.js shows it, and the results are drawn by it:
    the manifest's backend (browser) passes the task with efficiency 1.00; the text backend calls it
    expired, naming the step and the backend that passes it."""
    suite, app = authored["sphinx-js"], testbed.app("sphinx")
    mark = app.mark()
    r = webfreeze("tasks", "validate", suite, home=testbed.home)  # the manifest's backend
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "1 of 1 tasks reachable on the archive, 0 expired (browser backend)" in out, out
    r = webfreeze("bench", "run", suite, "--agent", "reference", "--out", tmp_path / "run", home=testbed.home)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((tmp_path / "run" / "report.json").read_text())["tasks"]["docs-requeue"]
    assert res["outcome"] == "success" and res["behaviour"]["efficiency_ratio"] == 1.0, res
    r = webfreeze("tasks", "validate", suite, "--backend", "text", home=testbed.home)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"expired: docs-requeue \(reference step \d+: no textbox 'Quick search' on this page; "
                     r"passes with the browser backend\)", r.stdout + r.stderr), r.stdout + r.stderr
    assert app.requests_since(mark) == []


def test_evidence_spanning_a_named_node_is_read_once():
    """A Sphinx changelog line as the observation tree has it: Chromium names the ``code`` element
    after its text and the text follows as its child. Read twice ("lease_seconds lease_seconds"),
    the sentence the person saw was not found and the task expired in both backends."""
    tree = "\n".join([
        "[44] list ''",
        "\t[45] listitem ''",
        "\t\t[46] paragraph ''",
        "\t\t\tStaticText 'The default'",
        "\t\t\t[47] code 'lease_seconds'",
        "\t\t\t\tStaticText 'lease_seconds'",
        "\t\t\tStaticText 'went from 120 to 300.'",
        "\t\t\t[48] link 'Queues', url='http://docs.testbed.test/queues.html'",
        "\t\t\t\tStaticText 'Queues'",
        "[50] heading '1.2¶'",
        "\t[51] link '¶', url='http://docs.testbed.test/changelog.html#id3'",
        "StaticText 'Queues'",  # the same words again, outside the link: read again
    ])
    text = visible_text(tree)
    assert " ".join(text.split()) == "The default lease_seconds went from 120 to 300. Queues 1.2¶ Queues"
    assert fold_text("The default lease_seconds went from 120 to 300.") in fold_text(text)


def test_tasks_add_dates_the_task_at_its_session(tmp_path):
    """The task line's snapshot_time is the session's first step (replay then answers repeated
    requests from that session's captures); a trajectory without times gives null, as before."""
    from webfreeze.eval.authoring import add_task

    steps = [{"action": "navigate", "target": None, "value": None, "url": "http://a.test/", "cause": "goto",
              "time": 1795910160.308, "step": 0},
             {"action": "answer", "target": None, "value": {"text": "42", "evidence": []}, "url": "http://a.test/",
              "time": 1795910161.5, "step": 1}]
    ref = tmp_path / "t.json"
    ref.write_text(json.dumps({"version": 1, "kind": "reference_trajectory", "start_url": "http://a.test/",
                               "instruction": "What is it?", "steps": steps}))
    task = add_task(tmp_path / "suite", ref, "42", archive=tmp_path / "a.wfz")
    assert task["snapshot_time"] == "2026-11-28T23:56:00.308Z"
    line = json.loads((tmp_path / "suite" / "tasks.jsonl").read_text())
    assert line["snapshot_time"] == "2026-11-28T23:56:00.308Z"
    for s in steps:
        del s["time"]
    ref.write_text(json.dumps({"version": 1, "kind": "reference_trajectory", "start_url": "http://a.test/",
                               "instruction": "What is it?", "steps": steps}))
    assert add_task(tmp_path / "suite", ref, "42", task_id="untimed")["snapshot_time"] is None
