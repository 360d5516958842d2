"""The ``bench`` group (run suites, compare runs).

Registered on the main CLI in ``webfreeze/cli/__init__.py``.
"""

from __future__ import annotations

import json
import sys

import click

from webfreeze.agents import AgentError, check_agent
from webfreeze.cli.options import (
    executor_options,
    http_credentials_option,
    known_agent,
    llm_settings,
    pairs,
    task_options,
)
from webfreeze.common.resolve import ResolveError, parse_resolve
from webfreeze.runs.compare import compare_runs, describe_settings, describe_versions
from webfreeze.runs.console import console, print_report, run_suite, suite_backend
from webfreeze.runs.context import ContextError, check_context
from webfreeze.simulator.backends import BACKENDS
from webfreeze.simulator.site_models import check_site_models


def context_options(fn):
    """``--context none|25k|N`` and the pool, tokenizer, A1 run and seed of the condition."""
    fn = click.option("--context-seed", type=int, default=None, metavar="N",
                      help="Seed of the fillers' order [default: 0].")(fn)
    fn = click.option("--context-a1-run", type=click.Path(file_okay=False), default=None, metavar="DIR",
                      help="Take each A1's trajectory from this finished run instead of running A1 here.")(fn)
    fn = click.option("--context-tokenizer", default=None, metavar="NAME",
                      help="Tokenizer that counts the context [default: cl100k_base].")(fn)
    fn = click.option("--context-pool", type=click.Path(dir_okay=False), default=None, metavar="FILE",
                      help="Filler pool (webfreeze context pool) [default: the shipped demo pool].")(fn)
    return click.option("--context", default=None, metavar="none|25k|N",
                        help="Long-context condition for tasks with depends_on: their prior context is A1's "
                             "trajectory, then pool trajectories up to N tokens (none: no fillers), then the "
                             "task; they start where the last injected trajectory ended. "
                             "See docs/long-context.md.")(fn)


def context_condition(tokens, pool, tokenizer, a1_run, seed) -> dict:
    """``RunSpec.context`` from the command line's options ({} without ``--context``)."""
    if tokens is None:
        given = [n for n, v in (("--context-pool", pool), ("--context-tokenizer", tokenizer),
                                ("--context-a1-run", a1_run), ("--context-seed", seed)) if v is not None]
        if given:
            raise click.BadParameter(f"{given[0]} goes with --context none|25k|N", param_hint=given[0])
        return {}
    raw = {"tokens": tokens}
    raw.update({k: v for k, v in (("pool", pool), ("tokenizer", tokenizer), ("a1_run", a1_run), ("seed", seed))
                if v is not None})
    try:
        return check_context(raw)
    except ContextError as exc:
        key = str(exc).split(":", 1)[0].removeprefix("context.")
        hint = {"pool": "--context-pool", "tokenizer": "--context-tokenizer", "a1_run": "--context-a1-run",
                "seed": "--context-seed"}.get(key, "--context")
        raise click.BadParameter(str(exc), param_hint=hint) from None


# ==================================================================================== bench
@click.group("bench")
def bench_group() -> None:
    """Run agents on task suites over an archive, and compare runs."""


@bench_group.command("run")
@click.argument("suite", metavar="SUITE", type=click.Path())
@click.option("--archive", "archive", type=click.Path(dir_okay=False),
              help="Archive to replay (default: the one the suite's manifest names).")
@click.option("--agent", required=True, callback=known_agent,
              help="reference (the oracle: replays reference trajectories; the upper bound), keyword (a non-LLM "
                   "baseline), llm (the LLM agent), package.module:Class, or an installed webfreeze.agents entry point.")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Run directory (created; an interrupted run there resumes).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Episodes in parallel, one process and one environment each.")
@click.option("--backend", type=click.Choice(BACKENDS), default=None,
              help="browser or text [default: the suite manifest's backend, else browser].")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the page runtime (Math.random...).")
@click.option("--max-steps", type=click.IntRange(1, 1000), default=30, show_default=True)
@click.option("--screenshots", is_flag=True, help="Keep a PNG per step (browser backend).")
@click.option("--agent-config", "agent_config", multiple=True, metavar="KEY=VALUE",
              help="Agent setting (JSON value or text; keyword takes max_clicks, reference none); repeatable.")
@click.option("--site-model", "site_models", multiple=True, metavar="HOST=KIND",
              help="Serve HOST's stateful pages from a simulated site (shop, shop2, booking, dine, hotels, clinic); "
                   "repeatable.")
@task_options
@click.option("--llm", "llm", metavar="local|MODEL@BASE_URL",
              help="The LLM agent's model: 'local' (the embedded SmolLM2-135M, started for the run; the default) "
                   "or any OpenAI-compatible endpoint, e.g. gpt-4o-mini@https://api.openai.com/v1.")
@click.option("--llm-key-env", metavar="NAME", help="Environment variable holding the endpoint's API key "
                                                     "(default OPENAI_API_KEY for a MODEL@BASE_URL).")
@click.option("--no-api-key", is_flag=True, help="The MODEL@BASE_URL endpoint needs no API key (e.g. a server on "
                                                 "this machine): none is read or sent.")
@click.option("--cassette", type=click.Path(dir_okay=False),
              help="LLM cassette file (default: RUN_DIR/llm-cassette.sqlite).")
@click.option("--cassette-mode", type=click.Choice(["record", "replay", "auto"]), default="record", show_default=True,
              help="record: call the model and store; replay: answer only from the cassette (a request not in it "
                   "is an error); auto: replay what is stored, call the rest.")
@click.option("--llm-concurrency", type=click.IntRange(1, 256), default=None,
              help="LLM calls in flight at once across all workers (default: the agent's setting).")
@click.option("--persona", "persona", type=click.Path(file_okay=False),
              help="Persona folder (webfreeze personas generate): the users whose histories personalised tasks "
                   "search with history_search(...) (default: the one the suite's manifest names). Agents get "
                   "the persona's id, never its profile.")
@click.option("--history-k", type=click.IntRange(1, 1000), default=None,
              help="History entries a search returns at most [default: 20, as Persona2Web].")
@click.option("--history-threshold", type=click.FloatRange(-1, 1), default=None,
              help="Lowest similarity of a returned entry [default: 0.5].")
@click.option("--history-model", default=None, metavar="NAME|PATH",
              help="sentence-transformers model for history retrieval, on disk [default: all-MiniLM-L6-v2].")
@click.option("--key-fields", default=None, metavar="F,F",
              help="History fields embedded per entry [default: type,object; all: timestamp,type,object,website].")
@executor_options
@context_options
@click.option("--no-report", is_flag=True, help="Do not score the run at the end.")
# --- live runs (webfreeze/runs/live.py, docs/live.md)
@click.option("--live", is_flag=True, help="Drive the live sites through the recording proxy and record every request "
                                           "into --record-into (one capture session per episode): the run becomes its "
                                           "own frozen benchmark.")
@click.option("--patch-from-live", is_flag=True, help="Replay the archive; fetch what it misses live through the "
                                                      "recorder into a copy (--record-into), never the input file.")
@click.option("--record-into", type=click.Path(dir_okay=False), default=None, metavar="ARCHIVE",
              help="The archive a live run records into [default: RUN_DIR/live.wfz; patching: RUN_DIR/patched.wfz].")
@click.option("--resolve", "resolve", multiple=True, metavar="HOST[:PORT]=ADDRESS:PORT",
              help="Live runs: connect to ADDRESS:PORT for HOST while URLs keep HOST (as record's); repeatable.")
@http_credentials_option
def bench_run(suite, archive, agent, out, workers, backend, seed, max_steps, screenshots, agent_config, site_models,
              task_globs, limit, llm, llm_key_env, no_api_key, cassette, cassette_mode, llm_concurrency, persona,
              history_k, history_threshold, history_model, key_fields, executor, ray_address, episode_timeout, retries,
              context, context_pool, context_tokenizer, context_a1_run, context_seed, no_report,
              live, patch_from_live, record_into, resolve, http_credentials):
    """Run AGENT on every task of SUITE against the replayed archive; write RUN_DIR.

    RUN_DIR gets manifest.json (archive and suite digests, agent config, versions), tasks.jsonl,
    one trajectory per task in trajectories/, then report.json and report.html (unless
    --no-report). Rerunning the same command on an interrupted run finishes it.
    """
    models = {k: str(v) for k, v in pairs(site_models, "--site-model").items()}
    try:
        check_site_models(models)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--site-model") from None
    settings = pairs(agent_config, "--agent-config")
    settings.update(llm_settings(llm, llm_key_env, no_api_key))
    try:
        check_agent(agent, settings)
    except AgentError as exc:
        raise click.BadParameter(str(exc), param_hint="--agent-config" if not llm else "--llm") from None
    condition = context_condition(context, context_pool, context_tokenizer, context_a1_run, context_seed)
    backend = backend or suite_backend(suite)
    manifest = run_suite(suite, archive, agent, out, workers=workers, backend=backend, seed=seed,
                         max_steps=max_steps, screenshots=screenshots, agent_config=settings, site_models=models,
                         tasks=task_globs, limit=limit, cassette=cassette, cassette_mode=cassette_mode,
                         llm_concurrency=llm_concurrency, persona=persona,
                         history={k: v for k, v in {"k": history_k, "threshold": history_threshold,
                                                    "model": history_model, "key_fields": key_fields}.items()
                                  if v is not None},
                         executor=executor, ray_address=ray_address, episode_timeout_s=episode_timeout, retries=retries,
                         context=condition, http_credentials=http_credentials,
                         **live_options(live, patch_from_live, record_into, resolve))
    click.echo(f"ran {manifest['tasks_done']} of {manifest['suite']['tasks']} tasks in {manifest['elapsed_s']:.1f} s "
               f"-> {out}", err=True)
    if not no_report:
        print_report(out)


def live_options(live: bool, patch_from_live: bool, record_into, resolve) -> dict:
    """The run's live settings (:class:`~webfreeze.runs.spec.RunOptions`' live, patch_from_live,
    record_into, resolve) from the command line (``--resolve`` checked as record's)."""
    try:
        table = parse_resolve(resolve)
    except ResolveError as exc:
        raise click.BadParameter(str(exc), param_hint="--resolve") from None
    return {"live": live, "patch_from_live": patch_from_live, "record_into": record_into, "resolve": table}


@bench_group.command("compare")
@click.argument("run_a", metavar="RUN_A", type=click.Path(file_okay=False))
@click.argument("run_b", metavar="RUN_B", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@click.option("--all", "show_all", is_flag=True, help="List identical tasks too.")
def bench_compare(run_a, run_b, as_json, show_all):
    """Show where two runs differ: per task, the outcome in each and the first step where the
    trajectories part (action, URL, error), then success rates per category.

    Exit status 0 when every trajectory is the same apart from timings, 1 when any differs.
    """
    result = compare_runs(run_a, run_b)
    if as_json:
        click.echo(json.dumps(result, indent=2, sort_keys=True, ensure_ascii=False))
    else:
        _print_comparison(result, show_all)
    sys.exit(0 if result["identical"] else 1)


def _print_comparison(result: dict, show_all: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    screen = console()
    def who(side: dict) -> str:
        agent = side.get("agent") if isinstance(side.get("agent"), dict) else {}
        label = f", {agent.get('name')}" if agent.get("name") else ""
        if agent.get("oracle"):
            label += f" (oracle: {agent.get('label') or 'upper bound'})"
        return f"{side['path']}{label}"

    t = Table(title=f"{who(result['a'])} (A) vs {who(result['b'])} (B)", title_justify="left")
    for col in ("task", "A", "B", "first difference", "A did", "B did"):
        t.add_column(col, overflow="fold")
    for row in result["tasks"]:
        if row["same"] and not show_all:
            continue
        d = row.get("first_difference") or {}
        where = "-" if row["same"] else (f"step {d['step']}: {d['field']}" if d else "only in one run")
        a, b = str(d.get("a", "")), str(d.get("b", ""))
        if isinstance(d.get("parted"), dict):  # (two DOM snapshots: where their HTML parts, not their digests)
            where += f" (at char {d['parted']['at']})"
            a, b = d["parted"]["a"], d["parted"]["b"]
        # (plain text: a page's HTML holds what rich would read as markup, "[/]" among it)
        t.add_row(Text(row["task_id"]), row["a_outcome"] or "-", row["b_outcome"] or "-", Text(where), Text(a), Text(b))
    if t.row_count:
        screen.print(t)
    else:  # (no task to list: the title alone, not an empty table)
        screen.print(f"{t.title}: " + ("no tasks" if show_all else "no task differs (--all lists every task)"),
                     highlight=False, markup=False)
    c = Table(title="success rate by category", title_justify="left")
    for col in ("category", "A", "B", "change"):
        c.add_column(col, justify="left" if col == "category" else "right")
    for cat, r in result["categories"].items():
        a, b = r["a"], r["b"]
        change = "-" if a is None or b is None else f"{(b - a) * 100:+.1f} pts"
        c.add_row(cat, "-" if a is None else f"{a * 100:.1f}%", "-" if b is None else f"{b * 100:.1f}%", change)
    screen.print(c)
    s = result["counts"]
    click.echo(f"{s['same']} tasks identical, {s['different']} different, {s['only_a']} only in A, "
               f"{s['only_b']} only in B", err=True)
    if result.get("settings"):  # (another backend, archive, seed... parts runs whatever the agents did)
        click.echo("settings differ: " + describe_settings(result["settings"], "(A)", "(B)"), err=True)
    if result.get("versions"):  # (runs made by other versions may part where those differ)
        click.echo("versions differ: " + describe_versions(result["versions"], "(A)", "(B)",
                                                           tuple(result.get("backends") or (None, None))), err=True)
    for side in ("a", "b"):
        r = (result.get("replay") or {}).get(side)
        if r:
            listed = ", ".join(e["task_id"] for e in r["episodes_compromised"][:10])
            more = f" and {len(r['episodes_compromised']) - 10} more" if len(r["episodes_compromised"]) > 10 else ""
            click.echo(f"replay {side.upper()}: {r['compromised']} of {r['episodes']} episodes replay-compromised "
                       f"({r['fuzzy_documents']} fuzzy main document, {r['fuzzy_xhr']} fuzzy XHR, {r['misses']} miss)"
                       + (f": {listed}{more}" if listed else ""), err=True)
