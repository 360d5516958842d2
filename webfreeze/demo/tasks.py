"""The demo suite's tasks, written as the steps an annotator takes on the live simulated sites.

Each :class:`Spec` holds the instruction, its ground truth (worked out from the sites' own data,
never from a recording) and the annotator's steps. :mod:`webfreeze.demo.build` plays the steps in
Chromium through the recorder (``record session``), which logs them as the task's reference
trajectory and stores every page they touch in the demo archive.

Steps (tuples): ``("click", role, name[, nth])``, ``("fill", role, name, text[, nth])``,
``("select", role, name, label[, nth])``, ``("press", role, name, key)``, and last
``("answer", text, locator | None, evidence | None)`` where ``locator`` is ``(role, name)`` or a CSS
selector string for the element showing the answer and ``evidence`` lists strings the page must
show (default: the answer itself).

Categories follow WebArxiv's six for the scholar site, plus ``shopping`` and ``booking`` with
final-state checks.

Answer checks: ``exact`` (WebArxiv's strict match) where the answer is one fact with one surface
form: an identifier, a person's name, a title, a journal reference, and a count the instruction
asks for "with a number"; ``numeric`` for a number the instruction does not pin down (a listing's
total, page counts, sizes, a table value within a tolerance); ``must_include`` for lists and for
rules that can be phrased in many ways.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from webfreeze.simulator.sites.booking import KINDS, build_venues
from webfreeze.simulator.sites.catalogue import HOSTS as SITE_HOSTS
from webfreeze.simulator.sites.scholar_data import ARCHIVES, build_corpus
from webfreeze.simulator.sites.shop import build_catalogue

SCHOLAR, SHOP, BOOKING = "scholar.test", "shop.test", "booking.test"
# every simulated site the demo serves while building (the persona sites too), by SITES name
HOSTS = dict(SITE_HOSTS)
CATEGORIES = ["site-info", "rules-accounts", "paper-retrieval", "advanced-search", "paper-extraction",
              "cross-paper", "shopping", "booking"]
SEED = 0


@dataclass
class Spec:
    id: str
    category: str
    instruction: str
    start_url: str
    steps: list
    ground_truth: dict = field(default_factory=dict)

    def task(self) -> dict:
        """The suite line (the reference trajectory path is added by the builder)."""
        return {"id": self.id, "category": self.category, "instruction": self.instruction,
                "start_url": self.start_url, "snapshot_time": None, "ground_truth": dict(self.ground_truth)}


def _home(host: str) -> str:
    return f"http://{host}/"


# ---------------------------------------------------------------------------------------- scholar
def _search(query: str, field_label: str = "All fields") -> list:
    return [("fill", "textbox", "Search term or terms", query),
            ("select", "combobox", "Field to search", field_label),
            ("click", "button", "Search")]


def _open_paper(pid: str) -> list:
    return _search(pid) + [("click", "link", pid)]


def _date(dt) -> str:
    return f"{dt:%a, %d %b %Y %H:%M:%S} UTC"


def scholar_specs() -> list[Spec]:
    corpus = build_corpus(SEED)
    papers = corpus.papers
    rnd = random.Random("webfreeze-demo-tasks")
    specs: list[Spec] = []

    def add(category: str, instruction: str, steps: list, answer, start: str = _home(SCHOLAR)) -> None:
        n = sum(1 for s in specs if s.category == category) + 1
        specs.append(Spec(f"scholar-{category}-{n:03d}", category, instruction, start, steps, {"answer": answer}))

    # -- site information and organisation
    add("site-info", "How many e-prints does Scholar Preprints hold in total? Answer with a number.",
        [("answer", str(len(papers)), None, [f"{len(papers)} e-prints"])], {"exact": str(len(papers))})
    for archive in ("cs", "math", "q-fin"):
        name, cats = ARCHIVES[archive]
        subs = list(cats.values())
        add("site-info", f"List the sub-categories of the {name} archive on Scholar Preprints.",
            [("answer", ", ".join(subs), None, subs)], {"must_include": subs})
    chairs = ["Ada Fischer", "Ravi Tanaka", "Mei Okafor", "Jonas Silva", "Nadia Weber", "Omar Lopez",
              "Grace Kim", "Lucas Haddad", "Sofia Park", "Tariq Novak"]
    for i in (0, 2, 5, 8):
        archive_name = ARCHIVES[list(ARCHIVES)[i]][0]
        add("site-info", f"Who chairs the editorial committee for {archive_name}? Give the person's name.",
            [("click", "link", "Help"), ("click", "link", "Editorial committee"),
             ("answer", chairs[i], None, [f"{chairs[i]}: chair for {archive_name}"])], {"exact": chairs[i]})
    names = [n for _, cats in ARCHIVES.values() for n in cats.values()]
    for cat in ("cs.CL", "stat.ME"):
        archive = cat.split(".")[0]
        cat_name = ARCHIVES[archive][1][cat]
        assert names.count(cat_name) == 1, cat_name  # the link to click must be unambiguous
        from datetime import timedelta

        from webfreeze.simulator.sites.scholar_data import SNAPSHOT, announce_date

        total = sum(1 for p in corpus.in_archive(cat) if announce_date(p) >= SNAPSHOT.date() - timedelta(days=30))
        add("site-info", f"How many entries does the recent listing of {cat_name} ({cat}) show in total?",
            [("click", "link", cat_name), ("answer", str(total), None, [f"Total of {total} entries"])],
            {"numeric": total})

    # -- rules and accounts (help pages)
    submit = [("click", "link", "Help"), ("click", "link", "Submission policy")]
    lic = [("click", "link", "Help"), ("click", "link", "Licenses")]
    rules = [
        (submit, "By what time (US Eastern) must a submission be received on a weekday to be announced the same day?",
         "14:00 US Eastern time", {"must_include": ["14:00"]}),
        (submit, "At what time are same-day submissions announced?", "20:00", {"must_include": ["20:00"]}),
        (submit, "What does a first-time submitter need before submitting to a category?",
         "an endorsement from an established author", {"must_include": ["endorsement"]}),
        (submit, "What happens when an author replaces an article?", "A replacement creates a new version",
         {"must_include": ["new version"]}),
        (submit, "Can an article be removed from Scholar Preprints?", "Articles may be withdrawn but not removed",
         {"must_include": ["withdrawn", "not removed"]}),
        (submit, "Who may submit articles?", "Registered authors may submit", {"must_include": ["registered authors"]}),
        (lic, "Which license do all authors grant Scholar Preprints?",
         "a perpetual, non-exclusive license to distribute their article",
         {"must_include": ["perpetual", "non-exclusive"]}),
        (lic, "Which Creative Commons options may authors choose in addition? List them.",
         "CC BY 4.0, CC BY-SA 4.0, CC BY-NC-SA 4.0, CC BY-NC-ND 4.0 or CC0 1.0",
         {"must_include": ["CC BY 4.0", "CC BY-SA 4.0", "CC BY-NC-SA 4.0", "CC BY-NC-ND 4.0", "CC0 1.0"]}),
        (lic, "Does the license chosen at submission apply to later versions of an article?",
         "it applies to every later version of the article", {"must_include": ["every later version"]}),
        ([("click", "link", "About")], "Are articles on Scholar Preprints peer-reviewed by the site?",
         "not peer-reviewed", {"must_include": ["not peer-reviewed"]}),
    ]
    for steps, question, answer, truth in rules:
        add("rules-accounts", question, steps + [("answer", answer, None, None)], truth)

    # -- paper retrieval (simple search)
    picks = rnd.sample(papers, 40)
    for p in picks[:5]:
        add("paper-retrieval", f"Find the paper titled \"{p.title}\" and give its identifier.",
            _search(p.title, "Title") + [("click", "link", p.id), ("answer", p.id, None, None)], {"exact": p.id})
    for p in picks[5:10]:
        add("paper-retrieval", f"Who are the authors of the paper \"{p.title}\"? List all of them.",
            _search(p.title, "Title") + [("click", "link", p.id), ("answer", ", ".join(p.authors), None, p.authors)],
            {"must_include": list(dict.fromkeys(p.authors))})

    # -- advanced search and filters
    from webfreeze.simulator.sites.scholar import field_text

    words = ["transformers", "kernels", "graphs", "flows", "bayesian", "sparse", "quantum", "policies",
             "estimators", "operators"]
    archives = list(ARCHIVES)
    for i, word in enumerate(words):
        archive = archives[(i * 3) % len(archives)]
        name = ARCHIVES[archive][0]
        hits = [p for p in papers if word in field_text(p, "title")
                and any(c.split(".")[0] == archive for c in p.categories)]
        steps = [("click", "link", "Advanced search"), ("fill", "textbox", "Search term", word, 0),
                 ("select", "combobox", "Field", "Title", 0), ("click", "checkbox", name)]
        if i % 2 == 0:
            steps += [("click", "button", "Search", 1),
                      ("answer", str(len(hits)), None, [f"of {len(hits)} results"] if hits else ["no results"])]
            add("advanced-search", f"Using the advanced search, how many papers in {name} have \"{word}\" in "
                                   f"their title? Answer with a number.", steps,
                {"exact": str(len(hits))})
        else:
            oldest = min(hits, key=lambda p: (p.first_submitted, p.id))
            steps += [("select", "combobox", "Sort", "Oldest first"), ("click", "button", "Search", 1),
                      ("answer", oldest.title, None, None)]
            add("advanced-search", f"Using the advanced search, find the oldest paper in {name} with \"{word}\" in "
                                   f"its title. What is its title?", steps, {"exact": oldest.title})

    # -- deep paper extraction (abstract pages and HTML full text)
    for p in picks[10:13]:
        pages = int(p.comments.split()[0])
        add("paper-extraction", f"According to its comments, how many pages does paper {p.id} have?",
            _open_paper(p.id) + [("answer", str(pages), None, [p.comments])], {"numeric": pages})
    for p in picks[13:16]:
        ours = p.table[-1][1]
        add("paper-extraction", f"In Table 1 of the HTML full text of paper {p.id}, what accuracy does the row "
                                f"\"Ours\" report?",
            _open_paper(p.id) + [("click", "link", "HTML (experimental)"), ("answer", ours, None, None)],
            {"numeric": float(ours), "tolerance": 0.05})
    for p in picks[16:18]:
        v1 = p.versions[0]
        add("paper-extraction", f"How large, in KB, was version 1 of paper {p.id}?",
            _open_paper(p.id) + [("answer", str(v1.size_kb), None, [f"({v1.size_kb} KB)"])], {"numeric": v1.size_kb})
    with_journal = [p for p in picks[18:] if p.journal_ref][:2]
    for p in with_journal:
        add("paper-extraction", f"What is the journal reference of paper {p.id}?",
            _open_paper(p.id) + [("answer", p.journal_ref, None, None)], {"exact": p.journal_ref})

    # -- cross-paper comparison
    rest = [p for p in picks[18:] if p not in with_journal]
    for k in range(5):
        a, b = rest[2 * k], rest[2 * k + 1]
        first = a if (a.first_submitted, a.id) < (b.first_submitted, b.id) else b
        add("cross-paper", f"Which of the papers {a.id} and {b.id} was first submitted earlier? Give its identifier.",
            _open_paper(a.id) + _open_paper(b.id)
            + [("answer", first.id, None, [_date(a.first_submitted), _date(b.first_submitted)])], {"exact": first.id})
    for k in range(5):
        a, b = rest[10 + 2 * k], rest[10 + 2 * k + 1]
        if len(a.authors) == len(b.authors):
            b = next(p for p in rest[20:] if len(p.authors) != len(a.authors) and p is not a)
        more = a if len(a.authors) > len(b.authors) else b
        add("cross-paper", f"Which of the papers {a.id} and {b.id} has more authors? Give its identifier.",
            _open_paper(a.id) + _open_paper(b.id) + [("answer", more.id, None, a.authors + b.authors)],
            {"exact": more.id})
    return specs


# ---------------------------------------------------------------------------------- shop, booking
def shop_specs() -> list[Spec]:
    catalogue = build_catalogue(SEED)
    names = {}
    for p in catalogue:
        names.setdefault(p.name, []).append(p)
    unique = [p for p in catalogue if len(names[p.name]) == 1]
    rnd = random.Random("webfreeze-demo-shop")
    picks = rnd.sample(unique, 10)
    specs = []
    for i, p in enumerate(picks, start=1):
        size = p.sizes[len(p.sizes) // 2]
        qty = 1 + i % 3
        steps = [("fill", "searchbox", "Search products", p.name), ("click", "button", "Search"),
                 ("click", "link", p.name)]
        if len(p.sizes) > 1:
            steps.append(("select", "combobox", "Size", size))
        if qty != 1:
            steps.append(("fill", "spinbutton", "Quantity", str(qty)))
        steps.append(("click", "button", "Add to cart"))
        size_text = f" in size {size}" if len(p.sizes) > 1 else ""
        qty_text = f"{qty} of the" if qty != 1 else "the"
        item = {"sku": p.sku, "size": size, "qty": qty}
        if i <= 7:
            instruction = f"Add {qty_text} {p.name}{size_text} to the shopping cart."
            truth = [{"host": SHOP, "path": "cart.items", "contains": item},
                     {"host": SHOP, "path": "cart.items", "count": 1}]
            steps.append(("answer", "Done", None, None))
        else:
            delivery = "Express" if i % 2 else "Standard"
            name, address = f"Alex Demo{i}", f"{10 + i} Harbour Road, Porto"
            instruction = (f"Buy {qty_text} {p.name}{size_text} with {delivery.lower()} delivery, for {name} "
                           f"at {address}.")
            steps += [("click", "link", "Checkout"), ("fill", "textbox", "Name", name),
                      ("fill", "textbox", "Address", address), ("select", "combobox", "Delivery", delivery),
                      ("click", "button", "Place order"), ("answer", "Done", None, None)]
            truth = [{"host": SHOP, "path": "orders", "count": 1},
                     {"host": SHOP, "path": "orders", "contains": {"name": name, "address": address,
                                                                   "delivery": delivery.lower()}},
                     {"host": SHOP, "path": "orders.0.items", "contains": item}]
        specs.append(Spec(f"shop-{i:03d}", "shopping", instruction, _home(SHOP), steps, {"final_state": truth}))
    return specs


def booking_specs() -> list[Spec]:
    venues = build_venues(SEED)
    rnd = random.Random("webfreeze-demo-booking")
    groups: dict = {}
    for v in venues:
        groups.setdefault((v.kind, v.city, v.category, v.name), []).append(v)
    candidates = [v for v in venues if len(groups[(v.kind, v.city, v.category, v.name)]) == 1 and len(v.slots) >= 2]
    specs = []
    for i in range(1, 11):
        kind = list(KINDS)[i % 3]
        v = rnd.choice([c for c in candidates if c.kind == kind])
        slot = v.slots[rnd.randrange(len(v.slots))]
        person = f"Sam Tester{i}"
        party = 1 if kind == "doctor" else 2 + i % 4
        label = KINDS[kind][0]
        steps = [("select", "combobox", "City", v.city, i % 3), ("select", "combobox", "Type", v.category, i % 3),
                 ("click", "button", f"Find {label.lower()}"), ("click", "link", v.name),
                 ("select", "combobox", "Check-in date" if kind == "hotel" else "Time", slot)]
        if kind != "doctor":
            steps.append(("fill", "spinbutton", "Guests", str(party)))
        steps += [("fill", "textbox", "Name", person), ("click", "button", "Reserve"), ("answer", "Done", None, None)]
        what = {"restaurant": "a table at", "doctor": "an appointment with", "hotel": "a room at"}[kind]
        guests = "" if kind == "doctor" else f" for {party} guests"
        when = f"checking in on {slot}" if kind == "hotel" else f"at {slot}"
        instruction = f"Book {what} {v.name} in {v.city} {when}{guests}, under the name {person}."
        truth = [{"host": BOOKING, "path": "reservations", "count": 1},
                 {"host": BOOKING, "path": "reservations", "contains": {"venue": v.id, "slot": slot, "name": person,
                                                                        "party": party}}]
        specs.append(Spec(f"booking-{i:03d}", "booking", instruction, _home(BOOKING), steps, {"final_state": truth}))
    return specs


def all_specs() -> list[Spec]:
    return scholar_specs() + shop_specs() + booking_specs()
