"""The ``context`` group: filler pools for the long-context condition (docs/long-context.md).

Registered on the main CLI in ``webfreeze/cli/__init__.py``.
"""

from __future__ import annotations

import json

import click

from webfreeze.runs.context import build_pool, read_pool, write_pool


@click.group("context")
def context_group() -> None:
    """Filler pools for long-context runs (bench run --context)."""


@context_group.command("pool")
@click.argument("sources", metavar="RUN_DIR|POOL.jsonl...", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Pool file to write (JSONL).")
@click.option("--tokenizer", default="cl100k_base", show_default=True, help="Tokenizer that counts each entry.")
@click.option("--min-steps", type=click.IntRange(1), default=1, show_default=True,
              help="Leave out trajectories with fewer steps.")
@click.option("--any-agent", is_flag=True,
              help="Keep trajectories with neither LLM calls nor thoughts (e.g. a keyword baseline's); by default "
                   "a pool holds an agent's reasoning, as the paper's does.")
def context_pool(sources, output, tokenizer, min_steps, any_agent):
    """Collect the trajectories of finished runs (RUN_DIR) into a filler pool file: per step
    the URL, action, thought and reflection; per trajectory its instruction, answer and final URL,
    and its size in tokens. A pool file among the sources adds its entries and sources (pools
    merge). The same task several times gives TASK, TASK~2, ... in the order the sources are given."""
    header, entries = build_pool(list(sources), tokenizer=tokenizer, min_steps=min_steps,
                                 reasoning=not any_agent)
    if not entries:
        raise click.ClickException(f"no trajectory in {', '.join(sources)} qualifies for a pool (at least {min_steps} "
                                   f"step(s){'' if any_agent else ', LLM calls or a thought'})")
    write_pool(output, header, entries)
    click.echo(f"wrote {output}: {header['entries']} trajectories, {header['tokens']} tokens ({header['tokenizer']})",
               err=True)


@context_group.command("info")
@click.argument("pool", metavar="POOL", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def context_info(pool, as_json):
    """What a pool file holds: entries, tokens, the largest target it can fill, its digest."""
    p = read_pool(pool)
    sizes = sorted(e.get("tokens") or 0 for e in p.entries)
    info = {"pool": pool, "digest": p.digest, "tokenizer": p.header.get("tokenizer"), "entries": len(p.entries),
            "tokens": p.tokens, "tasks": len({e.get("task_id") or e["id"] for e in p.entries}),
            "steps": sum(len(e["steps"]) for e in p.entries),
            "steps_with_thought": sum(1 for e in p.entries for s in e["steps"] if s.get("thought")),
            "steps_with_reflection": sum(1 for e in p.entries for s in e["steps"] if s.get("reflection")),
            "entry_tokens": {"min": sizes[0] if sizes else 0, "max": sizes[-1] if sizes else 0},
            "sources": p.header.get("sources") or []}
    if as_json:
        click.echo(json.dumps(info, indent=2, sort_keys=True, ensure_ascii=False))
        return
    click.echo(f"{pool}: {info['entries']} trajectories of {info['tasks']} tasks, {info['tokens']} tokens "
               f"({info['tokenizer']}), {info['steps']} steps ({info['steps_with_thought']} with a thought, "
               f"{info['steps_with_reflection']} with a reflection); digest {info['digest']}")
