"""``webfreeze sites serve``: the simulated live sites.

The sites are imported inside the command: they need the ``sites`` extra (Werkzeug)."""

from __future__ import annotations

import click

from webfreeze.cli.options import Terminated, fail


@click.group("sites")
def sites_group() -> None:
    """Simulated live sites (deterministic for a seed) that stand in for the web in tests and demos."""


@sites_group.command("serve")
@click.argument("name", type=click.Choice(["scholar", "shop", "booking", "shop2", "dine", "hotels", "clinic", "start"]))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port (0: any free one).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the generated content.")
@click.option("--tls-cert", type=click.Path(dir_okay=False), help="Serve HTTPS with this PEM certificate (chain).")
@click.option("--tls-key", type=click.Path(dir_okay=False), help="The certificate's PEM key (if not in --tls-cert).")
def sites_serve(name, host, port, seed, tls_cert, tls_key):
    """Serve a simulated site until Ctrl-C.

    scholar: a preprint archive shaped like arxiv.org; shop: a store with search, filters and a cart;
    booking: restaurants, doctors and hotels with availability and a reservation form; shop2, dine,
    hotels, clinic: competing shop, restaurant, hotel and clinic sites for personalised tasks; start:
    a page linking them all (docs/sites.md).
    """
    from webfreeze.simulator.sites import SITES
    from webfreeze.simulator.sites.common import SiteServer, tls_context

    if tls_key and not tls_cert:
        raise click.UsageError("--tls-key needs --tls-cert", click.get_current_context())
    try:
        ctx = tls_context(tls_cert, tls_key) if tls_cert else None
        server = SiteServer(SITES[name](seed), host, port, log_requests=True, ssl_context=ctx)
    except OSError as exc:
        fail(f"{exc.strerror or exc}")
    click.echo(f"serving {name} (seed {seed}) at {server.url}/  (Ctrl-C to stop)", err=True)
    try:
        server.serve_forever()
    except (KeyboardInterrupt, Terminated):
        click.echo("stopped", err=True)

