"""The simulated sites' catalogues as plain data: which host serves which domain, and every item
(product, restaurant, hotel, doctor) with its page and attributes.

This is what the persona generator and the task generator read (never the pages): the items are
built by the same code that serves them, so a preference drawn from here is one an agent can
find on the site.

- ``DOMAINS``: domain -> the competing hosts serving it.
- ``LOCATION_AWARE``: the hosts whose items have a location (tasks there carry one).
- ``items(host, seed=0)``: the host's items in catalogue order, fresh dicts each call.

Every item: ``host``, ``domain``, ``id``, ``name``, ``path`` (the item's page on the host, e.g.
``/p/SH00000`` or ``/venue/dn0003``), ``site`` (the site's name) and its attributes:

- shopping: ``category`` (department slug, as in ``/c/<category>``), ``department`` (its label),
  ``product_type`` (e.g. "Running Shoe"), ``brand``, ``color``, ``sizes`` (list), ``price``
  (float), ``price_tier`` ("budget" | "mid" | "premium", from :data:`PRICE_TIERS`, the same
  bounds on every shop), ``rating``, ``reviews``;
- restaurant, hotel, clinic: ``category`` (cuisine, hotel class such as "4-star", speciality),
  ``city``, ``neighbourhood``, ``zip``, ``state`` (state or region), ``address``, ``tier`` (1-4,
  shown as $ signs), ``price_tier`` (1: budget, 2-3: mid, 4: premium), ``rating``, ``reviews``,
  ``slots`` (list of "YYYY-MM-DD HH:MM", hotels "YYYY-MM-DD" check-in dates).
  ``booking.test`` shows a venue's city and street address but no neighbourhood or postcode: its
  items have ``neighbourhood`` and ``zip`` set to None (``state`` is the city's).

``booking.test`` also lists doctors and hotels, but it competes in the restaurant domain only
(``DOMAINS``); :func:`items` gives the items of the domains a host is listed under.
"""

from __future__ import annotations

from .places import state_of

# host -> the simulated site's name in simulator.sites.SITES
SITE_KINDS: dict[str, str] = {
    "start.test": "start", "scholar.test": "scholar", "shop.test": "shop", "shop2.test": "shop2",
    "booking.test": "booking", "dine.test": "dine", "hotels.test": "hotels", "clinic.test": "clinic",
}
HOSTS: dict[str, str] = {kind: host for host, kind in SITE_KINDS.items()}
START_URL = "http://start.test/"
# host -> site model kind (simulator.site_models), for a suite manifest's "site_models": carts,
# orders and reservations then work in replay
SITE_MODELS: dict[str, str] = {h: k for h, k in SITE_KINDS.items() if k not in ("start", "scholar")}

DOMAINS: dict[str, list[str]] = {
    "shopping": ["shop.test", "shop2.test"],
    "restaurant": ["booking.test", "dine.test"],
    "hotel": ["hotels.test"],
    "clinic": ["clinic.test"],
}
LOCATION_AWARE: set[str] = {"booking.test", "dine.test", "hotels.test", "clinic.test"}

# Price tiers of products, by department: budget below the first bound, premium from the second.
PRICE_TIERS: dict[str, tuple[float, float]] = {
    "shoes": (100, 200), "clothing": (100, 200), "electronics": (160, 320), "home": (100, 200),
    "books": (100, 200), "sports": (100, 200), "beauty": (100, 200), "toys": (100, 200),
}
VENUE_TIERS = {1: "budget", 2: "mid", 3: "mid", 4: "premium"}


def site_name(host: str) -> str:
    """The name a site shows (its logo and title), e.g. "Northwind Market" for shop.test."""
    kind = _kind(host)
    if kind == "start":
        from .start import TITLE

        return TITLE
    if kind == "scholar":
        from .scholar import SITE

        return SITE
    if kind in _SHOPS:
        return _shop_profile(kind).name
    return _booking_profile(kind).name


def domain_of(host: str) -> str | None:
    """The domain a host competes in (None for the start page and the scholar site)."""
    return next((d for d, hosts in DOMAINS.items() if host in hosts), None)


def item_url(item: dict) -> str:
    """The absolute URL of an item's page."""
    return f"http://{item['host']}{item['path']}"


def price_tier(category: str, price: float) -> str:
    """A product's price tier in its department (:data:`PRICE_TIERS`)."""
    low, high = PRICE_TIERS[category]
    return "budget" if price < low else "premium" if price >= high else "mid"


def items(host: str, seed: int = 0) -> list[dict]:
    """Every item of ``host`` in the domain(s) it is listed under, in catalogue order."""
    domain = domain_of(host)
    if domain is None:
        raise KeyError(f"{host}: not a site of any domain (known: {', '.join(sorted(_all_hosts()))})")
    kind = SITE_KINDS[host]
    if kind in _SHOPS:
        return _products(host, kind, seed)
    return _venues(host, kind, domain, seed)


# ------------------------------------------------------------------------------------------ inside
_SHOPS = ("shop", "shop2")


def _kind(host: str) -> str:
    if host not in SITE_KINDS:
        raise KeyError(f"{host}: no simulated site has this host (known: {', '.join(sorted(SITE_KINDS))})")
    return SITE_KINDS[host]


def _all_hosts() -> list[str]:
    return [h for hosts in DOMAINS.values() for h in hosts]


def _shop_profile(kind: str):
    from .shop import LARKSPUR, NORTHWIND

    return {"shop": NORTHWIND, "shop2": LARKSPUR}[kind]


def _booking_profile(kind: str):
    from .booking import TABLETIME
    from .local import PROFILES

    return TABLETIME if kind == "booking" else PROFILES[kind]


def _products(host: str, kind: str, seed: int) -> list[dict]:
    from .shop import CATEGORIES, build_catalogue

    profile = _shop_profile(kind)
    out = []
    for p in build_catalogue(seed, profile=profile):
        product_type = p.name[len(f"{p.brand} {p.color.title()} "):]
        out.append({"host": host, "domain": "shopping", "id": p.sku, "name": p.name, "path": f"/p/{p.sku}",
                    "site": profile.name, "category": p.category, "department": CATEGORIES[p.category][0],
                    "product_type": product_type, "brand": p.brand, "color": p.color, "sizes": list(p.sizes),
                    "price": p.price, "price_tier": price_tier(p.category, p.price), "rating": p.rating,
                    "reviews": p.reviews})
    return out


_VENUE_KIND = {"restaurant": "restaurant", "hotel": "hotel", "clinic": "doctor"}


def _venues(host: str, kind: str, domain: str, seed: int) -> list[dict]:
    from .booking import build_venues

    profile = _booking_profile(kind)
    out = []
    for v in build_venues(seed, profile=profile):
        if v.kind != _VENUE_KIND[domain]:
            continue
        out.append({"host": host, "domain": domain, "id": v.id, "name": v.name, "path": f"/venue/{v.id}",
                    "site": profile.name, "category": v.category, "city": v.city,
                    "neighbourhood": v.neighbourhood or None, "zip": v.zip or None,
                    "state": v.state or state_of(v.city), "address": v.address, "tier": v.tier,
                    "price_tier": VENUE_TIERS[v.tier], "rating": v.rating, "reviews": v.reviews,
                    "slots": list(v.slots)})
    return out


__all__ = ["DOMAINS", "HOSTS", "LOCATION_AWARE", "PRICE_TIERS", "SITE_KINDS", "SITE_MODELS", "START_URL",
           "domain_of", "item_url", "items", "price_tier", "site_name"]
