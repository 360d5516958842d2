"""What a web component draws in its open shadow root is part of the page an agent sees and acts on
(a Bokeh walkthrough: a DataTable's cells and a Tabs widget's labels live in shadow roots; the
browser backend's observation showed none of them, so a task answered there could never pass).

The observation reads the flat tree, as the page is drawn: a host's shadow root in place of its
children, a slot's assigned elements in place of its own (its fallback when none are); children no
slot takes are not drawn and are not shown; a closed shadow root cannot be read. Its elements get
bids, which the actions take (a click's hit test looks inside shadow roots too), and the BrowserGym
observation's accessibility tree carries the same bids."""

from __future__ import annotations

import re

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))

URL = "http://parts.test/"
PAGE = b"""<!DOCTYPE html><html><head><title>Parts</title></head><body>
<h1>Parts</h1>
<part-card><span slot="title">Slotted title</span><span>Unslotted child</span></part-card>
<closed-box></closed-box>
<a href="/more">More</a>
<script>
customElements.define('part-card', class extends HTMLElement {
  connectedCallback() {
    const root = this.attachShadow({mode: 'open'});
    root.innerHTML = '<style>p { color: blue }</style><h2><slot name="title">Fallback title</slot></h2>' +
      '<div>Cobalt</div><div>blue</div><div>15 in stock</div>' +
      '<button id="buy">Buy</button><input aria-label="Quantity" value="1"><p id="out"></p>' +
      '<slot name="none"><i>Fallback note</i></slot><inner-note></inner-note>';
    root.getElementById('buy').addEventListener('click', () => {
      root.getElementById('out').textContent = 'Bought ' + root.querySelector('input').value;
    });
  }
});
customElements.define('inner-note', class extends HTMLElement {
  connectedCallback() { this.attachShadow({mode: 'open'}).innerHTML = '<small>Nested note</small>'; }
});
customElements.define('closed-box', class extends HTMLElement {
  connectedCallback() { this.attachShadow({mode: 'closed'}).innerHTML = '<p>Inside a closed root</p>'; }
});
</script></body></html>"""
TASK = {"id": "parts", "start_url": URL, "instruction": "buy three"}
# The same component twice: the same ids in both shadow roots (an id is unique in its own root
# alone), each select labelled by its own root's label. Pressing Swap takes the first box's light
# child out of its slot: it is no longer drawn, and the bid it had is gone with it.
# A button under a banner, on a page whose form is named "host": document.host is that form, so a
# hit test climbing to the document by a page's properties would go round for ever.
COVERED = b"""<!DOCTYPE html><html><head><title>Covered</title></head><body><form name="host"></form>
<button id="b" style="position: absolute; left: 10px; top: 10px">Hidden button</button>
<div style="position: fixed; inset: 0; background: white">A banner over everything</div></body></html>"""
TWINS = b"""<!DOCTYPE html><html><head><title>Twins</title></head><body>
<pick-box data-label="Colour"><b>First box</b></pick-box><pick-box data-label="Size"><b>Second box</b></pick-box>
<script>
customElements.define('pick-box', class extends HTMLElement {
  connectedCallback() {
    const root = this.attachShadow({mode: 'open'});
    root.innerHTML = '<slot></slot><label for="q">' + this.dataset.label + '</label>' +
      '<select id="q"><option>one</option><option>two</option></select><button id="swap">Swap</button>';
    root.getElementById('swap').addEventListener('click', () => { this.firstElementChild.slot = 'nowhere'; });
  }
});
</script></body></html>"""

# Web components rendered on the server: declarative shadow roots in the HTML as served, no script.
# The text backend reads them from the HTML as the browser draws them (the same tree, the same bids);
# of a closed root, only the host's children it puts in a slot are read, in both (the browser's
# cannot be read). A field of a shadow root inside a form of the document is not that form's.
DECLARATIVE = b"""<!DOCTYPE html><html><head><title>Served parts</title></head><body><h1>Served parts</h1>
<part-card><template shadowrootmode="open"><h2><slot name="title">Fallback title</slot></h2>
<label for="q">Amount</label><input id="q" value="2"><slot>Fallback body</slot>
<inner-note><template shadowrootmode="open"><small>Nested <slot></slot></small></template>note</inner-note>
<a href="/more">Shadow link</a></template><span slot="title">Slotted title</span> Light text <b>bold</b></part-card>
<part-card><template shadowrootmode="open"><h2><slot name="title">Second fallback</slot></h2>
<label for="q">Count</label><input id="q"></template><em>Not drawn</em></part-card>
<div><template shadowrootmode="closed"><p>Closed <slot name="s"></slot></p></template>
<p>Not slotted</p><b slot="s">Slotted in a closed root</b></div>
<template><p>Inert template</p></template>
<form action="/find"><input aria-label="Query" name="q" value="light"><x-extra><template shadowrootmode="open">
<input aria-label="Inner" name="inner" value="shadow"></template></x-extra><button>Find</button></form></body></html>"""


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("shadow") / "parts.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_env_shadow_dom")
        for url, body in ((URL, PAGE), (URL + "more", b"<!DOCTYPE html><title>More</title><h1>More</h1>"),
                          (URL + "twins", TWINS), (URL + "covered", COVERED), (URL + "served", DECLARATIVE)):
            arc.add_exchange(Exchange(url=url, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", "text/html; charset=utf-8")], payload=body,
                                      session_id=sid))
    return path


def _bid(text: str, line: str) -> str:
    m = re.search(r"\[(\w+)\] " + re.escape(line), text)
    assert m, (line, text)
    return m.group(1)


def test_the_observation_shows_open_shadow_roots_and_actions_reach_into_them(archive):
    env = WebEnv(EnvConfig(archive))
    try:
        obs, _ = env.reset(options={"task": TASK})
        text = obs["axtree_text"]
        # what the component draws, in the order it is drawn, its blocks apart; nested roots too
        for shown in ("heading 'Slotted title'", "StaticText 'Cobalt'", "StaticText '15 in stock'",
                      "button 'Buy'", "textbox 'Quantity' value='1'", "StaticText 'Fallback note'",
                      "StaticText 'Nested note'"):
            assert shown in text, (shown, text)
        assert text.index("Slotted title") < text.index("Cobalt") < text.index("Nested note") < text.index("More")
        # not drawn: a child no slot takes, a slot's fallback when something is assigned; unreadable:
        # a closed root
        for hidden in ("Unslotted child", "Fallback title", "Inside a closed root"):
            assert hidden not in text, (hidden, text)
        quantity, buy = _bid(text, "textbox 'Quantity'"), _bid(text, "button 'Buy'")
        obs, *_ = env.step(f"fill('{quantity}', '3')")
        assert obs["last_action_error"] == "" and "textbox 'Quantity' value='3'" in obs["axtree_text"]
        obs, *_ = env.step(f"click('{buy}')")
        assert obs["last_action_error"] == "", obs["last_action_error"]
        assert "StaticText 'Bought 3'" in obs["axtree_text"] and "button 'Buy', focused" in obs["axtree_text"]
        # the elements list has them too, with boxes
        element = next(e for e in obs["elements"] if e["bid"] == buy)
        assert element["role"] == "button" and element["visible"] and element["bbox"][2] > 0
        # the same page, the same observation
        again, _ = env.reset(options={"task": TASK})
        assert again["axtree_text"] == env.reset(options={"task": TASK})[0]["axtree_text"]
    finally:
        env.close()


def test_browsergym_s_accessibility_tree_carries_the_shadow_root_s_bids(archive):
    flatten = pytest.importorskip("browsergym.utils.obs").flatten_axtree_to_str

    env = WebEnv(EnvConfig(archive, observation="browsergym"))
    try:
        obs, _ = env.reset(options={"task": TASK})
        buy = _bid(obs["axtree_text"], "button 'Buy'")
        nodes = {n.get("browsergym_id"): n for n in obs["axtree_object"]["nodes"] if n.get("browsergym_id")}
        assert nodes[buy]["role"]["value"] == "button" and nodes[buy]["name"]["value"] == "Buy"
        assert f"[{buy}] button 'Buy'" in flatten(obs["axtree_object"])
        # BrowserGym marks elements in shadow roots too (its frame_mark_elements.js), and a marked
        # element is one Chromium's tree keeps: the component's empty <p id="out"> (the closed
        # root's paragraph is there unmarked: Chromium reads closed roots, a page's script cannot)
        paragraphs = [n for n in obs["axtree_object"]["nodes"] if n.get("role", {}).get("value") == "paragraph"]
        assert sorted(bool(n.get("browsergym_id")) for n in paragraphs) == [False, True], paragraphs
        obs, *_ = env.step(f"click('{buy}')")
        assert obs["last_action_error"] == "" and "Bought 1" in obs["axtree_text"]
    finally:
        env.close()


def test_a_shadow_root_s_ids_are_its_own_and_a_bid_not_drawn_is_gone(archive):
    env = WebEnv(EnvConfig(archive))
    try:
        obs, _ = env.reset(options={"task": {**TASK, "start_url": URL + "twins"}})
        text = obs["axtree_text"]
        colour, size = _bid(text, "combobox 'Colour'"), _bid(text, "combobox 'Size'")
        selects = {e["bid"]: e for e in obs["elements"] if e["role"] == "combobox"}
        assert set(selects) == {colour, size} and selects[colour]["css"] != selects[size]["css"], selects
        assert "#q" not in selects[size]["css"] and selects[size]["css"].startswith(
            "body:nth-of-type(1) > pick-box:nth-of-type(2) > "), selects[size]
        obs, *_ = env.step(f"select_option('{size}', 'two')")
        assert obs["last_action_error"] == "" and f"[{size}] combobox 'Size' value='two'" in obs["axtree_text"]
        assert f"[{colour}] combobox 'Colour' value='one'" in obs["axtree_text"]
        obs, *_ = env.step(f"select_option('{colour}', 'two')")
        swap = [e["bid"] for e in obs["elements"] if e["role"] == "button"][0]
        obs, *_ = env.step(f"click('{swap}')")
        assert obs["last_action_error"] == "" and "First box" not in obs["axtree_text"], obs["axtree_text"]
        # every bid names one element: the light child that left its slot kept none, though the
        # bid it had is now its box's label's (a click there would find two elements, or the one
        # that is not drawn); a click on the label chooses its select
        label = re.search(r"\[(\w+)\] LabelText ''\n\t+StaticText 'Colour'", obs["axtree_text"]).group(1)
        obs, *_ = env.step(f"click('{label}')")
        assert obs["last_action_error"] == "", obs["last_action_error"]
        assert re.search(r"combobox 'Colour' value='two'.*focused", obs["axtree_text"]), obs["axtree_text"]
    finally:
        env.close()


def test_a_click_on_a_covered_element_ends_on_a_page_that_names_a_form_host(archive):
    env = WebEnv(EnvConfig(archive))
    try:
        obs, _ = env.reset(options={"task": {**TASK, "start_url": URL + "covered"}})
        button = _bid(obs["axtree_text"], "button 'Hidden button'")
        obs, *_ = env.step(f"click('{button}')")
        assert obs["url"] == URL + "covered" and "A banner over everything" in obs["axtree_text"]
    finally:
        env.close()


def test_declarative_shadow_roots_read_alike_in_the_text_and_browser_backends(archive):
    task = {"id": "served", "start_url": URL + "served", "instruction": "follow the shadow link"}
    seen = {}
    for backend in ("text", "browser"):
        with WebEnv(EnvConfig(archive, backend=backend)) as env:
            obs, _ = env.reset(options={"task": task})
            text = obs["axtree_text"]
            link = _bid(text, "link 'Shadow link'")
            after, *_ = env.step(f"click('{link}')")
            env.reset(options={"task": task})
            find = _bid(text, "button 'Find'")
            sent, *_ = env.step(f"click('{find}')")
            seen[backend] = (text, after["url"], sent["url"])
    text, url, sent = seen["text"]
    for shown in ("heading 'Slotted title'", "textbox 'Amount' value='2'", "StaticText 'Light text'",
                  "StaticText 'Nested'", "heading 'Second fallback'", "textbox 'Count'", "StaticText 'Slotted in a closed root'"):
        assert shown in text, (shown, text)
    for hidden in ("Fallback title", "Fallback body", "Not drawn", "Closed", "Not slotted", "Inert template"):
        assert hidden not in text, (hidden, text)
    assert url == URL + "more" and sent == URL + "find?q=light"
    assert seen["text"] == seen["browser"]
