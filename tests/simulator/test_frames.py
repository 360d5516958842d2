"""Frames: the environment shows the documents of a page's frames under their frame elements, with
BrowserGym's bids (a frame element's bid, letters, is the prefix of the bids in its document), and
its actions reach into them; the text backend shows the frames whose documents the replay has."""

from __future__ import annotations

import json
import re

import pytest

from webfreeze.archives import Exchange, new_archive_atomically
from webfreeze.simulator.axtree import build_tree, frame_letter, frame_path
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, WebEnv

SITE = "http://frames.test"
OTHER = "http://embed.test"
HOME = """<!DOCTYPE html><html><head><title>Home</title>
<style>body { margin: 0; } iframe { display: block; width: 600px; height: 300px; border: 2px solid #000; }</style>
</head><body>
<h1>Frames</h1>
<iframe id="same" src="/form.html" title="Same"></iframe>
<p>between <a href="/b">to b</a></p>
<iframe id="cross" src="http://embed.test/embed.html"></iframe>
<iframe id="written"></iframe>
<iframe id="sandboxed" sandbox="" srcdoc="<p>sandboxed text</p>"></iframe>
<script>
const d = document.getElementById('written').contentDocument;
d.open(); d.write('<!DOCTYPE html><title>Editor</title><textarea id=ed>draft</textarea>'); d.close();
</script>
</body></html>"""
FORM = """<!DOCTYPE html><html><head><title>Form</title></head><body>
<form action="/sent" method="get"><label>Name <input name="name" id="name"></label>
<select name="size" aria-label="Size"><option>small</option><option>large</option></select>
<label><input type="checkbox" name="gift"> Gift</label>
<button type="submit">Send</button></form>
<iframe src="/inner.html" style="width: 300px; height: 100px"></iframe>
</body></html>"""
# TiddlyWiki's way (tests/recorder/test_session.py WRITTEN_FRAME_PAGE): the editor is a textarea in
# an iframe the page's script writes with document.open()/write().
EDITOR = """<!doctype html><html><head><title>editor</title></head><body><div id=box></div>
<button id=done onclick="document.getElementById('out').textContent =
  'saved: ' + frames[0].document.querySelector('textarea').value">Done</button><p id=out></p>
<script>
const frame = document.createElement('iframe');
document.getElementById('box').appendChild(frame);
const doc = frame.contentWindow.document;
doc.open(); doc.write('<!DOCTYPE html><html><body></body></html>'); doc.close();
const area = doc.createElement('textarea'); area.setAttribute('aria-label', 'Tiddler text');
doc.body.appendChild(area);
</script></body></html>"""
PAGES = {
    SITE + "/": HOME,
    SITE + "/form.html": FORM,
    SITE + "/inner.html": "<!DOCTYPE html><title>Inner</title><p>deep <a href='/b'>inner link</a></p>",
    SITE + "/sent?name=Ada&size=large&gift=on": "<!DOCTYPE html><title>Sent</title><p>thanks Ada</p>",
    SITE + "/b": "<!DOCTYPE html><title>B</title><h1>B</h1>",
    SITE + "/editor": EDITOR,
    SITE + "/gone": "<!DOCTYPE html><title>Gone</title><body><iframe src='/nothing.html'></iframe></body>",
    OTHER + "/embed.html": ("<!DOCTYPE html><title>Embed</title><body>"
                            "<button onclick=\"this.textContent='pressed'\">Press</button></body>"),
}
# Frames the replay does not serve: a srcdoc and an about:blank frame the page's script writes, each
# with a script that reads the clock and the generator and sets a timer.
UNSERVED_SCRIPT = ("<p id=r></p><p id=t>waiting</p><script>document.getElementById('r').textContent = "
                   "'rand ' + Math.random() + ' at ' + new Date().toISOString(); setTimeout(() => "
                   "{ document.getElementById('t').textContent = 'later at ' + Date.now(); }, 300);</script>")
PAGES[SITE + "/unserved"] = (
    "<!DOCTYPE html><title>Unserved</title><body><iframe srcdoc=\"" + UNSERVED_SCRIPT + "\"></iframe><div id=box></div>"
    "<script>const f = document.createElement('iframe'); document.getElementById('box').appendChild(f);"
    "f.contentWindow.document.open(); f.contentWindow.document.write(" + json.dumps(UNSERVED_SCRIPT).replace("</", "<\\/")
    + "); f.contentWindow.document.close();</script></body>")
TASK = {"id": "frames", "start_url": SITE + "/", "instruction": "use the frames"}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("frames") / "frames.wfz"
    with new_archive_atomically(path) as arc:
        sid = arc.new_session("test", source="test_frames")
        for url, html in PAGES.items():
            arc.add_exchange(Exchange(url=url, captured_at="2026-01-01T00:00:00Z", status=200, reason="OK",
                                      resp_headers=[("Content-Type", "text/html; charset=utf-8")],
                                      payload=html.encode(), session_id=sid))
    return path


def _browser():
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))


def _bid(obs_or_tree, role: str, name: str) -> str:
    text = obs_or_tree if isinstance(obs_or_tree, str) else obs_or_tree["axtree_text"]
    m = re.search(r"^\s*\[(\w+)\] " + re.escape(role) + " " + re.escape(repr(name)), text, re.M)
    assert m, (role, name, text)
    return m.group(1)


def _episode(env, backend: str) -> tuple[list, str]:
    """Reset, then act in the frames; every observation's text and elements, and the trajectory."""
    seen = []
    obs, _ = env.reset(options={"task": TASK})
    seen.append((obs["axtree_text"], obs["elements"]))
    steps = [f"click('{_bid(obs, 'link', 'inner link')}')", f"fill('{_bid(obs, 'textbox', 'Name')}', 'Ada')",
             f"select_option('{_bid(obs, 'combobox', 'Size')}', 'large')", f"click('{_bid(obs, 'checkbox', 'Gift')}')",
             f"click('{_bid(obs, 'button', 'Send')}')"]
    if backend == "browser":
        steps += [f"click('{_bid(obs, 'button', 'Press')}')", f"fill('{_bid(obs, 'textbox', '')}', 'edited')",
                  f"focus('{_bid(obs, 'textbox', '')}')"]
    for step in steps:
        obs, *_ = env.step(step)
        assert obs["last_action_error"] == "", (step, obs["last_action_error"])
        seen.append((obs["axtree_text"], obs["elements"]))
    return seen, obs


def _in_frames_alike(seen: list) -> None:
    """What both backends show after the first steps: the nested frame followed its link, the form
    in the frame was filled and submitted there, the page stayed."""
    assert re.search(r"^\t\t\t\[aa\] Iframe ''\n\t\t\t\tRootWebArea 'B',( focused,)? "
                     r"url='http://frames.test/b'\n\t\t\t\t\t\[aa\d+\] heading 'B'", seen[1][0], re.M)
    assert "value='Ada'" in seen[2][0] and re.search(r"combobox 'Size'.*value='large'", seen[3][0])
    assert re.search(r"checkbox 'Gift',( focused,)? checked='true'", seen[4][0])
    assert "thanks Ada" in seen[5][0] and "RootWebArea 'Sent'" in seen[5][0] and "RootWebArea 'Home'" in seen[5][0]


def test_frame_ids_are_browsergyms():
    """Frame elements are lettered as BrowserGym's IFrameIdGenerator letters them, and a bid's frame
    path is read as its get_elem_by_bid reads it."""
    assert [frame_letter(n) for n in (0, 25, 26, 27, 51, 52, 26 + 26 * 26)] == ["a", "z", "aA", "aB", "aZ", "bA", "aAA"]
    assert frame_path("12") == [] and frame_path("a") == ["a"] and frame_path("a12") == ["a"]
    assert frame_path("aa3") == ["a", "aa"] and frame_path("bA7") == ["bA"] and frame_path("bAc2") == ["bA", "bAc"]


def test_a_page_without_frames_keeps_its_numbers_and_frames_get_letters():
    plain = build_tree("<h1>T</h1><p>x <a href='/y'>y</a></p>", "http://s.test/")
    assert re.findall(r"\[(\w+)\]", plain.axtree_text) == ["3", "4", "5"]
    framed = build_tree("<h1>T</h1><iframe src='/f'></iframe><p>x <a href='/y'>y</a></p>", "http://s.test/",
                        frames={"a": {"html": "<title>F</title><a href='z'>in</a>", "url": "http://s.test/d/f"}})
    assert re.findall(r"\[(\w+)\]", framed.axtree_text) == ["3", "a", "a3", "4", "5"]
    assert framed["a3"]["href"] == "http://s.test/d/z"  # (a frame's links resolve against its document)
    assert "RootWebArea 'F', url='http://s.test/d/f'" in framed.axtree_text


def test_the_browser_shows_every_frame_and_acts_in_them(archive, tmp_path, monkeypatch):
    _browser()
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    env = WebEnv(EnvConfig(archive, backend="browser"))
    try:
        seen, last = _episode(env, "browser")
        again, _ = _episode(env, "browser")
    finally:
        env.close()
    text, elements = seen[0]
    # same-origin, nested, cross-origin and script-written frames, under their frame elements
    assert "\t[a] Iframe 'Same'\n\t\tRootWebArea 'Form', url='http://frames.test/form.html'\n" in text
    assert re.search(r"^\t\t\t\[aa\] Iframe ''\n\t\t\t\tRootWebArea 'Inner'", text, re.M)
    assert _bid(text, "link", "inner link") == "aa4"
    assert _bid(text, "button", "Press").startswith("b") and "url='http://embed.test/embed.html'" in text
    assert _bid(text, "textbox", "").startswith("c") and "value='draft'" in text
    assert "sandboxed text" not in text  # (its scripts blocked: left out, as BrowserGym does)
    # the page's own elements keep their numbers; boxes in page coordinates
    assert _bid(text, "link", "to b") == "5"
    box = {e["bid"]: e for e in elements}
    frame, field = box["a"], box[_bid(text, "textbox", "Name")]
    assert field["visible"] and frame["bbox"][0] < field["bbox"][0] < frame["bbox"][0] + frame["bbox"][2]
    assert frame["bbox"][1] < field["bbox"][1] < frame["bbox"][1] + frame["bbox"][3]
    # the fill and the submission happened in the frame; the cross-origin button was pressed; the
    # script-written editor was typed into
    _in_frames_alike(seen)
    assert "button 'pressed'" in seen[6][0]
    assert "value='edited'" in seen[7][0]
    # the focus is inside the frame
    assert re.search(r"^\t\t\t\[c\d+\] textbox '' value='edited', focused", seen[8][0], re.M)
    assert "RootWebArea 'Home', focused" not in seen[8][0]  # (the frame's document has the focus, as
    assert re.search(r"^\t\tRootWebArea '[^']*', focused, url=", seen[8][0], re.M), seen[8][0]  # Chromium's tree says)
    assert again == seen  # two episodes, the same observations


def test_the_text_backend_shows_the_frames_the_replay_has(archive):
    env = WebEnv(EnvConfig(archive, backend="text"))
    try:
        seen, last = _episode(env, "text")
        again, _ = _episode(env, "text")
    finally:
        env.close()
    text = seen[0][0]
    assert "\t[a] Iframe 'Same'\n\t\tRootWebArea 'Form', url='http://frames.test/form.html'\n" in text
    assert _bid(text, "link", "inner link") == "aa4" and _bid(text, "button", "Press") == "b3"
    # what a script wrote is not there, and the frame says so
    assert re.search(r"^\t\[c\] Iframe ''\n\t\tStaticText \"frame not shown: its document is written by the page's "
                     r"scripts", text, re.M)
    assert "sandboxed text" not in text
    _in_frames_alike(seen)
    assert again == seen


def test_both_backends_give_a_static_frame_the_same_bids(archive, tmp_path, monkeypatch):
    _browser()
    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    bids = {}
    for backend in ("text", "browser"):
        env = WebEnv(EnvConfig(archive, backend=backend))
        try:
            obs, _ = env.reset(options={"task": TASK})
        finally:
            env.close()
        bids[backend] = re.findall(r"^(\t*)\[(\w+)\] (\w+ '[^']*')", obs["axtree_text"], re.M)
    # all but what the script wrote into frame c, which only the browser runs
    written = re.compile(r"c\d+")
    assert [b for b in bids["browser"] if not written.fullmatch(b[1])] == bids["text"]
    assert any(written.fullmatch(b[1]) for b in bids["browser"]) and ("\t", "b", "Iframe ''") in bids["text"]


BGYM_SCRIPT = r"""
import re
from browsergym.core.action.highlevel import HighLevelActionSet

actions = HighLevelActionSet(subsets=["bid"], multiaction=False)
# Every case here succeeds in BrowserGym; its actions give Playwright 500 ms, which a loaded machine
# can exceed (a click into the frame timed out beside a busy suite): 10 s here, so that the verdict
# does not depend on the machine's load.
def patient(action):
    return actions.to_python_code(action).replace("timeout=500)", "timeout=10_000)")
env = BrowserEnv(task_entrypoint=OpenEndedTask, task_kwargs={"start_url": cfg["url"], "goal": "look"},
                 pre_observation_delay=0.0, viewport={"width": 1920, "height": 1080}, locale="en-US",
                 timezone_id="UTC", pw_chromium_kwargs={"proxy": cfg["proxy"]}, action_mapping=patient,
                 pw_context_kwargs={"ignore_https_errors": True, "service_workers": "block"})
settle(env)
out = []
try:
    obs, _ = env.reset(seed=0)
    out.append({"tree": flatten_axtree_to_str(obs["axtree_object"]), "error": "", "focused": obs["focused_element_bid"]})
    for case in cfg["cases"]:
        tree = out[-1]["tree"]
        def bid(m):
            found = re.search(r"^\s*\[(\w+)\] " + re.escape(m.group(1)) + " " + re.escape(repr(m.group(2))), tree, re.M)
            return found.group(1) if found else "9999"
        obs, *_ = env.step(re.sub(r"\{(\w+):([^}]*)\}", bid, case))
        out.append({"tree": flatten_axtree_to_str(obs["axtree_object"]), "error": obs["last_action_error"],
                    "focused": obs["focused_element_bid"]})
finally:
    env.close()
print(json.dumps(out))
"""
BGYM_CASES = ["click('{link:inner link}')", "fill('{textbox:Name}', 'Ada')",
              "select_option('{combobox:Size}', 'large')", "click('{checkbox:Gift}')",
              "click('{button:Send}')", "click('{button:Press}')"]


def _numbers_out(tree: str) -> str:
    """The tree with each element's number (each side numbers a document's elements its own way) out
    of its bid, the frame letters kept: ``[a12]`` is ``[a#]``, ``[7]`` is ``[#]``, ``[aa]`` stays."""
    return re.sub(r"\[([a-z][a-zA-Z]*)?\d+\]", r"[\1#]", tree)


@pytest.mark.slow
def test_browsergym_observation_of_frames_is_browsergyms(archive, tmp_path, monkeypatch):
    """BrowserGym's own BrowserEnv and our observation="browsergym" on the page with frames, and after
    actions in them: the same flattened accessibility tree (frame elements' bids and the prefixes of
    the bids inside them alike), element numbers aside."""
    _browser()
    import json
    import subprocess
    import sys

    pytest.importorskip("browsergym.core.env", reason="browsergym-core is not installed")
    from browserenv_preamble import PREAMBLE
    from browsergym.utils.obs import flatten_axtree_to_str

    from webfreeze.replayer.server import ReplayServer
    from webfreeze.simulator.browser import CHROMIUM_FLAGS

    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    server = ReplayServer(archive, mode="proxy", inject=True, timers=False, seed=0).start()
    try:
        cfg = {"chromium": chromium_path(shell=True), "flags": CHROMIUM_FLAGS, "url": SITE + "/",
               "cases": BGYM_CASES, "proxy": {"server": server.url, "bypass": "<-loopback>"}}
        done = subprocess.run([sys.executable, "-c", PREAMBLE + BGYM_SCRIPT, json.dumps(cfg)], capture_output=True,
                              text=True, timeout=600)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    env = WebEnv(EnvConfig(archive, backend="browser", observation="browsergym"))
    ours = []
    try:
        obs, _ = env.reset(options={"task": TASK})
        ours.append({"tree": flatten_axtree_to_str(obs["axtree_object"]), "error": "",
                     "focused": obs["focused_element_bid"]})
        # every element in a frame has its bid in the DOM snapshot and its extra properties
        extra = obs["extra_element_properties"]
        assert extra["aa4"]["bbox"] is not None and extra["aa4"]["visibility"] > 0 and extra["aa4"]["clickable"]
        for case in BGYM_CASES:
            tree = ours[-1]["tree"]
            action = re.sub(r"\{(\w+):([^}]*)\}", lambda m: _bid(tree, m.group(1), m.group(2)), case)
            obs, *_ = env.step(action)
            ours.append({"tree": flatten_axtree_to_str(obs["axtree_object"]), "error": obs["last_action_error"],
                         "focused": obs["focused_element_bid"]})
        again, _ = env.reset(options={"task": TASK})  # (the same page again, the same observation)
        assert flatten_axtree_to_str(again["axtree_object"]) == ours[0]["tree"]
        assert json.dumps(again["extra_element_properties"], sort_keys=True) == json.dumps(extra, sort_keys=True)
    finally:
        env.close()
    assert "\t[a] Iframe 'Same'" in ours[0]["tree"] and "[aa#] link 'inner link'" in _numbers_out(ours[0]["tree"])
    for mine, bgym in zip(ours, theirs, strict=True):
        assert bool(mine["error"]) == bool(bgym["error"]), (mine["error"], bgym["error"])
        assert _numbers_out(mine["tree"]) == _numbers_out(bgym["tree"])
        # the focus in the same frame (a frame's body after its link was followed: numbers differ)
        assert frame_path(mine["focused"] or "1") == frame_path(bgym["focused"] or "1"), (mine, bgym)


def test_the_text_backend_says_which_frame_the_replay_lacks(archive):
    env = WebEnv(EnvConfig(archive, backend="text"))
    try:
        obs, _ = env.reset(options={"task": {**TASK, "start_url": SITE + "/gone"}})
        trajectory = env.trajectory(stopped=True)
    finally:
        env.close()
    assert obs["axtree_text"].endswith(
        "\t[a] Iframe ''\n\t\tStaticText 'frame not shown: the archive has no GET http://frames.test/nothing.html'")
    assert obs["last_action_error"] == ""  # (the page itself loaded)
    # the frame's miss is in the episode's provenance, a document that is not the main one
    answers = trajectory["replay"]["start"]["answers"]
    assert [(a["url"], a["level"], a["main"]) for a in answers] == [
        (SITE + "/gone", "exact", True), (SITE + "/nothing.html", "miss", False)]


def test_a_session_recorded_in_a_frame_replays(archive, tmp_path, monkeypatch):
    """The reference agent replays a person's session that typed into the editor a script wrote into
    an iframe (what the recorder logs since it listens in such frames): the target is found in the
    frame, the typing reaches it, and the answer's evidence is shown. Before frames were entered the
    target was not in the observation and the task expired (report_infeasible)."""
    _browser()
    from webfreeze.agents.base import TaskView
    from webfreeze.agents.reference import ReferenceAgent

    monkeypatch.setenv("WEBFREEZE_HOME", str(tmp_path / "home"))
    area = {"role": "textbox", "name": "Tiddler text", "css": "body:nth-of-type(1) > textarea:nth-of-type(1)",
            "tag": "textarea", "text": ""}
    done = {"role": "button", "name": "Done", "css": "#done", "tag": "button", "text": "Done"}
    steps = [{"action": "navigate", "target": None, "value": None, "url": SITE + "/editor", "cause": "goto"},
             {"action": "type", "target": area, "value": "Purple", "keys": True},
             {"action": "click", "target": done, "value": None},
             {"action": "answer", "target": None, "value": {"text": "Purple", "evidence": ["saved: Purple"]}}]
    for i, step in enumerate(steps):
        step["step"] = i
    reference = {"version": 1, "kind": "reference_trajectory", "start_url": SITE + "/editor", "steps": steps}
    agent = ReferenceAgent()
    agent.reset(TaskView(id="editor", instruction="save Purple", reference=reference))
    env = WebEnv(EnvConfig(archive, backend="browser"))
    actions = []
    try:
        obs, _ = env.reset(options={"task": {**TASK, "start_url": SITE + "/editor"}})
        while not actions or not actions[-1].startswith(("send_msg_to_user", "report_infeasible")):
            actions.append(agent.act(obs)["action"])
            obs, *_ = env.step(actions[-1])
            assert obs["last_action_error"] == "", (actions, obs["last_action_error"])
            assert len(actions) < 10
    finally:
        env.close()
    assert actions == ["fill('a3', 'Purple', True)", "click('4')", "send_msg_to_user('Purple')"]


def test_frames_the_replay_does_not_serve_run_on_the_pages_runtime(archive):
    """A srcdoc frame's scripts and those of a frame its page writes ran on the real clock, an
    unseeded generator and real timers (no runtime is injected into a document the replay does not
    serve): two resets showed two numbers and today's date. They take their page's runtime now:
    the capture's clock, the page's generator, and the page's pumped timers."""
    _browser()
    with WebEnv(EnvConfig(archive=archive, backend="browser")) as env:
        texts = []
        for _ in range(2):
            obs, _ = env.reset(options={"task": {**TASK, "start_url": SITE + "/unserved"}})
            texts.append([line.strip() for line in obs["axtree_text"].splitlines() if "rand" in line or "later" in line
                          or "waiting" in line])
    assert texts[0] == texts[1], texts
    assert len(texts[0]) == 4 and all("2026-01-01T00:00:00" in t for t in texts[0] if "rand" in t), texts
    assert sum("later at 17672256003" in t for t in texts[0]) == 2, texts  # (the pump ran the 300 ms timers)

