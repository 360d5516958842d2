"""Frozen tasks as Gymnasium environments in BrowserGym's style: ``browsergym/webfreeze.<suite>.<task>``.

``import webfreeze.browsergym`` registers every task of the shipped demo suite (suite key
``demo``); :func:`register_suite` registers any other suite. Then, as for BrowserGym's own
benchmarks::

    import gymnasium as gym
    import webfreeze.browsergym
    env = gym.make("browsergym/webfreeze.demo.scholar-site-info-001", record_to="runs/mine")
    obs, info = env.reset()
    obs, reward, terminated, truncated, info = env.step("send_msg_to_user('320')")

Each id's environment is :class:`FrozenTaskEnv`: our environment over the suite's replayed archive
(its site models and replay rules as ``bench run`` sets them), on the task, with BrowserGym's
observation keys (``EnvConfig(observation="browsergym")``) and BrowserGym's action strings. The
reward is our score of the episode (0 to 1, on the step that ends it); the ``info`` of that step
carries our trajectory (``info["trajectory"]``). With ``record_to=DIR`` each episode is written
into DIR as a run folder like ``bench run``'s (manifest, tasks.jsonl, references, trajectories),
so ``webfreeze eval report DIR`` scores it and bundles take it. Several environments (say one per
task, in parallel processes, as AgentLab runs them) may write into the same DIR.

``gym.make`` takes BrowserGym's ``BrowserEnv`` arguments too, so harnesses written for it (AgentLab's
``EnvArgs.make_env``) work unchanged: the ones that change nothing here (``headless``,
``action_mapping``: we parse the action string ourselves, ``pre_observation_delay``: pages are
settled by rule, ...) are accepted and ignored; the ones that would change the frozen world (another
viewport, locale or time zone, raw page output, waiting for a human) are refused in one line.

This module needs neither BrowserGym nor AgentLab installed.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import ClassVar

import gymnasium as gym

from webfreeze.common.errors import WebfreezeError
from webfreeze.common.files import write_json
from webfreeze.common.text import one_line
from webfreeze.demo import SUITE as DEMO_SUITE
from webfreeze.env import EnvConfig, WebEnv
from webfreeze.eval.errors import TaskError
from webfreeze.eval.infrastructure import AGENT_CAUSE, PROVIDER_CAUSE
from webfreeze.eval.tasks import load_suite, suite_digest
from webfreeze.llm.cassette_proxy import CassetteProxy
from webfreeze.runs.execute import copy_references, tasks_lines, used_entries
from webfreeze.runs.prepare import resolve_archive
from webfreeze.runs.spec import RUN_FORMAT, RUN_VERSION
from webfreeze.simulator.browser import page_runtime_digest
from webfreeze.simulator.site_models import SimulatedSiteModel, check_site_models
from webfreeze.simulator.trajectory import write_trajectory

NAMESPACE = "browsergym"
PREFIX = "webfreeze."
DEMO_KEY = "demo"
DEFAULT_AGENT = "browsergym"
# BrowserEnv's arguments that change nothing in a frozen replay: accepted, ignored.
IGNORED = frozenset({"headless", "action_mapping", "pre_observation_delay", "tags_to_mark", "slow_mo", "timeout",
                     "record_video_dir", "resizeable_window", "terminate_on_infeasible"})
# BrowserEnv's arguments allowed only at the value the frozen world has.
FIXED = {"viewport": (None, {"width": 1920, "height": 1080}), "locale": (None, "en-US"),
         "timezone_id": (None, "UTC"), "wait_for_user_message": (False,), "use_raw_page_output": (False,),
         "pw_chromium_kwargs": (None, {}), "pw_context_kwargs": (None, {})}
# FrozenTaskEnv's own settings, which may also come as task_kwargs.
TASK_KWARGS = ("archive", "backend", "seed", "max_steps", "screenshots", "record_to", "agent", "overwrite")
_ID_CHARS = re.compile(r"[^\w.-]")

_registered: dict[str, str] = {}  # suite key -> the suite path its ids were registered for
CASSETTE_NAME = "llm-cassette.sqlite"
_proxy: CassetteProxy | None = None  # the cassette proxy of an llm_cassette block, while one is open


class RegistrationError(WebfreezeError, ValueError):
    """A suite that cannot be registered, or an environment that cannot be made: one line."""


def suite_key(name: str) -> str:
    """The ``<suite>`` part of an id for a suite named ``name`` (``webfreeze-demo`` is ``demo``)."""
    key = name.removeprefix("webfreeze-")
    return _ID_CHARS.sub("-", key) or "suite"


def env_id(key: str, task_id: str) -> str:
    """``browsergym/webfreeze.<key>.<task_id>``."""
    return f"{NAMESPACE}/{PREFIX}{key}.{task_id}"


def register_suite(path, *, key: str | None = None, archive=None, **defaults) -> list[str]:
    """Register every task of the suite at ``path`` (a suite folder, manifest or .jsonl) as a
    Gymnasium id (see :func:`env_id`; ``key`` defaults to :func:`suite_key` of the suite's name).
    ``archive`` overrides the suite's; ``defaults`` are :class:`FrozenTaskEnv` arguments for every
    ``gym.make`` of these ids (``backend="text"``, say). Registering the same suite again is a
    no-op; another suite under a key already taken is refused. Returns the ids in suite order."""
    try:
        suite = load_suite(path)
    except TaskError as exc:
        raise RegistrationError(str(exc)) from None
    key = key or suite_key(suite.name)
    where = str(Path(suite.path or path).resolve())
    if _registered.get(key, where) != where:
        raise RegistrationError(f"suite key {key!r} is taken by {_registered[key]}; pass key=... for {path}")
    ids = []
    for task in suite.tasks:
        eid = env_id(key, task.id)
        ids.append(eid)
        if eid in gym.registry and key in _registered:
            continue
        gym.register(id=eid, entry_point=FrozenTaskEnv, nondeterministic=False,
                     kwargs={"suite": where, "task": task.id, "archive": None if archive is None else str(archive),
                             **defaults})
    _registered[key] = where
    return ids


def registered_ids(key: str | None = None) -> list[str]:
    """The ids registered so far (of one suite key, or all), each suite's in its order."""
    prefix = f"{NAMESPACE}/{PREFIX}" + (f"{key}." if key else "")
    return [i for i in gym.registry if i.startswith(prefix)]


# AgentLab's parallel studies hand each experiment to a worker process as a pickle of its ExpArgs,
# and make the environment there by task name: a worker that never imported this module would not
# know the ids. The tasks' EnvArgs are of this subclass, so that unpickling them imports (and so
# registers) this module first. Defined only where browsergym-experiments is installed.
try:
    from browsergym.experiments.benchmark.base import HighLevelActionSetArgs
    from browsergym.experiments.loop import EnvArgs as _BrowserGymEnvArgs
except ImportError:  # (no BrowserGym experiments here: nothing to subclass, nothing needs it)
    FrozenEnvArgs = TextActionSetArgs = None
else:
    @dataclass
    class FrozenEnvArgs(_BrowserGymEnvArgs):
        """BrowserGym's ``EnvArgs`` for a ``browsergym/webfreeze.*`` task (see above); ``suite`` and
        ``suite_key`` say which suite to register before making the environment (a suite other
        than the demo is registered only where ``register_suite`` ran)."""

        suite: str | None = None
        suite_key: str | None = None

        def make_env(self, action_mapping=None, exp_dir=None, *args, **kwargs):
            if self.suite is not None:
                register_suite(self.suite, key=self.suite_key)
            env = super().make_env(action_mapping, exp_dir, *args, **kwargs)
            frozen = env.unwrapped
            if isinstance(frozen, FrozenTaskEnv):
                frozen.harness = {"exp_dir": None if exp_dir is None else str(exp_dir),
                                  "agent_args": _calling_agent_args(self)}
            return env

    @dataclass
    class TextActionSetArgs(HighLevelActionSetArgs):
        """The action set of the text backend: BrowserGym's chat, infeas and nav subsets and the
        element actions pages without a browser can honour (``custom``: not serialisable as
        BrowserGym's own arguments are, so named here)."""

        subsets: tuple = ("chat", "infeas", "nav", "custom")

        def make_action_set(self):
            from browsergym.core.action import functions
            from browsergym.core.action.highlevel import HighLevelActionSet

            custom = [getattr(functions, name) for name in TEXT_BID_ACTIONS]
            return HighLevelActionSet(subsets=list(self.subsets), custom_actions=custom, multiaction=self.multiaction,
                                      strict=self.strict, retry_with_force=self.retry_with_force,
                                      demo_mode=self.demo_mode)


def _calling_agent_args(env_args) -> dict | None:
    """The agent's arguments of the AgentLab experiment making an environment of ``env_args``
    (``ExpArgs.run`` calls ``env_args.make_env``: its ``agent_args``), as JSON; None elsewhere."""
    frame = sys._getframe(1)
    while frame is not None:
        owner = frame.f_locals.get("self")
        if getattr(owner, "env_args", None) is env_args and hasattr(owner, "agent_args"):
            return agent_args_json(owner.agent_args)
        frame = frame.f_back
    return None


def agent_args_json(agent_args) -> dict:
    """An AgentLab agent's arguments (a dataclass: its model, flags, action set) as plain JSON, with
    its class; what is not JSON is written as its ``repr``."""
    import dataclasses

    def plain(v):
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
        if isinstance(v, dict):
            return {str(k): plain(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        return repr(v)

    cls = type(agent_args)
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "args": plain(agent_args)}


# The BrowserGym action subsets an agent is offered in the browser backend: all of BrowserGym's
# high-level set (answers, infeasibility, element and coordinate actions, navigation, tabs).
ACTION_SUBSETS = ("chat", "infeas", "bid", "coord", "nav", "tab")
# The text backend's element actions (beside chat, infeas and nav): what pages without a browser can
# honour (simulator/actions.py's TEXT_REFUSED are the others).
TEXT_BID_ACTIONS = ("scroll", "fill", "select_option", "click", "hover", "press", "focus", "clear", "keyboard_press")


def agentlab_benchmark(key: str = DEMO_KEY, *, tasks=None, max_steps: int = 30, seed: int = 0, **settings):
    """A ``bgym.Benchmark`` of the suite registered under ``key`` (BrowserGym's experiment
    description that AgentLab's studies and agents take: ``agent_args.set_benchmark(benchmark,
    demo_mode=False)`` gives the agent the action set this environment understands). ``tasks``
    narrows it to some task ids; ``settings`` are :class:`FrozenTaskEnv` settings (``backend``,
    ``record_to``, ``agent``) passed as the tasks' ``task_kwargs``. Needs ``browsergym-experiments``
    (imported here, late: the registration itself needs no BrowserGym)."""
    from bgym import Benchmark

    bad = sorted(set(settings) - set(TASK_KWARGS))
    if bad:
        raise RegistrationError(f"{', '.join(map(repr, bad))}: not a setting of a frozen task "
                                f"(settings: {', '.join(TASK_KWARGS)})")
    if key not in _registered:
        raise RegistrationError(f"no suite is registered under {key!r} (register_suite(path, key=...))")
    ids = [i.split("/", 1)[1] for i in registered_ids(key)]
    if tasks is not None:
        wanted = {f"{PREFIX}{key}.{t}" for t in tasks}
        missing = sorted(wanted - set(ids))
        if missing:
            raise RegistrationError(f"not registered: {', '.join(missing)}")
        ids = [i for i in ids if i in wanted]
    if settings.get("record_to") and not settings.get("overwrite"):
        _refuse_played(Path(settings["record_to"]), _registered[key], [i.removeprefix(f"{PREFIX}{key}.") for i in ids])
    task_kwargs = {k: str(v) if isinstance(v, Path) else v for k, v in settings.items()}
    # (the backend given here, else the one the suite was registered with)
    registered = gym.spec(f"{NAMESPACE}/{ids[0]}").kwargs if ids else {}
    text = settings.get("backend", registered.get("backend", "browser")) == "text"
    actions = TextActionSetArgs(multiaction=False) if text else HighLevelActionSetArgs(subsets=ACTION_SUBSETS,
                                                                                        multiaction=False)
    return Benchmark(
        name=f"{PREFIX}{key}", is_multi_tab=not text, supports_parallel_seeds=True, backends=[],
        high_level_action_set_args=actions,
        env_args_list=[FrozenEnvArgs(task_name=i, task_seed=seed, max_steps=max_steps, headless=True,
                                     task_kwargs=dict(task_kwargs), suite=_registered[key], suite_key=key)
                       for i in ids])


class FrozenTaskEnv(gym.Env):
    """One task of a suite over its replayed archive, as BrowserGym environments are: observations
    with BrowserGym's keys, BrowserGym's action strings, the task's score as the final reward.

    ``backend``, ``seed``, ``max_steps`` and ``screenshots`` are our environment's settings;
    ``record_to`` a run folder to write each episode into, under the agent name ``agent``."""

    metadata: ClassVar[dict] = {"render_modes": []}

    def __init__(self, suite, task: str, *, archive=None, backend: str = "browser", seed: int = 0,
                 max_steps: int = 30, screenshots: bool = False, record_to=None, agent: str = DEFAULT_AGENT,
                 overwrite: bool = False, **browsergym_kwargs):
        # Harnesses that build environments from a task name pass settings as BrowserGym's
        # task_kwargs (AgentLab's EnvArgs): ours are taken from there too.
        given = browsergym_kwargs.pop("task_kwargs", None) or {}
        unknown = sorted(set(given) - set(TASK_KWARGS))
        if unknown:
            raise RegistrationError(f"task_kwargs {', '.join(map(repr, unknown))}: not a setting of a frozen task "
                                    f"(settings: {', '.join(TASK_KWARGS)})")
        archive = given.get("archive", archive)
        backend, seed, max_steps = given.get("backend", backend), given.get("seed", seed), given.get("max_steps", max_steps)
        screenshots, record_to = given.get("screenshots", screenshots), given.get("record_to", record_to)
        agent = given.get("agent", agent)
        overwrite = bool(given.get("overwrite", overwrite))
        for name, value in browsergym_kwargs.items():
            if name in FIXED:
                if value not in FIXED[name]:
                    raise RegistrationError(f"{name}={value!r} is not available on a frozen benchmark "
                                            f"(its world is fixed: {FIXED[name][-1]!r})")
            elif name not in IGNORED:
                raise TypeError(f"FrozenTaskEnv got an unexpected argument {name!r}")
        try:
            loaded = load_suite(suite)
        except TaskError as exc:
            raise RegistrationError(str(exc)) from None
        if task not in loaded.by_id():
            raise RegistrationError(f"no task {task!r} in suite {loaded.name}")
        site_models = dict(sorted(((loaded.manifest or {}).get("site_models") or {}).items()))
        rules = (loaded.manifest or {}).get("replay_rules") or None
        try:
            check_site_models(site_models, RegistrationError)
            path = resolve_archive(loaded, archive)
        except WebfreezeError as exc:
            raise RegistrationError(str(exc)) from None
        self.suite, self.task_id, self.record_to, self.agent = loaded, task, record_to, agent
        self.overwrite = overwrite
        # What an AgentLab experiment says of itself (set by FrozenEnvArgs.make_env): its folder, where
        # it writes summary_info.json (its err_msg) before closing us, and its agent's arguments.
        self.harness: dict = {}
        self.settings = {"backend": backend, "seed": seed, "max_steps": max_steps, "screenshots": screenshots,
                         "site_models": site_models, **({"replay_rules": rules} if rules else {})}
        self.env = WebEnv(EnvConfig(path, backend=backend, seed=seed, max_steps=max_steps, screenshots=screenshots,
                                    site_models=[SimulatedSiteModel(kind, host) for host, kind in site_models.items()],
                                    rules=rules, suite=loaded, reward="score", observation="browsergym"))
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space
        self._open = False  # an episode whose trajectory has not been written yet
        self._steps = 0

    @property
    def chat(self):
        """The episode's chat (``messages`` and ``add_message(role, msg)``, as BrowserGym's)."""
        return self.env.browsergym

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """A new episode of the task (the previous one, if unfinished, is written as stopped)."""
        self._flush(stopped=True)
        if self.record_to is not None:  # refused now, not after the episode: another run, a task played
            check_run_folder(Path(self.record_to), run_identity(self.suite, self.env, self._agent_record(),
                                                                self.settings), self.task_id, overwrite=self.overwrite)
        super().reset(seed=seed)
        obs, info = self.env.reset(seed=seed, options={**(options or {}), "task": self.task_id})
        self._open = True
        self._steps = 0
        if _proxy is not None:  # the agent's LLM calls from now on are this episode's
            _proxy.begin_episode(self.task_id)
        return obs, dict(info, task_info={})

    def step(self, action: str):
        """BrowserGym's step: the wall-clock times its harnesses read are in ``info`` (only here:
        nothing else in the episode depends on them)."""
        start = time.time()
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        if _proxy is not None:
            _proxy.set_step(self._steps)
        info = dict(info, task_info={}, action_exec_start=start, action_exec_stop=time.time(), action_exec_timeout=0)
        if terminated or truncated:
            info["trajectory"] = self._flush()
        return obs, reward, terminated, truncated, info

    def trajectory(self) -> dict:
        """The current episode's trajectory. An episode still open is finished by it (as if its
        steps had run out): read it once the episode has ended, or as its end."""
        return self.env.trajectory()

    def _flush(self, *, stopped: bool = False) -> dict | None:
        """End the open episode's record (as ``stopped`` if it is unfinished) and write it into the
        run folder when asked; its trajectory."""
        if not self._open:
            return None
        self._open = False
        trajectory = self.env.trajectory(stopped=stopped)
        if stopped:
            crash = self._harness_error()
            if crash is not None:  # the agent (or its LLM calls) raised: the episode ended in an error
                trajectory["end"] = crash
        agent = self._agent_record()
        trajectory["agent"] = agent
        trajectory["suite"] = {"name": self.suite.name, "digest": self.suite.digest}
        trajectory["env"]["site_models"] = self.settings["site_models"]
        if _proxy is not None:
            used = _proxy.take_used()
            if used:  # the cassette entries the agent's calls used, as a run's trajectories name them
                trajectory["llm_entries"] = used
        if self.record_to is not None:
            record_episode(Path(self.record_to), self.suite, self.task_id, trajectory, self.env, agent,
                           self.settings, llm=_proxy, overwrite=self.overwrite)
        return trajectory

    def _agent_record(self) -> dict:
        """The trajectory's and the run's ``agent``: the name, and for an AgentLab agent its
        arguments (``config``) and AgentLab's version, so that two configurations never share a run."""
        args = self.harness.get("agent_args")
        if args is None:
            return {"name": self.agent, "config": {}, "oracle": False}
        config = {**args}
        try:
            config["agentlab"] = version("agentlab")
        except PackageNotFoundError:
            config["agentlab"] = None
        return {"name": self.agent, "config": config, "oracle": False}

    def _harness_error(self) -> dict | None:
        """An ``end`` for an episode an AgentLab experiment stopped with an error (its
        summary_info.json, written before it closes us, holds ``err_msg``); None otherwise."""
        folder = self.harness.get("exp_dir")
        if not folder:
            return None
        try:
            summary = json.loads((Path(folder) / "summary_info.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        err_msg = summary.get("err_msg") if isinstance(summary, dict) else None
        if not isinstance(err_msg, str) or not err_msg.strip():
            return None
        cause = error_cause(err_msg, summary.get("stack_trace"))
        return {"reason": "error", "detail": one_line(err_msg, 500), "cause": cause, "err_msg": err_msg}

    def close(self) -> None:
        try:
            self._flush(stopped=True)
        finally:
            self.env.close()


# ------------------------------------------------------------------------------------ run folders
@contextmanager
def _locked(out: Path):
    """The run folder to ourselves: environments in other processes may write into it too."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".record.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _versions(backend: str | None = None) -> dict:
    found = {"python": sys.version.split()[0]}
    if backend == "browser":  # (the runtime injected into replayed pages, as bench run records it)
        found["page_runtime"] = page_runtime_digest()
    for dist in ("webfreeze", "gymnasium", "browsergym-core", "agentlab"):
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            pass
    return found


def record_episode(out: Path, suite, task_id: str, trajectory: dict, env: WebEnv, agent, settings: dict,
                   llm: CassetteProxy | None = None, *, overwrite: bool = False) -> None:
    """Write one episode into the run folder ``out`` (made if need be): its trajectory (with its
    screenshots and DOM snapshots), the task's line in ``tasks.jsonl`` and its reference, and the
    manifest counting every task recorded so far. A folder holding another suite's, archive's,
    agent's or settings' run is refused. With ``llm`` (the cassette proxy the agent's calls went
    through) the manifest accounts for the calls as ``bench run``'s does: ``llm`` (the digest of
    the entries the trajectories name) and the cassette, its mode and digest as circumstances.
    ``agent`` is a name or the agent's record (``name``, ``config``, ``oracle``). A task the folder
    holds already is refused unless ``overwrite``."""
    if isinstance(agent, str):
        agent = {"name": agent, "config": {}, "oracle": False}
    identity = run_identity(suite, env, agent, settings)
    with _locked(out):
        manifest_path = out / "manifest.json"
        old = check_run_folder(out, identity, task_id, overwrite=overwrite)
        shots = {**env.recorder.shots, **env.recorder.doms} if env.recorder else {}
        write_trajectory(trajectory, out, shots)
        done = set(_played(old)) | {task_id}
        chosen = [t for t in suite.tasks if t.id in done]  # (in the suite's order)
        (out / "tasks.jsonl").write_text(tasks_lines(chosen), encoding="utf-8")
        copy_references(chosen, suite.root, out)
        ids = [t.id for t in chosen]
        manifest = {
            "format": RUN_FORMAT, "version": RUN_VERSION, **identity,
            "archive_matches_suite": None if not suite.archive_digest else suite.archive_digest == env.archive_digest,
            "agent_settings": {},
            "selection": {"tasks": [], "limit": None, "selected": len(ids), "ids": ids,
                          "digest": suite_digest([t.raw for t in chosen])},
            "versions": _versions(env.config.backend), "complete": True, "tasks_done": len(ids),
            "circumstances": {"recorded_by": "webfreeze.browsergym",
                              "suite_path": os.path.relpath(Path(suite.root).resolve(), out.resolve()),
                              "archive_path": os.path.relpath(Path(env.config.archive).resolve(), out.resolve())},
        }
        if llm is not None and llm.cassette is not None:
            used = used_entries(out)
            if used:
                digest, calls = llm.cassette.entries_digest(used)
                manifest["llm"] = {"entries_digest": digest, "calls": calls}
            manifest["circumstances"].update(_cassette_circumstances(llm, out))
        write_json(manifest_path, manifest)


def run_identity(suite, env: WebEnv, agent: dict, settings: dict) -> dict:
    """What makes a run folder's episodes one run: the suite, the archive, the agent (its name and
    configuration: an AgentLab agent's arguments and version) and the environment's settings."""
    return {"suite": _suite_identity(suite), "archive": {"digest": env.archive_digest}, "agent": agent,
            "env": settings}


def _suite_identity(suite) -> dict:
    return {"name": suite.name, "digest": suite.digest, "tasks": len(suite.tasks)}


def _played(manifest: dict) -> list[str]:
    """The tasks a run folder these environments write holds episodes of (its selection's ids)."""
    return (manifest.get("selection") or {}).get("ids") or []


def check_run_folder(out: Path, identity: dict, task_id: str, *, overwrite: bool = False) -> dict:
    """The manifest of the run folder ``out`` (``{}`` when it holds no run yet), refused when it
    holds another run (what differs is said) or, unless ``overwrite``, an episode of ``task_id``."""
    manifest_path = out / "manifest.json"
    if not manifest_path.is_file():
        return {}
    try:
        old = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        old = None
    if not isinstance(old, dict):
        raise RegistrationError(f"{manifest_path}: not a readable run manifest; record_to a new folder")
    differs = [k for k in identity if old.get(k) != identity[k]]
    if differs:
        raise RegistrationError(f"{out} holds a different run (its {', '.join(differs)} differ); "
                                "record_to a new folder")
    if not overwrite and task_id in _played(old):
        raise RegistrationError(f"{out} already holds an episode of {task_id}; record_to another folder, "
                                "or pass overwrite=True to replace it")
    return old


def _refuse_played(out: Path, suite_path: str, task_ids: list[str]) -> None:
    """Refuse a benchmark whose run folder ``out`` holds episodes of some of its tasks already, before
    a harness plays anything (each episode's reset refuses it too, but inside AgentLab's loop that
    is a logged error per task and a script that ends as if it had played). Only a folder these
    environments recorded, of the same suite, is read so: any other run there is refused by each
    reset, saying what differs."""
    try:
        old = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        if (old.get("circumstances") or {}).get("recorded_by") != "webfreeze.browsergym":
            return
        if old.get("suite") != _suite_identity(load_suite(suite_path)):
            return
        played = _played(old)
        again = [t for t in task_ids if t in played]
    except (OSError, ValueError, AttributeError, TypeError, TaskError):
        return  # (no run yet; an unreadable one is refused by each episode, saying why)
    if again:
        named = ", ".join(again[:5]) + (f" and {len(again) - 5} more" if len(again) > 5 else "")
        left = len(task_ids) - len(again)
        raise RegistrationError(f"{out} already holds an episode of {named} ({len(again)} of {len(task_ids)} asked "
                                f"for, {left} left to play); record_to another folder, leave the "
                                "played ones out (tasks=[...]), or pass overwrite=True to play them again")


# What an exception that stopped an agent says of who failed: names of the errors of an LLM provider,
# of the network and of downloads (a tokenizer's, say). Anything else is the agent's own error.
_INFRASTRUCTURE_ERRORS = re.compile(
    r"\b(?:APIConnectionError|APITimeoutError|RateLimitError|InternalServerError|ServiceUnavailableError|"
    r"APIStatusError|AuthenticationError|PermissionDeniedError|ConnectionError|ConnectionRefusedError|"
    r"ConnectionResetError|ConnectTimeout|ReadTimeout|Timeout|TimeoutError|URLError|MaxRetryError|"
    r"NewConnectionError|RemoteDisconnected|ProxyError|SSLError|gaierror|ProviderError|LLMError)\b")


# AgentLab's own RetryError (agentlab.llm.chat_api: "Failed to get a response from the API after N
# retries\nLast error: ..."): its chat models raise it when every try of an API call failed. Who
# failed is read off the last error: an HTTP answer that says the request itself was wrong (400: a
# prompt too long; 404: an unknown model; 413; 422: a call the cassette has no answer for in strict
# replay; litellm's names for those) is the agent's; no answer at all, 401, 402, 403, 408, 409, 429
# and 5xx are infrastructure. Our cassette proxy answers a provider's refusal it does not retry as
# a 502 upstream_error naming the provider's status ("failed (not retried): HTTP 400"), read so.
_API_RETRIES = re.compile(r"Failed to get a response from the API after \d+ retr")
_LAST_ERROR = re.compile(r"^Last error: (.*)$", re.MULTILINE)
_HTTP_CODE = re.compile(r"Error code: (\d{3})\b")
_UPSTREAM_CODE = re.compile(r"failed \(not retried\): HTTP (\d{3})\b")
_REQUEST_ERRORS = re.compile(r"\b(?:BadRequestError|ContextWindowExceededError|NotFoundError|UnprocessableEntityError|"
                             r"ContentPolicyViolationError)\b")
_AGENT_CODES = {400, 404, 413, 422}


def _api_retries_cause(err_msg: str) -> str:
    last = _LAST_ERROR.search(err_msg)
    line = last.group(1) if last else ""
    if _REQUEST_ERRORS.search(line):
        return AGENT_CAUSE
    code = _UPSTREAM_CODE.search(line) or _HTTP_CODE.search(line)
    return AGENT_CAUSE if code and int(code.group(1)) in _AGENT_CODES else PROVIDER_CAUSE


def error_cause(err_msg: str, stack_trace: str | None = None) -> str:
    """``provider`` (infrastructure: an LLM provider, the network, a download the agent's LLM stack
    needed, such as tiktoken's) or ``agent`` (the agent's own error: a parse error, a bug), from
    AgentLab's ``err_msg`` (``...\\nErrorName:\\nmessage``) and stack trace."""
    lines = err_msg.splitlines()
    name = lines[1].strip().rstrip(":") if len(lines) > 1 and lines[0].startswith("Exception uncaught") else ""
    if _INFRASTRUCTURE_ERRORS.search(name):
        return PROVIDER_CAUSE
    if name.endswith("RetryError") and _API_RETRIES.search(err_msg):
        return _api_retries_cause(err_msg)
    # the errors the exception was raised from or during (a download failing under tiktoken, say):
    # each section of a stack trace ends with its unindented "ErrorName: message" line
    for line in (stack_trace or "").splitlines():
        if line[:1].strip() and not line.startswith(("Traceback", "During handling", "The above")):
            if _INFRASTRUCTURE_ERRORS.search(line.split(":", 1)[0]):
                return PROVIDER_CAUSE
    return AGENT_CAUSE


def _cassette_circumstances(proxy: CassetteProxy, out: Path) -> dict:
    """Where the agent's cassette is (relative to the run folder when inside it), in which mode it
    was used, and its whole file's digest: how this run got its LLM answers."""
    target = proxy.cassette_path.resolve()
    try:
        where = target.relative_to(out.resolve()).as_posix()
    except ValueError:
        where = str(target)
    return {"cassette": where, "cassette_mode": proxy.mode, "cassette_file_digest": proxy.cassette.digest(),
            "llm_proxy": True}


@contextmanager
def llm_cassette(cassette=None, mode: str = "auto", *, record_to=None, upstream: str | None = None,
                 local: bool = False, api_key_env: str | None = None, set_env: bool = True):
    """Every LLM call of an agent we did not write, through our cassette: starts a
    :class:`~webfreeze.llm.cassette_proxy.CassetteProxy` on 127.0.0.1 over ``cassette`` (default:
    ``llm-cassette.sqlite`` in the run folder ``record_to``, where ``bundle pack`` takes it) in
    ``mode`` (``record``, ``replay``: strict, or ``auto``), with ``upstream`` (an OpenAI-compatible
    base URL) or ``local=True`` (the embedded local model) answering what is not stored. With
    ``set_env`` (the default) ``OPENAI_BASE_URL`` names the proxy inside the block (and
    ``OPENAI_API_KEY`` is set to a placeholder if unset, 127.0.0.1 added to ``NO_PROXY``), so an
    agent built on the ``openai`` package calls it unchanged. Environments of this module made in this process tag the calls
    with their task and step, name the entries each episode used in its trajectory
    (``llm_entries``), and with ``record_to`` the run's manifest says which cassette answered.
    Yields the proxy (its ``base_url``, ``stats``, ``misses``). One block at a time."""
    global _proxy
    if _proxy is not None:
        raise RegistrationError("an llm_cassette block is already open in this process")
    if cassette is None:
        if record_to is None:
            raise RegistrationError("llm_cassette needs a cassette file or a run folder (record_to=...)")
        Path(record_to).mkdir(parents=True, exist_ok=True)
        cassette = Path(record_to) / CASSETTE_NAME
    proxy = CassetteProxy(cassette, mode, upstream=upstream, local=local, api_key_env=api_key_env).start()
    saved = {k: os.environ.get(k) for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "NO_PROXY", "no_proxy")}
    _proxy = proxy
    try:
        if set_env:
            os.environ["OPENAI_BASE_URL"] = proxy.base_url
            os.environ.setdefault("OPENAI_API_KEY", "webfreeze-cassette")
            # an HTTP proxy configured in the environment must not carry the agent's calls to ours
            for name in ("NO_PROXY", "no_proxy"):
                os.environ[name] = ",".join(filter(None, [os.environ.get(name), "127.0.0.1"]))
        yield proxy
    finally:
        _proxy = None
        if set_env:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        proxy.stop()


def _register_demo() -> None:
    if (DEMO_SUITE / "manifest.json").is_file():  # (a source tree without the built demo has none)
        register_suite(DEMO_SUITE, key=DEMO_KEY)


_register_demo()

__all__ = [
    "FrozenTaskEnv",
    "RegistrationError",
    "agentlab_benchmark",
    "env_id",
    "llm_cassette",
    "record_episode",
    "register_suite",
    "registered_ids",
    "suite_key",
]
