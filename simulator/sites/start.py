"""``start``: a browser start page (``start.test``) linking every simulated site, by domain.

It is where a person's browsing begins when no site is named: personalised tasks whose site is
masked start here. Links are absolute (``http://shop.test/``), as bookmarks are.
"""

from __future__ import annotations

from werkzeug.routing import Rule
from werkzeug.wrappers import Request, Response

from .catalogue import DOMAINS, HOSTS, site_name
from .common import SimulatedSite, esc, json_response, route_map

TITLE = "Start page"
LABELS = {"shopping": "Shopping", "restaurant": "Restaurants", "hotel": "Hotels", "clinic": "Doctors and clinics"}
BLURBS = {
    "shop.test": "Shoes, clothing, electronics, home, books, sports, beauty and toys.",
    "shop2.test": "Outdoor and everyday goods from independent and well-known brands.",
    "booking.test": "Tables, appointments and rooms in eight cities.",
    "dine.test": "Restaurants by city and neighbourhood, booked in a minute.",
    "hotels.test": "Hotels from two to five stars, by city and neighbourhood.",
    "clinic.test": "Doctors and specialists near you, with free appointment times.",
    "scholar.test": "Preprints in physics, mathematics, computer science and more.",
}


# The routes, built once for every instance (common.route_map).
_url_map = route_map(lambda: [
    Rule("/", endpoint="home"),
    Rule("/api/stats", endpoint="stats"),
    Rule("/static/<name>", endpoint="static"),
])


class StartSite(SimulatedSite):
    """A bookmarks page (no state)."""

    title, color = TITLE, (90, 90, 90)
    session_cookie, session_prefix = "start_session", "p"

    def __init__(self, seed: int = 0):
        super().__init__()
        self.url_map = _url_map()

    def on_home(self, request: Request) -> Response:
        sections = []
        groups = [(LABELS[d], hosts) for d, hosts in DOMAINS.items()] + [("Research", [HOSTS["scholar"]])]
        for label, hosts in groups:
            links = "".join(f'<li class="bookmark"><a href="http://{h}/">{esc(site_name(h))}</a> '
                            f'<span class="host">{h}</span> <span class="blurb">{esc(BLURBS[h])}</span></li>'
                            for h in hosts)
            sections.append(f"<section><h2>{esc(label)}</h2><ul class='bookmarks'>{links}</ul></section>")
        return self.html(request, TITLE, f"<h1>{TITLE}</h1><p>Your bookmarks.</p>{''.join(sections)}")

    def on_stats(self, request: Request) -> Response:
        count = sum(len(h) for h in DOMAINS.values()) + 1
        return json_response(request, {"summary": f"{count} bookmarks", "served_at": int(self.clock() * 1000),
                                       "echo": request.args.get("_", "")})
