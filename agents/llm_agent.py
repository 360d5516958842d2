"""``llm``: a ReAct-style web agent driven by a chat model (WebArxiv's Memory / Thought / Action).

At each step the agent:

1. notes the previous step's outcome (the environment's ``last_action_error``) in its history;
2. cuts the observation tree (``axtree_text``) to ``obs_tokens`` tokens of ``cl100k_base``, at a
   line boundary, saying how much was cut;
3. asks its memory strategy (:mod:`webfreeze.agents.memory`) which past steps to show;
4. sends one chat request: the prompt set's system prompt (the actions of its dialect), then the
   task, the chosen past steps, the current page and, last, the reply format (small models follow
   best what they read last); with ``vision`` the screenshot goes along as an image part;
5. reads the reply's ``Memory:``, ``Thought:`` and ``Action:`` parts and parses the action with
   :func:`webfreeze.simulator.actions.try_parse` in its dialect. A reply with no valid action is
   asked again once, with the parse error; if the second reply has none either, the step is
   returned as it is and the environment records it as a failed step.

Every call goes through the LLM client, so inside a run it is stored in (or answered from) the run's
cassette. What the agent saw and chose is in the step's agent fields: ``thought``, ``memory``
(strategy, chosen step numbers, what the model wrote under "Memory:"), ``reply``, ``llm`` (calls,
tokens, cassette hits and keys), ``observation`` (tokens and lines shown) and ``parse_error``.

Prompts live in a prompt set: a folder of ``.txt`` templates (:class:`PromptSet`), either one of
``agents/prompts/`` by name or any folder by path; its digest is part of the agent's config.

Long context (the long-context paper's agents; docs/agents.md "Prior context, iRAG and reflection"):
a task view with a ``context`` (the prior sessions a long-context run composes) is shown before the
step prompt, cut from the oldest end to ``context_tokens`` tokens; with ``irag`` one call before the
first action writes a task-relevant summary of it, shown instead; with ``reflection`` a second call
reflects on each step once its outcome is seen (at the next ``act``), recorded on that step and shown
in the next prompt. Their templates are a prompt set of their own (:class:`ContextPrompts`,
``agents/prompts/longctx-v1``), so the step prompts of an agent without them stay as they were.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from string import Template
from typing import Any, ClassVar

from webfreeze.common.text import collapse_ws
from webfreeze.simulator.actions import ENDING_KINDS, Action, ActionError, format_action, normalize_dialect, try_parse

from .base import Agent, AgentError
from .memory import STRATEGIES, check_template, describe_step, make_memory, step_number

PROMPTS_DIR = Path(__file__).parent / "prompts"
DEFAULT_PROMPT = "webarxiv-v1"
TOKENIZER = "cl100k_base"
# The summary of a page kept with each past step (for the embedding memory): its first characters.
SUMMARY_CHARS = 200

# The templates of a prompt set and the fields each may use. ``actions-<dialect>.txt`` and
# ``reply-<dialect>.txt`` are plain text (the action list and the reply format of one dialect).
TEMPLATE_FIELDS = {
    "system.txt": {"actions"},
    "step.txt": {"goal", "memory", "title", "url", "error", "observation", "reply_format"},
    "retry.txt": {"error", "reply_format"},
}
MEMORY_TEMPLATE = "memory.txt"

# How the agent reaches the user's history (Persona2Web's schemes; docs/personas.md, "History-access schemes"):
# never; when its planner (the acting model) asks, each answer passed through the generator; or all
# before the first page action, the generator's output then making an enhanced task.
SCHEMES = ("no-history", "on-demand", "pre-execution")
DEFAULT_SCHEME_PROMPT = "schemes-v1"
SCHEME_TEMPLATES = {"planner.txt": {"goal", "n"}, "generator.txt": {"goal", "entries"}}
# The long-context templates (prior context, iRAG, reflection) and the fields each may use.
DEFAULT_CONTEXT_PROMPT = "longctx-v1"
# How much of a prior context the prompts show (cl100k_base tokens). With the default observation
# budget (1500) and memory, the step prompt then stays well inside the local model's 4096-token window.
DEFAULT_CONTEXT_TOKENS = 1000
CONTEXT_TEMPLATES = {
    "context.txt": {"context"},
    "summary.txt": {"summary"},
    "irag.txt": {"goal", "context"},
    "reflection.txt": {"goal", "step", "title", "url", "thought", "action", "result", "new_title", "new_url",
                       "observation"},
    "reflection-final.txt": {"goal", "step", "title", "url", "thought", "action"},
    "reflected.txt": {"step", "reflection"},
}
_QUERY_LINE = re.compile(r"(?im)^[ \t>*#_-]*(?:\d+[.)][ \t]*)?query[ \t*_]*\d*[ \t*_]*:[ \t*_]*(.+?)[ \t*_]*$")


# ------------------------------------------------------------------------------------------ prompt sets
def _digest_files(folder: Path) -> str:
    """sha256 over the folder's ``.txt`` files (names and bytes), in name order."""
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.txt")):
        data = path.read_bytes()
        h.update(path.name.encode("utf-8") + b"\0" + str(len(data)).encode() + b"\0" + data)
    return "sha256:" + h.hexdigest()


def _prompt_folder(prompt: str) -> tuple[Path, bool]:
    """(the folder a prompt-set name or path names, whether it was given as a path)."""
    looks_like_path = "/" in prompt or "\\" in prompt or prompt.startswith(".")
    return (Path(prompt).expanduser() if looks_like_path else PROMPTS_DIR / prompt), looks_like_path


def _read_prompt(folder: Path, name: str, what: str) -> str:
    try:
        return (folder / name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise AgentError(f"{what} {folder}: no {name}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentError(f"{what} {folder}: cannot read {name} ({exc})") from None


@dataclass(frozen=True)
class PromptSet:
    """A folder of prompt templates for one dialect, read and checked once."""

    folder: Path
    digest: str
    system: str
    step: Template
    retry: Template
    reply_format: str
    memory: str | None    # the dynamic memory's template text (None when not needed)
    system_template: Template | None = None  # system.txt's (to add the history action)
    actions: str = ""

    @classmethod
    def load(cls, prompt: str, dialect: str, *, need_memory: bool = False) -> "PromptSet":
        """The prompt set ``prompt`` (a name under ``agents/prompts/`` or a folder's path) for ``dialect``
        (a normalised dialect name). A missing folder, file or unknown field is an :class:`AgentError`."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise AgentError("prompt must name a prompt set (e.g. webarxiv-v1) or a folder")
        folder, looks_like_path = _prompt_folder(prompt)
        if not folder.is_dir():
            if looks_like_path:
                raise AgentError(f"prompt folder {prompt} does not exist")
            known = sorted(p.name for p in PROMPTS_DIR.iterdir() if (p / "system.txt").is_file())
            raise AgentError(f"unknown prompt set {prompt!r} (known: {', '.join(known) or 'none'}; or give a folder)")

        def read(name: str) -> str:
            return _read_prompt(folder, name, "prompt set")

        templates = {name: check_template(read(name), allowed, f"{folder / name}")
                     for name, allowed in TEMPLATE_FIELDS.items()}
        actions = read(f"actions-{dialect}.txt").strip()
        system = templates["system.txt"].substitute(actions=actions).strip()
        memory = read(MEMORY_TEMPLATE) if need_memory else None
        return cls(folder=folder, digest=_digest_files(folder), system=system, step=templates["step.txt"],
                   retry=templates["retry.txt"], reply_format=read(f"reply-{dialect}.txt").strip(), memory=memory,
                   system_template=templates["system.txt"], actions=actions)

    def system_with(self, extra_action: str) -> str:
        """The system prompt with one more action listed (the history search)."""
        return self.system_template.substitute(actions=self.actions + "\n" + extra_action.strip()).strip()


@dataclass(frozen=True)
class SchemePrompts:
    """The planner and generator templates of the history schemes and the history action's line."""

    folder: Path
    digest: str
    planner: Template    # $goal, $n
    generator: Template  # $goal, $entries
    action_line: str

    @classmethod
    def load(cls, prompt: str, dialect: str) -> "SchemePrompts":
        folder, _ = _prompt_folder(prompt)
        if not folder.is_dir():
            raise AgentError(f"scheme prompt set {prompt!r} does not exist (default {DEFAULT_SCHEME_PROMPT})")

        def read(name: str) -> str:
            return _read_prompt(folder, name, "scheme prompt set")

        t = {name: check_template(read(name), allowed, f"{folder / name}") for name, allowed in SCHEME_TEMPLATES.items()}
        return cls(folder=folder, digest=_digest_files(folder), planner=t["planner.txt"], generator=t["generator.txt"],
                   action_line=read(f"actions-history-{dialect}.txt").strip())


@dataclass(frozen=True)
class ContextPrompts:
    """The long-context templates: how the prior context (``context.txt``) or its iRAG summary
    (``summary.txt``) and the last reflection (``reflected.txt``) are shown, and the iRAG
    (``irag.txt``) and reflection (``reflection.txt``, ``reflection-final.txt``) calls' prompts."""

    folder: Path
    digest: str
    templates: dict[str, Template]  # by file name

    @classmethod
    def load(cls, prompt: str) -> "ContextPrompts":
        if not isinstance(prompt, str) or not prompt.strip():
            raise AgentError(f"context_prompt must name a prompt set (e.g. {DEFAULT_CONTEXT_PROMPT}) or a folder")
        folder, _ = _prompt_folder(prompt)
        if not folder.is_dir():
            raise AgentError(f"context prompt set {prompt!r} does not exist (default {DEFAULT_CONTEXT_PROMPT})")
        t = {name: check_template(_read_prompt(folder, name, "context prompt set"), allowed, f"{folder / name}")
             for name, allowed in CONTEXT_TEMPLATES.items()}
        return cls(folder=folder, digest=_digest_files(folder), templates=t)

    def render(self, name: str, **fields) -> str:
        return _tidy(self.templates[name].substitute(**fields))


def planner_queries(text: str, n: int) -> list[str]:
    """The queries of a planner's reply: its ``Query:`` lines, else its non-empty lines; at most ``n``,
    without repeats."""
    found = [m.group(1).strip().strip("'\"`").strip() for m in _QUERY_LINE.finditer(text or "")]
    if not found:
        found = [ln.strip().strip("-*'\"`").strip() for ln in (text or "").splitlines()]
    out: list[str] = []
    for q in found:
        q = collapse_ws(q)[:200]
        if q and q.casefold() not in {o.casefold() for o in out}:
            out.append(q)
    return out[:n]


def render_entries(entries: list[dict]) -> str:
    """History entries as the generator reads them (one line each)."""
    lines = []
    for e in entries:
        status = f" ({e['status']})" if e.get("status") else ""
        lines.append(f"- {e.get('timestamp', '')} {e.get('type', '')}: {e.get('object', '')} on "
                     f"{e.get('website', '')}{status}")
    return "\n".join(lines)


def candidates_text(candidates) -> str:
    """A ranking task's candidates as the agent reads them (the answer names their ids)."""
    lines = ["Candidates (answer with a JSON list of the ids of the best five, best first):"]
    for c in candidates or []:
        if isinstance(c, dict):
            rest = ", ".join(f"{k}: {v}" for k, v in c.items() if k not in ("id", "name") and v not in (None, ""))
            lines.append(f"- {c.get('id')}: {c.get('name', '')}" + (f" ({rest})" if rest else ""))
        else:
            lines.append(f"- {c}")
    return "\n".join(lines)


def _tidy(text: str) -> str:
    # An empty field leaves blank lines behind; keep at most one blank line in a row.
    return re.sub(r"\n[ \t]*\n(?:[ \t]*\n)+", "\n\n", text).strip()


# ------------------------------------------------------------------------------------------ observation
def _most_that_fit(total: int, fits) -> int:
    """The largest ``n`` in ``0..total-1`` with ``fits(n)`` (``fits`` is monotone; ``total`` is known
    not to fit). Galloping then bisection: each count reads about twice the budget at most, however
    long the text."""
    good, bad = 0, None
    n = 1
    while n < total:
        if fits(n):
            good, n = n, n * 2
        else:
            bad = n
            break
    bad = total if bad is None else bad
    while bad - good > 1:
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good


def cut_observation(text: str, budget: int, tokenizer) -> tuple[str, dict]:
    """``text`` cut to at most ``budget`` tokens (``tokenizer.count``), whole lines first, with a last
    line saying how many lines are shown; returns (text, {"tokens", "lines", "total_lines", "cut"}).

    The count is of the text actually returned, so the budget holds exactly (lines are not counted
    one by one: tokens can merge across a line break)."""
    text = text or ""
    lines = text.splitlines()
    total = len(lines)
    tokens = tokenizer.count(text)
    if tokens <= budget:
        return text, {"tokens": tokens, "lines": total, "total_lines": total, "cut": False}

    def head(n: int) -> str:
        return "\n".join(lines[:n] + [f"... (page cut to fit: {n} of {total} lines shown)"])

    def fits(n: int) -> bool:
        return tokenizer.count(head(n)) <= budget

    good = _most_that_fit(total, fits)
    if good > 0:
        out = head(good)
        return out, {"tokens": tokenizer.count(out), "lines": good, "total_lines": total, "cut": True}
    # Not even the first line fits: keep as many of its characters as do.
    mark = f"... (page cut to fit: part of line 1 of {total} shown)"
    first = lines[0] if lines else ""
    lo, hi = 0, len(first)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokenizer.count(first[:mid] + "\n" + mark) <= budget:
            lo = mid
        else:
            hi = mid - 1
    out = first[:lo] + "\n" + mark if lo else ""
    if out and tokenizer.count(out) > budget:
        out = ""
    return out, {"tokens": tokenizer.count(out), "lines": 0, "total_lines": total, "cut": True}


# ------------------------------------------------------------------------------------------ prior context
_SESSION_HEADER = re.compile(r"^## Session \d+")


def cut_context(text: str, budget: int, tokenizer, sessions=None) -> tuple[str, dict]:
    """A prior context cut to at most ``budget`` tokens by dropping its OLDEST lines (a model's window
    slides that way: what came first goes first), with a first line saying how many lines are
    shown. Returns (text, record): ``tokens`` (of the whole context), ``shown_tokens``, ``lines``,
    ``total_lines``, ``cut``, and, read from its ``## Session N`` headers, ``sessions`` (how many),
    ``sessions_dropped`` (wholly cut), ``session_cut`` (whether the oldest one shown lost its start)
    and, when ``sessions`` (the context's list of ``{"task_id", ...}``) matches the headers,
    ``dropped_tasks``. The agent is never told which session is which part: A1 gets no favours."""
    text = (text or "").strip()
    lines = text.splitlines()
    total = len(lines)
    tokens = tokenizer.count(text) if text else 0
    heads = [i for i, line in enumerate(lines) if _SESSION_HEADER.match(line)]

    def record(shown: str, n: int) -> dict:
        start = total - n
        while start < total and not lines[start].strip():  # (a blank line between sessions is no session's part)
            start += 1
        before = [i for i in heads if i < start]
        partial = bool(before) and start < total and start not in heads
        dropped = len(before) - (1 if partial else 0)
        out = {"tokens": tokens, "shown_tokens": tokenizer.count(shown) if shown else 0, "lines": n,
               "total_lines": total, "cut": n < total, "sessions": len(heads), "sessions_dropped": dropped,
               "session_cut": partial}
        if isinstance(sessions, list) and len(sessions) == len(heads) and dropped:
            out["dropped_tasks"] = [s.get("task_id") if isinstance(s, dict) else None for s in sessions[:dropped]]
        return out

    if tokens <= budget:
        return text, record(text, total)

    def tail(n: int) -> str:
        mark = f"... (earlier sessions cut to fit: the last {n} of {total} lines shown)"
        return "\n".join([mark] + lines[total - n:])

    def fits(n: int) -> bool:
        return tokenizer.count(tail(n)) <= budget

    good = _most_that_fit(total, fits)
    shown = tail(good) if good > 0 else ""
    return shown, record(shown, good)


def labelled_text(text: str, label: str) -> str:
    """What a reply writes after ``label:`` (its first such label, any case, markdown around it
    tolerated), else the whole reply; whitespace runs as one space."""
    text = text or ""
    m = re.search(rf"(?im)^[ \t>*#_-]*{re.escape(label)}[ \t*_]*:[ \t*_]*", text)
    if m:
        text = text[m.end():]
    return collapse_ws(text)


# ------------------------------------------------------------------------------------------ replies
_LABEL = re.compile(r"(?im)^[ \t>*#_-]*(memory|thoughts?|action)[ \t*_]*:[ \t*_]*")


@dataclass(frozen=True)
class Reply:
    """A model's reply read as Memory / Thought / Action; ``action`` is None when none parsed, and
    ``error`` then says why (one line)."""

    text: str
    note: str | None
    thought: str | None
    action_text: str
    action: Action | None
    error: str | None


def parse_reply(text: str, dialect: str) -> Reply:
    """Read a reply in the "Memory: ... / Thought: ... / Action: ..." format.

    Each part runs from its label to the next label; the first of each label counts (a model that
    goes on to write a second step has not taken it). The action is parsed in ``dialect``: the whole
    Action part (with no Action label, the whole reply: the parser finds an action line or a fenced
    block in prose), else its first line."""
    text = text or ""
    parts: dict[str, str] = {}
    labels = list(_LABEL.finditer(text))
    for i, label in enumerate(labels):
        key = label.group(1).lower().rstrip("s")
        end = labels[i + 1].start() if i + 1 < len(labels) else len(text)
        parts.setdefault(key, text[label.end():end].strip())
    note = parts.get("memory") or None
    thought = parts.get("thought") or None
    action_text = parts["action"] if "action" in parts else text.strip()
    lines = [ln.strip().strip("`").strip() for ln in action_text.splitlines() if ln.strip()]
    candidates = [action_text] + lines[:1]
    first_error = None
    for candidate in candidates:
        action, error = try_parse(candidate, dialect)
        if action is not None:
            return Reply(text, note, thought, action_text, action, None)
        first_error = first_error or error
    return Reply(text, note, thought, action_text, None, first_error or "no action found")


# The most of an unparseable action that is sent on: its first line, this long (the whole reply stays
# in the agent fields; a small model's rambling need not fill the trajectory's action and the history).
FAILED_ACTION_CHARS = 200


def action_string(reply: Reply, dialect: str) -> str:
    """The action to send: the parsed action written cleanly in ``dialect`` (no prose around it, so
    the environment reads it whatever dialect it expects to detect); with none parsed, the first line
    of the reply's action text, which the environment then records as a failed step."""
    if reply.action is not None:
        try:
            return format_action(reply.action, dialect)
        except ActionError:
            pass  # e.g. a typed text with a line break: the bracket dialects cannot write it
        return reply.action_text
    lines = [ln.strip().strip("`").strip() for ln in reply.action_text.splitlines() if ln.strip()]
    return lines[0][:FAILED_ACTION_CHARS] if lines else ""


def _usage(completions) -> tuple[dict, dict]:
    """The ``llm`` agent field for the calls of one step (what was asked and answered: the same in a
    recorded run and its replay), and its timing part (how: the models' latency and how many calls
    the cassette answered), which the trajectory keeps with the step's timings."""
    out: dict[str, Any] = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "keys": []}
    timing = {"cassette_hits": 0, "llm_ms": 0.0}
    for c in completions:
        usage = getattr(c, "usage", None) or {}
        get = usage.get if isinstance(usage, dict) else (lambda k, _u=usage: getattr(_u, k, 0))
        out["calls"] += 1
        out["prompt_tokens"] += int(get("prompt_tokens") or 0)
        out["completion_tokens"] += int(get("completion_tokens") or 0)
        out["keys"].append(getattr(c, "key", None))
        timing["cassette_hits"] += 1 if getattr(c, "from_cassette", False) else 0
        timing["llm_ms"] += float(getattr(c, "latency_ms", 0) or 0) if not getattr(c, "from_cassette", False) else 0.0
    timing["llm_ms"] = round(timing["llm_ms"], 3)
    return out, timing


# ------------------------------------------------------------------------------------------ settings
def _number(value, what: str, *, low: float, high: float | None = None, low_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AgentError(f"{what} must be a number (not {value!r})")
    if value < low or (low_open and value == low) or (high is not None and value > high):
        span = f"{'above' if low_open else 'at least'} {low}" + (f" and at most {high}" if high is not None else "")
        raise AgentError(f"{what} must be {span} (not {value!r})")
    return value


def _whole(value, what: str, *, low: int | None = 0, none_ok: bool = False):
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
        bound = f", {low} or more" if low is not None else ""
        raise AgentError(f"{what} must be a whole number{bound} (not {value!r})")
    return value


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ------------------------------------------------------------------------------------------ config objects
# The agent's settings, grouped. Each group is a frozen dataclass that checks its values when made
# (an AgentError naming the setting). Its FLAT table names each field's key in the agent's flat JSON
# settings (``--agent-config``, a study's ``[[agents]]``, the manifest's ``agent_settings``), in the
# order the agent's config writes them: that config is the run's identity and part of no cassette key,
# but runs compare it, so its keys and their order stay as they were.
class _Group:
    FLAT: ClassVar[dict[str, str]]  # flat setting name -> field name

    @classmethod
    def from_flat(cls, settings: dict):
        """The group made from the flat settings it owns (the others are left alone)."""
        return cls(**{name: settings[key] for key, name in cls.FLAT.items() if key in settings})

    def flat(self) -> dict:
        """The group as flat settings, in :attr:`FLAT`'s order."""
        return {key: getattr(self, name) for key, name in self.FLAT.items()}


@dataclass(frozen=True)
class SamplingConfig(_Group):
    """The model and how it is asked: they make the agent's :class:`~webfreeze.llm.LLMConfig` (model
    ``local`` is the embedded SmolLM2 server; ``api_key_env`` is the NAME of the variable holding
    the key, ``""`` or None for none)."""

    model: str = "local"
    base_url: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = 0
    max_tokens: int = 200

    FLAT: ClassVar[dict[str, str]] = {n: n for n in ("model", "base_url", "api_key_env", "temperature", "top_p",
                                                    "seed", "max_tokens")}

    def __post_init__(self):
        if not isinstance(self.model, str) or not self.model.strip():
            raise AgentError(f"model must name a model (not {self.model!r})")
        if self.base_url is not None and (not isinstance(self.base_url, str)
                                          or not re.match(r"^https?://", self.base_url)):
            raise AgentError(f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1 (not {self.base_url!r})")
        if self.api_key_env == "":  # an endpoint that needs no key (study files: api_key_env = "")
            object.__setattr__(self, "api_key_env", None)
        if self.api_key_env is not None and (not isinstance(self.api_key_env, str)
                                             or not _ENV_NAME.match(self.api_key_env)):
            raise AgentError(f"api_key_env must be the NAME of an environment variable (not {self.api_key_env!r})")
        _number(self.temperature, "temperature", low=0)
        _number(self.top_p, "top_p", low=0, high=1, low_open=True)
        _whole(self.seed, "seed", low=None, none_ok=True)
        _whole(self.max_tokens, "max_tokens", low=1)


@dataclass(frozen=True)
class MemoryConfig(_Group):
    """Which past steps the prompt shows (:mod:`webfreeze.agents.memory`): ``strategy`` one of
    ``last-k``, ``random-k``, ``dynamic``, ``embedding``, ``none``, with ``k`` (last-k, random-k),
    ``m`` (dynamic, embedding) and ``seed`` (random-k). Flat: ``memory``, ``k``, ``m``, ``memory_seed``."""

    strategy: str = "last-k"
    k: int = 3
    m: int = 3
    seed: int = 0

    FLAT: ClassVar[dict[str, str]] = {"memory": "strategy", "k": "k", "m": "m", "memory_seed": "seed"}

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise AgentError(f"unknown memory strategy {self.strategy!r} (known: {', '.join(STRATEGIES)})")
        _whole(self.k, "k")
        _whole(self.m, "m")
        _whole(self.seed, "memory_seed", low=None)


@dataclass(frozen=True)
class PromptConfig(_Group):
    """What the model reads and writes: the prompt set (a name under ``agents/prompts/`` or a
    folder), the action ``dialect`` it is told to write (``webarxiv``, ``browsergym``,
    ``webarena``), the observation's budget in tokens and whether the screenshot goes along."""

    obs_tokens: int = 1500
    dialect: str = "webarxiv"
    vision: bool = False
    prompt: str = DEFAULT_PROMPT

    FLAT: ClassVar[dict[str, str]] = {n: n for n in ("obs_tokens", "dialect", "vision", "prompt")}

    def __post_init__(self):
        _whole(self.obs_tokens, "obs_tokens", low=1)
        if not isinstance(self.dialect, str):
            raise AgentError(f"dialect must be webarxiv, browsergym or webarena (not {self.dialect!r})")
        try:
            normalize_dialect(self.dialect)
        except ActionError:
            raise AgentError(f"unknown dialect {self.dialect!r} (known: webarxiv, browsergym, webarena)") from None
        if not isinstance(self.vision, bool):
            raise AgentError(f"vision must be true or false (not {self.vision!r})")


@dataclass(frozen=True)
class SchemeConfig(_Group):
    """How the agent reaches the user's history (:data:`SCHEMES`): the planner's number of queries
    and the schemes' prompt set. Flat: ``scheme``, ``history_queries``, ``scheme_prompt``."""

    scheme: str = "no-history"
    queries: int = 3
    prompt: str = DEFAULT_SCHEME_PROMPT

    FLAT: ClassVar[dict[str, str]] = {"scheme": "scheme", "history_queries": "queries", "scheme_prompt": "prompt"}

    def __post_init__(self):
        if self.scheme not in SCHEMES:
            raise AgentError(f"unknown scheme {self.scheme!r} (known: {', '.join(SCHEMES)})")
        _whole(self.queries, "history_queries", low=1)
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise AgentError("scheme_prompt must name a prompt set (e.g. schemes-v1) or a folder")


@dataclass(frozen=True)
class ContextConfig(_Group):
    """The long-context settings: the prior context's budget (``context_tokens``), the iRAG summary
    call, the reflection calls (at most ``reflection_tokens`` tokens each; default ``max_tokens``)
    and their prompt set (``context_prompt``)."""

    irag: bool = False
    reflection: bool = False
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    context_prompt: str = DEFAULT_CONTEXT_PROMPT
    reflection_tokens: int | None = None

    FLAT: ClassVar[dict[str, str]] = {n: n for n in ("irag", "reflection", "context_tokens", "context_prompt",
                                                    "reflection_tokens")}

    def __post_init__(self):
        for name in ("irag", "reflection"):
            if not isinstance(getattr(self, name), bool):
                raise AgentError(f"{name} must be true or false (not {getattr(self, name)!r})")
        _whole(self.context_tokens, "context_tokens")
        _whole(self.reflection_tokens, "reflection_tokens", low=1, none_ok=True)
        if self.reflection_tokens is not None and not self.reflection:
            raise AgentError("reflection_tokens needs reflection=true (it sizes the reflection calls)")
        if self.irag and self.context_tokens == 0:
            raise AgentError("irag=true needs context_tokens of 1 or more (the summary reads the prior context)")
        if not isinstance(self.context_prompt, str) or not self.context_prompt.strip():
            raise AgentError(f"context_prompt must name a prompt set (e.g. {DEFAULT_CONTEXT_PROMPT}) or a folder")

    @property
    def is_default(self) -> bool:
        """Whether the long-context settings (all but ``reflection_tokens``) are their defaults."""
        return (self.irag, self.reflection, self.context_tokens, self.context_prompt) == (
            False, False, DEFAULT_CONTEXT_TOKENS, DEFAULT_CONTEXT_PROMPT)


# (keyword name in LLMAgent(...), its config class); ``memory`` and ``scheme`` are also flat settings
# (the strategy's and the scheme's names): a string there is the flat setting, a config object the group.
GROUPS = (("sampling", SamplingConfig), ("memory", MemoryConfig), ("prompting", PromptConfig),
          ("scheme", SchemeConfig), ("context", ContextConfig))
SETTING_NAMES = tuple(key for _, cls in GROUPS for key in cls.FLAT)


class LLMAgent(Agent):
    """The LLM agent (``--agent llm``). From Python its settings are five config objects:
    ``LLMAgent(sampling=SamplingConfig(...), memory=MemoryConfig(...), prompting=PromptConfig(...),
    scheme=SchemeConfig(...), context=ContextConfig(...))``, each defaulting to its defaults. Every
    setting can also be given by its flat name (JSON values: ``--agent-config``, a study's agents,
    the manifest's ``agent_settings``; :data:`SETTING_NAMES`), e.g. ``LLMAgent(model="m", k=5)``;
    ``memory`` and ``scheme`` then name the strategy and the scheme. A group given both ways, or
    bad settings, are an :class:`AgentError` from the constructor.
    """

    name = "llm"
    oracle = False
    setting_names = SETTING_NAMES  # (webfreeze.agents.agent_settings: the flat settings it takes)

    def __init__(self, sampling: SamplingConfig | None = None, memory: MemoryConfig | str | None = None,
                 prompting: PromptConfig | None = None, scheme: SchemeConfig | str | None = None,
                 context: ContextConfig | None = None, **settings):
        given = {"sampling": sampling, "memory": memory, "prompting": prompting, "scheme": scheme, "context": context}
        for flat_name in ("memory", "scheme"):  # the strategy's or the scheme's name: a flat setting
            if isinstance(given[flat_name], str):
                settings[flat_name] = given.pop(flat_name)
        unknown = sorted(set(settings) - set(SETTING_NAMES))
        if unknown:
            raise AgentError(f"agent 'llm' has no setting {unknown[0]!r} (its settings: {', '.join(SETTING_NAMES)})")
        groups: dict[str, Any] = {}
        for arg, cls in GROUPS:
            obj = given.get(arg)
            flat_given = [key for key in cls.FLAT if key in settings]
            if obj is None:
                groups[arg] = cls.from_flat(settings)
            elif not isinstance(obj, cls):
                raise AgentError(f"{arg} must be a {cls.__name__} (not {type(obj).__name__})")
            elif flat_given:
                raise AgentError(f"give {arg}={cls.__name__}(...) or its settings ({', '.join(flat_given)}), "
                                 "not both")
            else:
                groups[arg] = obj
        sampling_cfg: SamplingConfig = groups["sampling"]
        memory_cfg: MemoryConfig = groups["memory"]
        prompting_cfg: PromptConfig = groups["prompting"]
        scheme_cfg: SchemeConfig = groups["scheme"]
        context_cfg: ContextConfig = groups["context"]
        if (context_cfg.irag or context_cfg.reflection) and scheme_cfg.scheme != "no-history":
            which = "irag" if context_cfg.irag else "reflection"
            raise AgentError(f"{which}=true works with scheme=no-history only (not {scheme_cfg.scheme})")
        self.sampling, self.memory_config, self.prompting = sampling_cfg, memory_cfg, prompting_cfg
        self.scheme_config, self.context_config = scheme_cfg, context_cfg
        self.dialect = normalize_dialect(prompting_cfg.dialect)
        self.settings: dict[str, Any] = {**sampling_cfg.flat(), **memory_cfg.flat(), **prompting_cfg.flat()}
        if scheme_cfg.scheme != "no-history":  # (a no-history agent's config stays as it was before schemes existed)
            self.settings.update(scheme_cfg.flat())
        # Likewise, the long-context settings enter the config (the run's identity) only when one differs
        # from its default: an agent without them keeps the config it had before they existed.
        self.long_context = not context_cfg.is_default
        if self.long_context:
            self.settings.update({k: v for k, v in context_cfg.flat().items() if k != "reflection_tokens"})
        if context_cfg.reflection_tokens is not None:  # (absent when not set: the config stays as it was)
            self.settings["reflection_tokens"] = context_cfg.reflection_tokens
        self.irag, self.reflection = context_cfg.irag, context_cfg.reflection
        self.context_tokens = context_cfg.context_tokens
        self.reflection_tokens = context_cfg.reflection_tokens
        self.context_prompts = ContextPrompts.load(context_cfg.context_prompt)
        self.scheme = scheme_cfg.scheme
        self.prompts = PromptSet.load(prompting_cfg.prompt, self.dialect, need_memory=memory_cfg.strategy == "dynamic")
        self.scheme_prompts = (SchemePrompts.load(scheme_cfg.prompt, self.dialect) if scheme_cfg.scheme != "no-history"
                               else None)
        self.system = (self.prompts.system_with(self.scheme_prompts.action_line) if scheme_cfg.scheme == "on-demand"
                       else self.prompts.system)
        self.memory = make_memory(memory_cfg.strategy, k=memory_cfg.k, m=memory_cfg.m, seed=memory_cfg.seed,
                                  template=self.prompts.memory)
        self.tokenizer = self._load_tokenizer()
        self.llm_config = self._llm_config()
        self.services = None
        self._client: Any = None
        self._owned_services: Any = None  # services of its own, outside a runner (a temporary cassette)
        self._own_dir = None
        self._server = None
        self.task_id: str | None = None
        self.goal = ""
        self.history: list[dict] = []
        self._context_text = ""
        self._first_fields: dict = {}
        self._irag_summary: str | None = None
        self._irag_pending = False

    # -------------------------------------------------------------------------------- setup
    @staticmethod
    def _load_tokenizer():
        from webfreeze.simulator.composition import CompositionError, get_tokenizer

        try:
            return get_tokenizer(TOKENIZER)
        except CompositionError as exc:
            raise AgentError(str(exc)) from None

    def _llm_config(self):
        try:
            from webfreeze.llm import LLMConfig, LLMError
        except ImportError as exc:
            raise AgentError(f"the LLM agent needs the LLM client: pip install 'webfreeze[llm]' ({exc})") from None
        s = self.settings
        fields = {"model": s["model"], "base_url": s["base_url"], "api_key_env": s["api_key_env"],
                  "temperature": float(s["temperature"]), "top_p": float(s["top_p"]), "seed": s["seed"],
                  "max_tokens": s["max_tokens"]}
        try:
            if s["model"] == "local":
                # The local model's server applies its own sampling defaults unless every parameter is sent.
                from webfreeze.llm.local import local_config

                return local_config(**fields)
            return LLMConfig(**fields)
        except LLMError as exc:
            raise AgentError(f"bad LLM settings: {exc}") from None

    def config(self) -> dict:
        """Every setting, the prompt set's digest, the tokenizer and the memory's own settings."""
        out = dict(self.settings, prompt_digest=self.prompts.digest, tokenizer=TOKENIZER)
        if self.scheme_prompts is not None:
            out["scheme_prompt_digest"] = self.scheme_prompts.digest
        if self.long_context:
            out["context_prompt_digest"] = self.context_prompts.digest
        extra = {k: v for k, v in self.memory.config().items() if k not in out and k != "strategy"}
        out.update(extra)
        return out

    @property  # (over Agent's class attribute False: a plain agent wants no local model)
    def wants_local_model(self) -> bool:  # type: ignore[override]
        """Whether this agent talks to the embedded local model with no URL of its own: a run then
        starts that model's server (the runner asks, before its workers start)."""
        return self.settings["model"] == "local" and self.settings["base_url"] is None

    def setup(self, services) -> None:
        """Keep the run's services: the LLM client is made from them at the first task."""
        self.close()  # a client or server the agent made for itself before is not needed any more
        self.services = services
        self.memory.prepare()

    def _make_client(self):
        if self.services is not None:
            if not callable(getattr(self.services, "llm", None)):
                raise AgentError("the agent's services have no llm(config) to make an LLM client with")
            return self.services.llm(self.llm_config)
        # Outside a runner: services of its own. Every call still goes through a cassette, a
        # temporary one (removed by close()) unless setup(AgentServices(cassette=FILE)) named one;
        # model "local" without a URL starts its own local server (stopped by close()).
        import tempfile

        from .services import AgentServices

        base_url = None
        if self.llm_config.model == "local" and self.llm_config.base_url is None:
            from webfreeze.llm import LocalModelServer

            self._server = LocalModelServer().start()
            base_url = self._server.base_url
        self._own_dir = tempfile.TemporaryDirectory(prefix="webfreeze-llm-")
        self._owned_services = AgentServices(cassette=f"{self._own_dir.name}/llm-cassette.sqlite",
                                             local_base_url=base_url)
        return self._owned_services.llm(self.llm_config)

    def reset(self, task, reference: dict | None = None) -> None:
        """Start an episode: ``task`` is a TaskView (or a task dict); ``reference`` is never used."""
        get = task.get if hasattr(task, "get") else (lambda key, default=None: getattr(task, key, default))
        self.task_id = str(get("id", "") or "")
        self.goal = str(get("instruction", "") or "")
        candidates = get("candidates")
        if candidates:
            self.goal = f"{self.goal}\n{candidates_text(candidates)}"
        self.history = []
        # the history schemes' state of this episode
        self.notes: list[str] = []          # what the generator wrote of each answered search
        self._searched: str | None = None   # the query of the search whose answer comes next
        self._queued: list[str] | None = None  # pre-execution: the planner's queries still to send
        self._planned: list[str] = []
        self._collected: list[dict] = []
        self._enhanced: str | None = None
        # the prior context of this episode (a dependent task of a long-context run), as shown
        context = get("context")
        text = context.get("text") if isinstance(context, dict) else None
        self._context_text = ""
        self._first_fields = {}  # what the first step records (the context's cut, iRAG)
        self._irag_summary = None
        if isinstance(text, str) and text.strip():
            shown, record = cut_context(text, self.context_tokens, self.tokenizer, context.get("sessions"))
            self._context_text = shown
            self._first_fields["prior_context"] = dict(record, budget=self.context_tokens,
                                                      prompt_digest=self.context_prompts.digest)
        self._irag_pending = self.irag
        self.memory.reset()
        # an LLMError (no API key, a cassette that cannot be used) goes up as it is: the runner stops
        # the run on it, since no episode could go right
        if self._client is None:
            self._client = self._make_client()
        self._client.begin_episode(self.task_id)

    def close(self) -> None:
        """Stop what the agent started itself (its own client and local server)."""
        self._client = None
        if self._owned_services is not None:
            self._owned_services.close()
            self._owned_services = None
        if self._own_dir is not None:
            self._own_dir.cleanup()
            self._own_dir = None
        if self._server is not None:
            self._server.stop()
            self._server = None

    # -------------------------------------------------------------------------------- acting
    def _step_messages(self, obs: dict, view: str, shown: list[dict], goal: str | None = None,
                       prefix: str = "") -> list[dict]:
        error = obs.get("last_action_error") or ""
        text = self.prompts.step.substitute(
            goal=goal if goal is not None else (self.goal or obs.get("goal") or ""),
            memory="\n".join(describe_step(e) for e in shown) or "(none)",
            title=obs.get("title") or "(no title)", url=obs.get("url") or "",
            error=f"Your last action failed: {error}" if error else "",
            observation=view or "(empty page)", reply_format=self.prompts.reply_format)
        # the prior context (or its summary) and the last reflection come first; the step prompt, with
        # the reply format last, is the same text as without them
        content: object = _tidy(f"{prefix}\n\n{text}") if prefix else _tidy(text)
        shot = obs.get("screenshot")
        if self.settings["vision"] and shot:
            url = "data:image/png;base64," + base64.b64encode(shot).decode("ascii")
            content = [{"type": "text", "text": content}, {"type": "image_url", "image_url": {"url": url}}]
        return [{"role": "system", "content": self.system}, {"role": "user", "content": content}]

    # -------------------------------------------------------------------------------- long context
    def _prefix(self) -> str:
        """What comes before the step prompt: the iRAG summary, else the prior context as cut; then the
        reflection on the last step. Empty without context and reflections."""
        parts = []
        if self._irag_summary is not None:
            parts.append(self.context_prompts.render("summary.txt", summary=self._irag_summary))
        elif self._context_text:
            parts.append(self.context_prompts.render("context.txt", context=self._context_text))
        last = self.history[-1] if self.history else None
        if self.reflection and last is not None and last.get("reflection"):
            parts.append(self.context_prompts.render("reflected.txt", step=last["step"], reflection=last["reflection"]))
        return "\n\n".join(parts)

    def _write_summary(self, goal: str, step) -> tuple[dict, list]:
        """iRAG: one call, before the first action, that writes what of the prior context matters for
        the task. No prior context shown, no call (``irag_summary`` is then null)."""
        self._irag_pending = False
        if not self._context_text:
            return {"irag_summary": None}, []
        text = self.context_prompts.render("irag.txt", goal=goal, context=self._context_text)
        c = self._client.chat([{"role": "user", "content": text}], step=step, purpose="irag")
        self._irag_summary = labelled_text(c.text, "summary") or "(the summary is empty)"
        return {"irag_summary": self._irag_summary, "irag_llm": _usage([c])[0]}, [c]

    def _reflect(self, entry: dict, step, *, obs: dict | None = None, view: str = "") -> tuple[str, object]:
        """The reflection on the past step ``entry``: on its outcome as the observation ``obs`` shows it,
        or (``obs`` None) on a step that ended the episode, whose outcome no observation will show."""
        common = {"goal": self.goal, "step": entry["step"], "title": entry.get("title") or "(no title)",
                  "url": entry.get("url") or "", "thought": entry.get("thought") or "(none)",
                  "action": entry.get("action") or "(none)"}
        if obs is None:
            text = self.context_prompts.render("reflection-final.txt", **common)
        else:
            error = entry.get("error")
            result = f"the action failed: {error}" if error else "the action ran without an error"
            text = self.context_prompts.render(
                "reflection.txt", **common, result=result, new_title=obs.get("title") or "(no title)",
                new_url=obs.get("url") or "", observation=view or "(empty page)")
        c = self._client.chat([{"role": "user", "content": text}], step=step, purpose="reflection",
                              max_tokens=self.reflection_tokens)
        return labelled_text(c.text, "reflection") or "(no reflection)", c

    # -------------------------------------------------------------------------------- history schemes
    def _task_goal(self, obs: dict) -> str:
        """The task as the step prompt states it: the instruction, or pre-execution's enhanced task,
        with what the generator made of on-demand searches."""
        goal = self._enhanced or self.goal or obs.get("goal") or ""
        if self.notes and self.scheme == "on-demand":
            goal += "\nWhat the user's history shows: " + " ".join(self.notes)
        return goal

    def _generate(self, entries: list[dict], step) -> tuple[str, object | None]:
        """The generator's reading of retrieved entries (no call when nothing was retrieved)."""
        if not entries:
            return "(the history shows nothing for this)", None
        text = _tidy(self.scheme_prompts.generator.substitute(goal=self.goal, entries=render_entries(entries)))
        c = self._client.chat([{"role": "user", "content": text}], step=step, purpose="generator")
        return collapse_ws(c.text or "") or "(the history shows nothing for this)", c

    def _history_turn(self, obs: dict, step) -> tuple[dict | None, list, dict]:
        """Before the acting call: read a search's answer; pre-execution may act here (its searches,
        sent one per call). Returns (a finished action or None, completions, fields for the step)."""
        completions: list = []
        fields: dict[str, Any] = {}
        if self._searched is not None:
            entries = [e for e in (obs.get("history_results") or []) if isinstance(e, dict)]
            self._searched = None
            if self.scheme == "on-demand":
                note, c = self._generate(entries, step)
                completions += [c] if c else []
                self.notes.append(note)
                fields["generator_output"] = note
            else:
                seen = {e.get("id") for e in self._collected}
                self._collected += [e for e in entries if e.get("id") not in seen]
        if self.scheme == "pre-execution" and self._enhanced is None:
            if self._queued is None:
                text = _tidy(self.scheme_prompts.planner.substitute(goal=self.goal, n=self.scheme_config.queries))
                c = self._client.chat([{"role": "user", "content": text}], step=step, purpose="planner")
                completions.append(c)
                # a planner that writes no usable query still searches once, with the task itself
                self._queued = planner_queries(c.text, self.scheme_config.queries) or [collapse_ws(self.goal)[:200]]
                self._planned = list(self._queued)
                fields["planner_queries"] = list(self._planned)
            if self._queued:
                query = self._queued.pop(0)
                self._searched = query
                action = format_action(Action("history_search", text=query), self.dialect)
                return {"action": action, "thought": f"before browsing, look up the user's history: {query}",
                        **fields}, completions, fields
            note, c = self._generate(self._collected, step)
            completions += [c] if c else []
            self._enhanced = f"{self.goal}\nWhat the user's history shows: {note}"
            fields.update(generator_output=note, enhanced_task=self._enhanced)
        return None, completions, fields

    def act(self, obs: dict) -> dict:
        """One step: ``{"action": str, "thought", "memory", "reply", "llm", "observation"[, "parse_error", "retry"]}``."""
        if self._client is None or self.task_id is None:
            raise AgentError("call reset() before act()")
        step = obs.get("step")
        step = step if isinstance(step, int) and not isinstance(step, bool) else len(self.history)
        if self.history and self._searched is None:
            # What the environment made of the previous action is only known now.
            self.history[-1]["error"] = obs.get("last_action_error") or None
        early, completions, scheme_fields = [], [], {}
        # what the first step of the episode records: the prior context's cut (and iRAG's summary)
        first_fields, self._first_fields = self._first_fields, {}
        if self.scheme != "no-history":
            done, early, scheme_fields = self._history_turn(obs, step)
            if done is not None:
                usage, timing = _usage(early)
                return {**done, **first_fields, "scheme": self.scheme, "llm": usage, "timing": timing}
        view, view_info = cut_observation(obs.get("axtree_text") or "", self.settings["obs_tokens"], self.tokenizer)
        goal = self._task_goal(obs)

        extra = dict(first_fields)
        if self._irag_pending:
            fields, calls = self._write_summary(goal, step)
            extra.update(fields)
            early = list(early) + calls
        last = self.history[-1] if self.history else None
        if self.reflection and last is not None and "reflection" not in last:
            # the previous step's outcome is this observation: reflect on it now, before choosing the
            # memory and acting (both then read the reflection); it is recorded on that step
            text, c = self._reflect(last, step, obs=obs, view=view)
            last["reflection"] = text
            extra["amend_previous"] = {"reflection": text, "reflection_llm": _usage([c])[0]}
            early = list(early) + [c]

        selection = self.memory.choose(self.history, goal, view, task_id=self.task_id, step=step, llm=self._client)
        chosen = set(selection.steps)
        shown = [e for i, e in enumerate(self.history) if step_number(e, i) in chosen]
        if self.reflection and last is not None:
            # the last reflection has a section of its own (in full): not twice in the prompt
            shown = [dict(e, reflection=None) if e is last else e for e in shown]
        completions = list(early) + list(selection.completions)

        messages = self._step_messages(obs, view, shown, goal, prefix=self._prefix())
        first = self._client.chat(messages, step=step, purpose="act")
        completions.append(first)
        reply = parse_reply(first.text, self.dialect)
        retry = None
        if reply.action is None:
            again = messages + [
                {"role": "assistant", "content": first.text},
                {"role": "user", "content": _tidy(self.prompts.retry.substitute(
                    error=reply.error, reply_format=self.prompts.reply_format))}]
            second = self._client.chat(again, step=step, purpose="retry")
            completions.append(second)
            retry = {"reply": first.text, "parse_error": reply.error}
            reply = parse_reply(second.text, self.dialect)

        action = action_string(reply, self.dialect)
        entry = {
            "step": step, "url": obs.get("url") or "", "title": obs.get("title") or "",
            "summary": collapse_ws(view[:SUMMARY_CHARS]), "thought": reply.thought, "note": reply.note,
            "action": action, "error": reply.error}
        if self.reflection and reply.action is not None and reply.action.kind in ENDING_KINDS:
            # no observation will show this step's outcome (the episode ends with it): reflect now
            text, c = self._reflect(entry, step)
            entry["reflection"] = text
            extra.update(reflection=text, reflection_llm=_usage([c])[0])
            completions.append(c)
        usage, timing = _usage(completions)
        if self.scheme == "on-demand" and reply.action is not None and reply.action.kind == "history_search":
            # the answer comes in the next observation; the search is not a page step of the memory
            self._searched = reply.action.text
            out = {"action": action, "thought": reply.thought, "reply": reply.text, "llm": usage,
                   "scheme": self.scheme, "timing": timing, **scheme_fields, **extra}
            if retry is not None:
                out["retry"] = retry
            return out
        self.history.append(entry)
        out = {
            "action": action, "thought": reply.thought,
            "memory": {"strategy": self.memory.name, "chosen": selection.steps, **selection.record,
                       "written": reply.note},
            "reply": reply.text, "llm": usage, "observation": view_info, "timing": timing,
        }
        if retry is not None:
            out["retry"] = retry
        if reply.action is None:
            out["parse_error"] = reply.error
        if self.scheme != "no-history":
            out.update(scheme=self.scheme, **scheme_fields)
        out.update(extra)
        return out
