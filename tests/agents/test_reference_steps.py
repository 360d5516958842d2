"""The reference agent takes exactly the steps the reference counts (issue 32): what the person
did, not what the page did in answer. No browser: a hand-written session log and observations that
show every target, so that only the rules are under test."""

from __future__ import annotations

from webfreeze.agents.base import TaskView
from webfreeze.agents.reference import ReferenceAgent, fold_text, visible_text
from webfreeze.eval.behaviour import reference_step_count
from webfreeze.eval.trajectory import session_actions

SITE = "http://docs.test"


def target(role: str, name: str, css: str) -> dict:
    return {"role": role, "name": name, "css": css, "tag": "x", "text": name}


def nav(url: str, cause: str | None) -> dict:
    step = {"action": "navigate", "target": None, "value": None, "url": SITE + url}
    if cause is not None:
        step["cause"] = cause
    return step


FIELD = target("textbox", "Search docs", "#q")
BUTTON = target("button", "Search", "#go")  # the button the page hides once typing starts
LINK = target("link", "Stacks", "li > a")
JUMP = target("link", "Jump to details", "p > a")
TITLE = target("textbox", "Title", "#title")
SAVE = target("button", "Save", "#save")
SENTENCE = "To add an item to the top of the stack, use append()."


def session() -> dict:
    steps = [
        nav("/", "goto"),                                                                     # the start page
        {"action": "type", "target": FIELD, "value": "stack"},                                # 1 fill
        {"action": "press", "target": FIELD, "value": "Enter"},                               # 2 press
        {"action": "submit", "target": target("form", "", "form"), "value": None},            # effect
        nav("/search?q=stack", "formSubmissionGet"),                                          # effect
        {"action": "click", "target": LINK, "value": None},                                   # 3 click
        nav("/page/stack", "anchorClick"),                                                    # effect
        {"action": "click", "target": JUMP, "value": None},                                   # 4 click
        nav("/page/stack#details", "sameDocument"),                                           # effect
        {"action": "scroll", "target": None, "value": {"x": 0, "y": 2135, "by": "page"}},     # effect
        {"action": "scroll", "target": None, "value": {"x": 0, "y": 1735, "by": "user"}},     # 5 scroll up 400
        nav("/edit", "goto"),                                                                 # 6 goto (typed)
        {"action": "type", "target": TITLE, "value": "New"},                                  # 7 fill
        {"action": "click", "target": SAVE, "value": None},                                   # 8 click
        {"action": "submit", "target": target("form", "", "form"), "value": None},            # effect
        nav("/saved", "formSubmissionPost"),                                                  # effect
        {"action": "answer", "target": None, "value": {"text": "append()", "evidence": [SENTENCE]}},  # 9 answer
    ]
    for i, s in enumerate(steps):
        s["step"] = i
    return {"version": 1, "kind": "reference_trajectory", "start_url": SITE + "/", "steps": steps}


def observation(url: str = SITE + "/") -> dict:
    elements = [{"bid": str(i + 1), **t} for i, t in enumerate((FIELD, LINK, JUMP, TITLE, SAVE))]
    tree = ("RootWebArea 'Stacks', focused\n\t[9] paragraph ''\n\t\tStaticText 'To add an item to the top of the "
            "stack, use'\n\t\t[10] code 'append()'\n\t\tStaticText '.'")
    return {"url": url, "elements": elements, "axtree_text": tree}


def replay(reference: dict) -> list[str]:
    agent = ReferenceAgent()
    agent.reset(TaskView(id="t", instruction="", reference=reference))
    actions = []
    while not actions or not actions[-1].startswith(("send_msg_to_user", "report_infeasible")):
        actions.append(agent.act(observation())["action"])
        assert len(actions) < 50
    return actions


def test_the_oracle_takes_the_person_s_steps_and_no_effect():
    actions = replay(session())
    assert actions == ["fill('1', 'stack')", "press('1', 'Enter')", "click('2')", "click('3')", "scroll(0, -400)",
                       f"goto('{SITE}/edit')", "fill('4', 'New')", "click('5')", "send_msg_to_user('append()')"]
    # the hidden button is never looked for: Enter was logged, not the click the browser made of it
    assert not any("Search'" in a for a in actions)


def test_the_reference_counts_the_same_steps_so_the_oracle_scores_one():
    reference = session()
    assert reference_step_count(reference) == len(replay(reference)) == 9
    kinds = [a.kind for a in session_actions(reference)]
    assert kinds == ["type", "press", "click", "click", "scroll", "goto", "type", "click"]


def test_a_typed_url_after_a_login_is_a_goto_even_right_after_a_click():
    reference = session()
    # the typed /edit comes right after the anchor jump's navigation and scrolls: still the person's
    assert f"goto('{SITE}/edit')" in replay(reference)
    # recordings without causes keep the old rule (a navigation after a click is its effect)
    for s in reference["steps"]:
        s.pop("cause", None)
    assert not any(a.startswith("goto(") for a in replay(reference))


def test_evidence_is_matched_on_visible_text_across_nodes():
    text = visible_text(observation()["axtree_text"])
    assert fold_text(SENTENCE) in fold_text(text)
    assert fold_text("use  append()") in fold_text(text) and fold_text("USE APPEND()") in fold_text(text)
    assert fold_text("use pop()") not in fold_text(text)
    reference = session()
    reference["steps"][-1]["value"]["evidence"] = ["use pop()"]
    assert replay(reference)[-1] == "report_infeasible(\"reference step 16: the pages did not show 'use pop()'\")"


def test_tasks_add_leaves_the_suite_as_it_was_when_the_task_line_cannot_be_written(tmp_path, monkeypatch):
    """A full disk while writing tasks.jsonl (which this machine's root user cannot cause for real
    with permissions): the reference already copied is taken back, the suite is as it was."""
    import json

    import pytest

    from webfreeze.common.files import OutputError
    from webfreeze.eval import authoring
    from webfreeze.eval.errors import TaskError

    suite = tmp_path / "suite"
    ref = tmp_path / "t.json"
    ref.write_text(json.dumps(session()))
    authoring.add_task(suite, ref, "append()", instruction="How?", task_id="first", archive=tmp_path / "a.wfz")
    before = {p: p.read_bytes() for p in suite.rglob("*") if p.is_file()}
    real = authoring.write_output

    def full_disk(path, data):
        if str(path).endswith("tasks.jsonl"):
            raise OutputError(f"{path}: cannot write: No space left on device")
        real(path, data)

    monkeypatch.setattr(authoring, "write_output", full_disk)
    with pytest.raises(TaskError, match="No space left on device"):
        authoring.add_task(suite, ref, "append()", instruction="How?", task_id="second")
    again = session()
    again["steps"][1]["value"] = "stacks"  # recorded again, typed otherwise
    ref2 = tmp_path / "t2.json"
    ref2.write_text(json.dumps(again))
    with pytest.raises(TaskError, match="No space left on device"):  # a replaced reference comes back too
        authoring.add_task(suite, ref2, "append()", instruction="Why?", task_id="first", replace=True)
    assert {p: p.read_bytes() for p in suite.rglob("*") if p.is_file()} == before


def test_a_nameless_target_is_found_past_a_widget_s_instance_counter():
    """A nameless target is found at its CSS path; when a widget library numbered its id otherwise
    (react-select's instance counter: the replay mounted the dropdown once more than the live page),
    at the same path but for the id's numbers, or as the page's only nameless element of its role."""
    from webfreeze.agents.reference import find_target

    live = {"role": "combobox", "name": "", "tag": "input",
            "css": "#react-select-2--value > div:nth-of-type(2) > input:nth-of-type(1)"}

    def box(css: str, name: str = "", bid: str = "a1") -> dict:
        return {"bid": bid, "role": "combobox", "name": name, "tag": "input", "css": css}

    same = box(live["css"])
    assert find_target([same], live) is same
    renumbered = box("#react-select-3--value > div:nth-of-type(2) > input:nth-of-type(1)")
    other = box("#react-select-4--value > div:nth-of-type(1) > input:nth-of-type(1)", bid="b2")
    assert find_target([other, renumbered], live) is renumbered  # the same path but for the counter
    moved = box("#react-select-3--value > div:nth-of-type(1) > input:nth-of-type(1)")
    assert find_target([moved], live) is moved  # the only nameless combobox on the page
    assert find_target([moved, other], live) is None  # two candidates, neither at the path: not guessed
    assert find_target([box(moved["css"], name="City")], live) is None  # a named combobox is another one
    assert find_target([{**moved, "role": "textbox"}], live) is None  # and so is another role


def test_a_name_holding_the_recorded_one_is_the_target_only_where_it_was_recorded():
    """A recorded name found inside a longer one is the target at the recorded path (a link whose
    image repeats its text); elsewhere on the page it is another element: a script-drawn "Search"
    box the text backend does not show is not the dashboard's "Search term" field."""
    from webfreeze.agents.reference import find_target

    search = {"role": "textbox", "name": "Search", "tag": "input", "css": "#search-form > input:nth-of-type(1)"}
    term = {"bid": "7", "role": "textbox", "name": "Search term", "tag": "input",
            "css": "#dashboard > form:nth-of-type(2) > input:nth-of-type(1)"}
    assert find_target([term], search) is None  # an expired target, not another field typed into
    at_path = {**term, "bid": "8", "css": search["css"], "name": "Search (required)"}
    assert find_target([term, at_path], search) is at_path  # the same field, a part of its label hidden by CSS
    widget = {**search, "css": "#field-2 > input:nth-of-type(1)"}
    counted = {**at_path, "css": "#field-3 > input:nth-of-type(1)"}  # a widget's instance counter
    assert find_target([term, counted], widget) is counted
    link = {"role": "link", "name": "Docs", "tag": "a", "css": "#nav > a:nth-of-type(2)"}
    doubled = {"bid": "3", "role": "link", "name": "Docs Docs", "tag": "a", "css": "#nav > a:nth-of-type(2)"}
    assert find_target([doubled], link) is doubled
    assert find_target([doubled], {**link, "css": None}) is doubled  # recorded without a path: as before
    exact = {**doubled, "bid": "4", "name": "Docs", "css": "#footer > a:nth-of-type(1)"}
    assert find_target([doubled, exact], link) is exact  # the same name anywhere comes before a name holding it


def test_a_hash_route_is_a_page_of_its_own_where_urls_are_compared():
    """The reference agent's URL comparison and the long-context evaluation's (whether a page was
    reached) keep a hash route (``#/faq``: Docsify, Vue) and drop an anchor (``#top``)."""
    from webfreeze.agents.reference import _same_url
    from webfreeze.eval.longctx import _norm

    assert not _same_url("http://docs.test/#/faq", "http://docs.test/#/diet")
    assert _same_url("http://docs.test/guide#top", "http://docs.test/guide/")
    assert _norm("http://docs.test/#/faq") != _norm("http://docs.test/#/diet")
    assert _norm("http://docs.test/guide#top") == _norm("http://docs.test/guide") == "http://docs.test/guide"


def test_a_key_pressed_on_the_page_is_replayed_as_a_keyboard_press():
    """A key pressed outside any field (VitePress opens its search box on '/', Ctrl+K too) is a
    press step with no target: replayed to the page as `keyboard_press`, counted as a press."""
    steps = [nav("/", "goto"),
             {"action": "press", "target": None, "value": "/"},
             {"action": "type", "target": FIELD, "value": "stack", "keys": True},
             {"action": "press", "target": FIELD, "value": "Enter"},
             nav("/page/stack", "sameDocument"),
             {"action": "answer", "target": None, "value": {"text": "append()", "evidence": [SENTENCE]}}]
    for i, s in enumerate(steps):
        s["step"] = i
    reference = {"version": 1, "kind": "reference_trajectory", "start_url": SITE + "/", "steps": steps}
    actions = replay(reference)
    assert actions == ["keyboard_press('/')", "fill('1', 'stack', True)", "press('1', 'Enter')",
                       "send_msg_to_user('append()')"], actions
    assert reference_step_count(reference) == len(actions)


def test_a_field_named_as_its_section_still_shows_its_value():
    """Wagtail's page editor puts each field in a region named after it (``region 'Intro'`` holding
    ``textbox 'Intro' value='...'``, the tree Chromium gives its edit form): the field's name is left
    out as its section's name repeated, but its value is what a person reads there, and an answer
    whose evidence is that value was called unseen (``tasks validate``: the pages did not show it)."""
    tree = "\n".join([
        "RootWebArea 'Editing Article page: Weather station', focused",
        "\t[775] region 'Intro'",
        "\t\t[783] heading 'Intro'",
        "\t\t\tStaticText 'Intro'",
        "\t\t[796] textbox 'Intro' value='Wind, rain and pressure.'",
        "\t[800] region 'Body'",
        "\t\t[801] textbox 'Body' value='typed by the agent'",
    ])
    text = fold_text(visible_text(tree))
    assert fold_text("Wind, rain and pressure.") in text
    assert text.count(fold_text("Intro")) == 1  # (the repeated name still once)
    assert fold_text("typed by the agent") not in fold_text(visible_text(tree, typed={"801"}))


def test_the_text_typed_into_a_rich_text_editor_is_no_evidence():
    # a contenteditable editor (Draftail) shows what was typed as text inside it, not as a value
    tree = "\n".join([
        "RootWebArea 'Editing', focused",
        "\t[10] heading 'Body'",
        "\t[11] textbox 'Body' focused, multiline",
        "\t\t[12] paragraph ''",
        "\t\t\tStaticText 'typed by the agent'",
        "\t[13] paragraph ''",
        "\t\tStaticText 'Saved at noon.'",
    ])
    assert fold_text("typed by the agent") in fold_text(visible_text(tree))
    text = fold_text(visible_text(tree, typed={"11"}))
    assert fold_text("typed by the agent") not in text and fold_text("Saved at noon.") in text


def test_a_page_posted_to_its_own_url_is_read_whole_though_it_reuses_the_typed_fields_bids():
    """A form that POSTs to its own URL (Node-RED's `http in` pair: GET and POST /order) answers
    with a new document at the same URL; its bids start again, so the paragraph holding the order
    number can carry the bid of the field typed into before. That paragraph is evidence, not the
    agent's own typing."""
    name = target("textbox", "Your name", "#name")
    place = target("button", "Place order", "form button")
    steps = [
        nav("/order", "goto"),
        {"action": "type", "target": name, "value": "Ada Lovelace"},
        {"action": "click", "target": place, "value": None},
        {"action": "submit", "target": target("form", "", "form"), "value": None},
        nav("/order", "formSubmissionPost"),
        {"action": "answer", "target": None, "value": {"text": "R-502", "evidence": ["R-502"]}},
    ]
    for i, s in enumerate(steps):
        s["step"] = i
    reference = {"version": 1, "kind": "reference_trajectory", "start_url": SITE + "/order", "steps": steps}
    form = {"url": SITE + "/order",
            "elements": [{"bid": "10", **name}, {"bid": "11", **place}],
            "axtree_text": "RootWebArea 'Order form', focused\n\t[10] textbox 'Your name'\n\t[11] button 'Place order'"}
    received = {"url": SITE + "/order",
                "elements": [{"bid": "5", **target("link", "Order form", "nav > a")}],
                "axtree_text": ("RootWebArea 'Order received', focused\n\t[10] paragraph ''\n"
                                "\t\tStaticText 'Your order number is'\n\t\t[11] strong ''\n\t\t\tStaticText 'R-502'")}
    agent = ReferenceAgent()
    agent.reset(TaskView(id="t", instruction="", reference=reference))
    assert agent.act(form)["action"] == "fill('10', 'Ada Lovelace')"
    assert agent.act(form)["action"] == "click('11')"
    assert agent.act(received)["action"] == "send_msg_to_user('R-502')"
    # the field itself, still shown with what the agent typed, is no evidence
    agent.reset(TaskView(id="t", instruction="", reference=reference))
    agent.act(form)
    agent.act(form)
    typed_back = dict(form, axtree_text="RootWebArea 'Order form', focused\n\t[10] textbox 'Your name' value='R-502'")
    assert agent.act(typed_back)["action"].startswith("report_infeasible(")



def test_a_field_shown_again_after_a_goto_is_the_site_s_evidence():
    """The person typed 250 into a field, saved, then opened the page again to see the value kept
    (Transmission's preferences): the reloaded page's field carries the same bid, role and tag, and
    the value 250 comes from the site now. It is evidence, as the recorder read it then."""
    limit = target("spinbutton", "Download limit", "#limit")
    save = target("button", "Save", "#save")
    steps = [
        nav("/prefs", "goto"),
        {"action": "type", "target": limit, "value": "250"},
        {"action": "click", "target": save, "value": None},
        nav("/prefs", "goto"),
        {"action": "answer", "target": None, "value": {"text": "250", "evidence": ["250"]}},
    ]
    for i, s in enumerate(steps):
        s["step"] = i
    reference = {"version": 1, "kind": "reference_trajectory", "start_url": SITE + "/prefs", "steps": steps}

    def page(value: str) -> dict:
        shown = f" value='{value}'" if value else ""
        return {"url": SITE + "/prefs", "elements": [{"bid": "414", **limit}, {"bid": "415", **save}],
                "axtree_text": f"RootWebArea 'Preferences', focused\n\t[414] spinbutton 'Download limit'{shown}\n"
                               "\t[415] button 'Save'"}
    agent = ReferenceAgent()
    agent.reset(TaskView(id="t", instruction="", reference=reference))
    assert agent.act(page(""))["action"] == "fill('414', '250')"
    assert agent.act(page("250"))["action"] == "click('415')"
    assert agent.act(page("250"))["action"] == f"goto('{SITE}/prefs')"
    assert agent.act(page("250"))["action"] == "send_msg_to_user('250')"
    # without the goto, the field shows only what the agent typed: no evidence
    agent.reset(TaskView(id="t", instruction="", reference={**reference, "steps": steps[:3] + steps[4:]}))
    agent.act(page(""))
    agent.act(page("250"))
    assert agent.act(page("250"))["action"].startswith(("report_infeasible(", "noop("))

def test_an_icon_font_s_glyph_in_a_recorded_name_is_no_part_of_it():
    """Calibre-Web's navigation links carry a Bootstrap glyphicon: its ``::before`` puts a
    private-use character in the accessible name the browser computes (`link '\\ue008 Authors'`),
    which the page's HTML alone (the text backend) never holds (`link 'Authors'`): the reference
    found no such link there. Names are compared without those glyphs, both ways."""
    from webfreeze.agents.reference import find_target

    plain = {"bid": "12", "role": "link", "name": "Authors", "tag": "a", "css": "#nav_author > a"}
    glyph = {**plain, "name": "\ue008 Authors"}
    assert find_target([plain], {"role": "link", "name": "\ue008 Authors", "tag": "a", "css": "#nav_author > a"}) is plain
    assert find_target([glyph], {"role": "link", "name": "Authors", "tag": "a", "css": "#nav_author > a"}) is glyph
    button = {"bid": "7", "role": "button", "name": "\ue056 Add to shelf\U000f0001", "tag": "button", "css": "#add"}
    assert find_target([button], {"role": "button", "name": "Add to shelf", "tag": "button", "css": "#add"}) is button
    assert find_target([plain], {"role": "link", "name": "\ue008 Authors list", "tag": "a", "css": "#x"}) is None
    # a name that is a glyph alone (an icon button) is still that name: not a nameless button
    trash, edit = ({"bid": b, "role": "button", "name": n, "tag": "button", "css": f"#b{b}"}
                   for b, n in (("1", "\uf1f8"), ("2", "\uf044")))
    assert find_target([edit, trash], {"role": "button", "name": "\uf1f8", "tag": "button", "css": "#moved"}) is trash
