"""BrowserGym's observation keys (EnvConfig(observation="browsergym")) on the shipped demo archive,
in both backends: BrowserGym's own flatten functions (browsergym-core from PyPI) read them, the
bids they print are the ids our actions take, the episode keys (chat, last action, elapsed time)
follow the actions, and two runs give the same observations."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
from browserenv_preamble import PREAMBLE

import webfreeze as wf
from webfreeze.demo import demo_paths
from webfreeze.simulator.bgym_obs import GREETING, KEYS
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvError

obs_utils = pytest.importorskip("browsergym.utils.obs", reason="browsergym-core is not installed")
flatten_axtree_to_str = obs_utils.flatten_axtree_to_str
flatten_dom_to_str = obs_utils.flatten_dom_to_str

PATHS = demo_paths()
TASK = "scholar-site-info-001"


def _browser_or_skip(backend):
    if backend == "browser":
        try:
            chromium_path()
        except BrowserUnavailable as exc:
            pytest.skip(str(exc))


def make_env(backend, **kw):
    return wf.WebEnv(wf.EnvConfig(PATHS["archive"], backend=backend, suite=PATHS["suite"],
                                  observation="browsergym", **kw))


def _ax_bids(text: str) -> list[str]:
    return re.findall(r"^\s*\[([A-Za-z0-9]+)\] ", text, re.MULTILINE)


def _bid_of(text: str, role: str, name: str) -> str:
    m = re.search(rf"^\s*\[(\w+)\] {role} {re.escape(repr(name))}", text, re.MULTILINE)
    assert m, f"no {role} {name!r} in the flattened tree"
    return m.group(1)


def fingerprint(obs: dict) -> str:
    """The observation's BrowserGym keys, hashed (arrays by their bytes, shape and dtype)."""
    def enc(v):
        if isinstance(v, np.ndarray):
            return {"array": hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest(),
                    "shape": list(v.shape), "dtype": str(v.dtype)}
        if isinstance(v, (tuple, list)):
            return [enc(x) for x in v]
        if isinstance(v, dict):
            return {str(k): enc(x) for k, x in v.items()}
        return v
    return hashlib.sha256(json.dumps(enc({k: obs[k] for k in KEYS}), sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_browsergym_flatten_functions_read_our_observations(backend):
    _browser_or_skip(backend)
    env = make_env(backend)
    try:
        obs, _ = env.reset(options={"task": TASK})
        for key in KEYS:
            assert key in obs, key
        assert obs in env.observation_space
        ax = flatten_axtree_to_str(obs["axtree_object"])
        dom = flatten_dom_to_str(obs["dom_object"], obs["extra_element_properties"], with_visible=True,
                                 with_clickable=True, with_bounding_box_coords=True)
        ours = {e["bid"] for e in obs["elements"]}
        printed = _ax_bids(ax)
        assert printed and set(printed) <= ours  # every id BrowserGym's text shows is one of ours
        if backend == "text":  # built from our tree: BrowserGym's flattening is our axtree_text
            assert ax == obs["axtree_text"]
        else:  # Chromium's own tree: the same page, the same named elements
            for line in obs["axtree_text"].splitlines():
                m = re.match(r"\s*\[(\w+)\] (link|button|textbox|heading) ('.*?')", line)
                if m:
                    assert f"[{m.group(1)}] {m.group(2)} {m.group(3)}" in ax
        dom_bids = set(re.findall(r'bid="(\w+)"', dom))  # (html and body too, which the tree leaves out)
        assert dom_bids >= ours and dom_bids == set(obs["extra_element_properties"])
        assert 'data-wf-bid' not in dom  # our attribute is BrowserGym's `bid` there
        link = _bid_of(ax, "link", "Help")
        props = obs["extra_element_properties"][link]
        assert props["clickable"] is True and props["visibility"] == 1.0
        if backend == "browser":
            x, y, w, h = props["bbox"]
            assert w > 0 and h > 0 and 0 <= x < 1920 and 0 <= y < 1080
            assert props["set_of_marks"] is True
            assert obs["screenshot"].shape == (1080, 1920, 3) and obs["screenshot"].dtype == np.uint8
            assert obs["screenshot"].std() > 0  # a real page, not a blank
        else:
            assert props["bbox"] is None
            assert obs["screenshot"].shape == (1080, 1920, 3) and (obs["screenshot"] == 255).all()
        assert obs["chat_messages"][0] == {"role": "assistant", "timestamp": 0.0, "message": GREETING}
        assert obs["chat_messages"][1]["role"] == "user" and obs["chat_messages"][1]["message"] == obs["goal"]
        assert obs["goal_object"] == ({"type": "text", "text": obs["goal"]},)
        assert obs["open_pages_urls"] == ("http://scholar.test/",)
        assert obs["open_pages_titles"] == ("Scholar Preprints",)
        assert obs["active_page_index"].tolist() == [0]
        assert obs["last_action"] == "" and obs["elapsed_time"].tolist() == [0.0]
        # the bid BrowserGym's text gives is the one our click takes
        obs, *_ = env.step(f"click('{link}')")
        assert obs["last_action_error"] == "" and obs["url"] == "http://scholar.test/help"
        assert obs["last_action"] == f"click('{link}')"
        assert obs["open_pages_urls"] == ("http://scholar.test/help",)
        assert "help" in obs["open_pages_titles"][0].lower()
        # a wait is virtual time; a bad action is reported in both shapes
        obs, *_ = env.step("noop(1500)")
        assert obs["elapsed_time"].tolist() == [1.5]
        obs, *_ = env.step("click('999999')")
        assert "999999" in obs["last_action_error"]
        box = _bid_of(flatten_axtree_to_str(obs["axtree_object"]), "textbox", "Search term or terms")
        obs, *_ = env.step(f"fill('{box}', 'graph')")
        assert obs["focused_element_bid"] == (box if backend == "browser" else "")
        assert "value='graph'" in flatten_axtree_to_str(obs["axtree_object"])
        assert 'value="graph"' in flatten_dom_to_str(obs["dom_object"])
        obs, _, terminated, _, _ = env.step("send_msg_to_user('320')")
        assert terminated
        assert obs["chat_messages"][-1] == {"role": "assistant", "timestamp": 1.5, "message": "320"}
    finally:
        env.close()


def play(backend) -> list[str]:
    env = make_env(backend)
    try:
        obs, _ = env.reset(options={"task": TASK})
        prints = [fingerprint(obs)]
        link = _bid_of(flatten_axtree_to_str(obs["axtree_object"]), "link", "Advanced search")
        for action in (f"click('{link}')", "scroll(0, 400)", "go_back()"):
            obs, *_ = env.step(action)
            prints.append(fingerprint(obs))
        return prints
    finally:
        env.close()


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_browsergym_observations_are_deterministic(backend):
    _browser_or_skip(backend)
    first, second = play(backend), play(backend)
    assert first == second
    assert len(set(first)) > 1  # (the steps changed what was seen)


def test_the_default_observation_has_none_of_it_and_bad_settings_are_refused():
    env = wf.WebEnv(wf.EnvConfig(PATHS["archive"], backend="text", suite=PATHS["suite"]))
    try:
        obs, _ = env.reset(options={"task": TASK})
        assert "axtree_object" not in obs and "chat_messages" not in obs and obs["screenshot"] is None
    finally:
        env.close()
    with pytest.raises(EnvError, match="unknown observation 'gym'"):
        wf.WebEnv(wf.EnvConfig(PATHS["archive"], backend="text", observation="gym"))


def test_gymnasium_check_env_passes_with_browsergym_observations():
    from gymnasium.utils.env_checker import check_env

    env = make_env("text")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env, skip_render_check=True)
    finally:
        env.close()


# BrowserGym's own BrowserEnv on one page, in a process of its own, through a replay proxy; prints
# the flattened accessibility tree. Its Chat window launches a second browser without the
# executable path BrowserGym passes through, so Playwright's launcher is wrapped to add ours.
BROWSERENV_SCRIPT = PREAMBLE + r"""
env = BrowserEnv(task_entrypoint=OpenEndedTask, task_kwargs={"start_url": cfg["url"], "goal": "look"},
                 pre_observation_delay=0.0, viewport={"width": 1920, "height": 1080}, locale="en-US",
                 timezone_id="UTC", pw_chromium_kwargs={"proxy": cfg["proxy"]},
                 pw_context_kwargs={"ignore_https_errors": True, "service_workers": "block"})
settle(env)
try:
    obs, _ = env.reset(seed=0)
    print(json.dumps(flatten_axtree_to_str(obs["axtree_object"])))
finally:
    env.close()
"""


@pytest.mark.parametrize("url", ["http://scholar.test/", "http://scholar.test/search/advanced"])
def test_the_browser_backends_tree_is_browsergyms_own_but_for_the_ids(url):
    """BrowserGym's BrowserEnv and our browser backend on the same page of the same archive
    (BrowserEnv with the browser's own timers: its marking script waits on setInterval)."""
    _browser_or_skip("browser")
    from webfreeze.replayer.server import ReplayServer
    from webfreeze.simulator.browser import CHROMIUM_FLAGS

    server = ReplayServer(PATHS["archive"], mode="proxy", inject=True, timers=False, seed=0).start()
    try:
        cfg = {"chromium": chromium_path(shell=True), "flags": CHROMIUM_FLAGS, "url": url,
               "proxy": {"server": server.url, "bypass": "<-loopback>"}}
        done = subprocess.run([sys.executable, "-c", BROWSERENV_SCRIPT, json.dumps(cfg)], capture_output=True,
                              text=True, timeout=180, check=False)
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    env = wf.WebEnv(wf.EnvConfig(PATHS["archive"], backend="browser", observation="browsergym"))
    try:
        obs, _ = env.reset(options={"task": {"id": "t", "start_url": url, "instruction": "look"}})
        ours = flatten_axtree_to_str(obs["axtree_object"])
    finally:
        env.close()
    def unnumbered(text):
        return re.sub(r"\[\w+\] ", "", text)
    assert len(theirs.splitlines()) > 50
    assert unnumbered(ours) == unnumbered(theirs)
    assert ours != theirs  # (the ids are ours: BrowserGym numbers the head's elements too)
