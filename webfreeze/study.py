"""Studies: one declarative TOML file -> a grid of ordinary runs (``webfreeze study run``).

A study file names the suite(s), the archive, the environment settings, agent configurations
and the grid axes that multiply them (a cartesian product), context conditions, task filters and
a number of repeats. :func:`load_study` reads and checks it (every problem is one line naming the
key); :func:`expand_cells` turns it into cells, one per (suite, agent configuration, grid point,
context condition, repeat); :func:`run_study` runs every cell that is not finished as an ordinary
run folder (``DIR/cells/<cell-id>/``, made by :func:`webfreeze.runner.prepare` and
:func:`~webfreeze.runner.execute`, scored by :func:`webfreeze.eval.report.write_report`) and keeps
``DIR/study.json`` (the study's normalised content, its digest, the cells and their status).

Re-running a study finishes it: finished cells are not touched, a half-done cell is resumed by the
runner, a missing one is run. A folder holding another study (another digest) is refused. The
format, every key and the choices made are in docs/studies.md.
"""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import json
import os
import re
import shutil
import tempfile
import tomllib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from webfreeze.common.canonical import canonical_json
from webfreeze.common.errors import WebfreezeError
from webfreeze.common.files import write_json
from webfreeze.simulator.backends import BACKENDS
from webfreeze.simulator.composition import DEFAULT_TOKENIZER

STUDY_FORMAT = "webfreeze-study"
STUDY_VERSION = 1
STUDY_JSON = "study.json"
CELLS_DIR = "cells"
PERSONAS_DIR = "personas"
PERSONA_SUITE_DIR = "persona-suite"

TOP_KEYS = ("name", "description", "suite", "suites", "archive", "backend", "max_steps", "seed", "repeats",
            "screenshots", "site_models", "persona", "history", "tasks", "agents", "grid", "context", "personas")
TASK_KEYS = ("categories", "levels", "ids", "per_category", "limit", "dependencies")
AGENT_KEYS = ("name", "label", "settings")
CONTEXT_KEYS = ("conditions", "pool", "tokenizer", "seed", "a1_run")
PERSONA_KEYS = ("n", "seed", "levels", "per_persona", "ranking")
HISTORY_KEYS = ("k", "threshold", "model", "key_fields")
# Agent settings a repeat sets from its seed when the study leaves them to it (docs/studies.md).
REPEAT_SEEDED = ("seed", "memory_seed")


class StudyError(WebfreezeError, RuntimeError):
    """The study cannot be read, started or continued: one line for the user."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def digest_of(data: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------------------ the study file
@dataclass
class Study:
    """A checked study file. ``normalised`` is its content with every default filled in (paths as
    written, relative to the study file); ``digest`` identifies it; ``root`` is the study file's
    folder (paths resolve against it)."""

    path: Path
    root: Path
    normalised: dict
    digest: str

    @property
    def name(self) -> str:
        return self.normalised["name"]

    def resolve(self, rel: str) -> Path:
        p = Path(rel).expanduser()
        return p if p.is_absolute() else (self.root / p)


class _Checker:
    def __init__(self, where: str):
        self.where = where

    def fail(self, key: str, msg: str):
        raise StudyError(f"{self.where}: {key}: {msg}")

    def table(self, data: Any, key: str, known: tuple) -> dict:
        if not isinstance(data, dict):
            self.fail(key, f"expected a table, not {_kind(data)}")
        for k in data:
            if k not in known:
                self.fail(f"{key}.{k}" if key else k, f"unknown key (known: {', '.join(known)})")
        return data

    def string(self, value: Any, key: str, *, choices: tuple | None = None) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(key, f"expected a non-empty string, not {_kind(value)}")
        if choices and value not in choices:
            self.fail(key, f"{value!r} is not one of {', '.join(choices)}")
        return value

    def whole(self, value: Any, key: str, *, low: int | None = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"expected a whole number, not {_kind(value)}")
        if low is not None and value < low:
            self.fail(key, f"must be at least {low} (not {value})")
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, not {_kind(value)}")
        return value

    def lst(self, value: Any, key: str, *, empty_ok: bool = False) -> list:
        if not isinstance(value, list):
            self.fail(key, f"expected a list, not {_kind(value)}")
        if not value and not empty_ok:
            self.fail(key, "expected a non-empty list")
        return value


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, str):
        return f"a string ({value!r})"
    if isinstance(value, int):
        return f"a number ({value})"
    if isinstance(value, float):
        return f"a number ({value:g})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return type(value).__name__


_TOKENS = re.compile(r"^(\d+)\s*k$", re.IGNORECASE)


def context_tokens(value: Any) -> int | None:
    """A context condition as a token target: ``"none"`` -> 0, ``"25k"`` -> 25000, ``50000`` -> 50000;
    None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == "none":
            return 0
        if text.isdigit():
            return int(text)
        m = _TOKENS.match(text)
        if m:
            return int(m.group(1)) * 1000
    return None


def context_label(tokens: int) -> str:
    """``none`` for 0, ``25k`` for 25000, else the number."""
    if tokens == 0:
        return "none"
    return f"{tokens // 1000}k" if tokens % 1000 == 0 else str(tokens)


def parse_study(data: dict, *, where: str = "study file") -> dict:
    """Check a study file's parsed TOML and return it normalised (every default filled in, the
    context conditions as token counts). Raises :class:`StudyError` naming the first bad key."""
    c = _Checker(where)
    c.table(data, "", TOP_KEYS)
    out: dict[str, Any] = {}
    out["name"] = c.string(data.get("name", "study"), "name")
    out["description"] = data.get("description", "")
    if not isinstance(out["description"], str):
        c.fail("description", f"expected a string, not {_kind(out['description'])}")
    gen = data.get("personas")
    if "suite" in data and "suites" in data:
        c.fail("suites", "give either suite or suites, not both")
    if "suites" in data:
        suites = [c.string(s, f"suites[{i}]") for i, s in enumerate(c.lst(data["suites"], "suites"))]
        if len(set(suites)) != len(suites):
            c.fail("suites", "a suite is named twice")
    elif "suite" in data:
        suites = [c.string(data["suite"], "suite")]
    elif gen is not None:
        suites = []
    else:
        c.fail("suite", "missing: name the task suite (a suite folder, relative to the study file)")
    if gen is not None:
        c.table(gen, "personas", PERSONA_KEYS)
        if suites:
            c.fail("personas", "generates the study's suite: leave out suite/suites (or drop [personas] and "
                               "name a prepared persona suite and persona folder)")
        if "persona" in data:
            c.fail("persona", "[personas] generates the persona folder: leave out persona")
        levels = c.lst(gen.get("levels", [0, 1, 2]), "personas.levels")
        for i, lv in enumerate(levels):
            if c.whole(lv, f"personas.levels[{i}]") not in (0, 1, 2):
                c.fail(f"personas.levels[{i}]", f"levels are 0, 1 or 2 (not {lv})")
        out["personas"] = {"n": c.whole(gen.get("n", 2), "personas.n", low=1),
                           "seed": c.whole(gen.get("seed", 0), "personas.seed", low=None),
                           "levels": sorted(set(levels)),
                           "per_persona": c.whole(gen.get("per_persona", 1), "personas.per_persona", low=1),
                           "ranking": c.boolean(gen.get("ranking", False), "personas.ranking")}
        if out["personas"]["per_persona"] > 4:
            c.fail("personas.per_persona", "at most 4 query sets per persona")
    out["suites"] = suites
    out["archive"] = c.string(data["archive"], "archive") if "archive" in data else None
    if gen is not None and out["archive"] is None:
        c.fail("archive", "missing: [personas] keeps the tasks whose pages the archive recorded, so name it")
    out["backend"] = c.string(data.get("backend", "browser"), "backend", choices=BACKENDS)
    out["max_steps"] = c.whole(data.get("max_steps", 30), "max_steps", low=1)
    out["seed"] = c.whole(data.get("seed", 0), "seed", low=None)
    out["repeats"] = c.whole(data.get("repeats", 1), "repeats", low=1)
    out["screenshots"] = c.boolean(data.get("screenshots", False), "screenshots")
    models = data.get("site_models", {})
    if not isinstance(models, dict):
        c.fail("site_models", f"expected a table of HOST = KIND, not {_kind(models)}")
    out["site_models"] = {str(h): c.string(k, f"site_models.{h}") for h, k in sorted(models.items())}
    out["persona"] = c.string(data["persona"], "persona") if "persona" in data else None
    history = c.table(data.get("history", {}), "history", HISTORY_KEYS)
    out["history"] = dict(sorted(history.items()))

    # tasks
    t = c.table(data.get("tasks", {}), "tasks", TASK_KEYS)
    tasks: dict[str, Any] = {}
    tasks["categories"] = [c.string(x, f"tasks.categories[{i}]")
                           for i, x in enumerate(c.lst(t.get("categories", []), "tasks.categories", empty_ok=True))]
    tasks["levels"] = [c.whole(x, f"tasks.levels[{i}]")
                       for i, x in enumerate(c.lst(t.get("levels", []), "tasks.levels", empty_ok=True))]
    tasks["ids"] = [c.string(x, f"tasks.ids[{i}]")
                    for i, x in enumerate(c.lst(t.get("ids", []), "tasks.ids", empty_ok=True))]
    tasks["per_category"] = c.whole(t["per_category"], "tasks.per_category", low=1) if "per_category" in t else None
    tasks["limit"] = c.whole(t["limit"], "tasks.limit", low=1) if "limit" in t else None
    tasks["dependencies"] = c.boolean(t.get("dependencies", True), "tasks.dependencies")
    out["tasks"] = tasks

    # agents and the grid
    agents_raw = data.get("agents")
    if agents_raw is None:
        c.fail("agents", "missing: add at least one [[agents]] table with a name")
    agents = []
    for i, a in enumerate(c.lst(agents_raw, "agents")):
        key = f"agents[{i}]"
        c.table(a, key, AGENT_KEYS)
        if "name" not in a:
            c.fail(f"{key}.name", "missing: the agent (reference, keyword, llm, package.module:Class, ...)")
        name = c.string(a["name"], f"{key}.name")
        settings = a.get("settings", {})
        if not isinstance(settings, dict):
            c.fail(f"{key}.settings", f"expected a table of agent settings, not {_kind(settings)}")
        label = c.string(a.get("label", name), f"{key}.label")
        agents.append({"name": name, "label": label, "settings": dict(sorted(settings.items()))})
    labels = [a["label"] for a in agents]
    for i, lb in enumerate(labels):
        if labels.index(lb) != i:
            c.fail(f"agents[{i}].label", f"{lb!r} is used by agents[{labels.index(lb)}] too: give each a label")
    grid_raw = data.get("grid", {})
    if not isinstance(grid_raw, dict):
        c.fail("grid", f"expected a table of SETTING = [values], not {_kind(grid_raw)}")
    grid = {}
    for axis, values in grid_raw.items():
        vals = c.lst(values, f"grid.{axis}")
        if len({canonical_json(v) for v in vals}) != len(vals):
            c.fail(f"grid.{axis}", "a value is listed twice")
        for i, a in enumerate(agents):
            if axis in a["settings"]:
                c.fail(f"grid.{axis}", f"also fixed by agents[{i}].settings: set it in one place")
        grid[axis] = vals
    out["agents"] = agents
    out["grid"] = grid  # (axis order as written: it is the cells' order)

    # context conditions
    ctx = data.get("context")
    if ctx is None:
        out["context"] = None
    else:
        c.table(ctx, "context", CONTEXT_KEYS)
        conds = c.lst(ctx.get("conditions"), "context.conditions") if "conditions" in ctx else \
            c.fail("context.conditions", "missing: e.g. [\"none\", \"25k\", \"50k\"]")
        tokens = []
        for i, v in enumerate(conds):
            n = context_tokens(v)
            if n is None:
                c.fail(f"context.conditions[{i}]", f"expected none, a token count or NNk (e.g. 25k), not {_kind(v)}")
            if n in tokens:
                c.fail(f"context.conditions[{i}]", f"{context_label(n)} is listed twice")
            tokens.append(n)
        seed = ctx.get("seed", "repeat")
        if seed != "repeat":
            c.whole(seed, "context.seed", low=None)
        out["context"] = {"conditions": tokens,
                          "pool": c.string(ctx["pool"], "context.pool") if "pool" in ctx else None,
                          "tokenizer": c.string(ctx.get("tokenizer", DEFAULT_TOKENIZER), "context.tokenizer"),
                          "seed": seed,
                          "a1_run": c.string(ctx["a1_run"], "context.a1_run") if "a1_run" in ctx else None}
    return out


def load_study(path: str | os.PathLike) -> Study:
    """Read and check a study file (TOML). Raises :class:`StudyError` (one line naming the key)."""
    p = Path(path)
    where = f"study file {p}"
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise StudyError(f"{where}: no such file") from None
    except IsADirectoryError:
        raise StudyError(f"{where}: is a directory, not a TOML file") from None
    except OSError as exc:
        raise StudyError(f"{where}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise StudyError(f"{where}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise StudyError(f"{where}: not valid TOML: {exc}") from None
    normalised = parse_study(data, where=where)
    return Study(path=p, root=p.resolve().parent, normalised=normalised, digest=digest_of(normalised))


# ------------------------------------------------------------------------------------ cells
@dataclass
class Cell:
    """One run of the study: a suite, an agent configuration, a context condition, a repeat."""

    id: str
    condition: str          # the id without the repeat: cells that differ only by repeat share it
    suite: str              # as the study names it (relative to the study file)
    agent: str
    label: str              # the agent configuration's label
    grid: dict              # this cell's grid point {axis: value}
    settings: dict          # the agent settings the run gets (agent's own + grid + repeat seeds)
    context: int | None     # token target (0 = none), or None: no context composition
    repeat: int
    seed: int
    extra: dict = field(default_factory=dict)

    def describe(self) -> dict:
        return {"id": self.id, "condition": self.condition, "suite": self.suite, "agent": self.agent,
                "label": self.label, "grid": self.grid, "settings": self.settings,
                "context": None if self.context is None else {"tokens": self.context,
                                                              "label": context_label(self.context)},
                "repeat": self.repeat, "seed": self.seed, "run": f"{CELLS_DIR}/{self.id}"}

    @property
    def condition_label(self) -> str:
        """How tables name this cell's condition: label, grid point, context (suite when several)."""
        return condition_label(self.describe())


def condition_label(cell: dict, *, context: bool = True, suite: bool = False) -> str:
    parts = [cell["label"]] + [f"{k}={_show(v)}" for k, v in cell["grid"].items()]
    if context and cell.get("context"):
        parts.append(f"ctx {cell['context']['label']}")
    if suite:
        parts.insert(0, _suite_name(cell["suite"]))
    return " ".join(parts)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (dict, list)):
        return canonical_json(value)
    return str(value)


def _slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")
    return s or "x"


def _suite_name(suite: str) -> str:
    return Path(suite).name or suite


def _seeded_settings(agent: str, settings: dict, seed: int) -> dict:
    """The agent's settings for a repeat: ``seed`` and ``memory_seed`` set to the repeat's seed when
    the agent takes them and the study does not fix them."""
    from webfreeze.agents import AgentError, agent_settings

    try:
        known = agent_settings(agent)
    except AgentError:
        known = []
    out = dict(settings)
    for key in REPEAT_SEEDED:
        if known is not None and key in known and key not in out:
            out[key] = seed
    return dict(sorted(out.items()))


def expand_cells(study: Study) -> list[Cell]:
    """Every cell of the study, in a fixed order: suite, agent configuration, grid point (axes in the
    order written, values in the order listed), context condition, repeat."""
    n = study.normalised
    axes = list(n["grid"].items())
    points = [dict(zip([a for a, _ in axes], combo)) for combo in itertools.product(*[v for _, v in axes])] \
        if axes else [{}]
    contexts = n["context"]["conditions"] if n["context"] else [None]
    suites = n["suites"] or [PERSONA_SUITE_DIR]
    cells = []
    for suite in suites:
        for agent in n["agents"]:
            for point in points:
                for ctx in contexts:
                    parts = ([_slug(_suite_name(suite))] if len(suites) > 1 else []) + [_slug(agent["label"])]
                    parts += [_slug(f"{k}-{_show(v)}") for k, v in point.items()]
                    if ctx is not None:
                        parts.append(f"ctx-{context_label(ctx)}")
                    condition = ".".join(parts)
                    if len(condition) > 120:  # keep paths short; the digest keeps it unique
                        condition = condition[:100] + "-" + hashlib.sha256(condition.encode()).hexdigest()[:12]
                    for r in range(n["repeats"]):
                        seed = n["seed"] + r
                        settings = _seeded_settings(agent["name"], {**agent["settings"], **point}, seed)
                        cells.append(Cell(id=f"{condition}.r{r}", condition=condition, suite=suite,
                                          agent=agent["name"], label=agent["label"], grid=dict(point),
                                          settings=settings, context=ctx, repeat=r, seed=seed))
    ids = [c.id for c in cells]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup:  # e.g. two grid values that slug alike ("a b" and "a-b")
        raise StudyError(f"study file {study.path}: grid: two cells would share the folder {dup}; "
                         "use values that differ in letters or digits")
    return cells


# ------------------------------------------------------------------------------------ task selection
def _glob_escape(task_id: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", task_id)


def select_study_tasks(study: Study, suite_path: Path, where_key: str = "tasks") -> list[str]:
    """The ids of the suite's tasks the study's filters keep, in the suite's order: categories,
    levels, id globs, then at most ``per_category`` per category and ``limit`` in all; with
    ``dependencies``, the task a kept task ``depends_on`` is added when the filters left it out."""
    from webfreeze.eval.tasks import TaskError, load_suite

    try:
        suite = load_suite(suite_path)
    except TaskError as exc:
        raise StudyError(str(exc)) from None
    f = study.normalised["tasks"]
    where = f"study file {study.path}"
    known_cats = sorted({t.category for t in suite.tasks})
    for i, cat in enumerate(f["categories"]):
        if cat not in known_cats:
            raise StudyError(f"{where}: {where_key}.categories[{i}]: no task of category {cat!r} in {suite_path} "
                             f"(its categories: {', '.join(known_cats)})")
    chosen = []
    per_cat: dict[str, int] = {}
    for t in suite.tasks:
        if f["categories"] and t.category not in f["categories"]:
            continue
        level = t.raw.get("level", t.extra.get("level"))
        if f["levels"] and level not in f["levels"]:
            continue
        if f["ids"] and not any(fnmatch.fnmatchcase(t.id, g) for g in f["ids"]):
            continue
        if f["per_category"] is not None:
            if per_cat.get(t.category, 0) >= f["per_category"]:
                continue
            per_cat[t.category] = per_cat.get(t.category, 0) + 1
        chosen.append(t.id)
    if f["limit"] is not None:
        chosen = chosen[:f["limit"]]
    if not chosen:
        raise StudyError(f"{where}: {where_key}: no task of {suite_path} passes the filters")
    if f["dependencies"]:
        by_id = {t.id: t for t in suite.tasks}
        wanted = set(chosen)
        frontier = list(chosen)  # (a dependency's own dependency is followed too)
        while frontier:
            t = by_id.get(frontier.pop())
            dep = t.raw.get("depends_on") if t is not None else None
            if isinstance(dep, str) and dep in by_id and dep not in wanted:
                wanted.add(dep)
                frontier.append(dep)
        chosen = [t.id for t in suite.tasks if t.id in wanted]
    return chosen


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
    from webfreeze.agents import AgentError, agent_class, check_agent

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
        where += " with grid " + ", ".join(f"{k}={_show(v)}" for k, v in cell.grid.items())
    return where


def _context_for(study: Study, cell: Cell) -> dict:
    """The run's ``context`` (webfreeze.runner.RunConfig.context) for a cell; {} without one."""
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
    from webfreeze import runner

    where = f"study file {study.path}"
    if ctx["pool"] is not None and not study.resolve(ctx["pool"]).is_file():
        raise StudyError(f"{where}: context.pool: no such pool file {study.resolve(ctx['pool'])}")
    if ctx["a1_run"] is not None and not study.resolve(ctx["a1_run"]).is_dir():
        raise StudyError(f"{where}: context.a1_run: no such run folder {study.resolve(ctx['a1_run'])}")
    if "context" not in runner.RunConfig.__dataclass_fields__:
        raise StudyError(f"{where}: context: this webfreeze's runner does not compose contexts "
                         "(RunConfig has no 'context'; see docs/studies.md)")
    check = getattr(runner, "check_context", None)
    if callable(check):
        for cell in cells:
            try:
                check(_context_for(study, cell))
            except Exception as exc:  # the runner's own validator: its message is one line
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
    from webfreeze.personas.generate import generate
    from webfreeze.personas.tasks import TaskBuildError, build_suite

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
    from webfreeze.agents import check_agent

    config = check_agent(cell.agent, cell.settings)["config"]
    return isinstance(config, dict) and "model" in config


@dataclass
class RunOptions:
    """How the cells run (circumstances: not part of the study's identity)."""

    workers: int = 1
    executor: str = "local"
    ray_address: str | None = None
    cassette_mode: str = "record"
    cassettes: str | None = None   # replay: a study folder whose cells' cassettes to use
    llm_concurrency: int | None = None


def cell_config(plan: Plan, cell: Cell, opts: RunOptions):
    """The :class:`webfreeze.runner.RunConfig` of one cell."""
    from webfreeze.runner import CASSETTE_NAME, RunConfig

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
    return RunConfig(suite=str(plan.suite_paths[cell.suite]), archive=str(plan.archive) if plan.archive else None,
                     agent=cell.agent, out=str(run_dir), workers=opts.workers, backend=n["backend"], seed=cell.seed,
                     max_steps=n["max_steps"], screenshots=n["screenshots"], agent_config=dict(cell.settings),
                     site_models=dict(n["site_models"]), tasks=[_glob_escape(t) for t in plan.tasks[cell.suite]],
                     limit=None, cassette=cassette, cassette_mode=mode, llm_concurrency=opts.llm_concurrency,
                     executor=opts.executor, ray_address=opts.ray_address,
                     persona=str(plan.persona) if plan.persona else None, history=dict(n["history"]), **kwargs)


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


def _check_api_keys(plan: Plan, opts: "RunOptions") -> None:
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


def run_study(plan: Plan, opts: RunOptions | None = None, progress: StudyProgress | None = None) -> dict:
    """Run every cell of ``plan`` that is not complete; returns the study manifest (``study.json``).

    A cell that cannot run (its RunError: a strict replay that misses, a worker that cannot start)
    stops the study with :class:`StudyError` naming the cell, after study.json records it."""
    from webfreeze.eval.errors import EvalError
    from webfreeze.eval.report import write_report
    from webfreeze.runner import RunError, execute, prepare

    opts = opts or RunOptions()
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
                     "started_at": _now()}
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
                    config = cell_config(plan, cell, opts)
                except StudyError as exc:
                    errors[cell.id] = str(exc)
                    raise
                try:
                    prep = prepare(config)
                    progress.cell_started(cell, len(prep.suite.tasks), len(prep.done))
                    statuses[cell.id] = "running"
                    manifest = execute(prep, progress=lambda s, c=cell: progress.episode(c, s))
                except RunError as exc:
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
        circumstances["finished_at"] = _now()
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


__all__ = ["Study", "Cell", "Plan", "RunOptions", "StudyError", "StudyProgress", "load_study", "parse_study",
           "expand_cells", "plan_study", "run_study", "cell_status", "select_study_tasks", "read_study_json",
           "context_tokens", "context_label", "condition_label"]
