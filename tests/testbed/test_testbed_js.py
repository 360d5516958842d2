"""Issue 43 on the JavaScript test bed (docs/testbed.md): a Plotly Dash application, an MkDocs
Material site whose search runs in a web worker, and a page of our own full of workers, timers,
random numbers, clocks, racing fetches and a CSS transition. Replayed in the browser backend, every
one of them renders to the same bytes every time: the observation's text, the DOM snapshot and the
screenshot, at reset and after each of its task's actions; the reference agent's runs, and their
bundle re-run from another folder, are identical; the worker page replays as it was captured."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from testbed.fixtures import webfreeze
from webfreeze.runs.compare import run_difference
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

APPS = ["jspage", "dash", "mkdocs"]
RESETS = 20
# Each task's actions: (role, name) of the element, then the action on its bid; and what the last
# observation must show (so that "always the same" cannot be "always broken").
ACTIONS = {
    "dash": [(("combobox", ""), "fill('{bid}', 'Oslo')"), (("combobox", ""), "press('{bid}', 'Enter')")],
    "mkdocs": [(("textbox", "Search"), "fill('{bid}', 'beadlet')")],
    "jspage": [(("button", "Roll the dice"), "click('{bid}')")],
}
SHOWN = {
    "dash": ["Oslo: 763 mm a year, wettest month Sep."],
    "mkdocs": ["up to 192 tentacles"],
    "jspage": ["Worker messages: 4", "Fetch chain: alpha, beta, gamma", "Race: done", "Timer ticks: 3",
               "Frames: 10", "Rolls: 1"],
}


def _sha(data) -> str:
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode()).hexdigest()


def _task(suite: Path) -> dict:
    return json.loads((suite / "tasks.jsonl").read_text().splitlines()[0])


def _bid(obs, role: str, name: str) -> str:
    found = [e["bid"] for e in obs["elements"] if e["role"] == role and (e.get("name") or "") == name]
    assert found, (role, name, obs["axtree_text"][:3000])
    return found[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", APPS)
def test_twenty_resets_give_one_text_one_dom_and_one_screenshot(testbed, name):
    suite, app = testbed.suite(name), testbed.app(name)
    task = _task(suite)
    mark = app.mark()
    env = WebEnv(EnvConfig(suite.parent / f"{name}.wfz", backend="browser", screenshots=True))
    seen: list[set] = [set() for _ in range(len(ACTIONS[name]) + 1)]
    try:
        for _ in range(RESETS):
            obs, _ = env.reset(options={"task": task})
            stages = [obs]
            states = [(obs["axtree_text"], _sha(obs["screenshot"]), _sha(env.tree.snapshot))]
            for (role, label), action in ACTIONS[name]:
                obs, *_ = env.step(action.format(bid=_bid(obs, role, label)))
                assert obs["last_action_error"] in (None, ""), obs["last_action_error"]
                stages.append(obs)
                states.append((obs["axtree_text"], _sha(obs["screenshot"]), _sha(env.tree.snapshot)))
            for got, state in zip(seen, states):
                got.add(state)
    finally:
        env.close()
    assert app.requests_since(mark) == []  # the leak canary
    for shown in SHOWN[name]:
        assert shown in stages[-1]["axtree_text"], stages[-1]["axtree_text"]
    # per stage: one text, one screenshot, one DOM snapshot in twenty
    assert [len(got) for got in seen] == [1] * len(seen), [[len({s[i] for s in got}) for i in range(3)] for got in seen]


@pytest.mark.slow
def test_the_page_and_its_worker_draw_on_their_own_seeded_streams(testbed):
    """The worker page's values are the runtime's, not the machine's: the page's and the worker's
    clocks start at the capture time, and the worker's random numbers and UUIDs are not the page's."""
    suite = testbed.suite("jspage")
    env = WebEnv(EnvConfig(suite.parent / "jspage.wfz", backend="browser"))
    try:
        obs, _ = env.reset(options={"task": _task(suite)})
        other, _ = env.reset(seed=7, options={"task": _task(suite)})
    finally:
        env.close()
    names = {e["name"].split()[0]: e["name"].split() for e in obs["elements"] if e["role"] == "image" and e["name"]}
    page, worker = names["page"], names["start"]
    # Date.now and performance.timeOrigin: the capture time, 1 ms more per reading; the worker's
    # clock goes on from where the page's stood when it made the worker
    origin, now, worker_now = int(page[5]), int(page[2]), int(worker[2])
    assert origin > 1_700_000_000_000 and origin <= now <= worker_now <= origin + 10, (page, worker)
    assert page[1] != worker[1] and page[4] != worker[4]  # Math.random, randomUUID: streams of their own
    assert obs["axtree_text"] != other["axtree_text"]  # another seed, other values


@pytest.mark.slow
@pytest.mark.parametrize("name", APPS)
def test_reference_runs_and_their_bundle_reproduce_three_times(testbed, name, tmp_path):
    suite, app = testbed.suite(name), testbed.app(name)
    mark = app.mark()
    runs = []
    for i in range(4):
        run = tmp_path / f"run{i}"
        r = webfreeze("bench", "run", suite, "--agent", "reference", "--out", run, home=testbed.home)
        assert r.returncode == 0, r.stderr[-2000:]
        runs.append(run)
    report = json.loads((runs[0] / "report.json").read_text())
    assert {res["outcome"] for res in report["tasks"].values()} == {"success"}, report["tasks"]
    for run in runs[1:]:
        assert run_difference(runs[0], run) is None
    bundle = tmp_path / f"{name}.wfb"
    r = webfreeze("bundle", "pack", runs[0], "-o", bundle, cwd="/", home=testbed.home)
    assert r.returncode == 0, r.stderr[-2000:]
    for i in range(3):
        elsewhere = tmp_path / f"another-lab-{i}"
        elsewhere.mkdir()
        r = webfreeze("bundle", "run", bundle, "--out", "rerun", cwd=elsewhere, home=testbed.home)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "identical to the bundled run" in r.stdout, r.stdout
    assert app.requests_since(mark) == []  # the leak canary


def test_the_worker_page_replays_as_captured(testbed, tmp_path):
    archive, app = testbed.crawl("jspage"), testbed.app("jspage")
    mark = app.mark()
    r = webfreeze("replay", "check", archive, "--report", tmp_path / "check", home=testbed.home)
    assert app.requests_since(mark) == []
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((tmp_path / "check" / "report.json").read_text())
    [page] = report["pages"]
    assert page["misses"] == [] and page["error"] is None, page
    assert page["text_similarity"] == 1.0, page
    replayed = (tmp_path / "check" / "pages").glob("*.replay.html")
    html = next(replayed).read_text()
    assert "Worker messages: 3" in html and "Fetch chain: alpha, beta, gamma" in html  # the worker ran, the chain ended


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dash", "mkdocs"])
def test_the_recorded_sessions_become_tasks_that_validate_unedited(testbed, name, tmp_path):
    """The sessions as recorded (a person's clicks, fills and keys on the live app), made tasks with
    `tasks add`, validate in the browser backend: no reference step edited by hand."""
    built = testbed.suite(name)
    manifest = json.loads((built / "manifest.json").read_text())
    archive = (built / manifest["archive"]).resolve()
    suite = tmp_path / "suite"
    for line in (built / "tasks.jsonl").read_text().splitlines():
        task = json.loads(line)
        reference = built / task["ground_truth"]["reference_trajectory"]
        r = webfreeze("tasks", "add", suite, "--reference", reference, "--id", task["id"], "--answer",
                      task["ground_truth"]["answer"]["exact"], "--instruction", task["instruction"], "--archive",
                      archive, home=testbed.home)
        assert r.returncode == 0, r.stderr[-2000:]
    r = webfreeze("tasks", "validate", suite, "--backend", "browser", "--json", home=testbed.home)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["expired"] == [] and result["incomplete"] == [] and result["tasks"] >= 1


@pytest.mark.parametrize(("name", "mode"), [("dash", "direct"), ("dash", "proxy"), ("mkdocs", "direct"),
                                            ("mkdocs", "proxy"), ("jspage", "direct")])
def test_every_crawled_page_replays_exactly(testbed, name, mode, tmp_path):
    """Issue 45: the crawl of each JavaScript application (Dash's callbacks, MkDocs Material's
    pages and its search index, the worker page) replays every page from the archive with no miss
    and its captured text, at its direct URL (rewritten and sealed) as through the proxy; the
    application sees no request. (The worker page's proxy mode: the test above.)"""
    from exact_replay import inexact_pages, replay_check

    archive, app = testbed.crawl(name), testbed.app(name)
    mark = app.mark()
    report = replay_check(archive, tmp_path / "check", mode, testbed.home)
    assert app.requests_since(mark) == []  # the leak canary
    assert report["summary"]["pages"] >= (3 if name == "mkdocs" else 1), report["summary"]
    assert inexact_pages(report) == [], report["summary"]
