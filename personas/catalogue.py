"""The simulated sites' catalogues as the persona generator and the task writer see them.

The sites' own API is ``webfreeze.simulator.sites.catalogue`` (``DOMAINS``, ``LOCATION_AWARE``,
``items(host, seed)``). Until a checkout has it, the same shape is built here from the two
original sites (``shop.test``'s products and ``booking.test``'s venues), so that personas and
tasks can be made either way; the item dicts have the keys the sites' API documents.
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


def _tier(price: float) -> str:
    # the fallback's own split of the shop's prices (5-480) into three tiers
    return "budget" if price < 60 else "mid" if price < 160 else "premium"


def _fallback() -> Catalogue:
    from webfreeze.simulator.sites.booking import build_venues
    from webfreeze.simulator.sites.shop import build_catalogue

    shop = [{"host": "shop.test", "domain": "shopping", "id": p.sku, "name": p.name, "path": f"/p/{p.sku}",
             "category": p.category, "brand": p.brand, "color": p.color, "sizes": list(p.sizes),
             "price": p.price, "price_tier": _tier(p.price), "rating": p.rating} for p in build_catalogue(0)]
    domain_of = {"restaurant": "restaurant", "hotel": "hotel", "doctor": "clinic"}
    venues = [{"host": "booking.test", "domain": domain_of[v.kind], "id": v.id, "name": v.name,
               "path": f"/venue/{v.id}", "category": v.category, "city": v.city,
               "price_tier": "$" * v.tier, "rating": v.rating, "slots": list(v.slots)} for v in build_venues(0)]
    return Catalogue(domains={"shopping": ["shop.test"], "restaurant": ["booking.test"], "hotel": ["booking.test"],
                              "clinic": ["booking.test"]},
                     location_aware={"booking.test"}, items={"shop.test": shop, "booking.test": venues},
                     source="fallback: shop.test and booking.test",
                     site_models={"shop.test": "shop", "booking.test": "booking"},
                     site_names={"shop.test": "Northwind Market", "booking.test": "TableTime Bookings"})


@lru_cache(maxsize=4)
def load_catalogue(seed: int = 0) -> Catalogue:
    """The catalogues of every site of every domain, from the sites' API when it is there."""
    try:
        from webfreeze.simulator.sites import catalogue as api
    except ImportError:
        return _fallback()
    domains = {d: list(hosts) for d, hosts in api.DOMAINS.items()}
    hosts = sorted({h for hs in domains.values() for h in hs})
    return Catalogue(domains=domains, location_aware=set(api.LOCATION_AWARE),
                     items={h: [dict(it) for it in api.items(h, seed)] for h in hosts},
                     source="webfreeze.simulator.sites.catalogue",
                     site_models=dict(getattr(api, "SITE_MODELS", {})),
                     site_names={h: api.site_name(h) for h in hosts} if hasattr(api, "site_name") else {})
