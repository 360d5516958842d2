"""Hand-built trajectories in the runner's format (docs/suites-and-runs.md), for the evaluator tests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def step(action: str, kind: str | None = None, *, url: str = "http://site.test/", url_after: str | None = None,
         role: str | None = None, name: str | None = None, css: str | None = None, xpath: str | None = None,
         value: str | None = None, typed: str | None = None, text: str | None = None, goto: str | None = None,
         direction: str | None = None, obs: str | None = None, error: str | None = None,
         fields: dict | None = None, screenshot: str | None = None, timing: dict | None = None) -> dict:
    """One step; ``kind`` None means the action did not parse."""
    parsed = None
    if kind is not None:
        parsed = {"kind": kind, "bid": "1", "text": text if text is not None else typed, "value": value if kind == "select" else None,
                  "direction": direction, "amount": 300 if kind == "scroll" else None, "url": goto,
                  "dialect": "browsergym"}
    target = None
    if role is not None or name is not None or css is not None or xpath is not None:
        target = {"bid": "1", "role": role, "name": name, "tag": None, "css": css, "xpath": xpath,
                  "value": value, "href": None}
    return {"step": None, "url": url, "title": "", "obs_digest": digest(obs if obs is not None else url + action),
            "action": action, "parsed": parsed, "target": target, "typed": typed,
            "url_after": url_after if url_after is not None else url, "agent_fields": fields or {},
            "error": error, "screenshot": screenshot, "timing": timing or {"agent_ms": 1.0, "env_ms": 2.0}}


def trajectory(task_id: str, steps: list[dict], *, answer: str | None = None, end: str = "answer",
               final_url: str | None = None, final_state: dict | None = None, total_ms: float = 10.0) -> dict:
    for i, s in enumerate(steps):
        s["step"] = i
    last_url = steps[-1]["url_after"] if steps else "http://site.test/"
    return {"format": "webfreeze-trajectory", "version": 1, "task_id": task_id,
            "suite": {"name": "t", "digest": "sha256:0"},
            "env": {"backend": "text", "archive_digest": "sha256:0", "snapshot_time": None, "viewport": [1920, 1080],
                    "seed": 0, "max_steps": 30, "action_dialect": "browsergym"},
            "agent": {"name": "hand", "config": {}}, "steps": steps, "answer": answer,
            "end": {"reason": end, "detail": ""}, "final_url": final_url or last_url,
            "final_state": final_state or {}, "timing": {"total_ms": total_ms}}


def answer_step(text: str, url: str = "http://site.test/") -> dict:
    return step(f"send_msg_to_user({json.dumps(text)})", "answer", url=url, text=text)


def write_run(run_dir: Path, tasks: list[dict], trajectories: list[dict], manifest: dict | None = None) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "trajectories").mkdir(exist_ok=True)
    (run_dir / "manifest.json").write_text(json.dumps(manifest or {"agent": {"name": "hand"}}))
    (run_dir / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    for t in trajectories:
        (run_dir / "trajectories" / f"{t['task_id']}.json").write_text(json.dumps(t))
    return run_dir
