"""``webfreeze mcp``'s browser tools against Playwright MCP's own: the ``tools/list`` of the pinned
``@playwright/mcp`` (installed with npm into .venv/playwright-mcp by scripts/bootstrap.sh, or
WEBFREEZE_PLAYWRIGHT_MCP naming its folder; skipped, saying so, without it), read by running it
over stdio, gives every one of our browser tools the same name, the same argument names, types,
enums and required ones; and the bounds on inputs and answers hold (one-line refusals)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import pytest

from webfreeze.mcp_tools import MAX_TEXT, PLAYWRIGHT_MCP_VERSION, build_server

ROOT = Path(__file__).resolve().parents[2]
FOLDER = Path(os.environ.get("WEBFREEZE_PLAYWRIGHT_MCP") or ROOT / ".venv" / "playwright-mcp")
BIN = FOLDER / "node_modules" / ".bin" / "playwright-mcp"


def _messages(*requests: dict) -> list[dict]:
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run([str(BIN), "--headless", "--caps", "vision"], input=lines, capture_output=True, text=True,
                          timeout=120, check=False)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def theirs() -> dict:
    if not BIN.exists():
        pytest.skip(f"@playwright/mcp is not installed in {FOLDER} (scripts/bootstrap.sh installs it)")
    package = json.loads((FOLDER / "node_modules" / "@playwright" / "mcp" / "package.json").read_text())
    assert package["version"] == PLAYWRIGHT_MCP_VERSION
    got = _messages(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    tools = next(m for m in got if m.get("id") == 2)["result"]["tools"]
    return {t["name"]: t["inputSchema"] for t in tools}


@pytest.fixture(scope="module")
def ours() -> dict:
    server = build_server(None)  # (listing the tools asks nothing of the session)
    tools = anyio.run(server.list_tools)
    return {t.name: t.inputSchema for t in tools}


def _shape(schema: dict, defs: dict | None = None) -> dict:
    """What a client relies on in a JSON schema: type (number for integers too), enum, items, the
    properties' shapes and the required ones (titles, descriptions, defaults left out)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[1]]
    kinds = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    node = kinds[0] if len(kinds) == 1 else schema
    out = {"type": {"integer": "number"}.get(node.get("type"), node.get("type"))}
    if "enum" in node:
        out["enum"] = sorted(node["enum"])
    if "items" in node:
        out["items"] = _shape(node["items"], defs)
    if "properties" in node:
        out["properties"] = {k: _shape(v, defs) for k, v in node["properties"].items()}
        out["required"] = sorted(node.get("required", []))
    return out


def test_every_browser_tool_has_playwright_mcps_name_and_arguments(theirs, ours):
    browser = sorted(n for n in ours if n.startswith("browser_"))
    assert len(browser) >= 17 and set(browser) <= set(theirs), set(browser) - set(theirs)
    for name in ("browser_navigate", "browser_navigate_back", "browser_click", "browser_type", "browser_select_option",
                 "browser_press_key", "browser_hover", "browser_snapshot", "browser_take_screenshot",
                 "browser_wait_for", "browser_tabs", "browser_drag", "browser_fill_form"):
        assert name in browser
    for name in browser:
        assert _shape(ours[name]) == _shape(theirs[name]), name
    assert {"list_tasks", "start_task", "answer"} <= set(ours)  # (ours, beside them)


def test_inputs_and_answers_are_bounded():
    class Session:  # (only what the refusals reach: an episode with one element, 12)
        obs = {"elements": [{"bid": "12"}]}
        task_id = "t"

        def _episode(self):
            return None

        def ref(self, target):
            return target

        def step(self, action):
            raise AssertionError("a refused input must not become a step")

    server = build_server(Session())

    async def call(name, args):
        result = await server.call_tool(name, args)
        assert result.isError
        return result.content[0].text

    big = "x" * (MAX_TEXT + 1)
    for name, args, words in (
            ("browser_type", {"target": "12", "text": big}, f"browser_type: text is {MAX_TEXT + 1} characters long"),
            ("answer", {"text": big}, "answer: text is"),
            ("browser_navigate", {"url": "http://a.test/" + big}, "browser_navigate: url is"),
            ("browser_select_option", {"target": "12", "values": ["v"] * 101}, "give 1 to 100 values"),
            ("browser_wait_for", {"time": 31}, "time is 31 s; 0 to 30"),
            ("browser_press_key", {"key": "k" * 65}, "browser_press_key: key is 65 characters long")):
        said = anyio.run(call, name, args)
        assert isinstance(said, str) and said.startswith("### Error\nError: ") and words in said, (name, said)
        assert "\n" not in said.split("\n", 1)[1]


def test_calls_are_taken_and_refused_as_playwright_mcp_takes_them():
    """A screenshot without ``scale`` (required in Playwright MCP's schema, filled in by its server) is
    taken; arguments of the wrong shape and an unknown tool are error results in our one-line form."""
    from webfreeze.mcp_tools import tool_caller

    class Session:
        def screenshot(self):
            return b"\x89PNG\r\n\x1a\n"

    call = tool_caller(build_server(Session()))
    shot = anyio.run(call, "browser_take_screenshot", {})
    assert [c.type for c in shot] == ["image"]
    for name, args, said in (
            ("browser_take_screenshot", {"scale": "huge"},
             "browser_take_screenshot: scale: Input should be 'css' or 'device'"),
            ("browser_click", {}, "browser_click: target: Field required"),
            ("browser_wait_for", {"time": "soon"}, "browser_wait_for: time: Input should be a valid number"),
            ("browser_fly", {}, "Unknown tool: browser_fly"),
            ("browser_fill_form", {"fields": [{}] * 4}, "fields.0.target: Field required; fields.0.name: Field "
                                                         "required; fields.0.type: Field required; fields.0.value: "
                                                         "Field required; fields.1.target: Field required; and 11 more")):
        result = anyio.run(call, name, args)
        assert result.isError, (name, result)
        text = result.content[0].text
        assert text.startswith("### Error\nError: ") and said in text and "pydantic" not in text, text
        assert "\n" not in text.split("\n", 1)[1]
