"""Key nodes with WebCanvas's class-based selectors, decided on stored DOM snapshots: snapshots
made by the real observation tree (both backends on the demo archive, and hand-written pages),
evaluated with lxml + cssselect; and every selector of the Mind2Web-Live key-node file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trajectory_builder import step, trajectory, write_run

from webfreeze.eval.keynodes import evaluate_key_nodes, run_dom_loader, undecidable
from webfreeze.eval.report import build_report
from webfreeze.simulator.axtree import build_tree
from webfreeze.simulator.trajectory import dom_path, write_trajectory

MIND2WEB_LIVE = Path(__file__).resolve().parents[1] / "data" / "mind2web_live_test_keynodes.json"  # (tests/data/README.md)
DEMO = Path(__file__).resolve().parents[2] / "webfreeze" / "demo" / "data"

# An IMDb-like rating widget, written the way WebCanvas's selectors name it (classes, nth-child).
PAGE = """<!DOCTYPE html><html><head><title>t</title><script>var x = 1;</script></head><body>
<div class="sc-3a4309f8-0 bjXIAP sc-b7c53eda-1 iIQkEw">
  <div class="sc-3a4309f8-1 dggvUg">
    <div><button class="ipc-btn"><span class="ipc-btn__text">IMDb rating</span></button></div>
    <div>
      <button class="ipc-btn"><span class="ipc-btn__text">Your rating</span></button>
      <button class="ipc-btn rate"><span class="ipc-btn__text"><span class="sc-acdbf0f3-3 eWQwwe">Rate</span></span></button>
    </div>
  </div>
</div>
<ul class="unstyled"><li><h3><a class="item-details-link" href="/job/1">Job 1</a></h3></li>
<li><h3><a class="item-details-link" href="/job/2">Job 2</a></h3></li></ul>
<nav class="menu"><a href="/x">x</a></nav>
</body></html>"""

RATE = ".sc-3a4309f8-0.bjXIAP.sc-b7c53eda-1.iIQkEw >.sc-3a4309f8-1.dggvUg >div:nth-child(2)>button:nth-child(2)" \
       ">.ipc-btn__text >.sc-acdbf0f3-3.eWQwwe "


def node(ref, method="selector", netloc="imdb"):
    return {"match_function_name": "element_path_exactly_match", "method": method,
            "content": {"reference_answer": ref, "netloc": netloc, "url": ""}}


def click(tree, el_text: str, tag: str, *, url="https://www.imdb.com/title/tt0103064/"):
    """A step clicking the first ``tag`` element whose text is ``el_text``, with its DOM snapshot
    (as the environment records it)."""
    target = next(e for e in tree.descriptions if e["tag"] == tag and (e["name"] == el_text or e["value"] == el_text))
    s = step(f"click('{target['bid']}')", "click", url=url, role=target["role"], name=target["name"],
             css=target["css"], xpath=target["xpath"])
    s["target"] = {**s["target"], "bid": target["bid"], "tag": tag, **tree.element_record(target["bid"])}
    s["dom"] = dom_path(tree.snapshot)
    return s


def by_bid(tree, bid):
    return {**tree.get(bid), **tree.element_record(bid)}


def scored(n, steps, doms):
    return evaluate_key_nodes([n], trajectory("t", steps), dom_loader=doms.get)["nodes"][0]


@pytest.fixture
def page():
    tree = build_tree(PAGE, "https://www.imdb.com/title/tt0103064/")
    return tree, {dom_path(tree.snapshot): tree.snapshot}


def _step_on(tree, bid, url="https://www.imdb.com/title/tt0103064/"):
    t = by_bid(tree, bid)
    s = step(f"click('{bid}')", "click", url=url, role=t["role"], name=t["name"], css=t["css"], xpath=t["xpath"])
    s["target"] = {**s["target"], "bid": bid, "tag": t["tag"], **tree.element_record(bid)}
    s["dom"] = dom_path(tree.snapshot)
    return s


def _bid_of(tree, predicate):
    return next(b for b, el in tree._b.by_bid.items() if predicate(el))


def test_class_selector_matches_the_clicked_element_on_the_snapshot(page):
    tree, doms = page
    inner = _bid_of(tree, lambda el: "eWQwwe" in (el.get("class") or ""))
    r = scored(node(RATE), [_step_on(tree, inner)], doms)
    # our own css for the element is an nth-of-type path: the text rule could never match it
    assert r["matched"] is True and r["decided"] == {"dom": 1} and r["undecided"] is None


def test_ancestor_allowance_for_span_references(page):
    tree, doms = page
    button = _bid_of(tree, lambda el: el.tag == "button" and "rate" in (el.get("class") or "").split())
    wrapper = _bid_of(tree, lambda el: el.tag == "div" and el.find("button[@class='ipc-btn rate']") is not None)
    # the reference is a span: its parent span (1 up) and the button (2 up) count, and the div (3 up)
    assert scored(node(RATE), [_step_on(tree, button)], doms)["matched"] is True
    assert scored(node(RATE), [_step_on(tree, wrapper)], doms)["matched"] is True
    outer = _bid_of(tree, lambda el: "dggvUg" in (el.get("class") or ""))          # 4 levels up: too far
    assert scored(node(RATE), [_step_on(tree, outer)], doms)["matched"] is False
    # the reference is a link (not a span/div/li/...): no climbing, its h3 does not count
    link_ref = ".unstyled >li:nth-child(1)>h3:nth-child(1)>.item-details-link "
    h3 = _bid_of(tree, lambda el: el.tag == "h3")
    a1 = _bid_of(tree, lambda el: el.get("href") == "/job/1")
    assert scored(node(link_ref, netloc="imdb"), [_step_on(tree, a1)], doms)["matched"] is True
    assert scored(node(link_ref, netloc="imdb"), [_step_on(tree, h3)], doms)["matched"] is False


def test_no_match_and_first_match_only(page):
    tree, doms = page
    other = _bid_of(tree, lambda el: el.tag == "button" and (el.get("class") or "") == "ipc-btn"
                    and "Your" in "".join(el.itertext()))
    r = scored(node(RATE), [_step_on(tree, other)], doms)
    assert r["matched"] is False and r["decided"] == {"dom": 1}
    # ".item-details-link" matches both links; WebCanvas takes the first (select_one)
    a2 = _bid_of(tree, lambda el: el.get("href") == "/job/2")
    a1 = _bid_of(tree, lambda el: el.get("href") == "/job/1")
    assert scored(node(".item-details-link "), [_step_on(tree, a2)], doms)["matched"] is False
    assert scored(node(".item-details-link "), [_step_on(tree, a1)], doms)["matched"] is True
    # the wrong site: 0 before any DOM is read
    elsewhere = _step_on(tree, a1, url="https://www.rottentomatoes.com/")
    assert scored(node(".item-details-link "), [elsewhere], doms)["matched"] is False


def test_xpath_references_on_the_snapshot(page):
    tree, doms = page
    a2 = _bid_of(tree, lambda el: el.get("href") == "/job/2")
    r = scored(node("//ul[@class='unstyled']/li[2]//a", method="xpath"), [_step_on(tree, a2)], doms)
    assert r["matched"] is True and r["decided"] == {"dom": 1}


def test_undecidable_selectors_say_why(page):
    tree, doms = page
    link = _bid_of(tree, lambda el: el.get("href") == "/x")
    r = scored(node(".menu a:hover"), [_step_on(tree, link)], doms)
    assert r["matched"] is False and r["decided"] == {"undecidable": 1}
    assert ":hover depends on the live page" in r["undecided"]
    assert "pseudo-element" in undecidable(".menu a::before")
    assert "not evaluated by cssselect" in undecidable("button:has-text('Rate')")
    assert "Playwright" in undecidable("css=.menu >> text=x")
    assert "cannot parse" in undecidable(".a > > b") and "cannot parse" in undecidable("div[")
    assert undecidable(RATE) is None and undecidable("#radius >option:nth-child(3)") is None
    assert undecidable("div:has(> .rate):not(.x) input:checked") is None          # CSS that cssselect evaluates
    # a snapshot that is not there: the text rule decides, and the node says the DOM was missing
    s = _step_on(tree, link)
    s["dom"] = "dom/" + "0" * 64 + ".html.zst"
    r = scored(node(".menu >a"), [s], doms)
    assert r["matched"] is False and r["decided"] == {"undecidable": 1} and "not found" in r["undecided"]
    # a step without a snapshot (older trajectories): the selector text, as before
    s.pop("dom")
    r = scored(node(s["target"]["css"]), [s], doms)
    assert r["matched"] is True and r["decided"] == {"selector_text": 1}


def test_report_reads_snapshots_from_the_run_folder(tmp_path, page):
    tree, doms = page
    inner = _bid_of(tree, lambda el: "eWQwwe" in (el.get("class") or ""))
    traj = trajectory("imdb-1", [_step_on(tree, inner)], end="answer", answer="done")
    task = {"id": "imdb-1", "category": "m2w", "instruction": "Rate the film", "start_url": "https://www.imdb.com/",
            "ground_truth": {"key_nodes": [node(RATE)]}}
    run = write_run(tmp_path / "run", [task], [])
    write_trajectory(traj, run, dict(doms))
    (path,) = doms
    assert (run / path).is_file() and run_dom_loader(run)(path) == tree.snapshot
    report, _ = build_report(run)
    kn = report["tasks"]["imdb-1"]["results"]["key_nodes"]
    assert kn["success"] is True and kn["nodes"][0]["decided"] == {"dom": 1}
    # a damaged snapshot is undecided, never a crash
    (run / path).write_bytes(b"not zstd")
    report, _ = build_report(run)
    node0 = report["tasks"]["imdb-1"]["results"]["key_nodes"]["nodes"][0]
    assert node0["matched"] is False and "unreadable" in node0["undecided"]


def test_snapshot_carries_bids_and_form_state_and_is_stable():
    html = "<html><body><form><input name=q><input type=checkbox name=c><select name=s><option>a</option>" \
           "<option>b</option></select><textarea name=t>old</textarea></form></body></html>"
    plain = build_tree(html, "http://x.test/")
    # bids: html 1, body 2, form 3, input 4, checkbox 5, select 6, options 7 and 8, textarea 9
    state = {"4": "shoes", "5": True, "6": "b", "9": "new"}
    tree = build_tree(html, "http://x.test/", state=state)
    snap = tree.snapshot.decode()
    assert '<input name="q" data-wf-bid="4" value="shoes">' in snap
    assert '<input type="checkbox" name="c" data-wf-bid="5" checked>' in snap
    assert '<option data-wf-bid="8" selected>b</option>' in snap and ">new</textarea>" in snap
    assert build_tree(html, "http://x.test/", state=state).snapshot == tree.snapshot      # same bytes
    assert plain.snapshot != tree.snapshot
    rec = tree.element_record("8")
    assert rec["nth_child"] == 2 and rec["nth_of_type"] == 2 and [a["tag"] for a in rec["ancestors"]] == \
        ["html", "body", "form", "select"]


# ------------------------------------------------------------------------------ both backends, for real
@pytest.fixture(scope="module")
def demo_env_steps():
    """A click on the demo archive's scholar home page in each backend (the browser when Chromium
    is here): the recorded step and its DOM snapshot."""
    from webfreeze.simulator.env import EnvConfig, WebEnv

    out = {}
    for backend in ("text", "browser"):
        if backend == "browser":
            from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

            try:
                chromium_path()
            except BrowserUnavailable:
                continue
        env = WebEnv(EnvConfig(archive=DEMO / "demo.wfz", backend=backend))
        try:
            obs, _ = env.reset(options={"task": {"id": "t", "start_url": "http://scholar.test/",
                                                 "instruction": "open Machine Learning"}})
            link = next(e for e in obs["elements"] if e["role"] == "link" and e["name"] == "Machine Learning")
            env.step(f"click('{link['bid']}')")
            traj = env.trajectory(stopped=True)
            out[backend] = (traj, dict(env.recorder.doms))
        finally:
            env.close()
    return out


def test_both_backends_record_position_and_snapshot(demo_env_steps, tmp_path):
    fields = {}
    for backend, (traj, doms) in demo_env_steps.items():
        s = traj["steps"][0]
        assert s["dom"] in doms and s["dom"] == dom_path(doms[s["dom"]])
        t = s["target"]
        assert {"id", "classes", "nth_child", "nth_of_type", "ancestors"} <= set(t)
        assert t["ancestors"][0]["tag"] == "html" and t["tag"] == "a"
        fields[backend] = {k: t[k] for k in ("tag", "id", "classes", "nth_child", "nth_of_type")}
        fields[backend]["path"] = [(a["tag"], a["id"], a["classes"]) for a in t["ancestors"]]
        # the clicked element is found in its snapshot by its bid, and a selector naming it matches
        sel = " > ".join([*(a["tag"] for a in t["ancestors"][1:]), "a"]) + f"[href='{t['href'].split('scholar.test')[1]}']"
        n = node(sel, netloc="scholar")
        r = evaluate_key_nodes([n], traj, dom_loader=doms.get)["nodes"][0]
        assert r["matched"] is True and r["decided"] == {"dom": 1}, (backend, r)
        write_trajectory(traj, tmp_path / backend, doms)
        assert run_dom_loader(tmp_path / backend)(s["dom"]) == doms[s["dom"]]
    if len(fields) == 2:  # the same page gives the same position in either backend
        assert fields["text"] == fields["browser"]


def test_snapshots_can_be_turned_off():
    from webfreeze.simulator.env import EnvConfig, WebEnv

    env = WebEnv(EnvConfig(archive=DEMO / "demo.wfz", backend="text", dom_snapshots=False))
    try:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": "http://scholar.test/", "instruction": "x"}})
        link = next(e for e in obs["elements"] if e["role"] == "link" and e["name"] == "Machine Learning")
        env.step(f"click('{link['bid']}')")
        s = env.trajectory(stopped=True)["steps"][0]
        assert "dom" not in s and "ancestors" not in s["target"] and env.recorder.doms == {}
    finally:
        env.close()


# ------------------------------------------------------------------------------ Mind2Web-Live
def test_every_mind2web_live_selector_is_decidable_on_a_snapshot():
    tasks = json.loads(MIND2WEB_LIVE.read_text())
    selectors = []
    for t in tasks:
        for n in t["evaluation"]:
            c = n["content"]
            if n["match_function_name"] == "element_path_exactly_match":
                selectors.append((n.get("method") or "selector", c["reference_answer"]))
            elif c.get("path"):
                selectors.append(("selector", c["path"]))
    reasons = {s: undecidable(s, m) for m, s in selectors}
    decidable = [s for s, why in reasons.items() if why is None]
    # 90 element-path nodes and 27 value nodes with a path: 117 selectors (115 distinct), all CSS,
    # all readable by cssselect and free of live-state pseudo-classes
    assert len(selectors) == 117 and len(reasons) == 115
    assert len(decidable) == 115, {s: w for s, w in reasons.items() if w}
    # and each evaluates on a page without error (matching nothing there)
    empty = build_tree("<html><body><p>x</p></body></html>", "https://www.imdb.com/")
    doms = {dom_path(empty.snapshot): empty.snapshot}
    s = _step_on(empty, "3")
    for sel in decidable:
        r = scored(node(sel, netloc="imdb"), [s], doms)
        assert r["decided"] == {"dom": 1} and r["matched"] is False, sel
