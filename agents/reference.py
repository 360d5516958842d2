"""The reference agent: replays a task's reference trajectory against the replay.

A reference trajectory (``record session``, docs/trajectories.md) logs what an annotator did:
``navigate``, ``click``, ``type``, ``press``, ``select``, ``submit``, ``scroll`` and a final
``answer``, each action with its target's role, accessible name and CSS path. The agent turns each
step the person took into one BrowserGym action on the current observation, finding the target
again by role and name (CSS path to choose among equals; CSS path and role alone when the target
had no name: :func:`find_target`) rather than by bid. Steps that were the page's answer to an
action (effects) are not replayed: replaying the action brings them about again. So the agent takes
exactly the reference's steps, and its efficiency ratio is 1.00 (eval/trajectory.py counts the same
steps).

- ``navigate`` with a ``cause`` (recorders since the press step): ``goto`` (the address bar,
  ``page.goto`` in a script) becomes ``goto(url)``; any other cause (a link, a form, a script) is
  the effect of the action before it. The first navigate is the start page. A navigate without a
  ``cause`` (older recordings) is skipped when it is the start page, when the page is already
  there, or when it follows a click or a form submission; else it becomes ``goto(url)``.
- ``click`` becomes ``click(bid)``, ``dblclick`` (a double-click) ``dblclick(bid)``.
- ``type`` becomes ``fill(bid, text)``; typed key by key (``keys: true``: ``page.keyboard.type``,
  a person at the keyboard) it is ``fill(bid, text, True)``, whose last character arrives as a key,
  so a search box that answers key events answers the replay too.
- ``press`` (Enter in a field) becomes ``press(bid, key)`` on that field: the page submits the
  form, or runs its own handler, as it did for the person, whatever it did to the form's buttons.
  A ``press`` with no target (a key pressed outside any field: VitePress's '/' opens its search
  box) becomes ``keyboard_press(key)``, to the page.
- ``submit`` after a click or a press is skipped (that action submitted); otherwise (older
  recordings) it presses Enter in the last field typed into.
- ``scroll`` with ``by: "user"`` becomes ``scroll(dx, dy)`` by the change of the recorded position
  (the larger axis); a scroll the page made (``by: "page"``: an anchor jump, a click's scroll into
  view) and an older scroll without ``by`` are skipped: targets are found in the whole page.
- ``answer`` becomes ``send_msg_to_user(text)`` only if every evidence string of the answer was
  shown by some page of this episode, matched on the page's visible text (the tree's names and
  text in document order) with whitespace and case folded, as ``record_answer`` checked it when
  it was recorded; otherwise ``report_infeasible(...)`` names what is missing. That is how
  ``tasks validate`` catches an expired task: the archive no longer shows the facts the ground
  truth rests on.
- A target that cannot be found ends the episode with ``report_infeasible(...)`` naming it, and so
  does missing evidence; but first, once per step, the agent waits as long as the person took
  before that step (its recorded ``time`` less the previous step's, at least WAIT_MIN_MS, at most
  the environment's MAX_WAIT_MS) with ``noop(ms)`` and tries the step again: a page that shows
  its content after a timer longer than a settle's second of virtual time (JupyterLab's file
  browser) showed it to the person, who waited for it. A page that already shows it never waits.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache

from webfreeze.common.http import page_url
from webfreeze.common.text import fold_text
from webfreeze.simulator.actions import MAX_WAIT_MS

from .base import Agent, AgentError, TaskView, norm, quote

ACTIONS = ("click", "dblclick", "type", "select", "press")
# The shortest wait for a step whose target or evidence is not there yet (ms): a person's recorded
# pause may be a few milliseconds (a script), and the page's timers still need their due time.
WAIT_MIN_MS = 1000

# One line of the observation tree: ``[bid] role 'name' ...`` or ``StaticText 'text'`` (names are
# Python string literals, in either quote).
_TREE_LINE = re.compile(r"""^\t*(?:\[[^\]]*\]\s+)?\S+\s+('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
# A form field's value after its name: `` value='...'`` (the field's text a person reads).
_TREE_BID = re.compile(r"^\t*\[([^\]]*)\]")
_TREE_VALUE = re.compile(r"""\s+value=('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")


# A quoted string of the tree's text as Python reads it. Cached: an episode reads the same lines
# again at every step, and parsing each again was the reference agent's largest cost.
_literal = lru_cache(maxsize=1 << 15)(ast.literal_eval)


def visible_text(axtree_text: str | None, typed: frozenset | set = frozenset()) -> str:
    """What a person reads on the page, from the observation tree: every node's name and every
    text, and a form field's value (not of the fields whose bids are in ``typed``, nor the text
    inside them, a rich text editor's: what the agent typed there is no evidence of the site's), in
    document order (the tree keeps hidden elements out). A node's text that its named ancestor's
    name already holds is left out: Chromium names a link, a ``code`` element or a heading after its
    content, and reading both would say ``lease_seconds lease_seconds``, so an evidence sentence
    spanning that node would not be found."""
    parts = []
    named: list[tuple[int, str]] = []  # (depth, folded name) of the named ancestors of this line
    below: int | None = None  # the depth of a typed field whose content is being skipped
    for line in (axtree_text or "").splitlines():
        if below is not None:  # (a rich text editor's text the agent typed: its lines below it)
            if len(line) - len(line.lstrip("\t")) > below:
                continue
            below = None
        m = _TREE_LINE.match(line)
        if not m:
            continue
        try:
            text = str(_literal(m.group(1)))
        except (ValueError, SyntaxError):
            continue
        depth = len(line) - len(line.lstrip("\t"))
        while named and named[-1][0] >= depth:
            named.pop()
        folded = fold_text(text)
        repeated = bool(folded) and any(folded in name for _, name in named)  # its ancestor's name said it
        if not repeated:
            parts.append(text)
            if folded and not line.lstrip("\t").startswith("StaticText"):
                named.append((depth, folded))
        shown = _TREE_VALUE.match(line, m.end())  # (a field's value, even under a name said before)
        bid = _TREE_BID.match(line)
        if bid and bid.group(1) in typed:
            below = depth  # (nor its text, a contenteditable's: what was typed there is the agent's)
        if shown and not (bid and bid.group(1) in typed):  # (record_answer's evidence check reads it the same)
            try:
                parts.append(str(_literal(shown.group(1))))
            except (ValueError, SyntaxError):
                pass
    return " ".join(parts)


def _same_url(a: str, b: str) -> bool:
    return page_url(a or "").rstrip("/") == page_url(b or "").rstrip("/")  # (a hash route is a page)


def texts_below(axtree_text: str | None) -> dict[str, str]:
    """bid -> the text drawn below that element in the observation tree (its ``StaticText`` lines,
    joined by spaces, folded as :func:`~webfreeze.common.text.fold_text` folds)."""
    out: dict[str, list[str]] = {}
    open_: list[tuple[int, str]] = []  # (depth, bid) of the elements whose subtree this line is in
    for line in (axtree_text or "").splitlines():
        depth = len(line) - len(line.lstrip("\t"))
        while open_ and open_[-1][0] >= depth:
            open_.pop()
        bid = _TREE_BID.match(line)
        if bid:
            open_.append((depth, bid.group(1)))
            out.setdefault(bid.group(1), [])
            continue
        m = _TREE_LINE.match(line)
        if m and line.lstrip("\t").startswith("StaticText"):
            try:
                text = str(_literal(m.group(1)))
            except (ValueError, SyntaxError):
                continue
            for _, above in open_:
                out[above].append(text)
    return {b: fold_text(" ".join(parts)) for b, parts in out.items()}


def _click_point(at, bbox) -> tuple[float, float] | None:
    """The viewport point a recorded click's ``at`` (fractions of its element's width and height:
    where it landed, away from the middle) names in the element's box now (``[x, y, width,
    height]``); None without either (a click in the middle, or a backend with no layout)."""
    if not (isinstance(at, list) and len(at) == 2 and isinstance(bbox, (list, tuple)) and len(bbox) == 4):
        return None
    if not all(isinstance(v, (int, float)) for v in (*at, *bbox)) or bbox[2] <= 0 or bbox[3] <= 0:
        return None
    return round(bbox[0] + at[0] * bbox[2], 1), round(bbox[1] + at[1] * bbox[3], 1)


def find_target(elements: list[dict], target: dict, axtree_text: str | None = None) -> dict | None:
    """The observation element matching a recorded target, or None.

    With a name: same role and the same name; among several, the one at the recorded CSS path, else
    the first in document order. Else the element at the recorded CSS path (or the same path but for
    the numbers of its id) whose name holds the recorded one (a link whose image repeats its text, a
    label with a part only CSS hides); a name holding it elsewhere on the page is another element (a
    target recorded without a path: the first whose name holds it). Without a name: same role at the
    same CSS path; else at the same path but for the numbers in the id it starts from
    (:func:`_id_shape`: a widget library's instance counter, ``#react-select-2--value`` live and
    ``#react-select-3--value`` in a replay that mounted the widget once more); else the page's only
    nameless element of that role and tag; else, among several (Streamlit's radio options, each a
    nameless ``label`` in a group whose generated id differs in the replay), the one whose text in
    the tree (``axtree_text``: the observation's) is the recorded ``text``, when only one is.
    """
    role, name, css, tag = target.get("role"), norm(target.get("name")), target.get("css"), target.get("tag")
    same_role = [e for e in elements if e.get("role") == role]
    if not name:
        exact = next((e for e in same_role if e.get("css") == css), None)
        if exact is not None or not css:
            return exact
        shape = _id_shape(css)
        shaped = [e for e in same_role if _id_shape(e.get("css")) == shape]
        if len(shaped) == 1:
            return shaped[0]
        nameless = [e for e in same_role if not norm(e.get("name")) and (not tag or e.get("tag") in (None, tag))]
        if len(nameless) == 1:
            return nameless[0]
        wanted = fold_text(str(target.get("text") or ""))
        if not wanted or axtree_text is None:
            return None
        below = texts_below(axtree_text)
        by_text = [e for e in nameless if below.get(str(e.get("bid"))) == wanted]
        return by_text[0] if len(by_text) == 1 else None
    found = [e for e in same_role if norm(e.get("name")) == name]
    if found:
        return next((e for e in found if e.get("css") == css), found[0])
    # a name that holds the recorded one only where the element is where it was recorded: elsewhere
    # it is another element ("Search term" is not the script-drawn "Search" box the page lacks)
    shape = _id_shape(css)
    return next((e for e in same_role if name in norm(e.get("name"))
                 and (not css or e.get("css") == css or _id_shape(e.get("css")) == shape)), None)


def _id_shape(css) -> str | None:
    """A CSS path (the recorder's: ``#id > tag:nth-of-type(i) > ...``) with every number in the id
    it starts from replaced by ``0``."""
    if not isinstance(css, str):
        return None
    head, sep, rest = css.partition(" > ")
    if head.startswith("#"):
        head = re.sub(r"[0-9]+", "0", head)
    return head + sep + rest


class ReferenceAgent(Agent):
    """The oracle: it receives the reference trajectory (``oracle = True``); its runs are the upper
    bound, labelled so in manifests and reports."""

    name = "reference"
    oracle = True

    def __init__(self):
        self.steps: list[dict] = []
        self.pos = 0
        self.seen: list[str] = []
        # bid -> (the page's URL, the field's role and tag): the fields this agent typed into
        self.typed: dict[str, tuple] = {}
        self.last_typed: str | None = None
        self.last_kind: str | None = None
        self.scroll_at = (0, 0)
        self.waited_at: int | None = None  # the step (position) already waited for once
        self.shown_at: int | None = None  # the click-at step whose element was brought into view

    def config(self) -> dict:
        return {"finds_targets_by": ["role", "name", "css"], "checks_answer_evidence": True}

    def reset(self, task) -> None:
        reference = task.reference if isinstance(task, TaskView) else None
        if not reference or not isinstance(reference.get("steps"), list):
            raise AgentError(f"task {task.get('id')}: no reference trajectory to replay")
        if reference.get("kind") != "reference_trajectory":
            raise AgentError(f"task {task.get('id')}: the reference agent replays `record session` trajectories "
                             f"(kind 'reference_trajectory')")
        self.steps = list(reference["steps"])
        self.pos = 0
        self.seen = []
        self.typed = {}
        self.last_typed = None
        self.last_kind = None
        self.scroll_at = (0, 0)
        self.waited_at = None
        self.shown_at = None

    def _wait_once(self, n) -> dict | None:
        """For the step just read, whose target or evidence is not there: once, a ``noop`` as long
        as the person took before it (module docstring), the step to be read again after it; None
        when it was waited for already or the recording has no times."""
        i = self.pos - 1
        if self.waited_at == i or i < 1:
            return None
        t, before = self.steps[i].get("time"), self.steps[i - 1].get("time")
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (t, before)):
            return None
        ms = int(min(MAX_WAIT_MS, max(WAIT_MIN_MS, round((t - before) * 1000))))
        self.waited_at = i
        self.pos = i
        return {"action": f"noop({ms})", "thought": f"reference step {n}: not shown yet; wait {ms} ms, as the person did"}

    def _typed_here(self, obs: dict) -> set[str]:
        """The bids of ``obs`` that are fields this agent typed into. Bids are a document's own: a
        form that posts to its own URL answers with a new document there, whose bids start again, so
        a bid counts only while the element carrying it is still that field (same role and tag)."""
        now = {str(e.get("bid")): e for e in obs.get("elements") or [] if isinstance(e, dict)}
        return {bid for bid, (url, role, tag) in self.typed.items()
                if url == obs.get("url") and bid in now
                and (now[bid].get("role"), now[bid].get("tag")) == (role, tag)}

    def _caused_by_action(self) -> bool:
        """Whether the navigate step just read follows a click or a form submission (recordings
        without a navigation ``cause``)."""
        for prev in reversed(self.steps[:self.pos - 1]):
            kind = prev.get("action")
            if kind in ("navigate", "scroll"):
                continue
            return kind in ("click", "submit", "press")
        return False

    def _navigate(self, step: dict, obs: dict) -> bool:
        """Whether a navigate step is the annotator's own (replayed as ``goto``)."""
        if self.pos == 1:  # the start page: the episode opens there
            return False
        if "cause" in step:
            return step.get("cause") == "goto"
        return not (_same_url(obs.get("url"), step.get("url")) or self._caused_by_action())

    def act(self, obs: dict) -> dict:
        typed = self._typed_here(obs)
        self.seen.append(fold_text(visible_text(obs.get("axtree_text"), typed)))
        while self.pos < len(self.steps):
            step = self.steps[self.pos]
            self.pos += 1
            kind = step.get("action")
            n = step.get("step", self.pos - 1)
            if kind == "navigate":
                if step.get("cause") != "sameDocument":  # a new document starts at the top
                    self.scroll_at = (0, 0)
                if not self._navigate(step, obs):
                    continue
                self.last_kind = "goto"
                self.typed = {}  # (a new document: what its fields show now is the site's, as the recorder reads it)
                return {"action": f"goto({quote(step['url'])})", "thought": f"reference step {n}: open {step['url']}"}
            if kind == "submit":
                if self.last_kind in ("click", "press") or self.last_typed is None:
                    continue
                self.last_kind = "press"
                return {"action": f"press({quote(self.last_typed)}, 'Enter')",
                        "thought": f"reference step {n}: submit the form"}
            if kind == "scroll":
                value = step.get("value") if isinstance(step.get("value"), dict) else {}
                x, y = int(value.get("x") or 0), int(value.get("y") or 0)
                dx, dy = x - self.scroll_at[0], y - self.scroll_at[1]
                self.scroll_at = (x, y)
                if value.get("by") != "user" or not (dx or dy):
                    continue
                delta = (0, dy) if abs(dy) >= abs(dx) else (dx, 0)
                return {"action": f"scroll({delta[0]}, {delta[1]})", "thought": f"reference step {n}: scroll"}
            if kind == "drag":  # where the person pressed and released, in the same viewport
                value = step.get("value") if isinstance(step.get("value"), dict) else {}
                points = [value.get("from"), value.get("to")]
                if not all(isinstance(pt, list) and len(pt) == 2 and all(isinstance(c, (int, float)) for c in pt)
                           for pt in points):
                    reason = f"reference step {n}: a drag without its two points"
                    return {"action": f"report_infeasible({quote(reason)})", "thought": reason}
                (x1, y1), (x2, y2) = points
                self.last_kind = "click"  # (a navigation right after it is its effect, as after a click)
                return {"action": f"mouse_drag_and_drop({x1}, {y1}, {x2}, {y2})",
                        "thought": f"reference step {n}: drag from ({x1}, {y1}) to ({x2}, {y2})"}
            if kind == "upload":  # the recording keeps the files' names, not their bytes
                value = step.get("value") if isinstance(step.get("value"), dict) else {}
                names = ", ".join(str(f.get("name")) for f in value.get("files") or [] if isinstance(f, dict))
                reason = (f"reference step {n}: a file upload ({names or 'no file'}): the reference agent "
                          "cannot replay uploads (the recording keeps the files' names, not their bytes)")
                return {"action": f"report_infeasible({quote(reason)})", "thought": reason}
            if kind == "press" and not step.get("target"):  # a key to the page, outside any field
                key = step.get("value") if isinstance(step.get("value"), str) and step.get("value") else "Enter"
                self.last_kind = kind
                return {"action": f"keyboard_press({quote(key)})", "thought": f"reference step {n}: press {key}"}
            if kind in ACTIONS:
                target = step.get("target") or {}
                el = find_target(obs.get("elements") or [], target, obs.get("axtree_text"))
                if el is None:
                    wait = self._wait_once(n)
                    if wait is not None:
                        return wait
                    what = f"{target.get('role')} {target.get('name')!r}"
                    return {"action": f"report_infeasible({quote(f'reference step {n}: no {what} on this page')})",
                            "thought": f"reference step {n}: target {what} not found on {obs.get('url')}"}
                bid = el["bid"]
                self.last_kind = kind
                thought = f"reference step {n}: {kind} {target.get('role')} {target.get('name')!r}"
                point = _click_point(step.get("at"), el.get("bbox")) if kind == "click" else None
                if point is not None and not el.get("visible", True) and self.shown_at != self.pos - 1:
                    # the element is out of view, where a point of it cannot be clicked: hovered first
                    # (which scrolls it into view), the step read again after it
                    self.shown_at = self.pos = self.pos - 1
                    return {"action": f"hover({quote(bid)})", "thought": f"{thought}: bring it into view first"}
                if point is not None and el.get("visible", True):  # where in the element the person clicked
                    return {"action": f"mouse_click({point[0]}, {point[1]})", "thought": f"{thought} at {point}"}
                if kind in ("click", "dblclick"):
                    return {"action": f"{kind}({quote(bid)})", "thought": thought}
                if kind == "press":
                    key = step.get("value") if isinstance(step.get("value"), str) and step.get("value") else "Enter"
                    return {"action": f"press({quote(bid)}, {quote(key)})", "thought": thought}
                if kind == "type":
                    self.last_typed = bid
                    self.typed[bid] = (obs.get("url"), el.get("role"), el.get("tag"))
                    keys = ", True" if step.get("keys") is True and step.get("value") else ""
                    return {"action": f"fill({quote(bid)}, {quote(step.get('value') or '')}{keys})", "thought": thought}
                value = step.get("value") or {}
                choice = value.get("value") if isinstance(value, dict) else value
                many = value.get("values") if isinstance(value, dict) else None
                if isinstance(many, list) and len(many) > 1:  # options chosen together in a <select multiple>
                    chosen = ", ".join(quote(str(v)) for v in many)
                    return {"action": f"select_option({quote(bid)}, [{chosen}])", "thought": thought}
                return {"action": f"select_option({quote(bid)}, {quote(choice or '')})", "thought": thought}
            if kind == "answer":
                value = step.get("value") or {}
                text = value.get("text", "") if isinstance(value, dict) else str(value)
                evidence = value.get("evidence", []) if isinstance(value, dict) else []
                missing = [e for e in evidence if not any(fold_text(e) in page for page in self.seen)]
                if missing:
                    wait = self._wait_once(n)
                    if wait is not None:
                        return wait
                    reason = f"reference step {n}: the pages did not show {missing[0]!r}"
                    return {"action": f"report_infeasible({quote(reason)})", "thought": reason}
                return {"action": f"send_msg_to_user({quote(text)})",
                        "thought": f"reference step {n}: answer (evidence seen: {len(evidence)})"}
            # unknown step kinds (a newer recorder) are skipped
        return {"action": "send_msg_to_user('done')", "thought": "reference trajectory replayed to its end"}
