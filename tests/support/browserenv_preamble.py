"""The start of a script that runs BrowserGym's own ``BrowserEnv`` in a process of its own (tests
compare our environment with it). It reads ``cfg`` (JSON in ``sys.argv[1]``: ``chromium``, ``flags``)
and wraps Playwright's launcher so that every browser BrowserGym starts is Debian's Chromium with our
flags: its Chat window launches a second browser without the executable path BrowserEnv passes."""

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
        pw.chromium.launch = lambda **kw: launch(**{**kw, "executable_path": cfg["chromium"],
                                                   "args": [*(kw.get("args") or []), *cfg["flags"]]})
        pw.chromium._wf = True
    return pw

env_mod._get_global_playwright = chat_mod._get_global_playwright = patched
"""
