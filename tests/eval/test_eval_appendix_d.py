"""Persona2Web's Appendix D, rule by rule: each fixture in ``appendix_d/`` is a trajectory with the
score a person gave it by the paper's sentence (``hand_score``, ``why``), one or more per rule and
direction (credited / not credited); the scorer must give the same. Then the rules' edges, and the
report's undecided counts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trajectory_builder import answer_step, step, trajectory, write_run

from webfreeze.eval.personal import markdown
from webfreeze.eval.report import build_report, render_html
from webfreeze.eval.rubric import (
    INSTRUCTED_DECISIVE,
    answer_says_not_achieved,
    evaluate_rubric,
    navigated_urls,
)
from webfreeze.eval.score import score_task, summarise
from webfreeze.eval.tasks import validate_task
from webfreeze.eval.text import normalise
from webfreeze.eval.trajectory import validate_trajectory

FIXTURES = Path(__file__).parent / "appendix_d"
NAMES = sorted(p.stem for p in FIXTURES.glob("*.json"))
RULES = ("D.1 STEP 2", "D.2 STEP 2", "D.2.1 STEP 2", "D.3")


def load(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def scored(name: str) -> tuple[dict, dict]:
    fx = load(name)
    validate_trajectory(fx["trajectory"], f"{name}.json")
    return fx, score_task(validate_task(fx["task"]), fx["trajectory"])


def test_every_rule_has_fixtures_both_ways():
    seen = {(load(n)["rule"], load(n)["direction"]) for n in NAMES}
    for rule in RULES:
        assert (rule, "not credited") in seen, rule
        assert (rule, "credited") in seen, rule
    assert ("D.3", "undecided") in seen


@pytest.mark.parametrize("name", NAMES)
def test_the_scorer_agrees_with_the_hand_score(name):
    fx, result = scored(name)
    hand, rb = fx["hand_score"], result["results"]["rubric"]
    for part in ("website", "preference"):
        if part in hand:
            assert rb[part] == pytest.approx(hand[part]), (part, fx["why"])
    for item_name, want in hand.get("items", {}).items():
        got = next(i for i in rb["items"] if i["name"] == item_name)
        assert {k: got[k] for k in want} == want, (item_name, fx["why"])
    if "intent" in hand:
        assert rb["intent"] == hand["intent"], fx["why"]
        assert rb["intent_detail"]["decided_by"] == hand["decided_by"]
        assert rb["success"] == hand["success"]
        assert result["outcome"] == hand["outcome"]
        assert result["behaviour"]["error_category"] == hand["error_category"]


def test_a_failed_navigation_is_asked_for_not_reached():
    t = load("d1-miss-page")["trajectory"]
    assert navigated_urls(t) == []  # the miss page and the answer on it
    reached = load("d1-reached")["trajectory"]
    assert navigated_urls(reached) == ["http://shop.test/", "http://shop.test/c/hoodies"]
    # a later successful load on the site after the miss is a navigation again
    t["steps"].insert(2, step("goto('http://shop.test/')", "goto", goto="http://shop.test/",
                              url="http://shop.test/hoodies", url_after="http://shop.test/"))
    t["steps"][3]["url"] = t["final_url"] = "http://shop.test/"
    t["steps"][3]["url_after"] = "http://shop.test/"
    assert "http://shop.test/" in navigated_urls(t)
    rb = evaluate_rubric(load("d1-miss-page")["task"]["ground_truth"]["rubric"], t)
    assert rb["website"]["utilisation"] == 5.0


def test_a_start_page_that_was_a_miss_is_not_a_navigation():
    t = trajectory("t", [step("scroll('down')", "scroll", url="http://shop.test/", direction="down"),
                         answer_step("Here", url="http://shop.test/")], answer="Here")
    assert navigated_urls(t) == ["http://shop.test/"]
    t["replay"] = {"start": {"document": {"method": "GET", "url": "http://shop.test/", "level": "miss", "status": 404}}}
    assert navigated_urls(t) == []


@pytest.mark.parametrize("typed,used", [
    ("Lumen hoodie", True),     # the brand, on the expected site's search box
    ("hoodie", False),
    ("hoodie M", False),        # a one-letter size alone is found in too many searches
    ("hoodie size M", True),    # next to a word of its key it is the size
])
def test_short_values_in_a_search_need_their_key_word(typed, used):
    rubric = {"websites": ["shop.test"], "preferences": {"brand": "Lumen", "size": "M"}}
    t = trajectory("t", [step(f"fill('7', '{typed}')", "fill", url="http://shop.test/", role="searchbox",
                              name="Search products", typed=typed),
                         answer_step("Found", url="http://shop.test/")], answer="Found")
    items = {i["name"]: i for i in evaluate_rubric(rubric, t)["items"]}
    assert (items["brand"]["used"] or items["size"]["used"]) is used
    if used:
        hit = items["brand"] if items["brand"]["used"] else items["size"]
        assert hit["used_where"] == "typed into the site's search ('searchbox Search products')"


def test_a_search_parameter_on_the_site_is_a_search_but_a_plain_text_box_is_not():
    rubric = {"websites": ["shop.test"], "preferences": {"brand": "Lumen"}}
    url = "http://shop.test/search?q=lumen+jacket"
    t = trajectory("t", [step(f"goto('{url}')", "goto", goto=url, url="http://start.test/", url_after=url),
                         answer_step("Found", url=url)], answer="Found")
    brand = next(i for i in evaluate_rubric(rubric, t)["items"] if i["name"] == "brand")
    assert brand["used_where"] == "typed into the site's search ('q')"
    # a review text box on the site is not its search box
    t = trajectory("t", [step("fill('9', 'Lumen')", "fill", url="http://shop.test/p/1", role="textbox",
                              name="Your review", typed="Lumen"),
                         answer_step("Done", url="http://shop.test/p/1")], answer="Done")
    assert next(i for i in evaluate_rubric(rubric, t)["items"] if i["name"] == "brand")["used"] is False


LOCAL = load("d21-search-location")["task"]["ground_truth"]["rubric"]


@pytest.mark.parametrize("how,applied", [
    ("filter", True),       # a checkbox named for the city, clicked
    ("address", True),      # a delivery address typed into a field
    ("link", False),        # a restaurant's link that names the area is not a filter
    ("thought", False),
])
def test_location_applied_during_navigation(how, applied):
    url = "http://booking.test/search?kind=restaurant&q=thai"
    steps = [step(f"goto('{url}')", "goto", goto=url, url="http://start.test/", url_after=url,
                  fields={"thought": "The user is in Alfama" if how == "thought" else ""})]
    if how == "filter":
        steps.append(step("click('4')", "click", url=url, role="checkbox", name="Lisbon"))
    elif how == "address":
        steps.append(step("fill('5', 'Rua da Alfama 3')", "fill", url=url, role="textbox", name="Delivery address",
                          typed="Rua da Alfama 3"))
    elif how == "link":
        steps.append(step("click('6')", "click", url=url, role="link", name="Baan Thai, Alfama"))
    steps.append(answer_step("Found", url=url))
    rb = evaluate_rubric(LOCAL, trajectory("t", steps, answer="Found"))
    loc = next(i for i in rb["items"] if i["kind"] == "location")
    assert loc["used"] is applied


@pytest.mark.parametrize("answer,not_achieved", [
    ("I could not add the hoodie to the cart.", True),
    ("No results for Lumen hoodies; I gave up.", True),
    ("Nothing was added.", True),
    ("The hoodie is sold out.", True),
    ("Added the Lumen Navy Hoodie to your cart.", False),
    ("Added the Lumen hoodie; could not find size M, so I took L.", False),  # a claim outweighs a failure
    ("The cheapest hoodie is $40.", False),
    ("", False),
])
def test_the_answer_says_the_goal_was_not_achieved(answer, not_achieved):
    assert answer_says_not_achieved(answer) is not_achieved


@pytest.mark.parametrize("instruction,decisive", [
    ("Add a hoodie I would like to my cart.", True),
    ("Buy me running shoes.", True),
    ("Book a table for dinner tonight.", True),
    ("Reserve a room for two nights.", True),
    ("At booking.test, reserve a table for 2 at a Vegan restaurant in Toronto.", True),
    ("Find shoes from Fjord in size 37 and add the best-rated one to the cart.", True),
    ("I want to buy a new phone at bestbuy.com.", True),
    ("Find a book by my favourite author.", False),
    ("Find a book the user would like.", False),
    ("Find a nature reserve near me.", False),
    ("Which TVs does Best Buy sell?", False),
    ("Show me the hoodies at my usual shop.", False),
    ("What is the cheapest flight to Lisbon?", False),
])
def test_which_instructions_ask_for_a_decisive_action(instruction, decisive):
    assert bool(INSTRUCTED_DECISIVE.search(normalise(instruction))) is decisive


def test_the_rules_decide_before_a_judge_is_asked_whether_the_goal_was_achieved():
    """An answer that says the goal was not achieved is 0 by rule: a judge that would call anything
    achieved is not asked; only whether an outside factor blocked the agent goes to it (row 10)."""
    fx = load("d3-abandoned")
    asked = []

    class Judge:
        name = "hand-judge"

        def judge(self, question, candidate, reference):
            asked.append(question)
            return 0.0 if "blocked" in question else 1.0

    rb = evaluate_rubric(fx["task"]["ground_truth"]["rubric"], fx["trajectory"],
                         instruction=fx["task"]["instruction"], judge=Judge())
    assert rb["intent"] == 0.0 and rb["intent_detail"]["not_achieved"] == "answer"
    assert "Was the requested final goal successfully achieved?" not in asked
    assert any("blocked by external factors" in q for q in asked)


def test_undecided_is_an_outcome_and_reports_count_it(tmp_path):
    names = ["d3-undecided", "d3-abandoned", "d3-blocked", "d3-no-decisive-action"]
    fxs = [load(n) for n in names]
    results = [score_task(validate_task(f["task"]), f["trajectory"]) for f in fxs]
    summary = summarise(results)["overall"]
    assert summary["undecided"] == 1 and summary["false_end"] == 3 and summary["success"] == 0
    run = write_run(tmp_path / "run", [f["task"] for f in fxs], [f["trajectory"] for f in fxs])
    report, trajectories = build_report(run)
    p2w = report["personalisation"]
    assert (p2w["overall"]["decided"], p2w["overall"]["undecided"]) == (3, 1)
    assert p2w["by_task"]["d3-undecided"]["undecided"] == ["intent"]
    md = markdown(p2w)
    assert "| scheme | level | tasks | decided | undecided |" in md
    assert "| on-demand | all | 4 | 3 | 1 |" in md
    assert "Intent undecided for 1 task(s)" in md and "d3-undecided" in md
    html = render_html(report, trajectories)
    assert "<th>decided</th><th>undecided</th>" in html
    assert "<td>on-demand</td><td>all</td><td>4</td><td>3</td><td>1</td>" in html
    # the summary table has an undecided column when a task is undecided
    assert "<th>partial</th><th>undecided</th>" in html
    assert 'class="outcome-undecided"' in html
