"""Honest replay for agents (issue 33): a search never recorded is a miss the agent can read, not
another search's page; every answer is accounted for in the trajectory, the report and
``replay coverage``.

The simulated site is a wiki whose search form sends fixed parameters beside the query
(``title=Special:Search&search=X&go=Go``, MediaWiki's shape): a term that was not recorded
scores ~0.73 against a recorded one, above the fuzzy threshold.
"""

from __future__ import annotations

import json

import pytest
from cli_runner import invoke, run_cli

from webfreeze.archives import Archive, Exchange, new_archive_atomically
from webfreeze.replayer.matching import AGENT_RULES, Matcher, Rules, request_kind
from webfreeze.replayer.server import ReplayServer
from webfreeze.simulator.env import EnvConfig, WebEnv
from webfreeze.simulator.trajectory import dumps, without_timings, write_trajectory

T0 = "2024-03-01T12:00:00Z"
HOST = "http://wiki.test"
SEARCH = HOST + "/w/index.php?title=Special%3ASearch&search={}&go=Go"
HTML = [("Content-Type", "text/html; charset=utf-8")]

HOME = b"""<!doctype html><html><head><title>Wiki</title></head><body><h1>Wiki</h1>
<form action="/w/index.php" method="get"><input type="hidden" name="title" value="Special:Search">
<input type="search" name="search" aria-label="Search the wiki"><input type="submit" name="go" value="Go"></form>
<img src="/logo.png?v=2" alt="logo"></body></html>"""


def article(name: str) -> bytes:
    return (f"<!doctype html><html><head><title>{name}</title></head><body><h1>{name}</h1>"
            f"<p>The article about {name}.</p></body></html>").encode()


def build_wiki(path):
    exchanges = [
        (HOST + "/", 200, HTML, HOME),
        (SEARCH.format("Quantum"), 302, [("Location", HOST + "/wiki/Quantum")], b""),
        (HOST + "/wiki/Quantum", 200, HTML, article("Quantum")),
        (HOST + "/logo.png?v=1", 200, [("Content-Type", "image/png")], b"\x89PNG fake"),
        (HOST + "/api/info?page=Quantum&_ts=1", 200, [("Content-Type", "application/json")], b'{"page": "Quantum"}'),
    ]
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_honest_replay")
        for url, status, headers, body in exchanges:
            arc.add_exchange(Exchange(session_id=sid, url=url, status=status, resp_headers=headers, payload=body,
                                      captured_at=T0))
    return path


@pytest.fixture(scope="module")
def wiki(tmp_path_factory):
    return build_wiki(tmp_path_factory.mktemp("wiki") / "wiki.wfz")


def _matcher(wiki, rules: dict | None = None) -> Matcher:
    arc = Archive.open(wiki)
    try:
        return Matcher.from_archive(arc, Rules.from_dict(rules))
    finally:
        arc.close()


NAV = [("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")]


def test_request_kinds_from_headers():
    assert request_kind(NAV, HOST + "/w/index.php") == "document"
    assert request_kind([("Accept", "*/*")], HOST + "/api/info") == "xhr"
    assert request_kind([("Accept", "image/avif,image/webp,*/*")], HOST + "/logo") == "subresource"
    assert request_kind([("Accept", "*/*")], HOST + "/app.js") == "subresource"
    assert request_kind([("Sec-Fetch-Dest", "empty"), ("Accept", "text/html")], HOST + "/x") == "xhr"
    assert request_kind([("Sec-Fetch-Dest", "iframe")], HOST + "/x") == "document"


def test_agent_rules_refuse_another_search_but_people_keep_fuzzy(wiki):
    people, agents = _matcher(wiki), _matcher(wiki, AGENT_RULES)
    other = SEARCH.format("Photosynthesis")
    level, _, caps, fuzzy_score = people.candidates("GET", other, "", "document")
    assert level == "fuzzy" and 0.5 <= fuzzy_score < 1 and caps[0].url == SEARCH.format("Quantum")
    # the same request from an agent: a miss, with the score that was turned down kept for the report
    level, _, caps, score = agents.candidates("GET", other, "", "document")
    assert (level, caps) == ("", []) and score == fuzzy_score
    # the recorded search is exact for both
    assert agents.candidates("GET", SEARCH.format("Quantum"), "", "document")[0] == "exact"
    # an XHR whose meaningful parameter differs misses too; one differing only in `_`-names does not
    assert agents.candidates("GET", HOST + "/api/info?page=Other&_ts=1", "", "xhr")[0] == ""
    assert agents.candidates("GET", HOST + "/api/info?page=Quantum&_ts=9", "", "xhr")[0] == "fuzzy"
    # static subresources stay fuzzy
    assert agents.candidates("GET", HOST + "/logo.png?v=2", "", "subresource")[0] == "fuzzy"
    # rules turn fuzzy back on for documents, or make a parameter ignorable
    assert _matcher(wiki, {**AGENT_RULES, "fuzzy_documents": True}).candidates("GET", other, "", "document")[0] \
        == "fuzzy"
    loose = _matcher(wiki, {**AGENT_RULES, "ignorable_params": ["search"]})
    assert loose.candidates("GET", other, "", "document")[0] == "fuzzy"
    assert loose.candidates("GET", other, "", "xhr")[0] == "fuzzy"


def test_replay_serve_keeps_fuzzy_answers_unless_given_rules(wiki, tmp_path):
    import http.client

    def get(srv, url):
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("GET", url, headers=dict(NAV))
        resp = conn.getresponse()
        resp.read()
        conn.close()
        return resp

    other = SEARCH.format("Photosynthesis")
    with ReplayServer(wiki, mode="proxy", confdir=tmp_path / "home", miss_report=tmp_path / "m.jsonl") as srv:
        resp = get(srv, other)
        assert (resp.status, resp.getheader("X-Webfreeze-Match")) == (302, "fuzzy")
        assert resp.getheader("X-Webfreeze-Capture-Url") == SEARCH.format("Quantum")
        score = float(resp.getheader("X-Webfreeze-Score"))
        assert 0.5 <= score < 1
    with ReplayServer(wiki, mode="proxy", confdir=tmp_path / "home", miss_report=tmp_path / "m.jsonl",
                      rules={"fuzzy_documents": False}) as srv:
        resp = get(srv, other)
        assert (resp.status, resp.getheader("X-Webfreeze-Miss")) == (404, "1")
    entry = json.loads((tmp_path / "m.jsonl").read_text().splitlines()[-1])
    assert entry["url"] == other and entry["best_fuzzy_score"] == pytest.approx(score, abs=1e-4)


def search_episode(env: WebEnv, term: str, tid: str) -> dict:
    obs, _ = env.reset(options={"task": {"id": tid, "start_url": HOST + "/", "instruction": f"find {term}"}})
    box = next(e["bid"] for e in obs["elements"] if e.get("role") in ("searchbox", "textbox"))
    env.step(f"fill('{box}', '{term}')")
    go = next(e["bid"] for e in env.tree.summaries() if e.get("name") == "Go")
    env.step(f"click('{go}')")
    env.step("send_msg_to_user('done')")
    return env.trajectory()


def check_search_trajectories(recorded: dict, unrecorded: dict) -> None:
    hit = recorded["steps"][1]
    assert hit["url_after"] == HOST + "/wiki/Quantum"
    assert hit["replay"]["document"]["level"] == "exact"
    assert recorded["replay"]["compromised"] is False
    assert recorded["replay"]["documents"] == {"exact": 2}
    miss = unrecorded["steps"][1]
    assert miss["replay"]["document"]["level"] == "miss"
    assert miss["replay"]["document"]["url"] == SEARCH.format("Photosynthesis")
    # the score honest matching turned down (~0.73 against the recorded search), in both backends
    assert 0.5 <= miss["replay"]["document"]["score"] < 1, miss["replay"]["document"]
    assert [f["url"] for f in miss["replay"]["flagged"] if f["kind"] == "document"] == \
        [SEARCH.format("Photosynthesis")]
    assert unrecorded["replay"]["misses"] >= 1 and unrecorded["replay"]["compromised"] is True
    assert unrecorded["replay"]["fuzzy_documents"] == 0


def test_text_backend_answers_an_unrecorded_search_with_a_miss(wiki):
    env = WebEnv(EnvConfig(wiki, backend="text"))
    try:
        recorded = search_episode(env, "Quantum", "recorded")
        unrecorded = search_episode(env, "Photosynthesis", "unrecorded")
        obs = env._observe()
        assert "not in archive" in obs["axtree_text"] and "Quantum" not in obs["axtree_text"]
        again = search_episode(env, "Photosynthesis", "unrecorded")
    finally:
        env.close()
    check_search_trajectories(recorded, unrecorded)
    assert recorded["replay"]["requests"] == {"document": {"exact": 3}}
    # deterministic: the same episode, the same bytes
    assert dumps(without_timings(unrecorded)) == dumps(without_timings(again))


def test_browser_backend_answers_an_unrecorded_search_with_a_miss(wiki, tmp_path, monkeypatch):
    from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    env = WebEnv(EnvConfig(wiki, backend="browser"))
    try:
        recorded = search_episode(env, "Quantum", "recorded")
        unrecorded = search_episode(env, "Photosynthesis", "unrecorded")
        assert "not in archive" in env._observe()["axtree_text"]
        again = search_episode(env, "Photosynthesis", "unrecorded")
    finally:
        env.close()
    check_search_trajectories(recorded, unrecorded)
    # the home page's logo (a static file under another version) was answered fuzzily, and counted
    assert recorded["replay"]["start"]["requests"]["subresource"] == {"fuzzy": 1}
    assert dumps(without_timings(unrecorded)) == dumps(without_timings(again))
    # with fuzzy documents turned on, the other search's page is shown, and the step says so
    env = WebEnv(EnvConfig(wiki, backend="browser", rules={"fuzzy_documents": True}))
    try:
        loose = search_episode(env, "Photosynthesis", "loose")
    finally:
        env.close()
    doc = loose["steps"][1]["replay"]["document"]
    assert (doc["level"], doc["url"], doc["capture_url"]) == \
        ("fuzzy", SEARCH.format("Photosynthesis"), SEARCH.format("Quantum"))
    assert 0.5 <= doc["score"] < 1 and loose["replay"]["fuzzy_documents"] == 1


@pytest.fixture(scope="module")
def search_run(wiki, tmp_path_factory):
    """A run folder with the two search episodes (text backend), as the runner lays one out."""
    run = tmp_path_factory.mktemp("run") / "run"
    env = WebEnv(EnvConfig(wiki, backend="text"))
    try:
        trajs = [search_episode(env, "Quantum", "recorded"), search_episode(env, "Photosynthesis", "unrecorded")]
    finally:
        env.close()
    tasks = [{"id": t["task_id"], "category": "search", "instruction": "find it", "start_url": HOST + "/",
              "ground_truth": {"answer": {"exact": "done"}}} for t in trajs]
    run.mkdir()
    (run / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    (run / "manifest.json").write_text(json.dumps({"agent": {"name": "scripted"}, "suite": {"name": "wiki"}}))
    for t in trajs:
        write_trajectory(t, run)
    return run


def test_report_counts_replay_compromised_episodes(search_run):
    from webfreeze.eval.report import write_report

    report = write_report(search_run)
    prov = report["replay"]
    assert prov["episodes"] == 2 and prov["compromised"] == 1 and prov["misses"] == 1
    assert prov["fuzzy_documents"] == 0 and prov["fuzzy_xhr"] == 0
    assert [e["task_id"] for e in prov["episodes_compromised"]] == ["unrecorded"]
    assert report["tasks"]["unrecorded"]["replay"]["misses"] >= 1
    assert report["tasks"]["recorded"]["replay"]["compromised"] is False
    html = (search_run / "report.html").read_text()
    assert "Replay provenance" in html and "unrecorded" in html


def test_strict_replay_report_sets_compromised_episodes_apart(search_run):
    proc = invoke("eval", "report", search_run, "--strict-replay", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    strict = report["strict_replay"]
    assert strict["replay_compromised"] == ["unrecorded"]
    assert strict["success"] + strict["failure"] + len(strict["replay_compromised"]) == 2
    proc = invoke("eval", "report", search_run, "--strict-replay")
    assert proc.returncode == 0 and "replay-compromised" in proc.stdout + proc.stderr


def test_replay_coverage_lists_the_unrecorded_search(search_run):
    proc = invoke("replay", "coverage", search_run, "--json")
    assert proc.returncode == 0, proc.stderr
    cov = json.loads(proc.stdout)
    groups = {(g["host"], g["pattern"], g["level"]): g for g in cov["groups"]}
    g = groups[("wiki.test", "/w/index.php?go=*&search=*&title=*", "miss")]
    assert g["count"] == 1 and g["tasks"] == ["unrecorded"]
    assert g["examples"] == [SEARCH.format("Photosynthesis")]
    text = invoke("replay", "coverage", search_run)
    assert text.returncode == 0 and "/w/index.php" in text.stdout and "unrecorded" in text.stdout
    bad = invoke("replay", "coverage", search_run / "nope")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def suite_runs(wiki, tmp_path_factory):
    """The reference agent replays an unrecorded search with ``bench run``: under the default rules
    ("strict") and under a suite whose replay_rules turn fuzzy documents on ("loose")."""
    tmp = tmp_path_factory.mktemp("suites")
    reference = {"version": 1, "kind": "reference_trajectory", "start_url": HOST + "/", "steps": [
        {"step": 0, "action": "navigate", "target": None, "value": None, "url": HOST + "/"},
        {"step": 1, "action": "type", "target": {"role": "searchbox", "name": "Search the wiki"},
         "value": "Photosynthesis", "url": HOST + "/"},
        {"step": 2, "action": "click", "target": {"role": "button", "name": "Go"}, "value": None, "url": HOST + "/"},
        {"step": 3, "action": "answer", "target": None, "value": {"text": "done", "evidence": []}, "url": HOST + "/"}]}
    runs = {}
    for name, rules in (("strict", None), ("loose", {"fuzzy_documents": True})):
        suite = tmp / f"suite-{name}"
        (suite / "refs").mkdir(parents=True)
        (suite / "refs" / "photosynthesis.json").write_text(json.dumps(reference))
        manifest = {"format": "webfreeze-suite", "version": 1, "name": "wiki", "archive_digest": None,
                    "tasks": "tasks.jsonl", **({"replay_rules": rules} if rules else {})}
        (suite / "manifest.json").write_text(json.dumps(manifest))
        task = {"id": "photosynthesis", "category": "search", "instruction": "find Photosynthesis",
                "start_url": HOST + "/", "ground_truth": {"answer": {"exact": "done"},
                                                          "reference_trajectory": "refs/photosynthesis.json"}}
        (suite / "tasks.jsonl").write_text(json.dumps(task) + "\n")
        out = tmp / f"run-{name}"
        proc = run_cli("bench", "run", suite, "--archive", wiki, "--agent", "reference", "--backend", "text",
                       "--out", out)
        assert proc.returncode == 0, proc.stderr
        # bench run says it too, and where to look
        assert f"replay: 1 of 1 episodes replay-compromised ({int(name == 'loose')} fuzzy main document" in proc.stderr
        assert f"webfreeze replay coverage {out}" in proc.stderr
        runs[name] = out
    return runs


def test_a_suite_turns_fuzzy_documents_back_on(suite_runs):
    runs = {}
    for name, out in suite_runs.items():
        runs[name] = json.loads((out / "trajectories" / "photosynthesis.json").read_text())
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["env"].get("replay_rules") == (None if name == "strict" else {"fuzzy_documents": True})
    assert runs["strict"]["steps"][1]["replay"]["document"]["level"] == "miss", runs["strict"]["steps"]
    loose = runs["loose"]["steps"][1]
    assert loose["replay"]["document"]["level"] == "fuzzy"
    assert loose["replay"]["document"]["capture_url"] == SEARCH.format("Quantum")
    assert loose["url_after"] == HOST + "/wiki/Quantum"  # the other search's page: flagged, not hidden
    assert runs["loose"]["replay"]["fuzzy_documents"] == 1


def test_bundle_info_lists_replay_compromised_episodes(suite_runs, wiki, tmp_path):
    bundle = tmp_path / "wiki.wfb"
    proc = invoke("bundle", "pack", suite_runs["loose"], "--archive", wiki, "-o", bundle)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(invoke("bundle", "info", bundle, "--json").stdout)
    (run,) = info["runs"]
    assert run["replay"] == {"episodes": 1, "compromised": 1, "fuzzy_documents": 1, "fuzzy_xhr": 0, "misses": 0,
                             "episodes_compromised": ["photosynthesis"]}
    text = invoke("bundle", "info", bundle).stdout
    assert "1 of 1 episodes replay-compromised (1 fuzzy main document" in text


def test_study_report_rows_count_replay_compromised_episodes():
    from webfreeze.studies.report import replay_row

    clean = {"task_id": "a", "replay": {"fuzzy_documents": 0, "fuzzy_xhr": 0, "misses": 0, "compromised": False}}
    fuzzy = {"task_id": "b", "replay": {"fuzzy_documents": 0, "fuzzy_xhr": 2, "misses": 1, "compromised": True}}
    row = replay_row([("cell-1", clean), ("cell-1", fuzzy), ("cell-2", {"task_id": "c"})])
    assert row == {"episodes": 2, "compromised": 1, "fuzzy_documents": 0, "fuzzy_xhr": 1, "misses": 1,
                   "episodes_compromised": [{"cell": "cell-1", "task_id": "b"}]}
    assert replay_row([("cell-1", {"task_id": "c"})]) is None  # runs from before provenance


def test_bench_compare_shows_replay_compromised_episodes(search_run, tmp_path):
    from webfreeze.runs.compare import compare_runs

    result = compare_runs(search_run, search_run)
    assert result["replay"]["a"]["compromised"] == 1
    assert [r["task_id"] for r in result["tasks"] if r.get("replay_compromised")] == ["unrecorded"]
    proc = invoke("bench", "compare", search_run, search_run)
    assert proc.returncode == 0 and "1 of 2 episodes replay-compromised" in proc.stderr
    # nothing differs: said in a line, not drawn as a table of no rows; --all lists every task
    assert "(B): no task differs (--all lists every task)" in " ".join(proc.stdout.split()), proc.stdout
    assert "┃ task" not in proc.stdout
    every = invoke("bench", "compare", search_run, search_run, "--all")
    assert "┃ task" in every.stdout and "unrecorded" in every.stdout and "no task differs" not in every.stdout


def test_bad_suite_replay_rules_are_one_line(wiki, tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "manifest.json").write_text(json.dumps({"format": "webfreeze-suite", "version": 1, "name": "wiki",
                                                     "replay_rules": {"fuzzy_documents": "yes"}}))
    (suite / "tasks.jsonl").write_text(json.dumps({"id": "t", "category": "c", "instruction": "i",
                                                   "start_url": HOST + "/", "ground_truth": {"answer": {"exact": "x"}}})
                                       + "\n")
    proc = run_cli("bench", "run", suite, "--archive", wiki, "--agent", "keyword", "--backend", "text",
                   "--out", tmp_path / "run")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "replay_rules" in proc.stderr and "true or false" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


CROSS = b"""<!doctype html><html><head><title>Cross</title></head><body><p id="simple">waiting</p>
<p id="preflighted">waiting</p><script>
const show = (id, p) => p.then((r) => r.text().then((t) => { document.getElementById(id).textContent =
  'status ' + r.status + ' ' + t.slice(0, 30); })).catch((e) => { document.getElementById(id).textContent = 'error ' + e.name; });
show('simple', fetch('http://api.test/missing', {credentials: 'include'}));
show('preflighted', fetch('http://api.test/other', {method: 'PUT', headers: {'X-Custom': '1'}}));
</script></body></html>"""


def test_a_missed_request_to_another_origin_reads_as_a_miss_in_the_page(tmp_path, monkeypatch):
    """A page's script asking another origin for something the archive lacks gets the miss (a
    404 it can read, with CORS headers for its origin; its preflight granted) rather than a
    network error; both requests are counted as misses."""
    from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    path = tmp_path / "cross.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_honest_replay")
        arc.add_exchange(Exchange(session_id=sid, url="http://site.test/", status=200, resp_headers=HTML, payload=CROSS,
                                  captured_at=T0))
    env = WebEnv(EnvConfig(path, backend="browser"))
    try:
        obs, _ = env.reset(options={"task": {"id": "cross", "start_url": "http://site.test/", "instruction": "look"}})
        text = obs["axtree_text"]
        trajectory = env.trajectory()
    finally:
        env.close()
    assert "StaticText 'status 404 webfreeze: not in archive: GET'" in text, text
    assert "StaticText 'status 404 webfreeze: not in archive: PUT'" in text, text
    flagged = [(f["method"], f["url"], f["level"], f["status"]) for f in trajectory["replay"]["start"]["flagged"]]
    assert flagged == [("GET", "http://api.test/missing", "miss", 404), ("PUT", "http://api.test/other", "miss", 404)]
    assert trajectory["replay"]["misses"] == 2 and trajectory["replay"]["compromised"] is True
