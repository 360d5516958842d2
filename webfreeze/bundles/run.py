"""``webfreeze bundle run``: re-run a bundle's runs offline and check they come out the same.

Each bundled run is run again from the bundle alone: its suite, its archive, its agent with the
settings its manifest names, and its LLM calls answered from its cassette in strict replay (so no
model, no network and no API key are needed; a call the cassette does not hold stops the run). The
new run's trajectories (timing fields aside) and ``report.json`` (its ``timings`` section aside) must
equal the bundled ones byte for byte; the first difference is named. With ``agent`` a new agent
runs on the same frozen benchmark instead (recording its own cassette).
"""

from __future__ import annotations

import json
import re
import shutil
from contextlib import contextmanager
from pathlib import Path

from webfreeze.agents import AgentError, agent_class, check_agent
from webfreeze.agents import agent_settings as agent_setting_names
from webfreeze.bundles.pack import (
    BundleError,
    check_context_members,
    check_digests,
    check_signature,
    extract,
    member_json,
    open_bundle,
    report_judge,
)
from webfreeze.eval.errors import ReportError
from webfreeze.eval.llm_judge import JUDGE_CASSETTE, llm_judge_setting, open_llm_judge
from webfreeze.eval.report import scored_strictly, write_report
from webfreeze.llm.errors import LLMError
from webfreeze.runs.compare import describe_versions, run_difference, version_differences
from webfreeze.runs.execute import execute
from webfreeze.runs.executors import EXECUTORS
from webfreeze.runs.prepare import prepare
from webfreeze.runs.spec import RunError, build_run


def agent_settings(manifest: dict) -> dict:
    """The settings to build a run's agent with: ``agent_settings`` as the run was given them, or
    for an older manifest, the agent's described config restricted to its constructor's parameters."""
    if isinstance(manifest.get("agent_settings"), dict):
        return dict(manifest["agent_settings"])
    agent = manifest.get("agent") or {}
    try:
        params = agent_setting_names(agent.get("name")) or []
    except (AgentError, TypeError, ValueError):
        return {}
    config = agent.get("config") if isinstance(agent.get("config"), dict) else {}
    return {k: v for k, v in config.items() if k in params and k != "self"}


def _stale_steps(path: Path) -> set:
    try:
        steps = json.loads(path.read_text(encoding="utf-8")).get("steps") or []
    except (OSError, ValueError, AttributeError):
        return set()
    return {s.get("step") for s in steps if isinstance(s, dict) and "obs_digest" in s and s["obs_digest"] is None
            and s.get("dom")}


def compare_run(bundled: Path, rerun: Path) -> str | None:
    """The first difference between a bundled run and its re-run, one line, or None when the
    trajectories (timings aside) and the reports (their timings section aside) are byte-identical."""
    try:
        redacted = bool((json.loads((bundled / "manifest.json").read_text(encoding="utf-8")).get("circumstances")
                         or {}).get("redacted"))
    except (OSError, ValueError, AttributeError):
        redacted = False
    stale = (lambda name: _stale_steps(bundled / "trajectories" / name)) if redacted else None
    difference = run_difference(bundled, rerun, stale=stale, names=("the bundle", "the re-run"))
    if difference is None:
        return None
    try:  # (a re-run by other versions may part where they differ: said beside the difference)
        versions = version_differences(*(json.loads((run / "manifest.json").read_text(encoding="utf-8"))
                                         for run in (bundled, rerun)))
    except (OSError, ValueError, AttributeError):
        versions = []
    if versions:
        difference += "; versions differ: " + describe_versions(versions, "in the bundle", "here")
    return difference


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "agent"


def run_bundle(path, out, *, key: str | None = None, agent: str | None = None, agent_config: dict | None = None,
               workers: int = 1, backend: str | None = None, tasks: list | None = None, limit: int | None = None,
               run_names: list | None = None, run_fn=None, echo=None) -> dict:
    """Re-run the bundle's runs into ``out`` (or, with ``agent``, run that agent on its benchmark).

    Everything that refuses the command is decided before anything is written: the bundle's checks
    (structure, every member's digest, the signature with ``key``), a run name it lacks, no run to
    re-run, an ``agent`` that is not here or a setting it does not take. ``run_names`` selects runs
    by name (default: all). A run that cannot be re-run here (its plug-in agent is not installed,
    its actions came from outside webfreeze: :func:`played_outside`) does not stop the others: it
    is reported with ``error`` (one line: why) and ``identical`` None; when no selected run can be
    re-run, nothing is written. A failure while writing (Ctrl-C too) removes what was written, so
    ``out`` is left whole or as it was found.
    ``run_fn(config_kwargs) -> manifest`` runs one run (default: the runner, quietly). Returns
    {"runs": [{name, dir, identical, difference, error}], ...}."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BundleError(f"{out}: exists and is not empty; give a new --out")
    say = echo or (lambda _msg: None)
    run_fn = run_fn or run_quietly
    with open_bundle(path) as bundle:
        check_digests(bundle)
        signature = check_signature(bundle, key)
        contents = bundle.manifest.get("contents") or {}
        archive_name = contents.get("archive")
        if archive_name not in bundle.resources:
            raise BundleError(f"{path}: holds no archive")
        result = {"bundle": str(path), "out": str(out), "signature": signature, "runs": []}
        chosen, why_not, manifests = [], {}, {}
        if agent is None:  # long-context runs: their pools and A1 trajectories are the ones they used
            check_context_members(bundle)
            runs = contents.get("runs") or []
            known = [r.get("name") for r in runs]
            unknown = [n for n in (run_names or []) if n not in known]
            if unknown:
                raise BundleError(f"{path}: holds no run {unknown[0]!r} "
                                  f"(its runs: {', '.join(map(str, known)) or 'none'})")
            if not runs:
                raise BundleError(f"{path}: holds no runs to re-run (give --agent to run one on its benchmark)")
            chosen = [r for r in runs if not run_names or r.get("name") in run_names]
            for entry in chosen:  # what cannot be re-run here is known from the bundled manifests alone
                manifest = _bundled_manifest(bundle, entry)
                why = "its manifest.json is missing or not readable" if manifest is None else _not_here(manifest, entry)
                if why:
                    why_not[entry["name"]] = why
                    say(f"{entry['name']}: could not be re-run: {why}")
                else:
                    manifests[entry["name"]] = manifest
            if not manifests:  # nothing to re-run: each run's line says why, and nothing is written
                result["runs"] = [_not_rerun(e["name"], why_not[e["name"]]) for e in chosen]
                return result
        else:  # an unknown agent or a bad setting: one line, before the folder exists (as bench run)
            try:
                check_agent(agent, dict(agent_config or {}))
            except TypeError as exc:
                raise AgentError(f"agent {agent!r}: bad --agent-config ({exc})") from None
        archive, suite = out / archive_name, out / "suite"
        with _whole_or_nothing(out):
            extract(bundle, out, "archive/")
            extract(bundle, out, "suite/")
            extract(bundle, out, "personas/")
            extract(bundle, out, "context/")
            extract(bundle, out / "bundled", "runs/", strip="runs/")
            if agent is not None:
                settings = dict(agent_config or {})
                run_dir = out / "runs" / _safe_name(agent)
                say(f"running {agent} on the bundled suite -> {run_dir}")
                run_fn(dict(suite=str(suite), archive=str(archive), agent=agent, out=str(run_dir), workers=workers,
                            backend=backend or "browser", agent_config=settings, tasks=list(tasks or []),
                            limit=limit))
                write_report(run_dir)
                result["runs"].append({"name": _safe_name(agent), "dir": str(run_dir), "identical": None,
                                       "difference": None})
                return result
            for entry in chosen:
                name = entry["name"]
                if name in why_not:
                    result["runs"].append(_not_rerun(name, why_not[name]))
                    continue
                try:
                    result["runs"].append(_rerun_one(out, entry, manifests[name], suite, archive, workers, run_fn,
                                                     say))
                except (BundleError, RunError, AgentError, LLMError) as exc:
                    why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    say(f"{name}: could not be re-run: {why}")
                    result["runs"].append(_not_rerun(name, why))
    return result


def _not_rerun(name: str, why: str) -> dict:
    return {"name": name, "dir": None, "identical": None, "difference": None, "error": why}


@contextmanager
def _whole_or_nothing(out: Path):
    """Write into ``out`` (made here, or found empty); when what follows fails (an error, Ctrl-C)
    what was written is removed again, folders made for it included, so no half-written output is
    left behind to block the next try with the same ``--out``."""
    top = out  # the outermost folder this makes
    while not top.parent.exists() and top.parent != top:
        top = top.parent
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except BaseException:
        if made:
            shutil.rmtree(top, ignore_errors=True)
        else:
            for child in list(out.iterdir()):
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        raise


def _bundled_manifest(bundle, entry: dict) -> dict | None:
    """A bundled run's manifest, read in memory (its digest checked as it is read); None when it is
    missing, too large for a manifest, damaged or not a JSON object."""
    try:
        manifest = member_json(bundle, f"{entry.get('path') or ''}manifest.json", f"the manifest of run {entry.get('name')}")
    except BundleError:
        return None
    return manifest if isinstance(manifest, dict) else None


def played_outside(manifest: dict) -> str | None:
    """Why a run cannot be played again when its actions came from outside webfreeze, or None.

    The runner (``bench run`` on one of its executors, :data:`~webfreeze.runs.executors.EXECUTORS`)
    asked the agent its manifest names for every action, so a re-run can ask it again. A run folder
    written by another driver only names who acted: ``webfreeze mcp`` (``circumstances.executor``
    ``"mcp"``; the agent's ``config.driver``, ``"external MCP client"``) or a Gymnasium harness's
    own loop through ``webfreeze.browsergym`` (``circumstances.recorded_by``). Told by the
    manifest, not by the agent's name: the agent it names cannot act (``MCPClient``) or is only a
    label."""
    circumstances = manifest.get("circumstances") if isinstance(manifest.get("circumstances"), dict) else {}
    agent = manifest.get("agent") if isinstance(manifest.get("agent"), dict) else {}
    config = agent.get("config") if isinstance(agent.get("config"), dict) else {}
    executor, recorded_by = circumstances.get("executor"), circumstances.get("recorded_by")
    if executor is not None and executor not in EXECUTORS:
        driver = config.get("driver") if isinstance(config.get("driver"), str) else "a driver outside the runner"
        where = f"{driver}, executor {executor!r}"
    elif recorded_by:
        where = f"a harness's own loop, recorded by {recorded_by!r}"
    else:
        return None
    return (f"its actions came from outside webfreeze ({where}), so they cannot be played again "
            "(--agent runs an agent on its benchmark)")


def _not_here(manifest: dict, entry: dict) -> str | None:
    """Why a bundled run cannot be re-run here (one line), or None."""
    why = played_outside(manifest)
    if why:
        return why
    try:
        _check_agent_here(manifest, entry)
    except AgentError as exc:
        return str(exc).splitlines()[0]
    return None


def _rerun_one(out: Path, entry: dict, manifest: dict, suite: Path, archive: Path, workers: int, run_fn,
               say) -> dict:
    """Re-run one bundled run and compare it; raises (one line) when it cannot be re-run here."""
    name = entry["name"]
    bundled = out / "bundled" / name
    cassette = bundled / "llm-cassette.sqlite"
    run_dir = out / "runs" / name
    config = rerun_settings(manifest, suite, archive, run_dir, cassette if cassette.is_file() else None, workers)
    persona = manifest.get("personas") if isinstance(manifest.get("personas"), dict) else None
    if persona and entry.get("personas"):
        config["persona"] = str(out / entry["personas"])
        config["history"] = dict(persona.get("retrieval") or {})
    context = _context_setting(manifest, entry, out)
    if context:
        config["context"] = context
    say(f"re-running {name} ({config['agent']}, {config['backend']} backend"
        f"{', LLM calls from its cassette' if cassette.is_file() else ''}) -> {run_dir}")
    run_fn(config)
    score_as_bundled(bundled, run_dir)
    difference = compare_run(bundled, run_dir)
    return {"name": name, "dir": str(run_dir), "identical": difference is None, "difference": difference,
            "error": None}


def score_as_bundled(bundled: Path, run_dir: Path) -> None:
    """Write ``run_dir``'s report as the bundled run's was scored: in strict replay if it was, and by
    its judge; an LLM judge answers from the bundled judge cassette in strict replay (a call it does
    not hold is an error, never a new verdict)."""
    strict = scored_strictly(bundled)
    judge_name = report_judge(bundled)
    setting = llm_judge_setting(judge_name)
    if setting is None:
        write_report(run_dir, strict_replay=strict)
        return
    cassette = bundled / JUDGE_CASSETTE
    if not cassette.is_file():
        raise BundleError(f"its report was scored by {judge_name}, and the bundle holds no judge cassette for "
                          f"it ({JUDGE_CASSETTE}): it cannot be scored again here")
    try:
        with open_llm_judge(run_dir, llm=setting, cassette=cassette, mode="replay") as judge:
            write_report(run_dir, judge, strict_replay=strict)
    except ReportError as exc:
        raise BundleError(f"scoring it again: {exc}") from None


def rerun_settings(manifest: dict, suite: Path, archive: Path, run_dir: Path, cassette: Path | None,
                   workers: int = 1) -> dict:
    """The settings that run a run's episodes again as its manifest says (agent and its settings,
    backend, seed, step limit, screenshots, site models, task selection) on ``suite`` and
    ``archive`` into ``run_dir``, its LLM calls from ``cassette`` in strict replay when given."""
    env = manifest.get("env") or {}
    selection = manifest.get("selection") or {}
    config = dict(suite=str(suite), archive=str(archive), agent=(manifest.get("agent") or {}).get("name"),
                  out=str(run_dir), workers=workers, backend=env.get("backend", "browser"),
                  seed=env.get("seed", 0), max_steps=env.get("max_steps", 30),
                  screenshots=bool(env.get("screenshots")), agent_config=agent_settings(manifest),
                  site_models=dict(env.get("site_models") or {}), tasks=list(selection.get("tasks") or []),
                  limit=selection.get("limit"))
    if cassette is not None:
        config.update(cassette=str(cassette), cassette_mode="replay")
    return config


def _check_agent_here(manifest: dict, entry: dict) -> None:
    """The run's agent must be importable here: else one line naming it, what code it was (module,
    distribution and version from the manifest's ``agent_code``) and where its source is bundled."""
    spec = (manifest.get("agent") or {}).get("name")
    try:
        agent_class(spec)
    except AgentError as exc:
        code = manifest.get("agent_code") if isinstance(manifest.get("agent_code"), dict) else {}
        what = ""
        if code.get("distribution"):
            what = f" (from {code['distribution']} {code.get('version') or ''}".rstrip() + ")"
        src = f"; its source is in the bundle at {entry['agent_source']}" if entry.get("agent_source") else ""
        raise AgentError(f"its agent {spec!r}{what} is not installed here: {str(exc).splitlines()[0]}{src}") from None


def _context_setting(manifest: dict, entry: dict, out: Path) -> dict:
    """A bundled run's context condition (``RunSpec.context``) with its filler pool and A1 run
    taken from the extracted bundle (``context/``); ``{}`` for a run without one. The members were
    checked against the run's manifest (:func:`webfreeze.bundles.pack.check_context_members`)."""
    ctx = manifest.get("context")
    if not isinstance(ctx, dict) or not ctx:
        return {}
    members = entry.get("context") if isinstance(entry.get("context"), dict) else {}
    pool, a1_run = members.get("pool"), members.get("a1_run")
    return {"tokens": ctx.get("tokens"), "tokenizer": ctx.get("tokenizer"), "seed": ctx.get("seed", 0),
            "pool": str(out / pool) if isinstance(ctx.get("pool"), dict) and pool else None,
            "a1_run": str(out / a1_run) if isinstance(ctx.get("a1_run"), dict) and a1_run else None}


def run_quietly(settings: dict) -> dict:
    """A run from its settings (``suite``, ``agent``, ``out``, ``archive`` and
    :func:`~webfreeze.runs.spec.build_run`'s), with no progress bar."""
    settings = dict(settings)
    return execute(prepare(*build_run(settings.pop("suite"), settings.pop("agent"), settings.pop("out"),
                                      archive=settings.pop("archive", None), **settings)))
