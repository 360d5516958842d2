"""The start of a script that runs BrowserGym's own ``BrowserEnv`` in a process of its own (tests
compare our environment with it). It reads ``cfg`` (JSON in ``sys.argv[1]``: ``chromium``, ``flags``)
and wraps Playwright's launcher so that every browser BrowserGym starts is Debian's Chromium with our
flags: its Chat window launches a second browser without the executable path BrowserEnv passes.
BrowserEnv launches both anew on every reset; a launch with the arguments of an earlier one gets
that browser again (each reset still makes its fresh contexts and pages).
``settle(env)`` makes BrowserEnv wait, before each observation, until its pages' network is idle."""

PREAMBLE = r"""
import json, sys
import browsergym.core.chat as chat_mod
import browsergym.core.env as env_mod
from browsergym.core.env import BrowserEnv
from browsergym.core.task import OpenEndedTask
from browsergym.utils.obs import flatten_axtree_to_str

cfg = json.loads(sys.argv[1])
get = env_mod._get_global_playwright

def patched():
    pw = get()
    if not getattr(pw.chromium, "_wf", False):
        launch = pw.chromium.launch
        shared = {}

        def launch_once(**kw):
            # BrowserEnv.reset closes its browser and its Chat's and launches two new ones: each
            # launch with the same arguments gets the one browser (a new context every reset, as
            # before: BrowserEnv closes its contexts itself), its close left to the process's end
            key = json.dumps(kw, sort_keys=True, default=str)
            browser = shared.get(key)
            if browser is None or not browser.is_connected():
                browser = launch(**{**kw, "executable_path": cfg["chromium"],
                                    "args": [*(kw.get("args") or []), *cfg["flags"]]})
                browser.close = lambda **_: None
                shared[key] = browser
            return browser
        pw.chromium.launch = launch_once
        pw.chromium._wf = True
    return pw

env_mod._get_global_playwright = chat_mod._get_global_playwright = patched


def settle(env):
    # BrowserEnv observes once the DOM has loaded (its _wait_dom_loaded, called by reset and step
    # just before the observation); ours waits until the page's requests are done. A request that
    # answers late on a loaded machine (the demo pages' /api/stats) would make the two differ, so
    # BrowserEnv's wait is made to wait for an idle network too.
    import playwright.sync_api

    dom_loaded = env._wait_dom_loaded

    def idle():
        dom_loaded()
        for page in env.context.pages:
            try:
                page.wait_for_load_state("networkidle", timeout=60_000)
            except playwright.sync_api.Error:
                if not page.is_closed():
                    raise
    env._wait_dom_loaded = idle
    return env
"""
