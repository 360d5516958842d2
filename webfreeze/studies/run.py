"""Running a study: its plan (every check before anything is written), each cell as an ordinary run
folder built from the cell's settings, and ``study.json`` kept up to date as the cells finish.
See :mod:`webfreeze.studies.spec` for the study file itself.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webfreeze.agents import AgentError, agent_class, check_agent
from webfreeze.common.canonical import canonical_json
from webfreeze.common.files import write_json
from webfreeze.eval.errors import EvalError
from webfreeze.eval.report import write_report
from webfreeze.personas.generate import generate
from webfreeze.personas.tasks import TaskBuildError, build_suite
from webfreeze.runs.execute import execute
from webfreeze.runs.live import LiveError
from webfreeze.runs.prepare import prepare
from webfreeze.runs.spec import CASSETTE_NAME, RunError, RunOptions, RunSpec, build_run, check_context
from webfreeze.studies.spec import (
    CELLS_DIR,
    PERSONA_SUITE_DIR,
    PERSONAS_DIR,
    STUDY_FORMAT,
    STUDY_JSON,
    STUDY_VERSION,
    Cell,
    Study,
    StudyError,
    expand_cells,
    glob_escape,
    resolve_table,
    select_study_tasks,
    show_value,
    snapshot_label,
    utc_now,
)


# ------------------------------------------------------------------------------------ running
@dataclass
class Plan:
    """What :func:`run_study` will do: the checked study, its cells, and per suite the task ids."""

    study: Study
    out: Path
    cells: list[Cell]
    tasks: dict            # suite (as named) -> [task ids]
    suite_paths: dict      # suite (as named) -> resolved path
    archive: Path | None
    persona: Path | None
    generate: bool = False  # the persona folder and suite are still to be generated (into out)
    snapshots: dict = field(default_factory=dict)  # snapshot label -> archive path (``snapshots``)


def cell_status(run_dir: Path) -> str:
    """``complete`` (its run finished, scored, and no episode ended by an infrastructure failure),
    ``scoring`` (finished, report missing), ``incomplete`` (a run is there, unfinished), or
    ``pending`` (nothing there)."""
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.is_file():
        return "pending"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "incomplete"
    if not manifest.get("complete"):
        return "incomplete"
    report_path = run_dir / "report.json"
    if not report_path.is_file():
        return "scoring"
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
        infra = report["summary"]["overall"].get("infrastructure_errors")
    except (OSError, ValueError, KeyError, TypeError):
        return "scoring"
    return "incomplete" if infra else "complete"


def _check_agents(study: Study, cells: list[Cell]) -> None:
    """Build every distinct agent configuration once (as ``bench run`` does) so a bad setting is
    refused before anything runs."""
    where = f"study file {study.path}"
    for i, a in enumerate(study.normalised["agents"]):
        try:
            agent_class(a["name"])
        except AgentError as exc:
            raise StudyError(f"{where}: agents[{i}].name: {exc}") from None
    seen = set()
    index = {a["label"]: i for i, a in enumerate(study.normalised["agents"])}
    for cell in cells:
        key = canonical_json([cell.agent, cell.settings])
        if key in seen:
            continue
        seen.add(key)
        try:
            check_agent(cell.agent, cell.settings)
        except AgentError as exc:
            raise StudyError(f"{where}: {_settings_key(cell, index)}: {exc}") from None
        except TypeError as exc:
            raise StudyError(f"{where}: {_settings_key(cell, index)}: bad agent settings ({exc})") from None


def _settings_key(cell: Cell, index: dict) -> str:
    where = f"agents[{index[cell.label]}].settings"
    if cell.grid:
        where += " with grid " + ", ".join(f"{k}={show_value(v)}" for k, v in cell.grid.items())
    return where


def _context_for(study: Study, cell: Cell) -> dict:
    """The run's ``context`` (webfreeze.runs.spec.RunSpec.context) for a cell; {} without one."""
    ctx = study.normalised["context"]
    if ctx is None or cell.context is None:
        return {}
    out = {"tokens": cell.context, "tokenizer": ctx["tokenizer"],
           "seed": cell.seed if ctx["seed"] == "repeat" else ctx["seed"]}
    if ctx["pool"] is not None:
        out["pool"] = str(study.resolve(ctx["pool"]).resolve())
    if ctx["a1_run"] is not None:
        out["a1_run"] = str(study.resolve(ctx["a1_run"]).resolve())
    return out


def _check_contexts(study: Study, cells: list[Cell]) -> None:
    ctx = study.normalised["context"]
    if ctx is None:
        return
    where = f"study file {study.path}"
    if ctx["pool"] is not None and not study.resolve(ctx["pool"]).is_file():
        raise StudyError(f"{where}: context.pool: no such pool file {study.resolve(ctx['pool'])}")
    if ctx["a1_run"] is not None and not study.resolve(ctx["a1_run"]).is_dir():
        raise StudyError(f"{where}: context.a1_run: no such run folder {study.resolve(ctx['a1_run'])}")
    for cell in cells:
        try:
            check_context(_context_for(study, cell))
        except RunError as exc:  # the runner's own validator: its message is one line
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise StudyError(f"{where}: {msg if msg.startswith('context') else 'context: ' + msg}") from None


def plan_study(study: Study, out: str | os.PathLike) -> Plan:
    """Check everything that can be checked before anything is written: the agents and their
    settings, the suites and the task filters, the archive, the context conditions, and that ``out``
    is empty or holds this same study."""
    n = study.normalised
    where = f"study file {study.path}"
    out = Path(out)
    cells = expand_cells(study)
    _check_agents(study, cells)
    _check_contexts(study, cells)
    archive = study.resolve(n["archive"]) if n["archive"] else None
    if archive is not None and not archive.is_file():
        raise StudyError(f"{where}: archive: no such archive {archive}")
    persona = study.resolve(n["persona"]) if n["persona"] else None
    if persona is not None and not persona.is_dir():
        raise StudyError(f"{where}: persona: no such persona folder {persona}")
    _check_out(out, study)
    generate = False
    suite_paths: dict[str, Path] = {}
    if n.get("personas"):
        persona = out / PERSONAS_DIR
        suite_paths[PERSONA_SUITE_DIR] = out / PERSONA_SUITE_DIR
        generate = not (suite_paths[PERSONA_SUITE_DIR] / "manifest.json").is_file()
    for i, s in enumerate(n["suites"]):
        p = study.resolve(s)
        if not p.exists():
            key = "suite" if "suite" in _raw_keys(study) else f"suites[{i}]"
            raise StudyError(f"{where}: {key}: no such suite {p}")
        suite_paths[s] = p
    plan = Plan(study, out, cells, {}, suite_paths, archive, persona, generate)
    for i, snap in enumerate(n.get("snapshots") or []):
        plan.snapshots[snapshot_label(snap)] = study.resolve(snap)
        if not study.resolve(snap).is_file():
            raise StudyError(f"{where}: snapshots[{i}]: no such archive {study.resolve(snap)}")
    if not generate:
        plan.tasks = {s: select_study_tasks(study, p) for s, p in suite_paths.items()}
    return plan


def _raw_keys(study: Study) -> set:
    try:
        return set(tomllib.loads(study.path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return set()


def _check_out(out: Path, study: Study) -> None:
    if not out.exists():
        return
    if not out.is_dir():
        raise StudyError(f"{out}: exists and is not a directory")
    manifest = out / STUDY_JSON
    if manifest.is_file():
        try:
            old = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise StudyError(f"{manifest}: not a readable study manifest; use a new --out") from None
        if not isinstance(old, dict) or old.get("format") != STUDY_FORMAT:
            raise StudyError(f"{manifest}: not a study manifest; use a new --out")
        if old.get("digest") != study.digest:
            diff = sorted(k for k in set(old.get("study") or {}) | set(study.normalised)
                          if (old.get("study") or {}).get(k) != study.normalised.get(k))
            what = f" (its {', '.join(diff[:3])} differ{'s' if len(diff) == 1 else ''})" if diff else ""
            raise StudyError(f"{out} holds a different study{what}; use a new --out")
    elif any(out.iterdir()):
        raise StudyError(f"{out}: exists, is not empty and holds no study; use a new --out")


def _generate_personas(plan: Plan) -> None:
    """Write the study's persona folder and persona suite into ``out`` (deterministic from the
    study's [personas] seed), through a temporary folder so that nothing is half-written."""
    g = plan.study.normalised["personas"]
    plan.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".personas-", dir=plan.out))
    try:
        generate(tmp / PERSONAS_DIR, n=g["n"], seed=g["seed"])
        try:
            build_suite(tmp / PERSONAS_DIR, tmp / PERSONA_SUITE_DIR, levels=g["levels"], per_persona=g["per_persona"],
                        ranking=g["ranking"], archive=plan.archive)
        except TaskBuildError as exc:
            raise StudyError(f"study file {plan.study.path}: personas: {exc}") from None
        select_study_tasks(plan.study, tmp / PERSONA_SUITE_DIR)  # the filters must keep something
        for name in (PERSONAS_DIR, PERSONA_SUITE_DIR):
            if (plan.out / name).exists():
                shutil.rmtree(plan.out / name)
            os.replace(tmp / name, plan.out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    plan.generate = False
    plan.tasks = {PERSONA_SUITE_DIR: select_study_tasks(plan.study, plan.out / PERSONA_SUITE_DIR)}


def _agent_calls_llm(cell: Cell) -> bool:
    """Whether a cell's agent talks to a language model: its config names a model."""
    config = check_agent(cell.agent, cell.settings)["config"]
    return isinstance(config, dict) and "model" in config


@dataclass
class StudyOptions:
    """How the cells run (circumstances: not part of the study's identity)."""

    workers: int = 1
    executor: str = "local"
    ray_address: str | None = None
    cassette_mode: str = "record"
    cassettes: str | None = None   # replay: a study folder whose cells' cassettes to use
    llm_concurrency: int | None = None


def cell_config(plan: Plan, cell: Cell, opts: StudyOptions) -> tuple[RunSpec, RunOptions]:
    """The run of one cell: its :class:`~webfreeze.runs.spec.RunSpec` (the study's settings, the
    cell's agent configuration, seed and context condition) and the study's options for it."""
    n = plan.study.normalised
    run_dir = plan.out / CELLS_DIR / cell.id
    cassette, mode = None, opts.cassette_mode
    if opts.cassettes is not None:
        source = Path(opts.cassettes) / CELLS_DIR / cell.id / CASSETTE_NAME
        if source.is_file():
            cassette = str(source.resolve())
        elif not _agent_calls_llm(cell):
            mode = "record"  # (nothing to record: the agent makes no LLM calls)
        else:
            raise StudyError(f"cell {cell.id}: no cassette to replay at {source}")
    elif mode == "replay" and not (run_dir / CASSETTE_NAME).is_file():
        if _agent_calls_llm(cell):
            raise StudyError(f"cell {cell.id}: no cassette to replay at {run_dir / CASSETTE_NAME} "
                             "(record the cell, or replay another study folder's with --cassettes)")
        mode = "record"  # (nothing to replay: the agent makes no LLM calls)
    kwargs: dict[str, Any] = {}
    ctx = _context_for(plan.study, cell)
    if ctx:
        kwargs["context"] = ctx
    archive = plan.snapshots[cell.snapshot] if cell.snapshot else plan.archive
    if n.get("live"):  # the cell records its own archive, RUN_DIR/live.wfz (docs/live.md)
        kwargs.update(live=True, resolve=resolve_table(n))
    return build_run(plan.suite_paths[cell.suite], cell.agent, run_dir, archive=archive, workers=opts.workers,
                     backend=n["backend"], seed=cell.seed, max_steps=n["max_steps"], screenshots=n["screenshots"],
                     agent_config=cell.settings, site_models=n["site_models"],
                     tasks=[glob_escape(t) for t in plan.tasks[cell.suite]], cassette=cassette, cassette_mode=mode,
                     llm_concurrency=opts.llm_concurrency, executor=opts.executor, ray_address=opts.ray_address,
                     persona=plan.persona, history=n["history"], **kwargs)


def study_manifest(plan: Plan, statuses: dict, errors: dict | None = None, circumstances: dict | None = None) -> dict:
    cells = []
    for cell in plan.cells:
        d = cell.describe()
        d["status"] = statuses.get(cell.id, "pending")
        if errors and cell.id in errors:
            d["error"] = errors[cell.id]
        cells.append(d)
    return {"format": STUDY_FORMAT, "version": STUDY_VERSION, "name": plan.study.name,
            "study": plan.study.normalised, "digest": plan.study.digest,
            "tasks": {s: ids for s, ids in sorted(plan.tasks.items())},
            "cells": cells,
            "complete": all(statuses.get(c.id) == "complete" for c in plan.cells),
            "circumstances": circumstances or {}}


class StudyProgress:
    """What :func:`run_study` reports as it goes (the CLI draws it with rich; the default is silent)."""

    def study_started(self, plan: Plan, todo: list[Cell], done: list[Cell]) -> None: ...
    def cell_started(self, cell: Cell, tasks: int, done: int) -> None: ...
    def episode(self, cell: Cell, summary: dict) -> None: ...
    def cell_finished(self, cell: Cell, manifest: dict) -> None: ...


def _check_api_keys(plan: Plan, opts: "StudyOptions") -> None:
    """A cell that will call its endpoint with a key from ``api_key_env`` needs that variable set:
    refused before the study folder is written, not when the cell starts (``api_key_env = ""``
    names an endpoint that needs no key)."""
    if opts.cassette_mode == "replay" or opts.cassettes is not None:
        return
    for cell in plan.cells:
        name = cell.settings.get("api_key_env") if isinstance(cell.settings, dict) else None
        if name and isinstance(name, str) and cell.settings.get("model") != "local" and not os.environ.get(name):
            raise StudyError(f"cell {cell.id}: the API key variable {name} is not set (export it, or set "
                             f'api_key_env = "" for an endpoint that needs no key)')


def run_study(plan: Plan, opts: StudyOptions | None = None, progress: StudyProgress | None = None) -> dict:
    """Run every cell of ``plan`` that is not complete; returns the study manifest (``study.json``).

    A cell that cannot run (its RunError: a strict replay that misses, a worker that cannot start)
    stops the study with :class:`StudyError` naming the cell, after study.json records it."""
    opts = opts or StudyOptions()
    progress = progress or StudyProgress()
    _check_api_keys(plan, opts)
    if plan.generate:
        _generate_personas(plan)
    out = plan.out
    (out / CELLS_DIR).mkdir(parents=True, exist_ok=True)
    circumstances = {"study_file": str(plan.study.path.resolve()), "workers": opts.workers,
                     "executor": opts.executor, "cassette_mode": opts.cassette_mode,
                     "cassettes": str(Path(opts.cassettes).resolve()) if opts.cassettes else None,
                     "suite_paths": {s: str(p.resolve()) for s, p in sorted(plan.suite_paths.items())},
                     "archive_path": str(plan.archive.resolve()) if plan.archive else None,
                     "started_at": utc_now()}
    statuses = {c.id: cell_status(out / CELLS_DIR / c.id) for c in plan.cells}
    errors: dict[str, str] = {}
    write_json(out / STUDY_JSON, study_manifest(plan, statuses, errors, circumstances))
    todo = [c for c in plan.cells if statuses[c.id] != "complete"]
    progress.study_started(plan, todo, [c for c in plan.cells if statuses[c.id] == "complete"])
    try:
        for cell in todo:
            run_dir = out / CELLS_DIR / cell.id
            if statuses[cell.id] != "scoring":
                try:
                    spec, options = cell_config(plan, cell, opts)
                except StudyError as exc:
                    errors[cell.id] = str(exc)
                    raise
                try:
                    prep = prepare(spec, options)
                    progress.cell_started(cell, len(prep.suite.tasks), len(prep.done))
                    statuses[cell.id] = "running"
                    manifest = execute(prep, progress=lambda s, c=cell: progress.episode(c, s))
                except (RunError, LiveError) as exc:
                    statuses[cell.id] = cell_status(run_dir)
                    errors[cell.id] = str(exc)
                    raise StudyError(f"cell {cell.id}: {exc}") from None
                if not manifest.get("complete"):
                    statuses[cell.id] = "incomplete"
                    raise StudyError(f"cell {cell.id}: the run did not finish "
                                     f"({manifest.get('tasks_done')} of {manifest['suite']['tasks']} tasks)")
            try:
                write_report(run_dir)
            except EvalError as exc:
                statuses[cell.id] = "scoring"
                raise StudyError(f"cell {cell.id}: cannot score the run: {exc}") from None
            statuses[cell.id] = cell_status(run_dir)
            manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
            progress.cell_finished(cell, manifest)
            write_json(out / STUDY_JSON, study_manifest(plan, statuses, errors, circumstances))
    finally:
        for cid, st in statuses.items():
            if st == "running":  # interrupted in the middle of it: the runner resumes it next time
                statuses[cid] = cell_status(out / CELLS_DIR / cid)
        circumstances["finished_at"] = utc_now()
        manifest = study_manifest(plan, statuses, errors, circumstances)
        write_json(out / STUDY_JSON, manifest)
    return manifest


def read_study_json(study_dir: str | os.PathLike) -> dict:
    """A study folder's ``study.json``, checked to be one. Raises :class:`StudyError`."""
    path = Path(study_dir) / STUDY_JSON
    if not Path(study_dir).is_dir():
        raise StudyError(f"{study_dir}: not a study folder (no such directory)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StudyError(f"{study_dir}: not a study folder (no {STUDY_JSON}; make one with webfreeze study run)") \
            from None
    except (OSError, ValueError) as exc:
        raise StudyError(f"{path}: not a readable study manifest ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != STUDY_FORMAT or not isinstance(data.get("cells"), list):
        raise StudyError(f"{path}: not a study manifest (format {STUDY_FORMAT!r} expected)")
    return data


__all__ = ["Plan", "StudyOptions", "StudyProgress", "plan_study", "run_study", "cell_config", "cell_status",
           "study_manifest", "read_study_json"]
