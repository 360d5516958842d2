"""Reading trajectories: validation, normalised actions, the URLs a trajectory shows.

Two shapes are read:

- agent trajectories (``"format": "webfreeze-trajectory"``, written by the runner), which may also
  serve as reference trajectories;
- reference trajectories recorded by ``webfreeze record session`` (``"kind": "reference_trajectory"``).

Normalised actions (the unit of partial credit, docs/suites-and-runs.md) are ``Action(kind, target, texts)``:
``kind`` one of click, type, select, goto, scroll, go_back, go_forward, press, hover; ``target``
the element's identity (``role|name`` case-folded and whitespace-collapsed; ``css:<selector>``
when the element has no accessible name; the normalised URL for goto; the direction for scroll;
the key for press); ``texts`` the normalised typed or selected text (a select recorded by
``record session`` accepts its value or its label).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from webfreeze.common.http import host_port, page_url

from .errors import ReportError
from .text import collapse_ws, normalise

TRAJECTORY_FORMAT = "webfreeze-trajectory"
TRAJECTORY_VERSION = 1
END_REASONS = ("answer", "infeasible", "step_limit", "error", "stopped")

# Parsed action kinds that are not moves through the site: dropped from normalised sequences.
NON_ACTIONS = frozenset({"noop", "wait", "answer", "infeasible"})
_AGENT_KIND = {"click": "click", "fill": "type", "type": "type", "select": "select", "goto": "goto",
               "scroll": "scroll", "go_back": "go_back", "go_forward": "go_forward", "press": "press",
               "hover": "hover", "mouse_drag_and_drop": "drag", "drag_and_drop": "drag", "dblclick": "dblclick",
               "mouse_click": "click_at"}


def validate_trajectory(obj: Any, where: str) -> dict:
    """Check the parts of an agent trajectory the evaluators read; raise ReportError naming ``where``."""
    def bad(msg: str):
        raise ReportError(f"{where}: {msg}")

    if not isinstance(obj, dict):
        bad("a trajectory must be a JSON object")
    if obj.get("format") != TRAJECTORY_FORMAT:
        bad(f"not a trajectory (format must be {TRAJECTORY_FORMAT!r})")
    if obj.get("version") != TRAJECTORY_VERSION:
        bad(f"unsupported trajectory version {obj.get('version')!r} (this reads {TRAJECTORY_VERSION})")
    if not isinstance(obj.get("task_id"), str):
        bad("'task_id' must be a string")
    steps = obj.get("steps")
    if not isinstance(steps, list):
        bad("'steps' must be a list")
    for i, s in enumerate(steps):
        if not isinstance(s, dict):
            bad(f"step {i} is not an object")
        if not isinstance(s.get("action", ""), str):
            bad(f"step {i}: 'action' must be a string")
        for key in ("parsed", "target", "agent_fields", "timing"):
            if s.get(key) is not None and not isinstance(s[key], dict):
                bad(f"step {i}: {key!r} must be an object or null")
    answer = obj.get("answer")
    if answer is not None and not isinstance(answer, str):
        bad("'answer' must be a string or null")
    end = obj.get("end")
    if end is not None and not isinstance(end, dict):
        bad("'end' must be an object")
    if obj.get("final_state") is not None and not isinstance(obj["final_state"], dict):
        bad("'final_state' must be an object")
    if obj.get("timing") is not None and not isinstance(obj["timing"], dict):
        bad("'timing' must be an object or null")
    return obj


# ------------------------------------------------------------------------------ URLs
def normalise_url(url: str | None) -> str:
    """Scheme and host lower-cased, default port dropped, empty path -> ``/``, a trailing ``/``
    dropped from longer paths, percent-escapes in the path decoded, query pairs sorted, fragment
    dropped unless it is a hash route (``#/faq``: another page of a single-page application,
    :func:`~webfreeze.common.http.page_url`)."""
    if not url:
        return ""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - a bad port makes the URL one to compare as written
    except ValueError:
        return url.strip()
    path = unquote(parts.path) or "/"
    if len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    route = parts.fragment if "#" in page_url(url.strip()) else ""
    return urlunsplit((parts.scheme.lower(), host_port(parts), path, query, route))


def step_urls(step: dict) -> list[str]:
    """The page URLs a step shows: where the action was chosen and where it led (``url``, ``url_after``)."""
    out = []
    for key in ("url", "url_after"):
        u = step.get(key)
        if isinstance(u, str) and u and u not in out:
            out.append(u)
    return out


def all_urls(trajectory: dict) -> list[str]:
    """Every page URL of a trajectory in order of first appearance, ``final_url`` included."""
    out: list[str] = []
    for step in browser_steps(trajectory):
        for u in step_urls(step):
            if u not in out:
                out.append(u)
    final = trajectory.get("final_url")
    if isinstance(final, str) and final and final not in out:
        out.append(final)
    return out


# ------------------------------------------------------------------------------ actions
@dataclass(frozen=True)
class Action:
    kind: str
    target: str
    texts: frozenset[str] = frozenset()

    def matches(self, other: "Action") -> bool:
        """Same kind and target, and (when either typed text) a text in common."""
        if self.kind != other.kind or self.target != other.target:
            return False
        if self.texts or other.texts:
            return bool(self.texts & other.texts)
        return True

    def __str__(self) -> str:
        text = "/".join(sorted(self.texts))
        return f"{self.kind}({self.target}{', ' + repr(text) if text else ''})"


def element_identity(target: dict | None) -> str:
    """``role|name`` (normalised) when the element has an accessible name, else ``css:<selector>``,
    else ``role|``."""
    if not isinstance(target, dict):
        return ""
    role = collapse_ws(str(target.get("role") or "")).casefold()
    name = collapse_ws(str(target.get("name") or "")).casefold()
    if name:
        return f"{role}|{name}"
    css = target.get("css")
    if css:
        return "css:" + normalise_selector(str(css))
    return f"{role}|"


def normalise_selector(selector: str) -> str:
    """A CSS selector with runs of whitespace collapsed and no spaces around ``>``, ``+``, ``~``
    (WebCanvas's recorded selectors write ``a >b>c`` and ``a > b > c`` for the same path)."""
    s = collapse_ws(selector)
    return re.sub(r"\s*([>+~])\s*", r"\1", s)


def _texts(*values: Any) -> frozenset[str]:
    return frozenset(normalise(str(v)) for v in values if v not in (None, "") and normalise(str(v)))


def agent_action(step: dict) -> Action | None:
    """The normalised action of one agent step (None for noop/wait/answer/infeasible steps and for
    steps whose action could not be parsed)."""
    parsed = step.get("parsed")
    if not isinstance(parsed, dict):
        return None
    raw_kind = str(parsed.get("kind") or "")
    if raw_kind in NON_ACTIONS or raw_kind not in _AGENT_KIND:
        return None
    kind = _AGENT_KIND[raw_kind]
    if kind == "goto":
        return Action("goto", normalise_url(parsed.get("url")))
    if kind == "scroll":
        return Action("scroll", str(parsed.get("direction") or "down"))
    if kind in ("go_back", "go_forward", "drag"):  # (a drag by points or elements: compared by kind)
        return Action(kind, "")
    if kind == "click_at":  # (a click at a point: compared by kind, as a recorded click with ``at`` is)
        return Action("click", "")
    if kind == "press":
        return Action("press", str(parsed.get("key") or parsed.get("text") or parsed.get("value") or "").casefold(),)
    target = element_identity(step.get("target"))
    if kind == "type":
        typed = step.get("typed") if step.get("typed") is not None else parsed.get("text")
        return Action("type", target, _texts(typed))
    if kind == "select":
        typed = step.get("typed") if step.get("typed") is not None else parsed.get("value")
        return Action("select", target, _texts(typed))
    return Action(kind, target)


def is_history_step(step: dict) -> bool:
    """A history access (``kind == "history"``): an environment action that is not navigation."""
    return isinstance(step, dict) and step.get("kind") == "history"


def browser_steps(trajectory: dict) -> list[dict]:
    """The steps that act in the browser (every step but history accesses)."""
    return [s for s in trajectory.get("steps", []) if not is_history_step(s)]


def history_steps(trajectory: dict) -> list[dict]:
    """The history accesses of a trajectory (steps of kind ``history``), in order."""
    return [s for s in trajectory.get("steps", []) if is_history_step(s)]


def agent_actions(trajectory: dict) -> list[Action]:
    """Normalised browser actions (history accesses are not navigation and never count)."""
    return [a for a in (agent_action(s) for s in browser_steps(trajectory)) if a is not None]


def session_actions(reference: dict) -> list[Action]:
    """Normalised actions of a ``record session`` reference trajectory: the steps the person took,
    not the page's answers to them (the reference agent replays exactly these).

    ``submit`` events are dropped (the click or key press that caused them is logged too); a
    ``press`` (Enter in a field) is a ``press``; a ``drag`` is a ``drag`` (of no target: agents drag
    by points). A ``navigate`` that comes first is the start page; one with a ``cause`` is a
    ``goto`` when the cause is ``goto`` (the browser started it: the address bar, ``page.goto``) and
    the effect of an action otherwise. Without a ``cause`` (older recordings) it is dropped when it
    follows another navigation (a redirect chain) or a click, type, select or submit (the navigation
    that action caused), and is a ``goto`` otherwise. A scroll's direction comes from the change of
    the recorded scroll position (reset to 0,0 when a new document loads); a scroll marked ``by:
    "page"`` (an anchor jump, a click's scroll into view) only moves that position.
    """
    out: list[Action] = []
    prev_kind = None
    pos = (0, 0)
    for step in reference.get("steps", []):
        kind = step.get("action")
        value = step.get("value")
        if kind == "navigate":
            if "cause" in step:
                if prev_kind is not None and step.get("cause") == "goto":
                    out.append(Action("goto", normalise_url(step.get("url"))))
            elif prev_kind not in (None, "navigate", "click", "type", "select", "submit", "press"):
                out.append(Action("goto", normalise_url(step.get("url"))))
            if step.get("cause") != "sameDocument":  # a new document starts at the top
                pos = (0, 0)
        elif kind == "scroll":
            x = (value or {}).get("x", 0) if isinstance(value, dict) else 0
            y = (value or {}).get("y", 0) if isinstance(value, dict) else 0
            dx, dy = x - pos[0], y - pos[1]
            pos = (x, y)
            if (dx or dy) and not (isinstance(value, dict) and value.get("by") == "page"):
                direction = ("down" if dy > 0 else "up") if abs(dy) >= abs(dx) else ("right" if dx > 0 else "left")
                out.append(Action("scroll", direction))
        elif kind == "type":
            out.append(Action("type", element_identity(step.get("target")), _texts(value)))
        elif kind == "press":
            out.append(Action("press", str(value or "Enter").casefold()))
        elif kind == "select":
            if isinstance(value, dict):
                texts = _texts(value.get("value"), value.get("label"))
            else:
                texts = _texts(value)
            out.append(Action("select", element_identity(step.get("target")), texts))
        elif kind == "click" and step.get("at") is not None:  # (where it landed is what it did: by kind)
            out.append(Action("click", ""))
        elif kind in ("click", "dblclick"):
            out.append(Action(kind, element_identity(step.get("target"))))
        elif kind == "drag":  # (compared by kind: an agent drags by points or by elements)
            out.append(Action("drag", ""))
        # submit and unknown actions: nothing
        if kind != "scroll":
            prev_kind = kind
    return out


def reference_actions(reference: dict) -> list[Action]:
    """Normalised actions of a reference trajectory in either shape."""
    if reference.get("format") == TRAJECTORY_FORMAT:
        return agent_actions(reference)
    return session_actions(reference)


def action_strings(trajectory: dict) -> list[str]:
    """The raw action strings of a trajectory (whitespace-trimmed), for consistency comparisons."""
    return [str(s.get("action") or "").strip() for s in trajectory.get("steps", [])]


def iter_agent_fields(trajectory: dict) -> Iterable[dict]:
    for s in trajectory.get("steps", []):
        f = s.get("agent_fields")
        if isinstance(f, dict):
            yield f
