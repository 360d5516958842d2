"""Simulated live sites, served on loopback, deterministic for a seed.

They stand in for the live web (no machine here reaches it): the recorder records them in tests
and in the demo, the benchmarks never talk to them. ``SITES`` maps a name to a factory taking the
seed and returning a WSGI application; :mod:`.catalogue` gives each its host (``shop2`` is
``shop2.test``) and their items as data. docs/sites.md describes them.
"""

from __future__ import annotations

from collections.abc import Callable

from .common import SiteServer


def _scholar(seed: int):
    from .scholar import ScholarSite

    return ScholarSite(seed)


def _shop(seed: int):
    from .shop import ShopSite

    return ShopSite(seed)


def _shop2(seed: int):
    from .shop import LARKSPUR, ShopSite

    return ShopSite(seed, LARKSPUR)


def _booking(seed: int):
    from .booking import BookingSite

    return BookingSite(seed)


def _local(name: str):
    def make(seed: int):
        from .local import PROFILES, LocalSite

        return LocalSite(seed, PROFILES[name])

    return make


def _start(seed: int):
    from .start import StartSite

    return StartSite(seed)


SITES: dict[str, Callable[[int], object]] = {
    "scholar": _scholar, "shop": _shop, "booking": _booking, "shop2": _shop2,
    "dine": _local("dine"), "hotels": _local("hotels"), "clinic": _local("clinic"), "start": _start,
}


def serve(name: str, *, host: str = "127.0.0.1", port: int = 0, seed: int = 0,
          log_requests: bool = False) -> SiteServer:
    """A started server for site ``name`` (port 0 picks a free one); stop it with ``.stop()``."""
    if name not in SITES:
        raise KeyError(name)
    return SiteServer(SITES[name](seed), host, port, log_requests=log_requests).start()


__all__ = ["SITES", "SiteServer", "serve"]
