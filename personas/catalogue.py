"""The simulated sites' catalogues as the persona generator and the task writer see them: the
sites' own API (``webfreeze.simulator.sites.catalogue``: ``DOMAINS``, ``LOCATION_AWARE``,
``items(host, seed)``, ``SITE_MODELS``, ``site_name``) read once into one object, with each
host's items per domain at hand (asked for thousands of times per persona).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache


@dataclass
class Catalogue:
    """Every domain's hosts, which hosts are location-aware, and each host's items."""

    domains: dict[str, list[str]]
    location_aware: set[str]
    items: dict[str, list[dict]] = field(default_factory=dict)
    source: str = ""
    site_models: dict[str, str] = field(default_factory=dict)  # host -> site model kind (carts, bookings)
    site_names: dict[str, str] = field(default_factory=dict)  # host -> the name the site shows
    _by_domain: dict = field(default_factory=dict, repr=False, compare=False)

    def domain_items(self, host: str, domain: str) -> list[dict]:
        """``host``'s items of ``domain`` (a host may serve several domains); do not modify the list."""
        key = (host, domain)
        if key not in self._by_domain:  # asked thousands of times per persona
            self._by_domain[key] = [it for it in self.items[host] if it["domain"] == domain]
        return self._by_domain[key]


@lru_cache(maxsize=4)
def load_catalogue(seed: int = 0) -> Catalogue:
    """The catalogues of every site of every domain."""
    from webfreeze.simulator.sites import catalogue as api

    domains = {d: list(hosts) for d, hosts in api.DOMAINS.items()}
    hosts = sorted({h for hs in domains.values() for h in hs})
    return Catalogue(domains=domains, location_aware=set(api.LOCATION_AWARE),
                     items={h: [dict(it) for it in api.items(h, seed)] for h in hosts},
                     source="webfreeze.simulator.sites.catalogue",
                     site_models=dict(api.SITE_MODELS), site_names={h: api.site_name(h) for h in hosts})
