"""Deterministic personas and their one-year web histories, from the simulated sites' catalogues.

Each persona has a home location, preferences in each domain (a preferred site; brand, colour,
size and price tier on the shops; cuisine, area, time and price tier for restaurants; hotel class,
price tier and destination for hotels; speciality, area and time for doctors) taken from real
items of the sites, and a history of about 2,000 entries over one year in which those
preferences show only as repeated behaviour. The rules (event mix, decomposition, times,
cancellations, noise) are in docs/personas.md ("Generator"). Same seed, same bytes.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable

from .catalogue import Catalogue, load_catalogue
from .history import new_folder, write_history

FORMAT = "webfreeze-personas"
VERSION = 1
HISTORY_START = datetime(2023, 3, 15)  # one year before the simulated sites' "now" (2024-03-15)
HISTORY_DAYS = 365
ENTRIES_TARGET = (1900, 2100)  # entries per persona, drawn per persona
EARLIEST, LATEST = 6 * 60, 26 * 60  # active from 06:00 to 02:00 the next day (nothing from 2 to 6 am)
SEARCH_SITE = "search.example"  # general web searches (the live web's search engine)

FIRST_NAMES = ["Alex", "Sam", "Jordan", "Taylor", "Morgan", "Casey", "Riley", "Jamie", "Avery", "Quinn", "Robin",
               "Noor", "Mei", "Ines", "Tomas", "Kofi", "Aiko", "Lena", "Ravi", "Sofia", "Mateo", "Yara", "Oskar",
               "Amara", "Hugo", "Leila", "Nils", "Priya", "Diego", "Hana"]
LAST_NAMES = ["Garcia", "Lee", "Smith", "Davis", "Okafor", "Tanaka", "Silva", "Novak", "Berg", "Haddad", "Kim",
              "Moreau", "Rossi", "Mensah", "Costa", "Lindqvist", "Patel", "Fischer", "Reyes", "Sato", "Dubois",
              "Olsen", "Ahmed", "Kowalski", "Nguyen", "Almeida", "Schmidt", "Ivanova", "Murphy", "Chen"]
OCCUPATIONS = ["nurse", "software developer", "teacher", "accountant", "graphic designer", "student", "chef",
               "architect", "sales manager", "pharmacist", "journalist", "electrician", "researcher", "lawyer"]
TIER_WORDS = {"budget": "budget", "mid": "mid-range", "premium": "premium"}
LABELS = {"clothing": "clothes", "sports": "sports gear", "home": "home and kitchen goods", "toys": "toys and games"}
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]

# off-site noise: (website, kind, templates); {w} is filled from NOISE_WORDS
NOISE = [
    ("news.example", "web visit", ["{w} council approves new budget", "Storm warning for the {w} coast",
                                   "Interview: the {w} festival organisers", "Markets close higher on {w} news"]),
    ("weather.example", "web visit", ["10-day forecast for {w}", "Rain radar: {w}", "Pollen count in {w}"]),
    ("videos.example", "web visit", ["{w} highlights", "How to make {w} at home", "{w} documentary trailer"]),
    ("wiki.example", "web visit", ["{w} - history and geography", "List of {w} festivals", "{w} (band)"]),
    ("mail.example", "web visit", ["Inbox", "Inbox - 3 unread", "Sent mail", "Drafts"]),
    ("social.example", "web visit", ["Photos from the {w} trip", "{w} community group", "Friends' updates"]),
    ("recipes.example", "web visit", ["Easy {w} soup", "{w} bread in one hour", "Weeknight {w} pasta"]),
    ("maps.example", "web visit", ["Directions to {w} station", "{w} park", "Parking near {w}"]),
    (SEARCH_SITE, "web search", ["weather {w}", "{w} opening hours", "how to repot a {w}", "{w} bus timetable",
                                 "{w} score last night", "what is {w}", "{w} recipe quick", "translate {w}",
                                 "{w} lyrics", "cheap flights to {w}", "{w} exhibition tickets"]),
]
NOISE_WORDS = ["Harbour", "Basil", "Tulip", "Marathon", "Granada", "Quartz", "Aurora", "Riverside", "Ficus",
               "Lantern", "Mango", "Velvet", "Glacier", "Sparrow", "Canyon", "Citrus", "Meadow", "Orbit", "Pebble",
               "Saffron", "Thistle", "Juniper", "Lagoon", "Monsoon", "Nutmeg", "Olive", "Prairie", "Summit"]
REVIEW_WORDS = {5: ["excellent, as described", "great quality", "would order again", "very good value"],
                4: ["good, arrived on time", "nice, minor flaws", "solid choice", "good service"],
                3: ["okay overall", "average, nothing special", "fine for the price"],
                2: ["did not fit well", "disappointing quality", "not as pictured"],
                1: ["poor, sent it back", "would not recommend"]}
VENUE_REVIEWS = {5: ["wonderful evening", "excellent staff", "outstanding, would go again"],
                 4: ["good experience", "friendly and on time", "nice atmosphere"],
                 3: ["okay, a bit slow", "average experience"],
                 2: ["long wait, cold food", "not worth the price"]}


def tier_words(tier) -> str:
    """A price tier as it is written in text ("mid" -> "mid-range"; "$$" stays "$$")."""
    return TIER_WORDS.get(tier, str(tier))


def category_words(item_or_category) -> str:
    """A shop department as it is written in a request ("clothing" -> "clothes")."""
    cat = item_or_category["category"] if isinstance(item_or_category, dict) else item_or_category
    return LABELS.get(cat, cat.replace("-", " "))


def date_words(day: str) -> str:
    """``YYYY-MM-DD`` as ``19 March 2024`` (locale-free)."""
    y, m, d = (int(x) for x in day[:10].split("-"))
    return f"{d} {MONTHS[m - 1]} {y}"


def persona_ids(n: int) -> list[str]:
    """``p01``.. ``pNN`` (wider numbers past 99)."""
    width = max(2, len(str(n)))
    return [f"p{i:0{width}d}" for i in range(1, n + 1)]


def slot_time(slot: str) -> str:
    """The ``HH:MM`` of a ``YYYY-MM-DD HH:MM`` slot ('' for a date-only hotel slot)."""
    return slot[11:16] if len(slot) >= 16 else ""


# ------------------------------------------------------------------------------------ preferences
NOT_SIZES = {"one size", "paperback", "hardcover"}  # formats, not sizes a person has


def _sized(item: dict) -> bool:
    sizes = item.get("sizes") or []
    return len(sizes) > 1 and not NOT_SIZES & set(sizes)


def _best(items: list[dict]) -> dict | None:
    """The best-rated item if it is the only one with that rating (None when tied or empty)."""
    ranked = sorted(items, key=lambda it: (-it["rating"], it["id"]))
    if not ranked or (len(ranked) > 1 and ranked[1]["rating"] == ranked[0]["rating"]):
        return None
    return ranked[0]


def shop_matches(cat: Catalogue, host: str, category: str, prefs: dict) -> list[dict]:
    """Items of ``host`` in ``category`` that fit the shopping preferences brand, size, price tier."""
    return [it for it in cat.domain_items(host, "shopping") if it["category"] == category
            and it["brand"] == prefs["brand"] and prefs["size"] in it["sizes"]
            and it["price_tier"] == prefs["price_tier"]]


def venue_matches(cat: Catalogue, host: str, domain: str, prefs: dict, slot: str) -> list[dict]:
    """Venues of ``host`` in ``domain`` that fit the preferences and have ``slot`` free."""
    out = []
    for it in cat.domain_items(host, domain):
        if slot not in it.get("slots", []) or it["category"] != prefs["category"]:
            continue
        if prefs.get("city") and it.get("city") != prefs["city"]:
            continue
        if prefs.get("neighbourhood") and it.get("neighbourhood") != prefs["neighbourhood"]:
            continue
        if prefs.get("price_tier") and it.get("price_tier") != prefs["price_tier"]:
            continue
        out.append(it)
    return out


def _location(item: dict) -> dict:
    return {k: item[k] for k in ("city", "neighbourhood", "zip", "state") if item.get(k)}


def make_profile(pid: str, seed: int, cat: Catalogue) -> dict:
    """The persona ``pid``'s profile: demographics, home, per-domain preferences and habits."""
    rnd = random.Random(f"webfreeze-persona-{seed}-{pid}")
    name = f"{rnd.choice(FIRST_NAMES)} {rnd.choice(LAST_NAMES)}"
    prefs: dict[str, dict] = {}

    # home: a city where the location-aware domains have venues, at the address of one of them
    local = [d for d in ("restaurant", "clinic") if d in cat.domains]
    cities = None
    for d in local:
        have = {it["city"] for h in cat.domains[d] for it in cat.domain_items(h, d) if it.get("city")}
        cities = have if cities is None else (cities & have or cities)
    city = rnd.choice(sorted(cities)) if cities else None
    spots = [it for d in local for h in cat.domains[d] for it in cat.domain_items(h, d)
             if it.get("city") == city and it.get("neighbourhood")]
    home_item = rnd.choice(spots) if spots else None

    if "shopping" in cat.domains:
        for _ in range(200):
            host = rnd.choice(cat.domains["shopping"])
            pool = [it for it in cat.domain_items(host, "shopping") if _sized(it)]
            if not pool:
                continue
            anchor = rnd.choice(pool)
            p = {"website": host, "category": anchor["category"], "brand": anchor["brand"],
                 "color": anchor["color"], "size": rnd.choice(anchor["sizes"]), "price_tier": anchor["price_tier"]}
            if _best(shop_matches(cat, host, p["category"], p)):
                prefs["shopping"] = p
                break
    for domain in ("restaurant", "clinic", "hotel"):
        if domain not in cat.domains:
            continue
        for _ in range(200):
            host = rnd.choice(cat.domains[domain])
            pool = [it for it in cat.domain_items(host, domain) if it.get("slots")]
            if city:  # restaurants and doctors in the home city, hotels elsewhere (trips)
                pool = [it for it in pool if (it.get("city") == city) != (domain == "hotel")]
            if domain == "clinic" and home_item is not None:
                pool = [it for it in pool if it.get("neighbourhood") == home_item["neighbourhood"]] or pool
            if not pool:
                continue
            anchor = rnd.choice(pool)
            slot = rnd.choice(anchor["slots"])
            p = {"website": host, "category": anchor["category"], "price_tier": anchor.get("price_tier"),
                 "city": anchor.get("city"), "neighbourhood": anchor.get("neighbourhood")}
            if domain != "hotel":
                p["time"] = slot_time(slot)
            else:
                p.pop("neighbourhood")
            if domain == "clinic":
                p.pop("price_tier")  # a doctor is chosen by speciality, area and time, not by price
            p = {k: v for k, v in p.items() if v not in (None, "")}
            if _best(venue_matches(cat, host, domain, p, slot)):
                prefs[domain] = p
                break
    home = _location(home_item) if home_item is not None else ({"city": city} if city else {})
    if "restaurant" in prefs:
        prefs["restaurant"]["party"] = rnd.choice([2, 2, 2, 3, 4])
    return {"format": "webfreeze-persona", "version": 1, "id": pid, "name": name, "age": rnd.randint(21, 72),
            "occupation": rnd.choice(OCCUPATIONS), "home": home, "preferences": prefs,
            "habits": {"active_hours": "06:00-02:00", "reviews_share": round(rnd.uniform(0.3, 0.6), 2)}}


# ------------------------------------------------------------------------------------ history
def _visible(tags: set, text: str, website: str) -> set:
    """The preferences among ``tags`` that the entry shows: the website in its website field, a
    price tier by a price, a size as "size X", any other value written in its text."""
    low = text.lower()
    out = set()
    for tag in tags:
        _, key, value = tag
        value = str(value)
        if (key == "website" and website == value) or (key == "price_tier" and "$" in text) \
                or (key == "size" and f"size {value.lower()}" in low) \
                or (key not in ("website", "price_tier", "size") and value.lower() in low):
            out.add(tag)
    return out


@dataclass
class Event:
    """One thing the persona did: 1-8 entries (search -> visits -> purchase/booking -> review)."""

    kind: str
    seq: int
    entries: list[dict] = field(default_factory=list)  # each with "_t" (datetime) and "_tags" (set)
    status: str | None = None


class _Writer:
    """Builds one persona's events with one random stream (so a seed gives the same bytes)."""

    def __init__(self, profile: dict, seed: int, cat: Catalogue):
        self.p, self.cat = profile, cat
        self.prefs = profile["preferences"]
        self.rnd = random.Random(f"webfreeze-history-{seed}-{profile['id']}")
        self.events: list[Event] = []
        self._memo: dict = {}

    def _pool(self, key: tuple, make: Callable[[], list]) -> list:
        """``make()``, computed once per key (the same filtered item lists are asked for all year)."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]

    # --- time
    def _begin(self) -> datetime:
        """Start a new event: a random day of the year and a time early enough that its at most
        8 entries, 1-12 minutes apart, all fall within the active hours (06:00 to 02:00)."""
        day = self.rnd.randrange(HISTORY_DAYS - 1)
        start = self.rnd.randrange(EARLIEST, LATEST - 8 * 13)
        self.t0 = HISTORY_START + timedelta(days=day, minutes=start, seconds=self.rnd.randrange(60))
        return self.t0

    def _later(self, t: datetime) -> datetime | None:
        """A time 2-12 days after ``t`` in active hours (a review), or None past the history's end."""
        day = HISTORY_START + timedelta(days=(t - HISTORY_START).days + self.rnd.randint(2, 12))
        out = day + timedelta(minutes=self.rnd.randrange(EARLIEST, LATEST - 1), seconds=self.rnd.randrange(60))
        return out if out < HISTORY_START + timedelta(days=HISTORY_DAYS) else None

    def _emit(self, kind: str, steps: list[tuple], review: tuple | None = None, status: str | None = None) -> Event:
        """Make an event from ``steps`` [(type, object, website, tags)], spaced 1-12 minutes apart."""
        ev = Event(kind, len(self.events), status=status)
        t = self.t0
        for i, (typ, obj, site, tags) in enumerate(steps):
            if i:
                t = t + timedelta(minutes=self.rnd.randint(1, 11), seconds=self.rnd.randrange(60))
            entry = {"type": typ, "object": obj, "website": site, "_t": t, "_tags": _visible(tags, obj, site)}
            if status and typ in ("purchase", "booking"):
                entry["status"] = status
                if status == "cancelled":
                    entry["_tags"] = set()  # a cancelled order or booking is no evidence of a preference
            ev.entries.append(entry)
        if review and not status == "cancelled":
            when = self._later(t)
            if when is not None:
                typ, obj, site, tags = review
                ev.entries.append({"type": typ, "object": obj, "website": site, "_t": when,
                                   "_tags": _visible(tags, obj, site)})
        self.events.append(ev)
        return ev

    def _status(self) -> str | None:
        # about a quarter of orders and bookings change: with ~40% of events being orders or bookings,
        # that is ~10% of all events (Persona2Web's share of cancelled or modified events)
        r = self.rnd.random()
        return "cancelled" if r < 0.15 else "modified" if r < 0.27 else None

    # --- tags: which preferences an entry shows
    def _item_tags(self, domain: str, item: dict, *, size: str | None = None, slot: str | None = None) -> set:
        prefs = self.prefs.get(domain, {})
        tags = set()
        if item["host"] == prefs.get("website"):
            tags.add((domain, "website", item["host"]))
        for key in ("brand", "color", "price_tier", "category", "neighbourhood"):
            if key in prefs and item.get(key) == prefs[key]:
                tags.add((domain, key, prefs[key]))
        if prefs.get("city") and item.get("city") == prefs["city"]:
            tags.add((domain, "city", prefs["city"]))
        if size is not None and size == prefs.get("size"):
            tags.add((domain, "size", size))
        if slot and prefs.get("time") and slot_time(slot) == prefs["time"]:
            tags.add((domain, "time", prefs["time"]))
        return tags

    # --- product texts
    @staticmethod
    def _product(item: dict) -> str:
        dept = item.get("department") or item["category"]
        return f"{item['name']} - {dept}, {item['brand']}, {item['color']}, ${item['price']:.2f}"

    def _review(self, domain: str, item: dict, stars: int, texts: dict) -> tuple:
        words = self.rnd.choice(texts[max(min(stars, max(texts)), min(texts))])
        return ("review & rating", f"{item['name']}: {stars}/5 stars, {words}", item["host"],
                self._item_tags(domain, item))

    def _search_site(self, host: str) -> str:
        return host if self.rnd.random() < 0.55 else SEARCH_SITE

    # --- events
    def shop_pref(self) -> None:
        """A purchase that follows the shopping preferences (the anchor category most of the time)."""
        p, rnd = self.prefs["shopping"], self.rnd
        host = p["website"]
        category = p["category"] if rnd.random() < 0.7 else rnd.choice(self._categories(host))
        same = self._department(host, category)
        fits = self._pool(("fits", host, category), lambda: [
            it for it in same if it["brand"] == p["brand"] and it["price_tier"] == p["price_tier"]
            and (category != p["category"] or p["size"] in it["sizes"])] or [
            it for it in same if it["brand"] == p["brand"]] or same)
        label = category_words(category)
        sized = category == p["category"]
        status = self._status()
        steps = []
        if rnd.random() < 0.8:
            q = f"{p['brand']} {label}" + (f" size {p['size']}" if sized and rnd.random() < 0.5 else "")
            tags = {("shopping", "brand", p["brand"])} | ({("shopping", "size", p["size"])} if "size" in q else set())
            site = self._search_site(host)
            if site == host:
                tags.add(("shopping", "website", host))
            steps.append(("web search", q, site, tags))
        looked = [rnd.choice(fits if rnd.random() < 0.7 else same) for _ in range(rnd.randint(1, 4))]
        for it in looked:
            steps.append(("web visit", self._product(it), host, self._item_tags("shopping", it)))
        bought = rnd.choice(fits)
        size = p["size"] if sized and p["size"] in bought["sizes"] else rnd.choice(bought["sizes"])
        if status == "cancelled" and sized and rnd.random() < 0.5:  # the wrong size, cancelled
            size = rnd.choice([s for s in bought["sizes"] if s != p["size"]] or bought["sizes"])
        sz = f" (size {size})" if len(bought["sizes"]) > 1 else ""
        steps.append(("purchase", f"{bought['name']}{sz}, ${bought['price']:.2f}", host,
                      self._item_tags("shopping", bought, size=size if sz else None)))
        review = None
        if rnd.random() < self.p["habits"]["reviews_share"] + 0.2:
            review = self._review("shopping", bought, rnd.choice([4, 5, 5]), REVIEW_WORDS)
        self._emit("shop_pref", steps[:8], review, status)

    def _categories(self, host: str) -> list[str]:
        return self._pool(("cats", host),
                          lambda: sorted({it["category"] for it in self.cat.domain_items(host, "shopping")}))

    def _department(self, host: str, category: str) -> list[dict]:
        return self._pool(("dept", host, category), lambda: [
            it for it in self.cat.domain_items(host, "shopping") if it["category"] == category])

    def shop_other(self) -> None:
        """Browsing (sometimes buying) other things on a shop: gifts, household, anything."""
        rnd = self.rnd
        host = rnd.choice(self.cat.domains["shopping"])
        category = rnd.choice(self._categories(host))
        same = self._department(host, category)
        steps = []
        if rnd.random() < 0.6:
            site = self._search_site(host)
            tags = {("shopping", "website", site)} if site == self.prefs["shopping"]["website"] else set()
            why = rnd.choice(["gift", "deal", "new", "sale", "reviews"])
            steps.append(("web search", f"{category_words(category)} {why}", site, tags))
        for it in [rnd.choice(same) for _ in range(rnd.randint(1, 3))]:
            steps.append(("web visit", self._product(it), host, self._item_tags("shopping", it)))
        status, review = None, None
        if rnd.random() < 0.4:
            status = self._status()
            it = rnd.choice(same)
            size = rnd.choice(it["sizes"])
            sz = f" (size {size})" if len(it["sizes"]) > 1 else ""
            steps.append(("purchase", f"{it['name']}{sz}, ${it['price']:.2f}", host,
                          self._item_tags("shopping", it, size=size if sz else None)))
            if rnd.random() < 0.3:
                review = self._review("shopping", it, rnd.choice([2, 3, 4, 5]), REVIEW_WORDS)
        self._emit("shop_other", steps, review, status)

    def _venue_text(self, it: dict) -> str:
        where = ", ".join(x for x in (it.get("neighbourhood"), it.get("city")) if x)
        tier = f", {'$' * it['tier']}" if isinstance(it.get("tier"), int) and it["domain"] != "clinic" else ""
        return f"{it['name']} - {it['category']}, {where}{tier}, rated {it['rating']}"

    def venue_event(self, domain: str) -> None:
        """Finding and booking a restaurant table, a hotel room or a doctor's appointment."""
        p, rnd = self.prefs[domain], self.rnd
        host = p["website"] if rnd.random() < 0.85 else rnd.choice(self.cat.domains[domain])
        venues = self._pool(("venues", host, domain),
                            lambda: [it for it in self.cat.domain_items(host, domain) if it.get("slots")])
        near = self._pool(("near", host, domain), lambda: [
            it for it in venues if not p.get("city") or it.get("city") == p["city"]] or venues)
        fits = self._pool(("fits", host, domain), lambda: [
            it for it in near if it["category"] == p["category"]
            and (not p.get("neighbourhood") or it.get("neighbourhood") == p["neighbourhood"])] or [
            it for it in near if it["category"] == p["category"]] or near)
        status = self._status()
        steps = []
        if rnd.random() < 0.75:
            where = p.get("neighbourhood") if p.get("neighbourhood") and rnd.random() < 0.5 else p.get("city", "")
            noun = {"restaurant": "restaurant", "hotel": "hotel", "clinic": ""}[domain]
            q = " ".join(x for x in (p["category"].lower(), noun, where) if x)
            tags = {(domain, "category", p["category"])}
            if where and where == p.get("neighbourhood"):
                tags.add((domain, "neighbourhood", where))
            if domain == "hotel" and where == p.get("city"):
                tags.add((domain, "city", where))
            site = self._search_site(host)
            if site == p["website"]:
                tags.add((domain, "website", site))
            steps.append(("web search", q, site, tags))
        for it in [rnd.choice(fits if rnd.random() < 0.7 else near) for _ in range(rnd.randint(1, 3))]:
            steps.append(("web visit", self._venue_text(it), host, self._item_tags(domain, it)))
        chosen = rnd.choice(fits if (status != "cancelled" or rnd.random() < 0.5) else near)
        day = self.t0 + timedelta(days=rnd.randint(1, 30))  # booked ahead
        if domain == "hotel":
            nights = rnd.randint(1, 4)
            obj = (f"{nights} night{'s' * (nights > 1)} at {chosen['name']}, {chosen.get('city', '')}, "
                   f"check-in {day:%Y-%m-%d}")
            tags = self._item_tags(domain, chosen)
        else:
            want = p.get("time", "")
            times = sorted({slot_time(s) for s in chosen["slots"]} - {""})
            t = want if want and rnd.random() < 0.8 else rnd.choice(times or [want])
            where = ", ".join(x for x in (chosen.get("neighbourhood"), chosen.get("city")) if x)
            if domain == "restaurant":
                obj = f"Table for {p.get('party', 2)} at {chosen['name']}, {where}, {day:%Y-%m-%d} {t}"
            else:
                what = "" if chosen["category"] in chosen["name"] else f" ({chosen['category']})"
                obj = f"Appointment with {chosen['name']}{what}, {where}, {day:%Y-%m-%d} {t}"
            tags = self._item_tags(domain, chosen, slot=f"{day:%Y-%m-%d} {t}")
        steps.append(("booking", obj, host, tags))
        review = None
        if domain != "clinic" and rnd.random() < self.p["habits"]["reviews_share"]:
            review = self._review(domain, chosen, rnd.choice([3, 4, 5, 5]), VENUE_REVIEWS)
        self._emit(domain, steps, review, status)

    def rival(self) -> None:
        """A look at a competing site of a domain (not the persona's usual one): 1-3 visits."""
        rnd = self.rnd
        domain = rnd.choice(sorted(self.prefs))
        others = [h for h in self.cat.domains[domain] if h != self.prefs[domain]["website"]] or self.cat.domains[domain]
        host = rnd.choice(others)
        items = self.cat.domain_items(host, domain)
        steps = []
        for it in [rnd.choice(items) for _ in range(rnd.randint(1, 3))]:
            text = self._product(it) if domain == "shopping" else self._venue_text(it)
            steps.append(("web visit", text, host, self._item_tags(domain, it)))
        self._emit("rival", steps)

    def noise(self) -> None:
        """Off-site noise: a search or a visit somewhere else on the web, sometimes both."""
        rnd = self.rnd
        steps = []
        for _ in range(rnd.choice([1, 1, 2, 2, 3])):
            site, typ, templates = rnd.choice(NOISE)
            steps.append((typ, rnd.choice(templates).format(w=rnd.choice(NOISE_WORDS)), site, set()))
        self._emit("noise", steps)

    def run(self) -> list[dict]:
        """Events until the persona's entry target is reached; the entries in time order, with ids."""
        rnd = self.rnd
        target = rnd.randint(*ENTRIES_TARGET)
        menu: list[tuple[float, Callable[[], None]]] = [(0.45, self.noise), (0.09, self.rival)]
        if "shopping" in self.prefs:
            menu += [(0.16, self.shop_pref), (0.12, self.shop_other)]
        for domain, weight in (("restaurant", 0.11), ("hotel", 0.04), ("clinic", 0.03)):
            if domain in self.prefs:
                menu.append((weight, lambda d=domain: self.venue_event(d)))
        weights = [w for w, _ in menu]
        count = 0
        while count < target:
            self._begin()
            rnd.choices(menu, weights)[0][1]()
            count += len(self.events[-1].entries)
        flat = [(e["_t"], ev.seq, i, e) for ev in self.events for i, e in enumerate(ev.entries)]
        flat.sort(key=lambda x: x[:3])
        flat = flat[:target]  # exactly the target: the last few entries of the year fall off
        width = 5
        entries = []
        for n, (t, _, _, e) in enumerate(flat, start=1):
            e["id"] = f"{self.p['id']}-{n:0{width}d}"
            e["timestamp"] = t.strftime("%Y-%m-%d %H:%M:%S")
            entries.append(e)
        return entries


@dataclass
class Persona:
    """One generated persona: profile, history entries (in time order) and events (for statistics)."""

    profile: dict
    entries: list[dict]
    events: list[Event]
    gold: dict


def generate_persona(pid: str, seed: int, cat: Catalogue | None = None) -> Persona:
    """Profile, history and gold of persona ``pid`` for ``seed`` (deterministic)."""
    cat = cat or load_catalogue()
    profile = make_profile(pid, seed, cat)
    writer = _Writer(profile, seed, cat)
    entries = writer.run()
    kept = {id(e) for e in entries}
    events = [Event(ev.kind, ev.seq, [e for e in ev.entries if id(e) in kept], ev.status) for ev in writer.events]
    events = [ev for ev in events if ev.entries]
    profile["habits"]["events_per_week"] = round(len(events) / (HISTORY_DAYS / 7), 1)
    carriers: dict[tuple, list[str]] = {}
    for e in entries:
        for tag in e["_tags"]:
            carriers.setdefault(tag, []).append(e["id"])
    gold_prefs = []
    for domain, prefs in sorted(profile["preferences"].items()):
        for key, value in sorted(prefs.items()):
            if key == "party":
                continue
            gold_prefs.append({"domain": domain, "key": key, "value": value,
                               "entries": carriers.get((domain, key, value), [])})
    gold = {"format": "webfreeze-persona-gold", "version": 1, "persona": pid, "preferences": gold_prefs,
            "heldout_sessions": heldout_sessions(profile, seed, cat)}
    clean = [{k: v for k, v in e.items() if not k.startswith("_")} for e in entries]
    return Persona(profile, clean, events, gold)


def heldout_sessions(profile: dict, seed: int, cat: Catalogue) -> list[dict]:
    """One shopping session kept out of the history (for APeB-style ranking): ~14 products of one
    category the persona looked at, and the one it bought (the best-rated that fits its brand,
    size and price tier); the others are hard negatives of the same category fitting at most two."""
    p = profile["preferences"].get("shopping")
    if not p:
        return []
    rnd = random.Random(f"webfreeze-session-{seed}-{profile['id']}")
    same = [it for it in cat.domain_items(p["website"], "shopping") if it["category"] == p["category"]]
    bought = _best(shop_matches(cat, p["website"], p["category"], p))
    if bought is None:
        return []

    def fit(it):
        return (it["brand"] == p["brand"]) + (p["size"] in it["sizes"]) + (it["price_tier"] == p["price_tier"])

    others = [it for it in same if it["id"] != bought["id"] and fit(it) < 3]
    rnd.shuffle(others)
    others.sort(key=lambda it: -fit(it))  # stable: the hardest first, in shuffled order within a level
    viewed = others[:13]
    return [{"website": p["website"], "category": p["category"], "bought": bought["id"],
             "viewed": sorted(it["id"] for it in viewed)}]


# ------------------------------------------------------------------------------------ writing
def _dump(obj) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def generate(out: str | os.PathLike, *, n: int = 50, seed: int = 0,
             progress: Callable[[int], None] | None = None) -> dict:
    """Write ``n`` personas for ``seed`` into the folder ``out`` (created; it must not exist or be
    empty). Written to a temporary folder beside it and renamed, so never half-written.
    Returns the manifest."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out}: already exists and is not an empty folder")
    cat = load_catalogue()
    ids = persona_ids(n)
    with new_folder(out) as tmp:
        for pid in ids:
            persona = generate_persona(pid, seed, cat)
            folder = tmp / pid
            folder.mkdir()
            write_history(folder / "history.jsonl", persona.entries)
            (folder / "profile.json").write_text(_dump(persona.profile), encoding="utf-8")
            # gold: long lists of ids, read by programs only, so one compact line
            (folder / "gold.json").write_text(json.dumps(persona.gold, sort_keys=True, ensure_ascii=False,
                                                         separators=(",", ":")) + "\n", encoding="utf-8")
            if progress:
                progress(1)
        manifest = {"format": FORMAT, "version": VERSION, "seed": seed, "n": n, "personas": ids,
                    "catalogue": cat.source}
        (tmp / "manifest.json").write_text(_dump(manifest), encoding="utf-8")
    return manifest


def load_personas(folder: str | os.PathLike) -> dict:
    """A persona folder's manifest, checked (``ValueError`` with one line when it is not one)."""
    path = Path(folder) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file (not a folder written by 'webfreeze personas generate')") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable JSON manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise ValueError(f"{path}: not a {FORMAT} version {VERSION} manifest")
    return manifest
