"""The runner, the agents, ``tasks validate`` and the shipped demo suite, on the real demo archive
(replayed by the real replay server; the browser backend drives Debian's Chromium)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_runner import invoke, run_cli

from webfreeze.archives import archive_digest
from webfreeze.demo import ARCHIVE, SUITE
from webfreeze.eval.tasks import load_suite
from webfreeze.simulator.trajectory import without_timings

SCHOLAR_CATEGORIES = ["site-info", "rules-accounts", "paper-retrieval", "advanced-search", "paper-extraction",
                      "cross-paper"]


def subset_suite(tmp: Path, ids: list[str], name: str = "subset") -> Path:
    """A suite directory holding some of the demo's tasks (same lines, same references)."""
    lines = {json.loads(line)["id"]: line for line in (SUITE / "tasks.jsonl").read_text().splitlines() if line}
    root = tmp / name
    (root / "references").mkdir(parents=True)
    for tid in ids:
        shutil.copyfile(SUITE / "references" / f"{tid}.json", root / "references" / f"{tid}.json")
    manifest = json.loads((SUITE / "manifest.json").read_text())
    manifest.update(name=name, archive=str(ARCHIVE))
    (root / "manifest.json").write_text(json.dumps(manifest))
    (root / "tasks.jsonl").write_text("".join(lines[t] + "\n" for t in ids))
    return root


def twenty_ids() -> list[str]:
    suite = load_suite(SUITE)
    ids = []
    for cat in SCHOLAR_CATEGORIES + ["shopping", "booking"]:
        ids += [t.id for t in suite.tasks if t.category == cat][:4 if cat in ("shopping", "booking") else 2]
    return ids[:20]


def trajectories(run: Path, without: tuple[str, ...] = ()) -> dict[str, str]:
    """Each trajectory file as JSON text without timing fields (nor the top-level keys ``without``)."""
    def text(path: Path) -> str:
        traj = without_timings(json.loads(path.read_text()))
        return json.dumps({k: v for k, v in traj.items() if k not in without}, sort_keys=True)

    return {p.stem: text(p) for p in sorted((run / "trajectories").glob("*.json"))}


# ---------------------------------------------------------------------------------------- the suite
def test_demo_suite_has_what_the_issue_asks_for():
    suite = load_suite(SUITE)
    counts = suite.counts()
    for cat in SCHOLAR_CATEGORIES:
        assert counts[cat] >= 10, (cat, counts)
    assert sum(counts[c] for c in SCHOLAR_CATEGORIES) >= 60
    stateful = [t for t in suite.tasks if t.category in ("shopping", "booking")]
    assert len(stateful) >= 20 and all("final_state" in t.ground_truth for t in stateful)
    for t in suite.tasks:
        assert t.reference is not None and t.reference["kind"] == "reference_trajectory", t.id
        assert {"answer", "final_state"} & set(t.ground_truth), t.id
        assert t.reference["steps"][-1]["action"] == "answer", t.id
    # the manifest names the archive it was made for, and the shipped archive is that one
    assert suite.archive_digest == archive_digest(ARCHIVE)
    # recorded by our recorder: crawl sessions plus one `record session` per task
    from webfreeze.archives import Archive

    with Archive.open(ARCHIVE) as arc:
        kinds = [r[0] for r in arc.conn.execute("SELECT kind FROM sessions")]
    assert kinds.count("session") == len(suite.tasks) and kinds.count("crawl") == 3


def test_print_paths_points_at_the_shipped_files():
    proc = run_cli("demo", "--print-paths")
    assert proc.returncode == 0, proc.stderr
    paths = json.loads(proc.stdout)
    assert Path(paths["archive"]).samefile(ARCHIVE) and Path(paths["suite"]).samefile(SUITE)
    assert load_suite(paths["suite"]).name == "webfreeze-demo"


def test_tasks_validate_finds_no_expired_task_on_the_demo():
    # the text backend: the browser's validate is tested in tests/eval/test_authoring.py, and the
    # reference agent's 80 episodes of the demo run in the browser (demo_runs) reach every task's facts
    proc = run_cli("tasks", "validate", SUITE, "--json", "--workers", "2", "--backend", "text")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["expired"] == [] and result["tasks"] == len(load_suite(SUITE).tasks)


# ------------------------------------------------------------------- determinism, both backends
# What the checks prove: a run's trajectories depend neither on the run (a repeat gives the same bytes)
# nor on how many workers played it, and the text backend reaches what the browser does. The text
# backend: three runs of twenty tasks (workers 1, 2, 1); WEBFREEZE_DETERMINISM_RUNS=10 plays more
# repeats, for a rarer race. The browser: the whole demo twice, on 2 workers and on 1
# (test_two_demo_runs_give_identical_results_apart_from_timings), which is what users run.
RUNS = max(2, int(os.environ.get("WEBFREEZE_DETERMINISM_RUNS", "3")))


@pytest.fixture(scope="module")
def repeated_runs(tmp_path_factory):
    """The reference agent, RUNS times on twenty tasks (workers alternate 1 and 2): ``(suite,
    runs(backend))``, each backend's runs played on first use."""
    tmp = tmp_path_factory.mktemp("repeated")
    suite = subset_suite(tmp, twenty_ids())
    made: dict[str, list[Path]] = {}

    def runs(backend: str) -> list[Path]:
        if backend not in made:
            made[backend] = []
            for i in range(RUNS):
                out = tmp / f"{backend}-{i}"
                proc = run_cli("bench", "run", suite, "--agent", "reference", "--backend", backend,
                               "--workers", str(1 + i % 2), "--out", out, "--no-report", timeout=600)
                assert proc.returncode == 0, proc.stderr
                made[backend].append(out)
        return made[backend]

    return suite, runs


def test_repeated_runs_of_twenty_tasks_are_byte_identical(repeated_runs):
    _, runs = repeated_runs
    backend = "text"
    first = trajectories(runs(backend)[0])
    assert len(first) == 20
    for run in runs(backend)[1:]:
        assert trajectories(run) == first
    # and the reference agent reaches every task's ground truth
    proc = invoke("eval", "report", runs(backend)[0], "--json")
    report = json.loads(proc.stdout)
    assert report["summary"]["overall"]["success_rate"] == 1.0, [
        (t, r["outcome"]) for t, r in report["tasks"].items() if not r["success"]]


@pytest.mark.slow
def test_text_backend_reaches_the_same_pages_and_answers_as_the_browser(repeated_runs, demo_runs):
    _, runs = repeated_runs
    text, browser = runs("text")[0], demo_runs[0] / "reference"  # (the demo: the browser backend)
    compared = 0
    for p in sorted((text / "trajectories").glob("*.json")):
        a, b = json.loads(p.read_text()), json.loads((browser / "trajectories" / p.name).read_text())
        assert [(s["action"], s["url"], s["url_after"], s["error"]) for s in a["steps"]] == \
               [(s["action"], s["url"], s["url_after"], s["error"]) for s in b["steps"]], p.stem
        assert (a["answer"], a["end"], a["final_state"]) == (b["answer"], b["end"], b["final_state"]), p.stem
        compared += 1
    assert compared == 20


def test_compare_names_the_first_step_where_runs_part(repeated_runs, tmp_path):
    suite, played = repeated_runs
    runs = {"text": played("text")}
    same = run_cli("bench", "compare", runs["text"][0], runs["text"][1], "--json")
    assert same.returncode == 0 and json.loads(same.stdout)["identical"] is True
    kw = tmp_path / "keyword"
    proc = run_cli("bench", "run", suite, "--agent", "keyword", "--backend", "text", "--out", kw, "--no-report")
    assert proc.returncode == 0, proc.stderr
    diff = run_cli("bench", "compare", runs["text"][0], kw, "--json")
    assert diff.returncode == 1
    result = json.loads(diff.stdout)
    assert result["counts"]["different"] == 20
    ref = json.loads((runs["text"][0] / "trajectories" / "shop-001.json").read_text())
    other = json.loads((kw / "trajectories" / "shop-001.json").read_text())
    row = next(r for r in result["tasks"] if r["task_id"] == "shop-001")
    step = row["first_difference"]["step"]
    assert [s["action"] for s in ref["steps"][:step]] == [s["action"] for s in other["steps"][:step]]
    assert ref["steps"][step]["action"] != other["steps"][step]["action"]
    table = run_cli("bench", "compare", runs["text"][0], kw)
    assert "shop-001" in table.stdout and "success rate by category" in table.stdout


def test_compare_counts_a_task_without_trajectories_on_the_side_that_has_it(repeated_runs, tmp_path):
    import shutil

    _, played = repeated_runs
    runs = {"text": played("text")}
    gap = tmp_path / "gap"
    shutil.copytree(runs["text"][0], gap)
    (gap / "trajectories" / "shop-001.json").unlink()
    same = invoke("bench", "compare", gap, gap, "--json")  # a run with a missing trajectory is like itself
    assert same.returncode == 0, same.stdout
    assert json.loads(same.stdout)["counts"] == {"same": 20, "different": 0, "only_a": 0, "only_b": 0}
    diff = invoke("bench", "compare", gap, runs["text"][0], "--json")
    counts = json.loads(diff.stdout)["counts"]
    assert diff.returncode == 1 and counts["only_a"] == 0 and counts["only_b"] + counts["different"] == 1


# ------------------------------------------------------------------------------------ the runner
def interrupt_run(suite: Path, out: Path, sig: int, after: int, *extra: str) -> tuple[int, list[str]]:
    """``bench run`` (reference agent, browser backend) sent ``sig`` once ``after`` trajectories are
    written: (exit status, the lines it printed that start with 'webfreeze:'), checked for tracebacks."""
    cmd = [sys.executable, "-m", "webfreeze", "bench", "run", str(suite), "--agent", "reference", "--backend",
           "browser", "--out", str(out), "--no-report", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600  # (the browser's start and first episodes, on a loaded machine)
    while (written := len(list((out / "trajectories").glob("*.json")))) < after:
        ended = proc.poll()
        if ended is not None or time.monotonic() > deadline:
            proc.kill()
            _, err = proc.communicate(timeout=60)
            why = f"it ended with status {ended}" if ended is not None else "in 600 s"
            raise AssertionError(f"bench run wrote {written} of the {after} trajectories the signal waits for "
                                 f"({why}): {err[-2000:]}")
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    return proc.returncode, [line for line in err.splitlines() if line.startswith("webfreeze:")]


def test_sigterm_with_workers_counts_every_kept_trajectory(tmp_path):
    suite = subset_suite(tmp_path, twenty_ids()[:10])
    out = tmp_path / "run"
    code, errors = interrupt_run(suite, out, signal.SIGTERM, 2, "--workers", "2")
    assert code == 143 and errors == ["webfreeze: error: terminated"]
    kept = len(list((out / "trajectories").glob("*.json")))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] is False and manifest["tasks_done"] == kept and 2 <= kept < 10
    assert not list((out / "trajectories").glob(".*"))


def test_run_manifest_and_resume_after_an_interrupt(tmp_path, demo_runs):
    suite = subset_suite(tmp_path, twenty_ids())
    out = tmp_path / "run"
    code, errors = interrupt_run(suite, out, signal.SIGINT, 3)
    assert code == 130 and errors == ["webfreeze: error: interrupted"]
    manifest = json.loads((out / "manifest.json").read_text())
    partial = len(list((out / "trajectories").glob("*.json")))
    assert manifest["complete"] is False and 3 <= partial < 20
    assert not list((out / "trajectories").glob(".*"))  # no half-written trajectory
    resumed = run_cli("bench", "run", suite, "--agent", "reference", "--backend", "browser", "--out", out)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{partial} of 20 tasks already ran" in resumed.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["complete"] is True and manifest["tasks_done"] == 20
    assert manifest["archive"]["digest"] == archive_digest(ARCHIVE)
    assert manifest["suite"]["digest"] == load_suite(suite).digest
    assert manifest["agent"]["name"] == "reference" and manifest["versions"]["webfreeze"]
    # a clean run gives the same trajectories as the interrupted-then-resumed one: the demo's reference
    # run (browser, 2 workers, uninterrupted) played these twenty tasks among its eighty; each
    # trajectory names its suite, which alone differs
    clean = trajectories(demo_runs[0] / "reference", without=("suite",))
    resumed_run = trajectories(out, without=("suite",))
    assert sorted(resumed_run) == sorted(twenty_ids())
    assert resumed_run == {tid: clean[tid] for tid in resumed_run}
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["overall"]["success"] == 20


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    suite = subset_suite(tmp_path, twenty_ids()[:2])
    cases = []
    out = tmp_path / "a"
    cases.append((run_cli("bench", "run", suite, "--agent", "gpt-99", "--out", out), "unknown agent 'gpt-99'", out))
    gone = subset_suite(tmp_path, twenty_ids()[:2], name="gone")
    manifest = json.loads((gone / "manifest.json").read_text())
    manifest["archive"] = str(tmp_path / "missing.wfz")
    (gone / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "b"
    cases.append((run_cli("bench", "run", gone, "--agent", "reference", "--out", out), "missing.wfz: no such archive",
                  out))
    bad = subset_suite(tmp_path, twenty_ids()[:2], name="bad")
    with open(bad / "tasks.jsonl", "a") as fh:
        fh.write('{"id": "x", "category": "site-info", "instruction": \n')
    out = tmp_path / "c"
    cases.append((run_cli("bench", "run", bad, "--agent", "reference", "--out", out), "tasks.jsonl:3:", out))
    out = tmp_path / "d"
    cases.append((run_cli("bench", "run", suite, "--agent", "reference", "--archive", tmp_path / "nope.wfz",
                          "--out", out), "nope.wfz: no such archive", out))
    for proc, needle, target in cases:
        assert proc.returncode != 0
        assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert not target.exists()
    # bad agent settings and site models are usage errors (exit 2), checked before anything is written
    usage = [(["--agent", "keyword", "--agent-config", "bogus=1"], "agent 'keyword' has no setting 'bogus' (its settings: max_clicks)"),
             (["--agent", "keyword", "--agent-config", "max_clicks=abc"], "max_clicks must be a whole number"),
             (["--agent", "keyword", "--agent-config", "max_clicks=-1"], "max_clicks must be a whole number"),
             (["--agent", "reference", "--agent-config", "x=1"], "agent 'reference' has no setting 'x' (it takes none)"),
             (["--agent", "reference", "--site-model", "shop.test=nope"],
              "shop.test=nope: unknown kind (known: booking, clinic, dine, hotels, shop, shop2)")]
    for args, needle in usage:
        out = tmp_path / "u"
        proc = run_cli("bench", "run", suite, *args, "--out", out)
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and not out.exists()
    good = tmp_path / "g"
    assert run_cli("bench", "run", suite, "--agent", "keyword", "--agent-config", "max_clicks=1", "--backend", "text",
                   "--out", good, "--no-report").returncode == 0
    assert json.loads((good / "manifest.json").read_text())["agent"] == {"name": "keyword", "config": {"max_clicks": 1},
                                                                        "oracle": False}
    # a run directory holding another run is refused, and left as it was
    first = tmp_path / "e"
    assert run_cli("bench", "run", suite, "--agent", "reference", "--backend", "text", "--out", first).returncode == 0
    before = sorted(p.name for p in first.rglob("*"))
    proc = run_cli("bench", "run", suite, "--agent", "keyword", "--backend", "text", "--out", first)
    assert proc.returncode != 0 and "holds a different run (its agent differs)" in proc.stderr
    assert sorted(p.name for p in first.rglob("*")) == before


# ----------------------------------------------------------------------------- expired tasks
def test_validate_reports_a_task_whose_facts_changed_in_a_later_snapshot(tmp_path):
    """Export the demo archive to WARC, change one fact on one page (as a later crawl of a live
    site would), import it as a new archive: `tasks validate` names exactly the task resting on it."""
    from io import BytesIO

    from warcio.archiveiterator import ArchiveIterator
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from webfreeze.demo.tasks import all_specs

    spec = next(s for s in all_specs() if s.id == "scholar-site-info-010")
    fact = spec.steps[-1][3][0]  # "Total of N entries"
    n = int(fact.split()[2])
    warc = tmp_path / "demo.warc.gz"
    assert run_cli("archive", "export", ARCHIVE, "--format", "warc", "-o", warc).returncode == 0
    changed = tmp_path / "later.warc.gz"
    hits = 0
    with open(warc, "rb") as src, open(changed, "wb") as dst:
        writer = WARCWriter(dst, gzip=True)
        for rec in ArchiveIterator(src):
            if rec.rec_type == "response" and "/list/stat.ME/recent" in rec.rec_headers.get_header("WARC-Target-URI"):
                body = rec.content_stream().read()  # decoded (gzip/br) by warcio
                if fact.encode() in body:
                    hits += 1
                    body = body.replace(fact.encode(), f"Total of {n + 3} entries".encode())
                    headers = [(k, v) for k, v in rec.http_headers.headers
                               if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
                    http = StatusAndHeaders(rec.http_headers.statusline, headers, protocol=rec.http_headers.protocol)
                    rec = writer.create_warc_record(rec.rec_headers.get_header("WARC-Target-URI"), "response",
                                                    payload=BytesIO(body), http_headers=http,
                                                    warc_headers_dict={"WARC-Date": rec.rec_headers.get_header(
                                                        "WARC-Date")})
            writer.write_record(rec)
    assert hits >= 1
    later = tmp_path / "later.wfz"
    proc = run_cli("archive", "import", changed, "--to", later)
    assert proc.returncode == 0, proc.stderr
    ids = ["scholar-site-info-009", "scholar-site-info-010", "scholar-rules-accounts-001"]
    suite = subset_suite(tmp_path, ids)
    proc = run_cli("tasks", "validate", suite, "--archive", later, "--json", "--backend", "text")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert [e["task_id"] for e in result["expired"]] == ["scholar-site-info-010"]
    assert result["expired"][0]["end"] == "infeasible"
    text = run_cli("tasks", "validate", suite, "--archive", later, "--backend", "text")
    # the line says why: the reference step whose evidence the later snapshot no longer shows
    assert result["expired"][0]["passes_with"] is None  # nor does the other backend reach it
    answer_step = json.loads((suite / "references" / "scholar-site-info-010.json").read_text())["steps"][-1]["step"]
    assert text.returncode == 1 and text.stdout.splitlines() == [
        f"expired: scholar-site-info-010 (reference step {answer_step}: the pages did not show {fact!r})"]
    # the same suite on the original archive: nothing expired
    assert run_cli("tasks", "validate", suite, "--archive", ARCHIVE, "--backend", "text").returncode == 0


# ------------------------------------------------------------------------------------ the demo
@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory) -> list[Path]:
    """`make demo`'s run, twice, end to end: on its default 2 workers, then on 1 (the folders)."""
    tmp = tmp_path_factory.mktemp("demo")
    outs = []
    for workers in (2, 1):
        out = tmp / f"demo-{workers}-workers"
        proc = subprocess.run([sys.executable, "-m", "webfreeze", "demo", "--workers", str(workers), "--out", str(out)],
                              capture_output=True, text=True, timeout=900, env=dict(os.environ))
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(out)
    return outs


@pytest.mark.slow  # `make demo` twice, end to end, on 2 workers and on 1: its reports and trajectories byte for byte
def test_two_demo_runs_give_identical_results_apart_from_timings(demo_runs):
    results = []
    for out in demo_runs:
        reports = {}
        for agent in ("reference", "keyword", "llm"):
            report = json.loads((out / agent / "report.json").read_text())
            report.pop("timings")
            reports[agent] = (report, trajectories(out / agent), (out / agent / "report.html").read_bytes())
        results.append(reports)
        # the LLM agent's calls all came from the shipped cassette (no model was started)
        assert not (out / "llm" / "local-model.log").exists()
        steps = [s for p in (out / "llm" / "trajectories").glob("*.json") for s in json.loads(p.read_text())["steps"]]
        assert steps and sum(s["timing"]["cassette_hits"] for s in steps) == sum(
            s["agent_fields"]["llm"]["calls"] for s in steps) > 0
    from webfreeze.runs.compare import run_difference

    for agent in ("reference", "keyword", "llm"):  # (the first difference named, task and step)
        assert run_difference(demo_runs[0] / agent, demo_runs[1] / agent,
                              names=("2 workers", "1 worker")) is None, agent
    assert results[0] == results[1]
    ref, kw, llm = results[0]["reference"][0], results[0]["keyword"][0], results[0]["llm"][0]
    assert ref["summary"]["overall"]["success_rate"] == 1.0
    assert ref["run"]["agent"]["oracle"] is True and ref["run"]["agent"]["label"] == "upper bound"
    assert b"reference (oracle: upper bound)" in results[0]["reference"][2]
    assert 0 < kw["summary"]["overall"]["success_rate"] < 1.0  # the baseline solves some, not all
    from webfreeze.demo import CASSETTE, LLM_TASKS
    from webfreeze.llm import Cassette

    assert sorted(llm["tasks"]) == sorted(LLM_TASKS) and llm["run"]["agent"]["oracle"] is False
    used = sorted({tuple(e) for p in (Path(out) / "llm" / "trajectories").glob("*.json")
                   for e in json.loads(p.read_text())["llm_entries"]})
    with Cassette(CASSETTE, "replay") as shipped:  # the digest of the entries the run used, not of the file
        assert llm["run"]["llm"] == {"entries_digest": shipped.entries_digest(used)[0], "calls": len(used)}
        assert 0 < len(used) <= len(shipped)
    assert llm["summary"]["overall"]["llm_calls"] > 0 and llm["summary"]["overall"]["prompt_tokens"] > 0


def test_record_with_resolve_keeps_the_host_name(tmp_path):
    from webfreeze.simulator.sites import serve

    site = serve("scholar")
    try:
        arc = tmp_path / "named.wfz"
        proc = run_cli("record", "crawl", "http://scholar.test/about", "--archive", arc, "--depth", "0",
                       "--resolve", f"scholar.test=127.0.0.1:{site.port}")
        assert proc.returncode == 0, proc.stderr
    finally:
        site.stop()
    out = run_cli("archive", "ls", arc, "--json").stdout
    urls = {json.loads(line)["url"] for line in out.splitlines() if line.strip()}
    assert "http://scholar.test/about" in urls and not any("127.0.0.1" in u for u in urls)
    bad = run_cli("record", "crawl", "http://scholar.test/", "--archive", tmp_path / "b.wfz", "--resolve", "nope")
    assert bad.returncode != 0 and "expected HOST=ADDRESS:PORT" in bad.stderr
    assert not (tmp_path / "b.wfz").exists()


def test_agent_settings_are_checked_against_the_agent(monkeypatch):
    from webfreeze.agents import AGENTS, Agent, AgentError, agent_settings, make_agent

    class Open(Agent):  # an agent that takes any setting (an LLM agent's model, temperature...)
        def __init__(self, **settings):
            self.settings = settings

    monkeypatch.setitem(AGENTS, "open", Open)
    assert make_agent("open", model="m", temperature=0).settings == {"model": "m", "temperature": 0}
    assert agent_settings("keyword") == ["max_clicks"] and agent_settings("reference") == []
    with pytest.raises(AgentError, match="agent 'keyword' has no setting 'model'"):
        make_agent("keyword", model="m")
    assert make_agent("keyword", max_clicks=2).config() == {"max_clicks": 2}


def test_the_keyword_baseline_answers_with_a_name_not_tree_syntax():
    """Names in the observation tree are Python string literals followed by more fields; the answer
    is the literal's text, quotes and escapes included correctly."""
    from webfreeze.agents.baseline import KeywordAgent

    agent = KeywordAgent(max_clicks=0)
    agent.reset({"instruction": "Which advanced search page does the site have?"})
    tree = ("RootWebArea 'Scholar Preprints', focused, url='http://scholar.test/'\n"
            "\t[12] link 'Advanced search', url='http://scholar.test/search/advanced'\n"
            "\tStaticText \"The site's advanced search page\"\n")
    out = agent.act({"elements": [], "axtree_text": tree})
    assert out["action"] == "send_msg_to_user(\"The site's advanced search page\")", out
    agent.reset({"instruction": "Which link leads to advanced search?"})
    out = agent.act({"elements": [], "axtree_text": tree.replace("\tStaticText \"The site's advanced search page\"\n", "")})
    assert out["action"] == "send_msg_to_user('Advanced search')", out
