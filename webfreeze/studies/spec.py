"""Studies: one declarative TOML file -> a grid of ordinary runs (``webfreeze study run``).

A study file names the suite(s), the archive, the environment settings, agent configurations
and the grid axes that multiply them (a cartesian product), context conditions, task filters and
a number of repeats. :func:`load_study` reads and checks it (every problem is one line naming the
key); :func:`expand_cells` turns it into cells, one per (suite, agent configuration, grid point,
context condition, repeat); :func:`run_study` runs every cell that is not finished as an ordinary
run folder (``DIR/cells/<cell-id>/``, made by :func:`webfreeze.runs.prepare.prepare` and
:func:`~webfreeze.runs.execute.execute`, scored by :func:`webfreeze.eval.report.write_report`) and keeps
``DIR/study.json`` (the study's normalised content, its digest, the cells and their status).

Re-running a study finishes it: finished cells are not touched, a half-done cell is resumed by the
runner, a missing one is run. A folder holding another study (another digest) is refused. The
format, every key and the choices made are in docs/studies.md.
"""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import os
import re
import tomllib
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from webfreeze.agents import AgentError, agent_settings
from webfreeze.common.canonical import canonical_json
from webfreeze.common.errors import WebfreezeError
from webfreeze.common.resolve import ResolveError, parse_resolve
from webfreeze.eval.tasks import TaskError, load_suite
from webfreeze.simulator.backends import BACKENDS
from webfreeze.simulator.composition import DEFAULT_TOKENIZER

STUDY_FORMAT = "webfreeze-study"
STUDY_VERSION = 1
STUDY_JSON = "study.json"
CELLS_DIR = "cells"
PERSONAS_DIR = "personas"
PERSONA_SUITE_DIR = "persona-suite"

TOP_KEYS = ("name", "description", "suite", "suites", "archive", "backend", "max_steps", "seed", "repeats",
            "screenshots", "site_models", "persona", "history", "tasks", "agents", "grid", "context", "personas",
            "snapshots", "live", "resolve")
TASK_KEYS = ("categories", "levels", "ids", "per_category", "limit", "dependencies")
AGENT_KEYS = ("name", "label", "settings")
CONTEXT_KEYS = ("conditions", "pool", "tokenizer", "seed", "a1_run")
PERSONA_KEYS = ("n", "seed", "levels", "per_persona", "ranking")
HISTORY_KEYS = ("k", "threshold", "model", "key_fields")
# Keys that say how to run a study, not what it is: kept in study.json, out of the digest (a live
# study's sites reached at other loopback ports is the same study, as a run's --resolve is no part
# of its RunSpec).
CIRCUMSTANCE_KEYS = ("resolve",)
# Agent settings a repeat sets from its seed when the study leaves them to it (docs/studies.md).
REPEAT_SEEDED = ("seed", "memory_seed")


class StudyError(WebfreezeError, RuntimeError):
    """The study cannot be read, started or continued: one line for the user."""


def utc_now() -> str:
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
    if "snapshots" in data:  # (the key only when given: the digests of studies without it stay as they were)
        out["snapshots"] = parse_snapshots(c, data)
    if "live" in data or "resolve" in data:  # (only when given, as snapshots)
        out.update(parse_live(c, data))
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
    return Study(path=p, root=p.resolve().parent, normalised=normalised, digest=study_digest(normalised))


def study_digest(normalised: dict) -> str:
    """A study's digest: its normalised content without the :data:`CIRCUMSTANCE_KEYS`."""
    return digest_of({k: v for k, v in normalised.items() if k not in CIRCUMSTANCE_KEYS})


def parse_live(c: _Checker, data: dict) -> dict:
    """``live = true``: every cell runs live, recording its own archive into its run folder
    (``live.wfz``, docs/live.md), instead of replaying one; ``resolve``, a table of
    ``HOST[:PORT] = "ADDRESS:PORT"`` (as ``record --resolve``), says where to reach a site. Settings
    that cannot go with it are refused here, in one line."""
    out: dict[str, Any] = {}
    if "live" in data:
        out["live"] = c.boolean(data["live"], "live")
    if "resolve" in data and not out.get("live"):
        c.fail("resolve", "needs live = true (no other run reaches a site)")
    if not out.get("live"):
        return out
    for key, why in (("archive", "names an archive to replay"),
                     ("snapshots", "names archives to replay"),
                     ("personas", "selects its tasks on a recorded archive")):
        if key in data:
            c.fail("live", f"each cell records its own archive into its run folder; {key} {why}: "
                           "give one or the other")
    if "resolve" in data:
        table = data["resolve"]
        if not isinstance(table, dict) or not table:
            c.fail("resolve", f"expected a table of HOST = \"ADDRESS:PORT\", not {_kind(table)}")
        for host, target in table.items():
            where = f"resolve.{host}"
            c.string(target, where)
            try:
                parse_resolve([f"{host}={target}"])
            except ResolveError:
                c.fail(where, f"expected \"ADDRESS:PORT\" (e.g. \"127.0.0.1:8001\"), not {target!r}")
        out["resolve"] = {str(h).lower(): table[h] for h in sorted(table, key=str.lower)}
    return out


def resolve_table(normalised: dict) -> dict[str, tuple[str, int]]:
    """A live study's ``resolve`` as a run's ``resolve`` option (host -> (address, port))."""
    return parse_resolve(f"{h}={t}" for h, t in (normalised.get("resolve") or {}).items())


def parse_snapshots(c: _Checker, data: dict) -> list[str]:
    """``snapshots``: two archives or more of the same site (the same suite run on each: "same
    agent, two snapshots"), instead of ``archive``; each is named by its file name's stem."""
    if "archive" in data:
        c.fail("snapshots", "give either archive or snapshots, not both")
    if "personas" in data:
        c.fail("snapshots", "[personas] selects its tasks on one archive: name it with archive")
    snaps = [c.string(x, f"snapshots[{i}]") for i, x in enumerate(c.lst(data["snapshots"], "snapshots"))]
    if len(snaps) < 2:
        c.fail("snapshots", "name two archives or more (for one, use archive)")
    labels = [snapshot_label(x) for x in snaps]
    if len(set(labels)) != len(labels):
        c.fail("snapshots", "two archives have the same file name stem, which names their cells; rename one")
    return snaps


def snapshot_label(archive: str) -> str:
    """How cells and tables name the snapshot an archive is: its file name's stem."""
    return _slug(Path(archive).stem)


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
    snapshot: str | None = None  # the snapshot (archive) label, in a study with ``snapshots``

    def describe(self) -> dict:
        out = {"id": self.id, "condition": self.condition, "suite": self.suite, "agent": self.agent,
               "label": self.label, "grid": self.grid, "settings": self.settings,
               "context": None if self.context is None else {"tokens": self.context,
                                                             "label": context_label(self.context)},
               "repeat": self.repeat, "seed": self.seed, "run": f"{CELLS_DIR}/{self.id}"}
        if self.snapshot is not None:
            out["snapshot"] = self.snapshot
        return out

    @property
    def condition_label(self) -> str:
        """How tables name this cell's condition: label, grid point, context (suite when several)."""
        return condition_label(self.describe())


def condition_label(cell: dict, *, context: bool = True, suite: bool = False) -> str:
    parts = [cell["label"]] + [f"{k}={show_value(v)}" for k, v in cell["grid"].items()]
    if context and cell.get("context"):
        parts.append(f"ctx {cell['context']['label']}")
    if cell.get("snapshot"):
        parts.append(f"@{cell['snapshot']}")
    if suite:
        parts.insert(0, _suite_name(cell["suite"]))
    return " ".join(parts)


def show_value(value: Any) -> str:
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
                    parts += [_slug(f"{k}-{show_value(v)}") for k, v in point.items()]
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
    if n.get("snapshots"):
        cells = snapshot_cells(cells, n["snapshots"])
    ids = [c.id for c in cells]
    dup = next((i for i in ids if ids.count(i) > 1), None)
    if dup:  # e.g. two grid values that slug alike ("a b" and "a-b")
        raise StudyError(f"study file {study.path}: grid: two cells would share the folder {dup}; "
                         "use values that differ in letters or digits")
    return cells


def snapshot_cells(cells: list[Cell], snapshots: list[str]) -> list[Cell]:
    """Each cell once per snapshot, in the order listed: the cells that differ only by archive.
    The snapshot joins the condition (``<condition>.snap-<label>``), so repeats pool per snapshot
    and the report can set the snapshots of one configuration side by side."""
    out = []
    for cell in cells:
        for archive in snapshots:
            label = snapshot_label(archive)
            condition = f"{cell.condition}.snap-{label}"
            out.append(replace(cell, id=f"{condition}.r{cell.repeat}", condition=condition, snapshot=label))
    return out


# ------------------------------------------------------------------------------------ task selection
def glob_escape(task_id: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", task_id)


def select_study_tasks(study: Study, suite_path: Path, where_key: str = "tasks") -> list[str]:
    """The ids of the suite's tasks the study's filters keep, in the suite's order: categories,
    levels, id globs, then at most ``per_category`` per category and ``limit`` in all; with
    ``dependencies``, the task a kept task ``depends_on`` is added when the filters left it out."""
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
