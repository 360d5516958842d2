"""Partial credit (LCS of normalised actions) and behaviour metrics, on hand-built trajectories."""

from __future__ import annotations

import pytest
from trajectory_builder import answer_step, step, trajectory

from webfreeze.eval.behaviour import (
    average_steps,
    detect_loop,
    efficiency_ratio,
    evaluate_behaviour,
    final_loop,
    reference_step_count,
    trajectory_consistency,
)
from webfreeze.eval.partial import evaluate_partial
from webfreeze.eval.trajectory import normalise_url, session_actions

SHOP = "http://shop.test"


def session_reference() -> dict:
    """A `record session` reference: search, open a product, pick a size, scroll, add to cart."""
    def t(role, name, css="body > x"):
        return {"role": role, "name": name, "css": css, "tag": "x", "text": name}
    steps = [
        {"action": "navigate", "target": None, "value": None, "url": f"{SHOP}/"},                          # first: dropped
        {"action": "type", "target": t("searchbox", "Search products"), "value": "running shoe", "url": f"{SHOP}/"},
        {"action": "submit", "target": t("form", ""), "value": None, "url": f"{SHOP}/"},                  # dropped
        {"action": "navigate", "target": None, "value": None, "url": f"{SHOP}/search?q=running+shoe"},     # caused: dropped
        {"action": "click", "target": t("link", "Trail Runner X"), "value": None, "url": f"{SHOP}/search?q=running+shoe"},
        {"action": "navigate", "target": None, "value": None, "url": f"{SHOP}/p/42"},                      # caused: dropped
        {"action": "select", "target": t("combobox", "Size"), "value": {"value": "9", "label": "US 9"}, "url": f"{SHOP}/p/42"},
        {"action": "scroll", "target": None, "value": {"x": 0, "y": 600}, "url": f"{SHOP}/p/42"},          # y 0 -> 600: down
        {"action": "click", "target": t("button", "Add to cart"), "value": None, "url": f"{SHOP}/p/42"},
        {"action": "navigate", "target": None, "value": None, "url": f"{SHOP}/cart"},                      # caused: dropped
    ]
    for i, s in enumerate(steps):
        s["step"] = i
    return {"version": 1, "kind": "reference_trajectory", "start_url": f"{SHOP}/", "steps": steps}


def test_session_reference_normalises_to_five_actions():
    actions = [str(a) for a in session_actions(session_reference())]
    assert actions == ["type(searchbox|search products, 'running shoe')", "click(link|trail runner x)",
                       "select(combobox|size, '9/us 9')", "scroll(down)", "click(button|add to cart)"]


def agent(typed="Running  Shoe", product="Trail Runner X", size="US 9", with_select=True) -> dict:
    steps = [
        step("fill('12', 'Running  Shoe')", "fill", url=f"{SHOP}/", role="searchbox", name="Search products", typed=typed),
        step("press('12', 'Enter')", "press", url=f"{SHOP}/", text="Enter", url_after=f"{SHOP}/search?q=running+shoe"),
        step("click('40')", "click", url=f"{SHOP}/search?q=running+shoe", role="link", name=product,
             url_after=f"{SHOP}/p/42"),
        step("scroll(0, 300)", "scroll", url=f"{SHOP}/p/42", direction="down"),
    ]
    if with_select:
        steps.append(step("select_option('51', 'US 9')", "select", url=f"{SHOP}/p/42", role="combobox", name="Size",
                          value=size, typed=size))
    steps += [step("click('52')", "click", url=f"{SHOP}/p/42", role="button", name="Add to cart", url_after=f"{SHOP}/cart"),
              answer_step("added", url=f"{SHOP}/cart")]
    return trajectory("shop-001", steps, answer="added")


def test_partial_credit_lcs_over_reference_length():
    r = evaluate_partial(session_reference(), agent())
    # agent (normalised): type, press, click, scroll, select, click  (answer dropped)
    # reference:          type,        click, select, scroll, click
    # LCS: type, click, select|scroll, click = 4 -> overlap 4/5 = 0.8 > 0.7 -> partial
    assert r["agent_actions"] == 6 and r["reference_actions"] == 5
    assert r["lcs"] == 4 and r["overlap"] == 0.8 and r["partial"] is True


def test_partial_credit_fails_below_threshold():
    r = evaluate_partial(session_reference(), agent(typed="trail shoe", product="Road Runner"))
    # typed text and clicked product differ: LCS = (select or scroll), click = 2 -> 2/5 = 0.4
    assert r["lcs"] == 2 and r["overlap"] == 0.4 and r["partial"] is False
    # the select is matched by its value or its label
    r = evaluate_partial(session_reference(), agent(size="9"))
    assert r["lcs"] == 4


def test_partial_threshold_is_strict():
    ref = trajectory("r", [step(f"click('{i}')", "click", role="link", name=f"item {i}") for i in range(10)])
    got = trajectory("a", [step(f"click('{i}')", "click", role="link", name=f"item {i}") for i in range(7)])
    r = evaluate_partial(ref, got)
    assert r["overlap"] == 0.7 and r["partial"] is False         # 7/10 is not above 0.7
    got["steps"].append(step("click('8')", "click", role="link", name="item 8"))
    assert evaluate_partial(ref, got)["overlap"] == 0.8


def test_goto_compares_normalised_urls():
    assert normalise_url("HTTP://Shop.Test:80/search/?b=2&a=1#top") == "http://shop.test/search?a=1&b=2"
    ref = trajectory("r", [step("goto('http://shop.test/cart/')", "goto", goto="http://shop.test/cart/")])
    got = trajectory("a", [step("goto('http://SHOP.test/cart')", "goto", goto="http://SHOP.test/cart")])
    assert evaluate_partial(ref, got)["overlap"] == 1.0


def test_goto_a_hash_route_is_another_page():
    """A hash-routed application's pages (Docsify's ``#/faq``) are one document to HTTP: a goto to
    another route is not the reference's goto; an anchor (``#top``) still is the page it is in."""
    assert normalise_url("http://Docs.test/#/faq") == "http://docs.test/#/faq"
    assert normalise_url("http://docs.test/#!/faq") == "http://docs.test/#!/faq"
    ref = trajectory("r", [step("goto('http://docs.test/#/faq')", "goto", goto="http://docs.test/#/faq")])
    other = trajectory("a", [step("goto('http://docs.test/#/diet')", "goto", goto="http://docs.test/#/diet")])
    same = trajectory("b", [step("goto('http://DOCS.test/#/faq')", "goto", goto="http://DOCS.test/#/faq")])
    assert evaluate_partial(ref, other)["overlap"] == 0.0
    assert evaluate_partial(ref, same)["overlap"] == 1.0
    session = {"steps": [{"action": "navigate", "url": "http://docs.test/", "cause": "goto"},
                         {"action": "navigate", "url": "http://docs.test/#/faq", "cause": "goto"}]}
    assert [(a.kind, a.target) for a in session_actions(session)] == [("goto", "http://docs.test/#/faq")]


# ------------------------------------------------------------------------------ behaviour
def seq(*pairs) -> dict:
    return trajectory("t", [step(a, "click", obs=o) for a, o in pairs], end="step_limit")


def test_loop_detection():
    # A B A B A B on unchanged observations: a 2-cycle repeated 3 times from step 0
    loop = detect_loop(seq(("a", "1"), ("b", "2"), ("a", "1"), ("b", "2"), ("a", "1"), ("b", "2")))
    assert loop == {"detected": True, "cycle_length": 2, "repeats": 3, "start_step": 0, "steps_in_loop": 6}
    # the same action on a changing page (scrolling down a long list) is progress, not a loop
    assert detect_loop(seq(("s", "1"), ("s", "2"), ("s", "3"), ("s", "4")))["detected"] is False
    # two repeats are not enough
    assert detect_loop(seq(("a", "1"), ("a", "1"), ("x", "9")))["detected"] is False
    # X A A A A Y: a 1-cycle repeated 4 times from step 1 (preferred over the 2-cycle A A | A A)
    loop = detect_loop(seq(("x", "0"), ("a", "1"), ("a", "1"), ("a", "1"), ("a", "1"), ("y", "2")))
    assert (loop["cycle_length"], loop["repeats"], loop["start_step"]) == (1, 4, 1)
    # a 3-cycle
    loop = detect_loop(seq(*[(c, c) for c in "abcabcabc"]))
    assert (loop["cycle_length"], loop["repeats"]) == (3, 3)


def test_error_categories():
    looping = seq(("a", "1"), ("a", "1"), ("a", "1"))
    b = evaluate_behaviour(looping, success=False)
    assert b["error_category"] == "step_limit_loop" and b["step_limit"] == "loop"
    wandering = seq(("a", "1"), ("b", "2"), ("c", "3"))
    b = evaluate_behaviour(wandering, success=False)
    assert b["error_category"] == "step_limit_inefficient" and b["step_limit"] == "inefficient_progress"
    answered = trajectory("t", [answer_step("42")], answer="42")
    assert evaluate_behaviour(answered, success=False)["false_end"] is True       # said done, was wrong
    assert evaluate_behaviour(answered, success=True)["error_category"] == "success"
    # the long-context paper: declaring the task impossible while key steps are missing is a false end
    b = evaluate_behaviour(trajectory("t", [], end="infeasible"), success=False)
    assert b["error_category"] == "false_end" and b["false_end"] is True and b["false_end_kind"] == "infeasible"
    assert evaluate_behaviour(answered, success=False)["false_end_kind"] == "answer"
    assert evaluate_behaviour(trajectory("t", [], end="error"), success=False)["error_category"] == "error"
    assert evaluate_behaviour(trajectory("t", [], end="stopped"), success=False)["error_category"] == "other"


def test_step_limit_is_a_loop_only_when_looping_at_the_limit():
    # looped early (a a a on one page), then moved on and ran out of steps: inefficient progress
    early = seq(("a", "1"), ("a", "1"), ("a", "1"), ("b", "2"), ("c", "3"), ("d", "4"))
    b = evaluate_behaviour(early, success=False)
    assert b["loop"]["detected"] is True and b["loop"]["start_step"] == 0       # the loop is still reported
    assert b["final_loop"]["detected"] is False
    assert b["error_category"] == "step_limit_inefficient" and b["step_limit"] == "inefficient_progress"
    # still in a 2-cycle at the limit: loop (x y | a b a b a b)
    late = seq(("x", "0"), ("y", "9"), ("a", "1"), ("b", "2"), ("a", "1"), ("b", "2"), ("a", "1"), ("b", "2"))
    b = evaluate_behaviour(late, success=False)
    assert b["error_category"] == "step_limit_loop" and b["step_limit"] == "loop"
    assert {k: b["final_loop"][k] for k in ("cycle_length", "repeats", "start_step", "steps_in_loop")} == \
        {"cycle_length": 2, "repeats": 3, "start_step": 2, "steps_in_loop": 6}
    # two repeats at the end are not a loop; a loop that ends one step before the limit is not either
    assert final_loop(seq(("x", "0"), ("a", "1"), ("a", "1")))["detected"] is False
    left = seq(("a", "1"), ("a", "1"), ("a", "1"), ("a", "1"), ("z", "5"))
    assert evaluate_behaviour(left, success=False)["error_category"] == "step_limit_inefficient"
    # a long 1-cycle at the end is preferred over the 2-cycle it also forms
    assert final_loop(seq(*[("a", "1")] * 6))["cycle_length"] == 1
    # a loop at the end of an episode that ended otherwise does not make it a step-limit failure
    answered = trajectory("t", [step("a", "click", obs="1") for _ in range(3)] + [answer_step("x")], answer="x")
    assert evaluate_behaviour(answered, success=False)["error_category"] == "false_end"


def test_efficiency_ratio_counts_every_step_of_the_budget():
    # agent() takes 7 steps: 6 actions and the answer; the paper's ratio counts them all: 5/7
    assert efficiency_ratio(5, agent()) == pytest.approx(5 / 7)
    assert efficiency_ratio(None, agent()) is None
    assert efficiency_ratio(5, trajectory("t", [answer_step("x")])) == 5.0         # answered at once
    assert efficiency_ratio(5, trajectory("t", [])) is None                        # no step at all
    # failed and unparsed actions are steps too
    t = trajectory("t", [step("click('9')", "click", error="no element"), step("what", None), answer_step("x")])
    assert efficiency_ratio(3, t) == 1.0


def test_reference_steps_are_counted_like_the_agent_s():
    # an agent-format reference (an oracle run) counts every browser step: replaying it gives 1.0
    ref = agent()
    assert reference_step_count(ref) == 7 and efficiency_ratio(reference_step_count(ref), agent()) == 1.0
    # a record-session reference: its normalised actions, plus an answer step when it has one
    session = session_reference()
    assert reference_step_count(session) == 5
    session["steps"].append({"step": 10, "action": "answer", "target": None, "value": {"text": "ok"}, "url": ""})
    assert reference_step_count(session) == 6
    # no reference trajectory: the task's reference_length
    assert reference_step_count(None, 8) == 8 and reference_step_count(None, None) is None


def test_consistency_and_average_steps():
    a = seq(("a", "1"), ("b", "2"))
    b = seq(("a", "1"), ("b", "2"))
    c = seq(("a", "1"), ("c", "3"), ("d", "4"))
    assert trajectory_consistency([a, b, c]) == pytest.approx(2 / 3)   # 2 of 3 runs share the modal sequence
    assert trajectory_consistency([a, b]) == 1.0
    assert trajectory_consistency([]) is None
    assert average_steps([a, b, c]) == pytest.approx((2 + 2 + 3) / 3)


def test_a_recorded_drag_and_the_agent_s_drag_are_one_action():
    """A recorded ``drag`` step (from and to points) and an agent's ``mouse_drag_and_drop`` (or
    ``drag_and_drop`` of elements) are both a ``drag``, compared by kind: the reference agent's
    replay of a slider earns its overlap."""
    reference = {"version": 1, "kind": "reference_trajectory", "start_url": f"{SHOP}/", "steps": [
        {"step": 0, "action": "navigate", "target": None, "value": None, "url": f"{SHOP}/"},
        {"step": 1, "action": "drag", "target": {"role": "generic", "name": "", "css": "#handle", "tag": "span",
                                                  "text": ""},
         "value": {"from": [58, 108], "to": [288, 112]}, "url": f"{SHOP}/"}]}
    assert [str(a) for a in session_actions(reference)] == ["drag()"]
    for action, kind in (("mouse_drag_and_drop(58, 108, 288, 112)", "mouse_drag_and_drop"),
                         ("drag_and_drop('4', '9')", "drag_and_drop")):
        played = trajectory("t", [step(action, kind, url=f"{SHOP}/"), answer_step("60", url=f"{SHOP}/")], answer="60")
        r = evaluate_partial(reference, played)
        assert (r["lcs"], r["overlap"]) == (1, 1.0), (action, r)
