"""The agent environment: a Gymnasium-compatible ``Env`` over a replayed archive.

``reset(seed=None, options={"task": {...}}) -> (obs, info)``, ``step(action) -> (obs, reward,
terminated, truncated, info)``, ``close()``. Two backends share the observation format
(:mod:`webfreeze.simulator.axtree`) and the action parser (:mod:`webfreeze.simulator.actions`):

- ``browser``: Debian's Chromium through the replay server (proxy mode, in this process), one
  browser per environment and a fresh context per episode, 1920x1080, scale 1, en-US, UTC, service
  workers blocked, the page clock frozen at the capture time by the replay runtime.
- ``text``: no browser. HTML comes from the archive through the same matching (and site models),
  is parsed with lxml, scripts are ignored; links are followed and forms submitted (GET and POST)
  by building the request a browser would send (:mod:`webfreeze.simulator.forms`). Cookies are
  kept per host.

Every episode is recorded as a trajectory (:mod:`webfreeze.simulator.trajectory`). A bad action
never raises: it sets ``last_action_error`` in the next observation.

The task of an episode is ``options["task"]``: a task dict (a suite line), a task id of the
suite named by ``EnvConfig(suite=...)``, or a ``Task`` from ``load_suite``. Without one, ``reset``
takes the suite's first task, or, with no suite, an exploration episode at the archive's first
recorded page (no instruction, no ground truth). The reward is 0 at every step, unless
``EnvConfig(reward="score")``: then the step that ends the episode is rewarded with the task's
score (0 to 1). Reading a suite from its path and scoring are the evaluators' business
(``webfreeze.eval``), which this stage does not import: ``webfreeze.WebEnv`` (the front door,
``webfreeze/env.py``) is this class with both wired in; here ``suite`` may be a loaded suite
object. Observations and actions belong to the spaces of :mod:`webfreeze.simulator.spaces`;
``gymnasium.utils.env_checker.check_env`` passes on both backends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import threading
import time
from dataclasses import dataclass, field, replace
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import urlsplit

import gymnasium as gym

from webfreeze.archives import archive_digest
from webfreeze.archives.content import DecodeError, content_encoding, decode_content
from webfreeze.archives.timeutil import parse_time
from webfreeze.common.errors import WebfreezeError
from webfreeze.common.http import header_value
from webfreeze.replayer.hooks import SiteModel, host_key
from webfreeze.replayer.matching import AGENT_RULES
from webfreeze.replayer.server import ReplayServer

from . import bgym_obs
from . import spaces as wf_spaces
from .actions import Action, target_problem, text_refusal, try_parse
from .axtree import MARK_JS, AXTreeError, Tree, build_tree
from .axtree import marked as read_marked
from .backends import check_backend
from .browser import PageActivity, fast_animations, finish_animations, pump_timers, still_screenshot_async, wait_painted
from .forms import DOM_SNAPSHOTS, form_submission, is_submitter, label_control
from .live import episode_tag, open_upstream
from .marks import draw_marks
from .provenance import answer_record, kind_of_resource, step_provenance
from .trajectory import TrajectoryRecorder

REWARDS = ("zero", "score")
MAX_REDIRECTS = 10
ACTION_TIMEOUT_MS = 5000
SETTLE_MS = 30  # replay is local: 30 ms without a request in flight means settled
SETTLE_TIMEOUT_S = 10  # a safety net only: with pumped timers a replayed page always goes quiet
SNAPSHOT_TRIES = 3
POPUP_WAIT_MS = 1000  # a click on a link aimed at another window: how long its page may take to open

# Where a click on a bid lands: the element scrolled into view if it is not wholly inside the
# viewport, then the centre of its box, and whether a pointer there would hit the element (or one
# of its descendants). ``null`` when there is no such element or it is disabled.
CLICK_POINT_JS = r"""
(bid) => {
  const el = document.querySelector('[data-wf-bid="' + bid + '"]');
  if (!el || el.matches(':disabled') || el.getAttribute('aria-disabled') === 'true') return null;
  let r = el.getBoundingClientRect();
  if (r.width <= 0 || r.height <= 0) return null;
  if (r.top < 0 || r.left < 0 || r.bottom > window.innerHeight || r.right > window.innerWidth) {
    el.scrollIntoView({block: 'center', inline: 'center', behavior: 'instant'});
    r = el.getBoundingClientRect();
  }
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const hit = document.elementFromPoint(x, y);
  if (!hit || !(hit === el || el.contains(hit))) return {x, y, hit: false};
  // A link or a form aimed at another window opens a page: the caller waits for it.
  const link = el.closest('a[href], area[href]');
  const submits = (el.localName === 'button' || el.localName === 'input') && (el.type === 'submit' || el.type === 'image');
  const form = link || !submits ? null : el.form;
  const aim = ((link ? link.target : form ? (el.formTarget || form.target) : '') || '').toLowerCase();
  const popup = aim !== '' && !['_self', '_top', '_parent'].includes(aim);
  // Note whether the click starts a navigation of this page: the Navigation API's event (not for
  // a download), or an unprevented submission of a form that targets this page (its navigation
  // is queued for a later task). Read right after the click and again after the settle.
  window.__wfNavigating = false;
  const started = () => { window.__wfNavigating = true; };
  if (window.navigation) {
    window.navigation.addEventListener('navigate', (e) => { if (!e.downloadRequest) started(); }, {once: true});
  }
  window.addEventListener('submit', (e) => {
    const form = e.target, by = e.submitter;
    const method = ((by && by.getAttribute('formmethod')) || form.getAttribute('method') || '').toLowerCase();
    const target = (by && by.getAttribute('formtarget')) || form.getAttribute('target') || '';
    if (!e.defaultPrevented && method !== 'dialog' && (target === '' || target === '_self')) started();
  }, {once: true});
  return {x, y, hit: true, popup};
}
"""
# Right after the click: has a navigation been announced (or is this already another document)?
NAVIGATING_JS = "() => { const n = window.__wfNavigating; window.__wfNavigating = 'seen'; return n !== false; }"
# After the settle: was one announced since (a navigation a script queued, say)?
LATE_NAVIGATION_JS = ("() => { const n = window.__wfNavigating === true; if (n) window.__wfNavigating = 'seen';"
                      " return n; }")


class EnvError(WebfreezeError, RuntimeError):
    """The environment cannot run (bad configuration, missing archive): one line."""


@dataclass
class EnvConfig:
    archive: str | Path
    backend: str = "browser"
    seed: int = 0
    max_steps: int = 30
    action_dialect: str | None = None  # None: detect per action
    screenshots: bool = False
    # Browser backend: draw each visible clickable element's box and bid on the screenshot
    # (simulator/marks.py); implies a screenshot in every observation.
    set_of_marks: bool = False
    site_models: list[SiteModel] = field(default_factory=list)
    # Replay rules over the archive's stored replay_rules (the suite's, a user's). Both lie over
    # the agent defaults (replayer.matching.AGENT_RULES: no fuzzy answers for documents or XHR).
    rules: dict | None = None
    # A task suite (folder, manifest or .jsonl): reset() may then name a task by id, and picks the
    # suite's first task when given none.
    suite: str | Path | None = None
    # "zero": every reward is 0; "score": the final step's reward is the task's score (for RL users).
    reward: str = "zero"
    # The user's history for personalised tasks: an object with ``search(query) -> list[dict]`` (and
    # optionally ``identity() -> dict``), or a callable ``task -> such an object or None`` (one per
    # persona). None: a ``history_search`` action is refused. reset(options={"history": ...}) overrides.
    history: object = None
    # History searches answered per episode; they do not count as steps. A refused one (no history,
    # this many already answered) is a failed step like any bad action, so an episode always ends.
    max_history: int = 10
    # Record, for each step with a target element, where the element sits (its id, classes,
    # position and ancestors) and the page's DOM snapshot (docs/suites-and-runs.md, "DOM snapshots"), so
    # that key nodes with class-based selectors can be decided offline.
    dom_snapshots: bool = True
    # "browsergym": the observation also carries BrowserGym's keys and shapes (simulator/bgym_obs.py;
    # the browser backend takes CDP snapshots and a screenshot for them, so it costs step time).
    observation: str = "default"
    # Live runs (simulator/live.py): a recording proxy that answers every request ("mode": "live")
    # or the archive's misses ("miss"): {"proxy": URL, "ca_file": PEM, "mode": ...}. None: hermetic.
    upstream: dict | None = None


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


class WebEnv(gym.Env):
    """One environment = one replay of one archive; episodes are tasks (dicts, see docs/suites-and-runs.md)."""

    metadata = {"render_modes": []}

    def __init__(self, config: EnvConfig):
        check_backend(config.backend, EnvError)
        if not Path(config.archive).exists():
            raise EnvError(f"{config.archive}: no such archive")
        if config.reward not in REWARDS:
            raise EnvError(f"unknown reward {config.reward!r} (zero or score)")
        if config.observation not in bgym_obs.OBSERVATIONS:
            raise EnvError(f"unknown observation {config.observation!r} (default or browsergym)")
        self.config = config
        self.suite = self._load_suite(config.suite) if config.suite is not None else None
        self.action_space = wf_spaces.action_space()
        self.observation_space = wf_spaces.observation_space(config.max_steps)
        self._bgym = bgym_obs.BrowserGymView() if config.observation == "browsergym" else None
        if self._bgym is not None:
            self.observation_space = bgym_obs.observation_space(self.observation_space)
        self._png = None  # the last observation's screenshot (PNG), for the trajectory
        browser = config.backend == "browser"
        # In Chromium the page's timers wait for the settle's pump (simulator/browser.py): what an
        # observation shows never depends on how fast the machine ran them.
        self.upstream = open_upstream(config.upstream, EnvError)  # (live runs)
        self.server = ReplayServer(config.archive, mode="proxy" if browser else "direct",
                                   inject=browser, timers=browser, seed=config.seed, rules=config.rules,
                                   rule_defaults=AGENT_RULES, upstream=self.upstream)
        self.backend = _BrowserBackend(self) if config.backend == "browser" else _TextBackend(self)
        for model in config.site_models:
            self.server.register(model)
        self.task: dict | None = None
        self.steps = 0
        self.done = False
        self.tree: Tree | None = None
        self.recorder: TrajectoryRecorder | None = None
        self.last_error: str | None = None
        self._task_obj = None  # the eval Task behind self.task, for reward="score"
        self._history = None  # this episode's history handle (see EnvConfig.history)
        self._history_used = 0
        self._history_answer: tuple[str, list] = ("", [])  # what the last step's history search returned
        self.last_timing: dict = {}  # the last reset's or step's duration (reset_ms / step_ms)

    @property
    def browsergym(self) -> bgym_obs.BrowserGymView | None:
        """The episode's BrowserGym state (its chat) with ``observation="browsergym"``, else None."""
        return self._bgym

    @functools.cached_property
    def archive_digest(self) -> str:
        return archive_digest(self.config.archive)

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        task, self._task_obj = self._resolve_task((options or {}).get("task"))
        if not task.get("start_url"):
            raise EnvError(f"task {task.get('id')!r} has no start_url: an episode starts there")
        self.task = task
        self.steps = 0
        self.done = False
        self.last_error = None
        if self._bgym is not None:
            self._bgym.reset(task)
        self._history = self._history_for(task, (options or {}).get("history"))
        self._history_used = 0
        self._history_answer = ("", [])
        episode_seed = self.config.seed if seed is None else seed
        self.server.reset(episode_seed, when=task.get("snapshot_time"))
        self.server.replay.prefer_episode(task.get("id"))  # (an archive made by a live run: the task's own)
        if self.upstream is not None:  # live runs: this episode's requests, one capture session
            self.upstream.begin_episode(episode_tag(task.get("id")))
        t0 = time.perf_counter()
        self.backend.take_answers()  # (what the last episode left behind is not this one's)
        self.last_error = self.backend.reset(task["start_url"])
        obs = self._observe()
        start = step_provenance(self.backend.take_answers())
        env_info = {
            "backend": self.config.backend, "seed": episode_seed, "max_steps": self.config.max_steps,
            "viewport": [1920, 1080], "action_dialect": self.config.action_dialect,
            "snapshot_time": task.get("snapshot_time")}
        if self._history is not None:
            identity = getattr(self._history, "identity", None)
            env_info["history"] = identity() if callable(identity) else {}
            env_info["max_history"] = self.config.max_history
        self.recorder = TrajectoryRecorder(task, env=env_info)
        self.recorder.replay_start = start
        # timings stay out of info (Gymnasium expects the same info for the same seed and action)
        self.last_timing = {"reset_ms": round((time.perf_counter() - t0) * 1000, 3)}
        return obs, {"task_id": task.get("id")}

    def step(self, action: str, agent: dict | None = None):
        if self.task is None:
            raise EnvError("call reset() before step()")
        if self.recorder is not None and self.recorder.finished:
            # ended (an answer, or the step limit): nothing happens and nothing is recorded, so the
            # episode's result stays as it ended
            self.last_error = "the episode has ended; call reset()"
            return (self._observe(), 0.0, self.done, not self.done,
                    {"parsed": None, "end_reason": None})
        t0 = time.perf_counter()
        before_tree, before_url = self.tree, self.backend.url
        obs_digest = _digest(before_tree.axtree_text) if before_tree else None
        parsed, error = try_parse(action, self.config.action_dialect)
        if self._bgym is not None:
            self._bgym.stepped(action, parsed)
        answer = None
        target = None
        dom = None
        if parsed is not None:
            if self.config.backend == "text":
                error = text_refusal(parsed)
            if error is None and parsed.bid is not None and before_tree is not None:
                target = before_tree.get(parsed.bid)
                if target is None and parsed.kind not in ("scroll",):
                    error = _missing(before_tree, parsed.bid)
                other = (parsed.args or {}).get("to_bid")
                if error is None and other is not None and before_tree.get(other) is None:
                    error = _missing(before_tree, other)
                if error is None and target is not None:
                    # (asked of the observation in both backends: the same invalid action, the same line)
                    error = target_problem(parsed, target)
                if target is not None and self.config.dom_snapshots:
                    # where the element sits and the page it sat in, for class-based key nodes
                    target = {**target, **before_tree.element_record(parsed.bid)}
                    dom = lambda t=before_tree: t.snapshot  # noqa: E731 (serialised when the trajectory is taken)
            if error is None:
                if parsed.kind == "history_search":
                    history, error = self._search_history(parsed.text or "")
                    if error is None:
                        return self._history_step(action, parsed, agent, history, before_tree, before_url,
                                                  obs_digest, t0)
                elif parsed.kind in ("answer", "infeasible"):
                    answer = parsed.text or ""
                    self.done = True
                else:
                    error = self.backend.act(parsed, target)
        self.steps += 1
        self.last_error = error
        self._history_answer = ("", [])
        obs = self._observe()
        truncated = not self.done and self.steps >= self.config.max_steps
        end_reason = None
        if self.done:
            end_reason = "answer" if parsed and parsed.kind == "answer" else "infeasible"
        elif truncated:
            end_reason = "step_limit"
        env_ms = round((time.perf_counter() - t0) * 1000, 3)
        shot = self._png
        self.recorder.add_step(url=before_url, title=before_tree.title if before_tree else "", obs_digest=obs_digest,
                               action=action, parsed=parsed, target=target, url_after=self.backend.url,
                               agent=agent, error=error, env_ms=env_ms, screenshot=shot, dom=dom,
                               replay=step_provenance(self.backend.take_answers()))
        if end_reason:
            self.recorder.finish(end_reason, answer=answer if end_reason == "answer" else None,
                                 detail=answer if end_reason == "infeasible" else None,
                                 final_url=self.backend.url, final_state=self.server.site_state())
        self.last_timing = {"step_ms": env_ms}
        info = {"parsed": parsed.to_dict() if parsed else None, "end_reason": end_reason}
        reward = 0.0
        if end_reason and self.config.reward == "score":
            reward = self._score()
            info["score"] = reward
        return obs, reward, self.done, truncated, info

    # ------------------------------------------------------------------ the user's history
    def _history_for(self, task: dict, given):
        """The history handle of this episode: reset's ``options["history"]``, else the config's
        (an object with ``search``, or a callable giving one for ``task``)."""
        source = given if given is not None else self.config.history
        if source is None or callable(getattr(source, "search", None)):
            return source
        if callable(source):
            return source(task)
        raise EnvError("history must have a search(query) method or be a callable task -> history")

    def _search_history(self, query: str) -> tuple[dict | None, str | None]:
        """(the recorded search, None) or (None, why it was refused)."""
        if self._history is None:
            return None, ("this task has no user history to search (a personalised task names a persona, "
                          "and the run needs --persona DIR)")
        if self._history_used >= self.config.max_history:
            return None, (f"the history was searched {self._history_used} times in this episode, "
                          "the most allowed; act on the page")
        try:
            results = list(self._history.search(query))
        except Exception as exc:  # a broken index is the episode's failed step, not a crash
            return None, f"the history search failed: {type(exc).__name__}: {exc}".splitlines()[0]
        identity = getattr(self._history, "identity", None)
        ident = identity() if callable(identity) else {}
        return {"query": query, "results": results, "k": ident.get("k"), "threshold": ident.get("threshold")}, None

    def _history_step(self, action, parsed, agent, history, before_tree, before_url, obs_digest, t0):
        """A history search that was answered: recorded as a step of kind ``history``; not a step of
        the navigation budget (``step`` and ``max_steps`` are unchanged)."""
        self._history_used += 1
        self.last_error = None
        self._history_answer = (render_history(history), history["results"])
        obs = self._observe()
        env_ms = round((time.perf_counter() - t0) * 1000, 3)
        self.recorder.add_step(url=before_url, title=before_tree.title if before_tree else "", obs_digest=obs_digest,
                               action=action, parsed=parsed, target=None, url_after=self.backend.url,
                               agent=agent, error=None, env_ms=env_ms, history=history,
                               replay=step_provenance(self.backend.take_answers()))
        self.last_timing = {"step_ms": env_ms}
        truncated = not self.done and self.steps >= self.config.max_steps
        return obs, 0.0, False, truncated, {"parsed": parsed.to_dict(), "end_reason": None}

    # ------------------------------------------------------------------ tasks and rewards
    def _resolve_task(self, given) -> tuple[dict, object]:
        """(the task dict, its eval Task or None) for ``options["task"]``."""
        if given is None:
            if self.suite is not None:
                first = self.suite.tasks[0]
                return first.raw, first
            return self._default_task(), None
        if isinstance(given, str):
            if self.suite is None:
                raise EnvError(f"task {given!r} named by id, but the environment has no suite (EnvConfig(suite=...))")
            found = self.suite.by_id().get(given)
            if found is None:
                raise EnvError(f"no task {given!r} in suite {self.suite.name}")
            return found.raw, found
        raw = getattr(given, "raw", None)
        if isinstance(raw, dict) and raw:  # a Task from load_suite
            return raw, given
        if isinstance(given, dict):
            return given, None
        raise EnvError(f"options['task'] must be a task dict, a task id or a Task, not {type(given).__name__}")

    @functools.cached_property
    def _first_page(self) -> str | None:
        from webfreeze.archives import Archive

        arc = Archive.open(self.config.archive)
        try:
            return next((page.url for page in arc.pages(limit=1)), None)
        finally:
            arc.close()

    def _default_task(self) -> dict:
        """An exploration episode at the archive's first recorded page (no instruction, nothing to score)."""
        url = self._first_page
        if not url:
            raise EnvError("reset needs a task (options={'task': ...} or EnvConfig(suite=...)): "
                           "the archive records no page to start from")
        return {"id": "explore", "category": "explore", "instruction": "", "start_url": url, "ground_truth": {}}

    def _load_suite(self, suite):
        """The suite ``EnvConfig(suite=...)`` names. Here only an already loaded suite (an object with
        ``tasks`` and ``by_id()``, as ``load_suite`` returns); ``webfreeze.WebEnv`` also reads paths."""
        if hasattr(suite, "tasks") and callable(getattr(suite, "by_id", None)):
            if not suite.tasks:
                raise EnvError(f"suite {getattr(suite, 'name', '')!r} has no tasks")
            return suite
        raise EnvError("EnvConfig(suite=PATH) needs webfreeze.WebEnv (it reads suites with webfreeze.eval); "
                       "here pass a loaded suite")

    def _score(self) -> float:
        """The ended episode's task score (0 to 1): computed by ``webfreeze.WebEnv``, which wires in
        the evaluators; this stage does not score."""
        raise EnvError("reward='score' needs webfreeze.WebEnv (it scores with webfreeze.eval)")

    def site_failures(self) -> list[dict]:
        """Live runs: the documents whose live site failed in this episode (DNS, TLS, refused,
        timed out, 5xx), each ``{method, url, status, cause}``; always empty in a hermetic replay."""
        return self.upstream.take_failures() if self.upstream is not None else []

    def trajectory(self, *, stopped: bool = False) -> dict:
        """The episode's trajectory (finishing it as ``stopped`` if it is still open)."""
        if self.recorder is None:
            raise EnvError("no episode yet")
        if not self.recorder.finished:
            self.recorder.finish("stopped" if stopped else "step_limit", final_url=self.backend.url,
                                 final_state=self.server.site_state())
        return self.recorder.data(archive_digest=self.archive_digest)

    def screenshot(self) -> bytes | None:
        """A PNG of the page as it is now (the browser backend; None in the text backend), taken
        outside the trajectory: it changes nothing an episode records (the MCP server's tool)."""
        return self.backend.screenshot()

    def close(self) -> None:
        if getattr(self, "_closed", False):  # closing twice is allowed (Gymnasium's contract)
            return
        self._closed = True
        self.backend.close()

    # ------------------------------------------------------------------ observations
    def _observe(self) -> dict:
        tree, shot = self.backend.observe()
        self.tree = tree
        self._png = shot
        obs = {
            "url": self.backend.url, "title": tree.title, "goal": (self.task or {}).get("instruction", ""),
            "axtree_text": tree.axtree_text, "elements": tree.summaries(), "screenshot": shot,
            "open_pages": self.backend.open_pages(), "last_action_error": self.last_error or "",
            "step": self.steps, "history": self._history_answer[0], "history_results": self._history_answer[1],
        }
        if self._bgym is not None:
            raw = getattr(self.backend, "bgym_raw", None)
            if raw is not None:  # the browser's own snapshots
                page, titles, active = bgym_obs.from_capture(raw, tree), raw["titles"], raw["active"]
            else:
                page, titles, active = bgym_obs.from_tree(tree), [tree.title], 0
            obs.update(self._bgym.keys(tree=tree, url=obs["url"], urls=obs["open_pages"], titles=titles,
                                       active=active, error=obs["last_action_error"], page=page))
        return obs


def render_history(history: dict) -> str:
    """What an agent reads of a history search: one line per entry, best first."""
    results = history.get("results") or []
    lines = [f"History search {history.get('query', '')!r}: {len(results)} "
             f"entr{'y' if len(results) == 1 else 'ies'} found"]
    for e in results:
        status = f" ({e['status']})" if e.get("status") else ""
        lines.append(f"[{e.get('id')}] {e.get('timestamp', '')} {e.get('type', '')}: {e.get('object', '')}"
                     f" on {e.get('website', '')}{status} (score {float(e.get('score', 0)):.2f})")
    return "\n".join(lines)


def _missing(tree: Tree, bid: str) -> str:
    try:
        tree[bid]
    except AXTreeError as exc:
        return str(exc)
    return f"no element with bid {bid}"


class _TextBackend:
    """Pages straight from the archive, no browser."""

    def __init__(self, env: WebEnv):
        self.env = env
        self.replay = env.server.replay.open()  # the replay's answers, asked in-process (no server)
        self.replay.answers = []  # how each was matched: the steps' provenance
        self.url = ""
        self.html = b""
        self.history: list[tuple[str, bytes]] = []
        self.forward: list[tuple[str, bytes]] = []
        self.state: dict = {}
        self.cookies: dict[str, dict[str, str]] = {}
        self._doms: dict | None = None  # the sessions' DOM snapshots by URL (_session_doms)

    def take_answers(self) -> list[dict]:
        """The answers since the last call, as provenance records: every request of the text
        backend is a hop of a main-document load."""
        got, self.replay.answers = self.replay.answers, []
        return [answer_record("document", a.method, a.url, a.level, a.status, main=True, score=a.score,
                              capture_url=a.capture_url, mime=a.mime, size=a.size) for a in got]

    def reset(self, url: str) -> str | None:
        self.history, self.forward, self.cookies = [], [], {}
        self.url, self.html, self.state = "", b"", {}
        return self._load("GET", url)

    def _request(self, method: str, url: str, body: bytes = b"", ctype: str | None = None):
        for _ in range(MAX_REDIRECTS):
            headers = [("Host", urlsplit(url).netloc), ("Accept", "text/html,*/*"), ("Accept-Encoding", "gzip, br")]
            jar = self.cookies.get(host_key(url))
            if jar:
                headers.append(("Cookie", "; ".join(f"{k}={v}" for k, v in sorted(jar.items()))))
            if ctype:
                headers.append(("Content-Type", ctype))
            status, resp_headers, data = self.replay.fetch(method, url, headers, body)
            for k, v in resp_headers:
                if k.lower() == "set-cookie":
                    c = SimpleCookie()
                    try:
                        c.load(v)
                    except Exception:
                        continue
                    self.cookies.setdefault(host_key(url), {}).update({m.key: m.value for m in c.values()})
            location = header_value(resp_headers, "location")
            if status in (301, 302, 303, 307, 308) and location:
                from urllib.parse import urljoin

                url = urljoin(url, location)
                if status in (301, 302, 303):
                    method, body, ctype = "GET", b"", None
                continue
            try:
                data = decode_content(data, content_encoding(resp_headers))
            except DecodeError:
                pass
            return status, url, data
        return 0, url, b""

    def _load(self, method: str, url: str, body: bytes = b"", ctype: str | None = None) -> str | None:
        # A URL's #fragment is never sent (the request, its provenance, `replay coverage`); the page
        # keeps it, and keeps it across a redirect whose Location has none, as a browser does.
        asked, _, fragment = url.partition("#")
        before = len(self.replay.answers)
        status, final, data = self._request(method, asked, body, ctype)
        if status == 0:
            return f"could not load {asked}"
        miss = next((a for a in self.replay.answers[before:] if a.level == "miss"), None)
        if fragment and "#" not in final:
            final = f"{final}#{fragment}"
        # A GET of the page's own URL replaces its history entry, as a browser does (HTML's
        # navigate: same URL -> "replace"); any other load is a new entry.
        if self.url and not (method == "GET" and url == self.url):
            self.history.append((self.url, self.html))
            self.forward = []
        self.url, self.html, self.state = final, data, {}
        if miss is not None:
            return f"not captured: the archive has no {miss.method} {miss.url} (a replay miss)"
        return None if status < 400 else f"HTTP {status} for {final}"

    def observe(self):
        return build_tree(self.html, self.url or "about:blank", state=self.state), None

    def act(self, a: Action, target: dict | None) -> str | None:
        tree = self.env.tree
        try:
            if a.kind == "click":
                if target.get("tag") == "label":  # a click on a label is a click on its control
                    control = label_control(tree, a.bid)
                    described = tree.get(control) if control is not None else None
                    if described is not None and described.get("tag") == "input" and "checked" in described:
                        a, target = replace(a, bid=control), described
                if target.get("tag") == "input" and "checked" in target:
                    self.state[a.bid] = not target["checked"] if target.get("role") == "checkbox" else True
                    return None
                link = tree.link_target(a.bid)
                if link:
                    return self._load("GET", link)
                if is_submitter(tree, a.bid):
                    return self._submit(tree, a.bid)
                return None  # nothing a page without scripts would do
            if a.kind == "fill":
                self.state[a.bid] = a.text or ""
                if a.key == "Enter":
                    return self._submit(tree, a.bid)
                return None
            if a.kind == "select":
                many = (a.args or {}).get("options")
                self.state[a.bid] = list(many) if many else a.value
                return None
            if a.kind == "clear":
                self.state[a.bid] = ""
                return None
            if a.kind == "press":
                if (a.key or "").lower() == "enter" and a.bid:
                    return self._submit(tree, a.bid)
                return None
            if a.kind == "goto":
                return self._load("GET", a.url)
            if a.kind == "go_back":
                if not self.history:
                    return "no previous page"
                self.forward.append((self.url, self.html))
                self.url, self.html = self.history.pop()
                self.state = {}
                return None
            if a.kind == "go_forward":
                if not self.forward:
                    return "no next page"
                self.history.append((self.url, self.html))
                self.url, self.html = self.forward.pop()
                self.state = {}
                return None
            return None  # scroll, hover, focus, noop, a key on no element: nothing changes without a viewport
        except AXTreeError as exc:
            return str(exc)

    def _submit(self, tree: Tree, bid: str) -> str | None:
        method, url, body, ctype = form_submission(tree, bid, self.state, loaded_html=self._loaded_dom())
        return self._load(method.upper(), url, body, ctype)

    def _loaded_dom(self) -> bytes | str | None:
        """The page's DOM once its scripts had run, when the archive has one for this URL (a
        crawl's page record, a session's ``dom-snapshots/`` document), the one captured nearest the
        replay's time: which fields a script disabled at load, so that a form is submitted as a
        browser submits it."""
        arc = self.replay.archive
        if arc is None or not self.url:
            return None
        urls = tuple(dict.fromkeys((self.url, self.url.partition("#")[0])))
        found = [(p.captured_at, p.id, p.dom) for u in urls for p in arc.pages(url=u) if p.dom_digest]
        found += [(at, n, lambda html=html: html) for n, (at, html) in enumerate(
            x for u in urls for x in self._session_doms().get(u, []))]
        if not found:
            return None
        when = self.replay.when
        if when is not None:
            best = min(found, key=lambda f: (abs(parse_time(f[0]).timestamp() - when), f[0], f[1]))
        else:
            best = max(found, key=lambda f: (f[0], f[1]))
        return best[2]()

    def _session_doms(self) -> dict:
        """URL -> [(captured_at, html)] of the sessions' DOM snapshots, read once per episode's backend."""
        if self._doms is None:
            self._doms = {}
            arc = self.replay.archive
            for doc in arc.documents(prefix=DOM_SNAPSHOTS):
                value = arc.get_document(doc.name)
                for snap in (value.get("snapshots") if isinstance(value, dict) else None) or []:
                    if isinstance(snap, dict) and isinstance(snap.get("html"), str) and snap.get("captured_at"):
                        self._doms.setdefault(str(snap.get("url")), []).append((snap["captured_at"], snap["html"]))
        return self._doms

    def open_pages(self) -> list[str]:
        return [self.url]

    def screenshot(self) -> None:
        return None  # no viewport to take a picture of

    def close(self) -> None:
        self.replay.close()


class _Loop:
    """A private asyncio loop on its own thread. The browser backend drives Playwright's async API
    there, so that work for the next episode (a fresh context and page: Chromium starting a
    renderer, ~80 ms in the headless shell) goes on between the environment's calls instead of
    inside ``reset``."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="webfreeze-env-browser", daemon=True)
        self.thread.start()

    def run(self, coro):
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            # Interrupted (Ctrl-C): stop the call on the loop too, so that the next one does not
            # run beside it on the same page.
            if not future.done():
                future.cancel()
                concurrent.futures.wait([future], timeout=5)
            raise

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        if not self.thread.is_alive():
            self.loop.close()


def _quietly(task: asyncio.Future) -> None:
    """Retrieve a background task's exception (it has nobody to report to)."""
    if not task.cancelled():
        task.exception()


class _BrowserBackend:
    """Chromium through the in-process replay server, driven from a private loop thread.

    Each episode gets a fresh context and page made while the previous episode ran (a *spare*);
    the first ``reset`` makes its own."""

    def __init__(self, env: WebEnv):
        from playwright.async_api import async_playwright

        from .browser import launch_chromium

        self.env = env
        self.server = env.server.start()
        self._loop = _Loop()
        self._pw = None
        try:
            self._pw = self._loop.run(async_playwright().start())
            self.browser = self._loop.run(launch_chromium(self._pw, proxy=self.server.url, bypass_internal=False,
                                                          shell=True))
        except BaseException:
            if self._pw is not None:
                self._loop.run(self._pw.stop())
            self._loop.stop()
            self.server.stop()
            raise
        self.context = None
        self.page = None
        self._settles = 0  # settles so far: each one's token for the timer pump
        self.pump = True  # False only to measure the rule against the browser's own timers (benchmarks)
        self._spare: asyncio.Future | None = None
        # What the last observation saw: the loop thread goes on handling the page's events
        # between calls, so the live page.url could change under the caller.
        self._url = ""
        self._open_pages: list[str] = []
        self._answers: list[dict] = []  # provenance records of the responses seen since the last take
        self._answers_lock = threading.Lock()  # (the loop thread appends, the caller's thread takes)
        self.bgym_raw: dict | None = None  # BrowserGym's snapshots of the last observation (observation="browsergym")
        self._watched: dict = {}  # page -> its PageActivity: every page of the episode, once

    @property
    def url(self) -> str:
        return self._url

    def take_answers(self) -> list[dict]:
        """The responses (and failed requests) the pages reported since the last call."""
        with self._answers_lock:
            got, self._answers = self._answers, []
        return got

    def reset(self, url: str) -> str | None:
        return self._loop.run(self._reset(url))

    async def _fresh(self):
        from .browser import new_context

        # live runs with --http-credentials: the browser answers a site's 401 challenge with them
        credentials = (self.env.config.upstream or {}).get("http_credentials")
        context = await new_context(self.browser, **({"http_credentials": credentials} if credentials else {}))
        try:
            page = await context.new_page()
            await fast_animations(context, page)
            return context, page
        except BaseException:
            await context.close()
            raise

    async def _reset(self, url: str) -> str | None:
        old = self.context
        spare, self._spare = self._spare, None
        fresh = None
        if spare is not None:
            try:
                fresh = await spare
            except Exception:
                fresh = None  # made again below; a browser that went away fails there, loudly
        self.context, page = fresh or await self._fresh()
        # The next episode's context and page, made while this one loads its first page (made
        # after it, they would slow the first steps instead).
        self._spare = asyncio.ensure_future(self._fresh())
        self._spare.add_done_callback(_quietly)
        if old is not None:
            await old.close()
        self._watched = {}
        self.page = self._watch(page)
        return await self._navigate(self.page.goto(url, wait_until="load"))

    async def _navigate(self, awaitable) -> str | None:
        from playwright.async_api import Error as PlaywrightError

        try:
            await awaitable
            await self._settle()
        except PlaywrightError as exc:
            return str(exc).splitlines()[0]
        return None

    def _watch(self, page):
        """``page`` as the active one (the first time: its timeout set and its events counted)."""
        watched = self._watched.get(page)
        if watched is None:
            page.set_default_timeout(ACTION_TIMEOUT_MS)
            watched = self._watched[page] = PageActivity(page)
            self._count_answers(page)
        self._activity = watched
        return page

    def _count_answers(self, page) -> None:
        """Record how the replay answered each request of ``page`` (its X-Webfreeze headers): the
        steps' provenance. A request that failed (no answer) counts as a miss."""

        def main(request) -> bool:
            try:
                return request.is_navigation_request() and request.frame == page.main_frame
            except Exception:  # a frame already detached
                return False

        def on_response(response) -> None:
            request = response.request
            if not request.url.startswith(("http:", "https:")):
                return
            h = response.headers
            level = h.get("x-webfreeze-match") or "miss"
            score = h.get("x-webfreeze-score")
            size = h.get("content-length")
            rec = answer_record(
                kind_of_resource(request.resource_type), request.method, request.url, level, response.status,
                main=main(request), score=float(score) if score else None,
                capture_url=h.get("x-webfreeze-capture-url"),  # (as the header has it: ASCII URLs unchanged)
                mime=h.get("content-type") if level != "miss" else None,
                size=int(size) if size and size.isdigit() and level != "miss" else None)
            with self._answers_lock:
                self._answers.append(rec)

        def on_failed(request) -> None:
            if request.url.startswith(("http:", "https:")):
                rec = answer_record(kind_of_resource(request.resource_type), request.method, request.url, "miss", 0,
                                    main=main(request))
                with self._answers_lock:
                    self._answers.append(rec)

        page.on("response", on_response)
        page.on("requestfailed", on_failed)

    async def _settle(self, extra_ms: int = 0) -> None:
        """Wait for a navigation the action started to commit, for the load event, then until
        nothing (request or navigation) has been in flight for SETTLE_MS; then run the page's due
        timers (:func:`pump_timers`, ``extra_ms`` more virtual time for a wait action) and, if any
        ran, settle again; again too if a document committed meanwhile and has not loaded yet. A
        settled page has also painted (see :func:`wait_painted`), so the agent's next action is not
        dropped."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        activity = self._activity
        self._settles += 1
        token = self._settles
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                await wait_painted(self.page)  # input sent before the first paint would be dropped
                return
            await activity.wait_commit(left)
            try:
                await self.page.wait_for_load_state("load", timeout=ACTION_TIMEOUT_MS)
            except Exception:
                return
            activity.loaded = True
            await activity.wait_quiet(SETTLE_MS, max(0.0, deadline - time.monotonic()))
            if activity.pending is None and activity.loaded:
                await wait_painted(self.page)
                if activity.pending is None and activity.loaded:  # no navigation began meanwhile
                    # the pump after the paint: a page that has just loaded answers late before it
                    if self.pump and await pump_timers(self.page, token, extra_ms=extra_ms):
                        continue  # timers ran: what they started (loads, a navigation) is waited for
                    return

    async def _click(self, sel: str, bid: str) -> bool:
        """A left click on the element: straight through the mouse at the centre of its box when
        a pointer there hits it (no waiting: the observation it comes from is settled), else
        Playwright's ``click`` with its actionability waits (and its error when they fail).
        True when it went through the mouse."""
        from playwright.async_api import Error as PlaywrightError

        point = await self.page.evaluate(CLICK_POINT_JS, bid)
        if not (point and point["hit"]):
            await self.page.click(sel)
            return False
        mark = self._activity.mark()
        pages = len(self.context.pages)
        await self.page.mouse.click(point["x"], point["y"])
        if point.get("popup") and len(self.context.pages) == pages:
            try:
                await self.context.wait_for_event("page", timeout=POPUP_WAIT_MS)
            except PlaywrightError:
                pass  # a target that named an existing frame, or a blocked window
        await self._announced(NAVIGATING_JS, mark)
        return True

    async def _announced(self, question: str, mark=None) -> bool:
        """Ask the page whether a navigation was announced (NAVIGATING_JS right after a mouse
        click, LATE_NAVIGATION_JS after its settle); if so, expect it unless its request or a
        commit has been seen since ``mark`` (default: now)."""
        from playwright.async_api import Error as PlaywrightError

        mark = self._activity.mark() if mark is None else mark
        try:
            announced = await self.page.evaluate(question)
        except PlaywrightError:
            announced = True  # the document went away under the question
        if announced:
            self._activity.expect_navigation(mark)
        return announced

    def observe(self):
        marked, shot, self._url, self._open_pages = self._loop.run(self._snapshot())
        tree = build_tree(marked["html"], self._url, marked["geometry"])
        if shot is not None and self.env.config.set_of_marks:
            shot = draw_marks(shot, tree.summaries())
        return tree, shot

    async def _snapshot(self):
        from playwright.async_api import Error as PlaywrightError

        await self._follow_new_pages()
        config = self.env.config
        keep_png = config.screenshots or config.set_of_marks  # (else BrowserGym's capture takes its own, faster)
        for attempt in range(SNAPSHOT_TRIES):
            try:
                # transitions and animations at their end, as the still screenshot below shows them
                await finish_animations(self.page)
                marked = await self.page.evaluate(MARK_JS)
                if config.observation == "browsergym":  # (after MARK_JS: its bids are in the snapshots)
                    self.bgym_raw = await bgym_obs.capture_browser(self.context, self.page, screenshot=not keep_png)
                break
            except PlaywrightError as exc:
                # A navigation the settle did not see coming (a script's timer, say): wait for
                # it as for any other, then look again.
                if attempt == SNAPSHOT_TRIES - 1 or "context was destroyed" not in str(exc):
                    raise
                await self._settle()
        shot = None
        browsergym = config.observation == "browsergym"
        if config.screenshots or config.set_of_marks:
            # still, as replay check's: two resets give the same bytes (issue 43)
            shot = await still_screenshot_async(self.page)
            if browsergym:
                self.bgym_raw["png"] = shot
            if not (config.screenshots or config.set_of_marks):
                shot = None
        return read_marked(marked), shot, self.page.url, [p.url for p in self.context.pages]

    async def _follow_new_pages(self) -> None:
        """A page opened since the last look (a link to another window) becomes the active one, as
        one the active page closed hands over to the last one left."""
        pages = self.context.pages
        new = [p for p in pages if p not in self._watched]
        if new or (pages and self.page not in pages):
            self.page = self._watch(new[-1] if new else pages[-1])
            try:
                await fast_animations(self.context, self.page)  # (as the episode's first page)
            except Exception:
                pass  # a window that closed at once: the settle below sees it
            await self._settle()

    def act(self, a: Action, target: dict | None) -> str | None:
        return self._loop.run(self._act(a))

    async def _act(self, a: Action) -> str | None:
        from playwright.async_api import Error as PlaywrightError

        page = self.page
        sel = f'[data-wf-bid="{a.bid}"]' if a.bid else None
        more = a.args or {}
        with self._answers_lock:
            seen = len(self._answers)  # (the main documents this action loads are checked below)
        by_mouse = False
        try:
            if a.kind == "click":
                if more:  # another button, or modifiers: Playwright's click, as BrowserGym's
                    await page.locator(sel).click(button=more.get("button", "left"), modifiers=more.get("modifiers"))
                else:
                    by_mouse = await self._click(sel, a.bid)
            elif a.kind == "dblclick":
                await page.locator(sel).dblclick(button=more.get("button", "left"), modifiers=more.get("modifiers"))
            elif a.kind == "fill":
                if more.get("autocomplete"):  # BrowserGym's: all but the last character filled, that one typed
                    text, box = a.text or "", page.locator(sel)
                    # BrowserGym clears first; an empty field is left alone: clearing it would fire an
                    # input event for "" that no person's typing made (a search box would ask for q=)
                    if await box.evaluate("e => ('value' in e ? e.value : e.textContent) || ''"):
                        await box.clear()
                    if len(text) > 1:
                        await box.fill(text[:-1])
                    if text:
                        await box.press_sequentially(text[-1])
                else:
                    await page.fill(sel, a.text or "")
                if a.key == "Enter":
                    await page.press(sel, "Enter")
            elif a.kind == "select":
                many = more.get("options")
                await page.locator(sel).select_option(list(many) if many else a.value)  # (a value or a label)
            elif a.kind == "hover":
                await page.hover(sel)
            elif a.kind == "focus":
                await page.locator(sel).focus()
            elif a.kind == "clear":
                await page.locator(sel).clear()
            elif a.kind == "press":
                if sel:
                    await page.press(sel, a.key or "Enter")
                else:
                    await page.keyboard.press(a.key or "Enter")
            elif a.kind == "drag_and_drop":
                await page.locator(sel).hover()
                await page.mouse.down()
                await page.locator(f'[data-wf-bid="{more["to_bid"]}"]').hover()
                await page.mouse.up()
            elif a.kind in ("upload_file", "mouse_upload_file"):
                missing = [f for f in more["files"] if not Path(f).is_file()]
                if missing:
                    return f"{a.kind}(): no such file {missing[0]!r}"
                async with page.expect_file_chooser() as chooser:
                    if sel:
                        await page.locator(sel).click()
                    else:
                        await page.mouse.click(more["x"], more["y"])
                await (await chooser.value).set_files(list(more["files"]))
            elif a.kind == "scroll" and "delta_x" in more:
                await page.mouse.wheel(more["delta_x"], more["delta_y"])
            elif a.kind == "scroll":
                dy = (a.amount or 500) * (-1 if a.direction == "up" else 1) if a.direction in ("up", "down") else 0
                dx = (a.amount or 500) * (-1 if a.direction == "left" else 1) if a.direction in ("left", "right") else 0
                if sel:
                    await page.locator(sel).evaluate("(el, d) => el.scrollBy(d[0], d[1])", [dx, dy])
                else:
                    await page.mouse.wheel(dx, dy)
            elif a.kind == "scroll_at":
                await page.mouse.move(more["x"], more["y"])
                await page.mouse.wheel(more["dx"], more["dy"])
            elif a.kind == "mouse_move":
                await page.mouse.move(more["x"], more["y"])
            elif a.kind in ("mouse_up", "mouse_down"):
                await page.mouse.move(more["x"], more["y"])
                await getattr(page.mouse, a.kind[6:])(button=more.get("button", "left"))
            elif a.kind in ("mouse_click", "mouse_dblclick"):
                await getattr(page.mouse, a.kind[6:])(more["x"], more["y"], button=more.get("button", "left"))
            elif a.kind == "mouse_drag_and_drop":
                await page.mouse.move(more["from_x"], more["from_y"])
                await page.mouse.down()
                await page.mouse.move(more["to_x"], more["to_y"])
                await page.mouse.up()
            elif a.kind in ("keyboard_down", "keyboard_up"):
                await getattr(page.keyboard, a.kind[9:])(a.key)
            elif a.kind == "keyboard_type":
                await page.keyboard.type(a.text or "")
            elif a.kind == "keyboard_insert_text":
                await page.keyboard.insert_text(a.text or "")
            elif a.kind in ("new_tab", "tab_close", "tab_focus"):
                problem = await self._tabs(a)
                if problem:
                    return problem
            elif a.kind == "goto":
                await page.goto(a.url, wait_until="load")
            elif a.kind in ("go_back", "go_forward"):
                if not await self._can_go(page, back=a.kind == "go_back"):
                    return "no previous page" if a.kind == "go_back" else "no next page"
                await (page.go_back if a.kind == "go_back" else page.go_forward)(wait_until="load")
            # a wait is virtual time for the page's timers (the settle's pump), not a real sleep
            await self._settle(extra_ms=min(a.amount or 0, 5000) if a.kind == "noop" else 0)
            if a.kind == "click" and by_mouse and await self._announced(LATE_NAVIGATION_JS):
                await self._settle()
        except PlaywrightError as exc:
            return str(exc).splitlines()[0]
        with self._answers_lock:
            loaded = [r for r in self._answers[seen:] if r["main"] and r["status"]]
        miss = next((r for r in loaded if r["level"] == "miss"), None)
        if miss is not None:  # (the text backend's words for the same load)
            return f"not captured: the archive has no {miss['method']} {miss['url']} (a replay miss)"
        if loaded and loaded[-1]["status"] >= 400:  # (as the text backend says of a page that failed)
            return f"HTTP {loaded[-1]['status']} for {loaded[-1]['url']}"
        return None

    async def _tabs(self, a: Action) -> str | None:
        """BrowserGym's tab actions: a new blank tab becomes the active one; closing the active tab
        activates the last one left (a new blank one if none is); ``tab_focus(i)`` activates the
        i-th open tab."""
        pages = self.context.pages
        if a.kind == "tab_focus":
            index = a.args["index"]
            if not -len(pages) <= index < len(pages):
                return f"tab_focus(): no tab {index} ({len(pages)} open)"
            page = pages[index]
        elif a.kind == "new_tab":
            page = await self.context.new_page()
        else:
            await self.page.close()
            page = self.context.pages[-1] if self.context.pages else await self.context.new_page()
        self.page = self._watch(page)
        await page.bring_to_front()
        return None

    @staticmethod
    async def _can_go(page, *, back: bool) -> bool:
        """Whether the page's history has an entry of this episode before (or after) the current
        one: the blank page a new tab starts on does not count, as in the text backend."""
        cdp = await page.context.new_cdp_session(page)
        try:
            history = await cdp.send("Page.getNavigationHistory")
        finally:
            await cdp.detach()
        to = history["currentIndex"] + (-1 if back else 1)
        entries = history["entries"]
        return 0 <= to < len(entries) and entries[to]["url"] != "about:blank"

    def open_pages(self) -> list[str]:
        return list(self._open_pages)

    def screenshot(self) -> bytes:
        return self._loop.run(still_screenshot_async(self.page))

    def close(self) -> None:
        if self._loop is None:
            return
        try:
            self._loop.run(self._close())
        finally:
            self._loop.stop()
            self._loop = None
            self.server.stop()

    async def _close(self) -> None:
        try:
            if self._spare is not None:
                try:
                    context, _ = await self._spare
                    await context.close()
                except Exception:
                    pass
            if self.context is not None:
                await self.context.close()
            await self.browser.close()
        finally:
            await self._pw.stop()
