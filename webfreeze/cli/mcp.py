"""The ``mcp`` command (the MCP server over stdio).

Registered on the main CLI in ``webfreeze/cli/__init__.py``.
"""

from __future__ import annotations

import click

from webfreeze.simulator.backends import BACKENDS

DEFAULT_OUT = "mcp-run"  # (webfreeze.mcp_server.DEFAULT_OUT)


@click.command("mcp")
@click.argument("suite", metavar="SUITE|ARCHIVE", type=click.Path())
@click.option("--task", "task", metavar="ID", help="Serve only this task (it starts with the first action).")
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help=f"The run folder the episodes are written to [default: ./{DEFAULT_OUT}].")
@click.option("--archive", type=click.Path(dir_okay=False), help="The archive [default: the one the suite names].")
@click.option("--backend", type=click.Choice(BACKENDS), default=None,
              help="browser (Chromium through the replay) or text (pages from the archive, no browser) "
                   "[default: the suite manifest's backend, else browser].")
@click.option("--seed", type=int, default=0, show_default=True, help="The replay's seed.")
@click.option("--max-steps", type=int, default=30, show_default=True, help="Steps per episode.")
@click.option("--screenshots", is_flag=True, help="Keep a screenshot of every step in the run folder.")
def serve_command(suite, task, out, archive, backend, seed, max_steps, screenshots):
    """Serve SUITE's tasks to an MCP client over stdio (Playwright MCP's tools: browser_navigate,
    browser_click, browser_type, browser_snapshot, ...; and list_tasks, start_task, answer). Each
    task played is written to the run folder as a trajectory; score it with 'webfreeze eval report'.
    An ARCHIVE alone is served for exploration: one task, 'explore', at its first recorded page,
    nothing written."""
    # Imported here, not at the top: the server pulls in the environment, Playwright and the MCP
    # SDK (about a second), which every other command would otherwise pay for at start.
    from webfreeze.mcp_server import run_server

    run_server(suite, task=task, out=out, archive=archive, backend=backend, seed=seed,
               max_steps=max_steps, screenshots=screenshots)
