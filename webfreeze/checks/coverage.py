"""``webfreeze replay coverage RUN_DIR...``: what a suite's author should record next.

Reads the replay provenance of every trajectory of the given runs (docs/trajectories.md, "Replay
provenance") and groups the requests that missed or were answered fuzzily by host and path
pattern: the path with its numeric segments as ``*``, and the names of its query parameters
(values left out: two searches are one pattern). Each group has its level (``miss`` or ``fuzzy``),
kind (document, xhr, subresource), method (a form's POST to its own page's URL is not the page's
GET), count, the tasks that made it and a few example URLs (and, for
fuzzy answers, the captures served instead; where the provenance says why, a WebSocket's miss
among them, the reasons: one that parted from its recording is not mended by recording more).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from webfreeze.common.errors import WebfreezeError
from webfreeze.simulator.provenance import flagged_answers

EXAMPLES = 3
_NUMERIC = re.compile(r"^[0-9][0-9.,_-]*$")


class CoverageError(WebfreezeError):
    """A run folder that cannot be read: one line."""


def url_pattern(url: str) -> tuple[str, str]:
    """(host, path pattern) of a URL: numeric path segments as ``*``, query names sorted with
    ``=*`` for their values."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    except ValueError:
        return "", url
    path = "/".join("*" if _NUMERIC.match(seg) else seg for seg in (parts.path or "/").split("/"))
    names = sorted({k for k, _ in parse_qsl(parts.query, keep_blank_values=True)})
    return host, path + ("?" + "&".join(f"{n}=*" for n in names) if names else "")


def _trajectories(run: Path):
    if not run.is_dir():
        raise CoverageError(f"{run}: not a run directory (no such directory)")
    folder = run / "trajectories"
    if not folder.is_dir():
        raise CoverageError(f"{run}: not a run directory (no trajectories/ folder)")
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CoverageError(f"{path}: cannot read the trajectory ({exc})") from None
        if isinstance(data, dict):
            yield path, data


def coverage(run_dirs: list[str | Path]) -> dict:
    """The coverage of one or more runs (the ``--json`` output)."""
    groups: dict[tuple, dict] = {}
    runs = []
    for run_dir in run_dirs:
        run = Path(run_dir)
        episodes = with_provenance = 0
        for _, traj in _trajectories(run):
            episodes += 1
            if isinstance(traj.get("replay"), dict):
                with_provenance += 1
            tid = str(traj.get("task_id"))
            for f in flagged_answers(traj):
                host, pattern = url_pattern(f["url"])
                method = str(f.get("method") or "GET").upper()
                key = (host, pattern, f["level"], f["kind"], method)
                g = groups.setdefault(key, {"host": host, "pattern": pattern, "level": f["level"], "kind": f["kind"],
                                            "method": method, "count": 0, "tasks": set(), "examples": set(),
                                            "served": set(), "why": set()})
                g["count"] += 1
                g["tasks"].add(tid)
                g["examples"].add(f["url"])
                if f.get("capture_url"):
                    g["served"].add(f["capture_url"])
                if f.get("why"):
                    g["why"].add(str(f["why"]))
        runs.append({"run": str(run), "episodes": episodes, "with_provenance": with_provenance})
    out = []
    for g in sorted(groups.values(), key=lambda g: (-g["count"], g["host"], g["pattern"], g["level"], g["kind"], g["method"])):
        g = dict(g, tasks=sorted(g["tasks"]), examples=sorted(g["examples"])[:EXAMPLES],
                 served=sorted(g["served"])[:EXAMPLES], why=sorted(g["why"])[:EXAMPLES])
        if g["level"] != "fuzzy":
            del g["served"]
        if not g["why"]:
            del g["why"]
        out.append(g)
    return {"runs": runs, "groups": out,
            "misses": sum(g["count"] for g in out if g["level"] == "miss"),
            "fuzzy": sum(g["count"] for g in out if g["level"] == "fuzzy")}


def render_text(result: dict) -> str:
    """The plain listing: one line per group, the tasks under it."""
    lines = []
    for r in result["runs"]:
        note = "" if r["with_provenance"] == r["episodes"] else \
            f" ({r['episodes'] - r['with_provenance']} without provenance)"
        lines.append(f"{r['run']}: {r['episodes']} episodes{note}")
    if not result["groups"]:
        lines.append("no misses and no fuzzy answers")
    for g in result["groups"]:
        lines.append(f"{g['count']:>5}  {g['level']:<5} {g['kind']:<11} {g['method']:<4} {g['host']}{g['pattern']}")
        lines.append(f"       tasks: {', '.join(g['tasks'])}")
        lines.append(f"       e.g. {g['examples'][0]}")
        if g.get("served"):
            lines.append(f"       served instead: {g['served'][0]}")
        for why in g.get("why", []):
            lines.append(f"       why: {why}")
    lines.append(f"{result['misses']} misses and {result['fuzzy']} fuzzy answers in {len(result['groups'])} groups")
    return "\n".join(lines)
