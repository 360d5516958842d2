"""Site models for the stateful simulated sites, plugged into the replayer's hook.

With the live shops and booking sites gone, their carts, orders and reservations still work in
replay: a model runs the site's own code (a fresh instance per episode, same seed, so the same
catalogue) for the stateful paths only; every other request still comes from the archive. The
state is exported as JSON for evaluation (``final_state`` in trajectories).
"""

from __future__ import annotations

import re

from webfreeze.replayer.hooks import ReplayRequest, ReplayResponse, SiteModel

_SHOP_PATHS = re.compile(r"^/(cart(/add|/remove)?|checkout|order/\d+|api/cart)$")
_BOOKING_PATHS = re.compile(r"^/(reserve|reservation/\d+|reservations|venue/[^/]+|api/availability/[^/]+)$")
# site kind (simulator.sites.SITES) -> the paths its model answers; shops export carts and orders,
# the booking sites (TableTime and the located ones) reservations
STATEFUL_PATHS = {
    "shop": _SHOP_PATHS, "shop2": _SHOP_PATHS,
    "booking": _BOOKING_PATHS, "dine": _BOOKING_PATHS, "hotels": _BOOKING_PATHS, "clinic": _BOOKING_PATHS,
}
SHOP_KINDS = frozenset({"shop", "shop2"})


FROZEN_AT = 1710532800.0  # 2024-03-15T20:00:00Z, the simulated sites' "now"


def check_site_models(models: dict, error: type[Exception] = ValueError) -> None:
    """Refuse a ``HOST -> KIND`` table (``--site-model HOST=KIND``, a suite manifest's
    ``site_models``) naming a kind no model exists for: an ``error`` (the caller's own error class),
    one line naming the pair and the known kinds."""
    for host, kind in models.items():
        if kind not in STATEFUL_PATHS:
            raise error(f"site model {host}={kind}: unknown kind (known: {', '.join(sorted(STATEFUL_PATHS))})")


def _frozen_clock():
    """A clock for one episode: starts at FROZEN_AT and moves 1 ms per reading (deterministic)."""
    ticks = iter(range(10**12))
    return lambda: FROZEN_AT + next(ticks) / 1000.0


class SimulatedSiteModel(SiteModel):
    """Answer ``kind``'s (a key of ``STATEFUL_PATHS``: ``shop``, ``shop2``, ``booking``, ``dine``,
    ``hotels``, ``clinic``) stateful paths on ``host`` from a fresh site."""

    def __init__(self, kind: str, host: str, seed: int = 0):
        check_site_models({host: kind})
        self.kind = kind
        self.name = host.lower()  # the exported state is keyed by host, as final-state checks name it
        self.hosts = (host.lower(),)
        self.site_seed = seed

    def initial_state(self, seed: int) -> dict:
        from webfreeze.simulator.sites import SITES

        site = SITES[self.kind](self.site_seed)
        site.clock = _frozen_clock()
        return {"site": site}

    def handle(self, request: ReplayRequest, state: dict) -> ReplayResponse | None:
        if not STATEFUL_PATHS[self.kind].match(request.path):
            return None
        from werkzeug.test import Client

        client = Client(state["site"], use_cookies=False)  # the browser's Cookie header, not a jar of its own
        parts = request.url.split("/", 3)
        path_qs = "/" + (parts[3] if len(parts) > 3 else "")
        headers = [(k, v) for k, v in request.headers if k.lower() not in ("content-length", "host")]
        resp = client.open(path_qs, method=request.method, headers=headers, data=request.body or None,
                           base_url=f"{parts[0]}//{parts[2]}")
        body = resp.get_data()
        out_headers = [(k, v) for k, v in resp.headers.items() if k.lower() != "content-length"]
        return ReplayResponse(resp.status_code, out_headers, body)

    def export_state(self, state: dict) -> dict:
        site = state["site"]
        if self.kind in SHOP_KINDS:
            carts = {s: [{"sku": sku, "size": size, "qty": qty} for (sku, size), qty in sorted(c.items())]
                     for s, c in sorted(site.carts.items()) if c}
            items = [item for lines in carts.values() for item in lines]
            return {"carts": carts, "cart": {"items": items},
                    "orders": [dict(o, number=n) for n, o in sorted(site.orders.items())]}
        return {"reservations": [dict(r, number=n) for n, r in sorted(site.reservations.items())]}
