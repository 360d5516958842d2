"""A scripted MCP client written against Playwright MCP's tools (``@playwright/mcp``) plays a task of
a real application, Datasette, through ``webfreeze mcp`` unchanged, and ``eval report`` scores it.

The client (:class:`PlaywrightMCPClient`, :func:`count_poetry_books`) uses only Playwright MCP's
browser tools and reads every ref from the page snapshot's YAML (the first fenced ``yaml`` block of
an answer), never a hard-coded one: the same calls play the live application through
``@playwright/mcp`` itself, which the second test does when its package is installed (it skips,
saying so, without it). There an action's answer links its snapshot to a file, so the client asks
``browser_snapshot`` for it, as any Playwright MCP client does; ``webfreeze mcp`` answers with the
snapshot. Only the task tools around the client are webfreeze's: ``list_tasks`` gives the task,
``answer`` ends it. The replay never reaches the application (its access log is the canary).
Slow: the Datasette crawl and suite (session fixtures) take most of two minutes when not built yet.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import anyio
import pytest
import yaml
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from testbed.fixtures import cli_env, webfreeze
from webfreeze.simulator.browser import BrowserUnavailable, chromium_path

pytestmark = pytest.mark.slow
try:
    CHROMIUM = chromium_path()
except BrowserUnavailable as exc:
    pytestmark = [pytestmark, pytest.mark.skip(reason=str(exc))]

ROOT = Path(__file__).resolve().parents[2]
TASK = "data-poetry-count"
PLAYWRIGHT_MCP = Path(os.environ.get("WEBFREEZE_PLAYWRIGHT_MCP") or ROOT / ".venv" / "playwright-mcp")
# one snapshot item: role, "name" (JSON-quoted), [props], [ref=..], as Playwright MCP writes them
ITEM = re.compile(r'^(?P<role>[\w-]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?(?P<props>(?: \[[^\]]*\])*)\s*$')


class PlaywrightMCPClient:
    """An agent's side of Playwright MCP: call a browser tool, read the page snapshot, find an
    element's ref by role and name in it."""

    def __init__(self, session: ClientSession):
        self.session = session
        self.calls: list[str] = []

    async def call(self, tool: str, **arguments) -> str:
        self.calls.append(tool)
        result = await self.session.call_tool(tool, arguments)
        text = "\n".join(c.text for c in result.content if c.type == "text")
        assert not result.isError, (tool, arguments, text)
        return text

    @staticmethod
    def snapshot_of(answer: str) -> list:
        """The page snapshot in a tool's answer, parsed (the first ```yaml block)."""
        match = re.search(r"```yaml\n(.*?)\n```", answer, re.S)
        assert match, answer[:2000]
        return yaml.safe_load(match.group(1)) or []

    @staticmethod
    def items(tree) -> list[tuple[str, str, str | None, object]]:
        """Every element of a parsed snapshot as (role, name, ref, value), depth first; a text
        node's role is ``text``, its text the name."""
        out = []
        for node in tree if isinstance(tree, list) else []:
            key, value = (next(iter(node.items())) if isinstance(node, dict) else (node, None))
            if not isinstance(key, str):
                continue
            if key in ("text", "/url"):
                out.append((key, str(value), None, None))
                continue
            match = ITEM.match(key)
            if match is None:
                continue
            name = json.loads(f'"{match.group("name")}"') if match.group("name") is not None else ""
            ref = re.search(r"\[ref=([^\]]+)\]", match.group("props"))
            out.append((match.group("role"), name, ref.group(1) if ref else None,
                        value if not isinstance(value, list) else None))
            if isinstance(value, list):
                out += PlaywrightMCPClient.items(value)
        return out

    async def page(self, answer: str) -> str:
        """The answer if it holds the page's snapshot, else ``browser_snapshot``'s (Playwright MCP
        answers an action with a link to a snapshot file; ``webfreeze mcp`` with the snapshot)."""
        return answer if "```yaml" in answer else await self.call("browser_snapshot")

    def ref(self, answer: str, role: str, name: str) -> str:
        """The ref of the one element ``role`` named ``name`` on the page the answer shows."""
        found = [ref for r, n, ref, _ in self.items(self.snapshot_of(answer)) if r == role and n == name and ref]
        assert len(found) == 1, (role, name, found, answer[:3000])
        return found[0]


async def count_poetry_books(client: PlaywrightMCPClient, start_url: str) -> str:
    """The task, as an agent written for Playwright MCP plays it: open the table, follow the genre
    facet's ``poetry`` link, read the count of rows from the page it opens."""
    page = await client.page(await client.call("browser_navigate", url=start_url))
    page = await client.page(await client.call("browser_click", element="the poetry facet link",
                                               target=client.ref(page, "link", "poetry")))
    texts = " ".join(name for _, name, _, _ in client.items(client.snapshot_of(page)))
    match = re.search(r"(\d+) rows? where genre = \W?poetry\b", texts)
    assert match, texts[:3000]
    return match.group(1)


def _play(params: StdioServerParameters, body) -> dict:
    seen: dict = {}

    async def main():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await body(session, seen)

    anyio.run(main)
    return seen


@pytest.fixture(scope="module")
def datasette(testbed):
    return testbed.suite("datasette"), testbed.app("datasette")


def test_a_playwright_mcp_client_plays_a_datasette_task_through_webfreeze_mcp(datasette, testbed, tmp_path):
    suite, app = datasette
    run = tmp_path / "run"
    params = StdioServerParameters(command=sys.executable, cwd=str(tmp_path), env=cli_env(testbed.home),
                                   args=["-m", "webfreeze", "mcp", str(suite), "--task", TASK, "--out", str(run)])

    async def body(session, seen):
        task = json.loads((await session.call_tool("list_tasks", {})).content[0].text)[0]
        seen["task"] = task
        client = PlaywrightMCPClient(session)
        seen["counted"] = await count_poetry_books(client, task["start_url"])
        seen["calls"] = client.calls
        seen["ended"] = (await session.call_tool("answer", {"text": seen["counted"]})).content[0].text

    mark = app.mark()
    seen = _play(params, body)
    assert app.requests_since(mark) == []  # the replay never reached the application
    assert seen["task"]["id"] == TASK and "ground_truth" not in json.dumps(seen["task"])
    assert seen["calls"] == ["browser_navigate", "browser_click"]
    assert f"Task {TASK} ended (answer)" in seen["ended"]
    steps = json.loads((run / "trajectories" / f"{TASK}.json").read_text(encoding="utf-8"))["steps"]
    assert [s["action"].split("(")[0] for s in steps] == ["goto", "click", "send_msg_to_user"]
    r = webfreeze("eval", "report", run, "--json", home=testbed.home)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["tasks"][TASK]["outcome"] == "success"
    # the count the client read is the application's own (the suite's ground truth, kept from the client)
    truth = next(json.loads(line) for line in (suite / "tasks.jsonl").read_text().splitlines()
                 if json.loads(line)["id"] == TASK)["ground_truth"]["answer"]["exact"]
    assert seen["counted"] == truth


def test_the_same_client_plays_the_live_application_through_playwright_mcp(datasette, tmp_path):
    """The client above, unchanged, against ``@playwright/mcp`` itself on the live application
    (Chromium sent to the application's port by its own host rule): the same calls, the same count."""
    suite, app = datasette
    binary = PLAYWRIGHT_MCP / "node_modules" / ".bin" / "playwright-mcp"
    if not binary.exists():
        pytest.skip(f"@playwright/mcp is not installed in {PLAYWRIGHT_MCP} (scripts/bootstrap.sh installs it)")
    config = tmp_path / "config.json"
    host, _, address = app.resolve.partition("=")
    config.write_text(json.dumps({"browser": {"launchOptions": {
        "executablePath": str(CHROMIUM), "headless": True, "chromiumSandbox": False,
        "args": [f"--host-resolver-rules=MAP {host} {address}"]}}}), encoding="utf-8")
    params = StdioServerParameters(command=str(binary), cwd=str(tmp_path), env=dict(os.environ),
                                   args=["--config", str(config), "--isolated", "--output-dir", str(tmp_path / "o")])
    task = next(json.loads(line) for line in (suite / "tasks.jsonl").read_text().splitlines()
                if json.loads(line)["id"] == TASK)

    async def body(session, seen):
        client = PlaywrightMCPClient(session)
        seen["counted"] = await count_poetry_books(client, task["start_url"])
        seen["calls"] = client.calls

    mark = app.mark()
    seen = _play(params, body)
    assert [c for c in seen["calls"] if c != "browser_snapshot"] == ["browser_navigate", "browser_click"]
    assert seen["counted"] == task["ground_truth"]["answer"]["exact"]
    assert ("GET", "/testbed/books?genre=poetry") in app.requests_since(mark)  # it was the live application
