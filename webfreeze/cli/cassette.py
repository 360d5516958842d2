"""The ``cassette`` command group: inspect, check, combine and serve LLM cassettes.

Registered on the main CLI in ``webfreeze/cli/__init__.py``.
"""

from __future__ import annotations

import json
import threading

import click

from webfreeze.bundles.redaction import redact_cassette
from webfreeze.llm.cassette import MODES, Cassette, merge, verify_file
from webfreeze.llm.cassette_proxy import CassetteProxy


@click.group("cassette")
def cassette_group() -> None:
    """Inspect, verify, merge and serve LLM cassettes (the recorded LLM calls of runs)."""


@cassette_group.command("info")
@click.argument("file", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def cassette_info(file, as_json):
    """Summarise the cassette FILE: calls, distinct requests, tasks, models, tokens, digest."""
    with Cassette(file, "replay") as cassette:
        info = cassette.info()
    if as_json:
        click.echo(json.dumps(info, indent=2, sort_keys=True))
        return
    purposes = ", ".join(f"{p or '(none)'} {n}" for p, n in info["purposes"].items()) or "-"
    lines = [
        ("file", info["path"]),
        ("calls", f"{info['calls']} ({info['distinct_requests']} distinct requests)"),
        ("tasks", info["tasks"]),
        ("purposes", purposes),
        ("models", ", ".join(info["models"]) or "-"),
        ("requested", ", ".join(info["request_models"]) or "-"),
        ("tokens", f"{info['prompt_tokens']} prompt, {info['completion_tokens']} completion"),
        ("modes", ", ".join(info["modes"]) or "-"),
        ("digest", info["digest"]),
    ]
    if info["unreadable_rows"]:
        lines.append(("unreadable", f"{info['unreadable_rows']} calls (run 'webfreeze cassette verify')"))
    for name, value in lines:
        click.echo(f"{name + ':':<11}{value}")


@cassette_group.command("verify")
@click.argument("file", metavar="FILE", type=click.Path(dir_okay=False))
def cassette_verify(file):
    """Check the cassette FILE: SQLite's integrity, its format, and every call (JSON that parses,
    canonical requests, keys that are their requests' SHA-256). Exit status 1 names the first
    problem."""
    problems = verify_file(file)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise click.ClickException(f"{file}: {problems[0]}{more}" if not problems[0].startswith(str(file))
                                   else f"{problems[0]}{more}")
    with Cassette(file, "replay") as cassette:
        click.echo(f"{file}: ok, {len(cassette)} calls, {cassette.digest()}")


@cassette_group.command("merge")
@click.argument("out", metavar="OUT", type=click.Path(dir_okay=False))
@click.argument("sources", metavar="SRC...", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
def cassette_merge(out, sources, force):
    """Write the union of the SRC cassettes to OUT (written to a temporary file, then renamed).

    A call stored in several sources keeps the first source's answer; one whose answers differ is
    counted as a conflict.
    """
    stats = merge(out, sources, force=force)
    click.echo(f"wrote {out}: {stats['calls']} calls from {stats['sources']} cassettes "
               f"({stats['read']} read, {stats['duplicates']} duplicates, {stats['conflicts']} conflicts), "
               f"{stats['digest']}")
    if stats["conflicts"]:
        click.echo(f"warning: {stats['conflicts']} calls answered differently in different sources; "
                   "the first source's answer was kept", err=True)


@cassette_group.command("redact")
@click.argument("file", metavar="CASSETTE", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="The redacted cassette (new).")
@click.option("--archive", required=True, type=click.Path(dir_okay=False),
              help="The (unredacted) archive the run used: its credentials are the secrets to replace.")
@click.option("--suite", type=click.Path(file_okay=False), help="The suite: its password values are secrets too.")
@click.option("--param", "params", multiple=True, metavar="NAME", help="Also a secret parameter name; repeatable.")
@click.option("--header", "headers", multiple=True, metavar="NAME", help="Also a credential header; repeatable.")
def cassette_redact(file, output, archive, suite, params, headers):
    """Write a copy of CASSETTE with the secrets of ARCHIVE (and --suite) replaced by placeholders,
    each call's key recomputed from its redacted request.

    The key of the placeholders is random and never stored: to match the placeholders of a
    redacted archive, redact both in one command ('archive redact --cassette SRC OUT', or
    'bundle pack --redact').
    """
    s = redact_cassette(file, output, archive=archive, suite=suite, params=params, headers=headers)
    click.echo(f"wrote {output}: {s['calls']} calls ({s['changed']} changed), {s['secrets']} secrets looked for")


@cassette_group.command("serve")
@click.argument("file", metavar="CASSETTE", type=click.Path(dir_okay=False))
@click.option("--mode", type=click.Choice(MODES), default="auto", show_default=True,
              help="record: every call goes upstream and is stored; replay: strict, only the cassette "
                   "answers; auto: the cassette answers what it holds, the rest goes upstream.")
@click.option("--upstream", metavar="URL", help="The OpenAI-compatible base URL that answers what is not stored.")
@click.option("--llm", "llm", type=click.Choice(["local"]),
              help="Let the embedded local model answer what is not stored (instead of --upstream).")
@click.option("--api-key-env", metavar="VAR",
              help="The variable holding the upstream's API key (default: pass on the client's own).")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="The port on 127.0.0.1 (0: a free one, printed).")
def cassette_serve(file, mode, upstream, llm, api_key_env, port):
    """Serve an OpenAI-compatible chat-completions endpoint on 127.0.0.1 in front of CASSETTE, for
    an agent we did not write: point it at the printed URL (OPENAI_BASE_URL) and every call it
    makes is recorded, or replayed byte for byte. A request strict replay cannot answer gets HTTP
    422 and one line here. Runs until interrupted (Ctrl-C)."""
    proxy = CassetteProxy(file, mode, upstream=upstream, local=llm == "local", api_key_env=api_key_env,
                          port=port).start()
    try:
        click.echo(f"serving {file} ({mode}) at {proxy.base_url}", err=True)
        click.echo(f"OPENAI_BASE_URL={proxy.base_url}")
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    finally:
        stats = proxy.stats
        proxy.stop()
    click.echo(f"stopped: {stats['calls']} calls, {stats['cassette_hits']} from the cassette, "
               f"{stats['upstream_calls']} upstream, {stats['misses']} misses", err=True)
