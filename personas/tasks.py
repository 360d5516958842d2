"""Personalised task suites from generated personas (Persona2Web-style query sets, APeB-style ranking).

Per persona and domain (shopping, restaurant, hotel, clinic) one query set: the same request at
three ambiguity levels (0: site and preferences explicit; 1: site masked; 2: site and preferences
masked). Success needs the preferences: the target (the product to put in the cart, the venue and
slot to reserve) is the best-rated item of the persona's preferred site that fits them, computed
from the catalogues and the persona's profile, never read back from the text. Ranking tasks come
from the session the generator held out of each history. Rules in docs/personas.md
("Personalised tasks").
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from webfreeze.common.errors import WebfreezeError

from .catalogue import Catalogue, load_catalogue
from .generate import _best, category_words, date_words, load_personas, shop_matches, tier_words, venue_matches
from .history import new_folder

START_PAGE = "http://start.test/"
DOMAIN_ORDER = ("shopping", "restaurant", "hotel", "clinic")
# the rubric's name of each task preference -> the profile's key (the catalogue attribute)
TASK_KEYS = {"shopping": {"brand": "brand", "size": "size", "price_tier": "price_tier"},
             "restaurant": {"cuisine": "category", "neighbourhood": "neighbourhood", "time": "time"},
             "hotel": {"hotel_class": "category", "price_tier": "price_tier"},
             "clinic": {"speciality": "category", "neighbourhood": "neighbourhood", "time": "time"}}
HOTEL_GUESTS = 2


class TaskBuildError(WebfreezeError):
    """A persona folder or archive that tasks cannot be built from (one line)."""


def _a(word: str) -> str:
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskBuildError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TaskBuildError(f"{path}: not readable JSON ({exc})") from None


def _location_text(loc: dict) -> str:
    parts = [loc.get("city"), " ".join(x for x in (loc.get("state"), loc.get("zip")) if x)]
    return ", ".join(x for x in parts if x)


# ------------------------------------------------------------------------------------ query sets
def _gold(gold: dict, domain: str) -> dict:
    return {(g["key"], str(g["value"])): g["entries"] for g in gold["preferences"] if g["domain"] == domain}


def _pick_day(rnd: random.Random, days: list[str], match) -> tuple[str, dict] | None:
    """A day (in random order) on which ``match(day)`` has a single best-rated venue."""
    order = sorted(days)
    rnd.shuffle(order)
    for day in order:
        best = _best(match(day))
        if best is not None:
            return day, best
    return None


def query_set(profile: dict, gold: dict, domain: str, cat: Catalogue) -> dict | None:
    """The ground truth and wording parts of ``profile``'s query set in ``domain`` (None when the
    catalogue has no single best-fitting target for it)."""
    p = profile["preferences"].get(domain)
    if not p:
        return None
    pid, host = profile["id"], p["website"]
    rnd = random.Random(f"webfreeze-tasks-{pid}-{domain}")
    values = {name: p[key] for name, key in TASK_KEYS[domain].items() if p.get(key) not in (None, "")}
    qs = {"id": f"{pid}-{domain}-1", "domain": domain, "host": host, "name": profile["name"],
          "preferences": values, "location": None}
    if domain == "shopping":
        target = _best(shop_matches(cat, host, p["category"], p))
        if target is None:
            return None
        qs.update(target=target, label=category_words(p["category"]),
                  final_state=[{"host": host, "path": "cart.items",
                                "contains": {"sku": target["id"], "size": p["size"]}},
                               {"host": host, "path": "cart.items", "count": 1}])
    else:
        fit = {"category": p["category"], "city": p.get("city")}
        if domain != "hotel":
            fit["neighbourhood"] = p.get("neighbourhood")
        else:
            fit["price_tier"] = p.get("price_tier")
        items = cat.domain_items(host, domain)
        days = sorted({s[:10] for it in items for s in it.get("slots", [])})
        if domain == "hotel":
            picked = _pick_day(rnd, days, lambda d: venue_matches(cat, host, domain, fit, d))
        else:
            picked = _pick_day(rnd, days, lambda d: venue_matches(cat, host, domain, fit, f"{d} {p['time']}"))
        if picked is None:
            return None
        day, target = picked
        slot = day if domain == "hotel" else f"{day} {p['time']}"
        want = {"venue": target["id"], "slot": slot, "name": profile["name"]}
        if domain == "restaurant":
            want["party"] = p.get("party", 2)
        elif domain == "hotel":
            want["party"] = HOTEL_GUESTS
        qs.update(target=target, day=day, slot=slot, party=want.get("party"),
                  final_state=[{"host": host, "path": "reservations", "contains": want},
                               {"host": host, "path": "reservations", "count": 1}])
        if host in cat.location_aware:
            qs["location"] = (dict(profile["home"]) if domain != "hotel" else
                              {k: target[k] for k in ("city", "state") if target.get(k)})
    g = _gold(gold, domain)
    entries = {name: g.get((TASK_KEYS[domain][name], str(value)), []) for name, value in values.items()}
    entries["website"] = g.get(("website", host), [])
    if qs["location"]:
        entries["location"] = g.get(("city", str(qs["location"].get("city"))), [])
    qs["gold_entries"] = entries
    return qs


def instruction(qs: dict, level: int) -> str:
    """The query set's request at ``level`` (0 names site and values; 1 drops the site; 2 also the values)."""
    v, domain = qs["preferences"], qs["domain"]
    if domain == "shopping":
        if level < 2:
            ask = (f"find {qs['label']} from {v['brand']} in size {v['size']} at {tier_words(v['price_tier'])} prices "
                   f"and add the best-rated one to the cart.")
        else:
            ask = (f"find {qs['label']} from my usual brand, in my size and at my usual prices, "
                   f"and add the best-rated one to the cart.")
    elif domain == "hotel":
        city = (qs["location"] or {}).get("city") or qs["target"].get("city", "")
        where = f"in {city} at {tier_words(v['price_tier'])} prices" if level < 2 else \
            "in the city I usually travel to, at my usual prices"
        kind = f"{_a(v['hotel_class'])} hotel" if level < 2 else "my usual kind of hotel"
        ask = (f"book a room for {qs['party']} guests at {kind} {where}, checking in on {date_words(qs['day'])}, "
               f"under the name {qs['name']}; if several are free that day, take the best-rated.")
    else:
        area = v.get("neighbourhood") or (qs["location"] or {}).get("city") or qs["target"].get("city", "")
        if domain == "restaurant":
            what = (f"reserve a table for {qs['party']} at {_a(v['cuisine'])} restaurant" if level < 2 else
                    f"reserve a table for {qs['party']} at my usual kind of restaurant")
        else:
            what = (f"book an appointment with {_a(v['speciality'])}" if level < 2 else
                    "book an appointment with my usual kind of doctor")
        where = f"in {area}" if level < 2 else "in my usual area"
        at = f"at {v['time']}" if level < 2 else "at my usual time"
        ask = (f"{what} {where} on {date_words(qs['day'])} {at} under the name {qs['name']}; "
               f"if several have that time free, take the best-rated.")
    if level == 0:
        text = f"At {qs['host']}, {ask}"
        if qs["location"]:
            text += f" ({_location_text(qs['location'])})"
        return text
    return ask[0].upper() + ask[1:]


def _step(n: int, action: str, url: str, role: str | None = None, name: str | None = None, value=None) -> dict:
    target = {"role": role, "name": name, "css": None, "tag": None, "text": ""} if role else None
    return {"step": n, "action": action, "target": target, "value": value, "url": url}


def reference_trajectory(start_url: str, page: str | None, actions: list[tuple], answer: str) -> dict:
    """A reference trajectory (``record session`` shape, docs/formats.md) written from the ground
    truth, for the oracle agent: open ``page`` (the target item's page), do ``actions``
    [(action, role, name, value)] there, answer. Targets are found again by role and name."""
    steps = [_step(0, "navigate", start_url)]
    if page and page != start_url:
        steps.append(_step(1, "navigate", page))
    at = page or start_url
    for action, role, name, value in actions:
        steps.append(_step(len(steps), action, at, role, name, value))
    steps.append(_step(len(steps), "answer", at, value={"text": answer, "evidence": []}))
    return {"version": 1, "kind": "reference_trajectory", "start_url": start_url,
            "recorded_by": "webfreeze personas tasks", "steps": steps}


def _reference_actions(qs: dict) -> list[tuple]:
    """What to do on the target's page: choose the size and add to the cart, or fill the booking form."""
    target = qs["target"]
    if qs["domain"] == "shopping":
        size = qs["preferences"]["size"]
        pick = [("select", "combobox", "Size", {"value": size, "label": size})] if len(target["sizes"]) > 1 else []
        return pick + [("click", "button", "Add to cart", None)]
    label = "Check-in date" if qs["domain"] == "hotel" else "Time"
    acts = [("select", "combobox", label, {"value": qs["slot"], "label": qs["slot"]})]
    if qs["party"] is not None:
        acts.append(("type", "spinbutton", "Guests", str(qs["party"])))
    return acts + [("type", "textbox", "Name", qs["name"]), ("click", "button", "Reserve", None)]


def level_task(qs: dict, level: int) -> dict:
    """The task of query set ``qs`` at ``level``, in the suite's line format."""
    rubric = {"websites": [qs["host"]], "preferences": dict(qs["preferences"]),
              "location_aware": qs["location"] is not None, "gold_entries": qs["gold_entries"]}
    if qs["location"]:
        rubric["location"] = qs["location"]
    start = f"http://{qs['host']}/" if level == 0 else START_PAGE
    page = f"http://{qs['host']}{qs['target']['path']}"
    reference = reference_trajectory(start, page, _reference_actions(qs), "Done")
    return {"id": f"{qs['id']}-L{level}", "category": f"persona-L{level}", "instruction": instruction(qs, level),
            "start_url": start, "persona": qs["id"].split("-")[0], "level": level, "query_set": qs["id"],
            "domain": qs["domain"],
            "ground_truth": {"rubric": rubric, "final_state": qs["final_state"], "reference_trajectory": reference}}


def ranking_tasks(profile: dict, gold: dict, cat: Catalogue) -> list[dict]:
    """APeB-style ranking tasks from the held-out session: one for the intent query, one for the
    refined query; ~14 candidates (the viewed products and the bought one), shuffled per persona."""
    out = []
    p = profile["preferences"].get("shopping")
    for n, session in enumerate(gold.get("heldout_sessions") or [], start=1):
        host = session["website"]
        by_id = {it["id"]: it for it in cat.domain_items(host, "shopping")}
        ids = [session["bought"], *session["viewed"]]
        if any(i not in by_id for i in ids):
            continue
        rnd = random.Random(f"webfreeze-ranking-{profile['id']}-{n}")
        rnd.shuffle(ids)
        candidates = [{"id": i, "name": by_id[i]["name"], "brand": by_id[i]["brand"], "color": by_id[i]["color"],
                       "sizes": by_id[i]["sizes"], "price": by_id[i]["price"], "rating": by_id[i]["rating"]}
                      for i in ids]
        label = category_words(session["category"])
        queries = {"intent": f"I need new {label}.",
                   "refined": f"{label.capitalize()} from {p['brand']} in size {p['size']}, "
                              f"at {tier_words(p['price_tier'])} prices."}
        best_five = [session["bought"], *[i for i in ids if i != session["bought"]][:4]]
        reference = reference_trajectory(f"http://{host}/", None, [], json.dumps(best_five))
        for kind, query in queries.items():
            out.append({"id": f"{profile['id']}-ranking-{n}-{kind}", "category": "ranking",
                        "instruction": (f"{query} Rank the candidate products for me, using what you know of "
                                        f"my history, and answer with a JSON list of exactly five candidate ids, "
                                        f"best first."),
                        "start_url": f"http://{host}/", "persona": profile["id"],
                        "query_set": f"{profile['id']}-ranking-{n}",
                        "query_type": kind, "query": query, "candidates": candidates,
                        "ground_truth": {"ranking": {"target": session["bought"], "candidates": ids},
                                         "reference_trajectory": reference}})
    return out


# ------------------------------------------------------------------------------------ the suite
def _needed_urls(task: dict) -> list[str]:
    urls = [task["start_url"]]
    if task["category"] == "ranking":
        return urls
    host = task["ground_truth"]["rubric"]["websites"][0]
    urls.append(f"http://{host}/")
    return urls + [task["_target_url"]]


class _Recorded:
    """Which URLs an archive recorded (by SURT key, any method, any time)."""

    def __init__(self, path: str | os.PathLike):
        from webfreeze.archives import Archive, ArchiveError
        from webfreeze.archives.urlkey import surt_key

        self._key = surt_key
        try:
            self.archive = Archive.open(path)
        except ArchiveError as exc:
            raise TaskBuildError(str(exc)) from None

    def __contains__(self, url: str) -> bool:
        return bool(self.archive.lookup_surt(self._key(url), limit=1))

    def close(self) -> None:
        self.archive.close()


def build_tasks(personas_dir: str | os.PathLike, *, levels=(0, 1, 2), per_persona: int = 3,
                ranking: bool = True, cat: Catalogue | None = None) -> list[dict]:
    """Every task for the personas in ``personas_dir`` (each personalised task carries its target
    page as ``_target_url``, which :func:`build_suite` removes)."""
    folder = Path(personas_dir)
    try:
        manifest = load_personas(folder)
    except ValueError as exc:
        raise TaskBuildError(str(exc)) from None
    cat = cat or load_catalogue()
    tasks = []
    for pid in manifest["personas"]:
        profile = _read_json(folder / pid / "profile.json")
        gold = _read_json(folder / pid / "gold.json")
        domains = [d for d in DOMAIN_ORDER if d in profile.get("preferences", {})][:per_persona]
        for domain in domains:
            qs = query_set(profile, gold, domain, cat)
            if qs is None:
                continue
            for level in levels:
                task = level_task(qs, level)
                task["_target_url"] = f"http://{qs['host']}{qs['target']['path']}"
                tasks.append(task)
        if ranking:
            tasks += ranking_tasks(profile, gold, cat)
    return tasks


def build_suite(personas_dir: str | os.PathLike, out: str | os.PathLike, *, levels=(0, 1, 2),
                per_persona: int = 3, ranking: bool = True, archive: str | os.PathLike | None = None,
                site_models: dict | None = None) -> dict:
    """Write the suite folder ``out`` (manifest.json, tasks.jsonl; via a temporary folder, so never
    half-written). With ``archive``, tasks whose needed pages it did not record are dropped.
    Returns counts: built, dropped, tasks, personalised, ranking."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise TaskBuildError(f"{out}: already exists and is not an empty folder")
    cat = load_catalogue()
    tasks = build_tasks(personas_dir, levels=levels, per_persona=per_persona, ranking=ranking, cat=cat)
    built = len(tasks)
    digest = None
    if archive is not None:
        recorded = _Recorded(archive)
        try:
            tasks = [t for t in tasks if all(u in recorded for u in _needed_urls(t))]
        finally:
            recorded.close()
        from webfreeze.archives import archive_digest

        digest = archive_digest(archive)
    for t in tasks:
        t.pop("_target_url", None)
    hosts = sorted({t["ground_truth"]["rubric"]["websites"][0] for t in tasks if "rubric" in t["ground_truth"]}
                   | {t["start_url"].split("/")[2] for t in tasks if t["category"] == "ranking"})
    categories = [c for c in ("persona-L0", "persona-L1", "persona-L2", "ranking")
                  if any(t["category"] == c for t in tasks)]
    pm = load_personas(personas_dir)
    manifest = {"format": "webfreeze-suite", "version": 1, "name": "personas",
                "description": "Personalised tasks (Persona2Web-style levels 0/1/2, APeB-style ranking) on the "
                               "simulated sites, from generated personas.",
                "archive": os.path.relpath(archive, out) if archive else None, "archive_digest": digest,
                "categories": categories, "tasks": "tasks.jsonl",
                "site_models": {h: k for h, k in sorted((cat.site_models if site_models is None
                                                         else site_models).items()) if h in hosts},
                "personas": {"path": os.path.relpath(personas_dir, out), "seed": pm.get("seed"), "n": pm.get("n")}}
    with new_folder(out) as tmp:
        (tmp / "tasks.jsonl").write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks),
                                         encoding="utf-8")
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    n_rank = sum(1 for t in tasks if t["category"] == "ranking")
    return {"built": built, "dropped": built - len(tasks), "tasks": len(tasks), "personalised": len(tasks) - n_rank,
            "ranking": n_rank}
