"""The user's history as an environment action, and the LLM agent's history schemes.

The environment tests use a small history object written here (its ``search`` returns entries we
choose): what is under test is how the environment answers, records and budgets the action. Real
retrieval (MiniLM + FAISS) is tested in test_personas_retrieval.py and end to end in
test_personas_run.py. The agent tests talk to a real OpenAI-compatible server on 127.0.0.1 with
scripted replies (tests/support/llm_server.py).
"""

from __future__ import annotations

import json

import pytest
from llm_server import ChatServer, completion

from webfreeze.agents.base import TaskView
from webfreeze.agents.llm_agent import LLMAgent, planner_queries
from webfreeze.demo import ARCHIVE as DEMO_ARCHIVE
from webfreeze.demo import SUITE
from webfreeze.simulator.actions import format_action, parse_action, try_parse
from webfreeze.simulator.env import EnvConfig, WebEnv

ENTRIES = [
    {"id": "p01-00003", "score": 0.81, "timestamp": "2024-02-01 10:11:12", "type": "purchase",
     "object": "Acme Running Shoe, size 42", "website": "shop.test"},
    {"id": "p01-00007", "score": 0.64, "timestamp": "2024-02-03 19:00:00", "type": "review & rating",
     "object": "Acme Running Shoe: 5 stars", "website": "shop.test", "status": "modified"},
]


class History:
    """A user's history: every search returns ENTRIES (and remembers the queries)."""

    def __init__(self):
        self.queries: list[str] = []

    def search(self, query: str) -> list[dict]:
        self.queries.append(query)
        return [dict(e) for e in ENTRIES]

    def identity(self) -> dict:
        return {"history_digest": "sha256:test", "model": "none", "key_fields": ["type", "object"],
                "k": 20, "threshold": 0.5}


# ------------------------------------------------------------------------------------------ actions
@pytest.mark.parametrize("text, dialect", [
    ("history_search('running shoes I bought')", "browsergym"),
    ("HistorySearch; running shoes I bought", "webvoyager"),
    ("HistorySearch [running shoes I bought]", "webvoyager"),
    ("history_search [running shoes I bought]", "webarena"),
])
def test_history_search_in_every_dialect(text, dialect):
    action = parse_action(text)
    assert (action.kind, action.text, action.dialect) == ("history_search", "running shoes I bought", dialect)
    again = parse_action(format_action(action, dialect))
    assert (again.kind, again.text) == ("history_search", "running shoes I bought")


@pytest.mark.parametrize("text", ["history_search('')", "HistorySearch;", "history_search []", "history_search()"])
def test_a_history_search_needs_a_query(text):
    action, error = try_parse(text)
    assert action is None and "query" in error


def test_a_history_search_in_prose_is_found():
    action = parse_action("Thought: I should check what the user likes.\nAction: history_search('shoe size')")
    assert action.kind == "history_search" and action.text == "shoe size"
    assert action.thought == "I should check what the user likes."


# ------------------------------------------------------------------------------------------ environment
@pytest.fixture
def env(demo_suite_tasks):
    e = WebEnv(EnvConfig(DEMO_ARCHIVE, backend="text", max_steps=3, max_history=2))
    yield e
    e.close()


@pytest.fixture
def demo_suite_tasks():
    lines = (SUITE / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    return {t["id"]: t for t in map(json.loads, lines)}


def shop_task(tasks: dict) -> dict:
    task = dict(next(t for t in tasks.values() if t["id"].startswith("shop-")))
    task["persona"] = "p01"
    return task


def test_a_history_search_is_answered_recorded_and_not_a_step(env, demo_suite_tasks):
    history = History()
    obs, _ = env.reset(options={"task": shop_task(demo_suite_tasks), "history": history})
    assert obs["history"] == "" and obs["history_results"] == []
    tree_before = obs["axtree_text"]
    obs, reward, terminated, truncated, info = env.step("history_search('running shoes')",
                                                         agent={"thought": "what size do they wear?"})
    assert history.queries == ["running shoes"]
    assert (terminated, truncated, obs["step"]) == (False, False, 0)
    assert obs["history_results"] == ENTRIES and obs["axtree_text"] == tree_before
    assert "[p01-00003]" in obs["history"] and "(modified)" in obs["history"] and obs["last_action_error"] == ""
    assert env.observation_space.contains(obs)
    obs, *_ = env.step("scroll(0, 300)")
    assert obs["step"] == 1 and obs["history"] == "" and obs["history_results"] == []
    traj = env.trajectory(stopped=True)
    first, second = traj["steps"]
    assert first["kind"] == "history" and "kind" not in second
    assert first["history"] == {"query": "running shoes", "results": ENTRIES, "k": 20, "threshold": 0.5}
    assert first["agent_fields"]["thought"] == "what size do they wear?"
    assert first["parsed"]["kind"] == "history_search"
    assert traj["env"]["history"]["history_digest"] == "sha256:test" and traj["env"]["max_history"] == 2


def test_searches_past_the_budget_are_refused_and_count_as_steps(env, demo_suite_tasks):
    env.reset(options={"task": shop_task(demo_suite_tasks), "history": History()})
    for _ in range(2):
        obs, *_ = env.step("history_search('shoes')")
        assert obs["step"] == 0
    obs, _, terminated, truncated, _ = env.step("history_search('shoes')")
    assert obs["step"] == 1 and "the most allowed" in obs["last_action_error"]
    env.step("history_search('shoes')")
    obs, _, terminated, truncated, _ = env.step("history_search('shoes')")
    assert truncated and not terminated  # refused searches use up the step budget: the episode ends
    kinds = [s.get("kind") for s in env.trajectory()["steps"]]
    assert kinds == ["history", "history", None, None, None]


def test_without_a_history_the_search_is_a_failed_step(env, demo_suite_tasks):
    obs, _ = env.reset(options={"task": shop_task(demo_suite_tasks)})
    obs, *_ = env.step("history_search('shoes')")
    assert obs["step"] == 1 and "no user history" in obs["last_action_error"]
    traj = env.trajectory(stopped=True)
    assert "history" not in traj["env"] and "kind" not in traj["steps"][0]


def test_a_history_per_task_from_a_callable(demo_suite_tasks):
    made = []

    def provider(task):
        made.append(task.get("persona"))
        return History() if task.get("persona") else None

    e = WebEnv(EnvConfig(DEMO_ARCHIVE, backend="text", max_steps=3, history=provider))
    try:
        e.reset(options={"task": shop_task(demo_suite_tasks)})
        obs, *_ = e.step("history_search('x')")
        assert obs["history_results"] == ENTRIES
        plain = dict(shop_task(demo_suite_tasks), persona=None)
        e.reset(options={"task": plain})
        obs, *_ = e.step("history_search('x')")
        assert "no user history" in obs["last_action_error"]
        assert made == ["p01", None]
    finally:
        e.close()


# ------------------------------------------------------------------------------------------ agent schemes
class Scripted(ChatServer):
    """Replies chosen by the request's purpose: the planner, the generator, or the acting model."""

    def __init__(self, act_replies: list[str], planner: str = "Query: shoe size\nQuery: favourite shoe brand",
                 generator: str = "The user shops on shop.test and wears Acme shoes in size 42."):
        queue = list(act_replies)

        def respond(request):
            text = request["messages"][-1]["content"]
            text = text if isinstance(text, str) else text[0]["text"]
            if "search queries" in text and "Query:" in text:
                reply = planner
            elif "These records come from the user's past activity" in text:
                reply = generator
            else:
                reply = queue.pop(0) if len(queue) > 1 else queue[0]
            return 200, completion(reply, 10, 5, model="scripted")
        super().__init__(respond)


@pytest.fixture
def server_factory():
    servers = []

    def start(*args, **kw):
        servers.append(Scripted(*args, **kw))
        return servers[-1]
    yield start
    for s in servers:
        s.close()


TASK = TaskView(id="p01-shop", instruction="Buy me running shoes", start_url="http://shop.test/",
                handles={"persona": "p01"})


def page(step: int, results=None) -> dict:
    return {"url": "http://shop.test/", "title": "Shop", "goal": TASK.instruction,
            "axtree_text": "RootWebArea 'Shop'\n\t[3] searchbox 'Search'", "elements": [], "screenshot": None,
            "open_pages": [], "last_action_error": "", "step": step,
            "history": "", "history_results": results or []}


def test_on_demand_passes_each_answer_through_the_generator(server_factory):
    server = server_factory(["Thought: I need their size\nAction: history_search('shoe size')",
                             "Thought: search\nAction: fill('3', 'Acme running shoe 42')"])
    agent = LLMAgent(model="scripted", base_url=server.url, dialect="browsergym", scheme="on-demand")
    agent.reset(TASK)
    assert "history_search('query')" in agent.system
    out = agent.act(page(0))
    assert out["action"] == "history_search('shoe size')" and out["scheme"] == "on-demand"
    out = agent.act(page(0, results=ENTRIES))
    assert out["generator_output"] == "The user shops on shop.test and wears Acme shoes in size 42."
    assert out["action"] == "fill('3', 'Acme running shoe 42')"
    generator_request, act_request = server.requests[1], server.requests[2]
    assert "Acme Running Shoe, size 42 on shop.test" in generator_request["messages"][-1]["content"]
    assert "(modified)" in generator_request["messages"][-1]["content"]
    assert "What the user's history shows: The user shops on shop.test" in act_request["messages"][-1]["content"]
    assert agent.config()["scheme"] == "on-demand" and agent.config()["scheme_prompt_digest"].startswith("sha256:")


def test_pre_execution_searches_first_then_acts_on_an_enhanced_task(server_factory):
    server = server_factory(["Thought: search\nAction: fill('3', 'Acme running shoe 42')"])
    agent = LLMAgent(model="scripted", base_url=server.url, dialect="browsergym", scheme="pre-execution",
                     history_queries=2)
    agent.reset(TASK)
    assert "history_search" not in agent.system
    first = agent.act(page(0))
    assert first["action"] == "history_search('shoe size')"
    assert first["planner_queries"] == ["shoe size", "favourite shoe brand"]
    second = agent.act(page(0, results=ENTRIES[:1]))
    assert second["action"] == "history_search('favourite shoe brand')"
    third = agent.act(page(0, results=ENTRIES))
    assert third["action"] == "fill('3', 'Acme running shoe 42')"
    assert third["enhanced_task"].startswith("Buy me running shoes\nWhat the user's history shows: The user shops")
    generator_text = server.requests[1]["messages"][-1]["content"]
    assert generator_text.count("p01") == 0 and generator_text.count("Acme Running Shoe, size 42") == 1  # no repeats
    assert third["enhanced_task"] in server.requests[2]["messages"][-1]["content"]
    later = agent.act(page(1))
    assert "generator_output" not in later and len(server.requests) == 4  # no access after the start


def test_no_history_is_the_agent_as_before(server_factory):
    server = server_factory(["Thought: search\nAction: fill('3', 'shoes')"])
    agent = LLMAgent(model="scripted", base_url=server.url, dialect="browsergym")
    agent.reset(TASK)
    out = agent.act(page(0))
    assert "scheme" not in out and "scheme" not in agent.config()
    assert "history_search" not in server.requests[0]["messages"][0]["content"]


def test_ranking_candidates_are_shown_to_the_agent(server_factory):
    server = server_factory(['Thought: rank\nAction: send_msg_to_user(\'["b", "a", "c", "d", "e"]\')'])
    agent = LLMAgent(model="scripted", base_url=server.url, dialect="browsergym")
    view = TaskView(id="r1", instruction="Rank these for me", handles={
        "candidates": [{"id": "a", "name": "Acme Running Shoe", "price": 80.0}, {"id": "b", "name": "Dune Sandal"}]})
    agent.reset(view)
    agent.act(page(0))
    text = server.requests[0]["messages"][-1]["content"]
    assert "- a: Acme Running Shoe (price: 80.0)" in text and "- b: Dune Sandal" in text


@pytest.mark.parametrize("reply, n, expected", [
    ("Query: shoe size\nQuery: brand", 3, ["shoe size", "brand"]),
    ("1. Query: 'shoe size'\n2. Query: shoe size\nQuery 3: hotels", 3, ["shoe size", "hotels"]),
    ("shoe size\nbrand\ncolour\nprice", 2, ["shoe size", "brand"]),
    ("", 3, []),
])
def test_planner_queries(reply, n, expected):
    assert planner_queries(reply, n) == expected


def test_bad_scheme_settings_are_refused():
    from webfreeze.agents.base import AgentError

    with pytest.raises(AgentError, match="unknown scheme 'sometimes'"):
        LLMAgent(model="x", base_url="http://127.0.0.1:1/v1", scheme="sometimes")
    with pytest.raises(AgentError, match="history_queries"):
        LLMAgent(model="x", base_url="http://127.0.0.1:1/v1", scheme="pre-execution", history_queries=0)
