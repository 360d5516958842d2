"""``webfreeze mcp``: a frozen benchmark served to any Model Context Protocol client over stdio.

Browser agents driven over MCP (Playwright MCP's style: navigate, click, type, a page snapshot with
element refs) play a suite's tasks here without being rewritten. The server holds one environment
(:class:`webfreeze.simulator.env.WebEnv`, either backend) over the suite's replayed archive and one
run folder, prepared and written by the runner (:func:`webfreeze.runs.prepare.prepare`,
:func:`~webfreeze.runs.execute.open_run_folder`): each task played through it ends as
``trajectories/<task>.json``, so ``webfreeze eval report RUN_DIR`` scores the run like any other.
The manifest's agent is :class:`MCPClient`, which says the actions came from an external client.

Tools: Playwright MCP's (``@playwright/mcp``: ``browser_navigate``, ``browser_navigate_back``,
``browser_click``, ``browser_type``, ``browser_select_option``, ``browser_press_key``,
``browser_hover``, ``browser_drag``, ``browser_fill_form``, ``browser_snapshot``,
``browser_take_screenshot``, ``browser_wait_for``, ``browser_tabs`` and the ``vision`` mouse tools),
with its names, arguments and answers (:mod:`webfreeze.mcp_tools`), beside the task tools
``list_tasks``, ``start_task`` and ``answer`` (ends the episode). Every action is one environment
step, written as the BrowserGym action string our agents use, so the same actions give the same
trajectory as ``bench run``. The snapshot is an ARIA-style YAML snapshot in Playwright MCP's shape
whose ``ref`` is our element id, the one actions take. The client never sees ground truth or a score.

Only the protocol goes to standard output: the server keeps the real stdout for it and points file
descriptor 1 at standard error, so nothing else (a library's print, Chromium) can corrupt it.
"""

from __future__ import annotations

import ast
import functools
import io
import json
import os
import sys
import time
import tokenize
from pathlib import Path

from webfreeze.agents import AgentError
from webfreeze.agents.base import HANDLE_FIELDS, VISIBLE_FIELDS
from webfreeze.archives import Archive, ArchiveError
from webfreeze.common.errors import WebfreezeError
from webfreeze.eval.tasks import load_suite
from webfreeze.runs.execute import close_run_folder, open_run_folder
from webfreeze.runs.prepare import prepare
from webfreeze.runs.spec import RunError, RunSpec, build_run
from webfreeze.simulator.actions import Action, format_action
from webfreeze.simulator.backends import check_backend
from webfreeze.simulator.env import EnvConfig, WebEnv, first_page
from webfreeze.simulator.site_models import SimulatedSiteModel
from webfreeze.simulator.trajectory import write_trajectory

SERVER_NAME = "webfreeze"
DEFAULT_OUT = "mcp-run"
AGENT_SPEC = "webfreeze.mcp_server:MCPClient"
EXPLORE = "explore"  # the one task of an archive served without a suite
SCROLL_PX = 500
INSTRUCTIONS = (
    "A frozen website replayed offline by webfreeze, with Playwright MCP's browser tools. Call list_tasks, then "
    "start_task; act with browser_navigate, browser_click, browser_type, browser_select_option, browser_press_key, "
    "... using the ref of an element from the page snapshot; end the task with answer. Every task you play is "
    "recorded and scored later.")


class MCPClient:
    """The agent a run played through ``webfreeze mcp`` names in its manifest: the actions came from
    an external MCP client, not from this class, which only describes it (it never acts)."""

    name = "mcp-client"
    oracle = False

    def config(self) -> dict:
        """What the manifest says of the agent: driven from outside over MCP, on stdio."""
        return {"driver": "external MCP client", "protocol": "mcp", "transport": "stdio"}

    def reset(self, task) -> None:
        raise AgentError("the mcp-client agent is driven by an MCP client through 'webfreeze mcp', not by bench run")

    def act(self, obs: dict) -> dict:
        raise AgentError("the mcp-client agent is driven by an MCP client through 'webfreeze mcp', not by bench run")


class MCPError(WebfreezeError):
    """A tool call that cannot be done (no task started, an unknown task): one line for the client."""


# ---------------------------------------------------------------------------------------- snapshot
def _literal(text: str) -> tuple[object, str]:
    """The Python literal (string or number) at the start of ``text`` and what follows it."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    tok = next(tokens)
    lines = text.split("\n")
    end = sum(len(line) + 1 for line in lines[:tok.end[0] - 1]) + tok.end[1]
    return ast.literal_eval(tok.string), text[end:]


def _props(text: str) -> list[tuple[str, object]]:
    """``, focused, url='..', level=2`` as (name, value) pairs (value True for a flag)."""
    out = []
    rest = text
    while rest.startswith(", "):
        rest = rest[2:]
        name_end = 0
        while name_end < len(rest) and (rest[name_end].isalnum() or rest[name_end] in "_-"):
            name_end += 1
        name, rest = rest[:name_end], rest[name_end:]
        if rest.startswith("="):
            value, rest = _literal(rest[1:])
        else:
            value = True
        out.append((name, value))
    return out


def _quoted(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is YAML's)."""
    return json.dumps(text, ensure_ascii=False)


def aria_snapshot(axtree_text: str) -> str:
    """The observation's flattened tree as a Playwright-MCP-style ARIA snapshot (YAML): one
    ``- role "name" [prop] [ref=ID]`` item per node, children nested under it, text as
    ``- text: ..``, a link's address as ``- /url: ..``, a field's value after the colon. ``ref`` is
    the element id actions take. The root (the page itself) is left out: its URL and title head the
    tool's answer."""
    out: list[str] = []
    rows = []
    for raw in axtree_text.split("\n"):
        if not raw.strip():
            continue
        depth = len(raw) - len(raw.lstrip("\t"))
        rows.append((depth, raw.lstrip("\t")))
    if rows and rows[0][1].startswith("RootWebArea"):
        rows = [(d - 1, line) for d, line in rows[1:]]
    for i, (depth, line) in enumerate(rows):
        indent = "  " * max(depth, 0)
        has_children = i + 1 < len(rows) and rows[i + 1][0] > depth
        if line.startswith("StaticText "):
            text, _ = _literal(line[len("StaticText "):])
            if str(text):  # (a drawn space alone: nothing to read)
                out.append(f"{indent}- text: {_quoted(str(text))}")
            continue
        ref = None
        if line.startswith("["):
            ref, _, line = line[1:].partition("] ")
        role, sep, rest = line.partition(" ")
        if role.endswith(","):  # (a generic shown for its properties: no name)
            role, rest = role[:-1], ", " + rest
            name = ""
        else:
            name, rest = _literal(rest) if sep else ("", "")
        value = None
        if rest.startswith(" value="):
            value, rest = _literal(rest[len(" value="):])
        props = _props(rest)
        url = next((v for k, v in props if k == "url"), None)
        item = f"{indent}- {role}"
        if name:
            item += f" {_quoted(str(name))}"
        for k, v in props:
            if k != "url":
                item += f" [{k}]" if v is True else f" [{k}={v}]"
        if ref is not None:
            item += f" [ref={ref}]"
        if has_children or url is not None:
            out.append(item + ":")
            if url is not None:
                out.append(f"{indent}  - /url: {_quoted(str(url))}")
        elif value is not None and str(value) != "":
            out.append(f"{item}: {_quoted(str(value))}")
        else:
            out.append(item)
    return "\n".join(out)


def page_text(obs: dict, *, ran: str | None = None, note: str | None = None, depth: int | None = None) -> str:
    """What a browser tool answers, in Playwright MCP's sections: the action run (``### Ran
    action``, as its BrowserGym string), a result line if any, then the page (``### Page``: URL and
    title; ``### Open tabs`` when more than one) and its ARIA snapshot (``### Snapshot``, YAML,
    ``depth`` levels at most). An action's error is not here: the tool answers it as an error."""
    lines = []
    if ran:
        lines += ["### Ran action", "```python", ran, "```"]
    if note:
        lines += ["### Result", note]
    lines += ["### Page", f"- Page URL: {obs.get('url', '')}", f"- Page Title: {obs.get('title', '')}"]
    pages = obs.get("open_pages") or []
    if len(pages) > 1:
        lines.append("### Open tabs")
        lines += [f"- {i}: {'(current) ' if p == obs.get('url') else ''}[]({p})" for i, p in enumerate(pages)]
    snapshot = aria_snapshot(obs.get("axtree_text") or "")
    if depth is not None:
        snapshot = "\n".join(line for line in snapshot.split("\n")
                              if (len(line) - len(line.lstrip(" "))) // 2 < depth)
    lines += ["### Snapshot", "```yaml", snapshot, "```"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- session
class Session:
    """The server's state: the prepared run, its environment (made at the first task) and the
    episode being played. Every method runs on the server's one thread."""

    def __init__(self, prep, *, single: str | None = None):
        self.prep = prep
        self.config = prep.spec
        self.out = Path(prep.options.out)
        self.single = single
        self.tasks = {t.id: t for t in prep.suite.tasks}
        self.archive = Path(prep.archive)
        self.env: WebEnv | None = None
        self.task_id: str | None = None
        self.obs: dict | None = None
        self.t0 = time.perf_counter()
        self.description = f"{len(self.tasks)} task(s) of {prep.suite.name}; episodes go to {self.out}"
        self.manifest = open_run_folder(prep, executor="mcp")

    # -------------------------------------------------------------- tasks
    def status(self, task_id: str) -> str:
        if task_id == self.task_id:
            return "playing"
        return "done" if (self.out / "trajectories" / f"{task_id}.json").is_file() else "todo"

    def list_tasks(self) -> list[dict]:
        """The run's tasks as the client may see them (no ground truth) with their status."""
        return [{"id": t.id, "category": t.category, "instruction": t.instruction, "start_url": t.start_url,
                 "status": self.status(t.id)} for t in self.prep.suite.tasks]

    def _environment(self) -> WebEnv:
        if self.env is None:
            c = self.config
            models = [SimulatedSiteModel(kind, host) for host, kind in c.site_models.items()]
            self.env = WebEnv(EnvConfig(str(self.archive), backend=c.backend, seed=c.seed,
                                        max_steps=c.max_steps, screenshots=c.screenshots, site_models=models,
                                        rules=c.replay_rules or None))
        return self.env

    def start_task(self, task_id: str | None) -> str:
        """Start an episode of ``task_id`` (default: the next task not played yet); an episode still
        open is recorded first as stopped."""
        if task_id is None:
            task_id = next((t for t in self.tasks if self.status(t) == "todo"), None)
            if task_id is None:
                raise MCPError("every task of this run has been played; nothing left to start")
        task = self.tasks.get(task_id)
        if task is None:
            raise MCPError(f"no task {task_id!r} in this run (list_tasks names them)")
        if task_id == self.task_id:
            raise MCPError(f"task {task_id!r} is being played already (snapshot shows its page; answer ends it)")
        if self.status(task_id) == "done":
            raise MCPError(f"task {task_id!r} has been played already: its trajectory is in {self.out}")
        note = self._finish(stopped=True)
        env = self._environment()
        visible = {k: task.raw[k] for k in (*VISIBLE_FIELDS, *HANDLE_FIELDS) if k in task.raw}
        self.obs, _ = env.reset(seed=self.config.seed, options={"task": visible})
        self.task_id = task_id
        head = (f"Task {task_id} started ({self.config.max_steps} steps at most).\nInstruction: {task.instruction}"
                + (f"\n{note}" if note else ""))
        return head + "\n" + page_text(self.obs)

    def _episode(self) -> WebEnv:
        if self.task_id is None:
            if self.single is None:
                raise MCPError("no task started: call start_task first (list_tasks names the tasks)")
            self.start_task(self.single)  # --task: the one task starts with the first action
        return self.env

    # -------------------------------------------------------------- actions
    def step(self, action: Action) -> tuple[str, str | None]:
        """One environment step of ``action`` (as its BrowserGym string): the answer (the action,
        the page after it, or how the episode ended) and the step's error, if any."""
        env = self._episode()
        text = format_action(action, "browsergym")
        self.obs, _, terminated, truncated, _ = env.step(text)
        error = self.obs.get("last_action_error") or None
        if terminated or truncated:
            return page_text(self.obs, ran=text, note=self._finish(stopped=False)), error
        return page_text(self.obs, ran=text), error

    def act(self, action: Action) -> str:
        """:meth:`step`'s answer, its error (if any) as a line of it."""
        answer, error = self.step(action)
        return answer if not error else f"### Error\n{error}\n{answer}"

    def ref(self, target: str) -> str:
        """``target`` as the element id of the current page's snapshot (an episode is started if
        need be); an unknown one is refused (Playwright MCP's words) before any step is taken."""
        self._episode()
        ref = str(target).strip()
        known = {e["bid"] for e in (self.obs or {}).get("elements") or []}
        if ref not in known:
            raise MCPError(f"Ref {target[:100]} not found in the current page snapshot. Try capturing new snapshot.")
        return ref

    def checked(self, ref: str) -> bool | None:
        """Whether the checkbox or radio ``ref`` is checked on the current page (None: not one)."""
        element = self.env.tree.get(ref) if self.env is not None and self.env.tree is not None else None
        return None if element is None else element.get("checked")

    def snapshot(self, depth: int | None = None) -> str:
        self._episode()
        return page_text(self.obs, depth=depth)

    def screenshot(self) -> bytes:
        env = self._episode()
        png = env.screenshot()
        if png is None:
            raise MCPError("the text backend has no screenshots (serve with --backend browser)")
        return png

    # -------------------------------------------------------------- the run folder
    def _finish(self, *, stopped: bool) -> str | None:
        """Write the open episode's trajectory (as the runner's workers do) and the manifest;
        returns a line saying so, or None when no episode was open."""
        if self.task_id is None or self.env is None:
            return None
        task_id, self.task_id = self.task_id, None
        env = self.env
        trajectory = env.trajectory(stopped=stopped)
        trajectory["agent"] = self.manifest["agent"]
        trajectory["suite"] = {"name": self.manifest["suite"]["name"], "digest": self.manifest["suite"]["digest"]}
        trajectory["env"]["site_models"] = self.config.site_models
        shots = {**env.recorder.shots, **env.recorder.doms} if env.recorder else {}
        write_trajectory(trajectory, self.out, shots)
        close_run_folder(self.prep, self.manifest, time.perf_counter() - self.t0)
        left = sum(self.status(t) == "todo" for t in self.tasks)
        return (f"Task {task_id} ended ({trajectory['end']['reason']}); recorded in "
                f"{self.out / 'trajectories' / (task_id + '.json')}. {left} task(s) left.")

    def close(self) -> None:
        """Record an open episode as stopped, write the manifest, close the environment."""
        try:
            self._finish(stopped=True)
            close_run_folder(self.prep, self.manifest, time.perf_counter() - self.t0)
        finally:
            if self.env is not None:
                self.env.close()
                self.env = None


class ExploreSession(Session):
    """An archive without a suite: one task, ``explore``, at the archive's first recorded page (no
    instruction, nothing to score), played as often as the client likes. Nothing is written: there
    is no run to score (serve a suite for that)."""

    def __init__(self, archive: Path, config: RunSpec):
        self.prep = None
        self.config = config
        self.archive = archive
        self.single = None
        self.tasks = {EXPLORE: None}
        self.env = None
        self.task_id = None
        self.obs = None
        self.description = f"archive {archive.name} (exploration, nothing recorded)"

    def list_tasks(self) -> list[dict]:
        return [{"id": EXPLORE, "category": EXPLORE, "instruction": "", "start_url": self.first_page,
                 "status": self.status(EXPLORE)}]

    @functools.cached_property
    def first_page(self) -> str | None:
        """Where an exploration starts (as the environment's reset without a task has it)."""
        return first_page(self.archive)

    def status(self, task_id: str) -> str:
        return "playing" if task_id == self.task_id else "todo"

    def start_task(self, task_id: str | None) -> str:
        if task_id not in (None, EXPLORE):
            raise MCPError(f"no task {task_id!r}: an archive served alone has one task, {EXPLORE!r}")
        self.task_id = None  # (an open exploration is simply left: nothing records it)
        env = self._environment()
        self.obs, _ = env.reset(seed=self.config.seed)
        self.task_id = EXPLORE
        return ("Exploration started at the archive's first recorded page (nothing is recorded or scored).\n"
                + page_text(self.obs))

    def _episode(self) -> WebEnv:
        if self.task_id is None:
            self.start_task(EXPLORE)  # exploring needs no ceremony: the first action starts it
        return self.env

    def _finish(self, *, stopped: bool) -> str | None:
        if self.task_id is None:
            return None
        self.task_id = None
        end = (self.env.recorder.end or {}).get("reason") if self.env and self.env.recorder else None
        return f"Exploration ended ({end or 'stopped'}); start_task begins another."

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


# ---------------------------------------------------------------------------------------- server
def build_server(session: Session):
    """The FastMCP server whose tools drive ``session`` (:mod:`webfreeze.mcp_tools`, imported here:
    only this command needs the MCP SDK, and every other command starts faster without it)."""
    from webfreeze.mcp_tools import build_server as build

    return build(session)


def _protocol_stdout():
    """Keep the process's standard output for the protocol alone: a duplicate of it is returned
    (as the SDK's text stream) and descriptor 1 is pointed at standard error, so anything else
    written there (a print, a child process) lands on stderr."""
    sys.stdout.flush()
    proto = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return io.TextIOWrapper(os.fdopen(proto, "wb", buffering=0), encoding="utf-8", write_through=True)


def protocol_server(server):
    """The MCP SDK's low-level :class:`mcp.server.lowlevel.Server` answering for the FastMCP
    ``server``: its public ``list_tools`` and ``call_tool`` are the handlers (as FastMCP registers
    them on its own), so the protocol can run on the streams :func:`serve` hands it. Only tools are
    offered (no resources or prompts), as Playwright MCP offers."""
    from mcp.server.lowlevel import Server

    from webfreeze import __version__
    from webfreeze.mcp_tools import tool_caller

    low = Server(server.name, version=__version__, instructions=server.instructions)
    low.list_tools()(server.list_tools)
    # (FastMCP converts and checks a call's arguments itself, so the low-level check is off, as in FastMCP;
    # tool_caller answers a call it refuses in Playwright MCP's form)
    low.call_tool(validate_input=False)(tool_caller(server))
    return low


def serve(server, stdout) -> None:
    """Serve ``server`` over stdio (this process's stdin, the protocol's ``stdout``) until the
    client closes its end. (FastMCP's own ``run`` would write to ``sys.stdout``, which is standard
    error here: the SDK's stdio transport takes the stream, run by :func:`protocol_server`.)"""
    import anyio
    from mcp.server.stdio import stdio_server

    low = protocol_server(server)

    async def run() -> None:
        async with stdio_server(stdout=anyio.wrap_file(stdout)) as (read, write):
            await low.run(read, write, low.create_initialization_options())

    anyio.run(run)


def run_server(suite: str, **settings) -> None:
    """``webfreeze mcp``: prepare the run (:func:`prepare_session` takes ``settings``), then serve
    its tasks over stdio until the client goes; the open episode and the manifest are written
    whatever ends the serving. The MCP SDK is imported first: without the ``mcp`` extra the command
    stops in one line naming it before anything is written."""
    import webfreeze.mcp_tools  # noqa: F401

    session = prepare_session(suite, **settings)
    try:
        server = build_server(session)
        print(f"webfreeze mcp: serving {session.description} on stdio", file=sys.stderr, flush=True)
        serve(server, _protocol_stdout())
    finally:
        session.close()


def prepare_session(suite: str, *, task: str | None, out: str | None, archive: str | None, backend: str | None,
                    seed: int, max_steps: int, screenshots: bool) -> Session:
    """Check everything (the suite, its archive, the run folder) and open the run folder; a
    :class:`RunError` (one line) before anything is written when something is wrong. An archive
    in place of the suite is served for exploration (:class:`ExploreSession`), with nothing written.
    ``backend`` None: the suite manifest's, as ``bench run`` has it (an archive alone: browser)."""
    path = Path(suite)
    if path.is_file() and path.suffix not in (".json", ".jsonl"):
        return _explore_session(path, task=task, out=out, archive=archive, backend=backend or "browser", seed=seed,
                                max_steps=max_steps, screenshots=screenshots)
    if backend is None:  # (the suite manifest's, else browser: `bench run`'s rule)
        try:
            backend = getattr(load_suite(suite), "backend", None)
        except WebfreezeError:
            backend = None  # (prepare says what is wrong with the suite, in its own words)
    prep = prepare(*build_run(suite, AGENT_SPEC, out or DEFAULT_OUT, archive=archive, backend=backend or "browser",
                              seed=seed, max_steps=max_steps, screenshots=screenshots, tasks=[task] if task else []))
    return Session(prep, single=task if task and len(prep.suite.tasks) == 1 else None)


def _explore_session(path: Path, *, task, out, archive, backend, seed, max_steps, screenshots) -> ExploreSession:
    """The checks for an archive served alone: no run options, an archive that opens, a page to start at."""
    for given, option in ((task, "--task"), (out, "--out"), (archive, "--archive"), (screenshots or None, "--screenshots")):
        if given:
            raise RunError(f"{path}: an archive served alone has no tasks and writes no run, so {option} does not "
                           f"apply; serve a suite whose manifest names the archive to record and score episodes")
    check_backend(backend, RunError)
    try:
        with Archive.open(path) as arc:
            first = next(iter(arc.pages(limit=1)), None)
    except ArchiveError as exc:
        raise RunError(str(exc)) from None
    if first is None:
        raise RunError(f"{path}: the archive records no page to start exploring at (serve a suite instead)")
    config = RunSpec(suite="", archive=str(path), agent=AGENT_SPEC, backend=backend, seed=seed, max_steps=max_steps)
    return ExploreSession(path, config)
