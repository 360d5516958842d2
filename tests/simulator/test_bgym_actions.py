"""BrowserGym's whole high-level action set (browsergym.core.action.highlevel, 0.14) in both backends,
on the demo archive's advanced-search page: every action the text backend honours gives the same
``last_action_error`` in both (success and failure alike: a missing option, an unknown key, an
unarchived page, an element that cannot take the action), the others are refused in the text
backend in one line saying so and done in the browser; several actions in one string are refused
in both, in BrowserGym's words. The key names we accept are the installed Playwright's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import webfreeze as wf
from webfreeze.demo import demo_paths
from webfreeze.simulator.actions import MULTI_ACTION, TEXT_REFUSED, browsergym_name, parse_action
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.keys import KEYS

PATHS = demo_paths()
PAGE = "http://scholar.test/search/advanced"
# bids on PAGE (the same in both backends): a link, text fields, drop-downs, checkboxes
LINK, HELP, BOX, OPERATOR, FIELD, CHECK, CHECK2 = "8", "9", "29", "25", "30", "62", "64"

# (action, the error both backends give: "" for none, else a fragment of it)
BOTH = [
    (f"click('{LINK}')", ""),
    (f"fill('{BOX}', 'neural networks')", ""),
    (f"fill('{BOX}', 'Montre', True)", ""),  # (the text backend sets the value; no script opens a menu)
    (f"select_option('{OPERATOR}', 'OR')", ""),
    (f"select_option('{FIELD}', 'Author(s)')", ""),  # by label
    (f"hover('{HELP}')", ""),
    (f"focus('{BOX}')", ""),
    (f"clear('{BOX}')", ""),
    (f"press('{BOX}', 'Enter')", "not captured: the archive has no GET http://scholar.test/search/advanced?"),  # (no such search archived)
    (f"press('{BOX}', 'Control+a')", ""),
    ("keyboard_press('Tab')", ""),
    ("scroll(0, 300)", ""),
    ("scroll(40, 300)", ""),
    ("noop()", ""),
    ("noop(500)", ""),
    ("goto('http://scholar.test/help')", ""),
    ("go_back()", "no previous page"),
    ("go_forward()", "no next page"),
    ("send_msg_to_user('320')", ""),
    ("report_infeasible('no such page')", ""),
    # failures
    ("click('9999')", "no element with bid 9999 on the page"),
    (f"select_option('{OPERATOR}', 'Nope')", f"select_option(): element {OPERATOR} has no option 'Nope' "
                                             "(options: 'AND', 'OR', 'NOT')"),
    (f"select_option('{OPERATOR}', ['AND', 'OR'])", f"element {OPERATOR} takes one option, got 2"),
    (f"select_option('{BOX}', 'x')", f"select_option(): element {BOX} is not a <select> element"),
    (f"fill('{OPERATOR}', 'x')", f"fill(): element {OPERATOR} is not an <input>, <textarea> or [contenteditable]"),
    (f"fill('{LINK}', 'x')", f"fill(): element {LINK} is not an <input>"),
    (f"fill('{CHECK}', 'x')", f"fill(): element {CHECK} is an input that cannot be filled"),
    (f"clear('{LINK}')", f"clear(): element {LINK} is not an <input>"),
    (f"press('{BOX}', 'NotAKey')", "press(): unknown key 'NotAKey'"),
    ("keyboard_press('NotAKey')", "keyboard_press(): unknown key 'NotAKey'"),
    ("goto('http://example.com/')", "not captured: the archive has no GET http://example.com/ (a replay miss)"),
    (f"click('{LINK}')\nclick('{HELP}')", MULTI_ACTION),
    (f"click('{LINK}'); click('{HELP}')", MULTI_ACTION),
    ("dance('12')", "unknown BrowserGym action dance()"),
]
# What the text backend refuses, and what the browser makes of it (its error: "" for none)
BROWSER_ONLY = [
    (f"dblclick('{LINK}')", ""),
    (f"click('{HELP}', button='middle')", ""),  # (a new tab, which becomes the active page)
    (f"click('{LINK}', modifiers=['Shift'])", ""),
    (f"drag_and_drop('{CHECK}', '{CHECK2}')", ""),
    (f"drag_and_drop('{CHECK}', '9999')", "no element with bid 9999 on the page"),
    (f"upload_file('{BOX}', 'no-such-file.pdf')", "upload_file(): no such file 'no-such-file.pdf'"),
    ("scroll_at(300, 300, 0, 200)", ""),
    ("mouse_move(300, 200)", ""),
    ("mouse_down(300, 200)", ""),
    ("mouse_up(300, 200, 'right')", ""),
    ("mouse_click(10, 10)", ""),
    ("mouse_dblclick(10, 10)", ""),
    ("mouse_drag_and_drop(10, 10, 200, 200)", ""),
    ("mouse_upload_file(10, 10, 'no-such-file.pdf')", "mouse_upload_file(): no such file 'no-such-file.pdf'"),
    ("keyboard_type('abc')", ""),
    ("keyboard_insert_text('abc')", ""),
    ("keyboard_down('Shift')", ""),
    ("keyboard_up('Shift')", ""),
    ("new_tab()", ""),
    ("tab_focus(0)", ""),
    ("tab_focus(3)", "tab_focus(): no tab 3 (1 open)"),
    ("tab_close()", ""),
]


def _play(backend: str, actions: list[str]) -> dict[str, dict]:
    """Each action, from a fresh episode on PAGE: its error, the URL and open pages after it."""
    env = wf.WebEnv(wf.EnvConfig(PATHS["archive"], backend=backend, suite=PATHS["suite"], max_steps=100))
    seen = {}
    try:
        for action in actions:
            env.reset(options={"task": {"id": "t", "start_url": PAGE, "instruction": "try"}})
            obs, *_ = env.step(action)
            seen[action] = {"error": obs["last_action_error"], "url": obs["url"], "pages": obs["open_pages"],
                            "form": {b: (env.tree.get(b) or {}).get("value") for b in (BOX, OPERATOR)}}
    finally:
        env.close()
    return seen


@pytest.fixture(scope="module")
def played():
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    actions = [a for a, _ in BOTH] + [a for a, _ in BROWSER_ONLY]
    return {"text": _play("text", actions), "browser": _play("browser", actions)}


def test_the_table_covers_browsergyms_whole_set():
    from browsergym.core.action.highlevel import ACTION_SUBSETS

    theirs = {f.__name__ for subset in ("chat", "infeas", "bid", "coord", "nav", "tab") for f in ACTION_SUBSETS[subset]}
    ours = set()
    for action, _ in BOTH + BROWSER_ONLY:
        try:
            ours.add(browsergym_name(parse_action(action)))
        except ValueError:
            pass
    assert theirs - {"noop"} <= ours, theirs - ours
    assert TEXT_REFUSED <= theirs


@pytest.mark.parametrize("action,error", BOTH, ids=[a for a, _ in BOTH])
def test_both_backends_answer_alike(played, action, error):
    text, browser = played["text"][action]["error"], played["browser"][action]["error"]
    assert "\n" not in text and "\n" not in browser
    if "needs the browser backend" in error:
        assert error in text and browser == ""
        return
    assert text == browser, (text, browser)
    assert (error in text) if error else text == ""
    if not error:  # the same page after it
        assert played["text"][action]["url"] == played["browser"][action]["url"]


def test_form_state_is_the_same_in_both(played):
    for action in (f"fill('{BOX}', 'neural networks')", f"select_option('{OPERATOR}', 'OR')", f"clear('{BOX}')"):
        assert played["text"][action]["form"] == played["browser"][action]["form"], action
    assert played["text"][f"fill('{BOX}', 'neural networks')"]["form"][BOX] == "neural networks"
    assert played["browser"][f"select_option('{OPERATOR}', 'OR')"]["form"][OPERATOR] == "OR"


@pytest.mark.parametrize("action,error", BROWSER_ONLY, ids=[a for a, _ in BROWSER_ONLY])
def test_the_text_backend_refuses_what_it_cannot_do_and_the_browser_does_it(played, action, error):
    name = browsergym_name(parse_action(action))
    refusal = played["text"][action]["error"]
    assert refusal.startswith(f"{name}() ") and "needs the browser backend" in refusal and "\n" not in refusal
    browser = played["browser"][action]["error"]
    assert (error in browser) if error else browser == "", browser


def test_tabs_follow_browsergyms_rules(played):
    b = played["browser"]
    assert b["new_tab()"]["url"] == "about:blank" and len(b["new_tab()"]["pages"]) == 2
    middle = b[f"click('{HELP}', button='middle')"]
    assert middle["url"] == "http://scholar.test/help" and middle["pages"] == [PAGE, "http://scholar.test/help"]
    assert b["tab_close()"]["pages"] == ["about:blank"]  # (the last tab closed: a new blank one)


def test_a_tab_focus_stays_where_it_was_put():
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    env = wf.WebEnv(wf.EnvConfig(PATHS["archive"], backend="browser", suite=PATHS["suite"]))
    try:
        env.reset(options={"task": {"id": "t", "start_url": PAGE, "instruction": "try"}})
        obs, *_ = env.step("new_tab()")
        obs, *_ = env.step("goto('http://scholar.test/help')")
        assert obs["url"] == "http://scholar.test/help"
        obs, *_ = env.step("tab_focus(0)")
        assert obs["url"] == PAGE and obs["open_pages"] == [PAGE, "http://scholar.test/help"]
        obs, *_ = env.step("noop()")
        assert obs["url"] == PAGE  # (the newer tab does not take over again)
        obs, *_ = env.step("tab_close()")
        assert obs["url"] == "http://scholar.test/help" and obs["open_pages"] == ["http://scholar.test/help"]
    finally:
        env.close()


def _js_string(body: str, name: str) -> str | None:
    """The string value of ``"name": "..."`` (or ``'...'``) in a JS object literal's text."""
    m = re.search(rf'"{name}": (?:"((?:\\.|[^"\\])*)"|\'((?:\\.|[^\'\\])*)\')', body)
    if m is None:
        return None
    return (m.group(1) if m.group(1) is not None else m.group(2)).encode().decode("unicode_escape")


def test_the_keys_are_the_installed_playwrights():
    """Playwright's US layout as its driver holds it: every code, the one-character keys of codes
    without a location, their shifted keys and the modifiers' aliases."""
    import playwright

    bundle = next(Path(playwright.__file__).parent.glob("driver/package/lib/**/coreBundle.js"), None) \
        or next(Path(playwright.__file__).parent.glob("driver/package/lib/**/usKeyboardLayout.js"), None)
    if bundle is None:
        pytest.skip("this Playwright's driver keeps its keyboard layout elsewhere")
    text = bundle.read_text(encoding="utf-8")
    start = text.index("USKeyboardLayout = {")
    block = text[start:text.index("\n    };", start)]
    found = set()
    for code, body in re.findall(r'^\s*"([^"]+)": \{(.*)\},?$', block, re.M):
        found.add(code)
        key = _js_string(body, "key")
        shifted = _js_string(body, "shiftKey")
        if '"location"' not in body:
            if len(key) == 1:
                found.add(key)
            if shifted:
                found.add(shifted)
    aliases = text[text.index("aliases = /* @__PURE__ */ new Map(["):]
    aliases = aliases[:aliases.index("]);")]
    for names in re.findall(r'\["\w+", \[([^\]]*)\]\]', aliases):
        found |= {n.encode().decode("unicode_escape") for n in re.findall(r'"((?:\\.|[^"\\])*)"', names)}
    assert len(found) > 150
    assert found | {"ControlOrMeta"} == KEYS
