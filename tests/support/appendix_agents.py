"""A scripted agent for the Appendix D end-to-end test (``appendix_agents:ScriptedAgent``, tests/ on
the path): each task id names a script of plain BrowserGym actions, played on the real observation
(elements found by role and name), so that the trajectories are the environment's own, replay
provenance and errors included. It reads only its task view's id; the scripts are the test's."""

from __future__ import annotations

from webfreeze.agents.base import Agent, AgentError, norm, quote

# task id -> steps: ("goto", url), ("fill", role, name, text), ("press", role, name, key),
# ("select", name, value), ("click", role, name), ("answer", text), each optionally ending with a
# dict of agent fields ({"thought": ...}). Played on the demo archive's pages (tests/eval/
# test_eval_appendix_d_run.py has the tasks).
THAI_ANY_CITY = "http://booking.test/search?kind=restaurant&city=&q=Thai"
SCRIPTS: dict[str, list[tuple]] = {
    # D.1: a goto the replay answers with its miss page; then one that loads the shop
    "e2e-d1-miss": [("goto", "http://shop.test/no-such-page"), ("answer", "Here are the boots.")],
    "e2e-d1-reached": [("goto", "http://shop.test/"), ("answer", "Here are the boots.")],
    # D.2: the brand typed into the shop's own search box
    "e2e-d2-search": [("fill", "searchbox", "Search products", "Juniper boots"),
                      ("press", "searchbox", "Search products", "Enter"), ("answer", "Found boots.")],
    # D.2.1: the city chosen in the site's search form; the city only in a thought and the answer
    "e2e-d21-form": [("select", "City", "Toronto"), ("select", "Type", "Thai"),
                     ("click", "button", "Find restaurants"), ("answer", "Thai restaurants are listed.")],
    "e2e-d21-thought": [("goto", THAI_ANY_CITY, {"thought": "The user lives in Toronto and likes Thai food"}),
                        ("answer", "Thai restaurants for you in Toronto are listed.")],
    # D.3: added to the cart, nothing says otherwise (undecided); said so without the click (0)
    "e2e-d3-added": [("select", "Size", "38", {"thought": "The Juniper brand boots, in size 38"}),
                     ("click", "button", "Add to cart"), ("answer", "Added the Juniper boots to your cart.")],
    "e2e-d3-no-click": [("answer", "Added the Juniper boots to your cart.")],
}


class ScriptedAgent(Agent):
    name = "scripted"

    def reset(self, task) -> None:
        tid = task.get("id")
        if tid not in SCRIPTS:
            raise AgentError(f"no script for task {tid!r}")
        self.steps = list(SCRIPTS[tid])

    def _bid(self, obs: dict, role: str | None, name: str) -> str:
        for e in obs.get("elements") or []:
            if (role is None or e.get("role") == role) and norm(e.get("name")) == norm(name):
                return str(e["bid"])
        raise AgentError(f"no {role or 'element'} named {name!r} on {obs.get('url')}")

    def act(self, obs: dict) -> dict:
        if not self.steps:
            return {"action": f"send_msg_to_user({quote('Done')})"}
        step = self.steps.pop(0)
        fields = step[-1] if isinstance(step[-1], dict) else {}
        step = step[:-1] if fields else step
        kind = step[0]
        if kind == "goto":
            action = f"goto({quote(step[1])})"
        elif kind == "fill":
            action = f"fill({quote(self._bid(obs, step[1], step[2]))}, {quote(step[3])})"
        elif kind == "press":
            action = f"press({quote(self._bid(obs, step[1], step[2]))}, {quote(step[3])})"
        elif kind == "select":
            action = f"select_option({quote(self._bid(obs, 'combobox', step[1]))}, {quote(step[2])})"
        elif kind == "click":
            action = f"click({quote(self._bid(obs, step[1], step[2]))})"
        elif kind == "answer":
            action = f"send_msg_to_user({quote(step[1])})"
        else:
            raise AgentError(f"unknown scripted step {kind!r}")
        return {"action": action, **fields}
