"""Each BrowserGym action (and its failure cases) played in BrowserGym's own ``BrowserEnv``
(browsergym-core from PyPI, its high-level action set with every subset, one action a step) and in
our browser backend, on the same replayed page of the demo archive: the resulting page (BrowserGym's
flattened accessibility tree but for the ids, the URL, the focused element) and whether an error was
raised are the same. Elements are named by role and name, since each side numbers them its own way.

Two differences are ours on purpose and checked as such (docs/agents.md): a navigation whose page
answers 4xx or 5xx (the replay's miss among them) and a ``go_back``/``go_forward`` with nowhere to
go are reported in ``last_action_error``; BrowserEnv says nothing of either.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from browserenv_preamble import PREAMBLE

import webfreeze as wf
from webfreeze.demo import demo_paths
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

pytest.importorskip("browsergym.core.env", reason="browsergym-core is not installed")
pytestmark = pytest.mark.slow

PATHS = demo_paths()
PAGE = "http://scholar.test/search/advanced"
# {role:name} names the first element of that role and name in the page's flattened tree
CASES = [
    "click('{link:Help}')",
    "dblclick('{link:About}')",
    "click('{checkbox:Computer Science}')",
    "click('{link:Help}', button='middle')",
    "fill('{textbox:Search term or terms}', 'neural networks')",
    "fill('{textbox:Search term or terms}', 'neural', True)",
    "clear('{textbox:Search term or terms}')",
    "focus('{textbox:Search term}')",
    "hover('{link:About}')",
    "press('{textbox:Search term}', 'Tab')",
    "select_option('{combobox:Boolean operator}', 'OR')",
    "select_option('{combobox:Field}', 'Author(s)')",
    "keyboard_press('Tab')",
    "keyboard_type('abc')",
    "scroll(0, 400)",
    "mouse_move(200, 200)",
    "noop()",
    "goto('http://scholar.test/help')",
    "new_tab()",
    "tab_close()",
    "send_msg_to_user('done')",
    # failures
    "click('9999')",
    "select_option('{combobox:Boolean operator}', 'Nope')",
    "select_option('{textbox:Search term}', 'x')",
    "fill('{link:Help}', 'x')",
    "keyboard_press('NotAKey')",
    "tab_focus(3)",
    "click('{link:Help}')\nclick('{link:About}')",
]
# Failures where BrowserGym has done part of the action before failing (focused the element, pressed
# the mouse button), which ours, refusing before acting, has not: the verdict alone is compared.
VERDICT_ONLY = [
    "press('{textbox:Search term}', 'NotAKey')",
    "upload_file('{textbox:Search term}', 'no-such-file.pdf')",
    "drag_and_drop('{checkbox:Computer Science}', '9999')",
]
# case -> what we report and BrowserEnv does not: ours on purpose (a go_back from the start page stays
# there; BrowserEnv's goes back to the blank page its tab opened on)
DEVIATIONS = {
    "goto('http://example.com/')": "not captured: the archive has no GET http://example.com/ (a replay miss)",
    "go_back()": "no previous page",
}

SCRIPT = PREAMBLE + r"""
import re
from browsergym.core.action.highlevel import HighLevelActionSet

actions = HighLevelActionSet(subsets=["chat", "infeas", "bid", "coord", "nav", "tab"], multiaction=False)
env = BrowserEnv(task_entrypoint=OpenEndedTask, task_kwargs={"start_url": cfg["url"], "goal": "look"},
                 pre_observation_delay=0.0, viewport={"width": 1920, "height": 1080}, locale="en-US",
                 timezone_id="UTC", pw_chromium_kwargs={"proxy": cfg["proxy"]}, action_mapping=actions.to_python_code,
                 pw_context_kwargs={"ignore_https_errors": True, "service_workers": "block"})
settle(env)
out = {}
try:
    for case in cfg["cases"]:
        # BrowserGym's actions wait 500 ms at most (hard-coded in its action functions): on a loaded
        # machine a click can run out of it. A case that timed out is played up to four times more;
        # one that always times out (an id not on the page) reports its timeout.
        for attempt in range(5):
            obs, _ = env.reset(seed=0)
            tree = flatten_axtree_to_str(obs["axtree_object"])
            def bid(m):
                role, name = m.group(1), m.group(2)
                found = re.search(r"^\s*\[(\w+)\] " + re.escape(role) + " " + re.escape(repr(name)), tree, re.M)
                return found.group(1) if found else "9999"
            action = re.sub(r"\{(\w+):([^}]*)\}", bid, case)
            obs, *_ = env.step(action)
            if not obs["last_action_error"].startswith("TimeoutError") or "9999" in action:
                break
        out[case] = {"tree": flatten_axtree_to_str(obs["axtree_object"]), "url": obs["url"],
                     "focused": obs["focused_element_bid"], "error": obs["last_action_error"]}
finally:
    env.close()
print(json.dumps(out))
"""


def _focused(tree: str, bid: str) -> str | None:
    """The focused element's line without its id (role, name, properties)."""
    if not bid:
        return None
    m = re.search(rf"^\s*\[{re.escape(bid)}\] (.*)$", tree, re.M)
    return _unnumbered(m.group(1)) if m else None


def _unnumbered(tree: str) -> str:
    """The tree without its ids, and without the demo's clock text (a page's "served <ms>" reads the
    clock, which runs in BrowserEnv and is frozen in ours)."""
    return re.sub(r"(served|rendered at) \d+", r"\1 <clock>", re.sub(r"\[\w+\] ", "", tree))


def _resolve(case: str, tree: str) -> str:
    def bid(m):
        found = re.search(rf"^\s*\[(\w+)\] {re.escape(m.group(1))} {re.escape(repr(m.group(2)))}", tree, re.M)
        return found.group(1) if found else "9999"
    return re.sub(r"\{(\w+):([^}]*)\}", bid, case)


def _ours(cases: list[str]) -> dict:
    from browsergym.utils.obs import flatten_axtree_to_str

    env = wf.WebEnv(wf.EnvConfig(PATHS["archive"], backend="browser", observation="browsergym", max_steps=100))
    out = {}
    try:
        for case in cases:
            obs, _ = env.reset(options={"task": {"id": "t", "start_url": PAGE, "instruction": "look"}})
            action = _resolve(case, flatten_axtree_to_str(obs["axtree_object"]))
            obs, *_ = env.step(action)
            out[case] = {"tree": flatten_axtree_to_str(obs["axtree_object"]), "url": obs["url"],
                         "focused": obs["focused_element_bid"], "error": obs["last_action_error"]}
    finally:
        env.close()
    return out


@pytest.fixture(scope="module")
def both():
    try:
        chromium_path()
    except BrowserUnavailable as exc:
        pytest.skip(str(exc))
    from webfreeze.replayer.server import ReplayServer
    from webfreeze.simulator.browser import CHROMIUM_FLAGS

    cases = CASES + VERDICT_ONLY + list(DEVIATIONS)
    server = ReplayServer(PATHS["archive"], mode="proxy", inject=True, timers=False, seed=0).start()
    try:
        cfg = {"chromium": chromium_path(shell=True), "flags": CHROMIUM_FLAGS, "url": PAGE, "cases": cases,
               "proxy": {"server": server.url, "bypass": "<-loopback>"}}
        # BrowserGym's episodes in their process while ours play here (each waits on its browser)
        theirs = subprocess.Popen([sys.executable, "-c", SCRIPT, json.dumps(cfg)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        try:
            ours = _ours(cases)
            stdout, stderr = theirs.communicate(timeout=900)
        finally:
            if theirs.poll() is None:
                theirs.kill()
                theirs.communicate()
    finally:
        server.stop()
    assert theirs.returncode == 0, stderr[-3000:]
    return json.loads(stdout.strip().splitlines()[-1]), ours


@pytest.mark.parametrize("case", CASES)
def test_the_same_action_gives_the_same_page_and_verdict(both, case):
    theirs, ours = both[0][case], both[1][case]
    assert bool(ours["error"]) == bool(theirs["error"]), (ours["error"], theirs["error"])
    assert ours["url"] == theirs["url"]
    assert _unnumbered(ours["tree"]) == _unnumbered(theirs["tree"])
    assert _focused(ours["tree"], ours["focused"]) == _focused(theirs["tree"], theirs["focused"])


@pytest.mark.parametrize("case", VERDICT_ONLY)
def test_a_failed_action_fails_in_both(both, case):
    theirs, ours = both[0][case], both[1][case]
    assert theirs["error"] and ours["error"] and "\n" not in ours["error"]
    assert ours["url"] == theirs["url"] == PAGE


@pytest.mark.parametrize("case", list(DEVIATIONS))
def test_what_we_report_and_browsergym_does_not(both, case):
    theirs, ours = both[0][case], both[1][case]
    assert theirs["error"] == "" and ours["error"] == DEVIATIONS[case]
    if case == "go_back()":
        assert theirs["url"] == "about:blank" and ours["url"] == PAGE
    else:
        assert ours["url"] == theirs["url"]
        assert _unnumbered(ours["tree"]) == _unnumbered(theirs["tree"])
