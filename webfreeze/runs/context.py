"""Long-context conditions: the filler pool file, the context condition of a run, and the prior
context of a dependent task (the long-context WebAgents paper's A1 -> fillers -> A2).

A task with ``depends_on`` is subtask A2 of the task it names (A1). Under a context condition
(``RunSpec.context``, ``bench run --context``) the runner composes A2's prior context with
:func:`webfreeze.simulator.composition.compose_context`: A1's trajectory (from this run, or from a
finished run named by ``a1_run``), then whole trajectories from a filler pool, in an order fixed by
the seed, until the target number of tokens, then A2's instruction. The agent gets the text in its
task view (``context``); the episode starts at the final URL of the last injected trajectory (A1's
when there are no fillers), and the trajectory records the condition (``context``; not the text,
which is reproducible from the pool and A1's trajectory).

Pool file (``webfreeze-context-pool``, version 1; JSON Lines, UTF-8): a header line, then one
entry per line, sorted by ``id``::

    {"format": "webfreeze-context-pool", "version": 1, "tokenizer": "cl100k_base", "entries": N,
     "tokens": T, "sources": [{"run": NAME, "agent": {...}, "suite": {...}, "archive_digest": D}]}
    {"id": "shop-001", "task_id": "shop-001", "instruction": "...", "source": 0, "end": "answer",
     "answer": "...", "final_url": "http://shop.test/...", "tokens": 812,
     "steps": [{"step": 0, "url": "...", "action": "click('12')", "thought": "...",
                "reflection": null, "url_after": "..."}]}

``tokens`` is the entry rendered as a filler session, counted with the header's tokenizer; the
header's ``tokens`` is their sum (about the largest context the pool can fill). docs/long-context.md
has the rest.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from webfreeze.common.digests import file_digest
from webfreeze.common.errors import WebfreezeError
from webfreeze.common.files import write_atomically
from webfreeze.eval.longctx import final_url  # one definition, shared with scoring
from webfreeze.simulator.composition import (
    DEFAULT_TOKENIZER,
    CompositionError,
    compose_context,
    get_tokenizer,
    render_trajectory,
)
from webfreeze.simulator.trajectory import without_timings

POOL_FORMAT = "webfreeze-context-pool"
POOL_VERSION = 1
CONTEXT_KEYS = ("tokens", "pool", "tokenizer", "seed", "a1_run")
# compose_context's tolerance: a context within 5% under its target counts as that target
TOLERANCE = 0.05
STEP_FIELDS = ("step", "url", "action", "thought", "reflection", "url_after")
SHIPPED_POOL = Path(__file__).resolve().parent / "demo" / "data" / "context-pool.jsonl"


class ContextError(WebfreezeError, ValueError):
    """A context condition or a pool that cannot be used: one line."""


# ------------------------------------------------------------------------------------------ the condition
def parse_tokens(text) -> int:
    """``none`` -> 0, ``25k`` -> 25000, ``50000`` -> 50000 (a whole number of tokens, 0 or more);
    raises :class:`ContextError` with the reason ("must be ...")."""
    if isinstance(text, bool):
        raise ContextError(f"must be 'none', a number or NNk (not {text!r})")
    if isinstance(text, int):
        value = text
    else:
        s = str(text).strip().lower().replace("_", "")
        if s in ("none", "0"):
            return 0
        try:
            value = int(float(s[:-1]) * 1000) if s.endswith("k") else int(s)
        except ValueError:
            raise ContextError(f"must be 'none', a number or NNk, e.g. 25k (not {text!r})") from None
    if value < 0:
        raise ContextError(f"must be 0 (none) or more (not {value})")
    return value


def check_context(context: dict | None) -> dict:
    """A context condition checked and filled in: ``{}`` (no composition) or
    ``{"tokens", "tokenizer", "seed", "pool", "a1_run"}`` (``pool`` and ``a1_run`` paths or None).
    ``tokens`` takes 0/``none``, a number or ``NNk``; a target above 0 without a pool uses the
    shipped demo pool. Raises :class:`ContextError` (one line, naming the key)."""
    if context is None or context == {}:
        return {}
    if not isinstance(context, dict):
        raise ContextError(f"a context condition is a table of {', '.join(CONTEXT_KEYS)} (not {type(context).__name__})")
    unknown = sorted(set(context) - set(CONTEXT_KEYS))
    if unknown:
        raise ContextError(f"context: unknown key {unknown[0]!r} (known: {', '.join(CONTEXT_KEYS)})")
    if "tokens" not in context:
        raise ContextError("context: 'tokens' is required ('none', a number or NNk)")
    try:
        tokens = parse_tokens(context["tokens"])
    except ContextError as exc:
        raise ContextError(f"context.tokens: {exc}") from None
    tokenizer = context.get("tokenizer") or DEFAULT_TOKENIZER
    if not isinstance(tokenizer, str):
        raise ContextError("context.tokenizer must be a tokenizer name (cl100k_base)")

    try:
        get_tokenizer(tokenizer)
    except CompositionError as exc:
        raise ContextError(f"context.tokenizer: {exc}") from None
    seed = context.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ContextError(f"context.seed must be a whole number (not {seed!r})")
    pool = context.get("pool")
    if pool is not None and not isinstance(pool, (str, os.PathLike)):
        raise ContextError("context.pool must be the path of a pool file")
    if pool is None and tokens > 0:
        if not SHIPPED_POOL.is_file():
            raise ContextError("context.pool: a target above 0 tokens needs a pool file (webfreeze context pool)")
        pool = SHIPPED_POOL
    if pool is not None and not Path(pool).is_file():
        raise ContextError(f"context.pool: {pool}: no such pool file")
    a1_run = context.get("a1_run")
    if a1_run is not None:
        if not isinstance(a1_run, (str, os.PathLike)):
            raise ContextError("context.a1_run must be the path of a run folder")
        if not (Path(a1_run) / "trajectories").is_dir():
            raise ContextError(f"context.a1_run: {a1_run}: not a run folder (no trajectories/)")
    return {"tokens": tokens, "tokenizer": tokenizer, "seed": seed,
            "pool": str(pool) if pool is not None else None, "a1_run": str(a1_run) if a1_run is not None else None}


# ------------------------------------------------------------------------------------------ the pool
@dataclass
class Pool:
    header: dict
    entries: list
    digest: str
    path: str = ""

    @property
    def tokens(self) -> int:
        return int(self.header.get("tokens") or 0)

    def identity(self) -> dict:
        return {"digest": self.digest, "entries": len(self.entries), "tokens": self.tokens,
                "tokenizer": self.header.get("tokenizer")}


def read_pool(path) -> Pool:
    """A pool file, checked (raises :class:`ContextError` naming the file and line)."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ContextError(f"{p}: no such pool file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ContextError(f"{p}: not a readable pool file ({exc})") from None
    rows = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append((n, json.loads(line)))
        except ValueError as exc:
            raise ContextError(f"{p}:{n}: not valid JSON ({exc})") from None
    if not rows or not isinstance(rows[0][1], dict) or rows[0][1].get("format") != POOL_FORMAT:
        raise ContextError(f"{p}: not a context pool (its first line must have format {POOL_FORMAT!r})")
    header = rows[0][1]
    if header.get("version") != POOL_VERSION:
        raise ContextError(f"{p}: pool version {header.get('version')!r} is not supported (this reads {POOL_VERSION})")
    entries, seen = [], {}
    for n, e in rows[1:]:
        if not isinstance(e, dict) or not isinstance(e.get("id"), str) or not e["id"] \
                or not isinstance(e.get("steps"), list):
            raise ContextError(f"{p}:{n}: a pool entry needs an 'id' and a 'steps' list")
        if e["id"] in seen:
            raise ContextError(f"{p}:{n}: entry id {e['id']!r} repeated (first on line {seen[e['id']]})")
        seen[e["id"]] = n
        entries.append(e)
    if header.get("entries") != len(entries):
        raise ContextError(f"{p}: the header says {header.get('entries')!r} entries, the file holds {len(entries)}")
    return Pool(header, entries, file_digest(p), str(p))


def entry_trajectory(entry: dict) -> dict:
    """A pool entry as the trajectory :func:`compose_context` reads (its ``task_id`` is the entry id)."""
    steps = [{"step": s.get("step", i), "url": s.get("url"), "action": s.get("action"),
              "agent_fields": {"thought": s.get("thought"), "reflection": s.get("reflection")}}
             for i, s in enumerate(entry["steps"]) if isinstance(s, dict)]
    return {"format": "webfreeze-trajectory", "version": 1, "task_id": entry["id"], "steps": steps,
            "answer": entry.get("answer"), "final_url": entry.get("final_url")}


def _entry(traj: dict, instruction: str | None, source: int) -> dict:
    steps = []
    for i, s in enumerate(traj.get("steps") or []):
        if not isinstance(s, dict):
            continue
        fields = s.get("agent_fields") if isinstance(s.get("agent_fields"), dict) else {}
        steps.append({"step": s.get("step", i), "url": s.get("url"), "action": s.get("action"),
                      "thought": fields.get("thought"), "reflection": fields.get("reflection"),
                      "url_after": s.get("url_after")})
    end = traj.get("end") if isinstance(traj.get("end"), dict) else {}
    return {"id": traj["task_id"], "task_id": traj["task_id"], "instruction": instruction, "source": source,
            "end": end.get("reason"), "answer": traj.get("answer"), "final_url": final_url(traj), "steps": steps}




def entry_tokens(entry: dict, tokenizer) -> int:
    return tokenizer.count(render_trajectory(entry_trajectory(entry), 1, "filler", entry.get("instruction")))


def build_pool(sources: list, *, tokenizer: str = DEFAULT_TOKENIZER, min_steps: int = 1,
               reasoning: bool = True) -> tuple[dict, list]:
    """(header, entries) of a pool made from finished runs' trajectories and from other pool files.

    ``sources`` are run folders and pool files (``webfreeze-context-pool``), in the order given. A
    run gives every trajectory with at least ``min_steps`` steps (and, with ``reasoning``, made by a
    reasoning agent: it names LLM calls or a step carries a thought); a pool gives its entries with at
    least ``min_steps`` steps (they were chosen when it was made) and its ``sources``, their indices
    shifted. The same task several times gives entries ``TASK``, ``TASK~2``, ... in the order of the
    sources, so a pool of runs merged with another run equals the pool of all those runs. Every entry
    is counted again with ``tokenizer`` (its id is part of what is counted)."""
    try:
        tok = get_tokenizer(tokenizer)
    except CompositionError as exc:
        raise ContextError(str(exc)) from None
    sources_out, entries, counts = [], [], {}

    def add(e: dict) -> None:
        counts[e["task_id"]] = counts.get(e["task_id"], 0) + 1
        e["id"] = e["task_id"] if counts[e["task_id"]] == 1 else f"{e['task_id']}~{counts[e['task_id']]}"
        entries.append(e)

    for src in sources:
        src = Path(src)
        if src.is_file():
            for e in _pool_entries(src, sources_out):
                if len(e["steps"]) >= min_steps:
                    add(e)
            continue
        traj_dir = src / "trajectories"
        if not traj_dir.is_dir():
            raise ContextError(f"{src}: not a run folder (no trajectories/)" if src.is_dir()
                               else f"{src}: no such run folder or pool file")
        manifest = _read_json(src / "manifest.json", "run manifest") if (src / "manifest.json").is_file() else {}
        instructions = run_instructions(src)
        source = len(sources_out)
        # what made these trajectories, enough to make them again (the run's settings and LLM entries)
        sources_out.append({"run": src.name, "agent": manifest.get("agent"),
                            "agent_settings": manifest.get("agent_settings"), "suite": manifest.get("suite"),
                            "env": manifest.get("env"), "llm": manifest.get("llm"),
                            "archive_digest": (manifest.get("archive") or {}).get("digest")})
        for path in sorted(traj_dir.glob("*.json")):
            traj = _read_json(path, "trajectory")
            if not isinstance(traj, dict) or traj.get("format") != "webfreeze-trajectory" \
                    or not isinstance(traj.get("task_id"), str):
                raise ContextError(f"{path}: not a webfreeze trajectory")
            e = _entry(traj, instructions.get(traj["task_id"]), source)
            reasoned = bool(traj.get("llm_entries")) or any(s["thought"] for s in e["steps"])
            if len(e["steps"]) < min_steps or (reasoning and not reasoned):
                continue
            add(e)
    entries.sort(key=lambda e: e["id"])
    for e in entries:
        e["tokens"] = entry_tokens(e, tok)
    header = {"format": POOL_FORMAT, "version": POOL_VERSION, "tokenizer": tok.name, "entries": len(entries),
              "tokens": sum(e["tokens"] for e in entries), "sources": sources_out}
    return header, entries


def _suffix(entry_id: str) -> int:
    """The N of an entry id ``TASK~N`` (1 for a plain ``TASK``)."""
    base, sep, n = entry_id.rpartition("~")
    return int(n) if sep and base and n.isdigit() else 1


def _pool_entries(path: Path, sources_out: list) -> list:
    """The entries of pool file ``path``, ready to be renumbered into a new pool: its header's
    ``sources`` appended to ``sources_out`` and each entry's ``source`` shifted to match. They come
    in the order they were numbered in (by source, then ``~N``), so ``TASK`` keeps coming before
    ``TASK~2``."""
    pool = read_pool(path)
    theirs = pool.header.get("sources")
    if not isinstance(theirs, list):
        raise ContextError(f"{path}: its header has no 'sources' list")
    offset = len(sources_out)
    out = []
    for e in pool.entries:
        source = e.get("source")
        if isinstance(source, bool) or not isinstance(source, int) or not 0 <= source < len(theirs):
            raise ContextError(f"{path}: entry {e['id']!r}: 'source' {source!r} is not an index of its header's "
                               f"{len(theirs)} source(s)")
        task_id = e.get("task_id") if isinstance(e.get("task_id"), str) and e.get("task_id") else e["id"]
        out.append(dict(e, task_id=task_id, source=offset + source))
    sources_out.extend(theirs)
    out.sort(key=lambda e: (e["source"], _suffix(e["id"]), e["id"]))
    return out


def write_pool(path, header: dict, entries: list) -> None:
    """Write a pool file atomically (a temporary file beside it, then renamed)."""
    path = Path(path)
    if not path.parent.is_dir():
        raise ContextError(f"{path}: no such directory {path.parent}")
    write_atomically(path, "".join(json.dumps(obj, sort_keys=True, ensure_ascii=False) + "\n"
                                   for obj in [header, *entries]))


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ContextError(f"{path}: not a readable {what} ({exc})") from None


def run_instructions(run) -> dict:
    """``{task id: instruction}`` from a run folder's ``tasks.jsonl`` (unreadable lines skipped; no
    file: ``{}``)."""
    out = {}
    tasks = Path(run) / "tasks.jsonl"
    if tasks.is_file():
        for line in tasks.read_text(encoding="utf-8").splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and isinstance(obj.get("id"), str):
                out[obj["id"]] = obj.get("instruction")
    return out


# ------------------------------------------------------------------------------------------ composition
def a1_trajectory(run_dir, task_id: str) -> dict | None:
    """A1's trajectory in a run folder, or None when it has none."""
    path = Path(run_dir) / "trajectories" / f"{task_id}.json"
    if not path.is_file():
        return None
    traj = _read_json(path, "trajectory")
    if not isinstance(traj, dict) or traj.get("format") != "webfreeze-trajectory":
        raise ContextError(f"{path}: not a webfreeze trajectory")
    return traj


def trajectories_digest(trajectories: list[dict]) -> str:
    """The digest of A1 trajectories taken from another run: what they did, not how long it took."""
    h = hashlib.sha256()
    for t in trajectories:
        h.update(json.dumps(without_timings(t), sort_keys=True, ensure_ascii=False).encode("utf-8") + b"\n")
    return "sha256:" + h.hexdigest()


def compose(task, a1_traj: dict, pool: Pool | None, context: dict, instructions: dict) -> tuple[dict, dict, str]:
    """A dependent task's prior context: (the ``context`` its view gets, the ``context`` record its
    trajectory gets, the URL its episode starts at). ``task`` is the suite's :class:`Task` (A2),
    ``a1_traj`` A1's trajectory (any end; an episode that failed gives what it did)."""
    a1, a2 = task.depends_on, task.id
    a1_traj = dict(a1_traj, task_id=a1)
    excluded_globs = [*(task.extra.get("context_exclude") or [])]
    fillers = []
    if pool is not None and context["tokens"] > 0:
        for e in pool.entries:
            ids = (e["id"], e.get("task_id") or e["id"])
            if a1 in ids or a2 in ids or any(fnmatch.fnmatchcase(i, g) for i in ids for g in excluded_globs):
                continue
            fillers.append(e)
    by_entry = {e["id"]: e for e in fillers}
    pool_trajs = [a1_traj, *(entry_trajectory(e) for e in fillers)]
    names = dict(instructions)
    names.update({e["id"]: e.get("instruction") for e in fillers})
    try:
        h = compose_context(pool_trajs, a1, a2, context["tokens"], seed=context["seed"],
                            tokenizer=context["tokenizer"], instructions=names, tolerance=TOLERANCE)
    except CompositionError as exc:
        raise ContextError(f"task {a2}: {exc}") from None
    if h.fillers:
        start = by_entry[h.fillers[-1]].get("final_url")
    else:
        start = final_url(a1_traj)
    start = start or task.start_url
    visible = {"text": h.text, "tokens": h.tokens, "target_tokens": h.target_tokens, "tokenizer": h.tokenizer,
               "sessions": [{"part": s.part, "task_id": s.task_id, "tokens": s.tokens} for s in h.sessions],
               "a1_task": a1}
    record = {"tokens": h.tokens, "target_tokens": h.target_tokens, "tokenizer": h.tokenizer, "seed": h.seed,
              "fillers": list(h.fillers), "a1_task": a1, "a1_url": final_url(a1_traj), "start_url": start,
              "text_sha256": hashlib.sha256(h.text.encode("utf-8")).hexdigest()}
    return visible, record, start


def check_visible_context(ctx) -> dict:
    """Check the ``context`` a task view gets (contract: text, tokens, target_tokens, tokenizer,
    sessions, a1_task); returns it, or raises :class:`ContextError`."""
    if not isinstance(ctx, dict):
        raise ContextError("a task's context must be an object")
    for key, kind in (("text", str), ("tokens", int), ("target_tokens", int), ("tokenizer", str),
                      ("sessions", list), ("a1_task", str)):
        if not isinstance(ctx.get(key), kind) or isinstance(ctx.get(key), bool):
            raise ContextError(f"context.{key} must be {kind.__name__}")
    for i, s in enumerate(ctx["sessions"]):
        if not isinstance(s, dict) or s.get("part") not in ("A1", "filler", "A2") \
                or not isinstance(s.get("task_id"), str) or not isinstance(s.get("tokens"), int):
            raise ContextError(f"context.sessions[{i}] must be {{part: A1|filler|A2, task_id, tokens}}")
    return ctx
