"""The agent interface the runner drives, and what an agent is given: a task view.

An agent never sees a task's ground truth. The runner builds a :class:`TaskView` from the suite's
task (its id, instruction, start URL, category, snapshot time, the prior context of a dependent
task in a long-context run, and the handles the task declares, such as a persona) and hands the
reference trajectory only to an agent whose class sets ``oracle = True`` (the ``reference`` agent);
reports and manifests label such runs as the upper bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from webfreeze.common.errors import WebfreezeError
from webfreeze.common.text import collapse_ws, fold

# Task fields an agent may see (besides `handles`): everything else in a suite line, the
# ground truth above all, stays with the runner and the evaluators.
VISIBLE_FIELDS = ("id", "category", "instruction", "start_url", "snapshot_time", "context")
# Visible fields that a view's dict holds only when they are set (a view without them reads as it did
# before they existed).
OPTIONAL_FIELDS = ("context",)
# Task fields that name resources the agent may use (a persona, a user's history): passed on
# under `handles` when a task declares them.
HANDLE_FIELDS = ("persona", "user", "history", "site", "sites", "candidates")


class AgentError(WebfreezeError, RuntimeError):
    """An agent cannot be built or cannot run this task: one line."""


@dataclass(frozen=True)
class TaskView:
    """What an agent knows of a task: no ground truth, and the reference trajectory only for an
    oracle. ``get(key)`` reads it like the task's dict for agents written against one."""

    id: str
    instruction: str
    start_url: str | None = None
    category: str | None = None
    snapshot_time: str | None = None
    handles: dict = field(default_factory=dict)
    reference: dict | None = None
    # The prior context of a dependent task in a long-context run (the runner composes it: A1's
    # trajectory, irrelevant trajectories, then this task): {"text", "tokens", "target_tokens",
    # "tokenizer", "sessions": [{"part", "task_id", "tokens"}], "a1_task"}. Agent outputs and
    # instructions only, never ground truth. None for every other task.
    context: dict | None = None

    @classmethod
    def from_task(cls, task: dict, reference: dict | None = None) -> "TaskView":
        """The view of a suite line (a dict as in ``tasks.jsonl``, plus the ``context`` the runner adds
        for a dependent task); ``reference`` only for an oracle."""
        handles = {k: task[k] for k in HANDLE_FIELDS if task.get(k) is not None}
        context = task.get("context")
        context = _copy_context(context) if isinstance(context, dict) else None
        return cls(id=str(task.get("id")), instruction=str(task.get("instruction") or ""),
                   start_url=task.get("start_url"), category=task.get("category"),
                   snapshot_time=task.get("snapshot_time"), handles=handles, reference=reference,
                   context=context)

    def to_dict(self) -> dict:
        """The visible fields and the handles; an optional field (``context``) only when it is set."""
        out = {k: getattr(self, k) for k in VISIBLE_FIELDS
               if k not in OPTIONAL_FIELDS or getattr(self, k) is not None}
        if out.get("context") is not None:
            out["context"] = _copy_context(out["context"])
        out["handles"] = dict(self.handles)
        return out

    def get(self, key: str, default: Any = None) -> Any:
        if key in VISIBLE_FIELDS:
            value = getattr(self, key)
            return default if value is None else value
        return self.handles.get(key, default)

    def __getitem__(self, key: str) -> Any:
        if key in VISIBLE_FIELDS:
            return getattr(self, key)
        return self.handles[key]


def _copy_context(context: dict) -> dict:
    # a copy the agent may not change under the runner (its sessions list included)
    out = dict(context)
    if isinstance(out.get("sessions"), list):
        out["sessions"] = [dict(s) if isinstance(s, dict) else s for s in out["sessions"]]
    return out


class Agent:
    """``setup(services)`` once per worker, then per episode ``reset(task)`` and ``act(obs)`` until
    the episode ends; ``close()`` when the worker stops.

    ``task`` is a :class:`TaskView`. ``act`` returns ``{"action": str, ...agent fields}`` (thought,
    memory, LLM usage...), recorded in the step's ``agent_fields``. One instance serves every
    episode of a worker, so an agent loads its model once (in ``__init__`` or ``setup``) and clears
    its per-episode state in ``reset``.
    """

    name = "agent"
    # An oracle receives the task's reference trajectory (``task.reference``); its runs are labelled
    # as the upper bound. Every other agent gets None there.
    oracle = False
    # An agent that calls the embedded local model (``services.llm({"model": "local", ...})``) sets
    # this, so that the run starts that model's server once before its workers (not for a strict replay).
    wants_local_model = False

    services = None

    def config(self) -> dict:
        """What identifies this agent's behaviour (written to the run manifest and trajectories)."""
        return {}

    def setup(self, services) -> None:
        """Called once per worker with the run's :class:`~webfreeze.agents.services.AgentServices`
        (its LLM clients go through the run's cassette)."""
        self.services = services

    def reset(self, task: TaskView) -> None:
        raise NotImplementedError

    def act(self, obs: dict) -> dict:
        raise NotImplementedError

    def close(self) -> None:
        """Release what ``setup`` or ``__init__`` took (a model, a connection)."""


# Unicode's private-use areas: the glyphs of icon fonts (Bootstrap's glyphicons, Font Awesome), which
# a stylesheet's ``::before`` puts in an element's accessible name in the browser and which a page's
# HTML alone (the text backend) never holds: `link '\ue008 Authors'` there, `link 'Authors'` here.
_PRIVATE_USE = re.compile("[\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd]")


def norm(text) -> str:
    """Text compared loosely: NFKC, case-folded, whitespace runs as one space, icon fonts' glyphs
    (Unicode's private-use characters) left out where other text remains (a name that is a glyph
    alone, an icon button's, stays that glyph: it is all that tells it from the other buttons)."""
    folded = fold(str(text or ""))
    return collapse_ws(_PRIVATE_USE.sub(" ", folded)) or collapse_ws(folded)


def quote(text: str) -> str:
    """A Python string literal for a BrowserGym action argument."""
    return repr(str(text))


_WORD = re.compile(r"[\w.\-]+", re.UNICODE)


def words(text: str) -> list[str]:
    return [w.strip(".-") for w in _WORD.findall(norm(text)) if w.strip(".-")]
