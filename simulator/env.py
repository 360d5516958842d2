"""The agent environment: a Gymnasium-compatible ``Env`` over a replayed archive.

``reset(seed=None, options={"task": {...}}) -> (obs, info)``, ``step(action) -> (obs, reward,
terminated, truncated, info)``, ``close()``. Two backends share the observation format
(:mod:`webfreeze.simulator.axtree`) and the action parser (:mod:`webfreeze.simulator.actions`),
and this class sees them only through :class:`webfreeze.simulator.backends.Backend`:

- ``browser``: Debian's Chromium through the replay server (proxy mode, in this process), one
  browser per environment and a fresh context per episode, 1920x1080, scale 1, en-US, UTC, service
  workers blocked, the page clock frozen at the capture time by the replay runtime
  (:mod:`webfreeze.simulator.browser_backend`).
- ``text``: no browser. HTML comes from the archive through the same matching (and site models),
  is parsed with lxml, scripts are ignored; links are followed and forms submitted (GET and POST)
  by building the request a browser would send (:mod:`webfreeze.simulator.forms`). Cookies are
  kept per host (:mod:`webfreeze.simulator.text_backend`).

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

import functools
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import gymnasium as gym

from webfreeze.archives import archive_digest
from webfreeze.common.errors import WebfreezeError
from webfreeze.replayer.hooks import SiteModel
from webfreeze.replayer.matching import AGENT_RULES
from webfreeze.replayer.server import ReplayServer

from . import bgym_obs
from . import spaces as wf_spaces
from .actions import target_problem, text_refusal, try_parse
from .axtree import AXTreeError, Tree
from .backends import Backend, check_backend, open_backend
from .live import episode_tag, open_upstream
from .provenance import step_provenance
from .trajectory import TrajectoryRecorder

REWARDS = ("zero", "score")


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
        self.backend: Backend = open_backend(config.backend, self)
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
        self.backend.take_dialogs()  # (nor its dialogs; the start page's go with the first step)
        self.last_error = self.backend.reset(task["start_url"])
        obs = self._observe()
        start = step_provenance(self.backend.take_answers())
        if self.last_error:  # the start page did not load (the agent sees why: so does the trajectory)
            # (or it loaded as the site gave it and the text backend cannot show it: not a replay failure)
            shown = "note" if self.last_error == getattr(self.backend, "unshown", None) else "error"
            start[shown] = str(self.last_error).splitlines()[0]
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
        before_png = self._png  # (the page the action is taken on, as its url, title and digest are)
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
        shot = before_png
        self.recorder.add_step(url=before_url, title=before_tree.title if before_tree else "", obs_digest=obs_digest,
                               action=action, parsed=parsed, target=target, url_after=self.backend.url,
                               agent=agent, error=error, env_ms=env_ms, screenshot=shot, dom=dom,
                               replay=step_provenance(self.backend.take_answers()),
                               dialogs=self.backend.take_dialogs())
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
                               replay=step_provenance(self.backend.take_answers()),
                               dialogs=self.backend.take_dialogs())
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
        return first_page(self.config.archive)

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
            raw = self.backend.bgym_raw
            if raw is not None:  # the browser's own snapshots
                page, titles, active = bgym_obs.from_capture(raw, tree), raw["titles"], raw["active"]
            else:
                page, titles, active = bgym_obs.from_tree(tree), [tree.title], 0
            obs.update(self._bgym.keys(tree=tree, url=obs["url"], urls=obs["open_pages"], titles=titles,
                                       active=active, error=obs["last_action_error"], page=page))
        return obs


def first_page(archive) -> str | None:
    """Where an episode without a task starts (exploration): the archive's first recorded page."""
    from webfreeze.archives import Archive

    with Archive.open(archive) as arc:
        return next((page.url for page in arc.pages(limit=1)), None)


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
