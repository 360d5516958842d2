"""Trajectories: the versioned JSON record of one episode (``webfreeze-trajectory``, version 1).

Another lab reads it without our code; the format is documented in README ("Trajectories") and
docs/suites-and-runs.md. Screenshots are not inlined: :func:`write_trajectory` writes them as PNG files
beside the JSON (``screenshots/<task_id>/<step>.png``) and the steps name them.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from webfreeze.common.files import json_text, write_atomically

from .provenance import episode_provenance

FORMAT = "webfreeze-trajectory"
VERSION = 1
# An agent field holding fields for the previous step's agent_fields (see TrajectoryRecorder.add_step).
AMEND_PREVIOUS = "amend_previous"
TARGET_KEYS = ("bid", "role", "name", "tag", "css", "xpath", "value", "href")
# Where the target sits (axtree.Tree.element_record), for matching class-based selectors offline.
POSITION_KEYS = ("id", "classes", "nth_child", "nth_of_type", "ancestors")
# DOM snapshots: RUN_DIR/dom/<sha256 of the HTML>.html.zst, zstd at a fixed level (same bytes, same file)
DOM_DIR = "dom"
DOM_ZSTD_LEVEL = 10


# Snapshots kept as functions (each holding its page's tree) before they are serialised anyway.
PENDING_DOMS_MAX = 16


def dom_path(html: bytes) -> str:
    """The run-relative path of a DOM snapshot: ``dom/<sha256 hex of the HTML>.html.zst``."""
    return f"{DOM_DIR}/{hashlib.sha256(html).hexdigest()}.html.zst"


def read_dom(path: str | os.PathLike) -> bytes:
    """A stored DOM snapshot's HTML (the file :func:`write_trajectory` wrote)."""
    import zstandard

    return zstandard.ZstdDecompressor().decompress(Path(path).read_bytes(), max_output_size=1 << 30)


class TrajectoryRecorder:
    def __init__(self, task: dict, env: dict, agent: dict | None = None):
        self.task = task
        self.env = env
        self.agent = agent or {}
        self.steps: list[dict] = []
        self.shots: dict[int, bytes] = {}
        self._doms: dict[str, bytes] = {}  # dom_path(html) -> html, the snapshots the steps name
        # Steps whose snapshot is still a function: serialising a page costs more than the rest of
        # a text-backend step, so it waits until the trajectory is taken (the same bytes either way:
        # the tree it reads never changes after its observation).
        self._pending_doms: list[tuple[int, Callable[[], bytes]]] = []
        self.end: dict | None = None
        self.answer: str | None = None
        self.final_url = ""
        self.final_state: dict = {}
        # The replay provenance of the episode's first page (simulator/provenance.py); None: the
        # environment recorded none (then neither the trajectory nor its steps have ``replay``).
        self.replay_start: dict | None = None

    @property
    def doms(self) -> dict[str, bytes]:
        """``{dom path: HTML}``: the DOM snapshots the steps name (each serialised once)."""
        self._settle_doms()
        return self._doms

    def _settle_doms(self) -> None:
        for n, make in self._pending_doms:
            html = make()
            rel = dom_path(html)
            self._doms[rel] = html
            self.steps[n]["dom"] = rel
        self._pending_doms.clear()

    @property
    def finished(self) -> bool:
        return self.end is not None

    def add_step(self, *, url, title, obs_digest, action, parsed, target, url_after, agent, error, env_ms,
                 screenshot=None, history: dict | None = None,
                 dom: bytes | Callable[[], bytes] | None = None, replay: dict | None = None,
                 dialogs: list[dict] | None = None) -> None:
        """One step. ``history`` (a search of the user's history: query, results, k, threshold) makes
        it a step of kind ``history``; browser steps carry no ``kind``. ``dom`` is the page's DOM
        snapshot when the action had a target element (stored once per content, named by the
        step's ``dom``), or a function that makes it when the trajectory is taken. ``replay``: how
        the replay answered what the step caused (``provenance.step_provenance``). ``dialogs``:
        the JavaScript dialogs the step's page opened, as answered (``type``, ``message``,
        ``answer``), kept only when there were some."""
        n = len(self.steps)
        agent = dict(agent or {})
        agent_ms = agent.pop("agent_ms", None)
        # What an agent learns of its previous step only now, from this step's observation (a
        # reflection on that step's outcome), is recorded on the previous step.
        amend = agent.pop(AMEND_PREVIOUS, None)
        if isinstance(amend, dict) and self.steps:
            self.steps[-1]["agent_fields"].update(amend)
        # an agent's own timings (LLM latency, cassette hits: how, not what) go with the step's timing
        agent_timing = agent.pop("timing", None)
        typed = None
        if parsed is not None and parsed.kind in ("fill", "select"):
            typed = parsed.text if parsed.kind == "fill" else parsed.value
        self.steps.append({
            "step": n, "url": url, "title": title, "obs_digest": obs_digest, "action": action,
            "parsed": parsed.to_dict() if parsed is not None else None,
            "target": _target(target),
            "typed": typed, "url_after": url_after, "agent_fields": agent, "error": error,
            "screenshot": None, "timing": {"agent_ms": agent_ms, "env_ms": env_ms},
        })
        if callable(dom):
            self._pending_doms.append((n, dom))
            if len(self._pending_doms) >= PENDING_DOMS_MAX:  # each holds a whole page's tree
                self._settle_doms()
        elif dom is not None:
            rel = dom_path(dom)
            self._doms[rel] = dom
            self.steps[-1]["dom"] = rel
        if replay is not None:
            self.steps[-1]["replay"] = replay
        if dialogs:
            self.steps[-1]["dialogs"] = dialogs
        if history is not None:
            self.steps[-1]["kind"] = "history"
            self.steps[-1]["history"] = history
        if isinstance(agent_timing, dict):
            self.steps[-1]["timing"].update({k: v for k, v in agent_timing.items() if k not in ("agent_ms", "env_ms")})
        if screenshot:
            self.shots[n] = screenshot

    def finish(self, reason: str, *, answer: str | None = None, detail: str | None = None, final_url: str = "",
               final_state: dict | None = None) -> None:
        self.end = {"reason": reason, "detail": detail}
        self.answer = answer
        self.final_url = final_url
        self.final_state = final_state or {}

    def data(self, *, archive_digest: str | None = None, suite: dict | None = None) -> dict:
        self._settle_doms()
        env = dict(self.env, archive_digest=archive_digest)
        out = {
            "format": FORMAT, "version": VERSION, "task_id": self.task.get("id"), "suite": suite,
            "env": env, "agent": self.agent, "steps": self.steps, "answer": self.answer,
            "end": self.end, "final_url": self.final_url, "final_state": self.final_state,
            "timing": {"total_ms": round(sum(s["timing"]["env_ms"] or 0 for s in self.steps), 3)},
        }
        if self.replay_start is not None or any("replay" in s for s in self.steps):
            out["replay"] = episode_provenance(self.replay_start, [s.get("replay") for s in self.steps])
        return out


def _target(target: dict | None) -> dict | None:
    if not target:
        return None
    out = {k: target.get(k) for k in TARGET_KEYS}
    out.update({k: target[k] for k in POSITION_KEYS if k in target})
    return out


def without_timings(traj: dict) -> dict:
    """A copy without the timing fields (what must be byte-identical across runs)."""
    out = json.loads(json.dumps(traj))
    out.pop("timing", None)
    for s in out.get("steps", []):
        s.pop("timing", None)
    return out


def dumps(traj: dict) -> str:
    """A trajectory file's text (the house JSON style: sorted keys, one-space indents)."""
    return json_text(traj)


def write_trajectory(traj: dict, run_dir: str | os.PathLike, shots: dict | None = None) -> Path:
    """Write ``trajectories/<task_id>.json`` (atomically), its screenshots and its DOM snapshots
    under ``run_dir``. ``shots``: ``{step index: PNG}``, and ``{dom path: HTML}`` for the snapshots
    (``TrajectoryRecorder.doms``), each written zstd-compressed once (content-addressed: a file
    that exists already holds the same bytes)."""
    run_dir = Path(run_dir)
    tid = traj["task_id"]
    shots = shots or {}
    for n, png in sorted((k, v) for k, v in shots.items() if isinstance(k, int)):
        rel = f"screenshots/{tid}/{n}.png"
        p = run_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(png)
        traj["steps"][n]["screenshot"] = rel
    for rel, html in sorted((k, v) for k, v in shots.items() if isinstance(k, str)):
        _write_dom(run_dir, rel, html)
    out = run_dir / "trajectories" / f"{tid}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(out, dumps(traj), durable=False)
    return out


def _write_dom(run_dir: Path, rel: str, html: bytes) -> None:
    if rel != dom_path(html):  # only our own names: a snapshot lands in dom/ and nowhere else
        raise ValueError(f"{rel!r} is not the name of this DOM snapshot")
    p = run_dir / rel
    if p.exists():
        return
    import zstandard

    p.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(p, zstandard.ZstdCompressor(level=DOM_ZSTD_LEVEL).compress(html), durable=False)
