"""Long-context runs: depends_on, waves, composed contexts at a target size with A2's start URL,
manifest and trajectory records, determinism, filler pools, retrieval success.

Real parts: the demo archive replayed in the text backend, the reference agent (or a probe built
on it) playing the shipped long-context suite, pools made by ``webfreeze context pool`` from a
real run, tokens counted with cl100k_base."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest
from cli_runner import invoke, run_cli

from webfreeze.demo import SUITE
from webfreeze.eval.errors import TaskError
from webfreeze.eval.longctx import retrieval
from webfreeze.eval.tasks import dependency_waves, load_suite
from webfreeze.runs.context import ContextError, check_context, parse_tokens, read_pool
from webfreeze.runs.execute import run
from webfreeze.runs.spec import RunError
from webfreeze.simulator.composition import get_tokenizer
from webfreeze.simulator.trajectory import without_timings

LC_SUITE = Path(SUITE).parent / "long-context"
SHIPPED_POOL = Path(SUITE).parent / "context-pool.jsonl"
PAIRS = ["lc-01-*", "lc-04-*"]  # a scholar pair and a shop pair


def _traj(run_dir: Path, task_id: str) -> dict:
    return json.loads((run_dir / "trajectories" / f"{task_id}.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> Path:
    """A pool made by the real command from a real reference run on demo tasks (the reference
    agent's steps carry thoughts)."""
    base = tmp_path_factory.mktemp("pool")
    r = run_cli("bench", "run", SUITE, "--agent", "reference", "--backend", "text", "--tasks", "scholar-site-info-*",
                "--tasks", "scholar-rules-accounts-00[1-6]", "--tasks", "booking-00[2-6]", "--tasks", "shop-00[2-6]",
                "--tasks", "scholar-advanced-search-00[1-4]",
                "--out", base / "run", "--no-report")
    assert r.returncode == 0, r.stderr
    out = base / "pool.jsonl"
    r = run_cli("context", "pool", base / "run", "-o", out)
    assert r.returncode == 0, r.stderr
    return out


def _run(out: Path, pool: Path | None, tokens, agent="context_agents:ContextProbe", tasks=PAIRS, **context) -> dict:
    ctx = {} if tokens is None else {"tokens": tokens, **({"pool": str(pool)} if pool else {}), **context}
    return run(LC_SUITE, agent, out, backend="text", tasks=list(tasks), context=ctx)


# ------------------------------------------------------------------------------------------ suites
def _suite(tmp_path: Path, lines: list[dict]) -> Path:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _task(tid: str, **extra) -> dict:
    return {"id": tid, "category": "c", "instruction": "do it", "start_url": "http://scholar.test/",
            "ground_truth": {"answer": {"exact": "x"}}, **extra}


def test_depends_on_validation(tmp_path):
    ok = load_suite(_suite(tmp_path, [_task("a"), _task("b", depends_on="a"), _task("c", depends_on="b")]))
    assert [t.depends_on for t in ok.tasks] == [None, "a", "b"]
    cases = [
        ([_task("a"), _task("b", depends_on="zz")], "s.jsonl:2: task 'b': depends_on names 'zz', which is not a task"),
        ([_task("a", depends_on="a")], "s.jsonl:1: task 'a' cannot depend on itself"),
        ([_task("a", depends_on="b"), _task("b", depends_on="a")], "s.jsonl:1: task 'a': depends_on makes a cycle "
                                                                   "(a -> b -> a)"),
        ([_task("a", depends_on=3)], "s.jsonl:1: task field 'depends_on' must be a task id"),
        ([_task("a", context_exclude="x")], "s.jsonl:1: task field 'context_exclude' must be a list"),
    ]
    for lines, message in cases:
        with pytest.raises(TaskError) as info:
            load_suite(_suite(tmp_path, lines))
        assert message in str(info.value) and "\n" not in str(info.value)
    r = invoke("tasks", "check", _suite(tmp_path, cases[2][0]))
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "makes a cycle" in r.stderr and "Traceback" not in r.stderr


def test_waves_keep_order_and_ignore_unselected_dependencies():
    suite = load_suite(LC_SUITE)
    waves = dependency_waves(suite.tasks)
    assert [[t.id for t in w] for w in waves] == [[f"lc-0{i}-a1" for i in range(1, 6)], [f"lc-0{i}-a2" for i in range(1, 6)]]
    only_a2 = [t for t in suite.tasks if t.id.endswith("-a2")]
    assert [len(w) for w in dependency_waves(only_a2)] == [5]


def test_the_long_context_suite_is_solved_by_its_references(tmp_path):
    r = run_cli("tasks", "validate", LC_SUITE, "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["tasks"] == 10 and result["expired"] == []
    demo = (Path(SUITE) / "manifest.json").read_text()
    assert json.loads((LC_SUITE / "manifest.json").read_text())["archive_digest"] == json.loads(demo)["archive_digest"]


def test_without_a_condition_depends_on_only_orders(tmp_path):
    order = []
    manifest = run(LC_SUITE, "context_agents:ContextProbe", tmp_path / "run", backend="text", workers=2,
                   progress=lambda s: order.append(s["task_id"]))
    assert "context" not in manifest
    for i in range(1, 6):
        assert order.index(f"lc-0{i}-a1") < order.index(f"lc-0{i}-a2")
    a2 = _traj(tmp_path / "run", "lc-01-a2")
    assert "context" not in a2 and a2["steps"][0]["agent_fields"]["context_seen"] is None
    assert a2["steps"][0]["url"] == "http://scholar.test/"  # its own start URL


# ------------------------------------------------------------------------------------------ composition
def test_composition_at_a_target_with_a2s_start_url(tmp_path, pool):
    out = tmp_path / "run"
    manifest = _run(out, pool, "2k")
    entries = {e["id"]: e for e in read_pool(pool).entries}
    tok = get_tokenizer("cl100k_base")
    for a1, a2 in (("lc-01-a1", "lc-01-a2"), ("lc-04-a1", "lc-04-a2")):
        traj = _traj(out, a2)
        ctx = traj["context"]
        assert ctx["target_tokens"] == 2000 and 1900 <= ctx["tokens"] <= 2000 and ctx["tokenizer"] == "cl100k_base"
        assert ctx["fillers"] and ctx["a1_task"] == a1 and ctx["a1_url"] == _traj(out, a1)["final_url"]
        assert not set(ctx["fillers"]) & {"scholar-paper-retrieval-001", "shop-001"}  # context_exclude
        # A2 starts where the last injected trajectory ended
        assert ctx["start_url"] == entries[ctx["fillers"][-1]]["final_url"] == traj["steps"][0]["url"]
        seen = traj["steps"][0]["agent_fields"]["context_seen"]  # what the agent's view held
        assert seen["sha256"] == ctx["text_sha256"] and seen["tokens"] == ctx["tokens"]
        assert seen["parts"] == ["A1"] + ["filler"] * len(ctx["fillers"]) + ["A2"] and seen["a1_task"] == a1
        assert "context" not in _traj(out, a1)
    assert manifest["context"]["tokens"] == 2000 and manifest["context"]["pool"]["digest"] == read_pool(pool).digest
    assert manifest["context"]["a1_run"] is None and manifest["context"]["dependent_tasks"] == 2
    assert manifest["circumstances"]["context_pool"] == str(pool.resolve())
    from webfreeze.eval.report import write_report

    report = write_report(out)
    lc = report["tasks"]["lc-01-a2"]["long_context"]
    assert lc["retrieval_success"] is True and lc["started_elsewhere"] in ("domain", "page")
    assert report["long_context"]["dependent_tasks"] == 2 and report["long_context"]["retrieval"]["rate"] == 1.0
    assert "long_context" not in report["tasks"]["lc-01-a1"]
    assert tok.count(_traj(out, "lc-01-a2")["steps"][0]["url"]) > 0


def test_none_condition_starts_at_a1s_final_url(tmp_path):
    out = tmp_path / "run"
    manifest = _run(out, None, "none", tasks=["lc-01-*"])
    ctx = _traj(out, "lc-01-a2")["context"]
    assert ctx["fillers"] == [] and ctx["target_tokens"] == 0 and ctx["start_url"] == "http://scholar.test/abs/2402.01742"
    assert manifest["context"]["pool"] is None
    seen = _traj(out, "lc-01-a2")["steps"][0]["agent_fields"]["context_seen"]
    assert seen["parts"] == ["A1", "A2"]
    from webfreeze.eval.report import write_report

    lc = write_report(out)["tasks"]["lc-01-a2"]["long_context"]
    assert lc["started_elsewhere"] is None and lc["retrieval_success"] is None  # started on A1's page


def test_same_inputs_same_bytes_and_a1_from_another_run(tmp_path, pool):
    a, b = tmp_path / "a", tmp_path / "b"
    _run(a, pool, 2000, seed=3)
    _run(b, pool, 2000, seed=3)
    for tid in ("lc-01-a1", "lc-01-a2", "lc-04-a1", "lc-04-a2"):
        ta, tb = _traj(a, tid), _traj(b, tid)
        assert json.dumps(without_timings(ta), sort_keys=True) == json.dumps(without_timings(tb), sort_keys=True)
    other = _run(tmp_path / "c", pool, 2000, seed=4)
    assert _traj(tmp_path / "c", "lc-01-a2")["context"]["fillers"] != _traj(a, "lc-01-a2")["context"]["fillers"]
    # A2 alone, A1's trajectory taken from run a: the same composed text
    m = _run(tmp_path / "d", pool, 2000, tasks=["lc-0[14]-a2"], seed=3, a1_run=str(a))
    assert m["context"]["a1_run"]["tasks"] == ["lc-01-a1", "lc-04-a1"] and m["context"]["a1_run"]["digest"]
    for tid in ("lc-01-a2", "lc-04-a2"):
        assert _traj(tmp_path / "d", tid)["context"] == _traj(a, tid)["context"]
    assert other["context"]["seed"] == 4


def test_a2_runs_after_a1_failed(tmp_path, pool):
    out = tmp_path / "run"
    _run(out, pool, "2k", agent="context_agents:FailingA1", tasks=["lc-01-*"])
    a1, a2 = _traj(out, "lc-01-a1"), _traj(out, "lc-01-a2")
    assert a1["end"]["reason"] == "error" and a1["steps"] == []
    assert a2["end"]["reason"] == "answer" and a2["context"]["a1_url"] == "http://scholar.test/"
    assert a2["steps"][0]["agent_fields"]["context_seen"]["parts"][0] == "A1"


def test_refusals_are_one_line(tmp_path, pool):
    # A2 selected without its A1 and no A1 run
    with pytest.raises(RunError, match="lc-01-a2 depends on lc-01-a1, which this run does not select"):
        _run(tmp_path / "x", pool, "2k", tasks=["lc-01-a2"])
    assert not (tmp_path / "x").exists()
    # a pool too small for the target: refused before anything is written
    r = run_cli("bench", "run", LC_SUITE, "--agent", "reference", "--backend", "text", "--tasks", "lc-01-*",
                "--context", "150k", "--context-pool", pool, "--out", tmp_path / "y")
    assert r.returncode == 1 and r.stderr.strip().count("\n") == 0, r.stderr
    assert "pool too small for 150000 tokens" in r.stderr and not (tmp_path / "y").exists()
    r = run_cli("bench", "run", LC_SUITE, "--agent", "reference", "--out", tmp_path / "z", "--context", "lots")
    assert r.returncode == 2 and "must be 'none', a number or NNk" in r.stderr
    r = run_cli("bench", "run", LC_SUITE, "--agent", "reference", "--out", tmp_path / "z", "--context-pool", pool)
    assert r.returncode == 2 and "--context-pool goes with --context" in r.stderr
    # a run folder holding another condition is refused
    _run(tmp_path / "w", pool, "none", tasks=["lc-01-*"])
    with pytest.raises(RunError, match="its context differs"):
        _run(tmp_path / "w", pool, "2k", tasks=["lc-01-*"])


def test_check_context_for_study_files(pool):
    assert check_context({}) == {}
    got = check_context({"tokens": "25k", "pool": str(pool)})
    assert got == {"tokens": 25000, "tokenizer": "cl100k_base", "seed": 0, "pool": str(pool), "a1_run": None}
    assert [parse_tokens(x) for x in ("none", "0", "25k", "150000", 50000, "1.5k")] == [0, 0, 25000, 150000, 50000, 1500]
    for bad, msg in (({"tokens": "25k", "colour": 1}, "unknown key 'colour'"), ({"pool": str(pool)}, "'tokens' is required"),
                     ({"tokens": "-3"}, r"context.tokens: must be 0 \(none\) or more"),
                     ({"tokens": 10, "pool": "/nope.jsonl"}, "no such pool file"),
                     ({"tokens": 10, "pool": str(pool), "tokenizer": "gpt-9"}, "unknown tokenizer"),
                     ({"tokens": 10, "pool": str(pool), "seed": "x"}, "context.seed"),
                     ({"tokens": 0, "a1_run": "/nope"}, "not a run folder")):
        with pytest.raises(ContextError, match=msg):
            check_context(bad)
    from webfreeze.runs.spec import CONTEXT_KEYS
    from webfreeze.runs.spec import check_context as runner_check

    assert set(CONTEXT_KEYS) == {"tokens", "pool", "tokenizer", "seed", "a1_run"}
    with pytest.raises(RunError, match="unknown key"):
        runner_check({"tokens": 1, "x": 2})


# ------------------------------------------------------------------------------------------ pools
def test_pool_command(tmp_path, pool):
    p = read_pool(pool)
    tok = get_tokenizer("cl100k_base")
    assert p.header["format"] == "webfreeze-context-pool" and p.header["version"] == 1
    assert p.header["entries"] == len(p.entries) == 30 and p.header["tokenizer"] == "cl100k_base"
    assert [e["id"] for e in p.entries] == sorted(e["id"] for e in p.entries)
    assert p.tokens == sum(e["tokens"] for e in p.entries) > 0
    e = p.entries[0]
    assert e["instruction"] and e["final_url"] and e["steps"][0]["thought"].startswith("reference step")
    assert set(e["steps"][0]) == {"step", "url", "action", "thought", "reflection", "url_after"}
    assert p.header["sources"][0]["agent"]["name"] == "reference"
    # the same runs again: the same bytes; a run given twice: entries TASK~2
    run_dir = Path(p.header["sources"][0]["run"])
    src = pool.parent / run_dir
    again = tmp_path / "again.jsonl"
    assert invoke("context", "pool", src, "-o", again).returncode == 0
    assert again.read_bytes() == pool.read_bytes()
    twice = tmp_path / "twice.jsonl"
    assert invoke("context", "pool", src, src, "-o", twice).returncode == 0
    ids = [e["id"] for e in read_pool(twice).entries]
    assert len(ids) == 60 and "booking-002~2" in ids
    info = invoke("context", "info", pool, "--json")
    assert json.loads(info.stdout)["tokens"] == p.tokens
    # bad input: one line, exit 1, nothing written
    r = invoke("context", "pool", tmp_path, "-o", tmp_path / "bad.jsonl")
    assert r.returncode == 1 and "not a run folder" in r.stderr and not (tmp_path / "bad.jsonl").exists()
    (tmp_path / "broken.jsonl").write_text('{"format": "webfreeze-context-pool", "version": 1, "entries": 2}\n{"id": "a", "steps": []}\n')
    r = invoke("context", "info", tmp_path / "broken.jsonl")
    assert r.returncode == 1 and "header says 2 entries, the file holds 1" in r.stderr
    assert tok.count(e["steps"][0]["thought"]) > 0


def test_pools_merge_with_runs_and_other_pools(tmp_path, pool):
    from webfreeze.runs.context import build_pool

    run_dir = pool.parent / "run"
    # a pool made from run R, merged with R again, is the pool of R and R: the same bytes
    p2, p3 = tmp_path / "p2.jsonl", tmp_path / "p3.jsonl"
    r = invoke("context", "pool", pool, run_dir, "-o", p2)
    assert r.returncode == 0, r.stderr
    r = invoke("context", "pool", run_dir, run_dir, "-o", p3)
    assert r.returncode == 0, r.stderr
    assert p2.read_bytes() == p3.read_bytes()
    merged = read_pool(p2)
    assert len(merged.header["sources"]) == 2 and {e["source"] for e in merged.entries} == {0, 1}
    assert merged.header["sources"][0] == read_pool(pool).header["sources"][0]
    # a pool holding TASK~2 keeps it before the next run's TASK~3 (not by the ids' text order)
    assert build_pool([p3, run_dir]) == build_pool([run_dir, run_dir, run_dir])
    assert build_pool([run_dir, p3]) == build_pool([run_dir, run_dir, run_dir])
    ids = {e["id"] for e in build_pool([p3, run_dir])[1]}
    assert {"booking-002", "booking-002~2", "booking-002~3"} <= ids
    # --min-steps applies to a pool's entries too
    few = min(len(e["steps"]) for e in merged.entries)
    assert len(build_pool([p2], min_steps=few + 1)[1]) < len(merged.entries)
    # a bad pool file: one line naming it, exit 1, nothing written
    lines = pool.read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    bad = {"format": json.dumps(dict(header, format="some-other-pool")) + "\n" + "".join(lines[1:]),
           "version": json.dumps(dict(header, version=2)) + "\n" + "".join(lines[1:]),
           "truncated": "".join(lines)[: len("".join(lines)) - 40],
           "short": "".join(lines[:-1]),
           "no-sources": json.dumps({k: v for k, v in header.items() if k != "sources"}) + "\n" + "".join(lines[1:])}
    expected = {"format": "not a context pool", "version": "pool version 2 is not supported",
                "truncated": "not valid JSON", "short": "the file holds", "no-sources": "no 'sources' list"}
    for case, text in bad.items():
        path = tmp_path / f"{case}.jsonl"
        path.write_text(text, encoding="utf-8")
        out = tmp_path / f"out-{case}.jsonl"
        r = invoke("context", "pool", run_dir, path, "-o", out)
        assert r.returncode == 1 and r.stderr.strip().count("\n") == 0, (case, r.stderr)
        assert str(path) in r.stderr and expected[case] in r.stderr and "Traceback" not in r.stderr, (case, r.stderr)
        assert not out.exists() and not list(tmp_path.glob(".out-*")), case
    r = invoke("context", "pool", tmp_path / "nowhere.jsonl", "-o", tmp_path / "x.jsonl")
    assert r.returncode == 1 and "no such run folder or pool file" in r.stderr


def test_shipped_pool_is_the_llm_agents():
    p = read_pool(SHIPPED_POOL)
    assert p.header["tokenizer"] == "cl100k_base" and p.entries
    assert all(s["agent"]["name"] == "llm" for s in p.header["sources"])
    assert all(s["archive_digest"] == json.loads((Path(SUITE) / "manifest.json").read_text())["archive_digest"]
               for s in p.header["sources"])
    from webfreeze.runs.context import entry_tokens

    tok = get_tokenizer("cl100k_base")
    assert [entry_tokens(e, tok) for e in p.entries] == [e["tokens"] for e in p.entries]
    assert p.tokens == sum(e["tokens"] for e in p.entries)


@pytest.mark.parametrize("target", ["25k", "50k", "75k", "100k", "125k", "150k"])
def test_shipped_pool_fills_the_papers_sizes_for_every_pair(target):
    """The paper's context sizes (25k ... 150k) are reachable with the shipped pool for every A2 of
    the long-context suite: compose() raises 'pool too small' when a context cannot come within 5%."""
    from webfreeze.runs.context import compose

    pool = read_pool(SHIPPED_POOL)
    suite = load_suite(LC_SUITE)
    tok = get_tokenizer("cl100k_base")
    wanted = parse_tokens(target)
    a2s = [t for t in suite.tasks if t.depends_on]
    assert len(a2s) == 5
    for task in a2s:
        a1 = {"format": "webfreeze-trajectory", "version": 1, "task_id": task.depends_on, "steps": []}
        for seed in (0, 1):
            ctx = check_context({"tokens": target, "pool": str(SHIPPED_POOL), "seed": seed})
            visible, record, start = compose(task, a1, pool, ctx, {t.id: t.instruction for t in suite.tasks})
            assert 0.95 * wanted <= visible["tokens"] <= wanted
            assert tok.count(visible["text"]) == visible["tokens"]
            fillers = [s["task_id"] for s in visible["sessions"] if s["part"] == "filler"]
            assert fillers and len(set(fillers)) == len(fillers)
            excluded = task.extra.get("context_exclude") or []
            assert not any(fnmatch.fnmatchcase(f.split("~")[0], g)
                           for f in fillers for g in (task.id, task.depends_on, *excluded))
            assert start.startswith("http://")


# ------------------------------------------------------------------------------------------ retrieval
def _hand(urls: list[str], start: str | None = None, final: str | None = None) -> dict:
    steps = [{"step": i, "url": u, "url_after": urls[i + 1] if i + 1 < len(urls) else u, "action": "x"}
             for i, u in enumerate(urls)]
    traj = {"format": "webfreeze-trajectory", "version": 1, "task_id": "t", "steps": steps,
            "final_url": final or urls[-1]}
    if start:
        traj["context"] = {"start_url": start, "tokens": 10, "target_tokens": 12, "fillers": ["f"]}
    return traj


def test_retrieval_success_on_hand_built_trajectories():
    a1 = "http://scholar.test/abs/1"
    went_back = retrieval(_hand(["http://shop.test/cart", "http://scholar.test/", a1], start="http://shop.test/cart"), a1)
    assert went_back["started_elsewhere"] == "domain" and went_back["retrieval_success"] is True
    assert went_back["returned_to_page"] is True and went_back["context_tokens"] == 10 and went_back["fillers"] == 1
    stayed = retrieval(_hand(["http://shop.test/cart", "http://shop.test/p/2"]), a1)
    assert stayed["retrieval_success"] is False and stayed["returned_to_domain"] is False
    # on A1's site, elsewhere: it must reach A1's page (fragment and trailing slash aside)
    page = retrieval(_hand(["http://scholar.test/", "http://scholar.test/abs/1/#x"]), a1)
    assert page["started_elsewhere"] == "page" and page["retrieval_success"] is True
    near = retrieval(_hand(["http://scholar.test/", "http://scholar.test/abs/9"]), a1)
    assert near["retrieval_success"] is False and near["returned_to_domain"] is True
    # started on A1's page: nothing to retrieve
    assert retrieval(_hand([a1, "http://scholar.test/"]), a1)["retrieval_success"] is None
    # no A1 outcome known, or no episode
    assert retrieval(_hand(["http://shop.test/"]), None)["retrieval_success"] is None
    assert retrieval(None, a1)["retrieval_success"] is None


@pytest.mark.slow
def test_ray_plays_the_waves_as_the_local_pool(tmp_path, pool):
    pytest.importorskip("ray")
    common = ("--agent", "reference", "--backend", "text", "--tasks", "lc-01-*", "--tasks", "lc-05-*",
              "--context", "2k", "--context-pool", pool, "--no-report")
    local = run_cli("bench", "run", LC_SUITE, *common, "--out", tmp_path / "local")
    assert local.returncode == 0, local.stderr
    ray = run_cli("bench", "run", LC_SUITE, *common, "--executor", "ray", "--workers", "2", "--out", tmp_path / "ray",
                  timeout=600)
    assert ray.returncode == 0, ray.stderr
    for tid in ("lc-01-a1", "lc-01-a2", "lc-05-a1", "lc-05-a2"):
        a, b = _traj(tmp_path / "local", tid), _traj(tmp_path / "ray", tid)
        assert json.dumps(without_timings(a), sort_keys=True) == json.dumps(without_timings(b), sort_keys=True)
    assert _traj(tmp_path / "ray", "lc-05-a2")["context"]["fillers"]
    manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert manifest["circumstances"]["executor"] == "ray" and manifest["complete"]
