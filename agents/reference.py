"""The reference agent: replays a task's reference trajectory against the replay.

A reference trajectory (``record session``, README "Reference trajectories") logs what an annotator
did: ``navigate``, ``click``, ``type``, ``select``, ``submit``, ``scroll`` and a final ``answer``,
each action with its target's role, accessible name and CSS path. The agent turns each into one
BrowserGym action on the current observation, finding the target again by role and name (CSS path
to choose among equals; CSS path and role alone when the target had no name) rather than by bid.

- ``navigate`` is skipped when it is the start page, when the page is already there, or when it
  follows a click or a form submission (the action caused it; its URL may hold ids the live site
  assigned, such as an order number); else it becomes ``goto(url)``.
- ``submit`` after a click is skipped (the click submitted); otherwise it presses Enter in the last
  field typed into.
- ``scroll`` is skipped: targets are found in the whole page, not the viewport.
- ``answer`` becomes ``send_msg_to_user(text)`` only if every evidence string of the answer was
  shown by some page of this episode; otherwise ``report_infeasible(...)`` names what is missing.
  That is how ``tasks validate`` catches an expired task: the archive no longer shows the facts
  the ground truth rests on.
- A target that cannot be found ends the episode with ``report_infeasible(...)`` naming it.
"""

from __future__ import annotations

from urllib.parse import urldefrag

from .base import Agent, AgentError, TaskView, norm, quote

ACTIONS = ("click", "type", "select")


def _same_url(a: str, b: str) -> bool:
    return urldefrag(a or "")[0].rstrip("/") == urldefrag(b or "")[0].rstrip("/")


def find_target(elements: list[dict], target: dict) -> dict | None:
    """The observation element matching a recorded target, or None.

    With a name: same role and the same name (exact first, then the recorded name contained in the
    element's, e.g. a link whose image repeats its text); among several, the one at the recorded CSS
    path, else the first in document order. Without a name: same role at the same CSS path.
    """
    role, name, css = target.get("role"), norm(target.get("name")), target.get("css")
    same_role = [e for e in elements if e.get("role") == role]
    if not name:
        return next((e for e in same_role if e.get("css") == css), None)
    for test in (lambda e: norm(e.get("name")) == name, lambda e: name in norm(e.get("name"))):
        found = [e for e in same_role if test(e)]
        if found:
            return next((e for e in found if e.get("css") == css), found[0])
    return None


class ReferenceAgent(Agent):
    """The oracle: it receives the reference trajectory (``oracle = True``); its runs are the upper
    bound, labelled so in manifests and reports."""

    name = "reference"
    oracle = True

    def __init__(self):
        self.steps: list[dict] = []
        self.pos = 0
        self.seen: list[str] = []
        self.last_typed: str | None = None
        self.last_kind: str | None = None

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
        self.last_typed = None
        self.last_kind = None

    def _caused_by_action(self) -> bool:
        """Whether the navigate step just read follows a click or a form submission."""
        for prev in reversed(self.steps[:self.pos - 1]):
            kind = prev.get("action")
            if kind in ("navigate", "scroll"):
                continue
            return kind in ("click", "submit")
        return False

    def act(self, obs: dict) -> dict:
        self.seen.append(norm(obs.get("axtree_text")))
        while self.pos < len(self.steps):
            step = self.steps[self.pos]
            self.pos += 1
            kind = step.get("action")
            n = step.get("step", self.pos - 1)
            if kind == "navigate":
                # the start page, a page already open, or the result of the action before (whose URL
                # may hold ids the live site assigned, like an order number): nothing to do
                if self.pos == 1 or _same_url(obs.get("url"), step.get("url")) or self._caused_by_action():
                    continue
                self.last_kind = "goto"
                return {"action": f"goto({quote(step['url'])})", "thought": f"reference step {n}: open {step['url']}"}
            if kind == "submit":
                if self.last_kind == "click" or self.last_typed is None:
                    continue
                self.last_kind = "press"
                return {"action": f"press({quote(self.last_typed)}, 'Enter')",
                        "thought": f"reference step {n}: submit the form"}
            if kind == "scroll":
                continue
            if kind in ACTIONS:
                target = step.get("target") or {}
                el = find_target(obs.get("elements") or [], target)
                if el is None:
                    what = f"{target.get('role')} {target.get('name')!r}"
                    return {"action": f"report_infeasible({quote(f'reference step {n}: no {what} on this page')})",
                            "thought": f"reference step {n}: target {what} not found on {obs.get('url')}"}
                bid = el["bid"]
                self.last_kind = kind
                thought = f"reference step {n}: {kind} {target.get('role')} {target.get('name')!r}"
                if kind == "click":
                    return {"action": f"click({quote(bid)})", "thought": thought}
                if kind == "type":
                    self.last_typed = bid
                    return {"action": f"fill({quote(bid)}, {quote(step.get('value') or '')})", "thought": thought}
                value = step.get("value") or {}
                choice = value.get("value") if isinstance(value, dict) else value
                return {"action": f"select_option({quote(bid)}, {quote(choice or '')})", "thought": thought}
            if kind == "answer":
                value = step.get("value") or {}
                text = value.get("text", "") if isinstance(value, dict) else str(value)
                evidence = value.get("evidence", []) if isinstance(value, dict) else []
                missing = [e for e in evidence if not any(norm(e) in page for page in self.seen)]
                if missing:
                    reason = f"reference step {n}: the pages did not show {missing[0]!r}"
                    return {"action": f"report_infeasible({quote(reason)})", "thought": reason}
                return {"action": f"send_msg_to_user({quote(text)})",
                        "thought": f"reference step {n}: answer (evidence seen: {len(evidence)})"}
            # unknown step kinds (a newer recorder) are skipped
        return {"action": "send_msg_to_user('done')", "thought": "reference trajectory replayed to its end"}
