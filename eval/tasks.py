"""Task suites: loading, validation and the suite digest.

A suite is ``SUITE/manifest.json`` + ``SUITE/tasks.jsonl`` (one task per line), a bare ``.jsonl``
file, the Mind2Web-Live key-node file exactly as WebCanvas publishes it (a JSON list of
``{index, task, reference_task_length, evaluation}``), or the Persona2Web query file as published
(rubric ground truth from each persona's level-0 query). Every problem is one :class:`TaskError`
naming the file and, for JSONL, the line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from webfreeze.common.canonical import canonical_json

from .errors import TaskError

SUITE_FORMAT = "webfreeze-suite"
SUITE_VERSION = 1

ANSWER_FORMS = ("exact", "normalised", "must_include", "one_of", "numeric")
KEY_NODE_FUNCTIONS = ("url_included_match", "url_exactly_match", "url_semantic_match",
                      "element_path_exactly_match", "element_value_exactly_match",
                      "element_value_semantic_match")
FINAL_STATE_TESTS = ("contains", "count", "equals")
# "candidates" and "target" together are the ranking kind.
GROUND_TRUTH_KINDS = ("answer", "reference_trajectory", "key_nodes", "rubric", "candidates", "target",
                      "ranking", "final_state", "requests")
TASK_FIELDS = ("id", "category", "instruction", "start_url", "snapshot_time", "ground_truth",
               "reference_length")


@dataclass
class Task:
    """One task. ``ground_truth`` keeps the line's JSON as written (a reference trajectory given as
    a path is loaded into ``reference`` and the path kept); ``extra`` holds fields we do not use."""

    id: str
    category: str
    instruction: str
    start_url: str | None
    ground_truth: dict[str, Any]
    snapshot_time: str | None = None
    reference_length: int | None = None
    reference: dict | None = None  # the loaded reference trajectory, if the task has one
    extra: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # FILE:LINE the task came from
    raw: dict[str, Any] = field(default_factory=dict)  # the line's JSON object, for the digest

    @property
    def depends_on(self) -> str | None:
        """The id of the task this one depends on (its subtask A1 in the long-context study), or None."""
        dep = self.extra.get("depends_on")
        return dep if isinstance(dep, str) else None

    @property
    def kinds(self) -> list[str]:
        """Ground-truth kinds present, in a fixed order (``ranking`` stands for candidates+target)."""
        order = ("answer", "reference_trajectory", "key_nodes", "rubric", "ranking", "final_state", "requests")
        present = set(self.ground_truth)
        if "candidates" in present:
            present.add("ranking")
        return [k for k in order if k in present]


@dataclass
class Suite:
    name: str
    tasks: list[Task]
    digest: str
    categories: list[str]
    archive_digest: str | None = None
    path: str = ""  # the manifest, .jsonl or .json file it was loaded from
    root: str = ""  # the directory reference paths are resolved against
    manifest: dict = field(default_factory=dict)  # the manifest's JSON (e.g. its `archive`, `site_models`)

    @property
    def backend(self) -> str | None:
        """The backend the manifest names for its tasks (``bench run`` and ``tasks validate`` use it
        when given none), or None."""
        return (self.manifest or {}).get("backend")

    def by_id(self) -> dict[str, Task]:
        return {t.id: t for t in self.tasks}

    def counts(self) -> dict[str, int]:
        """Number of tasks per category (sorted by category)."""
        out: dict[str, int] = {}
        for t in self.tasks:
            out[t.category] = out.get(t.category, 0) + 1
        return dict(sorted(out.items()))


def canonical_line(obj: Any) -> str:
    """The canonical JSON text of one task: sorted keys, no spaces, UTF-8 kept as is."""
    return canonical_json(obj)


def suite_digest(task_objects: list[dict]) -> str:
    """``sha256:`` + hex SHA-256 of the canonical task lines, each followed by ``\\n``, in file order."""
    h = hashlib.sha256()
    for obj in task_objects:
        h.update(canonical_line(obj).encode("utf-8") + b"\n")
    return "sha256:" + h.hexdigest()


# ------------------------------------------------------------------------------ validation
def _require(cond: bool, message: str, file, line) -> None:
    if not cond:
        raise TaskError(message, file, line)


def _validate_answer(spec: Any, file, line) -> None:
    specs = spec if isinstance(spec, list) else [spec]
    _require(len(specs) > 0, "ground_truth.answer: an empty list", file, line)
    for s in specs:
        _require(isinstance(s, dict), "ground_truth.answer: each answer check is an object", file, line)
        forms = [k for k in ANSWER_FORMS if k in s]
        _require(len(forms) == 1, f"ground_truth.answer: give exactly one of {', '.join(ANSWER_FORMS)} "
                 f"(got {', '.join(sorted(s)) or 'none'})", file, line)
        allowed = {forms[0]} | ({"tolerance"} if forms[0] == "numeric" else set())
        unknown = sorted(set(s) - allowed)
        if unknown:
            raise TaskError(f"ground_truth.answer: unknown field {unknown[0]!r}", file, line)
        value = s[forms[0]]
        if forms[0] in ("exact", "normalised"):
            _require(isinstance(value, str), f"ground_truth.answer.{forms[0]} must be a string", file, line)
        elif forms[0] in ("must_include", "one_of"):
            _require(isinstance(value, list) and value and all(isinstance(v, str) for v in value),
                     f"ground_truth.answer.{forms[0]} must be a non-empty list of strings", file, line)
        else:
            _require(isinstance(value, (int, float)) and not isinstance(value, bool),
                     "ground_truth.answer.numeric must be a number", file, line)
            tol = s.get("tolerance", 0)
            _require(isinstance(tol, (int, float)) and not isinstance(tol, bool) and tol >= 0,
                     "ground_truth.answer.tolerance must be a number >= 0", file, line)


def _validate_key_nodes(nodes: Any, file, line) -> None:
    _require(isinstance(nodes, list) and nodes, "ground_truth.key_nodes must be a non-empty list", file, line)
    for i, node in enumerate(nodes):
        where = f"ground_truth.key_nodes[{i}]"
        _require(isinstance(node, dict), f"{where} must be an object", file, line)
        fn = node.get("match_function_name")
        _require(fn in KEY_NODE_FUNCTIONS, f"{where}: unknown match_function_name {fn!r}", file, line)
        content = node.get("content")
        _require(isinstance(content, dict) and isinstance(content.get("reference_answer"), str),
                 f"{where}.content.reference_answer must be a string", file, line)
        if fn == "element_path_exactly_match":
            _require(node.get("method", "selector") in ("selector", "xpath"),
                     f"{where}.method must be 'selector' or 'xpath'", file, line)


RUBRIC_FIELDS = ("website", "websites", "preferences", "location", "location_aware", "gold_entries", "intent")
LOCATION_FIELDS = ("city", "neighbourhood", "zip", "state")


def _validate_rubric(rubric: Any, file, line) -> None:
    _require(isinstance(rubric, dict), "ground_truth.rubric must be an object", file, line)
    _require(any(k in rubric for k in ("website", "websites", "preferences", "location")),
             "ground_truth.rubric needs websites (or website), preferences or location", file, line)
    unknown = sorted(set(rubric) - set(RUBRIC_FIELDS))
    if unknown:
        raise TaskError(f"ground_truth.rubric: unknown field {unknown[0]!r}", file, line)
    if "website" in rubric:
        _require(isinstance(rubric["website"], str) and rubric["website"],
                 "ground_truth.rubric.website must be a host name", file, line)
    if "websites" in rubric:
        sites = rubric["websites"]
        _require(isinstance(sites, list) and sites and all(isinstance(x, str) and x for x in sites),
                 "ground_truth.rubric.websites must be a non-empty list of host names (alternatives)", file, line)
    if "preferences" in rubric:
        prefs = rubric["preferences"]
        _require(isinstance(prefs, dict) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool)
                                                 for v in prefs.values()),
                 "ground_truth.rubric.preferences must map names to values", file, line)
    if "location" in rubric:
        loc = rubric["location"]
        _require(isinstance(loc, str) or (isinstance(loc, dict) and loc and set(loc) <= set(LOCATION_FIELDS)
                                          and all(isinstance(v, (str, int)) for v in loc.values())),
                 "ground_truth.rubric.location must be a string or an object of city, neighbourhood, zip, state",
                 file, line)
    if "location_aware" in rubric:
        _require(isinstance(rubric["location_aware"], bool), "ground_truth.rubric.location_aware must be true or false",
                 file, line)
    if "intent" in rubric:  # the intent's own checks (final_state format), apart from the preferences
        _validate_final_state(rubric["intent"], file, line, "ground_truth.rubric.intent")
    if "gold_entries" in rubric:
        gold = rubric["gold_entries"]
        _require(isinstance(gold, dict) and all(isinstance(v, list) and all(isinstance(i, str) for i in v)
                                                for v in gold.values()),
                 "ground_truth.rubric.gold_entries must map names to lists of history entry ids", file, line)


def _validate_ranking(gt: dict, file, line) -> None:
    """``ranking: {"target", "candidates"}`` or the older top-level ``candidates`` + ``target``."""
    if "ranking" in gt:
        _require(isinstance(gt["ranking"], dict), "ground_truth.ranking must be an object", file, line)
        cands, target, where = gt["ranking"].get("candidates"), gt["ranking"].get("target"), "ground_truth.ranking"
        _require("candidates" not in gt and "target" not in gt,
                 "give ground_truth.ranking or ground_truth.candidates+target, not both", file, line)
    else:
        cands, target, where = gt.get("candidates"), gt.get("target"), "ground_truth"
    _require(isinstance(cands, list) and cands and all(isinstance(c, str) for c in cands),
             f"{where}.candidates must be a non-empty list of ids", file, line)
    _require(len(set(cands)) == len(cands), f"{where}.candidates has a repeated id", file, line)
    _require(isinstance(target, str) and target in cands, f"{where}.target must be one of {where}.candidates",
             file, line)


def ranking_truth(gt: dict) -> tuple[list[str], str] | None:
    """(candidates, target) of a task's ranking ground truth in either shape, or None."""
    if isinstance(gt.get("ranking"), dict):
        return gt["ranking"]["candidates"], gt["ranking"]["target"]
    if "candidates" in gt:
        return gt["candidates"], gt["target"]
    return None


def _validate_final_state(checks: Any, file, line, name: str = "ground_truth.final_state") -> None:
    _require(isinstance(checks, list) and checks, f"{name} must be a non-empty list", file, line)
    for i, c in enumerate(checks):
        where = f"{name}[{i}]"
        _require(isinstance(c, dict), f"{where} must be an object", file, line)
        _require(isinstance(c.get("host"), str) and c["host"], f"{where}.host must be a host name", file, line)
        _require(isinstance(c.get("path", ""), str), f"{where}.path must be a dotted path string", file, line)
        tests = [k for k in FINAL_STATE_TESTS if k in c]
        _require(len(tests) == 1, f"{where}: give exactly one of {', '.join(FINAL_STATE_TESTS)}", file, line)
        if "count" in c:
            _require(isinstance(c["count"], int) and not isinstance(c["count"], bool) and c["count"] >= 0,
                     f"{where}.count must be an integer >= 0", file, line)
        unknown = sorted(set(c) - {"host", "path", *FINAL_STATE_TESTS})
        if unknown:
            raise TaskError(f"{where}: unknown field {unknown[0]!r}", file, line)


def _validate_requests(checks: Any, file, line) -> None:
    name = "ground_truth.requests"
    _require(isinstance(checks, list) and checks, f"{name} must be a non-empty list", file, line)
    for i, c in enumerate(checks):
        where = f"{name}[{i}]"
        _require(isinstance(c, dict), f"{where} must be an object", file, line)
        _require(isinstance(c.get("method"), str) and c["method"].isalpha(),
                 f"{where}.method must be an HTTP method (POST, PUT, ...)", file, line)
        _require(isinstance(c.get("url"), str) and c["url"].startswith(("http://", "https://")),
                 f"{where}.url must be an http(s) URL", file, line)
        unknown = sorted(set(c) - {"method", "url"})
        if unknown:
            raise TaskError(f"{where}: unknown field {unknown[0]!r}", file, line)


def _load_reference(ref: Any, roots: list[Path], file, line) -> dict:
    if isinstance(ref, dict):
        trajectory = ref
    else:
        _require(isinstance(ref, str) and ref, "ground_truth.reference_trajectory must be a path or an object",
                 file, line)
        _require(not os.path.isabs(ref) and ".." not in Path(ref).parts,
                 f"ground_truth.reference_trajectory: {ref!r} must be a path inside the suite", file, line)
        candidates = [root / ref for root in roots]
        found = next((p for p in candidates if p.is_file()), None)
        _require(found is not None, f"reference trajectory {ref} not found (looked in "
                 f"{', '.join(str(r) for r in roots)})", file, line)
        try:
            trajectory = json.loads(found.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise TaskError(f"reference trajectory {found}: not readable JSON ({exc})", file, line) from None
    _require(isinstance(trajectory, dict) and isinstance(trajectory.get("steps"), list),
             "reference trajectory must be an object with a 'steps' list", file, line)
    return trajectory


def validate_task(obj: Any, *, file="", line: int | None = None, roots: list[Path] | None = None) -> Task:
    """Check one task object and build a :class:`Task` (raises :class:`TaskError`)."""
    _require(isinstance(obj, dict), "a task must be a JSON object", file, line)
    for key in ("id", "category", "instruction"):
        _require(isinstance(obj.get(key), str) and obj[key].strip(), f"task field {key!r} must be a non-empty string",
                 file, line)
    tid = obj["id"]
    # a run writes each task's trajectory as RUN_DIR/trajectories/<id>.json: an id must stay a file name
    _require(tid not in (".", "..") and not any(c in tid for c in "/\\\0") and tid == tid.strip()
             and tid.isprintable(),
             f"task id {tid!r} cannot be a file name (no '/', '\\', NUL or control characters, not '.' or '..', "
             "no blanks at either end)", file, line)
    start_url = obj.get("start_url")
    _require(start_url is None or isinstance(start_url, str), "task field 'start_url' must be a string or null",
             file, line)
    _require(start_url is None or re.match(r"^https?://[^/?#\s]+", start_url) is not None,
             f"task field 'start_url': {start_url!r} is not an http:// or https:// URL", file, line)
    snap = obj.get("snapshot_time")
    if snap is not None:
        _require(isinstance(snap, str), "task field 'snapshot_time' must be an ISO 8601 string or null", file, line)
        try:
            datetime.fromisoformat(snap.replace("Z", "+00:00"))
        except ValueError:
            raise TaskError(f"task field 'snapshot_time': {snap!r} is not ISO 8601", file, line) from None
    ref_len = obj.get("reference_length")
    _require(ref_len is None or (isinstance(ref_len, int) and not isinstance(ref_len, bool) and ref_len > 0),
             "task field 'reference_length' must be a positive integer", file, line)
    gt = obj.get("ground_truth")
    _require(isinstance(gt, dict) and gt, "task needs a non-empty 'ground_truth' object", file, line)
    unknown = sorted(set(gt) - set(GROUND_TRUTH_KINDS))
    if unknown:
        raise TaskError(f"unknown ground-truth kind {unknown[0]!r} (known: answer, reference_trajectory, "
                        "key_nodes, rubric, ranking (or candidates+target), final_state, requests)", file, line)
    reference = None
    if "answer" in gt:
        _validate_answer(gt["answer"], file, line)
    if "key_nodes" in gt:
        _validate_key_nodes(gt["key_nodes"], file, line)
    if "rubric" in gt:
        _validate_rubric(gt["rubric"], file, line)
    if "candidates" in gt or "target" in gt or "ranking" in gt:
        _validate_ranking(gt, file, line)
    if "final_state" in gt:
        _validate_final_state(gt["final_state"], file, line)
    if "requests" in gt:
        _validate_requests(gt["requests"], file, line)
    if "reference_trajectory" in gt:
        reference = _load_reference(gt["reference_trajectory"], roots or [], file, line)
    if "depends_on" in obj:  # (the named task's existence is checked over the whole suite)
        dep = obj["depends_on"]
        _require(isinstance(dep, str) and dep.strip() != "", "task field 'depends_on' must be a task id (a string)",
                 file, line)
        _require(dep != tid, f"task {tid!r} cannot depend on itself (depends_on)", file, line)
    if "context_exclude" in obj:
        ex = obj["context_exclude"]
        _require(isinstance(ex, list) and all(isinstance(x, str) and x for x in ex),
                 "task field 'context_exclude' must be a list of task-id globs", file, line)
    return Task(id=obj["id"], category=obj["category"], instruction=obj["instruction"], start_url=start_url,
                ground_truth=gt, snapshot_time=snap, reference_length=ref_len, reference=reference,
                extra={k: v for k, v in obj.items() if k not in TASK_FIELDS},
                source=f"{file}:{line}" if line is not None else str(file), raw=obj)


# ------------------------------------------------------------------------------ loading
def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskError("no such file", path) from None
    except IsADirectoryError:
        raise TaskError("is a directory, expected a file", path) from None
    except UnicodeDecodeError as exc:
        raise TaskError(f"not UTF-8 text ({exc.reason})", path) from None
    except OSError as exc:
        raise TaskError(exc.strerror or str(exc), path) from None


def _json_lines(path: Path):
    """``(line number, value)`` of each non-blank line of the JSONL file ``path``; a line that is
    not JSON is a :class:`TaskError` naming the file, the line and the column."""
    for lineno, raw in enumerate(_read_text(path).splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            yield lineno, json.loads(raw)
        except ValueError as exc:
            raise TaskError(f"not valid JSON ({exc.msg} at column {exc.colno})", path, lineno) from None


def load_tasks_jsonl(path: str | os.PathLike, *, roots: list[Path] | None = None,
                     categories: list[str] | None = None, dependencies: bool = True) -> tuple[list[Task], str]:
    """Tasks of a JSONL file (blank lines skipped) and the suite digest over them.

    ``dependencies``: check that every ``depends_on`` names a task of the file (a run's
    ``tasks.jsonl`` holds only the tasks it selected, so its reader turns this off).

    ``roots``: directories a reference trajectory path is looked up in (default: the file's folder).
    ``categories``: when given, every task's category must be one of them.
    """
    path = Path(path)
    roots = roots or [path.parent]
    tasks: list[Task] = []
    objects: list[dict] = []
    seen: dict[str, int] = {}
    for lineno, obj in _json_lines(path):
        task = validate_task(obj, file=path, line=lineno, roots=roots)
        if task.id in seen:
            raise TaskError(f"duplicate task id {task.id!r} (first on line {seen[task.id]})", path, lineno)
        if categories is not None and task.category not in categories:
            raise TaskError(f"category {task.category!r} is not among the manifest's categories "
                            f"({', '.join(categories)})", path, lineno)
        seen[task.id] = lineno
        tasks.append(task)
        objects.append(obj)
    if not tasks:
        raise TaskError("holds no tasks", path)
    if dependencies:
        check_dependencies(tasks, path, seen)
    return tasks, suite_digest(objects)


def check_dependencies(tasks: list[Task], file=None, lines: dict | None = None) -> None:
    """Every ``depends_on`` names a task of the suite, and no chain of them comes back to where it
    started (raises :class:`TaskError` naming the task's line)."""
    by_id = {t.id: t for t in tasks}
    lines = lines or {}
    for t in tasks:
        dep = t.depends_on
        if dep is None:
            continue
        if dep not in by_id:
            raise TaskError(f"task {t.id!r}: depends_on names {dep!r}, which is not a task of the suite",
                            file, lines.get(t.id))
        chain, cur = [t.id], dep
        while cur is not None:
            if cur in chain:
                loop = " -> ".join([*chain[chain.index(cur):], cur])
                raise TaskError(f"task {t.id!r}: depends_on makes a cycle ({loop})", file, lines.get(t.id))
            chain.append(cur)
            cur = by_id[cur].depends_on


def dependency_waves(tasks: list[Task]) -> list[list[Task]]:
    """The tasks in waves: first those that depend on no task among ``tasks``, then those whose
    dependency is in an earlier wave, and so on; each wave keeps the given order. A dependency that
    is not among ``tasks`` (not selected) does not hold a task back."""
    chosen = {t.id for t in tasks}
    level: dict[str, int] = {}

    def depth(t: Task, seen=()) -> int:
        if t.id in level:
            return level[t.id]
        dep = t.depends_on
        if dep is None or dep not in chosen or dep in seen:
            level[t.id] = 0
        else:
            level[t.id] = depth(by_id[dep], (*seen, t.id)) + 1
        return level[t.id]

    by_id = {t.id: t for t in tasks}
    for t in tasks:
        depth(t)
    waves: list[list[Task]] = [[] for _ in range(max(level.values(), default=-1) + 1)]
    for t in tasks:
        waves[level[t.id]].append(t)
    return waves


def _load_manifest(manifest_path: Path) -> Suite:
    try:
        manifest = json.loads(_read_text(manifest_path))
    except ValueError as exc:
        raise TaskError(f"not valid JSON ({exc})", manifest_path) from None
    if not isinstance(manifest, dict) or manifest.get("format") != SUITE_FORMAT:
        raise TaskError(f"not a suite manifest (format must be {SUITE_FORMAT!r})", manifest_path)
    if manifest.get("version") != SUITE_VERSION:
        raise TaskError(f"unsupported suite version {manifest.get('version')!r} (this reads {SUITE_VERSION})",
                        manifest_path)
    name = manifest.get("name")
    if not isinstance(name, str) or not name:
        raise TaskError("manifest needs a 'name'", manifest_path)
    categories = manifest.get("categories")
    if categories is not None and not (isinstance(categories, list) and all(isinstance(c, str) for c in categories)):
        raise TaskError("manifest 'categories' must be a list of strings", manifest_path)
    archive_digest = manifest.get("archive_digest")
    if archive_digest is not None and not isinstance(archive_digest, str):
        raise TaskError("manifest 'archive_digest' must be a string or null", manifest_path)
    backend = manifest.get("backend")
    if backend is not None:
        from webfreeze.simulator.backends import BACKENDS

        if backend not in BACKENDS:
            raise TaskError(f"manifest 'backend' must be {' or '.join(BACKENDS)} (got {backend!r})", manifest_path)
    tasks_name = manifest.get("tasks", "tasks.jsonl")
    if not isinstance(tasks_name, str) or os.path.isabs(tasks_name) or ".." in Path(tasks_name).parts:
        raise TaskError("manifest 'tasks' must be a file name inside the suite", manifest_path)
    root = manifest_path.parent
    tasks, digest = load_tasks_jsonl(root / tasks_name, roots=[root], categories=categories)
    cats = categories if categories is not None else sorted({t.category for t in tasks})
    return Suite(name=name, tasks=tasks, digest=digest, categories=list(cats), archive_digest=archive_digest,
                 path=str(manifest_path), root=str(root), manifest=manifest)


def load_suite(path: str | os.PathLike, *, roots: list[str | os.PathLike] | None = None) -> Suite:
    """Load a suite directory, a manifest file, a bare ``.jsonl``, or the Mind2Web-Live JSON file.

    ``roots`` (bare JSONL only): extra directories where reference trajectory paths are looked up,
    after the file's own folder.
    """
    p = Path(path)
    if p.is_dir():
        return _load_manifest(p / "manifest.json")
    if not p.exists():
        raise TaskError("no such file or directory", p)
    if p.suffix == ".jsonl":
        first = next((line for line in _read_text(p).splitlines() if line.strip()), "")
        if _is_persona2web(first):
            return load_persona2web(p)
        search = [p.parent, *(Path(r) for r in roots or [])]
        tasks, digest = load_tasks_jsonl(p, roots=search)
        return Suite(name=p.stem, tasks=tasks, digest=digest, categories=sorted({t.category for t in tasks}),
                     path=str(p), root=str(p.parent))
    text = _read_text(p)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TaskError(f"not valid JSON ({exc})", p) from None
    if isinstance(data, dict) and data.get("format") == SUITE_FORMAT:
        return _load_manifest(p)
    if isinstance(data, list):
        return load_mind2web_live(p, data=data)
    raise TaskError("not a suite: expected a directory with manifest.json, a manifest, a .jsonl file or the "
                    "Mind2Web-Live key-node list", p)


# ------------------------------------------------------------------------------ Mind2Web-Live
MIND2WEB_LIVE_CATEGORY = "mind2web-live"


def mind2web_live_task(entry: Any, *, file="", position: int | None = None) -> dict:
    """One Mind2Web-Live entry (``index, task, reference_task_length, evaluation``) as a task object
    with ``key_nodes`` ground truth; the evaluation list is kept unchanged."""
    where = f"entry {position}" if position is not None else "entry"
    if not isinstance(entry, dict):
        raise TaskError(f"{where}: not an object", file)
    for key, kind in (("index", int), ("task", str), ("reference_task_length", int), ("evaluation", list)):
        if not isinstance(entry.get(key), kind) or isinstance(entry.get(key), bool):
            raise TaskError(f"{where}: field {key!r} must be {kind.__name__}", file)
    return {"id": f"mind2web-live-{entry['index']:03d}", "category": MIND2WEB_LIVE_CATEGORY,
            "instruction": entry["task"], "start_url": None, "snapshot_time": None,
            "reference_length": entry["reference_task_length"], "ground_truth": {"key_nodes": entry["evaluation"]}}


def load_mind2web_live(path: str | os.PathLike, *, data: list | None = None) -> Suite:
    """The Mind2Web-Live test set with WebCanvas key nodes, read as published (no conversion step).

    Task ids are ``mind2web-live-NNN`` from ``index``; the start URL is unknown (null), as in the
    file; ``reference_task_length`` becomes ``reference_length``.
    """
    p = Path(path)
    if data is None:
        try:
            data = json.loads(_read_text(p))
        except ValueError as exc:
            raise TaskError(f"not valid JSON ({exc})", p) from None
    if not isinstance(data, list) or not data:
        raise TaskError("expected a non-empty JSON list of Mind2Web-Live tasks", p)
    tasks, objects, seen = [], [], {}
    for pos, entry in enumerate(data):
        obj = mind2web_live_task(entry, file=p, position=pos)
        try:
            task = validate_task(obj, file=p, line=None)
        except TaskError as exc:
            raise TaskError(f"entry {pos} (index {entry['index']}): {exc.message}", p) from None
        if task.id in seen:
            raise TaskError(f"entry {pos}: duplicate index {entry['index']} (first at entry {seen[task.id]})", p)
        seen[task.id] = pos
        task.source = f"{p}#{pos}"
        tasks.append(task)
        objects.append(obj)
    return Suite(name="mind2web-live", tasks=tasks, digest=suite_digest(objects), categories=[MIND2WEB_LIVE_CATEGORY],
                 path=str(p), root=str(p.parent))


# ------------------------------------------------------------------------------ Persona2Web
PERSONA2WEB_FIELDS = {"task_id", "persona", "query_set", "level", "intent", "start_url"}
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_SITE = re.compile(r"^\s*At\s+(?P<sites>[^,]+),")
_LOCATION = re.compile(r"\(([^()]*)\)\s*\.?\s*$")
_HOST = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+$")
# Top-level domains that the published queries sometimes wrote with ".com" added after them
# ("coursera.org.com", "last.fm.com", "recreation.gov.com"): a name of exactly three labels with
# one of these before ".com" is a domain with ".com" added, which is dropped. Only three labels and
# only these: "a.us.com" or "x.co.com" may be real hosts, and the file needs no more.
DOUBLED_TLDS = frozenset({"org", "gov", "edu", "net", "fm"})
# Product names with a space are their company's domain ("Google Flights.com" -> google.com). The
# company's domain may be location-aware for another product (Google Maps): these products are not
# (a flight's origin is part of the query), so the name, not the host, decides for them.
PERSONA2WEB_NOT_LOCAL_PRODUCTS = frozenset({"google flights"})
# The sites the Persona2Web paper itself names as needing location-aware navigation: Section 4
# ("Amazon, Resy") and Appendix D.2.1 ("Amazon, Instacart, Resy, OpenTable, etc"). They are marked
# whatever our own classification below says: the paper's word decides where it gives one.
PERSONA2WEB_PAPER_LOCATION_AWARE = frozenset({"amazon.com", "instacart.com", "resy.com", "opentable.com"})
# The rest of the file's sites, where the paper's "etc" leaves it to us (docs/suites-and-runs.md): local dining,
# events and tickets, weather, local services and listings, healthcare providers, parking, camping
# and parks, car rental, grocery delivery, maps, cinemas, local jobs are location-aware. Other online
# shops, media, courses, reference sites, sports news, flights, hotels and cruises are not (a
# flight's origin or a hotel's city is a preference of the query, not the user's home).
PERSONA2WEB_LOCATION_AWARE = PERSONA2WEB_PAPER_LOCATION_AWARE | frozenset("""
accuweather.com weather.com yelp.com exploretock.com tripadvisor.com
eventbrite.com seatgeek.com stubhub.com ticketcenter.com last.fm amctheatres.com thumbtack.com
craigslist.org parking.com spothero.com zocdoc.com health.usnews.com koa.com recreation.gov
enterprise.com google.com map.com indeed.com linkedin.com glassdoor.com
""".split())


def persona2web_site(name: str) -> str:
    """One site name of a published query as a host: lower-cased; a product name with spaces
    ("Google Flights.com") is its company's domain (the first word + the TLD, "google.com"); a
    ".com" added after a two-label domain ending in org, gov, edu, net or fm is dropped
    ("coursera.org.com" -> "coursera.org"). Raises ValueError when the result is not a host name."""
    site = name.strip().lower().removeprefix("www.")
    if " " in site:
        first, _, rest = site.partition(" ")
        tld = rest.rsplit(".", 1)[1] if "." in rest else "com"
        site = f"{first}.{tld}"
    labels = site.split(".")
    if len(labels) == 3 and labels[2] == "com" and labels[1] in DOUBLED_TLDS:
        site = ".".join(labels[:2])
    if not _HOST.match(site):
        raise ValueError(f"{name!r} is not a website name")
    return site


def _product(name: str) -> str | None:
    """The product a site name with a space names ("Google Flights.com" -> "google flights")."""
    name = name.strip().lower().removeprefix("www.")
    return name.rsplit(".", 1)[0] if " " in name else None


def persona2web_rubric(level0_intent: str) -> dict:
    """Rubric ground truth read from a Persona2Web level-0 query, without regex guesswork on the
    site: ``websites`` = the names between "At" and the first comma, split on " or " into
    alternatives, each made a host by :func:`persona2web_site`; ``preferences`` = the **bold**
    spans as ``p1, p2, ...``; ``location`` (``city``/``state``/``zip`` from a trailing "(City, ST
    zip)") only when a site is location-aware (:data:`PERSONA2WEB_LOCATION_AWARE`, less the
    products in :data:`PERSONA2WEB_NOT_LOCAL_PRODUCTS`), with
    ``location_aware`` always written. Raises ValueError for a query naming no site."""
    rubric: dict[str, Any] = {}
    m = _SITE.match(level0_intent)
    if not m:
        raise ValueError("the level-0 query does not start with 'At <site>,'")
    sites: list[str] = []
    aware = False
    for part in re.split(r"\s+or\s+", m.group("sites").strip(), flags=re.I):
        site = persona2web_site(part)
        if site not in sites:
            sites.append(site)
        aware = aware or (site in PERSONA2WEB_LOCATION_AWARE and _product(part) not in PERSONA2WEB_NOT_LOCAL_PRODUCTS)
    rubric["websites"] = sites
    prefs = _BOLD.findall(level0_intent)
    if prefs:
        rubric["preferences"] = {f"p{i}": v.strip() for i, v in enumerate(prefs, start=1)}
    rubric["location_aware"] = aware
    loc = _LOCATION.search(level0_intent)
    if aware and loc and loc.group(1).strip():
        from .rubric import parse_location

        rubric["location"] = parse_location(loc.group(1).strip())
    return rubric


def _is_persona2web(first_line: str) -> bool:
    try:
        obj = json.loads(first_line)
    except ValueError:
        return False
    return isinstance(obj, dict) and "id" not in obj and PERSONA2WEB_FIELDS <= set(obj)


def load_persona2web(path: str | os.PathLike) -> Suite:
    """The Persona2Web query file as published: every query becomes a task with ``rubric`` ground
    truth taken from the level-0 query of its persona and query set (which states the site and the
    preference values the level-1 and level-2 queries leave implicit). Category:
    ``persona2web-level<N>``; id: the file's ``task_id``."""
    p = Path(path)
    rows: list[tuple[int, dict]] = []
    for lineno, obj in _json_lines(p):
        if not isinstance(obj, dict) or not PERSONA2WEB_FIELDS <= set(obj):
            raise TaskError(f"a Persona2Web query needs {', '.join(sorted(PERSONA2WEB_FIELDS))}", p, lineno)
        rows.append((lineno, obj))
    level0 = {(o["persona"], o["query_set"]): o for _, o in rows if o["level"] == 0}
    tasks, objects, seen = [], [], {}
    for lineno, o in rows:
        anchor = level0.get((o["persona"], o["query_set"]))
        if anchor is None:
            raise TaskError(f"no level-0 query for persona {o['persona']!r}, set {o['query_set']!r}", p, lineno)
        try:
            rubric = persona2web_rubric(anchor["intent"])
        except ValueError as exc:
            raise TaskError(f"level-0 query {anchor['task_id']!r}: {exc}", p, lineno) from None
        obj = {"id": o["task_id"], "category": f"persona2web-level{o['level']}", "instruction": o["intent"],
               "start_url": o["start_url"], "ground_truth": {"rubric": rubric},
               "persona": o["persona"], "query_set": o["query_set"], "level": o["level"]}
        task = validate_task(obj, file=p, line=lineno)
        if task.id in seen:
            raise TaskError(f"duplicate task id {task.id!r} (first on line {seen[task.id]})", p, lineno)
        seen[task.id] = lineno
        tasks.append(task)
        objects.append(obj)
    if not tasks:
        raise TaskError("holds no tasks", p)
    return Suite(name="persona2web", tasks=tasks, digest=suite_digest(objects),
                 categories=sorted({t.category for t in tasks}), path=str(p), root=str(p.parent))
