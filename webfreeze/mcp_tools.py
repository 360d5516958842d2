"""The tools of ``webfreeze mcp`` (:mod:`webfreeze.mcp_server` serves them): Playwright MCP's browser
tools, with its tool names, argument shapes and answers (``@playwright/mcp`` 0.0.83, its default
tools and the ``vision`` ones that act: ``browser_navigate``, ``browser_click``, ``browser_snapshot``,
...), for every action our environment can do, beside our task tools (``list_tasks``,
``start_task``, ``answer``). An element is named by the ``ref`` the page snapshot gives it (our
element id), an unknown ref is a tool error, and inputs and answers are bounded (below; documented
in docs/agents.md).

Imported only by ``webfreeze mcp`` (it needs the MCP SDK, the ``mcp`` extra). No
``from __future__ import annotations`` here: FastMCP reads the tools' annotations as objects.
"""

import functools
import json
from typing import Annotated, Literal

from mcp.server.fastmcp import FastMCP, Image
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, ConfigDict, Field

from webfreeze.common.errors import WebfreezeError
from webfreeze.common.text import one_line
from webfreeze.mcp_server import INSTRUCTIONS, SERVER_NAME, MCPError, Session
from webfreeze.simulator.actions import Action

# The @playwright/mcp release whose tool names, arguments and answers the browser tools follow
# (tests/agents/test_mcp_schemas.py holds them against its own tools/list).
PLAYWRIGHT_MCP_VERSION = "0.0.83"
# Bounds of what a client sends and gets (docs/agents.md): a longer input is refused in one line, a
# longer answer cut (saying so).
MAX_TEXT = 10_000  # characters typed (browser_type, a browser_fill_form field) or answered (answer)
MAX_URL = 4_096
MAX_VALUES = 100  # options of one browser_select_option, fields of one browser_fill_form
MAX_VALUE = 1_000  # characters of one option value
MAX_KEY = 64
MAX_WAIT_S = 30  # browser_wait_for's time (Playwright MCP's own bound)
MAX_ANSWER = 200_000  # characters of one tool's answer (a page snapshot, mostly)
TARGET = "Exact target element reference from the page snapshot, or a unique element selector"
ELEMENT = "Human-readable element description used to obtain permission to interact with the element"


Target = Annotated[str, Field(description=TARGET)]
Element = Annotated[str, Field(description=ELEMENT)]
Button = Literal["left", "right", "middle"]
Modifier = Literal["Alt", "Control", "ControlOrMeta", "Meta", "Shift"]


class FormField(BaseModel):
    """One field of ``browser_fill_form`` (Playwright MCP's shape)."""

    model_config = ConfigDict(extra="forbid")
    target: Target
    name: Annotated[str, Field(description="Human-readable field name")]
    type: Annotated[Literal["textbox", "checkbox", "radio", "combobox", "slider"],
                    Field(description="Type of the field")]
    value: Annotated[str, Field(description="Value to fill in the field. If the field is a checkbox, the value should "
                                            "be `true` or `false`. If the field is a combobox, the value should be the "
                                            "text of the option.")]
    element: Element = ""


class _Failed(MCPError):
    """An action that failed: the tool answers its text (the error, then the page) as an error result."""


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], isError=True)


# Arguments Playwright MCP's schemas list as required that its server fills in when a call leaves
# them out (zod defaults): a call without them is answered as Playwright MCP answers it.
PLAYWRIGHT_DEFAULTS = {"browser_take_screenshot": {"scale": "css"}}


def tool_caller(server: FastMCP):
    """``server``'s public ``call_tool`` as the protocol's handler, with Playwright MCP's defaults
    (PLAYWRIGHT_DEFAULTS) and a call the SDK cannot make (arguments of the wrong shape, an unknown
    tool) answered as our tools answer theirs: an error result, ``### Error``, then ``Error: `` and one
    line naming the tool and each bad argument, instead of the SDK's text with its links."""
    from mcp.server.fastmcp.exceptions import ToolError
    from pydantic import ValidationError

    async def call_tool(name: str, arguments: dict | None):
        arguments = {**PLAYWRIGHT_DEFAULTS.get(name, {}), **(arguments or {})}
        try:
            return await server.call_tool(name, arguments)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError) and cause.title == f"{name}Arguments":  # (FastMCP's model of them)
                errors = cause.errors()
                said = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in errors[:5])
                more = f"; and {len(errors) - 5} more" if len(errors) > 5 else ""
                return _error(f"### Error\nError: {name}: {one_line(said, 500)}{more}")
            said = one_line(exc, 500) or f"Error executing tool {name}"
            if said.endswith(":") and cause is not None:  # (an exception that says nothing: its name)
                said += f" {type(cause).__name__}"
            return _error(f"### Error\nError: {said}")
    return call_tool


def _bounded(what: str, text: str, limit: int) -> str:
    if len(text) > limit:
        raise MCPError(f"{what} is {len(text)} characters long; at most {limit} are taken")
    return text


def _cut(text: str) -> str:
    if len(text) <= MAX_ANSWER:
        return text
    return text[:MAX_ANSWER] + f"\n... (answer cut at {MAX_ANSWER} characters; the page is longer)"


def build_server(session: Session):
    """The FastMCP server whose tools drive ``session``: Playwright MCP's browser tools (their
    names, arguments and answers) for every action the environment can do, and the task tools
    ``list_tasks``, ``start_task`` and ``answer``. (The SDK is imported here: only this command
    needs it, and every other command starts faster without it.)"""
    server = FastMCP(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    def guarded(fn):
        """A tool whose errors reach the client as an error result in Playwright MCP's words
        (``### Error``, then ``Error: `` and one line, then the page if an action failed), never a
        traceback; an answer longer than MAX_ANSWER is cut."""
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                out = fn(*args, **kwargs)
            except _Failed as exc:
                return _error(_cut(str(exc)))
            except WebfreezeError as exc:
                return _error(f"### Error\nError: {exc}")
            return _cut(out) if isinstance(out, str) else out
        return wrapper

    def step(action: Action) -> str:
        answer, error = session.step(action)
        if error:
            raise _Failed(f"### Error\nError: {error}\n" + answer)
        return answer

    @server.tool(structured_output=False)
    @guarded
    def list_tasks() -> str:
        """The tasks of this run: id, category, instruction, start URL and status (todo, playing, done)."""
        return json.dumps(session.list_tasks(), indent=1, ensure_ascii=False)

    @server.tool(structured_output=False)
    @guarded
    def start_task(task_id: str | None = None) -> str:
        """Start a task (default: the next one not played): opens its start page and returns the
        instruction and the page snapshot."""
        return session.start_task(task_id)

    @server.tool(structured_output=False)
    @guarded
    def answer(text: str) -> str:
        """Give the task's answer: this ends the episode (it is recorded and scored later)."""
        return step(Action("answer", text=_bounded("answer: text", text, MAX_TEXT)))

    @server.tool(structured_output=False)
    @guarded
    def browser_navigate(url: Annotated[str, Field(description="The URL to navigate to")]) -> str:
        """Navigate to a URL"""
        return step(Action("goto", url=_bounded("browser_navigate: url", url, MAX_URL)))

    @server.tool(structured_output=False)
    @guarded
    def browser_navigate_back() -> str:
        """Go back to the previous page in the history"""
        return step(Action("go_back"))

    @server.tool(structured_output=False)
    @guarded
    def browser_click(target: Target, element: Element = "",
                      doubleClick: Annotated[bool, Field(description="Whether to perform a double click instead "
                                                                     "of a single click")] = False,
                      button: Annotated[Button, Field(description="Button to click, defaults to left")] = "left",
                      modifiers: Annotated[list[Modifier],
                                           Field(description="Modifier keys to press")] = []) -> str:  # noqa: B006
        """Perform click on a web page"""
        ref = session.ref(target)
        extra = {**({"button": button} if button != "left" else {}),
                 **({"modifiers": list(modifiers)} if modifiers else {})}
        return step(Action("dblclick" if doubleClick else "click", bid=ref, args=extra or None))

    @server.tool(structured_output=False)
    @guarded
    def browser_type(target: Target, text: Annotated[str, Field(description="Text to type into the element")],
                     element: Element = "",
                     submit: Annotated[bool, Field(description="Whether to submit entered text (press Enter "
                                                               "after)")] = False,
                     slowly: Annotated[bool, Field(description="Whether to type one character at a time. Useful for "
                                                               "triggering key handlers in the page. By default "
                                                               "entire text is filled in at once.")] = False) -> str:
        """Type text into editable element"""
        ref = session.ref(target)
        text = _bounded("browser_type: text", text, MAX_TEXT)
        answer = step(Action("fill", bid=ref, text=text, args={"autocomplete": True} if slowly else None))
        if submit and session.task_id is not None:  # (Enter only after typing that went through)
            answer = step(Action("press", bid=ref, key="Enter"))
        return answer

    @server.tool(structured_output=False)
    @guarded
    def browser_select_option(target: Target,
                              values: Annotated[list[str], Field(description="Array of values to select in the "
                                                                             "dropdown. This can be a single value or "
                                                                             "multiple values.")],
                              element: Element = "") -> str:
        """Select an option in a dropdown"""
        ref = session.ref(target)
        if not values or len(values) > MAX_VALUES:
            raise MCPError(f"browser_select_option: give 1 to {MAX_VALUES} values, not {len(values)}")
        for v in values:
            _bounded("browser_select_option: a value", v, MAX_VALUE)
        many = {"options": list(values)} if len(values) > 1 else None
        return step(Action("select", bid=ref, value=values[0], args=many))

    @server.tool(structured_output=False)
    @guarded
    def browser_press_key(key: Annotated[str, Field(description="Name of the key to press or a character to "
                                                                "generate, such as `ArrowLeft` or `a`")]) -> str:
        """Press a key on the keyboard"""
        return step(Action("press", key=_bounded("browser_press_key: key", key, MAX_KEY)))

    @server.tool(structured_output=False)
    @guarded
    def browser_hover(target: Target, element: Element = "") -> str:
        """Hover over element on page"""
        return step(Action("hover", bid=session.ref(target)))

    @server.tool(structured_output=False)
    @guarded
    def browser_drag(startTarget: Target, endTarget: Target,
                     startElement: Annotated[str, Field(description="Human-readable source element description used "
                                                                    "to obtain the permission to interact with the "
                                                                    "element")] = "",
                     endElement: Annotated[str, Field(description="Human-readable target element description used "
                                                                  "to obtain the permission to interact with the "
                                                                  "element")] = "") -> str:
        """Perform drag and drop between two elements"""
        start, end = session.ref(startTarget), session.ref(endTarget)
        return step(Action("drag_and_drop", bid=start, args={"to_bid": end}))

    @server.tool(structured_output=False)
    @guarded
    def browser_fill_form(fields: Annotated[list[FormField], Field(description="Fields to fill in")]) -> str:
        """Fill multiple form fields"""
        if not fields or len(fields) > MAX_VALUES:
            raise MCPError(f"browser_fill_form: give 1 to {MAX_VALUES} fields, not {len(fields)}")
        actions: list[Action | tuple[str, str, bool]] = []
        for f in fields:
            ref = session.ref(f.target)
            value = _bounded(f"browser_fill_form: the value of {f.name!r}", f.value, MAX_TEXT)
            if f.type in ("checkbox", "radio"):
                if value not in ("true", "false"):
                    raise MCPError(f"browser_fill_form: {f.name!r} is a {f.type}: its value is true or false")
                actions.append(("check", ref, value == "true"))
            elif f.type == "combobox":
                actions.append(Action("select", bid=ref, value=value))
            else:
                actions.append(Action("fill", bid=ref, text=value))
        answer = ""
        for a in actions:
            if isinstance(a, tuple):
                _, ref, wanted = a
                if session.checked(ref) == wanted:
                    continue
                a = Action("click", bid=ref)
            answer = step(a)
            if session.task_id is None:
                break
        return answer or session.snapshot()

    @server.tool(structured_output=False)
    @guarded
    def browser_snapshot(target: Annotated[str, Field(description=TARGET)] = "",
                         filename: Annotated[str, Field(description="Save snapshot to a file instead of returning it "
                                                                    "in the response.")] = "",
                         depth: Annotated[float, Field(description="Limit the depth of the snapshot tree")] = 0,
                         boxes: Annotated[bool, Field(description="Include each element's bounding "
                                                                  "box")] = False) -> str:
        """Capture accessibility snapshot of the current page, this is better than screenshot"""
        if filename:
            raise MCPError("browser_snapshot: filename is not available here (the snapshot is the answer)")
        if target or boxes:
            raise MCPError("browser_snapshot: target and boxes are not available here (the whole page is the answer)")
        return session.snapshot(depth=int(depth) if depth and depth > 0 else None)

    @server.tool(structured_output=False)
    @guarded
    def browser_take_screenshot(scale: Annotated[Literal["css", "device"],
                                                 Field(description="Image resolution scale.")],
                                type: Annotated[Literal["png", "jpeg", "webp"],
                                                Field(description="Image format for the screenshot.")] = "png",
                                element: Element = "", target: Annotated[str, Field(description=TARGET)] = "",
                                filename: Annotated[str, Field(description="File name to save the screenshot "
                                                                           "to.")] = "",
                                fullPage: Annotated[bool, Field(description="When true, takes a screenshot of the "
                                                                            "full scrollable page.")] = False):
        """Take a screenshot of the current page. You can't perform actions based on the screenshot, use
        browser_snapshot for actions."""
        if type != "png" or target or filename or fullPage:
            raise MCPError("browser_take_screenshot: only a PNG of the viewport, returned, is available here")
        return Image(data=session.screenshot(), format="png")

    @server.tool(structured_output=False)
    @guarded
    def browser_wait_for(time: Annotated[float, Field(description="The time to wait in seconds, at most 30")] = 0,
                         text: Annotated[str, Field(description="The text to wait for")] = "",
                         textGone: Annotated[str, Field(description="The text to wait for to disappear")] = "") -> str:
        """Wait for text to appear or disappear or a specified time to pass"""
        if not 0 <= time <= MAX_WAIT_S:
            raise MCPError(f"browser_wait_for: time is {time:g} s; 0 to {MAX_WAIT_S}")
        answer = step(Action("noop", amount=int(round(time * 1000)) or None))
        page = (session.obs or {}).get("axtree_text") or ""
        if text and text not in page:
            raise _Failed(f"### Error\nError: the text {text!r} is not on the page\n" + answer)
        if textGone and textGone in page:
            raise _Failed(f"### Error\nError: the text {textGone!r} is still on the page\n" + answer)
        return answer

    @server.tool(structured_output=False)
    @guarded
    def browser_tabs(action: Annotated[Literal["list", "new", "close", "select"], Field(description="Operation to "
                                                                                                     "perform")],
                     index: Annotated[float, Field(description="Tab index, used for close/select. If omitted "
                                                              "for close, current tab is closed.")] = -1,
                     url: Annotated[str, Field(description="URL to navigate to in the new tab, used for "
                                                           "new.")] = "") -> str:
        """List, create, close, or select a browser tab."""
        if action == "list":
            return session.snapshot()
        if action == "new":
            answer = step(Action("new_tab"))
            return step(Action("goto", url=_bounded("browser_tabs: url", url, MAX_URL))) if url else answer
        if index != -1 and (index < 0 or not float(index).is_integer()):
            raise MCPError(f"browser_tabs: index {index:g} is not a tab's (0, 1, ...)")
        if action == "close":
            if index != -1:
                step(Action("tab_focus", args={"index": int(index)}))
            return step(Action("tab_close"))
        if index == -1:
            raise MCPError("browser_tabs: select needs an index")
        return step(Action("tab_focus", args={"index": int(index)}))

    @server.tool(structured_output=False)
    @guarded
    def browser_mouse_wheel(deltaX: Annotated[float, Field(description="X delta")],
                            deltaY: Annotated[float, Field(description="Y delta")]) -> str:
        """Scroll mouse wheel"""
        return step(_wheel(int(round(deltaX)), int(round(deltaY))))

    @server.tool(structured_output=False)
    @guarded
    def browser_mouse_move_xy(x: Annotated[float, Field(description="X coordinate")],
                              y: Annotated[float, Field(description="Y coordinate")]) -> str:
        """Move mouse to a given position"""
        return step(Action("mouse_move", args={"x": int(round(x)), "y": int(round(y))}))

    @server.tool(structured_output=False)
    @guarded
    def browser_mouse_click_xy(x: Annotated[float, Field(description="X coordinate")],
                               y: Annotated[float, Field(description="Y coordinate")],
                               button: Annotated[Button, Field(description="Button to click, defaults to "
                                                                           "left")] = "left",
                               clickCount: Annotated[int, Field(description="Number of clicks, defaults to 1")] = 1,
                               delay: Annotated[float, Field(description="Time to wait between mouse down and mouse "
                                                                         "up in milliseconds, defaults to "
                                                                         "0")] = 0) -> str:
        """Click mouse button at a given position"""
        if clickCount not in (1, 2):
            raise MCPError("browser_mouse_click_xy: clickCount is 1 or 2 here")
        kind = "mouse_click" if clickCount == 1 else "mouse_dblclick"
        extra = {"button": button} if button != "left" else {}
        return step(Action(kind, args={"x": int(round(x)), "y": int(round(y)), **extra}))

    @server.tool(structured_output=False)
    @guarded
    def browser_mouse_drag_xy(startX: Annotated[float, Field(description="Start X coordinate")],
                              startY: Annotated[float, Field(description="Start Y coordinate")],
                              endX: Annotated[float, Field(description="End X coordinate")],
                              endY: Annotated[float, Field(description="End Y coordinate")]) -> str:
        """Drag left mouse button to a given position"""
        return step(Action("mouse_drag_and_drop", args={"from_x": int(round(startX)), "from_y": int(round(startY)),
                                                         "to_x": int(round(endX)), "to_y": int(round(endY))}))

    return server


def _wheel(dx: int, dy: int) -> Action:
    """``scroll(dx, dy)``, as the BrowserGym parser makes it (one axis: a direction and an amount)."""
    if dx and dy or not (dx or dy):
        return Action("scroll", args={"delta_x": dx, "delta_y": dy})
    if dy:
        return Action("scroll", direction="down" if dy > 0 else "up", amount=abs(dy))
    return Action("scroll", direction="right" if dx > 0 else "left", amount=abs(dx))
