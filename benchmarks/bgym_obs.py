"""What BrowserGym's observation keys cost: ``EnvConfig(observation="browsergym")`` vs the default
observation, both backends, on the shipped demo archive; and against BrowserGym's own ``BrowserEnv``
on the same pages through our replay proxy.

In interleaved rounds, one environment per (backend, observation): ``reset`` to the scholar home
page, then ``step`` = a click on a category listing link and the next observation (each followed by
an untimed ``go_back()``). The browser backend's BrowserGym observation adds CDP's DOM snapshot,
the accessibility trees of every frame and a viewport screenshot (decoded to an RGB array), as
BrowserGym takes them; the text backend's builds the same shapes from its tree (and a blank
viewport array). Rows: step and reset p50 with BrowserGym keys over the default observation (the
opt-in's price); the same over the default observation with a screenshot
(``EnvConfig(screenshots=True)``: the environment's still screenshot, as the BrowserGym observation
takes one), like for like, what BrowserGym's DOM snapshot and accessibility trees cost on top of a
step that shows the agent the page's pixels too (no goal); and, when ``browsergym-core`` imports here (or ``$WEBFREEZE_BROWSERGYM_PYTHON``
names a Python that has it), our browser step with BrowserGym keys against BrowserGym's
``BrowserEnv`` step (env_latency's driver: ``pre_observation_delay=0``, Debian's Chromium).
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

from . import Context, Row, console, percentile

NAME = "bgym_obs"
TITLE = "BrowserGym observation keys: step cost vs our default observation, and vs BrowserGym"
BENCH = "5 env bgym"
ROUNDS = 6  # episodes per environment (plus one warm-up episode each)
LINKS = 3  # link clicks per episode
START = "http://scholar.test/"
BROWSERGYM_ROUNDS = 3
BROWSERGYM_TIMEOUT_S = 180
GOAL = 1.5  # the browser backend's step (and reset) with BrowserGym's keys, over the default observation's


def _links(env, recorded: set) -> list[str]:
    """The first LINKS links of the home page to recorded listing pages (hrefs)."""
    out = []
    for e in env.tree.descriptions:
        href = e.get("href") or ""
        if e["role"] == "link" and "/list/" in href and href in recorded and href not in out:
            out.append(href)
    return out[:LINKS]


def _episode(env, targets: list[str], times: dict) -> list[str]:
    task = {"id": "bench", "start_url": START, "instruction": "open the listings"}
    t0 = time.perf_counter()
    env.reset(options={"task": task})
    times["reset"].append(time.perf_counter() - t0)
    reached = []
    for href in targets:
        bid = next(e["bid"] for e in env.tree.descriptions if e["role"] == "link" and e.get("href") == href)
        t0 = time.perf_counter()
        obs, *_ = env.step(f"click('{bid}')")
        times["step"].append(time.perf_counter() - t0)
        if obs["last_action_error"]:
            raise RuntimeError(f"click on {href} failed: {obs['last_action_error']}")
        reached.append(obs["url"])
        env.step("go_back()")
    return reached


def _stats(values: list[float]) -> dict:
    ms = sorted(v * 1000 for v in values)
    return {"n": len(ms), "p50": statistics.median(ms), "p90": percentile(ms, 90)}


def _browsergym_python() -> str | None:
    given = os.environ.get("WEBFREEZE_BROWSERGYM_PYTHON")
    if given:
        return given
    return sys.executable if importlib.util.find_spec("browsergym.core") else None


def _browsergym(python: str, proxy_url: str, targets: list[str]) -> dict:
    """BrowserGym's BrowserEnv on the same pages, in a process of its own (env_latency's driver)."""
    from webfreeze.simulator.browser import CHROMIUM_FLAGS, chromium_path

    from .env_latency import BROWSERGYM_SCRIPT

    cfg = {"chromium": chromium_path(shell=True), "flags": CHROMIUM_FLAGS, "start": START, "targets": targets,
           "rounds": BROWSERGYM_ROUNDS, "proxy": {"server": proxy_url, "bypass": "<-loopback>"}}
    done = subprocess.run([python, "-c", BROWSERGYM_SCRIPT, json.dumps(cfg)], capture_output=True, text=True,
                          timeout=BROWSERGYM_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"BrowserGym anchor failed: {done.stderr.strip().splitlines()[-1:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["errors"]:
        raise RuntimeError(f"BrowserGym anchor reached other pages: {result['errors'][:2]}")
    return result


def run(ctx: Context) -> list[Row]:
    from webfreeze.archives import Archive
    from webfreeze.demo import demo_paths
    from webfreeze.replayer.server import ReplayServer
    from webfreeze.simulator.browser import BrowserUnavailable, chromium_path
    from webfreeze.simulator.env import EnvConfig, WebEnv

    archive = demo_paths()["archive"]
    kinds = [("text", "default"), ("text", "browsergym")]
    try:
        chromium_path()
        kinds += [("browser", "default"), ("browser", "browsergym"), ("browser", "screenshots")]
    except BrowserUnavailable as exc:
        console.print(f"  browser backend skipped: {exc}")
    # ("screenshots": the default observation with the environment's still screenshot)
    envs = {k: WebEnv(EnvConfig(archive, backend=k[0], observation="default" if k[1] == "screenshots" else k[1],
                                screenshots=k[1] == "screenshots")) for k in kinds}
    times = {k: {"reset": [], "step": []} for k in kinds}
    bgym = None
    try:
        first = envs[kinds[0]]
        first.reset(options={"task": {"id": "bench", "start_url": START, "instruction": ""}})
        with Archive.open(archive) as arc:
            recorded = {page.url for page in arc.pages()}
        targets = _links(first, recorded)
        for k, env in envs.items():  # warm-up
            if _episode(env, targets, {"reset": [], "step": []}) != targets:
                raise RuntimeError(f"{k} reached other pages than {targets}")
        console.print(f"  {ROUNDS} rounds of {len(kinds)} environments ...")
        for _ in range(ROUNDS):
            for k, env in envs.items():
                _episode(env, targets, times[k])
        python = _browsergym_python()
        if python and ("browser", "default") in envs:
            console.print(f"  BrowserGym's BrowserEnv: {BROWSERGYM_ROUNDS} episodes in {python} ...")
            # A replay server of its own with the browser's own timers: BrowserGym's marking script
            # waits on setInterval, which the environment's pumped timers would hold forever.
            server = ReplayServer(archive, mode="proxy", inject=True, timers=False, seed=0).start()
            try:
                bgym = _browsergym(python, server.url, targets)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:  # the anchor's failure is reported, ours are not hidden
                console.print(f"  BrowserGym anchor skipped: {str(exc).splitlines()[0][:200]}")
                ctx.details.setdefault(NAME, {})["browsergym_error"] = str(exc).splitlines()[0][:500]
            finally:
                server.stop()
    finally:
        for env in envs.values():
            env.close()
    stats = {f"{b}/{o}": {what: _stats(v) for what, v in d.items()} for (b, o), d in times.items()}
    if bgym:
        stats["BrowserGym"] = {"reset": _stats(bgym["reset"]), "step": _stats(bgym["step"])}
    ctx.details.setdefault(NAME, {}).update({"rounds": ROUNDS, "links_per_episode": LINKS, "pages": targets, "ms": stats,
                         **({"browsergym_version": bgym["version"]} if bgym else {})})
    rows = []
    for backend in ("text", "browser"):
        if (backend, "default") not in envs:
            continue
        for what in ("step", "reset"):
            rows.append(Row(BENCH, f"{backend} {what} p50 with BrowserGym keys", stats[f"{backend}/browsergym"][what]["p50"],
                            stats[f"{backend}/default"][what]["p50"], f"{backend}, default observation", "ms", "lower",
                            GOAL if backend == "browser" else None,
                            note="the price of observation='browsergym' (opt-in)"))
    if ("browser", "screenshots") in envs:
        for what in ("step", "reset"):
            rows.append(Row(BENCH, f"browser {what} p50 with BrowserGym keys vs a plain {what} with a screenshot",
                            stats["browser/browsergym"][what]["p50"], stats["browser/screenshots"][what]["p50"],
                            "browser, default observation + screenshots=True", "ms", "lower", None,
                            note="like for like: both take a still screenshot of the page"))
    if bgym:
        for what in ("step", "reset"):
            rows.append(Row(BENCH, f"browser {what} p50 with BrowserGym keys vs BrowserEnv",
                            stats["browser/browsergym"][what]["p50"], stats["BrowserGym"][what]["p50"],
                            f"BrowserGym-core {bgym['version']} BrowserEnv", "ms", "lower", 1.0,
                            note="same pages through our replay proxy, pre_observation_delay=0"))
    return rows
