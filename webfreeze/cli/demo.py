"""The ``demo`` command (the whole loop on the shipped demo).

Registered on the main CLI in ``webfreeze/cli/__init__.py``.
"""

from __future__ import annotations

import json

import click

from webfreeze.demo import demo_paths, run_demo
from webfreeze.simulator.backends import BACKENDS


@click.command("demo")
@click.option("--print-paths", is_flag=True, help="Print where the demo archive and suite are, as JSON, and exit.")
@click.option("--backend", type=click.Choice(BACKENDS), default="browser", show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=2, show_default=True)
@click.option("--out", type=click.Path(file_okay=False), default="runs/demo", show_default=True)
@click.option("--live", is_flag=True, help="Run the LLM agent on the local model (started for the run; needs the "
                                           "`agents` extra) and record a fresh cassette, instead of replaying the "
                                           "shipped one.")
def demo(print_paths, backend, workers, out, live):
    """The whole loop on the shipped demo: run the reference agent (the oracle, the upper bound) and
    the keyword baseline on the demo suite over the demo archive, and the LLM agent on one task per
    category from the shipped LLM cassette; print their reports and success rates per category
    (runs in OUT/<agent>/)."""
    if print_paths:
        click.echo(json.dumps(demo_paths(), indent=2, sort_keys=True))
        return
    run_demo(out=out, backend=backend, workers=workers, live=live)
