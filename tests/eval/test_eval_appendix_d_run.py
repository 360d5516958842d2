"""Appendix D's rules on trajectories the environment wrote: a scripted agent
(``tests/support/appendix_agents.py``) plays each rule's case on the demo archive in the text
backend (the real replay: its miss page, the stateful shop and booking models), then the run is
scored as ``eval report`` scores it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webfreeze.demo import ARCHIVE
from webfreeze.eval.report import build_report
from webfreeze.runs.execute import run

SHOP = {"websites": ["shop.test"], "preferences": {"brand": "Juniper"}, "location_aware": False}
BOOT = {"websites": ["shop.test"], "preferences": {"brand": "Juniper", "size": "38"}, "location_aware": False}
DINE = {"websites": ["booking.test"], "preferences": {"cuisine": "Thai"}, "location": {"city": "Toronto"},
        "location_aware": True}
ADD = "At shop.test, add Juniper boots in size 38 to my cart."
TASKS = [
    ("e2e-d1-miss", "http://start.test/", "Show me boots at the shop I like.", SHOP),
    ("e2e-d1-reached", "http://start.test/", "Show me boots at the shop I like.", SHOP),
    ("e2e-d2-search", "http://shop.test/", "Show me boots from the brand I like.", SHOP),
    ("e2e-d21-form", "http://booking.test/", "Find a restaurant for dinner.", DINE),
    ("e2e-d21-thought", "http://start.test/", "Find a restaurant for dinner.", DINE),
    ("e2e-d3-added", "http://shop.test/p/SH00000", ADD, BOOT),
    ("e2e-d3-no-click", "http://shop.test/p/SH00000", ADD, BOOT),
]


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("appendix-d")
    suite = base / "suite"
    suite.mkdir()
    (suite / "manifest.json").write_text(json.dumps({
        "format": "webfreeze-suite", "version": 1, "name": "appendix-d", "archive": str(ARCHIVE),
        "categories": ["persona-L1"], "tasks": "tasks.jsonl",
        "site_models": {"shop.test": "shop", "booking.test": "booking"}}))
    (suite / "tasks.jsonl").write_text("".join(json.dumps(
        {"id": tid, "category": "persona-L1", "instruction": text, "start_url": start, "level": 1,
         "ground_truth": {"rubric": rubric}}) + "\n" for tid, start, text, rubric in TASKS))
    out = base / "run"
    run(suite, "appendix_agents:ScriptedAgent", out, backend="text", max_steps=6, workers=1)
    report, trajectories = build_report(out)
    return {"tasks": report["tasks"], "trajectories": trajectories, "report": report}


def _rubric(scored: dict, tid: str) -> dict:
    return scored["tasks"][tid]["results"]["rubric"]


def _item(scored: dict, tid: str, name: str) -> dict:
    return next(i for i in _rubric(scored, tid)["items"] if i["name"] == name)


def test_d1_a_miss_page_is_not_a_successful_navigation(scored):
    miss = scored["trajectories"]["e2e-d1-miss"]["steps"][0]
    assert miss["replay"]["document"]["level"] == "miss" or (miss["error"] or "").startswith("HTTP 404")
    assert _rubric(scored, "e2e-d1-miss")["website"]["utilisation"] == 0.0
    assert _rubric(scored, "e2e-d1-reached")["website"]["utilisation"] == 5.0


def test_d2_a_brand_typed_into_the_shops_search_box_is_applied(scored):
    brand = _item(scored, "e2e-d2-search", "brand")
    assert brand["used"] is True and brand["used_where"].startswith("typed into the site's search")
    # the brand was nowhere else: not in a thought, not near a word of its key
    assert _item(scored, "e2e-d1-reached", "brand")["used"] is False


def test_d21_the_location_counts_only_when_applied_during_navigation(scored):
    form = scored["trajectories"]["e2e-d21-form"]
    assert "city=Toronto" in form["final_url"]
    assert _item(scored, "e2e-d21-form", "location")["used"] is True
    assert _item(scored, "e2e-d21-thought", "location")["used"] is False
    # the cuisine is used in both (the site's search parameter)
    assert _item(scored, "e2e-d21-thought", "cuisine")["used"] is True


def test_d3_undecided_only_without_evidence_either_way(scored):
    added = scored["tasks"]["e2e-d3-added"]
    rb = added["results"]["rubric"]
    assert rb["website"]["score"] == 10.0 and rb["preference"]["score"] == 10.0
    assert rb["intent"] is None and added["outcome"] == "undecided"
    assert added["behaviour"]["error_category"] == "undecided" and added["behaviour"]["false_end"] is False
    said = scored["tasks"]["e2e-d3-no-click"]
    assert said["results"]["rubric"]["intent"] == 0.0
    assert said["results"]["rubric"]["intent_detail"]["not_achieved"] == "no decisive action"
    assert said["outcome"] == "fail" and said["behaviour"]["error_category"] == "false_end"
    # the Persona2Web section counts every undecided intent (the tasks that only answered, with no
    # instruction to buy or book); the outcome is undecided only where nothing else failed
    p2w = scored["report"]["personalisation"]
    undecided = sorted(t for t, d in p2w["by_task"].items() if d["undecided"])
    assert undecided == sorted(t for t, *_ in TASKS if t != "e2e-d3-no-click")
    assert (p2w["overall"]["decided"], p2w["overall"]["undecided"]) == (1, len(TASKS) - 1)
    assert scored["report"]["summary"]["overall"]["undecided"] == 1


def test_the_trajectories_are_the_environments(scored):
    for tid, *_ in TASKS:
        t = scored["trajectories"][tid]
        assert t["format"] == "webfreeze-trajectory" and t["env"]["backend"] == "text"
        assert t["end"]["reason"] == "answer", (tid, t["end"])
    assert Path(ARCHIVE).is_file()
