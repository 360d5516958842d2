"""The ``bundle`` group: pack, verify, run, info, export-wacz (see :mod:`webfreeze.bundles.pack`).

Registered on the main CLI in ``webfreeze/cli/__init__.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from webfreeze.bundles.pack import BundleError, export_wacz, info, open_bundle, pack, verify
from webfreeze.bundles.run import run_bundle
from webfreeze.cli.options import human_bytes, known_agent, llm_settings, pairs, progress_bar
from webfreeze.runs.console import run_suite
from webfreeze.simulator.backends import BACKENDS


@click.group("bundle")
def bundle_group() -> None:
    """One-file benchmark bundles: an archive, its suite and the runs on it, re-runnable offline."""


@bundle_group.command("pack")
@click.argument("sources", metavar="RUN_DIR... | SUITE_DIR", nargs=-1, required=True, type=click.Path())
@click.option("--archive", type=click.Path(dir_okay=False),
              help="The archive (default: the one the runs used, or the suite's manifest names).")
@click.option("--suite", type=click.Path(file_okay=False),
              help="The suite the runs ran (default: the one their manifest names); its digest must match.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Bundle file to write (NAME.wfb).")
@click.option("--key", type=click.Path(dir_okay=False, exists=True),
              help="Sign with this Ed25519 private key (PEM; e.g. made with 'openssl genpkey -algorithm ed25519').")
@click.option("--title", help="A title for the bundle (default: the file name).")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
@click.option("--with-agent-source", is_flag=True,
              help="Include each plug-in agent's source file (checked against the SHA-256 its run recorded).")
@click.option("--redact", is_flag=True,
              help="Redact the archive, suite, runs and cassettes (one mapping) before packing; see 'archive redact'.")
@click.option("--param", "params", multiple=True, metavar="NAME", help="--redact: also this secret parameter name.")
@click.option("--header", "headers", multiple=True, metavar="NAME", help="--redact: also this credential header.")
@click.option("--secret-env", "secret_env", multiple=True, metavar="VAR",
              help="--redact: also the value of environment variable VAR, wherever it occurs; repeatable.")
@click.option("--allow-visible-secrets", is_flag=True,
              help="--redact: pack even when a secret was visible to an agent (its observation changes under "
                   "redaction); those steps then record what the redacted archive shows.")
@click.option("--allow-secrets", is_flag=True, help="Pack even if credentials are recognised in what is packed.")
def bundle_pack(sources, archive, suite, output, key, title, force, with_agent_source, redact, params, headers,
                secret_env, allow_visible_secrets, allow_secrets):
    """Pack run folders (of one suite, on one archive) or a suite folder into one bundle file.

    The bundle holds the archive, the suite with its references and ground truth, and for each run
    its manifest, trajectories, reports and the LLM cassette entries it used; a datapackage.json
    lists every member's SHA-256 and size. With --redact each run is run again on the redacted
    archive before anything is written, and must come out identical.
    """

    if Path(output).exists() and not force:
        raise BundleError(f"{output}: already exists (use --force to replace it)")
    if (params or headers or secret_env or allow_visible_secrets) and not redact:
        raise click.BadParameter("--param, --header, --secret-env and --allow-visible-secrets go with --redact",
                                 param_hint="--redact")
    manifest = pack(list(sources), output, archive=archive, key=key, title=title, suite=suite,
                    with_agent_source=with_agent_source, redact=redact, allow_secrets=allow_secrets,
                    params=params, headers=headers, secret_env=secret_env,
                    allow_visible_secrets=allow_visible_secrets)
    if redact:
        click.echo("redacted: the bundle's archive, suite, runs and cassettes hold placeholders for the secrets found",
                   err=True)
    runs = manifest["contents"].get("runs") or []
    total = sum(r["bytes"] for r in manifest["resources"])
    click.echo(f"wrote {output}: {len(manifest['resources'])} members, {len(runs)} run(s), "
               f"{human_bytes(Path(output).stat().st_size)} ({human_bytes(total)} unpacked)"
               f"{', signed' if key else ''}")


@bundle_group.command("verify")
@click.argument("bundle", metavar="NAME.wfb", type=click.Path(dir_okay=False))
@click.option("--key", type=click.Path(dir_okay=False, exists=True),
              help="Require a valid signature by this Ed25519 public key (PEM).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bundle_verify(bundle, key, as_json):
    """Check every member's SHA-256 and size, the archive's own verification and the cassettes;
    with --key the signature. Exit 1 naming the damaged member."""
    with open_bundle(bundle) as b:
        total = sum(r["bytes"] for r in b.resources.values())
    progress, advance = progress_bar(total, "verifying")
    with progress:
        result = verify(bundle, key=key, progress=advance)
    if as_json:
        click.echo(json.dumps(result, indent=2, sort_keys=True))
        return
    arc = result["archive"]
    click.echo(f"{bundle}: ok: {result['members']} members ({result['bytes']} bytes) match their digests"
               + (f"; archive {arc['member']}: {arc['blobs']} blobs, {arc['exchanges']} exchanges verified" if arc
                  else "") + f"; {result['cassettes']} cassette(s) verified")
    if result["signature"]:
        click.echo(result["signature"])


@bundle_group.command("info")
@click.argument("bundle", metavar="NAME.wfb", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
def bundle_info(bundle, as_json):
    """List what a bundle holds: its archive, suite, runs (agent, tasks) and the size of each part."""
    data = info(bundle)
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    click.echo(f"{data['bundle']}: {data['title']} ({data['software']}, bundle version {data['version']}, "
               f"{'signed' if data['signed'] else 'unsigned'})")
    click.echo(f"  {data['members']} members, {human_bytes(data['bytes'])} unpacked, "
               f"{human_bytes(data['file_bytes'])} as a file")
    click.echo(f"  archive: {data['archive']}")
    click.echo(f"  suite:   {data['suite']}")
    for run in data["runs"]:
        llm = ", with its LLM cassette" if run.get("cassette") else ""
        llm += ", long-context" if run.get("context") else ""
        click.echo(f"  run:     {run['path']} ({run.get('agent')}, {run.get('tasks')} tasks{llm})")
        rp = run.get("replay")
        if rp:
            listed = ", ".join(rp["episodes_compromised"][:10])
            click.echo(f"           replay: {rp['compromised']} of {rp['episodes']} episodes replay-compromised "
                       f"({rp['fuzzy_documents']} fuzzy main document, {rp['fuzzy_xhr']} fuzzy XHR, "
                       f"{rp['misses']} miss){': ' + listed if listed else ''}")
    for p in data["personas"]:
        click.echo(f"  personas: {p}")
    for p in data["context"].get("pools") or []:
        click.echo(f"  filler pool: {p}")
    for p in data["context"].get("a1_runs") or []:
        click.echo(f"  A1 run:  {p}")
    for part, n in data["parts"].items():
        click.echo(f"    {part:<32} {human_bytes(n):>12}")


@bundle_group.command("export-wacz")
@click.argument("bundle", metavar="NAME.wfb", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="WACZ file to write.")
@click.option("--force", is_flag=True, help="Replace OUTPUT if it exists.")
def bundle_export_wacz(bundle, output, force):
    """Write the bundle's archive as a WACZ 1.1.1 (for pywb, ReplayWeb.page)."""
    n = export_wacz(bundle, output, overwrite=force)
    click.echo(f"wrote {n} exchanges to {output}")


@bundle_group.command("run")
@click.argument("bundle", metavar="NAME.wfb", type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False), help="A new folder for the re-runs.")
@click.option("--key", type=click.Path(dir_okay=False, exists=True),
              help="Require a valid signature by this Ed25519 public key (PEM) before running.")
@click.option("--agent", help="Run this agent on the bundled benchmark instead of re-running the bundled runs.")
@click.option("--agent-config", "agent_config", multiple=True, metavar="KEY=VALUE",
              help="Setting of --agent (JSON value or text); repeatable.")
@click.option("--llm", "llm", metavar="local|MODEL@BASE_URL", help="The --agent's model (see 'bench run --help').")
@click.option("--llm-key-env", metavar="NAME", help="Environment variable holding that endpoint's API key.")
@click.option("--no-api-key", is_flag=True, help="That endpoint needs no API key.")
@click.option("--backend", type=click.Choice(BACKENDS), default=None,
              help="--agent's backend (default browser; re-runs use the bundled runs' own).")
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--tasks", "task_globs", multiple=True, metavar="GLOB", help="--agent: only tasks whose id matches GLOB.")
@click.option("--limit", type=click.IntRange(1), default=None, help="--agent: only the first N (selected) tasks.")
@click.option("--run", "run_names", multiple=True, metavar="NAME", help="Re-run only this bundled run; repeatable.")
def bundle_run(bundle, out, key, agent, agent_config, llm, llm_key_env, no_api_key, backend, workers, task_globs, limit,
               run_names):
    """Re-run the bundled runs offline (LLM calls from their cassettes in strict replay; no network,
    no API key) and check their trajectories and reports equal the bundled ones byte for byte,
    timings aside. Exit 1 naming the first difference.

    With --agent, run a new agent on the same frozen benchmark instead (no comparison).
    """
    if backend and not agent:
        raise click.BadParameter("--backend goes with --agent (re-runs use their own)", param_hint="--backend")
    settings = None
    if agent:
        known_agent(click.get_current_context(), None, agent)
        settings = pairs(agent_config, "--agent-config")
        settings.update(llm_settings(llm, llm_key_env, no_api_key))
    elif agent_config or llm or llm_key_env or no_api_key or task_globs or limit:
        raise click.BadParameter("--agent-config, --llm, --tasks and --limit go with --agent", param_hint="--agent")
    if agent and run_names:
        raise click.BadParameter("--run selects bundled runs to re-run; --agent runs a new one", param_hint="--run")

    def run_one(cfg: dict) -> dict:
        cfg = dict(cfg)
        return run_suite(cfg.pop("suite"), cfg.pop("archive"), cfg.pop("agent"), cfg.pop("out"), quiet=True, **cfg)

    result = run_bundle(bundle, out, key=key, agent=agent, agent_config=settings, workers=workers, backend=backend,
                        tasks=list(task_globs), limit=limit, run_names=list(run_names), run_fn=run_one,
                        echo=lambda m: click.echo(m, err=True))
    if result["signature"]:
        click.echo(result["signature"], err=True)
    if agent:
        click.echo(f"ran {agent} on the bundled benchmark: {result['runs'][0]['dir']} (report.json, report.html)")
        return
    bad = [r for r in result["runs"] if not r["identical"]]
    for r in result["runs"]:
        if r.get("error"):
            click.echo(f"{r['name']}: could not be re-run: {r['error']}")
        elif r["identical"]:
            click.echo(f"{r['name']}: identical to the bundled run (trajectories and report.json, timings aside)")
        else:
            click.echo(f"{r['name']}: DIFFERS from the bundled run: {r['difference']}")
    if bad:
        sys.exit(1)
