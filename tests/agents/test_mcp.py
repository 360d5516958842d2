"""``webfreeze mcp``: the MCP SDK's own client drives the server over stdio, plays demo tasks with the
actions the reference agent took in ``bench run``, and the trajectories are the same; the run
folder scores with ``eval report``; bad input is one line before anything is served."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
import yaml
from cli_runner import run_cli
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import webfreeze
from webfreeze.demo import ARCHIVE, SUITE
from webfreeze.mcp_server import aria_snapshot
from webfreeze.simulator.actions import parse_action

# Playwright MCP's tool names (docs/agents.md), beside our task tools
TOOLS = {"browser_navigate", "browser_navigate_back", "browser_click", "browser_type", "browser_select_option",
         "browser_press_key", "browser_hover", "browser_drag", "browser_fill_form", "browser_snapshot",
         "browser_take_screenshot", "browser_wait_for", "browser_tabs", "browser_mouse_wheel", "browser_mouse_move_xy",
         "browser_mouse_click_xy", "browser_mouse_drag_xy", "answer", "list_tasks", "start_task"}
TEXT_TASKS = ["shop-001", "scholar-site-info-002"]
BROWSER_TASK = "scholar-site-info-001"
ROOT = Path(__file__).resolve().parents[2]


def server_params(*args: str) -> StdioServerParameters:
    # (the SDK hands the server only a few variables unless told: it gets ours, as a shell's child would)
    return StdioServerParameters(command=sys.executable, args=["-m", "webfreeze", "mcp", *args], env=dict(os.environ),
                                 cwd=str(ROOT))


def tool_call(parsed) -> tuple[str, dict]:
    """The Playwright MCP tool call that asks for the same step as a parsed BrowserGym action."""
    k = parsed.kind
    if k == "click":
        return "browser_click", {"target": parsed.bid, "element": "the element"}
    if k == "fill":
        return "browser_type", {"target": parsed.bid, "text": parsed.text or ""}
    if k == "press" and parsed.bid is None:
        return "browser_press_key", {"key": parsed.key}
    if k == "select":
        return "browser_select_option", {"target": parsed.bid, "values": [parsed.value]}
    if k == "scroll":
        px = parsed.amount or 500
        dx, dy = {"down": (0, px), "up": (0, -px), "right": (px, 0), "left": (-px, 0)}[parsed.direction]
        return "browser_mouse_wheel", {"deltaX": dx, "deltaY": dy}
    if k == "goto":
        return "browser_navigate", {"url": parsed.url}
    if k == "go_back":
        return "browser_navigate_back", {}
    if k == "answer":
        return "answer", {"text": parsed.text or ""}
    raise AssertionError(f"no tool for {parsed}")


def tool_calls(actions: list[str]) -> list[tuple[str, dict]]:
    return [tool_call(parse_action(a)) for a in actions]


def text_of(result) -> str:
    assert not result.isError, result.content
    return "\n".join(c.text for c in result.content if c.type == "text")


def comparable(trajectory: dict) -> dict:
    """A trajectory without who acted and how long things took (the rest must be equal)."""
    out = {k: v for k, v in trajectory.items() if k not in ("agent", "timing")}
    out["steps"] = [{k: v for k, v in s.items() if k not in ("agent_fields", "timing")} for s in trajectory["steps"]]
    return out


def play(params: StdioServerParameters, plays: dict[str, list[str]], *, extra=None) -> dict:
    """Start the server, list its tools, play each task with the given actions; returns what the
    client saw (tool names, the task list, the last answer of each task, optional extra results)."""
    seen: dict = {"answers": {}}

    async def main():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            seen["init"] = await session.initialize()
            seen["tools"] = {t.name for t in (await session.list_tools()).tools}
            seen["tasks"] = json.loads(text_of(await session.call_tool("list_tasks", {})))
            for task_id, calls in plays.items():
                started = text_of(await session.call_tool("start_task", {"task_id": task_id}))
                seen.setdefault("started", {})[task_id] = started
                last = None
                for name, args in calls:
                    last = text_of(await session.call_tool(name, args))
                seen["answers"][task_id] = last
            if extra is not None:
                await extra(session, seen)

    anyio.run(main)
    return seen


@pytest.fixture(scope="module")
def bench_runs(tmp_path_factory):
    """The reference agent's runs of the tasks through bench run (text and browser backends)."""
    base = tmp_path_factory.mktemp("bench")
    runs = {}
    for backend, tasks in (("text", TEXT_TASKS), ("browser", [BROWSER_TASK])):
        out = base / backend
        args = ["bench", "run", str(SUITE), "--agent", "reference", "--backend", backend, "--out", str(out)]
        for t in tasks:
            args += ["--tasks", t]
        proc = run_cli(*args)
        assert proc.returncode == 0, proc.stderr
        runs[backend] = out
    return runs


def trajectory(run: Path, task_id: str) -> dict:
    return json.loads((run / "trajectories" / f"{task_id}.json").read_text(encoding="utf-8"))


def actions_of(run: Path, task_id: str) -> list[str]:
    return [s["action"] for s in trajectory(run, task_id)["steps"]]


def test_a_client_plays_text_tasks_to_the_same_trajectories_as_bench_run(bench_runs, tmp_path):
    out = tmp_path / "mcp-run"
    actions = {t: actions_of(bench_runs["text"], t) for t in TEXT_TASKS}
    assert all(a[-1].startswith("send_msg_to_user(") for a in actions.values())
    plays = {t: tool_calls(a) for t, a in actions.items()}

    async def after(session, seen):
        seen["tasks_after"] = json.loads(text_of(await session.call_tool("list_tasks", {})))
        seen["no_task"] = await session.call_tool("browser_click", {"target": "3"})
        seen["unknown"] = await session.call_tool("start_task", {"task_id": "no-such-task"})
        seen["again"] = await session.call_tool("start_task", {"task_id": TEXT_TASKS[0]})
        text_of(await session.call_tool("start_task", {"task_id": "scholar-site-info-003"}))
        seen["twice"] = await session.call_tool("start_task", {"task_id": "scholar-site-info-003"})
        seen["shot"] = await session.call_tool("browser_take_screenshot", {"scale": "css"})

    seen = play(server_params(str(SUITE), "--backend", "text", "--out", str(out)), plays, extra=after)
    assert seen["tools"] == TOOLS
    listed = {t["id"]: t for t in seen["tasks"]}
    assert set(TEXT_TASKS) <= set(listed) and "ground_truth" not in json.dumps(seen["tasks"])
    assert all(t["status"] == "todo" for t in seen["tasks"])
    assert {t["id"]: t["status"] for t in seen["tasks_after"] if t["id"] in TEXT_TASKS} == dict.fromkeys(TEXT_TASKS, "done")
    for t in TEXT_TASKS:
        assert f"Task {t} ended (answer)" in seen["answers"][t]
        assert "```yaml" in seen["started"][t] and "[ref=" in seen["started"][t]
        assert comparable(trajectory(out, t)) == comparable(trajectory(bench_runs["text"], t))
    # errors reach the client as error results, in one line, and the server goes on
    for key, words in (("no_task", "no task started"), ("unknown", "no task 'no-such-task'"),
                       ("again", "played already"), ("twice", "being played already"),
                       ("shot", "text backend has no screenshots")):
        result = seen[key]
        head, _, line = result.content[0].text.partition("\n")
        assert result.isError and head == "### Error" and words in line and "\n" not in line
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["agent"]["config"]["driver"] == "external MCP client" and manifest["agent"]["oracle"] is False
    # (the third task was left open: recorded as stopped when the client went)
    assert manifest["tasks_done"] == 3 and manifest["circumstances"]["executor"] == "mcp"
    assert trajectory(out, "scholar-site-info-003")["end"]["reason"] == "stopped"
    # scored like any run
    proc = run_cli("eval", "report", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    bench = json.loads(run_cli("eval", "report", str(bench_runs["text"]), "--json").stdout)
    for t in TEXT_TASKS:
        assert report["tasks"][t]["outcome"] == bench["tasks"][t]["outcome"] == "success"


def test_a_client_plays_a_browser_task_and_takes_a_screenshot(bench_runs, tmp_path):
    out = tmp_path / "mcp-browser"
    plays = {BROWSER_TASK: tool_calls(actions_of(bench_runs["browser"], BROWSER_TASK))}

    async def after(session, seen):
        # a second task: the screenshot of its start page, then it is left open (stopped at exit)
        seen["started_second"] = text_of(await session.call_tool("start_task", {"task_id": "scholar-site-info-002"}))
        seen["shot"] = await session.call_tool("browser_take_screenshot", {"scale": "css"})
        seen["snapshot"] = text_of(await session.call_tool("browser_snapshot", {}))

    seen = play(server_params(str(SUITE), "--out", str(out)), plays, extra=after)
    assert comparable(trajectory(out, BROWSER_TASK)) == comparable(trajectory(bench_runs["browser"], BROWSER_TASK))
    image = [c for c in seen["shot"].content if c.type == "image"]
    assert not seen["shot"].isError and image and image[0].mimeType == "image/png"
    assert base64.b64decode(image[0].data).startswith(b"\x89PNG\r\n\x1a\n")
    assert "- Page URL: http://scholar.test/" in seen["snapshot"]
    # the episode left open when the client went is recorded as stopped, and the manifest counts it
    stopped = trajectory(out, "scholar-site-info-002")
    assert stopped["end"]["reason"] == "stopped" and stopped["steps"] == []
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["tasks_done"] == 2 and manifest["env"]["backend"] == "browser"


def test_with_one_task_the_first_action_starts_it(tmp_path):
    out = tmp_path / "one"

    async def after(session, seen):
        seen["snap"] = text_of(await session.call_tool("browser_snapshot", {}))
        seen["answer"] = text_of(await session.call_tool("answer", {"text": "320"}))

    seen = play(server_params(str(SUITE), "--task", "scholar-site-info-001", "--backend", "text", "--out", str(out)),
                {}, extra=after)
    # the server says who it is and, as Playwright MCP, offers tools only
    init = seen["init"]
    assert init.serverInfo.name == "webfreeze" and init.serverInfo.version == webfreeze.__version__
    assert init.capabilities.tools is not None and "list_tasks" in init.instructions
    assert init.capabilities.resources is None and init.capabilities.prompts is None
    assert [t["id"] for t in seen["tasks"]] == ["scholar-site-info-001"]
    assert "- Page URL: http://scholar.test/" in seen["snap"]
    assert "Task scholar-site-info-001 ended (answer)" in seen["answer"]
    report = json.loads(run_cli("eval", "report", str(out), "--json").stdout)
    assert report["tasks"]["scholar-site-info-001"]["outcome"] == "success"


def test_the_snapshot_is_yaml_with_refs_that_actions_take():
    text = ("RootWebArea 'Shop', focused, url='http://shop.test/'\n\t[3] banner ''\n\t\t[4] link 'Home, \"best\"', "
            "url='http://shop.test/'\n\t\t\t[5] image 'Logo'\n\t[10] searchbox 'Search' value='shoes', required\n"
            "\t[12] heading 'Deals', level=2\n\tStaticText 'it\\'s 10: off'\n\t[13] checkbox 'Gift', checked='true'\n"
            "\tStaticText ''\n\t[14] generic, live='polite', relevant='additions text'\n\t\tStaticText 'Saved'")
    snap = aria_snapshot(text)
    assert snap.splitlines() == [
        '- banner [ref=3]:',
        '  - link "Home, \\"best\\"" [ref=4]:',
        '    - /url: "http://shop.test/"',
        '    - image "Logo" [ref=5]',
        '- searchbox "Search" [required] [ref=10]: "shoes"',
        '- heading "Deals" [level=2] [ref=12]',
        '- text: "it\'s 10: off"',
        '- checkbox "Gift" [checked=true] [ref=13]',
        '- generic [live=polite] [relevant=additions text] [ref=14]:',
        '  - text: "Saved"',
    ]
    parsed = yaml.safe_load(snap)
    assert parsed[1] == {'searchbox "Search" [required] [ref=10]': "shoes"}
    assert parsed[0]['banner [ref=3]'][0]['link "Home, \\"best\\"" [ref=4]'][0] == {"/url": "http://shop.test/"}


def test_bad_input_is_one_line_before_serving(tmp_path):
    cases = [
        (["mcp", str(tmp_path / "nowhere")], "nowhere"),
        (["mcp", str(ARCHIVE), "--out", str(tmp_path / "r")], "so --out does not apply"),
        (["mcp", str(tmp_path / "not-an-archive.wfz")], "not-an-archive.wfz"),
        (["mcp", str(SUITE), "--task", "no-such-*", "--out", str(tmp_path / "r")], "no task id matches"),
    ]
    (tmp_path / "not-an-archive.wfz").write_text("hello")
    for args, words in cases:
        proc = subprocess.run([sys.executable, "-m", "webfreeze", *args], check=False, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, cwd=tmp_path, timeout=120,
                              env=server_params().env)
        assert proc.returncode != 0 and proc.stdout == ""
        assert words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "mcp-run").exists()


def test_an_archive_alone_is_served_for_exploration_and_nothing_is_written(tmp_path):
    async def after(session, seen):
        seen["snap"] = text_of(await session.call_tool("browser_snapshot", {}))
        seen["other"] = await session.call_tool("start_task", {"task_id": "shop-001"})
        seen["go"] = await session.call_tool("browser_navigate", {"url": "http://scholar.test/no-such-page"})
        seen["end"] = text_of(await session.call_tool("answer", {"text": "done"}))

    params = server_params(str(ARCHIVE), "--backend", "text")
    params.cwd = str(tmp_path)
    seen = play(params, {}, extra=after)
    assert [t["id"] for t in seen["tasks"]] == ["explore"]
    with webfreeze.open_archive(ARCHIVE) as arc:  # (listed where the exploration starts)
        first = next(page.url for page in arc.pages(limit=1))
    assert seen["tasks"][0]["start_url"] == first
    assert f"- Page URL: {first}\n" in seen["snap"] and "[ref=" in seen["snap"]
    assert seen["other"].isError and "one task, 'explore'" in seen["other"].content[0].text
    # a page the archive lacks: the replay's miss (never the network), an error result with the page after it
    assert seen["go"].isError and seen["go"].content[0].text.startswith("### Error\nError: not captured: the archive has no GET")
    assert "- Page URL: http://scholar.test/no-such-page" in seen["go"].content[0].text
    assert "Exploration ended (answer)" in seen["end"]
    assert list(tmp_path.iterdir()) == []


def test_type_with_submit_is_typing_then_enter(tmp_path):
    out = tmp_path / "submit"

    async def after(session, seen):
        seen["typed"] = text_of(await session.call_tool("browser_type", {"target": "10", "submit": True,
                                                                         "text": "Acme Black Cycling Helmet"}))
        seen["bad"] = await session.call_tool("browser_type", {"target": "99999", "text": "x", "submit": True})

    seen = play(server_params(str(SUITE), "--task", "shop-001", "--backend", "text", "--out", str(out)), {},
                extra=after)
    assert "### Ran action\n```python\npress('10', 'Enter')\n```" in seen["typed"]
    assert "- Page URL: http://shop.test/search?q=Acme+Black+Cycling+Helmet" in seen["typed"]
    # an unknown ref: a tool error in Playwright MCP's words, and no step taken
    assert seen["bad"].isError and seen["bad"].content[0].text == (
        "### Error\nError: Ref 99999 not found in the current page snapshot. Try capturing new snapshot.")
    steps = trajectory(out, "shop-001")["steps"]
    assert [s["action"] for s in steps] == ["fill('10', 'Acme Black Cycling Helmet')", "press('10', 'Enter')"]


def test_without_the_mcp_sdk_the_command_says_which_extra_before_writing_anything(tmp_path):
    # the SDK made unimportable for this process alone (as in a venv without the 'mcp' extra)
    code = "import sys; sys.modules['mcp'] = None; from webfreeze.cli import main; main()"
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", code, "mcp", str(SUITE), "--backend", "text", "--out", str(out)],
                          check=False, capture_output=True, text=True, stdin=subprocess.DEVNULL, cwd=tmp_path,
                          timeout=120, env=server_params().env)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert "pip install 'webfreeze[mcp]'" in proc.stderr and "internal error" not in proc.stderr
    assert not out.exists()


@pytest.mark.parametrize("manifest_backend, given, expected", [("text", None, "text"), ("text", "browser", "browser"),
                                                               (None, None, "browser")])
def test_the_backend_is_the_suite_manifests_unless_given(tmp_path, manifest_backend, given, expected):
    """As `bench run`: a suite whose manifest says text is served in text, unless --backend says."""
    import json
    import shutil

    from webfreeze.demo import ARCHIVE, SUITE
    from webfreeze.mcp_server import prepare_session

    suite = tmp_path / "suite"
    shutil.copytree(SUITE, suite)
    manifest = json.loads((suite / "manifest.json").read_text())
    manifest["archive"] = str(ARCHIVE)
    manifest.pop("backend", None)
    if manifest_backend:
        manifest["backend"] = manifest_backend
    (suite / "manifest.json").write_text(json.dumps(manifest))
    session = prepare_session(str(suite), task=None, out=str(tmp_path / "run"), archive=None, backend=given,
                              seed=0, max_steps=5, screenshots=False)
    assert session.config.backend == expected
