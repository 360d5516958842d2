"""Preparing a run: every check before anything is written (agent, cassette, API key, suite, task
selection, archive, site models, personas, context condition), the manifest's identity, and what
a resumed run still has to do.
"""

from __future__ import annotations

import fnmatch
import hashlib
import inspect
import json
import os
import sys
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from pathlib import Path

from webfreeze.agents import AGENTS, AgentError, agent_class, check_agent
from webfreeze.archives import Archive, ArchiveError, archive_digest
from webfreeze.eval.tasks import TaskError, load_suite, suite_digest
from webfreeze.llm import Cassette
from webfreeze.llm.errors import LLMError
from webfreeze.personas.history import HistoryError, history_digest, load_history
from webfreeze.replayer.matching import Rules, matching_digest
from webfreeze.runs import live
from webfreeze.runs.context import TOLERANCE, ContextError, a1_trajectory, read_pool, trajectories_digest
from webfreeze.runs.executors import check_executor
from webfreeze.runs.spec import (
    CASSETTE_NAME,
    ORACLE_LABEL,
    RUN_FORMAT,
    RUN_VERSION,
    RunError,
    RunOptions,
    RunSpec,
    check_options,
)
from webfreeze.simulator.backends import check_backend
from webfreeze.simulator.browser import FONT_HINTING, browser_build, page_runtime_digest
from webfreeze.simulator.site_models import check_site_models


def package_versions() -> dict:
    """The versions of the packages a run's outcome depends on (None where one is not installed)."""
    out = {}
    for name in ("webfreeze", "playwright", "gymnasium", "lxml", "openai", "xllamacpp"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    out["python"] = sys.version.split()[0]
    return out


def utc_now() -> str:
    """Now, in UTC, to the second, as the manifests write it."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


# ------------------------------------------------------------------------------------ preparation
@dataclass
class Prepared:
    """A run checked and ready to execute: its spec as the run will use it (the suite's site models
    and replay rules, the persona folder and the context condition filled in), its options, the
    suite with the selected tasks, the archive, the manifest (identity, versions) and the tasks
    still to do."""

    spec: RunSpec
    options: RunOptions
    suite: object
    archive: Path
    archive_digest: str
    manifest: dict
    todo: list
    done: list
    pool: object = None       # the context condition's filler pool (webfreeze.runs.context.Pool), read once
    local_model: bool = False  # the agent wants the embedded local model (started for the run)


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


def prepare(spec: RunSpec, options: RunOptions) -> Prepared:
    """Check everything and create (or reopen) the run directory; nothing is written before all
    checks pass. ``spec`` (frozen) is not changed: the spec the run uses, filled in, is
    :attr:`Prepared.spec`."""
    check_backend(spec.backend, RunError)
    check_options(options)  # (again: options may be made without build_run)
    check_executor(options)
    live.check_options(spec, options)  # live runs: incoherent combinations refused in one line
    described = _check_agent(spec)
    _check_cassette(options)
    _check_api_key(described["config"], options)
    suite = _selected_suite(spec)
    if options.live:  # a live run records its archive (runs/live.py): its digest is pinned at the end
        archive, digest = live.record_path(options), None
    else:
        archive = resolve_archive(suite, spec.archive)
        try:  # an archive that cannot be opened is refused before anything is written
            Archive.open(archive).close()
        except ArchiveError as exc:
            raise RunError(str(exc)) from None
        digest = archive_digest(archive)
    site_models = dict((suite.manifest or {}).get("site_models") or {})
    site_models.update(spec.site_models)
    check_site_models(site_models, RunError)
    spec = replace(spec, site_models=dict(sorted(site_models.items())), replay_rules=_suite_replay_rules(suite))
    spec, personas = _check_personas(spec, suite.tasks, suite.manifest, suite.root)
    context, pool = _check_run_context(spec, suite.tasks)
    manifest = _manifest(spec, suite, digest, described, personas, context)
    if live.is_live(options):  # live runs: the archive is pinned when the run ends
        live.mark_manifest(manifest, options)
    if spec.backend == "browser":  # (the injected runtime decides what a page's scripts see, live too)
        manifest["versions"]["page_runtime"] = page_runtime_digest()
    out = Path(options.out)
    _check_out(out, manifest)
    done, todo = [], []
    for task in suite.tasks:
        (done if _finished(out / "trajectories" / f"{task.id}.json") else todo).append(task)
    return Prepared(spec, options, suite, archive, digest, manifest, todo, done, pool=pool,
                    local_model=described["wants_local_model"])


def _check_agent(spec: RunSpec) -> dict:
    """The agent described as :func:`webfreeze.agents.check_agent` does (built once here, so a bad
    setting is refused before anything is written; the workers build their own)."""
    try:
        return check_agent(spec.agent, spec.agent_config)
    except AgentError as exc:
        raise RunError(str(exc)) from None
    except TypeError as exc:
        raise RunError(f"agent {spec.agent!r}: bad --agent-config ({exc})") from None


def _selected_suite(spec: RunSpec):
    """The suite, holding only the tasks ``spec`` selects, each of which can start an episode."""
    try:
        suite = load_suite(spec.suite)
    except TaskError as exc:
        raise RunError(str(exc)) from None
    if not suite.tasks:
        raise RunError(f"{spec.suite}: the suite has no tasks")
    suite.tasks = select_tasks(suite.tasks, spec.tasks, spec.limit)
    unstartable = [t.id for t in suite.tasks if not t.start_url]
    if unstartable:  # (a suite may leave it null, as Mind2Web-Live's tasks do; an episode cannot)
        more = f" and {len(unstartable) - 3} more" if len(unstartable) > 3 else ""
        raise RunError(f"{spec.suite}: {len(unstartable)} task(s) have no start_url, and an episode starts "
                       f"there: {', '.join(unstartable[:3])}{more}")
    return suite


IDENTITY_KEYS = ("suite", "archive", "agent", "env", "selection", "personas", "context")


def _manifest(spec: RunSpec, suite, digest: str, described: dict, personas: dict | None,
              context: dict | None) -> dict:
    """The run's manifest before it starts: its identity (:data:`IDENTITY_KEYS`, made from the spec
    alone), the agent's settings as given and code, and the versions it runs with."""
    oracle = described["oracle"]
    manifest = {
        "format": RUN_FORMAT, "version": RUN_VERSION,
        # (where the suite and the archive lie is a circumstance: a run elsewhere, e.g. from a
        # bundle, is the same run; see execute())
        "suite": {"name": suite.name, "digest": suite.digest, "tasks": len(suite.tasks)},
        "archive": {"digest": digest},
        "archive_matches_suite": None if not suite.archive_digest else suite.archive_digest == digest,
        "agent": {"name": spec.agent, "config": described["config"], "oracle": oracle,
                  **({"label": ORACLE_LABEL} if oracle else {})},
        # the settings the agent was built with, as given: what a re-run (bundle run) builds it from
        "agent_settings": dict(spec.agent_config),
        "selection": {"tasks": list(spec.tasks), "limit": spec.limit, "selected": len(suite.tasks),
                      "ids": [t.id for t in suite.tasks], "digest": suite_digest([t.raw for t in suite.tasks])},
        "env": {"backend": spec.backend, "seed": spec.seed, "max_steps": spec.max_steps,
                "screenshots": spec.screenshots, "site_models": spec.site_models,
                # (only when the suite sets some: manifests of other runs keep their bytes)
                **({"replay_rules": spec.replay_rules} if spec.replay_rules else {})},
        "versions": {**package_versions(), "replay_matching": matching_digest()},
    }
    if personas is not None:
        manifest["personas"] = personas
    if context is not None:
        manifest["context"] = context
    code = agent_code(spec.agent)
    if code is not None:  # (outside the run's identity: a fixed plug-in resumes its run)
        manifest["agent_code"] = code
    if spec.backend == "browser":
        manifest["versions"]["browser"] = browser_build(shell=True)
        manifest["versions"]["font_hinting"] = FONT_HINTING  # (screenshots differ where it does)
    return manifest


def _check_out(out: Path, manifest: dict) -> None:
    """``out`` must be new, empty, or hold this same run (equal identity): it is then resumed."""
    identity = {k: manifest[k] for k in IDENTITY_KEYS if k in manifest}
    if not out.exists():
        return
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


def _suite_replay_rules(suite) -> dict:
    """The suite manifest's ``replay_rules`` (checked): what it turns on again for its tasks, such as
    fuzzy answers for documents (``fuzzy_documents``) or parameters its searches may vary."""
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




def _check_personas(config: RunSpec, tasks: list, suite_manifest: dict | None = None,
                    suite_root=None) -> tuple[RunSpec, dict | None]:
    """The spec with its persona folder (the suite's, when it names one and none was given) and the
    ``personas`` part of the manifest: how many histories the selected tasks use, their digest, and
    the retrieval settings; None when no task names a persona and none was given. Every history is
    read (and checked) here, before anything is written."""
    wanted = sorted({str(t.raw["persona"]) for t in tasks if t.raw.get("persona")})
    named = ((suite_manifest or {}).get("personas") or {}).get("path")
    if config.persona is None and wanted and isinstance(named, str) and suite_root is not None:
        # the suite names the persona folder it was made from (relative to the suite)
        candidate = (Path(suite_root) / named).resolve()
        if candidate.is_dir():
            config = replace(config, persona=str(candidate))
    if config.persona is None:
        if wanted:
            more = f" and {len(wanted) - 3} more" if len(wanted) > 3 else ""
            raise RunError(f"{len(wanted)} persona(s) are named by the tasks ({', '.join(wanted[:3])}{more}) and "
                           f"the suite's persona folder is not there: give --persona DIR (a folder made by "
                           f"'webfreeze personas generate')")
        return config, None
    folder = Path(config.persona)
    if not folder.is_dir():
        raise RunError(f"{folder}: no such persona folder (make one with 'webfreeze personas generate')")
    settings = config.history.as_dict()
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
    return config, {"used": len(digests), "digest": "sha256:" + whole, "retrieval": settings}


def _check_run_context(config: RunSpec, tasks: list) -> tuple[dict | None, object]:
    """The ``context`` part of the manifest (the condition, the pool's digest, the digest of A1
    trajectories taken from another run), or None without a condition, and the filler pool (read
    once, for the run). Everything is checked here, before anything is written: a dependent task
    needs its A1 selected or in ``a1_run``, and a pool far too small for the target is refused."""
    if config.context is None:  # (checked and filled in when the spec was made: ContextSettings.of)
        return None, None
    ctx = config.context.as_dict()
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
    # (where the pool and the A1 run lie are circumstances, as the suite's and the archive's paths are)
    return {"tokens": ctx["tokens"], "tokenizer": ctx["tokenizer"], "seed": ctx["seed"],
            "pool": pool.identity() if pool is not None else None, "a1_run": a1_from,
            "dependent_tasks": len(dependents)}, pool


def agent_code(spec: str) -> dict | None:
    """Which code a plug-in agent (``package.module:Class`` or an entry point) is: its module, the
    distribution that installs it and that distribution's version (None for a module on the path),
    and the SHA-256 of its source file, so a bundle says what ran and a re-run can tell the same
    code from another. None for the built-in agents (the webfreeze version says which they were)."""

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

    try:
        source = inspect.getsourcefile(agent_class(spec))
    except (AgentError, TypeError, OSError):
        return None
    return Path(source) if source and Path(source).is_file() else None


def _check_api_key(agent_config: dict, config: RunOptions) -> None:
    """An agent that will call its endpoint with a key read from ``api_key_env`` needs that variable
    set: refused here, before the run folder exists, not at the first call. A strict replay calls
    nothing; neither does ``auto`` from an existing cassette that may hold every call (a miss then
    fails at that call, naming the variable)."""
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


def _check_cassette(config: RunOptions) -> None:
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
    try:
        Cassette(path, "replay").close()  # opened read-only: a check that changes nothing
    except LLMError as exc:
        raise RunError(str(exc)) from None


