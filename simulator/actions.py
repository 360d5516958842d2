"""One parser for the three action dialects agents speak, into one frozen ``Action``.

Dialects:

- ``browsergym``: Python-call syntax, e.g. ``click('12')``, ``fill('12', 'text')``, ``scroll(0, 500)``,
  ``send_msg_to_user('answer')``. Arguments are Python literals read with :mod:`ast` (never evaluated).
- ``webvoyager`` (also WebArxiv's): ``Click [12]``, ``Type [12]; text`` (Enter is pressed after
  typing), ``Scroll [WINDOW]; down``, ``Wait``, ``GoBack``, ``Google``, ``ANSWER; text``.
- ``webarena``: ``click [12]``, ``type [12] [text] [1]`` (the last flag presses Enter, 1 by default),
  ``hover [12]``, ``press [Enter]``, ``scroll [down]``, ``goto [url]``, ``go_back``, ``go_forward``,
  ``stop [answer]``.

Agent output often wraps the action in prose ("Thought: ... Action: Click [5]", WebArena's
"In summary, the next action I will perform is ```click [12]```", ``<think>..</think><action>..</action>``);
:func:`parse_action` finds the action and keeps the thought.

:func:`parse_action` raises :class:`ActionError` with one line saying what was expected;
:func:`try_parse` never raises. :func:`format_action` prints an action in any dialect.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, replace

from webfreeze.common.errors import WebfreezeError

KINDS = ("click", "fill", "select", "scroll", "go_back", "go_forward", "goto", "noop", "answer",
         "infeasible", "hover", "press", "history_search",
         # the rest of BrowserGym's high-level set, each under its own name
         "dblclick", "focus", "clear", "drag_and_drop", "upload_file", "scroll_at", "mouse_move", "mouse_up",
         "mouse_down", "mouse_click", "mouse_dblclick", "mouse_drag_and_drop", "mouse_upload_file",
         "keyboard_down", "keyboard_up", "keyboard_type", "keyboard_insert_text", "new_tab", "tab_close", "tab_focus")
# Actions that end the episode: no later observation shows their outcome.
ENDING_KINDS = ("answer", "infeasible")
# Actions that never touch the browser: a search of the user's history (answered by the environment
# from the task's persona, recorded as a step of kind "history", outside the navigation budget).
NON_BROWSER_KINDS = ("history_search",)
DIALECTS = ("browsergym", "webvoyager", "webarena")
# Other names people use for the dialects.
DIALECT_ALIASES = {"browsergym": "browsergym", "bgym": "browsergym", "webvoyager": "webvoyager",
                   "webarxiv": "webvoyager", "voyager": "webvoyager", "webarena": "webarena"}
DIRECTIONS = ("up", "down", "left", "right")
# What WebVoyager's ``Google`` action opens.
GOOGLE_URL = "https://www.google.com/"
# Pixels a BrowserGym ``scroll`` prints when an action carries no amount (a WebVoyager or WebArena scroll).
DEFAULT_SCROLL_PX = 500
# The most page time one wait (``noop(ms)``) gives the page's timers in the browser backend (virtual
# time: a settle runs at most TIMER_CAP callbacks however long it is); a longer wait counts as this.
# Playwright MCP's browser_wait_for goes up to 30 s.
MAX_WAIT_MS = 60_000


class ActionError(WebfreezeError, ValueError):
    """An action string that cannot be parsed (or an action that cannot be printed in a dialect),
    explained in one line."""


PARSED_FIELDS = ("kind", "bid", "text", "value", "direction", "amount", "url", "key", "dialect")


@dataclass(frozen=True)
class Action:
    """One agent action, whatever dialect it came in.

    ``bid`` is the target element id; ``text`` what ``fill`` types or the ``answer`` /
    ``infeasible`` message; ``value`` the option ``select`` picks; ``direction`` and ``amount``
    (pixels) a ``scroll``, ``amount`` also the milliseconds a ``noop`` waits; ``url`` where ``goto``
    goes; ``key`` the key ``press`` presses, or ``"Enter"`` on a ``fill`` that presses Enter after
    typing (WebVoyager's ``Type``, WebArena's ``type [..] [..] [1]``). ``raw`` is the text as the
    agent gave it and ``thought`` the reasoning found around the action, if any. ``args`` holds what
    only some BrowserGym actions say (``button``, ``modifiers``, ``options`` when several, ``to_bid``,
    ``files``, coordinates ``x``/``y``/``dx``/``dy``/``from_x``..., ``index``, ``delta_x``/``delta_y``
    of a two-axis scroll, ``autocomplete``); None when the action says nothing more.
    """

    kind: str
    bid: str | None = None
    text: str | None = None
    value: str | None = None
    direction: str | None = None
    amount: int | None = None
    url: str | None = None
    key: str | None = None
    dialect: str | None = None
    raw: str = ""
    thought: str | None = None
    args: dict | None = field(default=None, hash=False)  # (a dict: compared, not hashed)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ActionError(f"unknown action kind {self.kind!r}; expected one of {', '.join(KINDS)}")
        if self.direction is not None and self.direction not in DIRECTIONS:
            raise ActionError(f"unknown scroll direction {self.direction!r}; expected up, down, left or right")

    def to_dict(self) -> dict:
        """The ``parsed`` object of a trajectory step (formats.md), plus ``key``, and ``args`` only
        when set (a step without it reads as it always did)."""
        # Every field is a scalar: no need for asdict's deep copy (it was ~0.1 ms a step).
        d = {k: getattr(self, k) for k in PARSED_FIELDS}
        if self.args:  # (only where there is something: older trajectories' steps stay as they were)
            d["args"] = dict(self.args)
        return d

    @classmethod
    def from_dict(cls, d: dict, raw: str = "") -> "Action":
        """The inverse of :meth:`to_dict` (unknown keys are ignored)."""
        return cls(**{k: d.get(k) for k in PARSED_FIELDS}, raw=raw, args=d.get("args") or None)

    def with_thought(self, thought: str | None) -> "Action":
        return replace(self, thought=thought)


# ---------------------------------------------------------------- finding the action in agent output
_FENCE = re.compile(r"```[ \t]*(?:[A-Za-z_][\w-]*[ \t]*\n)?(.*?)```", re.S)
_ACTION_TAG = re.compile(r"<action>(.*?)</action>", re.S | re.I)
_THINK_TAG = re.compile(r"<think(?:ing)?>(.*?)</think(?:ing)?>", re.S | re.I)
_ACTION_LABEL = re.compile(r"(?i)(?:^|(?<=\s))[*#]*action[ \t*]*:[ \t*]*")
_THOUGHT_LABEL = re.compile(r"(?i)^[ \t*#]*thoughts?[ \t*]*:[ \t*]*")
# Words a line must start with to be taken for an action when nothing else marks it.
_ACTION_START = re.compile(
    r"^(?:[a-z_]+\s*\(|(?:click|type|hover|press|scroll|goto|go_back|go_forward|stop|new_tab|tab_focus|"
    r"close_tab|history_search|Click|Type|Scroll|Wait|GoBack|Google|ANSWER|HistorySearch)\b)")


# A line that is a whole BrowserGym call, such as click('12').
_CALL_LINE = re.compile(r"^[a-z_]+\s*\(.*\)\s*;?$")
_SUMMARY_LEAD = re.compile(r"(?is)\s*(?:in summary,\s*)?the next action I will perform is\s*:?\s*$")


def _clean_thought(text: str) -> str | None:
    text = _THINK_TAG.sub(lambda m: m.group(1), text)
    text = _THOUGHT_LABEL.sub("", text.strip(), count=1).strip()
    text = _SUMMARY_LEAD.sub("", text).strip()
    return text or None


def _split(text: str) -> tuple[str, str | None]:
    """(action text, thought) from an agent's whole output."""
    stripped = text.strip()
    tags = _ACTION_TAG.findall(stripped)
    if tags:
        think = _THINK_TAG.search(stripped)
        before = stripped[: stripped.lower().rfind("<action>")]
        thought = think.group(1).strip() if think else _clean_thought(before)
        return _unfence(tags[-1].strip()), thought or None
    labels = list(_ACTION_LABEL.finditer(stripped))
    if labels:
        last = labels[-1]
        after = stripped[last.end():].strip()
        return _unfence(after), _clean_thought(stripped[: last.start()])
    fences = list(_FENCE.finditer(stripped))
    if fences:
        last = fences[-1]
        return last.group(1).strip(), _clean_thought(stripped[: last.start()] + stripped[last.end():])
    if "\n" in stripped:
        lines = stripped.splitlines()
        for i in range(len(lines) - 1, -1, -1):
            line = lines[i].strip().strip("`").strip()
            if _ACTION_START.match(line):
                before = [x.strip().strip("`").strip() for x in lines[:i] if x.strip().strip("`").strip()]
                if _CALL_LINE.match(line) and before and _CALL_LINE.match(before[-1]):
                    raise ActionError(MULTI_ACTION)  # (BrowserGym's calls on two lines: two actions)
                return line, _clean_thought("\n".join(lines[:i]))
    return _unfence(stripped), None


def _unfence(text: str) -> str:
    m = _FENCE.search(text)
    if m:
        return m.group(1).strip()
    text = text.strip()
    if text.startswith("`") and text.endswith("`") and len(text) > 1:
        text = text.strip("`").strip()
    return text


def detect_dialect(action_text: str) -> str | None:
    """The dialect an action string looks like (``None`` when it looks like none)."""
    s = action_text.strip()
    if re.match(r"^[A-Za-z_]\w*\s*\(", s):
        return "browsergym"
    head = re.match(r"^([A-Za-z_]+)", s)
    if not head:
        return None
    word = head.group(1)
    if word in _VOYAGER_WORDS:
        return "webvoyager"
    if word.lower() in _ARENA_WORDS:
        return "webarena"
    if word.lower() in {w.lower() for w in _VOYAGER_WORDS}:
        return "webvoyager"
    return None


# ---------------------------------------------------------------- BrowserGym
# BrowserGym's high-level action set (browsergym.core.action.highlevel, browsergym-core 0.14):
# name -> (positional parameter names, {parameter: default}); defaults mark optional parameters.
_BGYM_SIGNATURES = {
    # chat, infeas
    "send_msg_to_user": (("text",), {}),
    "report_infeasible": (("reason",), {}),
    "noop": (("wait_ms",), {"wait_ms": None}),
    # bid
    "scroll": (("delta_x", "delta_y"), {}),
    "fill": (("bid", "value", "enable_autocomplete_menu"), {"enable_autocomplete_menu": False}),
    "select_option": (("bid", "options"), {}),
    "click": (("bid", "button", "modifiers"), {"button": "left", "modifiers": ()}),
    "dblclick": (("bid", "button", "modifiers"), {"button": "left", "modifiers": ()}),
    "hover": (("bid",), {}),
    "press": (("bid", "key_comb"), {}),
    "focus": (("bid",), {}),
    "clear": (("bid",), {}),
    "drag_and_drop": (("from_bid", "to_bid"), {}),
    "upload_file": (("bid", "file"), {}),
    # coord
    "scroll_at": (("x", "y", "dx", "dy"), {}),
    "mouse_move": (("x", "y"), {}),
    "mouse_up": (("x", "y", "button"), {"button": "left"}),
    "mouse_down": (("x", "y", "button"), {"button": "left"}),
    "mouse_click": (("x", "y", "button"), {"button": "left"}),
    "mouse_dblclick": (("x", "y", "button"), {"button": "left"}),
    "mouse_drag_and_drop": (("from_x", "from_y", "to_x", "to_y"), {}),
    "mouse_upload_file": (("x", "y", "file"), {}),
    "keyboard_down": (("key",), {}),
    "keyboard_up": (("key",), {}),
    "keyboard_press": (("key",), {}),
    "keyboard_type": (("text",), {}),
    "keyboard_insert_text": (("text",), {}),
    # nav
    "go_back": ((), {}),
    "go_forward": ((), {}),
    "goto": (("url",), {}),
    # tab
    "tab_close": ((), {}),
    "tab_focus": (("index",), {}),
    "new_tab": ((), {}),
    # ours: a search of the user's history
    "history_search": (("query",), {}),
}
# BrowserGym's subsets of the set (chat and infeas: the episode's end; noop is in every set).
BROWSERGYM_SUBSETS = {
    "chat": ("send_msg_to_user",), "infeas": ("report_infeasible",),
    "bid": ("scroll", "fill", "select_option", "click", "dblclick", "hover", "press", "focus", "clear",
            "drag_and_drop", "upload_file"),
    "coord": ("scroll_at", "mouse_move", "mouse_up", "mouse_down", "mouse_click", "mouse_dblclick",
              "mouse_drag_and_drop", "mouse_upload_file", "keyboard_down", "keyboard_up", "keyboard_press",
              "keyboard_type", "keyboard_insert_text"),
    "nav": ("go_back", "go_forward", "goto"),
    "tab": ("tab_close", "tab_focus", "new_tab"),
}
BROWSERGYM_ACTIONS = ("noop",) + tuple(n for names in BROWSERGYM_SUBSETS.values() for n in names)
# What the text backend (pages straight from the archive: no layout, no pointer, one page) cannot do,
# by BrowserGym action name; every other action it honours.
TEXT_REFUSED = frozenset({"dblclick", "drag_and_drop", "upload_file", *BROWSERGYM_SUBSETS["coord"],
                          *BROWSERGYM_SUBSETS["tab"]}) - {"keyboard_press"}
# The kind each BrowserGym action parses to (its Action.kind); the others are their own kind.
_BGYM_KIND = {"select_option": "select", "send_msg_to_user": "answer", "report_infeasible": "infeasible",
              "keyboard_press": "press"}
# The messages of the actions the first BrowserGym support knew (they reach prompts: an LLM agent's
# retry quotes them, and a recorded cassette's requests must not change).
_BGYM_LISTED = ("click", "fill", "select_option", "scroll", "go_back", "go_forward", "goto", "noop",
                "send_msg_to_user", "report_infeasible", "hover", "press", "keyboard_press")
_BGYM_EXAMPLES = {
    "click": "click('12')", "fill": "fill('12', 'text')", "select_option": "select_option('12', 'value')",
    "scroll": "scroll(0, 500)", "go_back": "go_back()", "go_forward": "go_forward()",
    "goto": "goto('http://example.com/')", "noop": "noop() or noop(1000)",
    "send_msg_to_user": "send_msg_to_user('the answer')", "report_infeasible": "report_infeasible('why')",
    "hover": "hover('12')", "press": "press('12', 'Enter')", "keyboard_press": "keyboard_press('Enter')",
    "history_search": "history_search('running shoes I bought')",
    "dblclick": "dblclick('12')", "focus": "focus('12')", "clear": "clear('12')",
    "drag_and_drop": "drag_and_drop('12', '15')", "upload_file": "upload_file('12', 'receipt.pdf')",
    "scroll_at": "scroll_at(50, 100, 0, 200)", "mouse_move": "mouse_move(65.2, 158.5)",
    "mouse_up": "mouse_up(250, 120)", "mouse_down": "mouse_down(140.2, 580.1)",
    "mouse_click": "mouse_click(887.2, 68)", "mouse_dblclick": "mouse_dblclick(5, 236)",
    "mouse_drag_and_drop": "mouse_drag_and_drop(10.7, 325, 235.6, 24.54)",
    "mouse_upload_file": "mouse_upload_file(132.1, 547, 'receipt.pdf')",
    "keyboard_down": "keyboard_down('Shift')", "keyboard_up": "keyboard_up('Shift')",
    "keyboard_type": "keyboard_type('Hello world!')", "keyboard_insert_text": "keyboard_insert_text('Hello')",
    "tab_close": "tab_close()", "tab_focus": "tab_focus(0)", "new_tab": "new_tab()",
}
BUTTONS = ("left", "middle", "right")
MODIFIERS = ("Alt", "Control", "ControlOrMeta", "Meta", "Shift")
MULTI_ACTION = "Received a multi-action, only single-actions are allowed."  # (BrowserGym's own words)


def _literal(node: ast.AST, name: str):
    """A Python literal argument (str, int, float, bool, None, or a list/tuple of those)."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ActionError(f"{name}(): arguments must be plain literals such as '12' or 500, "
                          f"e.g. {_BGYM_EXAMPLES.get(name, name + '()')}") from None


def _calls(module: ast.Module) -> bool:
    """Whether every statement of ``module`` is a bare function call (several BrowserGym actions)."""
    return all(isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) for st in module.body)


def _parse_browsergym(s: str) -> Action:
    try:
        module = ast.parse(s.strip(), mode="exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        msg = getattr(exc, "msg", None) or "not a Python call"
        raise ActionError(f"not a valid BrowserGym action ({msg}); expected a call such as click('12') "
                          f"or fill('12', 'text')") from None
    if len(module.body) > 1:
        if _calls(module):
            raise ActionError(MULTI_ACTION)
        raise ActionError("a BrowserGym action is one function call such as click('12'); "
                          "several actions at once are not supported")
    call = module.body[0].value if module.body and isinstance(module.body[0], ast.Expr) else None
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise ActionError("not a BrowserGym action: expected one function call such as click('12') "
                          "or fill('12', 'text')")
    name = call.func.id
    if name not in _BGYM_SIGNATURES:
        raise ActionError(f"unknown BrowserGym action {name}(); expected one of " + ", ".join(_BGYM_LISTED))
    params, defaults = _BGYM_SIGNATURES[name]
    example = _BGYM_EXAMPLES[name]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise ActionError(f"{name}(): no * or ** arguments, e.g. {example}")
    if len(call.args) > len(params):
        raise ActionError(f"{name}() takes at most {len(params)} argument(s), got {len(call.args)}; e.g. {example}")
    args: dict = {}
    for pname, node in zip(params, call.args):
        args[pname] = _literal(node, name)
    for kw in call.keywords:
        if kw.arg not in params:
            raise ActionError(f"{name}() has no argument {kw.arg!r}; e.g. {example}")
        if kw.arg in args:
            raise ActionError(f"{name}() got {kw.arg!r} twice; e.g. {example}")
        args[kw.arg] = _literal(kw.value, name)
    for pname in params:
        if pname not in args:
            if pname not in defaults:
                raise ActionError(f"{name}() is missing {pname!r}; e.g. {example}")
            args[pname] = defaults[pname]

    def bid(pname: str = "bid") -> str:
        v = args[pname]
        if isinstance(v, bool) or not isinstance(v, (str, int)) or str(v).strip() == "":
            raise ActionError(f"{name}(): the element id must be a string such as '12', e.g. {example}")
        return str(v).strip()

    def string(pname: str, *, allow_empty: bool = True) -> str:
        v = args[pname]
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise ActionError(f"{name}(): {pname} must be a string, e.g. {example}")
        v = str(v)
        if not allow_empty and not v.strip():
            raise ActionError(f"{name}(): {pname} must not be empty, e.g. {example}")
        return v

    def number(pname: str) -> int:
        v = args[pname]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
            raise ActionError(f"{name}(): {pname} must be a number, e.g. {example}")
        return int(round(v))

    def point(*names: str) -> dict:  # (coordinates as given: BrowserGym takes fractions of a pixel)
        out = {}
        for p in names:
            number(p)
            v = args[p]
            out[p] = int(v) if float(v).is_integer() else float(v)
        return out

    def button() -> dict:
        if args["button"] not in BUTTONS:
            raise ActionError(f"{name}(): button must be one of {', '.join(BUTTONS)}, got {args['button']!r}")
        return {} if args["button"] == "left" else {"button": args["button"]}

    def modifiers() -> dict:
        mods = args["modifiers"] or ()
        mods = [mods] if isinstance(mods, str) else mods
        if not isinstance(mods, (list, tuple)) or any(m not in MODIFIERS for m in mods):
            raise ActionError(f"{name}(): modifiers must be a list of {', '.join(MODIFIERS)}, "
                              f"got {args['modifiers']!r}")
        return {"modifiers": list(mods)} if mods else {}

    def key(pname: str, *, combination: bool) -> str:
        k = string(pname, allow_empty=False)
        problem = key_problem(k, combination=combination)
        if problem:
            raise ActionError(f"{name}(): {problem}, e.g. {example}")
        return k

    def files() -> list[str]:
        v = args["file"]
        v = [v] if isinstance(v, str) else v
        if not isinstance(v, (list, tuple)) or any(not isinstance(f, str) or not f.strip() for f in v):
            raise ActionError(f"{name}(): file must be a path or a list of paths, e.g. {example}")
        return [str(f) for f in v]

    kind = _BGYM_KIND.get(name, name)
    if name in ("click", "dblclick"):
        extra = {**button(), **modifiers()}
        return Action(kind, bid=bid(), args=extra or None)
    if name == "fill":
        auto = args["enable_autocomplete_menu"]
        if not isinstance(auto, bool):
            raise ActionError("fill(): enable_autocomplete_menu must be True or False, e.g. fill('12', 'Montre', True)")
        return Action("fill", bid=bid(), text=string("value"), args={"autocomplete": True} if auto else None)
    if name == "select_option":
        opts = args["options"]
        if isinstance(opts, (list, tuple)):
            if not opts:
                raise ActionError("select_option(): give at least one option, e.g. select_option('12', 'value')")
            if any(isinstance(o, bool) or not isinstance(o, (str, int, float)) for o in opts):
                raise ActionError("select_option(): options must be strings, e.g. select_option('12', ['red', 'blue'])")
            many = [str(o) for o in opts]
            return Action("select", bid=bid(), value=many[0], args={"options": many} if len(many) > 1 else None)
        return Action("select", bid=bid(), value=string("options"))
    if name == "scroll":
        dx, dy = number("delta_x"), number("delta_y")
        if dx and dy or not (dx or dy):  # both axes, or none: BrowserGym's wheel as given
            return Action("scroll", args={"delta_x": dx, "delta_y": dy})
        if dy:
            return Action("scroll", direction="down" if dy > 0 else "up", amount=abs(dy))
        return Action("scroll", direction="right" if dx > 0 else "left", amount=abs(dx))
    if name in ("go_back", "go_forward", "new_tab", "tab_close"):
        return Action(name)
    if name == "goto":
        return Action("goto", url=string("url", allow_empty=False).strip())
    if name == "noop":
        wait = args["wait_ms"]
        if wait is None:
            return Action("noop")
        ms = number("wait_ms")
        if ms < 0:
            raise ActionError("noop(): the wait must not be negative, e.g. noop(1000)")
        return Action("noop", amount=ms)
    if name == "send_msg_to_user":
        return Action("answer", text=string("text"))
    if name == "report_infeasible":
        return Action("infeasible", text=string("reason"))
    if name in ("hover", "focus", "clear"):
        return Action(kind, bid=bid())
    if name == "press":
        return Action("press", bid=bid(), key=key("key_comb", combination=True).strip())
    if name == "history_search":
        return Action("history_search", text=string("query", allow_empty=False).strip())
    if name == "keyboard_press":
        return Action("press", key=key("key", combination=True).strip())
    if name in ("keyboard_down", "keyboard_up"):
        return Action(kind, key=key("key", combination=False))
    if name in ("keyboard_type", "keyboard_insert_text"):
        return Action(kind, text=string("text"))
    if name == "drag_and_drop":
        return Action(kind, bid=bid("from_bid"), args={"to_bid": bid("to_bid")})
    if name == "upload_file":
        return Action(kind, bid=bid(), args={"files": files()})
    if name == "scroll_at":
        return Action(kind, args=point("x", "y", "dx", "dy"))
    if name == "mouse_move":
        return Action(kind, args=point("x", "y"))
    if name in ("mouse_up", "mouse_down", "mouse_click", "mouse_dblclick"):
        return Action(kind, args={**point("x", "y"), **button()})
    if name == "mouse_drag_and_drop":
        return Action(kind, args=point("from_x", "from_y", "to_x", "to_y"))
    if name == "mouse_upload_file":
        return Action(kind, args={**point("x", "y"), "files": files()})
    # tab_focus
    index = args["index"]
    if isinstance(index, bool) or not isinstance(index, int):
        raise ActionError(f"tab_focus(): index must be a whole number, e.g. {example}")
    return Action(kind, args={"index": index})


def browsergym_name(action: Action) -> str:
    """The BrowserGym action ``action`` is (``click``, ``keyboard_press``, ...; ``history_search`` is ours)."""
    k = action.kind
    if k == "press":
        return "press" if action.bid is not None else "keyboard_press"
    return {"select": "select_option", "answer": "send_msg_to_user", "infeasible": "report_infeasible"}.get(k, k)


def text_refusal(action: Action) -> str | None:
    """Why the text backend cannot do ``action`` (one line), or None when it can."""
    name = browsergym_name(action)
    if name in TEXT_REFUSED:
        what = ("one page, no tabs" if name in BROWSERGYM_SUBSETS["tab"] else
                "no pointer or keyboard focus, no layout" if name in BROWSERGYM_SUBSETS["coord"] else
                "no file chooser" if name == "upload_file" else "no pointer, no layout")
        return f"{name}() needs the browser backend (the text backend has {what})"
    if action.kind == "click" and action.args:
        return "click() with another button or modifiers needs the browser backend (the text backend has one page)"
    # (a fill with the autocomplete menu is honoured as a fill: the field gets the value; no script
    # runs to open a menu, as none runs for any other input)
    return None


# The roles of elements other than <input> and <textarea> a fill (or clear) can type into: [contenteditable].
_TYPABLE_ROLES = ("textbox", "searchbox", "combobox")


def target_problem(action: Action, target: dict) -> str | None:
    """What is wrong with ``action`` on ``target`` (the observation's element dict: tag, role, options,
    disabled), in one line; None when nothing is. Both backends ask before acting, so the same invalid
    action gives the same error in each (where a browser would time out waiting, say)."""
    k, bid = action.kind, action.bid
    tag = target.get("tag")
    name = browsergym_name(action)
    if k in ("fill", "clear", "select") and target.get("disabled"):
        return f"{name}(): element {bid} is disabled"
    if k in ("fill", "clear"):
        if tag == "input" and ("checked" in target or target.get("role") == "button"):
            return f"{name}(): element {bid} is an input that cannot be filled (a checkbox, radio or button)"
        if tag == "select" or tag not in ("input", "textarea") and target.get("role") not in _TYPABLE_ROLES:
            return f"{name}(): element {bid} is not an <input>, <textarea> or [contenteditable] element"
    if k == "select":
        if tag != "select":
            return f"select_option(): element {bid} is not a <select> element"
        wanted = list((action.args or {}).get("options") or [action.value])
        options = target.get("options") or []
        for w in wanted:
            if not any(o.get("value") == w or o.get("label") == w for o in options):
                shown = ", ".join(repr(o.get("value")) for o in options[:20]) + (", ..." if len(options) > 20 else "")
                return f"select_option(): element {bid} has no option {w!r} (options: {shown or 'none'})"
        if len(wanted) > 1 and not target.get("multiple"):
            return f"select_option(): element {bid} takes one option, got {len(wanted)}"
    return None


# ---------------------------------------------------------------- keys
def _split_keys(combination: str) -> list[str]:
    """A key combination's keys as Playwright splits them (``Control++`` is Control and ``+``)."""
    keys, building = [], ""
    for ch in combination:
        if ch == "+" and building:
            keys.append(building)
            building = ""
        else:
            building += ch
    keys.append(building)
    return keys


def key_problem(keys: str, *, combination: bool = True) -> str | None:
    """Why a key name (or, with ``combination``, a combination such as ``Control+a``) is not one
    Playwright's keyboard knows, in a few words; None when it is."""
    from webfreeze.simulator.keys import KEYS

    for k in _split_keys(keys) if combination else [keys]:
        if k not in KEYS:
            return f"unknown key {k!r} (keys are named as in KeyboardEvent.key: Enter, Tab, ArrowDown, a, ...)"
    return None


# ---------------------------------------------------------------- WebVoyager / WebArxiv
_VOYAGER_WORDS = ("Click", "Type", "Scroll", "Wait", "GoBack", "Google", "ANSWER", "HistorySearch")
_ID = r"([A-Za-z]*\d+)"
_VOYAGER_FORMS = ("Click [N]", "Type [N]; text", "Scroll [WINDOW]; up|down", "Scroll [N]; up|down", "Wait",
                  "GoBack", "Google", "ANSWER; text")
# The forms an error message lists: the page actions only. The history search is offered to agents
# that use it (agents/prompts/schemes-v1); error texts stay as they were, since they reach prompts
# (an LLM agent's retry quotes them) and a recorded cassette's requests must not change.


def _unbracket(text: str) -> str:
    text = text.strip()
    if text.startswith("[") and text.endswith("]") and text.count("[") == 1 and text.count("]") == 1:
        return text[1:-1].strip()
    return text


def _parse_webvoyager(s: str) -> Action:
    s = s.strip()
    m = re.match(r"^([A-Za-z]+)\b\s*(.*)$", s, re.S)
    if not m:
        raise ActionError("not a WebVoyager action; expected one of " + ", ".join(_VOYAGER_FORMS))
    word, rest = m.group(1), m.group(2).strip()
    lower = word.lower()
    if lower == "click":
        m = re.fullmatch(r"\[?\s*" + _ID + r"\s*\]?", rest)
        if not m:
            raise ActionError(f"Click needs an element number, e.g. Click [12] (got {s!r})")
        return Action("click", bid=m.group(1))
    if lower == "type":
        m = re.fullmatch(r"\[?\s*" + _ID + r"\s*\]?\s*(?:;|\s)\s*(.*)", rest, re.S)
        if not m:
            raise ActionError(f"Type needs an element number and text, e.g. Type [12]; hello (got {s!r})")
        return Action("fill", bid=m.group(1), text=_unbracket(m.group(2)), key="Enter")
    if lower == "scroll":
        m = re.fullmatch(r"\[?\s*(WINDOW|window|Window|[A-Za-z]*\d+)\s*\]?\s*(?:;|\s)\s*\[?\s*([A-Za-z]+)\s*\]?", rest)
        if not m or m.group(2).lower() not in ("up", "down"):
            raise ActionError(f"Scroll needs a target and a direction, e.g. Scroll [WINDOW]; down or "
                              f"Scroll [12]; up (got {s!r})")
        target = None if m.group(1).upper() == "WINDOW" else m.group(1)
        return Action("scroll", bid=target, direction=m.group(2).lower())
    if lower == "wait":
        if rest:
            raise ActionError(f"Wait takes no argument (got {s!r})")
        return Action("noop")
    if lower == "goback":
        if rest:
            raise ActionError(f"GoBack takes no argument (got {s!r})")
        return Action("go_back")
    if lower == "google":
        if rest:
            raise ActionError(f"Google takes no argument (got {s!r})")
        return Action("goto", url=GOOGLE_URL)
    if lower == "answer":
        m = re.fullmatch(r"(?:;|:)?\s*(.*)", rest, re.S)
        return Action("answer", text=_unbracket(m.group(1)))
    if lower == "historysearch":
        m = re.fullmatch(r"(?:;|:)?\s*(.*)", rest, re.S)
        query = _unbracket(m.group(1)).strip()
        if not query:
            raise ActionError(f"HistorySearch needs a query, e.g. HistorySearch; running shoes (got {s!r})")
        return Action("history_search", text=query)
    raise ActionError(f"unknown WebVoyager action {word!r}; expected one of " + ", ".join(_VOYAGER_FORMS))


# ---------------------------------------------------------------- WebArena
_ARENA_WORDS = ("click", "type", "hover", "press", "scroll", "goto", "go_back", "go_forward", "stop",
                "new_tab", "tab_focus", "close_tab", "history_search")
_ARENA_FORMS = ("click [id]", "type [id] [text] [0|1]", "hover [id]", "press [key]", "scroll [up|down]",
                "goto [url]", "go_back", "go_forward", "stop [answer]")


def _parse_webarena(s: str) -> Action:
    s = s.strip()
    m = re.match(r"^([A-Za-z_]+)(.*)$", s, re.S)
    if not m:
        raise ActionError("not a WebArena action; expected one of " + ", ".join(_ARENA_FORMS))
    word, rest = m.group(1).lower(), m.group(2).strip()
    if word in ("new_tab", "tab_focus", "close_tab"):
        raise ActionError(f"{word} is not supported: the environment has one page; use goto [url] or go_back")
    if word in ("click", "hover"):
        m = re.fullmatch(r"\[\s*" + _ID + r"\s*\]", rest)
        if not m:
            raise ActionError(f"{word} needs an element id in brackets, e.g. {word} [12] (got {s!r})")
        return Action(word, bid=m.group(1))
    if word == "type":
        m = re.fullmatch(r"\[\s*" + _ID + r"\s*\]\s*\[(.*)\]\s*\[\s*([01])\s*\]", rest, re.S)
        if m:
            return Action("fill", bid=m.group(1), text=m.group(2), key="Enter" if m.group(3) == "1" else None)
        m = re.fullmatch(r"\[\s*" + _ID + r"\s*\]\s*\[(.*)\]", rest, re.S)
        if not m:
            raise ActionError(f"type needs an element id and text in brackets, e.g. type [12] [hello] [1] (got {s!r})")
        return Action("fill", bid=m.group(1), text=m.group(2), key="Enter")
    if word == "press":
        m = re.fullmatch(r"\[\s*([^\]]+?)\s*\]", rest)
        if not m:
            raise ActionError(f"press needs a key in brackets, e.g. press [Enter] or press [Control+a] (got {s!r})")
        return Action("press", key=m.group(1))
    if word == "scroll":
        m = re.fullmatch(r"\[\s*(?:direction\s*=\s*)?([A-Za-z]+)\s*\]", rest)
        if not m or m.group(1).lower() not in ("up", "down"):
            raise ActionError(f"scroll needs a direction, e.g. scroll [down] or scroll [up] (got {s!r})")
        return Action("scroll", direction=m.group(1).lower())
    if word == "goto":
        m = re.fullmatch(r"\[\s*(\S[^\]]*?)\s*\]", rest)
        if not m:
            raise ActionError(f"goto needs a URL in brackets, e.g. goto [http://example.com/] (got {s!r})")
        return Action("goto", url=m.group(1))
    if word in ("go_back", "go_forward"):
        if rest:
            raise ActionError(f"{word} takes no argument (got {s!r})")
        return Action(word)
    if word == "stop":
        if not rest:
            return Action("answer", text="")
        m = re.fullmatch(r"\[(.*)\]", rest, re.S)
        if not m:
            raise ActionError(f"stop needs the answer in brackets, e.g. stop [42] (got {s!r})")
        return Action("answer", text=m.group(1).strip())
    if word == "history_search":
        m = re.fullmatch(r"\[(.*)\]", rest, re.S)
        if not m or not m.group(1).strip():
            raise ActionError(f"history_search needs a query in brackets, e.g. history_search [running shoes] (got {s!r})")
        return Action("history_search", text=m.group(1).strip())
    raise ActionError(f"unknown WebArena action {word!r}; expected one of " + ", ".join(_ARENA_FORMS))


_PARSERS = {"browsergym": _parse_browsergym, "webvoyager": _parse_webvoyager, "webarena": _parse_webarena}


def normalize_dialect(dialect: str | None) -> str | None:
    if dialect is None:
        return None
    key = dialect.strip().lower().replace("-", "").replace("_", "")
    if key not in DIALECT_ALIASES:
        raise ActionError(f"unknown action dialect {dialect!r}; expected one of {', '.join(DIALECTS)} (or webarxiv)")
    return DIALECT_ALIASES[key]


# ---------------------------------------------------------------- public API
def parse_action(text: str, dialect: str | None = None) -> Action:
    """Parse an agent's output (the action alone or wrapped in prose) into an :class:`Action`.

    ``dialect`` forces one of ``browsergym``, ``webvoyager`` (``webarxiv``) or ``webarena``;
    ``None`` detects it. Raises :class:`ActionError` with one line saying what was expected.
    """
    if not isinstance(text, str):
        raise ActionError(f"an action must be a string, got {type(text).__name__}")
    forced = normalize_dialect(dialect)
    if not text.strip():
        raise ActionError("empty action; expected e.g. click('12'), Click [12] or click [12]")
    whole = text.strip()
    detected = forced or detect_dialect(whole)
    if detected:
        # The whole output may be the action itself, even when its text holds "Action:" or a fence.
        try:
            return replace(_PARSERS[detected](whole), dialect=detected, raw=text)
        except ActionError as exc:
            if str(exc) == MULTI_ACTION:  # several actions: refused, never one of them picked
                raise
    action_text, thought = _split(text)
    if not action_text:
        raise ActionError("no action found after 'Action:'; expected e.g. click('12'), Click [12] or click [12]")
    found = forced or detect_dialect(action_text)
    if found is None:
        first = action_text.splitlines()[0][:60]
        raise ActionError(f"no action recognised in {first!r}; expected e.g. click('12') (BrowserGym), "
                          f"Click [12] (WebVoyager) or click [12] (WebArena)")
    action = _PARSERS[found](action_text)
    return replace(action, dialect=found, raw=text, thought=thought)


def try_parse_exact(action_text: str, dialect: str) -> tuple[Action | None, str | None]:
    """Parse ``action_text`` as exactly one action of ``dialect`` (no surrounding prose)."""
    try:
        return replace(_PARSERS[dialect](action_text), dialect=dialect, raw=action_text), None
    except ActionError as exc:
        return None, str(exc)


def try_parse(text, dialect: str | None = None) -> tuple[Action | None, str | None]:
    """``(action, None)`` or ``(None, one-line error)``; never raises."""
    try:
        return parse_action(text, dialect), None
    except ActionError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - the contract is to never raise on agent input
        return None, f"unparseable action ({type(exc).__name__}: {exc})"


def _pyrepr(s: str) -> str:
    return repr(str(s))


def _bracket_safe(text: str, what: str, dialect: str) -> str:
    if "\n" in text:
        raise ActionError(f"{what} with a line break cannot be written in the {dialect} dialect")
    return text


def format_action(action: Action, dialect: str) -> str:
    """``action`` written in ``dialect``; raises :class:`ActionError` when the dialect has no such action.

    Where a dialect cannot say everything, the closest form is written: a ``fill`` loses its Enter in
    BrowserGym (WebVoyager's ``Type`` always presses it), a scroll without an amount becomes
    ``DEFAULT_SCROLL_PX`` pixels in BrowserGym, and amounts are dropped in the bracket dialects.
    """
    d = normalize_dialect(dialect)
    if d is None:
        raise ActionError("format_action needs a dialect")
    k = action.kind
    if d == "browsergym":
        more = action.args or {}
        if k in ("click", "dblclick"):
            extra = "".join(f", {n}={more[n]!r}" for n in ("button", "modifiers") if n in more)
            return f"{k}({_pyrepr(action.bid)}{extra})"
        if k == "fill":
            auto = ", True" if more.get("autocomplete") else ""
            return f"fill({_pyrepr(action.bid)}, {_pyrepr(action.text or '')}{auto})"
        if k == "select":
            if "options" in more:
                return f"select_option({_pyrepr(action.bid)}, {[str(o) for o in more['options']]!r})"
            return f"select_option({_pyrepr(action.bid)}, {_pyrepr(action.value or '')})"
        if k in ("focus", "clear"):
            return f"{k}({_pyrepr(action.bid)})"
        if k == "drag_and_drop":
            return f"drag_and_drop({_pyrepr(action.bid)}, {_pyrepr(more.get('to_bid'))})"
        if k == "upload_file":
            return f"upload_file({_pyrepr(action.bid)}, {list(more.get('files') or [])!r})"
        if k in ("keyboard_down", "keyboard_up"):
            return f"{k}({_pyrepr(action.key)})"
        if k in ("keyboard_type", "keyboard_insert_text"):
            return f"{k}({_pyrepr(action.text or '')})"
        if k in ("new_tab", "tab_close"):
            return f"{k}()"
        if k == "tab_focus":
            return f"tab_focus({int(more.get('index', 0))})"
        if k in _BGYM_SIGNATURES and k.startswith(("mouse_", "scroll_at")):
            params = _BGYM_SIGNATURES[k][0]
            values = [repr(more[p]) if p == "button" else (repr(list(more["files"])) if p == "file" else str(more[p]))
                      for p in params if p in more or p == "file"]
            return f"{k}({', '.join(values)})"
        if k == "scroll" and "delta_x" in more:
            return f"scroll({more['delta_x']}, {more['delta_y']})"
        if k == "scroll":
            if action.bid is not None:
                raise ActionError("BrowserGym's scroll() scrolls the page, not an element")
            px = action.amount if action.amount is not None else DEFAULT_SCROLL_PX
            dx, dy = {"down": (0, px), "up": (0, -px), "right": (px, 0), "left": (-px, 0)}[action.direction or "down"]
            return f"scroll({dx}, {dy})"
        if k in ("go_back", "go_forward"):
            return f"{k}()"
        if k == "goto":
            return f"goto({_pyrepr(action.url)})"
        if k == "noop":
            return "noop()" if action.amount is None else f"noop({action.amount})"
        if k == "answer":
            return f"send_msg_to_user({_pyrepr(action.text or '')})"
        if k == "infeasible":
            return f"report_infeasible({_pyrepr(action.text or '')})"
        if k == "hover":
            return f"hover({_pyrepr(action.bid)})"
        if k == "press":
            if action.bid is None:
                return f"keyboard_press({_pyrepr(action.key)})"
            return f"press({_pyrepr(action.bid)}, {_pyrepr(action.key)})"
        if k == "history_search":
            return f"history_search({_pyrepr(action.text or '')})"
    if d == "webvoyager":
        if k == "click":
            return f"Click [{action.bid}]"
        if k == "fill":
            return f"Type [{action.bid}]; {_bracket_safe(action.text or '', 'text', d)}"
        if k == "scroll":
            if action.direction not in ("up", "down", None):
                raise ActionError("WebVoyager scrolls up or down only")
            return f"Scroll [{action.bid or 'WINDOW'}]; {action.direction or 'down'}"
        if k == "noop":
            return "Wait"
        if k == "go_back":
            return "GoBack"
        if k == "goto" and action.url == GOOGLE_URL:
            return "Google"
        if k == "answer":
            return f"ANSWER; {_bracket_safe(action.text or '', 'an answer', d)}"
        if k == "history_search":
            return f"HistorySearch; {_bracket_safe(action.text or '', 'a query', d)}"
        raise ActionError(f"WebVoyager has no {k} action; it has Click, Type, Scroll, Wait, GoBack, Google, ANSWER")
    if d == "webarena":
        if k in ("click", "hover"):
            return f"{k} [{action.bid}]"
        if k == "fill":
            return f"type [{action.bid}] [{_bracket_safe(action.text or '', 'text', d)}] [{1 if action.key == 'Enter' else 0}]"
        if k == "press":
            return f"press [{action.key}]"
        if k == "scroll":
            if action.bid is not None or action.direction not in ("up", "down", None):
                raise ActionError("WebArena scrolls the page up or down only")
            return f"scroll [{action.direction or 'down'}]"
        if k == "goto":
            return f"goto [{action.url}]"
        if k in ("go_back", "go_forward"):
            return k
        if k == "answer":
            return f"stop [{_bracket_safe(action.text or '', 'an answer', d)}]"
        if k == "infeasible":
            return "stop [N/A]"
        if k == "history_search":
            return f"history_search [{_bracket_safe(action.text or '', 'a query', d)}]"
        raise ActionError(f"WebArena has no {k} action")
    raise ActionError(f"BrowserGym has no {k} action")  # unreachable: every kind is covered above
