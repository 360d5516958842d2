"""``booking``: reservations for restaurants, doctors and hotels (Persona2Web-style), on loopback.

Routes: ``/`` the three verticals; ``/search?kind=restaurant|doctor|hotel&city=&q=&tier=&min_rating=&sort=``
results (cuisine or speciality in ``q``; ``sort`` = rating|price|name); ``/venue/<id>`` details with
the free slots of the next days and a reservation form (POST ``/reserve``: ``slot``, ``name``,
``party``; 303 to ``/reservation/<n>``); ``/reservations`` the session's bookings;
``/api/availability/<id>`` (JSON XHR with a timestamp). Venues deterministic for a seed; booked
slots are server state per ``booking_session`` cookie, and a booked slot is gone for everyone.

One class serves every booking site: a :class:`BookingProfile` gives a site its name, colour,
venue stream, verticals, cities and naming. ``TABLETIME`` is ``booking.test`` (its pages never
change: the demo's tasks and cassette depend on them); the located sites of :mod:`.local` also put
each venue in a neighbourhood with a postcode (:mod:`.places`).
"""

from __future__ import annotations

import itertools
import random
import threading
from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache
from urllib.parse import urlencode

from werkzeug.exceptions import NotFound
from werkzeug.routing import Rule
from werkzeug.utils import redirect
from werkzeug.wrappers import Request, Response

from .common import SimulatedSite, esc, json_response, route_map
from .places import neighbourhoods, state_of

SITE = "TableTime Bookings"
COLOR = (30, 140, 90)
CITIES = ["Lisbon", "Oslo", "Austin", "Kyoto", "Nairobi", "Toronto", "Melbourne", "Porto"]
KINDS = {
    "restaurant": ("Restaurants", ["Italian", "Japanese", "Mexican", "Indian", "Vegan", "Seafood", "Thai", "French"]),
    "doctor": ("Doctors", ["Dentist", "Dermatologist", "General Practitioner", "Pediatrician", "Optometrist",
                           "Physiotherapist"]),
    "hotel": ("Hotels", ["Boutique", "Business", "Resort", "Hostel", "Apartment"]),
}
FIRST_DAY = date(2024, 3, 18)  # the simulated "today": availability is shown from here
DAYS = 7
WORDS = ("Olive", "Harbor", "Maple", "Cedar", "Lantern", "Juniper", "Saffron", "Willow", "Summit", "Coral")


@dataclass
class Venue:
    id: str
    kind: str
    name: str
    city: str
    category: str  # cuisine, speciality or hotel type
    tier: int  # 1-4 ($ to $$$$)
    rating: float
    reviews: int
    address: str
    slots: list[str]  # "YYYY-MM-DD HH:MM" (hotels: check-in dates "YYYY-MM-DD")
    neighbourhood: str = ""  # located sites only (booking.test shows the city alone)
    zip: str = ""
    state: str = ""


@dataclass(frozen=True)
class BookingProfile:
    """What makes one booking site differ from another on the same code (hashable: it keys the
    venue cache). ``kinds``: (kind, label, categories) per vertical; ``name_formats``: (kind, format)
    with ``{word}``, ``{cat}``, ``{first}`` and ``{hood}``; ``tiers``: (category, price tier) when the
    category fixes the tier (a hotel's class), else the tier is drawn; ``located``: venues get a
    neighbourhood and postcode from :mod:`.places`."""

    name: str
    color: tuple[int, int, int]
    key: str  # the venues' random stream: random.Random(f"{key}-{seed}")
    kinds: tuple[tuple[str, str, tuple[str, ...]], ...] = tuple((k, label, tuple(c)) for k, (label, c) in KINDS.items())
    cities: tuple[str, ...] = tuple(CITIES)
    per_kind: int = 80
    words: tuple[str, ...] = WORDS
    first_names: tuple[str, ...] = ("Ana", "Ben", "Chen", "Dara", "Eli", "Fay")
    name_formats: tuple[tuple[str, str], ...] = (("restaurant", "{word} {cat} Kitchen"),
                                                 ("doctor", "Dr. {first} {word}, {cat}"),
                                                 ("hotel", "The {word} {cat} Hotel"))
    tiers: tuple[tuple[str, int], ...] = ()
    located: bool = False
    id_prefix: str = ""  # "" : ids are the kind's initial and a number (r0001)
    session_cookie: str = "booking_session"
    session_prefix: str = "b"
    first_number: int = 5001


TABLETIME = BookingProfile(name=SITE, color=COLOR, key="booking")


@lru_cache(maxsize=16)
def build_venues(seed: int = 0, per_kind: int | None = None, profile: BookingProfile = TABLETIME) -> list[Venue]:
    """The site's venues for ``seed`` (deterministic); ``per_kind`` defaults to the profile's."""
    rnd = random.Random(f"{profile.key}-{seed}")
    words = profile.words
    formats, tiers = dict(profile.name_formats), dict(profile.tiers)
    venues = []
    for kind, _, cats in profile.kinds:
        for i in range(profile.per_kind if per_kind is None else per_kind):
            cat = cats[i % len(cats)]
            city = profile.cities[(i // len(cats) + i) % len(profile.cities)]
            hood, zip_code = rnd.choice(neighbourhoods(city)) if profile.located else ("", "")
            fmt = formats[kind]
            first = rnd.choice(profile.first_names) if "{first}" in fmt else ""  # drawn before the word
            name = fmt.format(word=rnd.choice(words), cat=cat, first=first, hood=hood)
            slots = []
            for d in range(DAYS):
                day = FIRST_DAY + timedelta(days=d)
                if kind == "hotel":
                    if rnd.random() < 0.7:
                        slots.append(day.isoformat())
                else:
                    hours = [12, 13, 18, 19, 20, 21] if kind == "restaurant" else [9, 10, 11, 14, 15, 16]
                    slots += [f"{day.isoformat()} {h:02d}:{m:02d}" for h in hours for m in (0, 30)
                              if rnd.random() < 0.35]
            tier = tiers[cat] if cat in tiers else rnd.randint(1, 4)
            rating, reviews = round(rnd.uniform(3.0, 5.0), 1), rnd.randint(3, 2500)
            street = f"{rnd.randint(1, 300)} {rnd.choice(words)} Street"
            address = f"{street}, {hood}, {zip_code} {city}" if profile.located else f"{street}, {city}"
            vid = f"{profile.id_prefix}{i:04d}" if profile.id_prefix else f"{kind[0]}{i:04d}"
            venues.append(Venue(id=vid, kind=kind, name=name, city=city, category=cat, tier=tier, rating=rating,
                                reviews=reviews, address=address, slots=slots, neighbourhood=hood, zip=zip_code,
                                state=state_of(city) if profile.located else ""))
    return venues


NAV = """<nav><a href="/">Home</a> <a href="/reservations">My reservations</a></nav>"""


# The routes, built once for every instance (common.route_map).
_url_map = route_map(lambda: [
    Rule("/", endpoint="home"),
    Rule("/search", endpoint="search"),
    Rule("/venue/<vid>", endpoint="venue"),
    Rule("/reserve", endpoint="reserve", methods=["POST"]),
    Rule("/reservation/<int:number>", endpoint="reservation"),
    Rule("/reservations", endpoint="reservations"),
    Rule("/api/availability/<vid>", endpoint="availability"),
    Rule("/api/stats", endpoint="stats"),
    Rule("/static/<name>", endpoint="static"),
])


class BookingSite(SimulatedSite):
    """The WSGI application; reservations are per-session server state."""

    title, color, nav = SITE, COLOR, NAV
    session_cookie, session_prefix = "booking_session", "b"

    def __init__(self, seed: int = 0, profile: BookingProfile = TABLETIME):
        super().__init__()
        self.profile = profile
        self.title, self.color = profile.name, profile.color
        self.session_cookie, self.session_prefix = profile.session_cookie, profile.session_prefix
        self.kinds = {kind: (label, list(cats)) for kind, label, cats in profile.kinds}
        self.cities = list(profile.cities)
        self.venues = build_venues(seed, profile=profile)
        self.by_id = {v.id: v for v in self.venues}
        self._numbers = itertools.count(profile.first_number)
        self._lock = threading.Lock()
        self.booked: dict[tuple[str, str], int] = {}  # (venue, slot) -> reservation number
        self.reservations: dict[int, dict] = {}
        self.url_map = _url_map()

    def free_slots(self, v: Venue) -> list[str]:
        with self._lock:
            return [s for s in v.slots if (v.id, s) not in self.booked]

    # ------------------------------------------------------------------ pages
    def search_forms(self) -> str:
        """One GET search form per vertical (city and type), as the home page shows them."""
        forms = []
        for kind, (label, cats) in self.kinds.items():
            cities = "".join(f"<option>{c}</option>" for c in self.cities)
            options = "".join(f"<option>{c}</option>" for c in cats)
            forms.append(f'<section><h2>{label}</h2><form method="get" action="/search"><input type="hidden" '
                         f'name="kind" value="{kind}"><label>City <select name="city"><option value="">any</option>'
                         f'{cities}</select></label><label>Type <select name="q"><option value="">any</option>'
                         f'{options}</select></label><button type="submit">Find {label.lower()}</button></form>'
                         f'</section>')
        return "".join(forms)

    def on_home(self, request: Request) -> Response:
        return self.html(request, self.title, f"<h1>{esc(self.title)}</h1>" + self.search_forms())

    def on_search(self, request: Request) -> Response:
        args = request.args
        kind = args.get("kind", next(iter(self.kinds)))
        if kind not in self.kinds:
            raise NotFound(f"Nothing to book of kind '{kind}'.")
        city, q = args.get("city", ""), args.get("q", "").strip().lower()
        items = [v for v in self.venues if v.kind == kind and (not city or v.city == city)
                 and (not q or q in f"{v.category} {v.name}".lower())]
        if args.get("tier", "").isdigit():
            items = [v for v in items if v.tier <= int(args["tier"])]
        try:
            min_rating = float(args.get("min_rating", "") or 0)
        except ValueError:
            min_rating = 0.0
        items = [v for v in items if v.rating >= min_rating]
        sort = args.get("sort", "rating")
        key = {"price": lambda v: (v.tier, v.id), "name": lambda v: (v.name, v.id)}.get(
            sort, lambda v: (-v.rating, -v.reviews, v.id))
        items = sorted(items, key=key)
        base = {k: v for k, v in args.items() if k != "sort"}
        sorts = " | ".join(f'<a href="/search?{urlencode({**base, "sort": s})}">{s}</a>' for s in ("rating", "price", "name"))
        rows = "".join(self.venue_row(v) for v in items)
        title = f"{self.kinds[kind][0]}{' in ' + city if city else ''}"
        return self.html(request, title, f"<h1>{esc(title)}</h1><p class='count'>{len(items)} results</p>"
                                         f"<p>Sort: {sorts}</p><ul class='results'>{rows}</ul>")

    def venue_row(self, v: Venue) -> str:
        """A venue's line in a result list (located venues also name their neighbourhood)."""
        hood = f'<span class="neighbourhood">{esc(v.neighbourhood)}</span> ' if v.neighbourhood else ""
        return (f'<li class="venue" data-id="{v.id}"><a href="/venue/{v.id}">{esc(v.name)}</a> '
                f'<span class="city">{esc(v.city)}</span> {hood}<span class="category">{esc(v.category)}</span> '
                f'<span class="tier">{"$" * v.tier}</span> <span class="rating">{v.rating}</span> '
                f'<span class="free">{len(self.free_slots(v))} free slots</span></li>')

    def _venue(self, vid: str) -> Venue:
        if vid not in self.by_id:
            raise NotFound(f"No venue {vid}.")
        return self.by_id[vid]

    def on_venue(self, request: Request, vid: str) -> Response:
        v = self._venue(vid)
        free = self.free_slots(v)
        label = "Check-in date" if v.kind == "hotel" else "Time"
        options = "".join(f'<option value="{s}">{s}</option>' for s in free)
        party = '<label>Guests <input type="number" name="party" value="2" min="1" max="12"></label>' \
            if v.kind != "doctor" else '<input type="hidden" name="party" value="1">'
        body = (f'<div class="venue-page" data-id="{v.id}"><h1>{esc(v.name)}</h1>'
                f'<dl><dt>City</dt><dd>{esc(v.city)}</dd>{self._located(v)}<dt>Address</dt><dd>{esc(v.address)}</dd>'
                f'<dt>Type</dt><dd>{esc(v.category)}</dd><dt>Price</dt><dd>{"$" * v.tier}</dd>'
                f'<dt>Rating</dt><dd>{v.rating} ({v.reviews} reviews)</dd></dl>'
                f'<p id="site-availability" data-src="/api/availability/{v.id}">{len(free)} slots free</p>'
                + (f'<form method="post" action="/reserve" class="reserve"><input type="hidden" name="venue" '
                   f'value="{v.id}"><label>{label} <select name="slot">{options}</select></label>{party}'
                   f'<label>Name <input name="name" required></label><button type="submit">Reserve</button></form>'
                   if free else '<p class="full">Fully booked this week.</p>') + "</div>")
        return self.html(request, v.name, body)

    @staticmethod
    def _located(v: Venue) -> str:
        if not v.neighbourhood:
            return ""
        return (f'<dt>Neighbourhood</dt><dd class="neighbourhood">{esc(v.neighbourhood)}</dd>'
                f'<dt>Postcode</dt><dd class="zip">{esc(v.zip)}</dd>'
                f'<dt>State / region</dt><dd class="state">{esc(v.state)}</dd>')

    def on_reserve(self, request: Request) -> Response:
        session = self.session(request)
        v = self._venue(request.form.get("venue", ""))
        slot, name = request.form.get("slot", ""), request.form.get("name", "").strip()
        party = request.form.get("party", "1")
        if not name or slot not in v.slots or not party.isdigit() or not 1 <= int(party) <= 12:
            return self.html(request, "Reservation", "<h1>Please choose a time, a party size and give a name</h1>")
        with self._lock:
            if (v.id, slot) in self.booked:
                return self.html(request, "Reservation", f"<h1>Sorry, {esc(slot)} was just taken</h1>")
            number = next(self._numbers)
            self.booked[(v.id, slot)] = number
            self.reservations[number] = {"session": session, "venue": v.id, "slot": slot, "name": name,
                                         "party": int(party)}
        return redirect(f"/reservation/{number}", code=303)

    def on_reservation(self, request: Request, number: int) -> Response:
        session = self.session(request)
        r = self.reservations.get(number)
        if r is None or r["session"] != session:
            raise NotFound("No such reservation.")
        v = self.by_id[r["venue"]]
        return self.html(request, f"Reservation {number}",
                         f'<h1>Confirmed: {esc(v.name)}</h1><p class="reservation-number">Reservation #{number}</p>'
                         f'<p class="slot">{esc(r["slot"])}, {r["party"]} guest(s), under {esc(r["name"])}</p>')

    def on_reservations(self, request: Request) -> Response:
        session = self.session(request)
        with self._lock:
            mine = sorted((n, r) for n, r in self.reservations.items() if r["session"] == session)
        items = "".join(f'<li><a href="/reservation/{n}">#{n}</a> {esc(self.by_id[r["venue"]].name)}, '
                        f'{esc(r["slot"])}</li>' for n, r in mine)
        return self.html(request, "My reservations", f"<h1>My reservations</h1><ul>{items or '<li>none yet</li>'}</ul>")

    def on_availability(self, request: Request, vid: str) -> Response:
        v = self._venue(vid)
        return json_response(request, {"venue": v.id, "free": self.free_slots(v), "served_at": int(self.clock() * 1000),
                                       "summary": f"{len(self.free_slots(v))} slots free"})

    def on_stats(self, request: Request) -> Response:
        return json_response(request, {"summary": f"{len(self.venues)} places to book",
                                       "served_at": int(self.clock() * 1000), "echo": request.args.get("_", "")})
