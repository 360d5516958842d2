"""Located booking sites: ``dine`` (restaurants), ``hotels`` and ``clinic`` (doctors), on loopback.

They run :class:`~.booking.BookingSite`'s code (search, venue pages, the reservation form, the
availability XHR) with their own :class:`~.booking.BookingProfile`, and add what a person browses
by: the home page lists the cities (``/city/<slug>``, e.g. ``/city/lisbon``; ``/city/Lisbon``
redirects there with a 301), and a city page lists its venues by neighbourhood and postcode. Every
venue has a city, a neighbourhood, a postcode and a state or region (:mod:`.places`).
"""

from __future__ import annotations

from werkzeug.exceptions import NotFound
from werkzeug.routing import Rule
from werkzeug.utils import redirect
from werkzeug.wrappers import Request, Response

from .booking import BookingProfile, BookingSite
from .common import esc
from .places import CITIES, neighbourhoods, slug

DINE = BookingProfile(
    name="Dine Around", color=(200, 90, 40), key="dine",
    kinds=(("restaurant", "Restaurants", ("Italian", "Japanese", "Mexican", "Indian", "Vegan", "Seafood", "Korean",
                                          "Greek", "Lebanese", "Portuguese")),),
    cities=("Lisbon", "Porto", "Austin", "Toronto", "Melbourne", "Oslo", "Barcelona", "Chicago"),
    per_kind=160, located=True, id_prefix="dn",
    words=("Ember", "Fig", "Basil", "Copper", "Sable", "Marigold", "Anchor", "Orchard", "Pepper", "Laurel"),
    name_formats=(("restaurant", "{word} {cat} Table"),),
    session_cookie="dine_sid", session_prefix="d", first_number=30001)

HOTELS = BookingProfile(
    name="NightOwl Stays", color=(30, 70, 140), key="hotels",
    kinds=(("hotel", "Hotels", ("2-star", "3-star", "4-star", "5-star")),),
    cities=tuple(CITIES), per_kind=100, located=True, id_prefix="ht",
    words=("Aurora", "Meridian", "Harbour", "Beacon", "Linden", "Solstice", "Atlas", "Crown", "Ivy", "Monarch"),
    name_formats=(("hotel", "{word} {hood} Hotel"),),
    tiers=(("2-star", 1), ("3-star", 2), ("4-star", 3), ("5-star", 4)),  # the class sets the price tier
    session_cookie="owl_sid", session_prefix="h", first_number=40001)

CLINIC = BookingProfile(
    name="CareFinder Clinics", color=(0, 130, 140), key="clinic",
    kinds=(("doctor", "Doctors", ("General Practitioner", "Dentist", "Dermatologist", "Pediatrician", "Cardiologist",
                                  "Ophthalmologist", "Physiotherapist", "Psychologist")),),
    cities=tuple(CITIES), per_kind=120, located=True, id_prefix="cl",
    first_names=("Amara", "Bruno", "Chloe", "Dev", "Elena", "Felix", "Grace", "Hiro", "Ines", "Jonas"),
    words=("Okafor", "Silva", "Tanaka", "Berg", "Moreau", "Kowalski", "Haddad", "Lindqvist", "Costa", "Reyes"),
    name_formats=(("doctor", "Dr. {first} {word}, {cat}"),),
    session_cookie="care_sid", session_prefix="k", first_number=60001)

PROFILES = {"dine": DINE, "hotels": HOTELS, "clinic": CLINIC}


class LocalSite(BookingSite):
    """A booking site browsed by city and neighbourhood (one of :data:`PROFILES`)."""

    def __init__(self, seed: int = 0, profile: BookingProfile = DINE):
        if not profile.located:
            raise ValueError(f"{profile.name}: a located site needs a located profile")
        super().__init__(seed, profile)
        self.city_by_slug = {slug(c): c for c in self.cities}
        self.url_map.add(Rule("/city/<city>", endpoint="city"))

    def on_home(self, request: Request) -> Response:
        (kind, (label, cats)), = self.kinds.items()
        counts = {c: sum(1 for v in self.venues if v.city == c) for c in self.cities}
        cities = "".join(f'<li><a href="/city/{slug(c)}">{esc(c)}</a> <span class="region">{esc(CITIES[c][0])}, '
                         f'{esc(CITIES[c][1])}</span> <span class="count">{counts[c]} {label.lower()}</span></li>'
                         for c in self.cities)
        types = ", ".join(esc(c) for c in cats)
        body = (f"<h1>{esc(self.title)}</h1><h2>Browse by city</h2><ul class='cities'>{cities}</ul>"
                f"<p class='types'>{label}: {types}</p>{self.search_forms()}")
        return self.html(request, self.title, body)

    def on_city(self, request: Request, city: str) -> Response:
        name = self.city_by_slug.get(city)
        if name is None:
            if slug(city) in self.city_by_slug:  # /city/Lisbon, /city/Bel%C3%A9m: the canonical address
                return redirect(f"/city/{slug(city)}", code=301)
            raise NotFound(f"No city '{city}' here.")
        label = next(iter(self.kinds.values()))[0]
        here = [v for v in self.venues if v.city == name]
        sections = []
        for hood, zip_code in neighbourhoods(name):
            venues = sorted((v for v in here if v.neighbourhood == hood), key=lambda v: (-v.rating, v.id))
            if venues:
                sections.append(f'<section class="neighbourhood" id="{slug(hood)}"><h2>{esc(hood)} '
                                f'<span class="zip">{esc(zip_code)}</span></h2><ul class="results">'
                                + "".join(self.venue_row(v) for v in venues) + "</ul></section>")
        title = f"{label} in {name}"
        body = (f"<h1>{esc(title)}</h1><p class='region'>{esc(CITIES[name][0])}, {esc(CITIES[name][1])}</p>"
                f"<p class='count'>{len(here)} results</p>{''.join(sections)}")
        return self.html(request, title, body)
