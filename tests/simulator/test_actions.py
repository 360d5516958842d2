"""The action parser: three dialects into one Action, prose around actions, malformed input."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from webfreeze.simulator.actions import (
    DEFAULT_SCROLL_PX,
    DIALECTS,
    KINDS,
    Action,
    ActionError,
    detect_dialect,
    format_action,
    parse_action,
    try_parse,
)

# (text, expected dialect, expected fields besides dialect/raw)
VALID = [
    # BrowserGym
    ("click('12')", "browsergym", dict(kind="click", bid="12")),
    ('click("12")', "browsergym", dict(kind="click", bid="12")),
    ("click(12)", "browsergym", dict(kind="click", bid="12")),
    ("click(bid='a181')", "browsergym", dict(kind="click", bid="a181")),
    ("click('12', button='left')", "browsergym", dict(kind="click", bid="12")),
    # the rest of BrowserGym's high-level set, each under its own kind
    ("click('12', button='right', modifiers=['Shift'])", "browsergym",
     dict(kind="click", bid="12", args={"button": "right", "modifiers": ["Shift"]})),
    ("dblclick('12')", "browsergym", dict(kind="dblclick", bid="12")),
    ("focus('12')", "browsergym", dict(kind="focus", bid="12")),
    ("clear('12')", "browsergym", dict(kind="clear", bid="12")),
    ("drag_and_drop('12', '15')", "browsergym", dict(kind="drag_and_drop", bid="12", args={"to_bid": "15"})),
    ("upload_file('12', ['a.pdf', 'b.png'])", "browsergym",
     dict(kind="upload_file", bid="12", args={"files": ["a.pdf", "b.png"]})),
    ("select_option('12', ['a', 'b'])", "browsergym", dict(kind="select", bid="12", value="a",
                                                          args={"options": ["a", "b"]})),
    ("scroll(100, 100)", "browsergym", dict(kind="scroll", args={"delta_x": 100, "delta_y": 100})),
    ("scroll_at(50, 100, 0, 200)", "browsergym", dict(kind="scroll_at", args={"x": 50, "y": 100, "dx": 0, "dy": 200})),
    ("mouse_move(65.2, 158.5)", "browsergym", dict(kind="mouse_move", args={"x": 65.2, "y": 158.5})),
    ("mouse_up(250, 120)", "browsergym", dict(kind="mouse_up", args={"x": 250, "y": 120})),
    ("mouse_down(140, 580, 'middle')", "browsergym", dict(kind="mouse_down", args={"x": 140, "y": 580, "button": "middle"})),
    ("mouse_click(887.2, 68)", "browsergym", dict(kind="mouse_click", args={"x": 887.2, "y": 68})),
    ("mouse_dblclick(5, 236)", "browsergym", dict(kind="mouse_dblclick", args={"x": 5, "y": 236})),
    ("mouse_drag_and_drop(10, 325, 235, 24)", "browsergym",
     dict(kind="mouse_drag_and_drop", args={"from_x": 10, "from_y": 325, "to_x": 235, "to_y": 24})),
    ("mouse_upload_file(132, 547, 'r.pdf')", "browsergym",
     dict(kind="mouse_upload_file", args={"x": 132, "y": 547, "files": ["r.pdf"]})),
    ("keyboard_down('Shift')", "browsergym", dict(kind="keyboard_down", key="Shift")),
    ("keyboard_up('c')", "browsergym", dict(kind="keyboard_up", key="c")),
    ("keyboard_type('Hello world!')", "browsergym", dict(kind="keyboard_type", text="Hello world!")),
    ("keyboard_insert_text('Hi')", "browsergym", dict(kind="keyboard_insert_text", text="Hi")),
    ("new_tab()", "browsergym", dict(kind="new_tab")),
    ("tab_close()", "browsergym", dict(kind="tab_close")),
    ("tab_focus(2)", "browsergym", dict(kind="tab_focus", args={"index": 2})),
    ("  click( '12' )  ", "browsergym", dict(kind="click", bid="12")),
    ("fill('12', 'hello world')", "browsergym", dict(kind="fill", bid="12", text="hello world")),
    ("fill('12', \"it's\")", "browsergym", dict(kind="fill", bid="12", text="it's")),
    ("fill('12', 'say \"hi\"\\n')", "browsergym", dict(kind="fill", bid="12", text='say "hi"\n')),
    ("fill('12', 'caf\\u00e9')", "browsergym", dict(kind="fill", bid="12", text="café")),
    ("fill('12', '')", "browsergym", dict(kind="fill", bid="12", text="")),
    ("fill(bid='7', value='x')", "browsergym", dict(kind="fill", bid="7", text="x")),
    ("select_option('12', 'v')", "browsergym", dict(kind="select", bid="12", value="v")),
    ("select_option('12', ['Newest'])", "browsergym", dict(kind="select", bid="12", value="Newest")),
    ("scroll(0, 500)", "browsergym", dict(kind="scroll", direction="down", amount=500)),
    ("scroll(0, -200.4)", "browsergym", dict(kind="scroll", direction="up", amount=200)),
    ("scroll(300, 0)", "browsergym", dict(kind="scroll", direction="right", amount=300)),
    ("scroll(delta_x=-40, delta_y=0)", "browsergym", dict(kind="scroll", direction="left", amount=40)),
    ("go_back()", "browsergym", dict(kind="go_back")),
    ("go_forward()", "browsergym", dict(kind="go_forward")),
    ("goto('http://scholar.test/abs/1?x=1')", "browsergym", dict(kind="goto", url="http://scholar.test/abs/1?x=1")),
    ("noop()", "browsergym", dict(kind="noop")),
    ("noop(1000)", "browsergym", dict(kind="noop", amount=1000)),
    ("noop(wait_ms=250)", "browsergym", dict(kind="noop", amount=250)),
    ("send_msg_to_user('The answer is 42.')", "browsergym", dict(kind="answer", text="The answer is 42.")),
    ("send_msg_to_user('Action: done')", "browsergym", dict(kind="answer", text="Action: done")),
    ("report_infeasible('no such paper')", "browsergym", dict(kind="infeasible", text="no such paper")),
    ("hover('12')", "browsergym", dict(kind="hover", bid="12")),
    ("press('12', 'Enter')", "browsergym", dict(kind="press", bid="12", key="Enter")),
    ("press('12', 'ControlOrMeta+a')", "browsergym", dict(kind="press", bid="12", key="ControlOrMeta+a")),
    ("keyboard_press('PageDown')", "browsergym", dict(kind="press", key="PageDown")),
    ("history_search('shoe size')", "browsergym", dict(kind="history_search", text="shoe size")),
    # WebVoyager / WebArxiv
    ("Click [12]", "webvoyager", dict(kind="click", bid="12")),
    ("Click 12", "webvoyager", dict(kind="click", bid="12")),
    ("Click [ 12 ]", "webvoyager", dict(kind="click", bid="12")),
    ("Type [12]; attention is all you need", "webvoyager",
     dict(kind="fill", bid="12", text="attention is all you need", key="Enter")),
    ("Type [12]; [quantum error correction]", "webvoyager",
     dict(kind="fill", bid="12", text="quantum error correction", key="Enter")),
    ("Type [3]; a; b", "webvoyager", dict(kind="fill", bid="3", text="a; b", key="Enter")),
    ("Scroll [WINDOW]; down", "webvoyager", dict(kind="scroll", direction="down")),
    ("Scroll [WINDOW]; up", "webvoyager", dict(kind="scroll", direction="up")),
    ("Scroll [12]; up", "webvoyager", dict(kind="scroll", bid="12", direction="up")),
    ("Scroll [WINDOW]; [down]", "webvoyager", dict(kind="scroll", direction="down")),
    ("Wait", "webvoyager", dict(kind="noop")),
    ("GoBack", "webvoyager", dict(kind="go_back")),
    ("Google", "webvoyager", dict(kind="goto", url="https://www.google.com/")),
    ("ANSWER; 2310.01234", "webvoyager", dict(kind="answer", text="2310.01234")),
    ("ANSWER; [Yes]", "webvoyager", dict(kind="answer", text="Yes")),
    ("ANSWER: three", "webvoyager", dict(kind="answer", text="three")),
    # WebArena
    ("click [1234]", "webarena", dict(kind="click", bid="1234")),
    ("hover [7]", "webarena", dict(kind="hover", bid="7")),
    ("type [12] [hello world] [1]", "webarena", dict(kind="fill", bid="12", text="hello world", key="Enter")),
    ("type [12] [hello world] [0]", "webarena", dict(kind="fill", bid="12", text="hello world")),
    ("type [12] [hello world]", "webarena", dict(kind="fill", bid="12", text="hello world", key="Enter")),
    ("type [12] [a [nested] text] [0]", "webarena", dict(kind="fill", bid="12", text="a [nested] text")),
    ("type [12] [] [0]", "webarena", dict(kind="fill", bid="12", text="")),
    ("press [Enter]", "webarena", dict(kind="press", key="Enter")),
    ("press [Control+v]", "webarena", dict(kind="press", key="Control+v")),
    ("scroll [down]", "webarena", dict(kind="scroll", direction="down")),
    ("scroll [direction=up]", "webarena", dict(kind="scroll", direction="up")),
    ("goto [http://shop.test/cart]", "webarena", dict(kind="goto", url="http://shop.test/cart")),
    ("go_back", "webarena", dict(kind="go_back")),
    ("go_forward", "webarena", dict(kind="go_forward")),
    ("stop [$25.99]", "webarena", dict(kind="answer", text="$25.99")),
    ("stop [N/A]", "webarena", dict(kind="answer", text="N/A")),
    ("stop []", "webarena", dict(kind="answer", text="")),
]


@pytest.mark.parametrize("text,dialect,fields", VALID, ids=[v[0] for v in VALID])
def test_valid_actions(text, dialect, fields):
    action = parse_action(text)
    assert action.dialect == dialect
    assert action.raw == text
    expected = dict(bid=None, text=None, value=None, direction=None, amount=None, url=None, key=None, args=None)
    expected.update(fields)
    for name, value in expected.items():
        assert getattr(action, name) == value, (name, action)
    # forcing the right dialect gives the same action
    assert parse_action(text, dialect=dialect) == action


# (text, forced dialect or None, a fragment the one-line error must contain)
MALFORMED = [
    ("", None, "empty action"),
    ("   \n ", None, "empty action"),
    ("I am not sure what to do", None, "no action recognised"),
    ("clik('12')", None, "unknown BrowserGym action clik()"),
    ("click()", None, "missing 'bid'"),
    ("click('12'", None, "not a valid BrowserGym action"),
    ("click('12', '13', 'x', 'y')", None, "at most 3"),
    ("click('12', button='sideways')", None, "button must be one of left, middle, right"),
    ("click('12', modifiers=['Hyper'])", None, "modifiers must be a list"),
    ("click('')", None, "element id"),
    ("click(['12'])", None, "element id"),
    ("click(True)", None, "element id"),
    ("click(bidd='12')", None, "no argument 'bidd'"),
    ("click('12', bid='12')", None, "twice"),
    ("click(*args)", None, "no * or **"),
    ("fill('12')", None, "missing 'value'"),
    ("fill('12', open('/etc/passwd').read())", None, "plain literals"),
    ("fill('12', __import__('os').system('true'))", None, "plain literals"),
    ("fill('12', 'a' + 'b')", None, "plain literals"),
    ("scroll('down')", None, "missing 'delta_y'"),
    ("scroll('a', 'b')", None, "must be a number"),
    ("noop(-5)", None, "negative"),
    ("goto('')", None, "must not be empty"),
    ("press('12', '')", None, "must not be empty"),
    ("os.system('x')", None, "no action recognised"),
    ("os.system('x')", "browsergym", "expected one function call"),
    ("Click [4]", "browsergym", "expected one function call"),
    ("press('12', 'NotAKey')", None, "unknown key 'NotAKey'"),
    ("keyboard_down('Shift+a')", None, "unknown key 'Shift+a'"),
    ("click('1'); click('2')", None, "Received a multi-action, only single-actions are allowed."),
    ("fill('1', 'a')\nclick('2')", None, "Received a multi-action, only single-actions are allowed."),
    ("tab_focus('x')", None, "whole number"),
    ("select_option('12', [])", None, "at least one option"),
    ("mouse_click('a', 20)", None, "must be a number"),
    ("upload_file('12', 5)", None, "a path or a list of paths"),
    ("Click", None, "Click needs an element number"),
    ("Click [abc def]", None, "Click needs an element number"),
    ("Type [12]", None, "Type needs an element number and text"),
    ("Scroll [WINDOW]", None, "Scroll needs a target and a direction"),
    ("Scroll [WINDOW]; sideways", None, "Scroll needs a target and a direction"),
    ("Wait 5", None, "Wait takes no argument"),
    ("GoBack now", None, "GoBack takes no argument"),
    ("Jump [3]", "webvoyager", "unknown WebVoyager action"),
    ("click 12", None, "element id in brackets"),
    ("click []", None, "element id in brackets"),
    ("type [12]", None, "type needs an element id and text"),
    ("scroll [sideways]", None, "scroll needs a direction"),
    ("press []", None, "press needs a key"),
    ("goto []", None, "goto needs a URL"),
    ("go_back [1]", None, "takes no argument"),
    ("stop 42", None, "stop needs the answer in brackets"),
    ("new_tab", None, "not supported"),
    ("tab_focus [1]", None, "not supported"),
    ("close_tab", None, "not supported"),
    ("jump [3]", "webarena", "unknown WebArena action"),
    ("click('12')", "klingon", "unknown action dialect"),
    ("Thought: nothing to do.\nAction:", None, "no action found"),
]


@pytest.mark.parametrize("text,dialect,fragment", MALFORMED, ids=[m[0] or "<empty>" for m in MALFORMED])
def test_malformed_actions(text, dialect, fragment):
    with pytest.raises(ActionError) as info:
        parse_action(text, dialect=dialect)
    message = str(info.value)
    assert fragment.lower() in message.lower(), message
    assert "\n" not in message and message.strip() == message
    action, error = try_parse(text, dialect=dialect)
    assert action is None and error == message


@pytest.mark.parametrize("bad", [None, 12, b"click('1')", ["click('1')"]])
def test_try_parse_never_raises_on_non_strings(bad):
    action, error = try_parse(bad)
    assert action is None and error and "\n" not in error


# Agent outputs that wrap the action in prose: (text, kind, bid, thought)
WRAPPED = [
    ("Thought: The search box is [5]; I will click it.\nAction: Click [5]", "click", "5",
     "The search box is [5]; I will click it."),
    ("Thought: I should search.\nAction: Type [3]; quantum computing", "fill", "3", "I should search."),
    ("Thought: done Action: ANSWER; 42", "answer", None, "done"),
    ("Let's think step-by-step. The page lists the paper at [1234]. In summary, the next action I will "
     "perform is ```click [1234]```", "click", "1234", "Let's think step-by-step. The page lists the paper at [1234]."),
    ("The cart is empty.\n```\ntype [88] [blue shoes] [1]\n```", "fill", "88", "The cart is empty."),
    ("<think>The Next link is 40.</think>\n<action>\nclick('40')\n</action>", "click", "40", "The Next link is 40."),
    ("I need to scroll to see more results.\nscroll(0, 500)", "scroll", None, "I need to scroll to see more results."),
    ("```python\nfill('12', 'x')\n```", "fill", "12", None),
    ("`click('9')`", "click", "9", None),
    ("**Thought:** go back\n**Action:** GoBack", "go_back", None, "go back"),
]


@pytest.mark.parametrize("text,kind,bid,thought", WRAPPED, ids=[w[0][:40] for w in WRAPPED])
def test_actions_wrapped_in_prose(text, kind, bid, thought):
    action = parse_action(text)
    assert (action.kind, action.bid, action.thought) == (kind, bid, thought)
    assert action.raw == text


def test_detect_dialect():
    assert detect_dialect("click('1')") == "browsergym"
    assert detect_dialect("Click [1]") == "webvoyager"
    assert detect_dialect("click [1]") == "webarena"
    assert detect_dialect("ANSWER; x") == "webvoyager"
    assert detect_dialect("hello there") is None
    assert detect_dialect("12") is None


def test_forced_dialect_is_case_tolerant_and_alias():
    assert parse_action("click [4]", dialect="webarxiv").kind == "click"
    assert parse_action("click [4]", dialect="webarxiv").dialect == "webvoyager"
    with pytest.raises(ActionError, match="not a valid BrowserGym action"):
        parse_action("Click [4", dialect="browsergym")


def test_action_is_frozen_and_validates():
    a = parse_action("click('1')")
    with pytest.raises(Exception):
        a.bid = "2"  # type: ignore[misc]
    with pytest.raises(ActionError, match="unknown action kind"):
        Action("teleport")
    with pytest.raises(ActionError, match="direction"):
        Action("scroll", direction="sideways")


def test_to_dict_matches_the_trajectory_format():
    d = parse_action("fill('12', 'text')").to_dict()
    assert d == {"kind": "fill", "bid": "12", "text": "text", "value": None, "direction": None, "amount": None,
                 "url": None, "key": None, "dialect": "browsergym"}
    json.dumps(d)  # plain JSON
    assert Action.from_dict(d) == Action("fill", bid="12", text="text", dialect="browsergym")


ROUND_TRIPS = [
    Action("click", bid="12"), Action("fill", bid="3", text="it's \"quoted\""), Action("fill", bid="3", text="x", key="Enter"),
    Action("select", bid="4", value="Newest"), Action("scroll", direction="down", amount=300),
    Action("scroll", direction="left", amount=20), Action("go_back"), Action("go_forward"),
    Action("goto", url="http://a.test/?q=1"), Action("noop"), Action("noop", amount=700),
    Action("answer", text="42"), Action("infeasible", text="gone"), Action("hover", bid="5"),
    Action("press", bid="5", key="Enter"), Action("press", key="PageDown"),
]


def after_round_trip(action: Action, dialect: str) -> Action:
    """What a dialect keeps of an action (the losses format_action documents)."""
    a = action
    if dialect == "browsergym":
        if a.kind == "fill":
            a = replace(a, key=None)
        if a.kind == "scroll" and a.amount is None:
            a = replace(a, amount=DEFAULT_SCROLL_PX)
    else:
        if a.kind in ("scroll", "noop"):
            a = replace(a, amount=None)
        if dialect == "webvoyager" and a.kind == "fill":
            a = replace(a, key="Enter")
        if dialect == "webarena" and a.kind == "press":
            a = replace(a, bid=None)
        if dialect == "webarena" and a.kind == "infeasible":
            a = Action("answer", text="N/A")
    return replace(a, dialect=dialect)


# (dialect, kind) pairs a dialect has no words for
INEXPRESSIBLE = {("webvoyager", k) for k in ("select", "go_forward", "goto", "infeasible", "hover", "press")} | \
    {("webvoyager", "scroll-left"), ("webarena", "select"), ("webarena", "noop"), ("webarena", "scroll-left")}


@pytest.mark.parametrize("action", ROUND_TRIPS, ids=lambda a: f"{a.kind}-{a.direction or a.key or a.amount or ''}")
@pytest.mark.parametrize("dialect", DIALECTS)
def test_format_then_parse_round_trips(action, dialect):
    """Whatever a dialect can say comes back as the same action; what it cannot say is a clear error."""
    label = f"{action.kind}-left" if action.direction == "left" else action.kind
    if (dialect, label) in INEXPRESSIBLE:
        with pytest.raises(ActionError) as info:
            format_action(action, dialect)
        assert "\n" not in str(info.value)
        return
    text = format_action(action, dialect)
    back = parse_action(text)
    assert replace(back, raw="") == after_round_trip(action, dialect), text


def test_format_examples():
    fill = Action("fill", bid="12", text="hello", key="Enter")
    assert format_action(fill, "browsergym") == "fill('12', 'hello')"
    assert format_action(fill, "webvoyager") == "Type [12]; hello"
    assert format_action(fill, "webarena") == "type [12] [hello] [1]"
    assert format_action(Action("fill", bid="12", text="hello"), "webarena") == "type [12] [hello] [0]"
    assert format_action(Action("scroll", direction="down"), "browsergym") == "scroll(0, 500)"
    assert format_action(Action("scroll", direction="up", amount=80), "webvoyager") == "Scroll [WINDOW]; up"
    assert format_action(Action("infeasible", text="x"), "webarena") == "stop [N/A]"
    with pytest.raises(ActionError, match="WebVoyager has no hover"):
        format_action(Action("hover", bid="1"), "webvoyager")
    with pytest.raises(ActionError, match="line break"):
        format_action(Action("answer", text="a\nb"), "webarena")


def test_every_kind_is_reachable_from_some_dialect():
    seen = {parse_action(text).kind for text, _, _ in VALID}
    assert seen == set(KINDS)
