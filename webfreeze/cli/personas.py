"""The ``personas`` command group: generate personas with one-year histories, and write
personalised task suites from them (docs/personas.md).

Registered on the main CLI in ``webfreeze/cli/__init__.py``.
"""

from __future__ import annotations

import click

from webfreeze.cli.options import progress_bar
from webfreeze.personas.generate import generate
from webfreeze.personas.tasks import TaskBuildError, build_suite


@click.group("personas")
def personas_group() -> None:
    """Synthetic users with web histories, and personalised tasks on the simulated sites."""


@personas_group.command("generate")
@click.option("--n", "n", type=click.IntRange(1, 9999), default=50, show_default=True,
              help="How many personas.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed: the same seed gives the same bytes.")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Folder to write (must not exist, or be empty).")
def personas_generate(n, seed, out):
    """Write N personas, each with a profile, ~2,000 history entries over one year and the gold
    entries of each preference, into OUT (manifest.json, <id>/history.jsonl, profile.json, gold.json).

    Preferences are drawn from the simulated sites' catalogues and show in the history only as
    repeated behaviour."""
    progress, advance = progress_bar(n, "generating personas", unit="personas")
    try:
        with progress:
            manifest = generate(out, n=n, seed=seed, progress=advance)
    except (FileExistsError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"wrote {manifest['n']} personas (seed {seed}) to {out}")


@personas_group.command("tasks")
@click.option("--personas", "personas_dir", required=True, type=click.Path(file_okay=False),
              help="A folder written by 'webfreeze personas generate'.")
@click.option("--out", "out", required=True, type=click.Path(file_okay=False),
              help="Suite folder to write (must not exist, or be empty).")
@click.option("--archive", type=click.Path(dir_okay=False),
              help="Keep only tasks whose pages (start page, site home, target item) this archive recorded.")
@click.option("--levels", default="0,1,2", show_default=True,
              help="Ambiguity levels to write: 0 site and preferences explicit, 1 site masked, 2 both masked.")
@click.option("--per-persona", "per_persona", type=click.IntRange(1, 4), default=3, show_default=True,
              help="Query sets per persona (shopping, restaurant, hotel, clinic, in this order).")
@click.option("--ranking/--no-ranking", default=True, show_default=True,
              help="Also write APeB-style ranking tasks (category 'ranking').")
def personas_tasks(personas_dir, out, archive, levels, per_persona, ranking):
    """Write a personalised task suite from the personas in PERSONAS: per persona, query sets at
    levels 0/1/2 on the shop and booking sites (ground truth from the generator's data, with
    final-state checks) and ranking tasks."""
    try:
        wanted = sorted({int(x) for x in levels.split(",") if x.strip()})
    except ValueError:
        raise click.BadParameter("levels are numbers 0, 1 or 2, comma-separated", param_hint="--levels") from None
    if not wanted or any(x not in (0, 1, 2) for x in wanted):
        raise click.BadParameter("levels are 0, 1 or 2, comma-separated", param_hint="--levels")
    try:
        summary = build_suite(personas_dir, out, levels=wanted, per_persona=per_persona, ranking=ranking,
                              archive=archive)
    except TaskBuildError as exc:
        raise click.ClickException(str(exc)) from None
    if archive:
        click.echo(f"dropped {summary['dropped']} of {summary['built']} tasks whose pages {archive} did not record")
    click.echo(f"wrote {summary['tasks']} tasks ({summary['personalised']} personalised, "
               f"{summary['ranking']} ranking) to {out}")
