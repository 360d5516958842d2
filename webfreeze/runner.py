"""The benchmark runner behind ``webfreeze bench run``: a suite, an archive, an agent -> a run directory.

A run directory holds ``manifest.json`` (what ran: archive and suite digests, agent and its
config, environment settings, package versions; times kept in top-level ``*_at``/``*_s`` keys),
``tasks.jsonl`` (the suite's tasks), ``trajectories/<task>.json`` (one per episode, written
atomically as each ends) and ``screenshots/`` when asked for. Episodes run in worker processes,
each with its own environment (one browser per worker); a task's trajectory depends only on the
task, the archive, the agent and the seed, never on which worker ran it or in what order.

An interrupted run resumes: tasks with a trajectory are kept, the others run. A run directory
that holds a different run (another suite, archive, agent, settings or task selection) is refused.

Agents get a task view (:class:`webfreeze.agents.TaskView`): never the ground truth, and the
reference trajectory only when the agent is an oracle (whose runs the manifest labels the upper
bound). One agent instance serves every episode of a worker. Every LLM call goes through the run's
cassette (``llm-cassette.sqlite`` unless ``cassette`` names another); a run of an agent on the
embedded local model starts that model's server once, unless it replays strictly.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import shutil
import tempfile
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from webfreeze.common.errors import WebfreezeError
from webfreeze.common.files import write_json

RUN_FORMAT = "webfreeze-run"
RUN_VERSION = 1
CASSETTE_NAME = "llm-cassette.sqlite"
CASSETTE_MODES = ("record", "replay", "auto")
ORACLE_LABEL = "upper bound"


class RunError(WebfreezeError, RuntimeError):
    """The run cannot start or continue: one line for the user."""


@dataclass
class RunConfig:
    suite: str
    archive: str | None
    agent: str
    out: str
    workers: int = 1
    backend: str = "browser"
    seed: int = 0
    max_steps: int = 30
    screenshots: bool = False
    agent_config: dict = field(default_factory=dict)
    site_models: dict = field(default_factory=dict)  # host -> simulated site kind
    # the suite manifest's replay_rules (set by prepare): over the archive's, over the agent defaults
    replay_rules: dict = field(default_factory=dict)
    tasks: list = field(default_factory=list)  # task-id globs to run (empty: all)
    limit: int | None = None                   # then at most the first N, in the suite's order
    cassette: str | None = None                # default: RUN_DIR/llm-cassette.sqlite
    cassette_mode: str = "record"
    llm_concurrency: int | None = None         # LLM calls in flight at once, across the workers
    executor: str = "local"                    # local (this machine's process pool) or ray
    ray_address: str | None = None             # an existing Ray cluster (None: a local Ray for the run)
    episode_timeout_s: float | None = None     # ray: an episode running longer ends as an error
    retries: int = 2                           # ray: re-runs of an episode after an infrastructure failure
    local_model: bool = False                  # set by prepare(): the agent wants the embedded model
    persona: str | None = None                 # a persona folder (personas generate): the users' histories
    history: dict = field(default_factory=dict)  # retrieval settings: k, threshold, model, key_fields
    # long-context condition (webfreeze.context): {} none; else tokens, pool, tokenizer, seed[, a1_run]
    context: dict = field(default_factory=dict)
    # --- live runs (webfreeze/live.py): record the run itself, or patch the archive's misses live
    live: bool = False
    patch_from_live: bool = False
    record_into: str | None = None             # default RUN_DIR/live.wfz (or patched.wfz)
    resolve: dict = field(default_factory=dict)  # host -> (address, port), as record's --resolve
    upstream: dict | None = None               # set by live.live_session for the workers


from webfreeze import live  # noqa: E402  (live runs)
from webfreeze.context import CONTEXT_KEYS, run_instructions  # noqa: E402  (CONTEXT_KEYS: RunConfig.context's keys)


def check_context(context: dict | None) -> dict:
    """A context condition (``RunConfig.context``) checked and filled in, for a study file or a
    command line: ``{}`` or ``{tokens, tokenizer, seed, pool, a1_run}``; raises :class:`RunError`
    (one line naming the key). See :func:`webfreeze.context.check_context`."""
    from webfreeze.context import ContextError, check_context as _check

    try:
        return _check(context)
    except ContextError as exc:
        raise RunError(str(exc)) from None


def _versions() -> dict:
    out = {}
    for name in ("webfreeze", "playwright", "gymnasium", "lxml", "openai", "llama_cpp_python"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    out["python"] = sys.version.split()[0]
    return out


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


# ------------------------------------------------------------------------------------ preparation
@dataclass
class Prepared:
    config: RunConfig
    suite: object
    archive: Path
    archive_digest: str
    manifest: dict
    todo: list
    done: list
    pool: object = None       # the context condition's filler pool (webfreeze.context.Pool), read once


def resolve_archive(suite, archive: str | None) -> Path:
    """``--archive`` if given, else the suite manifest's ``archive`` (relative to the suite)."""
    if archive:
        path = Path(archive)
    else:
        ref = (suite.manifest or {}).get("archive") if hasattr(suite, "manifest") else None
        if not ref:
            raise RunError("no archive: give --archive (the suite's manifest names none)")
        path = Path(suite.root) / ref
    if not path.is_file():
        raise RunError(f"{path}: no such archive" + ("" if archive else " (named by the suite's manifest)"))
    return path


def select_tasks(tasks: list, globs: list[str] | tuple = (), limit: int | None = None) -> list:
    """The tasks whose id matches any of ``globs`` (all when none is given), then the first ``limit``
    of them, in the suite's order. No task selected is a :class:`RunError`."""
    chosen = [t for t in tasks if not globs or any(fnmatch.fnmatchcase(t.id, g) for g in globs)]
    if not chosen:
        raise RunError(f"no task id matches {' or '.join(repr(g) for g in globs)}")
    if limit is not None:
        if limit < 1:
            raise RunError("--limit must be at least 1")
        chosen = chosen[:limit]
    return chosen


def prepare(config: RunConfig) -> Prepared:
    """Check everything and create (or reopen) the run directory; nothing is written before all
    checks pass."""
    from webfreeze.agents import AgentError, check_agent
    from webfreeze.archives import Archive, ArchiveError, archive_digest
    from webfreeze.eval.tasks import TaskError, load_suite, suite_digest
    from webfreeze.simulator.backends import check_backend
    from webfreeze.simulator.site_models import check_site_models

    check_backend(config.backend, RunError)
    if config.workers < 1:
        raise RunError("--workers must be at least 1")
    from webfreeze.executors import check_executor

    check_executor(config)
    live.check_options(config)  # live runs: incoherent combinations refused in one line
    try:  # (workers build their own agents)
        described = check_agent(config.agent, config.agent_config)
    except AgentError as exc:
        raise RunError(str(exc)) from None
    except TypeError as exc:
        raise RunError(f"agent {config.agent!r}: bad --agent-config ({exc})") from None
    agent_config, oracle = described["config"], described["oracle"]
    config.local_model = described["wants_local_model"]
    if config.cassette_mode not in CASSETTE_MODES:
        raise RunError(f"unknown cassette mode {config.cassette_mode!r} ({', '.join(CASSETTE_MODES)})")
    _check_cassette(config)
    _check_api_key(agent_config, config)
    try:
        suite = load_suite(config.suite)
    except TaskError as exc:
        raise RunError(str(exc)) from None
    if not suite.tasks:
        raise RunError(f"{config.suite}: the suite has no tasks")
    suite.tasks = select_tasks(suite.tasks, config.tasks, config.limit)
    unstartable = [t.id for t in suite.tasks if not t.start_url]
    if unstartable:  # (a suite may leave it null, as Mind2Web-Live's tasks do; an episode cannot)
        more = f" and {len(unstartable) - 3} more" if len(unstartable) > 3 else ""
        raise RunError(f"{config.suite}: {len(unstartable)} task(s) have no start_url, and an episode starts "
                       f"there: {', '.join(unstartable[:3])}{more}")
    if config.live:  # a live run records its archive (webfreeze/live.py): its digest is pinned at the end
        archive, digest = live.record_path(config), None
    else:
        archive = resolve_archive(suite, config.archive)
        try:  # an archive that cannot be opened is refused before anything is written
            Archive.open(archive).close()
        except ArchiveError as exc:
            raise RunError(str(exc)) from None
        digest = archive_digest(archive)
    site_models = dict((suite.manifest or {}).get("site_models") or {})
    site_models.update(config.site_models)
    config.site_models = dict(sorted(site_models.items()))
    check_site_models(config.site_models, RunError)
    config.replay_rules = _suite_replay_rules(suite)
    personas = _check_personas(config, suite.tasks, suite.manifest, suite.root)
    context = _check_run_context(config, suite.tasks)
    manifest = {
        "format": RUN_FORMAT, "version": RUN_VERSION,
        # (where the suite and the archive lie is a circumstance: a run elsewhere, e.g. from a
        # bundle, is the same run; see execute())
        "suite": {"name": suite.name, "digest": suite.digest, "tasks": len(suite.tasks)},
        "archive": {"digest": digest},
        "archive_matches_suite": None if not suite.archive_digest else suite.archive_digest == digest,
        "agent": {"name": config.agent, "config": agent_config, "oracle": oracle,
                  **({"label": ORACLE_LABEL} if oracle else {})},
        # the settings the agent was built with, as given: what a re-run (bundle run) builds it from
        "agent_settings": dict(config.agent_config),
        "selection": {"tasks": list(config.tasks), "limit": config.limit, "selected": len(suite.tasks),
                      "ids": [t.id for t in suite.tasks], "digest": suite_digest([t.raw for t in suite.tasks])},
        "env": {"backend": config.backend, "seed": config.seed, "max_steps": config.max_steps,
                "screenshots": config.screenshots, "site_models": config.site_models,
                # (only when the suite sets some: manifests of other runs keep their bytes)
                **({"replay_rules": config.replay_rules} if config.replay_rules else {})},
        "versions": _versions(),
    }
    if personas is not None:
        manifest["personas"] = personas
    if live.is_live(config):  # live runs
        live.mark_manifest(manifest, config)
    if context is not None:
        manifest["context"] = context
    code = agent_code(config.agent)
    if code is not None:  # (outside the run's identity: a fixed plug-in resumes its run)
        manifest["agent_code"] = code
    if config.backend == "browser":
        from webfreeze.simulator.browser import browser_build

        manifest["versions"]["browser"] = browser_build(shell=True)
    out = Path(config.out)
    identity = {k: manifest[k] for k in ("suite", "archive", "agent", "env", "selection", "personas", "context")
                if k in manifest}
    if out.exists():
        if not out.is_dir():
            raise RunError(f"{out}: exists and is not a directory")
        old_path = out / "manifest.json"
        if old_path.is_file():
            try:
                old = json.loads(old_path.read_text(encoding="utf-8"))
            except ValueError:
                raise RunError(f"{old_path}: not a readable run manifest; use a new --out") from None
            if {k: _identity_part(k, old.get(k)) for k in identity} != identity:
                diff = [k for k in identity if _identity_part(k, old.get(k)) != identity[k]]
                what = f"its {diff[0]} differs" if len(diff) == 1 else f"its {', '.join(diff)} differ"
                raise RunError(f"{out} holds a different run ({what}); use a new --out")
        elif any(out.iterdir()):
            raise RunError(f"{out}: exists, is not empty and holds no run; use a new --out")
    done, todo = [], []
    for task in suite.tasks:
        (done if _finished(out / "trajectories" / f"{task.id}.json") else todo).append(task)
    return Prepared(config, suite, archive, digest, manifest, todo, done, pool=getattr(config, "_pool", None))


def _suite_replay_rules(suite) -> dict:
    """The suite manifest's ``replay_rules`` (checked): what it turns on again for its tasks, such as
    fuzzy answers for documents (``fuzzy_documents``) or parameters its searches may vary."""
    from webfreeze.replayer.matching import Rules

    rules = (suite.manifest or {}).get("replay_rules") or {}
    try:
        if not isinstance(rules, dict):
            raise ValueError("must be a JSON object")
        Rules.from_dict(rules)
    except (TypeError, ValueError) as exc:
        raise RunError(f"{suite.name}: the suite manifest's replay_rules: {exc}") from None
    return dict(sorted(rules.items()))


def _identity_part(key: str, value):
    """A part of an older run's manifest as this version writes it (older manifests kept the suite's
    and the archive's paths in their identity; they are circumstances now)."""
    if key in ("suite", "archive") and isinstance(value, dict):
        return {k: v for k, v in value.items() if k != "path"}
    return value


def _finished(path: Path) -> bool:
    """Whether a resumed run keeps this trajectory: it exists, reads as JSON, and its episode was not
    ended by an infrastructure failure (a provider still failing after the retries), which is run again."""
    if not path.is_file():
        return False
    try:
        end = json.loads(path.read_text(encoding="utf-8")).get("end") or {}
    except (OSError, ValueError, AttributeError):
        return False  # a damaged trajectory (cut short, edited) is run again
    return end.get("cause") not in ("provider", live.SITE_CAUSE)


HISTORY_SETTINGS = ("k", "threshold", "model", "key_fields")


def _history_settings(given: dict) -> dict:
    """The retrieval settings, defaults filled in (Persona2Web's: top 20 above 0.5, key type + object)."""
    out = {"k": 20, "threshold": 0.5, "model": "all-MiniLM-L6-v2", "key_fields": ["type", "object"]}
    out.update({k: v for k, v in given.items() if v is not None})
    if isinstance(out["key_fields"], str):
        out["key_fields"] = [f.strip() for f in out["key_fields"].split(",") if f.strip()]
    if isinstance(out["k"], bool) or not isinstance(out["k"], int) or out["k"] < 1:
        raise RunError(f"--history-k must be a whole number, 1 or more (not {out['k']!r})")
    if isinstance(out["threshold"], bool) or not isinstance(out["threshold"], (int, float)) \
            or not -1 <= out["threshold"] <= 1:
        raise RunError(f"--history-threshold must be a similarity between -1 and 1 (not {out['threshold']!r})")
    fields = ("timestamp", "type", "object", "website")
    bad = [f for f in out["key_fields"] if f not in fields]
    if bad or not out["key_fields"]:
        raise RunError(f"--key-fields takes some of {', '.join(fields)} (not {','.join(out['key_fields'])!r})")
    out["key_fields"] = list(out["key_fields"])
    return out


def _check_personas(config: RunConfig, tasks: list, suite_manifest: dict | None = None,
                    suite_root=None) -> dict | None:
    """The ``personas`` part of the manifest: how many histories the selected tasks use, their
    digest, and the retrieval settings; None when no task names a persona and none was given.
    Every history is read (and checked) here, before anything is written."""
    wanted = sorted({str(t.raw["persona"]) for t in tasks if t.raw.get("persona")})
    unknown = sorted(set(config.history) - set(HISTORY_SETTINGS))
    if unknown:
        raise RunError(f"unknown history setting {unknown[0]!r} (known: {', '.join(HISTORY_SETTINGS)})")
    named = ((suite_manifest or {}).get("personas") or {}).get("path")
    if config.persona is None and wanted and isinstance(named, str) and suite_root is not None:
        # the suite names the persona folder it was made from (relative to the suite)
        candidate = (Path(suite_root) / named).resolve()
        if candidate.is_dir():
            config.persona = str(candidate)
    if config.persona is None:
        if wanted:
            more = f" and {len(wanted) - 3} more" if len(wanted) > 3 else ""
            raise RunError(f"{len(wanted)} persona(s) are named by the tasks ({', '.join(wanted[:3])}{more}) and "
                           f"the suite's persona folder is not there: give --persona DIR (a folder made by "
                           f"'webfreeze personas generate')")
        return None
    from webfreeze.personas.history import HistoryError, history_digest, load_history

    folder = Path(config.persona)
    if not folder.is_dir():
        raise RunError(f"{folder}: no such persona folder (make one with 'webfreeze personas generate')")
    settings = _history_settings(config.history)
    digests = {}
    for pid in wanted:
        path = folder / pid / "history.jsonl"
        if not path.is_file():
            raise RunError(f"{path}: no history for persona {pid!r} in {folder}")
        try:
            digests[pid] = history_digest(load_history(path))
        except HistoryError as exc:
            raise RunError(str(exc)) from None
    whole = hashlib.sha256(json.dumps(digests, sort_keys=True).encode("utf-8")).hexdigest()
    # (where the folder lies is a circumstance, as the suite's and the archive's paths are)
    return {"used": len(digests), "digest": "sha256:" + whole, "retrieval": settings}


def _check_run_context(config: RunConfig, tasks: list) -> dict | None:
    """The ``context`` part of the manifest (the condition, the pool's digest, the digest of A1
    trajectories taken from another run), or None without a condition. Everything is checked here,
    before anything is written: the pool is read (kept on the config for the run), a dependent task
    needs its A1 selected or in ``a1_run``, and a pool far too small for the target is refused."""
    from webfreeze.context import ContextError, TOLERANCE, a1_trajectory, read_pool, trajectories_digest

    config.context = check_context(config.context)
    if not config.context:
        return None
    ctx = config.context
    selected = {t.id for t in tasks}
    dependents = [t for t in tasks if t.depends_on]
    a1_ids = sorted({t.depends_on for t in dependents})
    try:
        pool = read_pool(ctx["pool"]) if ctx["pool"] and ctx["tokens"] > 0 else None
        a1_from = None
        if ctx["a1_run"]:
            found = []
            for a1 in a1_ids:
                traj = a1_trajectory(ctx["a1_run"], a1)
                if traj is None:
                    raise ContextError(f"{ctx['a1_run']}: no trajectory of subtask A1 {a1!r} (needed by "
                                       f"{next(t.id for t in dependents if t.depends_on == a1)})")
                found.append(traj)
            a1_from = {"digest": trajectories_digest(found), "tasks": a1_ids}
    except ContextError as exc:
        raise RunError(str(exc)) from None
    if not ctx["a1_run"]:
        missing = [t for t in dependents if t.depends_on not in selected]
        if missing:
            raise RunError(f"task {missing[0].id} depends on {missing[0].depends_on}, which this run does not select: "
                           f"select it too (--tasks) or take A1 from a finished run (--context-a1-run DIR)")
    if pool is not None and dependents:
        # A1 and A2 add a few thousand tokens at most: a pool that cannot come near is refused now
        if pool.tokens + 4000 < ctx["tokens"] * (1 - TOLERANCE):
            raise RunError(f"pool too small for {ctx['tokens']} tokens: {ctx['pool']} holds {len(pool.entries)} "
                           f"trajectories of {pool.tokens} tokens in all")
        if pool.header.get("tokenizer") != ctx["tokenizer"]:
            raise RunError(f"{ctx['pool']}: the pool was counted with {pool.header.get('tokenizer')!r}, the "
                           f"condition names {ctx['tokenizer']!r}")
    config._pool = pool
    # (where the pool and the A1 run lie are circumstances, as the suite's and the archive's paths are)
    return {"tokens": ctx["tokens"], "tokenizer": ctx["tokenizer"], "seed": ctx["seed"],
            "pool": pool.identity() if pool is not None else None, "a1_run": a1_from,
            "dependent_tasks": len(dependents)}


def agent_code(spec: str) -> dict | None:
    """Which code a plug-in agent (``package.module:Class`` or an entry point) is: its module, the
    distribution that installs it and that distribution's version (None for a module on the path),
    and the SHA-256 of its source file, so a bundle says what ran and a re-run can tell the same
    code from another. None for the built-in agents (the webfreeze version says which they were)."""
    import inspect
    from importlib.metadata import packages_distributions

    from webfreeze.agents import AGENTS, AgentError, agent_class

    if spec in AGENTS:
        return None
    try:
        cls = agent_class(spec)
    except AgentError:
        return None
    module = getattr(cls, "__module__", "") or ""
    if module == "webfreeze" or module.startswith("webfreeze."):
        return None
    out = {"module": module, "class": getattr(cls, "__qualname__", None), "distribution": None, "version": None,
           "source_file": None, "source_sha256": None}
    dists = packages_distributions().get(module.split(".")[0]) or []
    if dists:
        out["distribution"] = sorted(dists)[0]
        try:
            out["version"] = version(out["distribution"])
        except PackageNotFoundError:
            pass
    try:
        source = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        source = None
    if source and Path(source).is_file():
        out["source_file"] = Path(source).name
        out["source_sha256"] = "sha256:" + hashlib.sha256(Path(source).read_bytes()).hexdigest()
    return out


def agent_source_path(spec: str) -> Path | None:
    """The source file of plug-in agent ``spec`` (what :func:`agent_code` hashed), or None."""
    import inspect

    from webfreeze.agents import AgentError, agent_class

    try:
        source = inspect.getsourcefile(agent_class(spec))
    except (AgentError, TypeError, OSError):
        return None
    return Path(source) if source and Path(source).is_file() else None


def _check_api_key(agent_config: dict, config: RunConfig) -> None:
    """An agent that will call its endpoint with a key read from ``api_key_env`` needs that variable
    set: refused here, before the run folder exists, not at the first call. A strict replay calls
    nothing; neither does ``auto`` from an existing cassette that may hold every call (a miss then
    fails at that call, naming the variable)."""
    import os

    name = agent_config.get("api_key_env") if isinstance(agent_config, dict) else None
    if not name or not isinstance(name, str) or agent_config.get("model") == "local":
        return
    if config.cassette_mode == "replay":
        return
    cassette = Path(config.cassette) if config.cassette else Path(config.out) / CASSETTE_NAME
    if config.cassette_mode == "auto" and cassette.is_file():
        return
    if not os.environ.get(name):
        raise RunError(f"the API key variable {name} is not set (export it, or give --no-api-key for an endpoint "
                       f"that needs no key)")


def _check_cassette(config: RunConfig) -> None:
    """Refuse a cassette the run could not use, before anything is written: strict replay of a file
    that is missing or not a cassette, or a cassette to record into a folder that does not exist."""
    if config.cassette is None:
        if config.cassette_mode == "replay" and not (Path(config.out) / CASSETTE_NAME).is_file():
            raise RunError("--cassette-mode replay needs --cassette FILE (the cassette of the run to replay)")
        return
    path = Path(config.cassette)
    if config.cassette_mode == "replay" and not path.is_file():
        raise RunError(f"{path}: no such cassette to replay")
    if config.cassette_mode != "replay" and not path.exists():
        if not path.parent.is_dir():
            raise RunError(f"{path}: cannot record a cassette there: no such directory {path.parent}")
        return
    from webfreeze.llm import Cassette
    from webfreeze.llm.errors import LLMError

    try:
        Cassette(path, "replay").close()  # opened read-only: a check that changes nothing
    except LLMError as exc:
        raise RunError(str(exc)) from None


def _visible(task: dict) -> dict:
    """A suite line without what agents must not see (its ground truth and anything not listed)."""
    from webfreeze.agents.base import HANDLE_FIELDS, VISIBLE_FIELDS

    return {k: task[k] for k in (*VISIBLE_FIELDS, *HANDLE_FIELDS) if k in task}


def _tasks_lines(suite) -> str:
    from webfreeze.eval.tasks import canonical_line

    return "".join(canonical_line(t.raw) + "\n" for t in suite.tasks)


def _copy_references(suite, out: Path) -> None:
    """Reference trajectory files beside the run's tasks.jsonl, so a run directory is self-contained."""
    for task in suite.tasks:
        ref = task.ground_truth.get("reference_trajectory")
        if isinstance(ref, str) and not ref.startswith(("trajectories/", "screenshots/")):
            src, dst = Path(suite.root) / ref, out / ref
            if src.is_file() and not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)


# ------------------------------------------------------------------------------------ episodes
_WORKER: dict = {}


def _worker_init(config: dict, archive: str, manifest: dict, llm: dict) -> None:
    from webfreeze.agents import AgentServices, make_agent
    from webfreeze.simulator.env import EnvConfig, WebEnv
    from webfreeze.simulator.site_models import SimulatedSiteModel

    models = [SimulatedSiteModel(kind, host) for host, kind in config["site_models"].items()]
    # one agent per worker: a model it loads is loaded once, not per episode
    agent = make_agent(config["agent"], **config["agent_config"])
    services = AgentServices(cassette=llm["cassette"], cassette_mode=llm["mode"], local_base_url=llm["local_base_url"],
                             slots_dir=llm["slots_dir"], concurrency=llm["concurrency"])
    setup = getattr(agent, "setup", None)
    if setup is not None:
        setup(services)
    env = WebEnv(EnvConfig(archive, backend=config["backend"], seed=config["seed"], max_steps=config["max_steps"],
                           screenshots=config["screenshots"], site_models=models,
                           rules=config.get("replay_rules") or None,
                           history=_history_provider(config["persona"], config["history"]),
                           upstream=config.get("upstream")))  # (live runs)
    _WORKER.update(env=env, config=config, manifest=manifest, agent=agent, services=services)


def _history_provider(folder: str | None, settings: dict):
    """``task -> the user's history handle`` (one per persona, opened once per worker), or None."""
    if folder is None:
        return None
    from webfreeze.personas.retrieval import RetrievalError, open_user_history

    opened: dict = {}

    def provider(task: dict):
        pid = task.get("persona")
        if not pid:
            return None
        if pid not in opened:
            try:
                opened[pid] = open_user_history(folder, str(pid), **_history_settings(settings))
            except RetrievalError as exc:  # a missing model or a bad history: no episode can go right
                raise RunError(str(exc)) from None
        return opened[pid]

    return provider


def _worker_close() -> None:
    agent, services = _WORKER.pop("agent", None), _WORKER.pop("services", None)
    for closing in (getattr(agent, "close", None), getattr(services, "close", None)):
        if closing is not None:
            try:
                closing()
            except Exception:  # a worker that is going away reports nothing more
                pass
    env = _WORKER.pop("env", None)
    if env is not None:
        try:
            env.close()
        except Exception:  # interrupted: the browser may already be gone
            pass


def play_episode(task: dict, reference: dict | None) -> tuple[dict, dict, dict]:
    """One task in this worker's environment: returns (trajectory, screenshots by step, summary),
    nothing written. Every executor plays episodes through this function.

    The agent sees a :class:`~webfreeze.agents.TaskView` of ``task`` (no ground truth) and the
    ``reference`` only if it is an oracle. The trajectory names the cassette entries the episode
    used (``llm_entries``, ``[key, n]`` pairs) when it used any: the run's LLM digest covers them."""
    from webfreeze.agents import AgentError, TaskView, is_oracle
    from webfreeze.llm.errors import LLMError, ProviderError

    env, config, manifest, agent = _WORKER["env"], _WORKER["config"], _WORKER["manifest"], _WORKER["agent"]
    context_record = task.get("context_record")
    if context_record is not None:
        task = {k: v for k, v in task.items() if k != "context_record"}
    view = TaskView.from_task(task, reference if is_oracle(agent) else None)
    cassette = _worker_cassette()
    if cassette is not None:
        cassette.take_used()  # nothing of an earlier episode counts for this one
    t0 = time.perf_counter()
    error, cause = None, None
    try:
        agent.reset(view)
    except AgentError as exc:
        error = str(exc)
    except LLMError as exc:
        if not isinstance(exc, ProviderError):
            # strict replay missed, a damaged cassette, no API key: no episode of this run can go right
            raise RunError(str(exc)) from None
        error, cause = str(exc), "provider"
    except Exception as exc:  # an agent's own bug ends its episode, not the run
        error = f"agent failed in reset: {type(exc).__name__}: {exc}"
    obs, _ = env.reset(seed=config["seed"], options={"task": task})
    while error is None:
        a0 = time.perf_counter()
        try:
            out = agent.act(obs)
            if not isinstance(out, dict) or not isinstance(out.get("action"), str):
                raise AgentError(f"act() must return a dict with an 'action' string, not {type(out).__name__}")
        except LLMError as exc:
            if not isinstance(exc, ProviderError):  # e.g. strict replay missed: this is not the recorded run
                raise RunError(str(exc)) from None
            error, cause = str(exc), "provider"  # an infrastructure failure, counted apart
            break
        except Exception as exc:  # an agent's own bug ends its episode, not the run
            error = f"agent failed: {type(exc).__name__}: {exc}"
            break
        fields = {k: v for k, v in out.items() if k != "action"}
        fields["agent_ms"] = round((time.perf_counter() - a0) * 1000, 3)
        obs, _, terminated, truncated, _ = env.step(out["action"], agent=fields)
        if terminated or truncated:
            break
    failed = live.episode_failure(env.site_failures())  # live runs: the site failed, not the agent
    if failed and error is None:
        error, cause = failed, live.SITE_CAUSE
    trajectory = env.trajectory(stopped=error is not None)
    if error is not None:
        trajectory["end"] = {"reason": "error", "detail": error}
        if cause:
            trajectory["end"]["cause"] = cause
    trajectory["agent"] = manifest["agent"]
    trajectory["suite"] = {"name": manifest["suite"]["name"], "digest": manifest["suite"]["digest"]}
    trajectory["env"]["site_models"] = config["site_models"]
    if context_record is not None:
        trajectory["context"] = context_record
    cassette = _worker_cassette()  # (an agent opens the cassette at its first call: maybe in this episode)
    used = cassette.take_used() if cassette is not None else []
    if used:
        trajectory["llm_entries"] = used
    # screenshots by step, and the DOM snapshots by their dom/ path (write_trajectory writes both)
    shots = {**env.recorder.shots, **env.recorder.doms} if env.recorder else {}
    summary = {"task_id": task["id"], "end": trajectory["end"]["reason"], "steps": len(trajectory["steps"]),
               "ms": round((time.perf_counter() - t0) * 1000, 1)}
    if cause:
        summary["cause"] = cause
    return trajectory, shots, summary


def _worker_cassette():
    """The cassette this worker's agent opened through its services (None when it opened none: an
    agent without LLM calls never opens one)."""
    services = _WORKER.get("services")
    return getattr(services, "_cassette", None)  # (read, never opened here)


def run_episode(task: dict, reference: dict | None) -> dict:
    """One task in this worker's environment; writes its trajectory and returns a summary."""
    from webfreeze.simulator.trajectory import write_trajectory

    trajectory, shots, summary = play_episode(task, reference)
    write_trajectory(trajectory, _WORKER["config"]["out"], shots)
    return summary


def _pool_episode(task: dict, reference: dict | None) -> dict:
    if "init_error" in _WORKER:  # this worker could not start: say why, in one line, for every task
        raise RunError(_WORKER["init_error"])
    return run_episode(task, reference)


def _pool_init(config: dict, archive: str, manifest: dict, llm: dict) -> None:
    import atexit

    atexit.register(_worker_close)
    try:
        _worker_init(config, archive, manifest, llm)
    except Exception as exc:  # an initializer's exception would break the whole pool with tracebacks
        _WORKER["init_error"] = _one_line(exc)


def _one_line(exc: BaseException) -> str:
    from webfreeze.agents import AgentError
    from webfreeze.llm.errors import LLMError
    from webfreeze.simulator.env import EnvError

    if isinstance(exc, (AgentError, LLMError, EnvError, RunError)):
        return str(exc)
    return f"a worker could not start: {type(exc).__name__}: {exc}".splitlines()[0]


@dataclass
class WorkerSpec:
    """What every worker of a run starts from, whatever the executor: the run's settings (with
    ``out``), the archive's path and digest, the manifest, and the LLM services' settings."""
    config: dict
    archive: str
    archive_digest: str
    manifest: dict
    llm: dict


def execute(prep: Prepared, *, progress=None) -> dict:
    """Run the tasks still to do; returns the finished manifest. ``progress(summary)`` after each.

    The executor (``config.executor``: the local process pool, or Ray) only decides where episodes
    play; what is written, and how the manifest accounts for it, is the same for all of them."""
    from webfreeze.executors import make_executor

    config, out = prep.config, Path(prep.config.out)
    executor = make_executor(config)
    fresh = not out.exists()
    try:
        if live.is_live(config):  # live runs: the recording proxy serves the whole run
            return live.run_live(prep, lambda: _execute(prep, executor, progress))
        return _execute(prep, executor, progress)
    except BaseException:
        # A run that failed before its first episode was kept (the local model server would not
        # start, a worker could not build its agent) leaves no folder behind that a corrected
        # command would then refuse as "a different run".
        if fresh and out.is_dir() and not any((out / "trajectories").glob("*.json")):
            shutil.rmtree(out, ignore_errors=True)
        raise


def _execute(prep: Prepared, executor, progress) -> dict:
    config, out = prep.config, Path(prep.config.out)
    (out / "trajectories").mkdir(parents=True, exist_ok=True)
    (out / "tasks.jsonl").write_text(_tasks_lines(prep.suite), encoding="utf-8")
    _copy_references(prep.suite, out)
    # how many workers ran it, on which executor, from where: circumstances (kept out of the
    # comparable part of the report)
    manifest = dict(prep.manifest, started_at=_now(), complete=False, tasks_done=len(prep.done),
                    circumstances={"workers": config.workers, "executor": executor.name,
                                   "suite_path": _run_relative(prep.suite.root, out),
                                   "archive_path": _run_relative(prep.archive, out)})
    if config.persona is not None and "personas" in prep.manifest:
        manifest["circumstances"]["persona_dir"] = str(Path(config.persona).resolve())
    if config.context:
        manifest["circumstances"].update({k: str(Path(v).resolve()) for k, v in (
            ("context_pool", config.context.get("pool")), ("context_a1_run", config.context.get("a1_run"))) if v})
    write_json(out / "manifest.json", manifest)
    t0 = time.perf_counter()
    wconfig = dict(asdict(config), out=str(out))
    # What crosses into the workers is the agent's view of each task: never its ground truth, and
    # the reference only for an oracle (the worker processes never hold more than the agent may see).
    oracle = prep.manifest["agent"]["oracle"]
    # A dependent task plays after the task it depends on (its A1): one wave after another.
    from webfreeze.eval.tasks import dependency_waves

    waves = dependency_waves(prep.todo)
    jobs = bool(prep.todo)
    cassette = Path(config.cassette) if config.cassette else out / CASSETTE_NAME
    llm = {"cassette": str(cassette), "mode": config.cassette_mode, "local_base_url": None,
           "slots_dir": None, "concurrency": config.llm_concurrency}
    server, slots, local_model = None, None, None
    stats: dict = {}
    try:
        if jobs and config.cassette_mode != "replay" and config.local_model:
            from webfreeze.llm.local import LocalModelServer

            server = LocalModelServer(log_path=out / "local-model.log")
            server.start()
            llm["local_base_url"] = server.base_url
            local_model = _local_model_identity()
        if jobs and config.workers > 1:
            slots = tempfile.mkdtemp(prefix="webfreeze-llm-slots-")
            llm["slots_dir"] = slots
        spec = WorkerSpec(wconfig, str(prep.archive), prep.archive_digest, manifest, llm)
        # (an executor with a session, Ray, starts once for all the waves)
        session = getattr(executor, "session", None) if len(waves) > 1 else None
        with session() if session is not None else contextlib.nullcontext():
            for wave in waves:
                wave_jobs = [(_job_task(prep, t), t.reference if oracle else None) for t in wave]
                _merge_stats(stats, executor.run(spec, wave_jobs, progress) or {})
    finally:
        if server is not None:
            server.stop()
        if slots is not None:
            shutil.rmtree(slots, ignore_errors=True)
        # counted on disk, as a resumed run counts them: with workers, an interrupted run's episodes
        # already under way still finish and are kept
        done = sum((out / "trajectories" / f"{t.id}.json").is_file() for t in prep.suite.tasks)
        manifest.update(tasks_done=done, complete=done == len(prep.suite.tasks), finished_at=_now(),
                        elapsed_s=round(time.perf_counter() - t0, 3))
        if stats:
            manifest["circumstances"].update(stats)
        if cassette.is_file():
            try:
                manifest["llm"], how = _cassette_entry(cassette, config.cassette_mode, out,
                                                       _used_entries(out, prep.suite.tasks))
                manifest["circumstances"].update(how)
            except Exception as exc:  # the run's own outcome matters more than this account of it
                manifest["circumstances"]["cassette_error"] = str(exc).splitlines()[0] if str(exc) else repr(exc)
            if local_model:
                manifest["circumstances"]["local_model"] = local_model
        write_json(out / "manifest.json", manifest)
    return manifest


def _job_task(prep: Prepared, task) -> dict:
    """What crosses into a worker for ``task``: its visible part and, for a dependent task under a
    context condition, its composed ``context``, its start URL (where the last injected trajectory
    ended) and the trajectory's ``context`` record (under ``context_record``, which the agent's view
    never holds)."""
    visible = _visible(task.raw)
    config = prep.config
    if not config.context or not task.depends_on:
        return visible
    from webfreeze.context import ContextError, a1_trajectory, compose

    a1_run = config.context.get("a1_run") or config.out
    try:
        a1 = a1_trajectory(a1_run, task.depends_on)
        if a1 is None:
            raise ContextError(f"task {task.id}: subtask A1 {task.depends_on!r} has no trajectory in {a1_run}")
        instructions = {t.id: t.instruction for t in prep.suite.tasks}
        if task.depends_on not in instructions and isinstance(a1.get("instruction"), str):
            instructions[task.depends_on] = a1["instruction"]
        if task.depends_on not in instructions:
            instructions[task.depends_on] = run_instructions(a1_run).get(task.depends_on)
        shown, record, start = compose(task, a1, prep.pool, config.context, instructions)
    except ContextError as exc:
        raise RunError(str(exc)) from None
    return dict(visible, context=shown, start_url=start, context_record=record)


def _merge_stats(total: dict, more: dict) -> None:
    """An executor's circumstances over several waves: counts added, the rest the largest."""
    for k, v in more.items():
        if isinstance(v, dict):
            _merge_stats(total.setdefault(k, {}), v)
        elif k in total and isinstance(v, (int, float)) and isinstance(total[k], (int, float)):
            total[k] = total[k] + v if k != "ray_nodes" else max(total[k], v)
        else:
            total[k] = v


def _used_entries(out: Path, tasks) -> list:
    """The cassette entries the run's episodes used, from their trajectories' ``llm_entries``."""
    used = set()
    for task in tasks:
        path = out / "trajectories" / f"{task.id}.json"
        if not path.is_file():
            continue
        try:
            entries = json.loads(path.read_text(encoding="utf-8")).get("llm_entries") or []
        except (OSError, ValueError, AttributeError):
            continue
        used.update((str(k), int(n)) for k, n in entries)
    return sorted(used)


def _local_model_identity() -> dict:
    """Which local model answered (its id and GGUF file digest): replies differ between model files
    and llama.cpp builds, so a recorded cassette says what recorded it."""
    import hashlib

    from webfreeze.llm.local import LOCAL_MODEL_ID, local_model_path

    path = local_model_path()
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return {"id": LOCAL_MODEL_ID, "file": path.name, "sha256": h.hexdigest(), "llama_cpp_python": _versions().get(
        "llama_cpp_python")}


def _run_relative(path, out) -> str:
    """Where ``path`` lies, as a manifest keeps it: relative to the run folder ``out`` when it lies
    inside it, else absolute. Never relative to the current directory, which another command (a
    ``bundle pack`` from elsewhere) does not share."""
    target, root = Path(path).resolve(), Path(out).resolve()
    try:
        return target.relative_to(root).as_posix()
    except ValueError:
        return str(target)


def manifest_path(run_dir, where: str | None) -> Path | None:
    """The file or folder a run's manifest names (a circumstance such as ``suite_path``), found
    from any current directory: absolute as written, else relative to the run folder. Manifests
    written before paths were kept that way held them relative to the directory the run started
    from, unknown now: the run folder's ancestors are tried in turn (a project's runs usually lie
    below the folder the command ran in). None when ``where`` is empty or names nothing there."""
    if not where:
        return None
    p = Path(where)
    if p.is_absolute():
        return p if p.exists() else None
    run = Path(run_dir).resolve()
    for base in (run, *run.parents, Path.cwd()):
        if (base / p).exists():
            return base / p
    return None


def _cassette_entry(cassette: Path, mode: str, out: Path, used: list) -> tuple[dict, dict]:
    """The manifest's account of the run's LLM calls: the digest of the cassette entries the run
    used (keys, requests and responses, no latencies; see :meth:`Cassette.entries_digest`) and how
    many, which a replay of the run from any cassette holding them reproduces; and, as
    circumstances, where the cassette was, in which mode, and the whole file's digest."""
    from webfreeze.llm import Cassette

    c = Cassette(cassette, "replay")
    try:
        digest, calls = c.entries_digest(used)
        file_digest = c.digest()
    finally:
        close = getattr(c, "close", None)
        if close:
            close()
    where = _run_relative(cassette, out)
    # What the calls were goes with the run; how this run got them (recorded now, or replayed from
    # which file) is a circumstance, kept out of the comparable part of the report.
    return ({"entries_digest": digest, "calls": calls},
            {"cassette": where, "cassette_mode": mode, "cassette_file_digest": file_digest})


# ------------------------------------------------------------------------------------ library
def run(suite, agent: str, out, *, archive=None, progress=None, **settings) -> dict:
    """Run ``agent`` (a name, ``package.module:Class`` or entry point) on ``suite`` over the replayed
    archive, writing the run directory ``out``; returns the finished manifest.

    ``settings`` are :class:`RunConfig`'s fields (workers, backend, seed, max_steps, screenshots,
    agent_config, site_models, tasks, limit, cassette, cassette_mode, llm_concurrency, executor,
    ray_address, episode_timeout_s, retries).
    ``progress(summary)`` is called after each episode. Score it with :func:`webfreeze.score_run`.
    Raises :class:`RunError` (one line) when the run cannot start or go on.
    """
    known = {f for f in RunConfig.__dataclass_fields__ if f not in ("suite", "archive", "agent", "out", "local_model")}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise RunError(f"run() has no setting {unknown[0]!r} (its settings: {', '.join(sorted(known))})")
    if isinstance(settings.get("tasks"), str):  # one glob, not a sequence of one-letter globs
        settings["tasks"] = [settings["tasks"]]
    config = RunConfig(suite=str(suite), archive=str(archive) if archive else None, agent=agent, out=str(out),
                       **settings)
    return execute(prepare(config), progress=progress)
