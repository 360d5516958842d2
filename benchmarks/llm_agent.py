"""The LLM layer: cassette lookups, the demo's LLM run from its cassette, the local model per step.

- **cassette lookup**: a cassette holding 10,000 calls (requests of ~2 KB, as an agent's prompts
  are), then 2,000 lookups of stored keys in random order through ``Cassette.lookup``: median and
  p90 per lookup against the issue's absolute goal (p50 <= 1 ms; the "anchor" is that goal, named so).
- **demo LLM run from its cassette vs the reference agent**: ``bench run`` of the LLM agent on the
  demo's LLM tasks (browser backend, one worker), every call replayed strictly from the shipped
  cassette, against the reference agent (the oracle) on the same tasks in the same way, alternated
  over rounds; goal <= 1.2x. Both start a browser; the runs' ``elapsed_s`` are compared.
- **local model per agent step** (reported, no goal): the LLM agent live on the local model
  (SmolLM2-135M on llama.cpp, started for the run) on two demo tasks, 3 steps each, median time of
  an agent step (its LLM calls) against the median environment step of the same run.
"""

from __future__ import annotations

import json
import random
import statistics
import time

from . import Context, Row, console, percentile

NAME = "llm_agent"
TITLE = "LLM cassette lookups, the demo LLM run from its cassette, local model latency"
BENCH = "7 llm"
CALLS = 10_000
LOOKUPS = 2_000
LOOKUP_GOAL_MS = 1.0
ROUNDS = 3
FIXED = "anchor is the goal, not a measurement"


def _cassette_lookup(ctx: Context) -> list[Row]:
    from webfreeze.llm import Cassette
    from webfreeze.llm.cassette import canonical_request, text_key

    path = ctx.scratch / "bench-cassette.sqlite"
    for suffix in ("", "-wal", "-shm"):
        (ctx.scratch / f"{path.name}{suffix}").unlink(missing_ok=True)
    rng = random.Random(7)
    filler = " ".join(f"[{i}] link 'item {i}'" for i in range(120))  # ~2 KB, an observation's size
    keys = []
    with Cassette(path, "record") as cas:
        for i in range(CALLS):
            text = canonical_request({"model": "m", "messages": [{"role": "user", "content": f"{i} {filler}"}],
                                      "temperature": 0.0, "seed": 0})
            key = text_key(text)
            cas.store(key, 0, text, {"text": f"Action: Click [{i}]", "finish_reason": "stop",
                                     "usage": {"prompt_tokens": 500, "completion_tokens": 8}},
                      task_id=f"t{i % 80}", step=i % 10, purpose="act")
            keys.append(key)
    order = [rng.choice(keys) for _ in range(LOOKUPS)]
    times = []
    with Cassette(path, "replay") as cas:
        for key in order[:100]:  # warm the page cache
            cas.lookup(key, 0)
        for key in order:
            t0 = time.perf_counter()
            found = cas.lookup(key, 0)
            times.append((time.perf_counter() - t0) * 1000)
            assert found is not None
    times.sort()
    p50, p90 = percentile(times, 50), percentile(times, 90)
    ctx.details["cassette_lookup"] = {"calls": CALLS, "lookups": LOOKUPS, "p50_ms": p50, "p90_ms": p90}
    return [Row(BENCH, f"cassette lookup p50 ({CALLS:,} calls stored)", p50, LOOKUP_GOAL_MS,
                f"fixed goal {LOOKUP_GOAL_MS:g} ms", "ms", "lower", 1.0, note=FIXED),
            Row(BENCH, f"cassette lookup p90 ({CALLS:,} calls stored)", p90, LOOKUP_GOAL_MS,
                f"fixed goal {LOOKUP_GOAL_MS:g} ms", "ms", "lower", None, note=FIXED)]


def _demo_replay_vs_reference(ctx: Context) -> list[Row]:
    from webfreeze.demo import CASSETTE, LLM_MAX_STEPS, LLM_SETTINGS, LLM_TASKS, SUITE
    from webfreeze.runs.execute import run

    if not CASSETTE.is_file():
        console.print("  [yellow]no demo cassette: skipping the replay row[/]")
        return []
    llm_s, ref_s = [], []
    for i in range(ROUNDS):
        for agent, into in (("llm", llm_s), ("reference", ref_s)):
            out = ctx.scratch / f"demo-{agent}-{i}"
            kw = dict(agent_config=LLM_SETTINGS, cassette=str(CASSETTE), cassette_mode="replay",
                      max_steps=LLM_MAX_STEPS) if agent == "llm" else {}
            console.print(f"  {agent} on the demo's LLM tasks, round {i + 1}/{ROUNDS}")
            manifest = run(SUITE, agent, out, tasks=list(LLM_TASKS), backend="browser", **kw)
            into.append(manifest["elapsed_s"])
    llm, ref = statistics.median(llm_s), statistics.median(ref_s)
    ctx.details["demo_replay"] = {"llm_s": llm_s, "reference_s": ref_s, "tasks": len(LLM_TASKS)}
    return [Row(BENCH, f"demo LLM run from its cassette ({len(LLM_TASKS)} tasks, browser)", llm, ref,
                "reference agent, same tasks", "s", "lower", 1.2)]


def _local_model_step(ctx: Context) -> list[Row]:
    from webfreeze.demo import LLM_SETTINGS, SUITE
    from webfreeze.runs.execute import run

    out = ctx.scratch / "local-live"
    console.print("  the LLM agent live on the local model (2 tasks, 3 steps each)")
    try:
        run(SUITE, "llm", out, tasks=["scholar-site-info-001", "shop-001"], backend="text", max_steps=3,
            agent_config=LLM_SETTINGS, cassette_mode="record")
    except Exception as exc:  # no local model here (the `agents` extra is not installed)
        console.print(f"  [yellow]local model unavailable: {exc}[/]")
        return []
    agent_ms, env_ms = [], []
    for path in sorted((out / "trajectories").glob("*.json")):
        for step in json.loads(path.read_text())["steps"]:
            agent_ms.append(step["timing"]["agent_ms"])
            env_ms.append(step["timing"]["env_ms"])
    a, e = statistics.median(agent_ms), statistics.median(env_ms)
    ctx.details["local_model_step"] = {"agent_ms": agent_ms, "env_ms": env_ms}
    return [Row(BENCH, "local model: agent step p50 (SmolLM2-135M, 2 cores)", a, e, "env step (text backend)", "ms",
                "lower", None, note="reported: a 135M model on CPU")]


def run(ctx: Context) -> list[Row]:
    return _cassette_lookup(ctx) + _demo_replay_vs_reference(ctx) + _local_model_step(ctx)
