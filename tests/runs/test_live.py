"""Live runs that record themselves, and patching misses (webfreeze/runs/live.py), on loopback.

The simulated scholar site is served by the test (its access log is a list of paths); an unrelated
canary server is named as every proxy a process could pick up from its environment
(HTTP_PROXY, HTTPS_PROXY, ALL_PROXY), so that anything reaching for the network by any way other
than the run's own recording proxy would knock on it. The CLI runs as a user would run it.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from logged_app import Logged

from webfreeze.archives import Archive, archive_digest
from webfreeze.recorder.proxy import free_port
from webfreeze.runs.compare import run_difference
from webfreeze.simulator.sites import SITES
from webfreeze.simulator.sites.common import SiteServer

SUITE = Path(__file__).resolve().parents[2] / "webfreeze" / "demo" / "data" / "suite"
TASKS = "scholar-paper-retrieval-00[12]"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A private WEBFREEZE_HOME (the recording CA), never the user's."""
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def scholar():
    app = Logged(SITES["scholar"](0))
    server = SiteServer(app).start()
    server.log, server.logged = app.log, app
    yield server
    server.stop()


@pytest.fixture
def canary():
    """A server nothing should ever reach: it records every request line it gets."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def _any(self):
            seen.append(self.requestline)
            self.send_response(418)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_HEAD = do_CONNECT = _any

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.seen = seen
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield server
    server.shutdown()
    server.server_close()


def wf(*args, canary=None, timeout: float = 600) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess; with ``canary``, every environment proxy variable names it."""
    env = dict(os.environ)
    for k in ("NO_PROXY", "no_proxy"):
        env.pop(k, None)
    if canary is not None:
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            env[k] = canary.url
    return subprocess.run([sys.executable, "-m", "webfreeze", *map(str, args)], capture_output=True, text=True,
                          check=False, env=env, timeout=timeout)


def bench(out, *more, canary=None):
    got = wf("bench", "run", SUITE, "--agent", "reference", "--tasks", TASKS, "--out", out, *more, canary=canary)
    assert got.returncode == 0, got.stderr[-3000:]
    return got


def manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text(encoding="utf-8"))


def trajectories(run: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted((run / "trajectories").glob("*.json"))}


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_a_live_run_is_its_own_frozen_benchmark(tmp_path, home, scholar, canary, backend):
    live, offline = tmp_path / "live", tmp_path / "offline"
    bench(live, "--backend", backend, "--live", "--resolve", f"scholar.test=127.0.0.1:{scholar.port}", canary=canary)
    assert scholar.log, "the live run reached the site"
    assert canary.seen == []  # nothing went round the recording proxy
    m = manifest(live)
    archive = live / "live.wfz"
    assert m["archive"]["digest"] == archive_digest(archive)
    said = m["circumstances"]["live"]
    assert said["mode"] == "record" and said["digest"] == m["archive"]["digest"] and said["site_failures"] == 0
    assert said["live_fetches"] >= len(scholar.log) > 0
    for t in trajectories(live).values():
        assert t["end"]["reason"] == "answer" and t["env"]["archive_digest"] == m["archive"]["digest"]
    arc = Archive.open(archive)
    try:
        episodes = arc.get_document("live/episodes.json")["episodes"]
        assert sorted(episodes) == ["scholar-paper-retrieval-001", "scholar-paper-retrieval-002"]
        sessions = {s for ids in episodes.values() for s in ids}
        assert len(sessions) == 2  # one capture session per episode
        assert {arc.session(s)["kind"] for s in sessions} == {"live"}
        assert {r.session_id for r in arc.exchanges()} == sessions  # every request landed in its episode's
    finally:
        arc.close()

    seen = len(scholar.log)
    bench(offline, "--backend", backend, "--archive", archive, canary=canary)
    assert len(scholar.log) == seen  # the strict offline re-run never reached the site
    assert canary.seen == []
    assert run_difference(live, offline) is None  # trajectories and report.json byte-identical, timings aside
    assert manifest(offline)["archive"] == m["archive"]
    if backend == "text":  # bundled like any run: the bundle's re-run replays the recorded archive
        bundle, elsewhere = tmp_path / "live.wfb", tmp_path / "elsewhere"
        got = wf("bundle", "pack", live, "-o", bundle)
        assert got.returncode == 0, got.stderr
        elsewhere.mkdir()
        got = subprocess.run([sys.executable, "-m", "webfreeze", "bundle", "run", str(bundle), "--out", "rerun"],
                             capture_output=True, text=True, check=False, cwd=elsewhere, timeout=600)
        assert got.returncode == 0 and "identical to the bundled run" in got.stdout, got.stdout + got.stderr
        assert len(scholar.log) == seen


def test_a_site_failure_is_an_infrastructure_error_retried_on_resume(tmp_path, home, scholar):
    run = tmp_path / "run"
    closed = free_port()  # nothing listens there: the connection is refused
    got = wf("bench", "run", SUITE, "--agent", "reference", "--tasks", "scholar-site-info-001", "--backend", "text",
             "--out", run, "--live", "--resolve", f"scholar.test=127.0.0.1:{closed}")
    assert got.returncode == 0, got.stderr
    # the report counts it as infrastructure, apart from provider failures, and the CLI says so
    overall = json.loads((run / "report.json").read_text(encoding="utf-8"))["summary"]["overall"]
    assert overall["infrastructure_errors"] == 1 and overall["site_errors"] == 1
    assert "1 of 1 episode(s) ended by a live site failing (not the agent's failure" in got.stderr
    end = trajectories(run)["scholar-site-info-001"]["end"]
    assert end["reason"] == "error" and end["cause"] == "site"
    detail = end["detail"]
    assert detail.startswith("the live site failed: GET http://scholar.test/: ")
    assert "refused" in detail.lower() or "connect call failed" in detail.lower()  # the cause, as the proxy saw it
    assert manifest(run)["circumstances"]["live"]["site_failures"] == 1
    # the same command with the site back: the episode runs again and succeeds
    got = wf("bench", "run", SUITE, "--agent", "reference", "--tasks", "scholar-site-info-001", "--backend", "text",
             "--out", run, "--live", "--resolve", f"scholar.test=127.0.0.1:{scholar.port}")
    assert got.returncode == 0, got.stderr
    assert trajectories(run)["scholar-site-info-001"]["end"]["reason"] == "answer"
    overall = json.loads((run / "report.json").read_text(encoding="utf-8"))["summary"]["overall"]
    assert overall["infrastructure_errors"] == 0 and "site_errors" not in overall  # the bytes of a plain report
    assert manifest(run)["circumstances"]["live"]["site_failures"] == 0


class GoneImage:
    """The site as a later build of it: every page but the home page asks for an image it no longer
    has (``/static/gone.png``: 404), as a page of an old build names a hashed file a new one lacks."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path == "/static/gone.png":
            start_response("404 Not Found", [("Content-Type", "text/plain"), ("Content-Length", "4")])
            return [b"gone"]
        got: dict = {}

        def keep(status, headers, exc_info=None):
            got.update(status=status, headers=headers)

        environ = {k: v for k, v in environ.items() if k != "HTTP_ACCEPT_ENCODING"}  # (a body to edit, not gzip)
        body = b"".join(self.app(environ, keep))
        headers = got["headers"]
        if path != "/" and any(k.lower() == "content-type" and v.startswith("text/html") for k, v in headers):
            body = body.replace(b"</body>", b'<img src="/static/gone.png" alt=""></body>', 1)
            headers = [(k, str(len(body)) if k.lower() == "content-length" else v) for k, v in headers]
        start_response(got["status"], headers)
        return [body]


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_patching_misses_fetches_them_live_into_a_copy(tmp_path, home, scholar, canary, backend):
    scholar.logged.app = GoneImage(scholar.logged.app)
    crawl = tmp_path / "crawl.wfz"
    got = wf("record", "crawl", "http://scholar.test/", "--archive", crawl, "--depth", "0", "--screenshots", "none",
             "--resolve", f"scholar.test=127.0.0.1:{scholar.port}")
    assert got.returncode == 0, got.stderr
    before = archive_digest(crawl)

    offline = tmp_path / "offline"
    bench(offline, "--backend", backend, "--archive", crawl)
    assert sum(t["replay"]["misses"] for t in trajectories(offline).values()) > 0  # beyond the crawl's pages

    patched = tmp_path / "patched"
    seen = len(scholar.log)
    got = bench(patched, "--backend", backend, "--archive", crawl, "--patch-from-live",
                "--resolve", f"scholar.test=127.0.0.1:{scholar.port}", canary=canary)
    assert len(scholar.log) > seen and canary.seen == []
    assert archive_digest(crawl) == before  # the input archive is never written
    m = manifest(patched)
    said = m["circumstances"]["live"]
    copy = patched / "patched.wfz"
    assert said["mode"] == "patch" and said["digest"] == archive_digest(copy) and said["live_fetches"] > 0
    assert m["archive"]["digest"] == before
    runs = trajectories(patched)
    assert all(t["end"]["reason"] == "answer" and t["replay"]["misses"] == 0 for t in runs.values())
    live_answers = sum(by.get("live", 0) for t in runs.values() for by in t["replay"]["requests"].values())
    assert live_answers == said["live_fetches"]  # labelled live in the provenance, and counted
    # and said where a person reads the run: the episodes that took answers from today's site
    touched = sum(any(by.get("live") for by in t["replay"]["requests"].values()) for t in runs.values())
    assert touched and json.loads((patched / "report.json").read_text())["replay"]["live"] == touched
    assert f"; {touched} with answers fetched live from the site today (--patch-from-live)" in got.stderr, got.stderr
    # the live site's errors are said: the browser asked for the image the site no longer has
    warned = [line for line in got.stderr.splitlines() if "fetched live to patch" in line]
    if backend == "browser":
        gone = "404 GET http://scholar.test/static/gone.png"
        assert said["live_errors"] >= 1 and said["live_error_example"] == gone, said
        assert len(warned) == 1 and warned[0].startswith(f"warning: {said['live_errors']} answer(s)"), got.stderr
        assert gone in warned[0] and "patched.wfz" in warned[0]
        report = wf("eval", "report", patched)
        assert report.returncode == 0 and warned[0] in report.stderr.splitlines(), report.stderr
    else:  # (the text backend fetches no image)
        assert "live_errors" not in said and not warned, got.stderr

    again = tmp_path / "again"
    seen = len(scholar.log)
    bench(again, "--backend", backend, "--archive", copy, canary=canary)
    assert len(scholar.log) == seen and canary.seen == []  # the patched archive replays hermetically
    assert all(t["end"]["reason"] == "answer" and t["replay"]["misses"] == 0 for t in trajectories(again).values())


@pytest.mark.parametrize("args, words", [
    (["--live", "--archive", "{crawl}"], "--archive names one to replay"),
    (["--live", "--patch-from-live"], "do not go together"),
    (["--record-into", "{tmp}/x.wfz"], "--record-into needs --live"),
    (["--resolve", "a.test=127.0.0.1:9"], "--resolve needs --live"),
    (["--live", "--cassette-mode", "replay", "--cassette", "{cassette}"], "--cassette-mode replay"),
    (["--live", "--executor", "ray"], "local executor only"),
    (["--patch-from-live", "--archive", "{crawl}", "--record-into", "{crawl}"], "never writes its input"),
    (["--http-credentials", "editor:HOME"], "--http-credentials needs --live"),
    (["--live", "--backend", "text", "--http-credentials", "editor:HOME"], "needs the browser backend"),
])
def test_incoherent_live_options_are_refused_in_one_line(tmp_path, home, args, words):
    crawl = SUITE.parent / "demo.wfz"
    cassette = SUITE.parent / "llm-cassette.sqlite"
    filled = [a.format(crawl=crawl, tmp=tmp_path, cassette=cassette) for a in args]
    out = tmp_path / "run"
    got = wf("bench", "run", SUITE, "--agent", "reference", "--tasks", TASKS, "--out", out, *filled)
    assert got.returncode == 1, got.stderr
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in got.stderr
    assert not out.exists()  # nothing half-written


@pytest.mark.parametrize("name", ["sphinx", "datasette"])
def test_a_live_run_of_a_real_application_replays_identically(testbed, name, tmp_path, canary):
    """The same with a real application of the test bed (tests/testbed): live, then offline."""
    from testbed.fixtures import cli_env

    suite, app = testbed.suite(name), testbed.app(name)
    live, offline = tmp_path / "live", tmp_path / "offline"

    def run(out, *more):
        env = {**cli_env(testbed.home), **{k: canary.url for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")}}
        env.pop("NO_PROXY", None)
        got = subprocess.run([sys.executable, "-m", "webfreeze", "bench", "run", str(suite), "--agent", "reference",
                              "--out", str(out), *map(str, more)], capture_output=True, text=True, check=False,
                             env=env, timeout=600)
        assert got.returncode == 0, got.stderr[-3000:]

    mark = app.mark()
    run(live, "--live", "--resolve", app.resolve)
    assert app.requests_since(mark), "the live run reached the application"
    mark = app.mark()
    run(offline, "--archive", live / "live.wfz")
    assert app.requests_since(mark) == [] and canary.seen == []
    report = json.loads((offline / "report.json").read_text(encoding="utf-8"))
    assert {r["outcome"] for r in report["tasks"].values()} == {"success"}
    assert run_difference(live, offline) is None


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_an_https_site_live_through_the_environment_then_offline(tmp_path, home, backend):
    """The library level: ``EnvConfig(upstream=...)`` with the live proxy of recorder/live.py, on a
    site served over TLS with a certificate of its own (as real sites are), then the archive alone."""
    from tls_certs import self_signed

    from webfreeze.recorder.live import live_ca_file, live_proxy
    from webfreeze.simulator.env import EnvConfig, WebEnv
    from webfreeze.simulator.sites.common import tls_context
    from webfreeze.simulator.trajectory import without_timings

    app = Logged(SITES["scholar"](0))
    site = SiteServer(app, ssl_context=tls_context(*map(str, self_signed(tmp_path / "tls", ["scholar.test"])))).start()
    task = {"id": "browse", "instruction": "Open the Computer Science listing.", "start_url": "https://scholar.test/",
            "ground_truth": {}}

    def play(env) -> dict:
        obs, _ = env.reset(options={"task": task})
        link = next(e["bid"] for e in obs["elements"] if e.get("role") == "link" and "Computer" in (e.get("name") or ""))
        env.step(f"click [{link}]")
        env.step("go_back()")
        trajectory = without_timings(env.trajectory(stopped=True))
        trajectory["env"].pop("archive_digest")  # (the live one was taken while the archive grew)
        return trajectory

    archive = tmp_path / "live.wfz"
    try:
        with live_proxy(archive, resolve={"scholar.test": ("127.0.0.1", site.port)}) as proxy:
            env = WebEnv(EnvConfig(archive, backend=backend,
                                   upstream={"proxy": proxy.url, "ca_file": live_ca_file(), "mode": "live"}))
            try:
                live = play(env)
                assert env.site_failures() == []
            finally:
                env.close()
        served = len(app.log)
        assert served > 0 and live["steps"][0]["url_after"].startswith("https://scholar.test/list/")
        env = WebEnv(EnvConfig(archive, backend=backend))
        try:
            offline = play(env)
        finally:
            env.close()
        assert len(app.log) == served  # the archive alone
    finally:
        site.stop()
    assert json.dumps(offline, sort_keys=True) == json.dumps(live, sort_keys=True)
