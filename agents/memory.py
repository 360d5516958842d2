"""Memory strategies of the LLM agent: which of its own past steps it is shown at each step.

A past step is a dict the agent keeps (``step``, ``url``, ``title``, ``thought``, ``note`` (what the
model wrote under "Memory:"), ``action``, ``error``, ``summary`` of the page it acted on, and with
``reflection=true`` the ``reflection`` written once its outcome was seen). Each
strategy picks step numbers from that history:

- ``last-k``: the last ``k`` steps (k=3 is WebArxiv's fixed-window baseline);
- ``random-k``: ``k`` past steps drawn at random, seeded by the memory seed, the task id and the
  step number, so the same episode draws the same steps on any machine;
- ``dynamic`` (WebArxiv §3.7): one extra LLM call (purpose ``memory``) lists the numbered past
  steps and asks which of them, at most ``m``, matter for the next action; the numbers in the
  reply are kept when they name a past step, and the rest are recorded as invalid;
- ``embedding``: the ``m`` past steps most similar (cosine, all-MiniLM-L6-v2) to the goal and the
  current view; no LLM call;
- ``none``: nothing.

Every strategy returns step numbers in ascending order (the order the prompt shows them in), and
:meth:`MemoryStrategy.choose` also returns what to record in the step's agent fields.
"""

from __future__ import annotations

import hashlib
import random
import re
import string
from dataclasses import dataclass, field
from pathlib import Path

from webfreeze.common.text import collapse_ws
from webfreeze.llm import embeddings
from webfreeze.llm.errors import EmbeddingError

from .base import AgentError

STRATEGIES = ("last-k", "random-k", "dynamic", "embedding", "none")
# The prompt set the dynamic strategy asks with when it is given no template of its own.
DEFAULT_MEMORY_PROMPT = Path(__file__).parent / "prompts" / "webarxiv-v1" / "memory.txt"
# Fields of the dynamic strategy's template.
MEMORY_FIELDS = frozenset({"goal", "steps", "m"})
# How much of each past step the prompts show: enough to recognise it, short enough for a 2k context.
THOUGHT_CHARS = 160
NOTE_CHARS = 160
REFLECTION_CHARS = 160
# The part of the current view the embedding query reads; MiniLM reads 256 word pieces at most anyway.
QUERY_CHARS = 1500


@dataclass
class Selection:
    """What a strategy chose: ``steps`` (step numbers, ascending), ``record`` (JSON-able details for
    the step's agent fields) and ``completions`` (the LLM calls it made, for the agent's accounting)."""

    steps: list[int]
    record: dict = field(default_factory=dict)
    completions: list = field(default_factory=list)


def step_number(entry: dict, position: int) -> int:
    """A past step's number: its ``step`` field, else its position in the history."""
    n = entry.get("step")
    return n if isinstance(n, int) and not isinstance(n, bool) else position


def _short(text, limit: int) -> str:
    text = collapse_ws(str(text or ""))
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def describe_step(entry: dict, position: int = 0) -> str:
    """One past step as the prompts show it: ``Step N (page): action [failed: ...] Thought: ... Notes: ...``
    (and ``Reflection: ...`` when the agent reflected on it)."""
    n = step_number(entry, position)
    page = _short(entry.get("title") or entry.get("url") or "", 60)
    line = f"Step {n}" + (f" ({page})" if page else "") + f": {_short(entry.get('action'), 120) or '(no action)'}"
    if entry.get("error"):
        line += f" [failed: {_short(entry['error'], 100)}]"
    if entry.get("thought"):
        line += f" Thought: {_short(entry['thought'], THOUGHT_CHARS)}"
    if entry.get("note"):
        line += f" Notes: {_short(entry['note'], NOTE_CHARS)}"
    if entry.get("reflection"):  # (only an agent with reflection=true writes one)
        line += f" Reflection: {_short(entry['reflection'], REFLECTION_CHARS)}"
    return line


def step_text(entry: dict) -> str:
    """The text a past step is embedded by: its page, thought, notes and action."""
    parts = (entry.get("title"), entry.get("summary"), entry.get("thought"), entry.get("note"), entry.get("action"))
    return " ".join(collapse_ws(str(p)) for p in parts if p)


def _count(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AgentError(f"{what} must be a whole number, 0 or more (not {value!r})")
    return value


class MemoryStrategy:
    """Chooses which past steps the agent sees. Subclasses set ``name`` and implement :meth:`choose`."""

    name = "memory"

    def config(self) -> dict:
        """The settings that identify this strategy's choices."""
        return {"strategy": self.name}

    def prepare(self) -> None:
        """Load what the strategy needs once per worker (called from the agent's ``setup``)."""

    def reset(self) -> None:
        """Forget per-episode state (called by the agent at each task)."""

    def choose(self, history: list[dict], goal: str, obs_text: str, *, task_id: str = "", step: int | None = None,
               llm=None) -> Selection:
        """The chosen steps and what to record; ``step`` is the current step number (default: the
        history's length), ``llm`` the client a strategy that asks the model calls."""
        raise NotImplementedError

    def select(self, history: list[dict], goal: str, obs_text: str, **context) -> list[int]:
        """Only the chosen step numbers, ascending (``context`` as for :meth:`choose`)."""
        return self.choose(history, goal, obs_text, **context).steps


class NoMemory(MemoryStrategy):
    """``none``: the agent sees only the current view."""

    name = "none"

    def choose(self, history, goal, obs_text, *, task_id="", step=None, llm=None) -> Selection:
        return Selection([])


class LastK(MemoryStrategy):
    """``last-k``: the ``k`` most recent steps."""

    name = "last-k"

    def __init__(self, k: int = 3):
        self.k = _count(k, "k")

    def config(self) -> dict:
        return {"strategy": self.name, "k": self.k}

    def choose(self, history, goal, obs_text, *, task_id="", step=None, llm=None) -> Selection:
        numbers = [step_number(e, i) for i, e in enumerate(history)]
        return Selection(sorted(numbers[-self.k:]) if self.k else [])


def seeded_rng(*parts) -> random.Random:
    """A generator seeded from ``parts`` through SHA-256: the same parts give the same draws on any
    machine and Python (unlike ``hash()``, which varies per process)."""
    text = "\x1f".join(str(p) for p in parts)
    return random.Random(int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big"))


class RandomK(MemoryStrategy):
    """``random-k``: ``k`` past steps drawn without replacement, seeded by (seed, task id, step)."""

    name = "random-k"

    def __init__(self, k: int = 3, seed: int = 0):
        self.k = _count(k, "k")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise AgentError(f"memory_seed must be a whole number (not {seed!r})")
        self.seed = seed

    def config(self) -> dict:
        return {"strategy": self.name, "k": self.k, "memory_seed": self.seed}

    def choose(self, history, goal, obs_text, *, task_id="", step=None, llm=None) -> Selection:
        numbers = [step_number(e, i) for i, e in enumerate(history)]
        if len(numbers) <= self.k:
            return Selection(sorted(numbers))
        now = len(history) if step is None else step
        picked = seeded_rng(self.seed, task_id, now).sample(range(len(numbers)), self.k)
        return Selection(sorted(numbers[i] for i in picked))


# "Relevant steps: 2, 5" (any case, optional markdown); the numbers are read from that line when it is
# there, else from the whole reply.
_RELEVANT = re.compile(r"(?im)relevant\s+steps?\s*[*]*\s*[:=\-]?\s*(.*)$")
_NUMBER = re.compile(r"\d+")


def parse_step_numbers(reply: str, valid, m: int) -> tuple[list[int], list]:
    """``(chosen, invalid)`` from a model's reply such as ``"Relevant steps: 2, 5"``.

    ``valid`` are the past step numbers. The numbers are read from the "Relevant steps" line if the
    reply has one (else from the whole reply) in the order written; each is kept when it names a
    past step not already kept, up to ``m``; the others (unknown steps, repeats, those past ``m``)
    are returned as ``invalid``. ``chosen`` is ascending.
    """
    text = reply or ""
    labelled = _RELEVANT.search(text)
    if labelled:
        text = labelled.group(1)
    valid = set(valid)
    chosen: list[int] = []
    invalid: list = []
    for token in _NUMBER.findall(text):
        n = int(token)
        if n in valid and n not in chosen and len(chosen) < m:
            chosen.append(n)
        else:
            invalid.append(n)
    return sorted(chosen), invalid


def check_template(text: str, allowed, where: str) -> string.Template:
    """``text`` as a :class:`string.Template` whose fields are all in ``allowed`` (else :class:`AgentError`)."""
    template = string.Template(text)
    if not template.is_valid():
        raise AgentError(f"{where}: a '$' that is not a field (write $$ for a dollar sign)")
    unknown = sorted(set(template.get_identifiers()) - set(allowed))
    if unknown:
        raise AgentError(f"{where}: unknown field ${unknown[0]} (known: {', '.join('$' + f for f in sorted(allowed))})")
    return template


class DynamicMemory(MemoryStrategy):
    """``dynamic`` (WebArxiv §3.7): the model picks at most ``m`` relevant steps of the whole history.

    With no past step there is nothing to ask. With ``m`` or fewer past steps the model is still
    asked: it may judge some of them irrelevant."""

    name = "dynamic"

    def __init__(self, m: int = 3, template: str | None = None):
        self.m = _count(m, "m")
        if template is None:
            try:
                template = DEFAULT_MEMORY_PROMPT.read_text(encoding="utf-8")
            except OSError as exc:
                raise AgentError(f"{DEFAULT_MEMORY_PROMPT}: cannot read the memory prompt ({exc.strerror})") from None
        self.template = check_template(template, MEMORY_FIELDS, "memory prompt")

    def config(self) -> dict:
        return {"strategy": self.name, "m": self.m}

    def prompt(self, history: list[dict], goal: str) -> str:
        """The question the model is asked: the goal and the numbered past steps."""
        steps = "\n".join(describe_step(e, i) for i, e in enumerate(history))
        return self.template.substitute(goal=goal, steps=steps, m=self.m).strip()

    def choose(self, history, goal, obs_text, *, task_id="", step=None, llm=None) -> Selection:
        if not history or self.m == 0:
            return Selection([], {"asked": False})
        if llm is None:
            raise AgentError("the dynamic memory needs an LLM client to ask")
        messages = [{"role": "user", "content": self.prompt(history, goal)}]
        completion = llm.chat(messages, step=step, purpose="memory")
        valid = [step_number(e, i) for i, e in enumerate(history)]
        chosen, invalid = parse_step_numbers(completion.text, valid, self.m)
        return Selection(chosen, {"asked": True, "reply": completion.text, "invalid": invalid}, [completion])


def _as_agent_error(fn, *args):
    """``fn(*args)``, an embedding failure (missing weights or library) raised as the agent's own
    one-line :class:`AgentError`, as the runner reports agent set-up problems."""
    try:
        return fn(*args)
    except EmbeddingError as exc:
        raise AgentError(f"the embedding memory: {exc}") from None


class EmbeddingMemory(MemoryStrategy):
    """``embedding``: the ``m`` past steps whose text is nearest (cosine, all-MiniLM-L6-v2) to the goal
    plus the current view. Ties go to the more recent step. No LLM call."""

    name = "embedding"

    def __init__(self, m: int = 3):
        self.m = _count(m, "m")
        _as_agent_error(embeddings.check_available)
        self._vectors: dict[str, object] = {}

    def config(self) -> dict:
        return {"strategy": self.name, "m": self.m, "embedding_model": embeddings.MODEL_ID}

    def prepare(self) -> None:
        _as_agent_error(embeddings.load_minilm)  # here rather than in the first step that needs it (its time would count as the agent's)

    def reset(self) -> None:
        self._vectors = {}

    def _vector(self, text: str):
        # A past step's text does not change: encode it once per episode.
        if text not in self._vectors:
            self._vectors[text] = _as_agent_error(embeddings.embed, [text])[0]
        return self._vectors[text]

    def choose(self, history, goal, obs_text, *, task_id="", step=None, llm=None) -> Selection:
        if not history or self.m == 0:
            return Selection([], {"scores": {}})
        query = _as_agent_error(embeddings.embed, [f"{goal}\n{(obs_text or '')[:QUERY_CHARS]}"])[0]
        scored = []
        for i, entry in enumerate(history):
            # Rounded so that float noise in the last digits cannot reorder near-ties across machines.
            score = round(float(self._vector(step_text(entry)) @ query), 4)
            scored.append((score, step_number(entry, i)))
        best = sorted(scored, key=lambda s: (-s[0], -s[1]))[: self.m]
        return Selection(sorted(n for _, n in best), {"scores": {str(n): s for s, n in best}})


def make_memory(name: str, *, k: int = 3, m: int = 3, seed: int = 0, template: str | None = None) -> MemoryStrategy:
    """The strategy called ``name`` (one of :data:`STRATEGIES`); bad settings are an :class:`AgentError`."""
    _count(k, "k")
    _count(m, "m")
    if name == "last-k":
        return LastK(k)
    if name == "random-k":
        return RandomK(k, seed)
    if name == "dynamic":
        return DynamicMemory(m, template)
    if name == "embedding":
        return EmbeddingMemory(m)
    if name == "none":
        return NoMemory()
    raise AgentError(f"unknown memory strategy {name!r} (known: {', '.join(STRATEGIES)})")
