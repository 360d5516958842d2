"""The agent environment over a replayed crawl: both backends, all three action dialects, bad
actions reported (never raised), deterministic trajectories, and the shop cart working with the
live shop gone (site model through the replayer's hook)."""

from __future__ import annotations

import json
import os

import pytest

from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
from webfreeze.simulator.env import EnvConfig, EnvError, WebEnv
from webfreeze.simulator.site_models import SimulatedSiteModel
from webfreeze.simulator.sites import SITES
from webfreeze.simulator.sites.common import SiteServer
from webfreeze.simulator.trajectory import dumps, without_timings

try:
    chromium_path()
except BrowserUnavailable as exc:
    pytestmark = pytest.mark.skip(reason=str(exc))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    from webfreeze.recorder.crawl import crawl

    tmp = tmp_path_factory.mktemp("env")
    os.environ["WEBFREEZE_HOME"] = str(tmp / "home")
    archive = tmp / "sites.wfz"
    urls = {}
    site = SiteServer(SITES["scholar"](0)).start()
    try:
        crawl(archive, f"{site.url}/", depth=1, max_pages=12)
    finally:
        site.stop()
    urls["scholar"] = site.url
    shop = SITES["shop"](0)
    sku = shop.products[0].sku
    site = SiteServer(shop).start()
    try:
        crawl(archive, f"{site.url}/p/{sku}", depth=0, max_pages=1)
    finally:
        site.stop()
    urls["shop"] = site.url
    return archive, urls, sku


def task(url, tid="t"):
    return {"id": tid, "start_url": url, "instruction": "find the help page"}


def run_episode(env, start, actions):
    env.reset(options={"task": task(start)})
    for a in actions:
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    return env.trajectory(stopped=True)


def bid_of(env, role, name):
    return next(e["bid"] for e in env.tree.descriptions if e["role"] == role and e["name"] == name)


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_dialects_errors_and_navigation(recorded, backend):
    archive, urls, _ = recorded
    env = WebEnv(EnvConfig(archive, backend=backend))
    try:
        obs, info = env.reset(options={"task": task(urls["scholar"] + "/")})
        assert obs["url"] == urls["scholar"] + "/" and obs["title"] == "Scholar Preprints"
        assert obs["axtree_text"].startswith("RootWebArea 'Scholar Preprints'")
        help_bid = bid_of(env, "link", "Help")
        obs, *_ = env.step(f"Click [{help_bid}]")  # WebVoyager
        assert obs["url"].endswith("/help") and obs["last_action_error"] == ""
        obs, *_ = env.step("go_back()")  # BrowserGym
        assert obs["url"] == urls["scholar"] + "/"
        obs, *_ = env.step(f"click [{help_bid}]")  # WebArena
        assert obs["url"].endswith("/help")
        obs, *_ = env.step("click('99999')")
        assert "no element with bid 99999" in obs["last_action_error"] and obs["url"].endswith("/help")
        obs, *_ = env.step("dance wildly")
        assert obs["last_action_error"].startswith("no action recognised")
        obs, reward, term, trunc, info = env.step("ANSWER; it is the help page")
        assert term and info["end_reason"] == "answer"
        traj = env.trajectory()
        assert traj["answer"] == "it is the help page" and traj["end"]["reason"] == "answer"
        assert [s["parsed"]["dialect"] if s["parsed"] else None for s in traj["steps"]] == \
            ["webvoyager", "browsergym", "webarena", "browsergym", None, "webvoyager"]
        assert traj["steps"][0]["target"]["name"] == "Help" and traj["steps"][0]["target"]["role"] == "link"
    finally:
        env.close()


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_history_and_the_end_of_an_episode(recorded, backend):
    """Both backends: no going back past the episode's first page (the browser went to the blank
    page a tab starts on), a link to the page itself replaces its history entry (the text backend
    made a new one), and a step after the episode ended records nothing and keeps its result (it
    turned an answer into 'infeasible')."""
    archive, urls, _ = recorded
    home = urls["scholar"] + "/"
    env = WebEnv(EnvConfig(archive, backend=backend))
    try:
        env.reset(options={"task": task(home)})
        seen = []
        for action in ["go_back()", "go_forward()", f"click('{bid_of(env, 'link', 'Home')}')",
                       "go_back()", f"click('{bid_of(env, 'link', 'Help')}')", "go_back()", "go_forward()"]:
            obs, *_ = env.step(action)
            seen.append((obs["url"].removeprefix(urls["scholar"]), obs["last_action_error"]))
        assert seen == [("/", "no previous page"), ("/", "no next page"), ("/", ""), ("/", "no previous page"),
                        ("/help", ""), ("/", ""), ("/help", "")]
        obs, _, term, _, info = env.step("stop [the help page]")
        assert term and info["end_reason"] == "answer"
        ended = env.trajectory()
        obs, reward, term, trunc, info = env.step("noop()")
        assert term and not trunc and info["end_reason"] is None
        assert obs["last_action_error"] == "the episode has ended; call reset()" and obs["url"].endswith("/help")
        assert env.trajectory() == ended and ended["answer"] == "the help page" and len(ended["steps"]) == 8
    finally:
        env.close()


def test_no_step_counts_after_the_step_limit(recorded):
    """Truncation ends the episode as an answer does: later steps change nothing (a late answer
    turned a step_limit episode into an answered one)."""
    archive, urls, _ = recorded
    env = WebEnv(EnvConfig(archive, backend="text", max_steps=2))
    try:
        env.reset(options={"task": task(urls["scholar"] + "/")})
        assert env.step("noop()")[3] is False
        obs, _, term, trunc, info = env.step("noop()")
        assert trunc and not term and info["end_reason"] == "step_limit"
        ended = env.trajectory()
        obs, _, term, trunc, info = env.step("send_msg_to_user('late answer')")
        assert trunc and not term and obs["last_action_error"] == "the episode has ended; call reset()"
        assert env.trajectory() == ended and ended["end"]["reason"] == "step_limit" and len(ended["steps"]) == 2
    finally:
        env.close()


def test_backends_reach_the_same_pages_and_trajectories_repeat(recorded):
    archive, urls, _ = recorded
    seen = {}
    for backend in ("text", "browser"):
        env = WebEnv(EnvConfig(archive, backend=backend))
        try:
            env.reset(options={"task": task(urls["scholar"] + "/")})
            links = [e for e in env.tree.descriptions if e["role"] == "link" and e["href"]
                     and "/list/" in e["href"]][:3]
            actions = []
            for link in links:
                actions += [f"click('{bid_of(env, 'link', link['name'])}')", "go_back()"]
            actions.append("send_msg_to_user('done')")
            runs = [dumps(without_timings(run_episode(env, urls["scholar"] + "/", actions))) for _ in range(2)]
        finally:
            env.close()
        assert runs[0] == runs[1], f"{backend} trajectories differ between runs"
        seen[backend] = [s["url_after"] for s in json.loads(runs[0])["steps"]]
    assert seen["text"] == seen["browser"]
    assert sum("/list/" in u for u in seen["text"]) == 3


@pytest.mark.parametrize("backend", ["text", "browser"])
def test_shop_cart_works_in_replay_with_the_shop_gone(recorded, backend):
    archive, urls, sku = recorded
    host = urls["shop"].split("//", 1)[1]
    env = WebEnv(EnvConfig(archive, backend=backend, site_models=[SimulatedSiteModel("shop", host)]))
    try:
        env.reset(options={"task": task(f"{urls['shop']}/p/{sku}")})
        add = next(e for e in env.tree.descriptions if e["role"] == "button" and "cart" in e["name"].lower())
        obs, *_ = env.step(f"click('{add['bid']}')")
        assert obs["url"].endswith("/cart"), obs["last_action_error"]
        assert "Your cart" in obs["axtree_text"]
        obs, _, term, _, _ = env.step("send_msg_to_user('added')")
        state = env.trajectory()["final_state"]
        assert state[host]["cart"]["items"] == [{"sku": sku, "size": state[host]["cart"]["items"][0]["size"],
                                                 "qty": 1}]
        env.reset(options={"task": task(f"{urls['shop']}/p/{sku}")})  # a new episode starts empty
        assert env.server.site_state()[host]["cart"]["items"] == []
    finally:
        env.close()


def test_bad_configuration_is_one_clear_error(tmp_path):
    with pytest.raises(EnvError, match="no such archive"):
        WebEnv(EnvConfig(tmp_path / "nope.wfz", backend="text"))
    with pytest.raises(EnvError, match="unknown backend"):
        WebEnv(EnvConfig(tmp_path / "nope.wfz", backend="telepathy"))
