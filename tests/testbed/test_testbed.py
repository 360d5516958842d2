"""The promises, kept on real applications nobody here wrote (docs/testbed.md): Datasette, a Sphinx
site and a Django admin, served on 127.0.0.1 under names of their own and reached with
``--resolve``. Each is crawled once per session (the ``testbed`` fixture); its replay must be
complete, exact and offline, and a run of its suite must reproduce from a bundle elsewhere."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from schema_walk import check_bundle, check_tree
from secret_search import everything, holds

from testbed.apps import start_django
from testbed.fixtures import webfreeze
from webfreeze.archives import Archive
from webfreeze.runs.compare import run_difference
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

APPS = ["datasette", "sphinx", "django"]


def _path(url: str) -> str:
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


@pytest.mark.parametrize("name", APPS)
def test_the_crawl_recorded_what_the_application_served(testbed, name):
    archive, app = testbed.crawl(name), testbed.app(name)
    out = testbed.crawl_output[name]
    assert "(complete)" in out and "failed" not in out, out
    with Archive.open(archive) as arc:
        pages = [p.url for p in arc.pages()]
        exchanges = list(arc.exchanges())
    assert len(pages) >= 8, pages
    recorded = {_path(x.url) for x in exchanges}
    assert {urlsplit(x.url).netloc for x in exchanges} == {app.host}  # its own name, no loopback address
    # every request the application saw during the crawl is in the archive (the probe of the start
    # page, fetched once unrecorded, is recorded again as the first page)
    served = {path for _, path in testbed.crawl_requests[name]}
    assert served <= recorded, sorted(served - recorded)
    if name == "datasette":
        queries = {urlsplit(u).query for u in pages}
        assert any(q.startswith("_sort=") for q in queries) and any(q.startswith("genre=") for q in queries)
        assert any(urlsplit(u).path.endswith(".json") for u in pages)
    elif name == "sphinx":
        # the theme's stylesheet chain: default.css @imports classic.css, which @imports basic.css
        assert {"/_static/default.css", "/_static/classic.css", "/_static/basic.css"} <= {p.split("?")[0] for p in recorded}
    else:
        assert "/admin/" in recorded and "/admin/login/?next=/admin/" in recorded  # the redirect, both legs


@pytest.mark.parametrize("mode", ["proxy", "direct"])  # direct: /<ts>/<url>, rewritten and sealed, no proxy
@pytest.mark.parametrize("name", APPS)
def test_replay_check_is_exact_and_never_reaches_the_application(testbed, name, mode, tmp_path):
    archive, app = testbed.crawl(name), testbed.app(name)
    mark = app.mark()
    r = webfreeze("replay", "check", archive, "--report", tmp_path / "check", "--mode", mode, home=testbed.home)
    assert app.requests_since(mark) == []  # the leak canary
    report = json.loads((tmp_path / "check" / "report.json").read_text())
    summary = report["summary"]
    bad = [(p["url"], p["misses"], p["text_similarity"], p["pixel_difference"], p["error"]) for p in report["pages"]
           if p["misses"] or p["error"] or p["text_similarity"] != 1.0 or p["pixel_difference"] != 0]
    assert r.returncode == 0 and not bad, (r.stderr[-1000:], bad)
    assert summary["pages"] >= 8 and summary["missed_requests"] == 0 and summary["pages_with_errors"] == 0
    assert summary["min_text_similarity"] == 1.0 and summary["max_pixel_difference"] == 0


@pytest.mark.parametrize("name", APPS)
def test_the_reference_agent_passes_offline_and_its_bundle_reproduces_elsewhere(testbed, name, tmp_path):
    suite, app = testbed.suite(name), testbed.app(name)
    run = tmp_path / "run"
    mark = app.mark()
    r = webfreeze("bench", "run", suite, "--agent", "reference", "--out", run, home=testbed.home)
    assert app.requests_since(mark) == []  # the leak canary
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((run / "report.json").read_text())
    outcomes = {task: res["outcome"] for task, res in report["tasks"].items()}
    assert len(outcomes) >= 2 and set(outcomes.values()) == {"success"}, outcomes
    # every JSON file the suite's authoring and the run wrote validates against its format's schema
    assert check_tree(suite)["suite-manifest"] == 1 and check_tree(run)["run-manifest"] == 1

    bundle = tmp_path / f"{name}.wfb"
    redact = []
    if name == "django":
        # a login: the admin's password is typed in the reference, its session cookie in the
        # archive. Shared as it is, the bundle is refused; redacted, neither is anywhere in it.
        r = webfreeze("bundle", "pack", run, "-o", bundle, home=testbed.home)
        assert r.returncode == 1 and "password" in r.stderr and not bundle.exists(), r.stdout + r.stderr
        redact = ["--redact"]
    r = webfreeze("bundle", "pack", run, *redact, "-o", bundle, cwd="/", home=testbed.home)
    assert r.returncode == 0, r.stderr[-2000:]
    elsewhere = tmp_path / "another-lab"
    elsewhere.mkdir()
    r = webfreeze("bundle", "run", bundle, "--out", "rerun", cwd=elsewhere, home=testbed.home)
    assert app.requests_since(mark) == []
    assert r.returncode == 0, r.stderr[-2000:]
    assert "identical to the bundled run" in r.stdout, r.stdout
    rerun = next((elsewhere / "rerun" / "runs").iterdir())
    assert check_tree(elsewhere / "rerun")["run-manifest"] == 2  # (the bundled run and its re-run)
    assert check_bundle(bundle, tmp_path / "unpacked")["bundle-index"] == 1
    if not redact:
        assert run_difference(run, rerun) is None
        return
    _no_credentials_in(bundle, tmp_path / "members", suite.parent / f"{name}.wfz")


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_a_redacted_login_validates_in_both_backends(testbed, tmp_path, backend):
    """The Django suite's login, redacted with its suite: the reference agent types the password's
    placeholder, the redacted login post holds the same placeholder, and every task validates."""
    from testbed.apps import ADMIN_PASSWORD

    suite, app = testbed.suite("django"), testbed.app("django")
    out, suite_out = tmp_path / "red.wfz", tmp_path / "suite"
    r = webfreeze("archive", "redact", suite.parent / "django.wfz", "-o", out, "--suite", suite,
                  "--suite-out", suite_out, home=testbed.home)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not holds(everything(out), ADMIN_PASSWORD)
    assert ADMIN_PASSWORD not in "".join(p.read_text() for p in suite_out.rglob("*.json*"))
    mark = app.mark()
    r = webfreeze("tasks", "validate", suite_out, "--archive", out, "--backend", backend, home=testbed.home)
    assert app.requests_since(mark) == []
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]


def _secrets_of(archive: Path) -> dict[str, set]:
    """The secrets of the unredacted Django archive, by kind: the value of every cookie it set or
    sent (sessionid, csrftoken), and every CSRF form token its pages and posts hold."""
    import re
    from urllib.parse import parse_qsl

    found: dict[str, set] = {"sessionid": set(), "csrftoken": set(), "csrfmiddlewaretoken": set()}
    with Archive.open(archive) as arc:
        for ex in arc.exchanges():
            cookies = [v.split(";")[0] for k, v in ex.headers if k.lower() == "set-cookie"]
            cookies += [c.strip() for k, v in ex.request.headers if k.lower() == "cookie" for c in v.split(";")]
            for c in cookies:
                name, _, value = c.partition("=")
                if name in found and value:
                    found[name].add(value)
            if ex.method == "POST" and ex.request.body_digest:
                found["csrfmiddlewaretoken"] |= {v for k, v in parse_qsl(ex.request.body().decode())
                                                 if k == "csrfmiddlewaretoken"}
            if "html" in (ex.response.mime or ""):
                found["csrfmiddlewaretoken"] |= set(re.findall(
                    rb'name="csrfmiddlewaretoken" value="([^"]+)"', ex.body()))
    found["csrfmiddlewaretoken"] = {v.decode() if isinstance(v, bytes) else v for v in found["csrfmiddlewaretoken"]}
    return found


def _no_credentials_in(bundle: Path, members: Path, archive: Path) -> None:
    """Neither the admin's password nor any cookie value nor any CSRF token of the run's archive is
    in any member of the bundle, decompressed blobs of its archive included."""
    import zipfile

    from testbed.apps import ADMIN_PASSWORD

    secrets = _secrets_of(archive)
    assert secrets["sessionid"] and secrets["csrftoken"] and secrets["csrfmiddlewaretoken"], secrets  # (else: nothing)
    with zipfile.ZipFile(bundle) as zf:
        zf.extractall(members)
        files = [zf.read(n) for n in zf.namelist()]
    (packed,) = list((members / "archive").glob("*.wfz"))
    chunks = files + everything(packed)
    assert not holds(chunks, ADMIN_PASSWORD)
    left = {kind: [s for s in values if holds(chunks, s)] for kind, values in secrets.items()}
    assert not any(left.values()), {k: len(v) for k, v in left.items()}


def test_a_redacted_django_bundle_re_runs_identically_in_the_text_backend(testbed, tmp_path):
    """The same as the browser run above, in the text backend: redacted, packed, copied elsewhere,
    re-run identically, and none of the secrets in any member or decoded blob (issue 44)."""
    suite, app = testbed.suite("django"), testbed.app("django")
    run = tmp_path / "run"
    mark = app.mark()
    r = webfreeze("bench", "run", suite, "--agent", "reference", "--backend", "text", "--out", run, home=testbed.home)
    assert r.returncode == 0, r.stderr[-2000:]
    bundle = tmp_path / "django-text.wfb"
    r = webfreeze("bundle", "pack", run, "--redact", "-o", bundle, cwd="/", home=testbed.home)
    assert r.returncode == 0, r.stderr[-2000:]
    elsewhere = tmp_path / "another-lab"
    elsewhere.mkdir()
    r = webfreeze("bundle", "run", bundle, "--out", "rerun", cwd=elsewhere, home=testbed.home)
    assert app.requests_since(mark) == []
    assert r.returncode == 0 and "identical to the bundled run" in r.stdout, r.stdout + r.stderr[-2000:]
    _no_credentials_in(bundle, tmp_path / "members", suite.parent / "django.wfz")


def test_the_search_page_renders_the_same_on_every_reset(testbed):
    """Sphinx's search page draws its results with JavaScript (searchtools.js over
    searchindex.js): the first observation of the browser backend must be the same bytes on every
    reset (issue 31; the settle rule must not depend on wall-clock luck)."""
    from webfreeze import EnvConfig, WebEnv

    suite, app = testbed.suite("sphinx"), testbed.app("sphinx")
    archive = suite.parent / "sphinx.wfz"
    mark = app.mark()
    env = WebEnv(EnvConfig(archive=archive, backend="browser", suite=suite))
    texts = []
    try:
        for _ in range(10):
            env.reset(options={"task": "docs-search-priority"})
            texts.append(env.tree.axtree_text)
    finally:
        env.close()
    assert app.requests_since(mark) == []
    digests = [hashlib.sha256(t.encode()).hexdigest()[:12] for t in texts]
    assert len(set(digests)) == 1, digests
    assert "Search finished" in texts[0] and "link 'Queues'" in texts[0], texts[0]  # the results, drawn


def test_recording_a_keep_alive_server_under_its_name_completes(testbed, tmp_path):
    """Django's runserver with its default threading keeps connections alive. Recorded through
    ``--resolve`` over plain HTTP, a crawl must still load every page (one page used to stall in the
    recording proxy until the browser's 30 s timeout, and was listed as failed: the proxy opened a
    new upstream connection for every request and kept the others open)."""
    app = start_django(tmp_path / "django", threading=True)
    try:
        r = webfreeze("record", "crawl", app.base_url, "--archive", tmp_path / "ka.wfz", "--depth", 1,
                      "--max-pages", 9, "--resolve", app.resolve, home=testbed.home)
    finally:
        app.stop()
    assert r.returncode == 0, r.stderr[-1000:]
    assert "failed" not in r.stdout and "(complete)" in r.stdout, r.stdout


def test_the_database_is_the_same_for_the_same_seed(tmp_path):
    from testbed.makedb import make_database

    dumps = []
    for i in range(2):
        with sqlite3.connect(make_database(tmp_path / f"{i}.db")) as db:
            dumps.append("\n".join(db.iterdump()))
    assert dumps[0] == dumps[1]
    with sqlite3.connect(tmp_path / "0.db") as db:
        assert db.execute("PRAGMA foreign_key_list(books)").fetchone()[2] == "authors"
        assert db.execute("SELECT count(*) FROM books").fetchone()[0] == 300


def test_a_login_recorded_after_a_crawl_of_its_form_replays(testbed, tmp_path):
    """The crawl captured Django's login page (a CSRF token in its form and its cookie); the
    session recorded afterwards captured it again, with another token, and the POST that carried
    that token. A replay of the session must log in: the task is replayed as of its session's time
    (its snapshot_time), and the form's token is an ignorable field (replayer/matching.py)."""
    from testbed.suites import build_suite

    app = testbed.app("django")
    suite = build_suite("django", app, tmp_path / "suite", webfreeze, testbed.home,
                        base_archive=testbed.crawl("django"), only=["admin-knots-copies"])
    mark = app.mark()
    r = webfreeze("bench", "run", suite, "--agent", "reference", "--out", tmp_path / "run", home=testbed.home)
    assert app.requests_since(mark) == []
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["tasks"]["admin-knots-copies"]["outcome"] == "success", report["tasks"]["admin-knots-copies"]


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_an_unrecorded_filter_value_is_a_miss_the_agent_can_read(testbed, tmp_path, backend):
    """Two Datasette table pages that differ only in a query value (the facet filter): the one the
    crawl recorded is answered exactly; the other is the "not in the archive" page, flagged in the
    step's provenance and counted as a miss (issue 33), never another filter's rows."""
    from webfreeze import EnvConfig, WebEnv

    archive, app = testbed.crawl("datasette"), testbed.app("datasette")
    with Archive.open(archive) as arc:
        recorded = sorted(ex.url for ex in arc.exchanges() if ex.status == 200 and "genre=" in ex.url
                          and "/testbed/books?" in ex.url and ".json" not in ex.url)
    assert recorded, "the crawl recorded no filtered table page"
    first = recorded[0]
    value = first.split("genre=", 1)[1].split("&", 1)[0]
    unrecorded = first.replace(f"genre={value}", "genre=no-such-genre")
    mark = app.mark()
    env = WebEnv(EnvConfig(archive=archive, backend=backend))
    try:
        obs, _ = env.reset(options={"task": {"id": "filters", "start_url": first, "instruction": "look"}})
        assert value in obs["axtree_text"]
        obs, *_ = env.step(f"goto('{unrecorded}')")
        assert "not in archive" in obs["axtree_text"], obs["axtree_text"][:500]
        obs, *_ = env.step("send_msg_to_user('done')")
        trajectory = env.trajectory()
    finally:
        env.close()
    assert app.requests_since(mark) == []
    assert trajectory["replay"]["start"]["document"]["level"] == "exact"
    step = trajectory["steps"][0]["replay"]
    assert step["document"]["level"] == "miss" and step["document"]["url"] == unrecorded
    assert trajectory["replay"]["compromised"] and trajectory["replay"]["misses"] >= 1
    # as a run folder: the report counts the episode, and replay coverage names the request
    from webfreeze.eval.report import write_report
    from webfreeze.simulator.trajectory import write_trajectory

    run = tmp_path / "run"
    run.mkdir()
    (run / "tasks.jsonl").write_text(json.dumps({"id": "filters", "category": "data", "instruction": "look",
                                                 "start_url": first,
                                                 "ground_truth": {"answer": {"exact": "done"}}}) + "\n")
    (run / "manifest.json").write_text(json.dumps({"agent": {"name": "scripted"}, "suite": {"name": "testbed"}}))
    write_trajectory(trajectory, run)
    report = write_report(run)
    assert report["replay"]["compromised"] == 1 and report["replay"]["misses"] >= 1
    assert [e["task_id"] for e in report["replay"]["episodes_compromised"]] == ["filters"]
    r = webfreeze("replay", "coverage", run, "--json", home=testbed.home)
    assert r.returncode == 0, r.stderr
    groups = [g for g in json.loads(r.stdout)["groups"] if g["level"] == "miss" and g["host"] == app.host]
    assert any(unrecorded in g["examples"] and g["tasks"] == ["filters"] for g in groups), groups
