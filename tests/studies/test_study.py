"""Studies: the study file's checks (one line naming the key), grid expansion, the report's
arithmetic on hand-built run folders, and real studies (keyword / reference agents in the text
backend; the local model through the cassette, then replayed to byte-identical tables)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from webfreeze.demo import ARCHIVE, SUITE
from webfreeze.studies.report import (
    build_study_report,
    consistency,
    csv_text,
    markdown,
    personalisation,
    proportion,
    se_proportion,
    sem,
    stats,
    write_study_report,
)
from webfreeze.studies.run import plan_study
from webfreeze.studies.spec import CELLS_DIR, StudyError, context_tokens, expand_cells, load_study, parse_study

REPORT_FILES = ("study-report.md", "study-report.csv", "study-report.json", "study-report.html")


def _cli(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "webfreeze", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def _study(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(f'suite = "{SUITE}"\n' + text, encoding="utf-8")
    return path


def _error(tmp_path: Path, text: str) -> str:
    with pytest.raises(StudyError) as err:
        plan_study(load_study(_study(tmp_path, text)), tmp_path / "out")
    msg = str(err.value)
    assert "\n" not in msg
    return msg


AGENT = '[[agents]]\nname = "keyword"\n'


# ------------------------------------------------------------------------------------ validation
@pytest.mark.parametrize("text, key, words", [
    (AGENT + '[grid]\nmax_clicks = 3\n', "grid.max_clicks", "expected a list"),
    ('repeats = 0\n' + AGENT, "repeats", "at least 1"),
    ('colour = "red"\n' + AGENT, "colour", "unknown key"),
    (AGENT + '[tasks]\ncategoriez = ["x"]\n', "tasks.categoriez", "unknown key"),
    (AGENT + '[tasks]\nlimit = "two"\n', "tasks.limit", "whole number"),
    ('backend = "gpu"\n' + AGENT, "backend", "not one of browser, text"),
    ("", "agents", "missing"),
    ('[[agents]]\nlabel = "x"\n', "agents[0].name", "missing"),
    (AGENT + AGENT, "agents[1].label", "used by agents[0]"),
    ('[[agents]]\nname = "llm"\nsettings = { k = 3 }\n[grid]\nk = [1, 2]\n', "grid.k", "also fixed by agents[0]"),
    (AGENT + '[grid]\nmax_clicks = [1, 1]\n', "grid.max_clicks", "listed twice"),
    (AGENT + '[context]\nconditions = ["none", "big"]\npool = "p.json"\n', "context.conditions[1]", "NNk"),
    (AGENT + '[context]\nconditions = ["none", "25k"]\npool = "nope.jsonl"\n', "context.pool", "no such pool file"),
    (AGENT + '[context]\npool = "p.json"\n', "context.conditions", "missing"),
    (AGENT + '[tasks]\ncategories = ["nope"]\n', "tasks.categories[0]", "no task of category 'nope'"),
    (AGENT + '[tasks]\nids = ["zzz-*"]\n', "tasks", "no task"),
    ('[[agents]]\nname = "no-such-agent"\n', "agents[0].name", "no-such-agent"),
    ('[[agents]]\nname = "keyword"\nsettings = { colour = 1 }\n', "agents[0].settings", "no setting 'colour'"),
    ('[[agents]]\nname = "llm"\n[grid]\nmemory = ["last-k", "nope"]\n', "agents[0].settings with grid memory=nope",
     "unknown memory strategy"),
    ('archive = "missing.wfz"\n' + AGENT, "archive", "no such archive"),
])
def test_a_bad_study_file_is_one_line_naming_the_key(tmp_path, text, key, words):
    msg = _error(tmp_path, text)
    assert f": {key}: " in msg and words in msg, msg
    assert msg.startswith(f"study file {tmp_path / 's.toml'}: ")
    assert not (tmp_path / "out").exists()  # nothing written


def test_not_toml_and_not_there(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed\n", encoding="utf-8")
    with pytest.raises(StudyError, match="not valid TOML"):
        load_study(bad)
    with pytest.raises(StudyError, match="no such file"):
        load_study(tmp_path / "none.toml")


def test_the_cli_says_it_in_one_line_and_writes_nothing(tmp_path):
    path = _study(tmp_path, AGENT + '[grid]\nmax_clicks = "3"\n')
    proc = _cli("study", "run", path, "--out", tmp_path / "out")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "grid.max_clicks: expected a list" in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()
    proc = _cli("study", "report", tmp_path)
    assert proc.returncode == 1 and "not a study folder" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_context_conditions():
    assert [context_tokens(v) for v in ("none", "25k", "150K", 50000, "1200", 0)] == [0, 25000, 150000, 50000, 1200, 0]
    assert context_tokens("big") is None and context_tokens(-1) is None and context_tokens(True) is None
    n = parse_study({"suite": "s", "agents": [{"name": "llm"}],
                     "context": {"conditions": ["none", "2k"], "pool": "pool.json"}})
    assert n["context"] == {"conditions": [0, 2000], "pool": "pool.json", "tokenizer": "cl100k_base",
                            "seed": "repeat", "a1_run": None}


# ------------------------------------------------------------------------------------ grid
def test_the_grid_is_a_cartesian_product_in_a_fixed_order(tmp_path):
    path = _study(tmp_path, 'repeats = 2\nseed = 10\n'
                  '[[agents]]\nname = "llm"\nlabel = "fixed"\nsettings = { model = "local", temperature = 0.7 }\n'
                  '[[agents]]\nname = "llm"\nlabel = "pinned"\nsettings = { model = "local", seed = 5 }\n'
                  '[grid]\nmemory = ["last-k", "dynamic"]\nk = [1, 3]\n')
    study = load_study(path)
    cells = expand_cells(study)
    assert len(cells) == 2 * 2 * 2 * 2
    assert [c.id for c in cells[:5]] == ["fixed.memory-last-k.k-1.r0", "fixed.memory-last-k.k-1.r1",
                                         "fixed.memory-last-k.k-3.r0", "fixed.memory-last-k.k-3.r1",
                                         "fixed.memory-dynamic.k-1.r0"]
    first, second = cells[0], cells[1]
    assert first.condition == second.condition == "fixed.memory-last-k.k-1"
    assert (first.seed, second.seed) == (10, 11)
    # a repeat seeds the agent's sampling and memory unless the study fixes them
    assert first.settings == {"k": 1, "memory": "last-k", "memory_seed": 10, "model": "local", "seed": 10,
                              "temperature": 0.7}
    assert second.settings["seed"] == 11 and second.settings["memory_seed"] == 11
    pinned = [c for c in cells if c.label == "pinned"]
    assert {c.settings["seed"] for c in pinned} == {5} and {c.settings["memory_seed"] for c in pinned} == {10, 11}
    assert len({c.id for c in cells}) == len(cells)
    # an agent without these settings gets none
    kw = expand_cells(load_study(_study(tmp_path, "repeats = 2\n" + AGENT, "kw.toml")))
    assert [c.settings for c in kw] == [{}, {}] and [c.id for c in kw] == ["keyword.r0", "keyword.r1"]
    # the same file gives the same digest; another value another
    assert load_study(path).digest == study.digest
    other = _study(tmp_path, path.read_text().split("\n", 1)[1].replace("k = [1, 3]", "k = [1, 2]"), "o.toml")
    assert load_study(other).digest != study.digest


def test_task_filters(tmp_path):
    study = load_study(_study(tmp_path, AGENT + '[tasks]\ncategories = ["site-info", "booking"]\nper_category = 2\n'
                                               'ids = ["scholar-*", "booking-00*"]\nlimit = 3\n'))
    plan = plan_study(study, tmp_path / "out")
    assert plan.tasks == {str(SUITE): ["scholar-site-info-001", "scholar-site-info-002", "booking-001"]}


def test_dependencies_are_added(tmp_path):
    suite = tmp_path / "suite.jsonl"
    lines = [{"id": "a1", "category": "c", "instruction": "find it", "start_url": "http://scholar.test/",
              "ground_truth": {"answer": {"exact": "x"}}},
             {"id": "a2", "category": "c", "instruction": "then that", "start_url": "http://scholar.test/",
              "depends_on": "a1", "ground_truth": {"answer": {"exact": "y"}}}]
    suite.write_text("".join(json.dumps(t) + "\n" for t in lines), encoding="utf-8")
    path = tmp_path / "d.toml"
    path.write_text(f'suite = "suite.jsonl"\narchive = "{ARCHIVE}"\n' + AGENT + '[tasks]\nids = ["a2"]\n')
    assert plan_study(load_study(path), tmp_path / "out").tasks == {"suite.jsonl": ["a1", "a2"]}
    path.write_text(path.read_text() + "dependencies = false\n")
    assert plan_study(load_study(path), tmp_path / "out2").tasks == {"suite.jsonl": ["a2"]}


# ------------------------------------------------------------------------------------ arithmetic
def test_standard_errors_by_hand():
    assert se_proportion(0.25, 8) == pytest.approx(math.sqrt(0.25 * 0.75 / 8)) == pytest.approx(0.1530931)
    assert se_proportion(1.0, 5) == 0.0 and se_proportion(None, 0) is None and se_proportion(0.5, 0) is None
    # sample sd of 1,2,3,4 is sqrt(5/3) = 1.2910; over sqrt(4): 0.6455
    assert sem([1, 2, 3, 4]) == pytest.approx(0.6454972)
    assert sem([7]) is None
    assert proportion([True, False, False, False]) == {"count": 1, "n": 4, "rate": 0.25,
                                                       "se": pytest.approx(math.sqrt(0.25 * 0.75 / 4))}
    c = consistency({"t1": [("a",), ("a",), ("b",)], "t2": [("c", "d")] * 3, "t3": [("x",)]})
    assert c["tasks"] == 2 and c["consistency"] == pytest.approx((2 / 3 + 1) / 2)
    assert c["identical"]["rate"] == 0.5
    assert consistency({"t": [("a",)]}) is None


def _result(tid, cat, outcome, steps, *, error=None, eff=None, llm=None, rs=None, **more):
    r = {"task_id": tid, "category": cat, "outcome": outcome, "success": outcome == "success",
         "partial": outcome == "partial", "steps": steps, "kinds": ["answer"],
         "behaviour": {"error_category": error or ("success" if outcome == "success" else "false_end"),
                       "efficiency_ratio": eff}}
    if llm:
        r["llm"] = dict(zip(("calls", "prompt_tokens", "completion_tokens"), llm))
    if rs is not None:
        r["long_context"] = {"retrieval_success": rs}
    r.update(more)
    return r


def test_stats_of_hand_built_results():
    rs = [_result("a", "x", "success", 2, eff=1.0, llm=(2, 100, 10)),
          _result("b", "x", "partial", 4, eff=0.5, llm=(4, 300, 20)),
          _result("c", "y", "fail", 6, error="step_limit_loop", llm=(6, 500, 30)),
          _result("d", "y", "missing", 0, error="missing")]
    s = stats(rs)
    assert s["n"] == 4 and s["missing"] == 1
    assert s["success"]["rate"] == 0.25 and s["success"]["se"] == pytest.approx(math.sqrt(0.25 * 0.75 / 4))
    assert s["partial"]["rate"] == 0.25 and s["fail"]["rate"] == 0.5
    assert s["steps"]["mean"] == 4.0 and s["steps"]["sem"] == pytest.approx(2 / math.sqrt(3))  # 2,4,6 (missing out)
    assert s["steps_success"] == {"n": 1, "mean": 2.0, "sem": None}
    assert s["efficiency"]["mean"] == 0.75 and s["efficiency"]["sem"] == pytest.approx(0.25)
    assert list(s["errors"]) == ["success", "false_end", "step_limit_loop", "missing"]
    assert s["errors"]["false_end"]["rate"] == 0.25
    assert s["llm"] == {"calls": 12, "prompt_tokens": 900, "completion_tokens": 60, "calls_per_task": 3.0,
                        "tokens_per_task": 240.0}
    assert s["retrieval_success"] is None


def _rubric(tid, level, scheme, web, pref, intent, success):
    r = _result(tid, "personal", "success" if success else "fail", 3, level=level, scheme=scheme)
    r["kinds"] = ["rubric"]
    r["results"] = {"rubric": {"website": {"score": web}, "preference": {"score": pref}, "intent": intent,
                               "success": success}}
    return r


def test_persona2web_table_by_hand():
    rs = [_rubric("p0", 0, "on-demand", 10, 5, 10, False), _rubric("p1", 1, "on-demand", 10, 10, 10, True),
          _rubric("q0", 0, "on-demand", 0, 0, 0, False)]
    t = personalisation(rs)["on-demand"]
    assert t["0"]["tasks"] == 2 and t["0"]["p_web"] == 0.5 and t["0"]["p_pref"] == 0.25
    assert t["0"]["p_web_sem"] == pytest.approx(0.5)  # values 1.0 and 0.0
    assert t["all"]["sr"] == pytest.approx(1 / 3) and t["all"]["sr_se"] == pytest.approx(math.sqrt(2 / 27))
    assert t["all"]["p_avg"] == pytest.approx((2 / 3 + 0.5) / 2)


def test_persona2web_table_leaves_undecided_intents_out_of_intent_and_sr():
    # u1: only the agent's answer vouched for its intent (undecided): P_web and P_pref count it,
    # Intent and SR (and their errors) do not, and the row says how many were decided
    rs = [_rubric("p0", 0, "on-demand", 10, 10, 10, True), _rubric("p1", 0, "on-demand", 10, 5, 0, False),
          _rubric("u1", 0, "on-demand", 10, 10, None, None)]
    row = personalisation(rs)["on-demand"]["0"]
    assert (row["tasks"], row["decided"]) == (3, 2)
    assert row["p_pref"] == pytest.approx(25 / 30) and row["intent"] == 0.5 and row["sr"] == 0.5
    assert row["sr_se"] == pytest.approx(math.sqrt(0.25 / 2))
    # nothing decided: no Intent, no SR, rather than a 0 nobody measured
    row = personalisation(rs[2:])["on-demand"]["0"]
    assert (row["decided"], row["intent"], row["sr"], row["sr_se"], row["p_web"]) == (0, None, None, None, 1.0)


# ------------------------------------------------------------------------------------ hand-built study folder
def _hand_built(tmp_path: Path) -> Path:
    """A study folder of 4 cells (2 conditions x 2 repeats) with report.json and trajectories by hand."""
    root = tmp_path / "study"
    cells = []
    plan = {"A.ctx-none": [[("t1", "x", "success", ["click('1')"]), ("t2", "y", "fail", ["click('2')"])],
                           [("t1", "x", "success", ["click('1')"]), ("t2", "y", "success", ["click('3')"])]],
            "A.ctx-2k": [[("t1", "x", "fail", ["click('1')"]), ("t2", "y", "fail", ["click('2')"])],
                         [("t1", "x", "partial", ["click('9')"]), ("t2", "y", "fail", ["click('2')"])]]}
    for cond, reps in plan.items():
        tokens = 0 if cond.endswith("none") else 2000
        for r, tasks in enumerate(reps):
            cid = f"{cond}.r{r}"
            run = root / CELLS_DIR / cid
            (run / "trajectories").mkdir(parents=True)
            results = {}
            for tid, cat, outcome, actions in tasks:
                results[tid] = _result(tid, cat, outcome, len(actions), eff=1.0,
                                       rs=(outcome != "fail") if tid == "t2" else None)
                (run / "trajectories" / f"{tid}.json").write_text(json.dumps(
                    {"task_id": tid, "steps": [{"action": a} for a in actions]}))
            (run / "report.json").write_text(json.dumps({"tasks": results, "summary": {"overall": {}}}))
            (run / "tasks.jsonl").write_text(json.dumps({"id": "t1"}) + "\n" + json.dumps(
                {"id": "t2", "depends_on": "t1"}) + "\n")
            (run / "manifest.json").write_text(json.dumps({"complete": True, "elapsed_s": 1.5 + r}))
            cells.append({"id": cid, "condition": cond, "suite": "suite", "agent": "llm", "label": "A", "grid": {},
                          "settings": {}, "context": {"tokens": tokens, "label": "none" if not tokens else "2k"},
                          "repeat": r, "seed": r, "run": f"cells/{cid}", "status": "complete"})
    (root / "study.json").write_text(json.dumps({
        "format": "webfreeze-study", "version": 1, "name": "hand", "digest": "sha256:x",
        "study": {"name": "hand", "repeats": 2, "backend": "text", "max_steps": 3, "suites": ["suite"]},
        "tasks": {"suite": ["t1", "t2"]}, "cells": cells, "circumstances": {"started_at": "2026-01-01T00:00:00Z"}}))
    return root


def test_aggregation_of_a_hand_built_study(tmp_path):
    root = _hand_built(tmp_path)
    report = build_study_report(root)
    none = report["conditions"]["A.ctx-none"]
    assert none["repeats"] == 2 and none["overall"]["n"] == 4
    assert none["overall"]["success"]["rate"] == 0.75
    assert none["overall"]["success"]["se"] == pytest.approx(math.sqrt(0.75 * 0.25 / 4), abs=1e-6)
    assert none["overall"]["over_repeats"]["values"] == [0.5, 1.0]
    assert none["overall"]["over_repeats"]["se"] == pytest.approx(0.25, abs=1e-6)  # sd 0.3536 / sqrt 2
    # t1 identical across repeats, t2 differs: consistency (1 + 0.5) / 2, identical 1 of 2
    assert none["overall"]["consistency"]["consistency"] == 0.75
    assert none["overall"]["consistency"]["identical"]["rate"] == 0.5
    assert none["categories"]["x"]["success"]["rate"] == 1.0
    # the long-context figures are over the dependent task (t2) only
    assert none["long_context"]["n"] == 2 and none["long_context"]["success"]["rate"] == 0.5
    assert none["long_context"]["retrieval_success"]["rate"] == 0.5
    two = report["conditions"]["A.ctx-2k"]
    assert two["overall"]["success"]["rate"] == 0.0 and two["overall"]["partial"]["rate"] == 0.25
    assert report["has_context"] and report["categories"] == ["x", "y"]
    md = markdown(report)
    assert "| A | none | 2 | 50.0 ± 35.4 | 50.0 ± 35.4 |" in md  # SR and RS with SE sqrt(.25/2)
    assert "| **overall** | 75.0 ± 21.7 | 0.0 ± 0.0 |" in md
    rows = csv_text(report).splitlines()
    assert rows[0].startswith("scope,id,condition,label,repeat,context_tokens,category,n,")
    assert any(line.startswith("condition,A.ctx-none,A.ctx-none,A ctx none,,0,overall,4,0,0.75,0.216506,")
               for line in rows)
    # deterministic, and timings only in study-timings.json
    a, b = tmp_path / "a", tmp_path / "b"
    write_study_report(report, a, root)
    write_study_report(build_study_report(root), b, root)
    for name in REPORT_FILES:
        assert (a / name).read_bytes() == (b / name).read_bytes()
        assert "elapsed" not in (a / name).read_text() and "2026-01-01" not in (a / name).read_text()
    timings = json.loads((a / "study-timings.json").read_text())
    assert timings["cells"]["A.ctx-none.r1"]["elapsed_s"] == 2.5
    page = (a / "study-report.html").read_text()
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")
    assert 'id="context-chart"' in page and "<polyline" in page and 'id="category-chart"' in page


def test_a_cell_without_a_report_is_left_out_with_a_warning(tmp_path):
    root = _hand_built(tmp_path)
    (root / CELLS_DIR / "A.ctx-2k.r1" / "report.json").unlink()
    report = build_study_report(root)
    assert report["study"]["cells_reported"] == 3
    assert any("A.ctx-2k.r1 has no report" in w for w in report["warnings"])
    assert report["conditions"]["A.ctx-2k"]["repeats"] == 1


# ------------------------------------------------------------------------------------ real studies
def _files(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes())
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_a_study_resumes_without_touching_finished_cells(tmp_path):
    path = _study(tmp_path, 'backend = "text"\nmax_steps = 4\nrepeats = 2\n'
                            '[tasks]\ncategories = ["site-info", "shopping"]\nper_category = 1\n'
                            '[[agents]]\nname = "reference"\n[[agents]]\nname = "keyword"\nlabel = "kw"\n'
                            '[grid]\nmax_clicks = [1, 2]\n'.replace('[[agents]]\nname = "reference"\n', ""))
    # (one agent with a grid: keyword x max_clicks 1, 2 x 2 repeats = 4 cells)
    out = tmp_path / "out"
    proc = _cli("study", "run", path, "--out", out)
    assert proc.returncode == 0, proc.stderr
    cells = sorted(p.name for p in (out / CELLS_DIR).iterdir())
    assert cells == ["kw.max_clicks-1.r0", "kw.max_clicks-1.r1", "kw.max_clicks-2.r0", "kw.max_clicks-2.r1"]
    manifest = json.loads((out / "study.json").read_text())
    assert manifest["complete"] and {c["status"] for c in manifest["cells"]} == {"complete"}
    assert manifest["tasks"] == {str(SUITE): ["scholar-site-info-001", "shop-001"]}
    run = json.loads((out / CELLS_DIR / "kw.max_clicks-2.r1" / "manifest.json").read_text())
    assert run["agent"]["config"]["max_clicks"] == 2 and run["env"]["seed"] == 1 and run["env"]["max_steps"] == 4
    first = {n: (out / n).read_bytes() for n in REPORT_FILES}

    # interrupt: one cell gone, one half-done (a trajectory missing, the run unfinished, no report)
    import shutil

    shutil.rmtree(out / CELLS_DIR / "kw.max_clicks-1.r1")
    half = out / CELLS_DIR / "kw.max_clicks-2.r0"
    (half / "trajectories" / "shop-001.json").unlink()
    (half / "report.json").unlink()
    m = json.loads((half / "manifest.json").read_text())
    m.update(complete=False, tasks_done=1)
    (half / "manifest.json").write_text(json.dumps(m))
    kept = {c: _files(out / CELLS_DIR / c) for c in ("kw.max_clicks-1.r0", "kw.max_clicks-2.r1")}
    kept_traj = (half / "trajectories" / "scholar-site-info-001.json").stat().st_mtime_ns

    proc = _cli("study", "run", path, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "resuming" in proc.stderr and "2 of 4 cells already finished" in proc.stderr
    for c, files in kept.items():
        assert _files(out / CELLS_DIR / c) == files, f"finished cell {c} was touched"
    assert (half / "trajectories" / "scholar-site-info-001.json").stat().st_mtime_ns == kept_traj
    assert (half / "trajectories" / "shop-001.json").is_file()
    assert (out / CELLS_DIR / "kw.max_clicks-1.r1" / "report.json").is_file()
    for n in REPORT_FILES:
        assert (out / n).read_bytes() == first[n], n

    # another study in the same folder is refused
    other = _study(tmp_path, path.read_text().split("\n", 1)[1].replace("max_steps = 4", "max_steps = 5"), "o.toml")
    proc = _cli("study", "run", other, "--out", out)
    assert proc.returncode == 1 and "holds a different study" in proc.stderr and "max_steps" in proc.stderr
    # and the report alone, elsewhere, is the same
    proc = _cli("study", "report", out, "--out", tmp_path / "again")
    assert proc.returncode == 0, proc.stderr
    for n in REPORT_FILES:
        assert (tmp_path / "again" / n).read_bytes() == first[n], n


@pytest.mark.slow
def test_an_llm_study_replays_from_its_cassettes_to_identical_tables(tmp_path):
    """The real local model (SmolLM2 through llama.cpp's server) on one task, one step, sampled at
    temperature 0.7 with the repeat's seed, recorded into its cell's cassette; then the study again
    into a new folder from those cassettes in strict replay (no model started): byte-identical
    tables. (Small on purpose: on 2 shared cores a call of the local model can take minutes.)"""
    path = _study(tmp_path, 'backend = "text"\nmax_steps = 1\nseed = 3\n'
                            '[tasks]\nids = ["scholar-site-info-001"]\n'
                            '[[agents]]\nname = "llm"\nlabel = "last-3"\n'
                            'settings = { model = "local", memory = "last-k", k = 3, temperature = 0.7, '
                            'obs_tokens = 300, max_tokens = 60 }\n'
                            '[[agents]]\nname = "reference"\n')
    first, second = tmp_path / "rec", tmp_path / "rep"
    proc = _cli("study", "run", path, "--out", first, timeout=2400)
    assert proc.returncode == 0, proc.stderr
    cell = first / CELLS_DIR / "last-3.r0"
    assert (cell / "llm-cassette.sqlite").is_file()
    settings = json.loads((cell / "manifest.json").read_text())["agent_settings"]
    assert settings["seed"] == 3 and settings["memory_seed"] == 3
    report = json.loads((first / "study-report.json").read_text())
    assert report["conditions"]["last-3"]["overall"]["llm"]["calls"] >= 1, "the model was called"
    assert report["conditions"]["last-3"]["overall"]["infrastructure_errors"] == 0, "the model answered"
    proc = _cli("study", "run", path, "--out", second, "--cassettes", first)
    assert proc.returncode == 0, proc.stderr
    m = json.loads((second / CELLS_DIR / "last-3.r0" / "manifest.json").read_text())
    assert m["circumstances"]["cassette_mode"] == "replay"
    assert not (second / CELLS_DIR / "last-3.r0" / "local-model.log").exists()  # no model was started
    for n in REPORT_FILES:
        assert (second / n).read_bytes() == (first / n).read_bytes(), n
    assert os.path.getsize(second / "study-timings.json") > 0


@pytest.mark.slow
def test_a_study_generates_its_personas_and_reports_table_3(tmp_path):
    """[personas] writes OUT/personas and OUT/persona-suite once (as personas generate + personas
    tasks --archive), runs the cells on them, and the report carries Persona2Web's Table 3."""
    path = tmp_path / "p.toml"
    path.write_text(f'archive = "{ARCHIVE}"\nbackend = "text"\nmax_steps = 2\n'
                    '[personas]\nn = 1\nseed = 11\nlevels = [0, 2]\n[[agents]]\nname = "keyword"\n', encoding="utf-8")
    out = tmp_path / "out"
    proc = _cli("study", "run", path, "--out", out)
    assert proc.returncode == 0, proc.stderr
    tasks = [json.loads(x) for x in (out / "persona-suite" / "tasks.jsonl").read_text().splitlines()]
    assert sorted(t["level"] for t in tasks) == [0, 2] and (out / "personas" / "manifest.json").is_file()
    report = json.loads((out / "study-report.json").read_text())
    table = report["conditions"]["keyword"]["personalisation"]["no-history"]
    assert set(table) == {"0", "2", "all"} and table["all"]["tasks"] == 2
    # the generated persona tasks carry final-state checks: every intent is decided
    assert table["all"]["decided"] == 2
    assert "| keyword | no-history | 0 | 1 | 1 |" in (out / "study-report.md").read_text()
    stamp = (out / "persona-suite" / "tasks.jsonl").stat().st_mtime_ns
    proc = _cli("study", "run", path, "--out", out)  # finished: nothing generated or run again
    assert proc.returncode == 0 and (out / "persona-suite" / "tasks.jsonl").stat().st_mtime_ns == stamp


def test_replay_needs_a_cassette_only_where_the_agent_calls_a_model(tmp_path):
    from webfreeze.studies.run import StudyOptions, run_study

    text = 'backend = "text"\nmax_steps = 2\n[tasks]\nids = ["scholar-site-info-001"]\n'
    kw = plan_study(load_study(_study(tmp_path, text + AGENT, "kw.toml")), tmp_path / "kw")
    manifest = run_study(kw, StudyOptions(cassette_mode="replay"))  # keyword makes no LLM calls
    assert manifest["complete"]
    llm = plan_study(load_study(_study(tmp_path, text + '[[agents]]\nname = "llm"\n', "llm.toml")), tmp_path / "llm")
    with pytest.raises(StudyError, match=r"^cell llm\.r0: no cassette to replay at .*llm-cassette\.sqlite"):
        run_study(llm, StudyOptions(cassette_mode="replay"))
    cell = json.loads((tmp_path / "llm" / "study.json").read_text())["cells"][0]
    assert cell["status"] == "pending" and "no cassette to replay" in cell["error"]
