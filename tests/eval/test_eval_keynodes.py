"""Key nodes with WebCanvas semantics: hand-built cases, and all 104 Mind2Web-Live tasks."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from trajectory_builder import answer_step, step, trajectory

from webfreeze.eval.judge import STOP_WORDS, TokenOverlapJudge
from webfreeze.eval.keynodes import evaluate_key_nodes, netloc, selector_matches
from webfreeze.eval.score import score_task
from webfreeze.eval.tasks import load_suite
from webfreeze.eval.text import tokens

MIND2WEB_LIVE = Path(__file__).resolve().parents[1] / "data" / "mind2web_live_test_keynodes.json"  # (tests/data/README.md)


def node(fn, ref, **content):
    n = {"match_function_name": fn, "content": {"reference_answer": ref, "url": "", **content}}
    if fn == "element_path_exactly_match":
        n["method"] = "selector"
    return n


def score_one(n, *steps, **kw):
    return evaluate_key_nodes([n], trajectory("t", list(steps)), **kw)["nodes"][0]["score"]


def test_netloc_is_webcanvas_site_label():
    assert netloc("https://www.imdb.com/title/tt0103064/") == "imdb"
    assert netloc("https://discussions.apple.com/thread/1") == "discussions"
    assert netloc("http://shop.test:8000/cart") == "shop"
    assert netloc("about:blank") == ""


def test_url_included_match():
    n = node("url_included_match", "gamestop.", key="")
    assert score_one(n, step("click('1')", "click", url="https://www.gamestop.com/")) == 1.0
    assert score_one(n, step("click('1')", "click", url="https://www.bestbuy.com/")) == 0.0
    # with a key: the parameter's form-decoded value (+ -> space) must contain the reference
    k = node("url_included_match", "Gender:Womens", key="CN")
    assert score_one(k, step("noop()", "noop", url="https://www.kohls.com/c.jsp?CN=Gender:Womens+Department:Clothing")) == 1.0
    assert score_one(k, step("noop()", "noop", url="https://www.kohls.com/c.jsp?S=1")) == 0.0  # parameter absent


def test_url_exactly_match():
    n = node("url_exactly_match", "2630", key="store")
    assert score_one(n, step("noop()", "noop", url="https://www.gamestop.com/search/?store=2630")) == 1.0
    assert score_one(n, step("noop()", "noop", url="https://www.gamestop.com/search/?store=26300")) == 0.0
    spaced = node("url_exactly_match", "mens winter coat", key="search")
    assert score_one(spaced, step("noop()", "noop", url="https://k.com/s?search=mens%20winter%20coat&S=1")) == 1.0
    whole = node("url_exactly_match", "https://a.test/x y", key="")
    assert score_one(whole, step("noop()", "noop", url="https://a.test/x%20y")) == 1.0      # unquoted first
    assert score_one(whole, step("noop()", "noop", url="https://a.test/x%20y/")) == 0.0


def test_url_nodes_see_url_after_and_final_url():
    n = node("url_included_match", "/cart", key="")
    # the cart appears only after the last action: url_after (and final_url) count
    s = step("click('9')", "click", url="http://shop.test/p/1", url_after="http://shop.test/cart")
    assert score_one(n, s) == 1.0


def test_selector_normalisation_and_ancestor_rule():
    ref = ".unstyled >li:nth-child(1)>h3:nth-child(1)>.item-details-link "
    assert selector_matches(".unstyled > li:nth-child(1) > h3:nth-child(1) > .item-details-link", ref)
    assert not selector_matches(".unstyled > li:nth-child(2) > h3:nth-child(1) > .item-details-link", ref)
    # the reference ends in a classed element with no tag: no climbing to its parent
    assert not selector_matches(".unstyled > li:nth-child(1) > h3:nth-child(1)", ref)
    span = "#j-poi-tabs >li:nth-child(1)>.tabmenu-link >span:nth-child(1)"
    assert selector_matches("#j-poi-tabs > li:nth-child(1) > .tabmenu-link", span)       # parent of the span
    assert selector_matches("#j-poi-tabs", span)                                         # 3 steps up: still allowed
    assert not selector_matches("#j-poi-tabs > li:nth-child(2) > .tabmenu-link", span)


def test_element_path_checks_netloc():
    n = {"match_function_name": "element_path_exactly_match", "method": "selector",
         "content": {"reference_answer": ".ipc-starbar__touch ", "netloc": "imdb", "url": ""}}
    hit = step("click('4')", "click", url="https://www.imdb.com/title/tt1/", role="button", name="Rate",
               css=".ipc-starbar__touch")
    assert score_one(n, hit) == 1.0
    elsewhere = dict(hit, url="https://www.rottentomatoes.com/m/1")
    assert score_one(n, elsewhere) == 0.0


def test_element_value_exactly_match_with_path():
    n = node("element_value_exactly_match", "Johm", netloc="underarmour", path="#name ")
    url = "https://www.underarmour.com/en-us/p/gift_cards/x.html"
    assert score_one(n, step("fill('3', 'Johm')", "fill", url=url, css="#name", typed="Johm")) == 1.0
    assert score_one(n, step("fill('3', 'John')", "fill", url=url, css="#name", typed="John")) == 0.0  # exact value
    assert score_one(n, step("fill('5', 'Johm')", "fill", url=url, css="#email", typed="Johm")) == 0.0  # wrong field
    # no path: any element on the right site; a click's value comes from the target's value
    sel = node("element_value_exactly_match", "board", netloc="ign")
    assert score_one(sel, step("click('7')", "click", url="https://www.ign.com/reviews", css="#genre", value="board")) == 1.0


class FixedJudge:
    name = "fixed"

    def __init__(self, value):
        self.value = value
        self.calls = []

    def judge(self, question, candidate, reference):
        self.calls.append((question, candidate, reference))
        return self.value


def test_semantic_nodes_go_through_the_judge():
    n = node("element_value_semantic_match", "Decide whether the content means gift card", netloc="underarmour",
             path="#message ")
    s = step("fill('8', 'a gift card for you')", "fill", url="https://www.underarmour.com/x", css="#message",
             typed="a gift card for you")
    # token-overlap stand-in: criterion content words {gift, card}, both in the candidate -> 2/2 = 1.0
    assert score_one(n, s) == 1.0
    judge = FixedJudge(0.6)
    r = evaluate_key_nodes([n], trajectory("t", [s]), judge=judge)
    assert judge.calls == [("Decide whether the content means gift card", "a gift card for you", "")]
    assert r["nodes"][0]["score"] == 0.6 and r["matched"] == 0 and r["completion_rate"] == 0.6
    u = node("url_semantic_match", "Decide whether are searching for mens winter coat", key="search")
    # {mens, winter, coat}: "mens coat" holds 2 of 3 -> 0.667
    assert score_one(u, step("noop()", "noop", url="https://k.com/s?search=mens%20coat")) == pytest.approx(2 / 3)


def test_order_free_max_completion_near_success_efficiency():
    nodes = [node("url_included_match", "shop.test/search", key=""),
             node("url_exactly_match", "2", key="page"),
             node("element_value_exactly_match", "red shoes", netloc="shop", path="#q"),
             node("element_path_exactly_match", "#add-to-cart")]
    steps = [
        # node 3's element comes first, node 1's URL last: order does not matter
        step("click('9')", "click", url="http://shop.test/p/1", css="#add-to-cart"),
        step("fill('2', 'red shoes')", "fill", url="http://shop.test/", css="#q", typed="red shoes"),
        step("press('2', 'Enter')", "press", url="http://shop.test/", url_after="http://shop.test/search?q=red+shoes&page=1"),
        answer_step("done", url="http://shop.test/search?q=red+shoes&page=1"),
    ]
    r = evaluate_key_nodes(nodes, trajectory("t", steps), reference_length=8)
    # nodes 0, 2, 3 hit (scores 1, 1, 1); node 1 (page=2) never: completion = 3/4
    assert [n["score"] for n in r["nodes"]] == [1.0, 0.0, 1.0, 1.0]
    assert [n["step"] for n in r["nodes"]] == [2, None, 1, 0]     # first step reaching the best score
    assert r["completion_rate"] == 0.75 and r["success"] is False and r["near_success"] is True
    assert r["efficiency"] == 2.0                                  # reference length 8 / 4 steps
    steps.insert(3, step("click('30')", "click", url="http://shop.test/search?q=red+shoes&page=1",
                         url_after="http://shop.test/search?q=red+shoes&page=2"))
    r = evaluate_key_nodes(nodes, trajectory("t", steps), reference_length=8)
    assert r["success"] is True and r["near_success"] is False and r["efficiency"] == 8 / 5


# ------------------------------------------------------------------------------ Mind2Web-Live
def _content_words(criterion: str) -> str:
    return " ".join(t for t in tokens(criterion) if t not in STOP_WORDS)


def oracle_step(n: dict) -> dict:
    """A step that satisfies key node ``n`` (and as little else as possible)."""
    fn, c = n["match_function_name"], n["content"]
    ref, key = c["reference_answer"], c.get("key") or ""
    site = f"https://www.{c['netloc']}.invalid/" if c.get("netloc") else "https://synthetic.invalid/"
    if fn.startswith("url_"):
        value = _content_words(ref) if fn == "url_semantic_match" else ref
        if key:
            url = f"https://synthetic.invalid/q?{key}={quote_plus(value)}"
        elif fn == "url_exactly_match":
            url = ref
        else:
            url = "https://synthetic.invalid/" + quote(value, safe="")
        return step("noop()", "noop", url=url)
    if fn == "element_path_exactly_match":
        return step("click('1')", "click", url=site, css=ref.strip())
    value = _content_words(ref) if fn == "element_value_semantic_match" else ref
    return step(f"fill('1', {value!r})", "fill", url=site, css=(c.get("path") or "#field").strip(), typed=value)


@pytest.fixture(scope="module")
def mind2web_live():
    return load_suite(MIND2WEB_LIVE)


def test_mind2web_live_loads_unchanged(mind2web_live):
    raw = json.loads(MIND2WEB_LIVE.read_text())
    assert len(mind2web_live.tasks) == 104 == len(raw)
    for task, entry in zip(mind2web_live.tasks, raw):
        assert task.ground_truth["key_nodes"] == entry["evaluation"]       # the evaluation list as published
        assert task.reference_length == entry["reference_task_length"] and task.instruction == entry["task"]
    functions = {n["match_function_name"] for t in mind2web_live.tasks for n in t.ground_truth["key_nodes"]}
    assert functions == {"url_included_match", "url_exactly_match", "url_semantic_match",
                         "element_path_exactly_match", "element_value_exactly_match", "element_value_semantic_match"}


def test_mind2web_live_oracle_trajectories_succeed(mind2web_live):
    judge = TokenOverlapJudge()
    for task in mind2web_live.tasks:
        nodes = task.ground_truth["key_nodes"]
        traj = trajectory(task.id, [oracle_step(n) for n in nodes])
        result = score_task(task, traj, judge)
        kn = result["results"]["key_nodes"]
        assert result["success"] is True, (task.id, [n for n in kn["nodes"] if not n["matched"]])
        assert kn["completion_rate"] == 1.0 and kn["near_success"] is False
        # one step per node: efficiency = reference length / number of nodes
        assert kn["efficiency"] == pytest.approx(task.reference_length / len(nodes))


def test_mind2web_live_one_node_missing_is_near_success(mind2web_live):
    for task in mind2web_live.tasks:
        nodes = task.ground_truth["key_nodes"]
        # leave out the step of the last node whose reference no other node shares
        signature = [(n["match_function_name"], n["content"]["reference_answer"]) for n in nodes]
        j = max(i for i, s in enumerate(signature) if signature.count(s) == 1)
        steps = [oracle_step(n) for i, n in enumerate(nodes) if i != j]
        kn = score_task(task, trajectory(task.id, steps))["results"]["key_nodes"]
        assert kn["nodes"][j]["matched"] is False, task.id
        assert kn["success"] is False and kn["near_success"] is True, task.id
        assert kn["matched"] == len(nodes) - 1


def test_infeasible_with_key_steps_missing_is_a_false_end():
    # the long-context paper: an agent that declares the task impossible while key steps are
    # missing ends falsely, as one that declares it done
    from webfreeze.eval.score import summarise
    from webfreeze.eval.tasks import validate_task

    nodes = [node("url_included_match", "shop.test/search", key=""),
             node("element_path_exactly_match", "#add-to-cart")]
    task = validate_task({"id": "k1", "category": "kn", "instruction": "Add red shoes to the cart",
                          "start_url": "http://shop.test/", "reference_length": 4,
                          "ground_truth": {"key_nodes": nodes}})
    searched = step("press('2', 'Enter')", "press", url="http://shop.test/",
                    url_after="http://shop.test/search?q=red+shoes")
    gave_up = step("report_infeasible('sold out')", "infeasible", url="http://shop.test/search?q=red+shoes",
                   text="sold out")
    r = score_task(task, trajectory("k1", [searched, gave_up], end="infeasible"))
    assert r["results"]["key_nodes"]["matched"] == 1 and r["success"] is False
    b = r["behaviour"]
    assert b["error_category"] == "false_end" and b["false_end_kind"] == "infeasible"
    assert b["efficiency_ratio"] == 2.0                       # 4 reference steps / 2 agent steps
    assert r["results"]["key_nodes"]["efficiency"] == 2.0     # the same ratio
    row = summarise([r])["overall"]
    assert (row["false_end"], row["false_end_infeasible"], row["other_errors"]) == (1, 1, 0)
    # every key step reached, then "infeasible": the task succeeded, so no false end
    clicked = step("click('9')", "click", url="http://shop.test/p/1", css="#add-to-cart")
    ok = score_task(task, trajectory("k1", [searched, clicked, gave_up], end="infeasible"))
    assert ok["success"] is True and ok["behaviour"]["error_category"] == "success"
