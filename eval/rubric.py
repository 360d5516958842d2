"""Persona2Web's rubric for personalised tasks (Persona2Web, Appendix D), decided by rules over the
trajectory, with a judge for the items the rules cannot decide. Every rule is in docs/suites-and-runs.md
("Rubric"); the paper's scores are kept, the evidence rules where the paper is silent are ours.

Ground truth (``ground_truth.rubric``)::

    {"websites": ["shop.test", "shop2.test"],          # alternatives ("X or Y"); or "website": "shop.test"
     "preferences": {"brand": "Acme", "size": "42"},
     "location": {"city": ..., "neighbourhood": ..., "zip": ..., "state": ...},   # or a string
     "location_aware": true,                            # location scored only when true
     "gold_entries": {"brand": ["p01-00012", ...], "website": [...]}}           # for retrieval Hit@k

Scores (the paper's): website = retrieval 5 + utilisation 5; preferences = each of the k
preferences 5/k retrieval + 5/k utilisation, plus 2.5 + 2.5 for the location on a location-aware
site, rescaled to 10; intent = 10 the goal achieved / 5 the final decisive action attempted but
blocked by an outside factor (:func:`decisive_attempt`) / 0 (among others when the trajectory
shows the goal was not achieved, :func:`not_achieved`), decided without looking at the
preferences, and *undecided* (None) when nothing but the agent's own answer says it was done (no
final-state check, no judge, nothing in the trajectory against it); success = every score 10
(None while the intent is undecided and the other scores are 10). ``docs/scoring.md`` maps every sentence of
Appendix D to the function implementing it.

Evidence:

- *retrieved*: what the environment answered to the agent's history accesses (the ``results`` of
  steps of kind ``history``: values are matched in each entry's ``object``, the website in its
  ``website`` and ``object``; never timestamps) and the generator's text the
  agent recorded (``agent_fields.generator_output``; not ``enhanced_task``, which repeats the
  instruction). The agent's own history queries are never evidence of retrieval. A value written in the instruction counts
  as retrieved (level 0: nothing was left to retrieve), marked ``"instruction"``.
- *used*: the agent's reasoning (``agent_fields.thought``/``rationale`` of every step) and its
  actions: typed and selected text (with the field it went into), the URLs it went to or asked
  for (``url_after``, goto targets, ``final_url``; not the start page: see ``visited_urls``; query
  strings parsed), its answer, and ``final_state``. A preference value typed into an expected
  site's search box counts whatever its key (Appendix D.2: an attempt to apply it); the location
  counts only when applied during navigation (D.2.1: ``Use.nav``, not a thought or the answer);
  the website only when a page of it loaded (D.1: :func:`navigated_urls`, not a failed goto).
"""

from __future__ import annotations

import re
from typing import Any, Iterable
from urllib.parse import parse_qsl, unquote, unquote_plus, urlsplit

from webfreeze.simulator.actions import ENDING_KINDS  # they show a page but do not use it

from .behaviour import UNDECIDED
from .infrastructure import is_infrastructure
from .judge import Judge, ask
from .text import contains_phrase, normalise
from .trajectory import browser_steps, history_steps

JUDGE_THRESHOLD = 0.5
# Free text: the value and one of the key's words must be at most this many characters apart.
NEAR_CHARS = 40
# Preference keys with no category (Persona2Web's published queries only give p1, p2, ...).
_UNCATEGORISED = re.compile(r"^p\d+$")
# The words that name a key's category, beyond the key's own words (split on "_", plural "s").
KEY_WORDS: dict[str, tuple[str, ...]] = {
    "brand": ("brand", "maker", "manufacturer", "make"),
    "color": ("color", "colour"),
    "colour": ("color", "colour"),
    "size": ("size",),
    "sizes": ("size",),
    "price": ("price", "budget", "cost", "priced", "under", "max", "min"),
    "max_price": ("price", "budget", "cost", "priced", "under", "max"),
    "price_tier": ("price", "tier", "budget", "cost", "priced", "cheap", "premium", "mid"),
    "category": ("category", "cat", "cuisine", "speciality", "specialty", "specialist", "class", "type",
                 "department", "dept", "genre", "kind", "star", "stars"),
    "cuisine": ("cuisine", "category", "food"),
    "speciality": ("speciality", "specialty", "specialist", "category"),
    "specialty": ("speciality", "specialty", "specialist", "category"),
    "hotel_class": ("class", "star", "stars", "category"),
    "rating": ("rating", "rated", "stars", "star", "reviews"),
    "time": ("time", "slot", "at", "hour"),
    "slot": ("time", "slot", "at", "hour"),
    "city": ("city", "location", "in", "near"),
    "neighbourhood": ("neighbourhood", "neighborhood", "area", "district", "location", "in", "near"),
    "neighborhood": ("neighbourhood", "neighborhood", "area", "district", "location", "in", "near"),
    "zip": ("zip", "postcode", "postal", "location"),
    "state": ("state", "region", "province"),
}
# Prepositions among the key words: in nearly every text one is within 40 characters of anything,
# so in free text they place a value only directly before it ("at 19:00", "in Alfama").
ADJACENT_WORDS = frozenset({"at", "in", "near"})
LOCATION_PARTS = ("city", "neighbourhood", "zip", "state")
# Keys for what a site's own search finds by name (the cuisine, speciality or kind of item): a
# value searched for (a search box, a ``q``/``query``/``search`` parameter) is in its context.
SEARCHED_KEYS = frozenset({"category", "cuisine", "speciality", "specialty", "hotel_class", "genre", "kind"})
SEARCH_WORDS = frozenset({"q", "query", "search", "keyword", "keywords", "term", "searchbox"})
# Roles of the controls that set a filter or an option when clicked (a checkbox "Lisbon", a radio
# button "Size 42"): their name is a value applied during navigation (Appendix D.2.1).
FILTER_ROLES = frozenset({"checkbox", "radio", "option", "menuitemcheckbox", "menuitemradio", "switch"})
# A preference value of at most this many characters ("M", "42") counts as typed into a search box
# only next to a word of its key ("size 42"): alone it is found in too many searches.
SHORT_VALUE = 2


def is_search_box(target: dict) -> bool:
    """Whether an element the agent typed into is a search box: the ``searchbox`` role, or a role,
    name, id, CSS or XPath with a search word (:data:`SEARCH_WORDS`: "Search products", ``name="q"``)."""
    if str(target.get("role") or "").lower() == "searchbox":
        return True
    label = " ".join(str(target[k]) for k in ("role", "name", "id", "css", "xpath") if target.get(k))
    return bool(_name_words(label) & SEARCH_WORDS)


# ------------------------------------------------------------------------------ ground truth
def site_alternatives(rubric: dict) -> list[str]:
    """The expected websites, each an alternative: ``websites`` (a list) or ``website`` (a string;
    an "X or Y" string is split), lower-cased, ``www.`` dropped."""
    raw = rubric.get("websites") if rubric.get("websites") is not None else rubric.get("website")
    values = raw if isinstance(raw, list) else [raw] if raw else []
    out: list[str] = []
    for v in values:
        for part in re.split(r"\s+or\s+", str(v).strip().lower()):
            part = part.strip().removeprefix("www.")
            if part and part not in out:
                out.append(part)
    return out


_LOCATION_TEXT = re.compile(r"^\s*(?P<city>[^,]+?)\s*,\s*(?P<state>[A-Za-z][A-Za-z .]*?)\s+(?P<zip>\d{5})\s*$")


def parse_location(text: str) -> dict:
    """``"Los Angeles, CA 90210"`` -> ``{"city", "state", "zip"}``; any other text is a city."""
    m = _LOCATION_TEXT.match(text)
    if m:
        return {k: v.strip() for k, v in m.groupdict().items()}
    return {"city": text.strip()} if text.strip() else {}


def location_of(rubric: dict) -> dict | None:
    """The location components to score, or None (no location, or a site that is not location-aware).
    ``location_aware`` defaults to true when a location is given (older suites had no flag)."""
    loc = rubric.get("location")
    if not loc or not rubric.get("location_aware", True):
        return None
    parts = parse_location(loc) if isinstance(loc, str) else {k: str(v) for k, v in loc.items()
                                                               if k in LOCATION_PARTS and v not in (None, "")}
    return parts or None


def rubric_parts(rubric: dict) -> list[str]:
    """The scored parts a rubric has besides the intent: ``website`` (expected sites given) and
    ``preference`` (preferences, or a location on a location-aware site)."""
    parts = ["website"] if site_alternatives(rubric) else []
    if rubric.get("preferences") or location_of(rubric):
        parts.append("preference")
    return parts


# ------------------------------------------------------------------------------ evidence
def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool):
        return
    elif isinstance(value, (int, float)):
        yield str(value)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def retrieved_entries(trajectory: dict) -> list[dict]:
    """The history entries the environment returned, over every history step, in order."""
    out = []
    for s in history_steps(trajectory):
        results = (s.get("history") or {}).get("results") if isinstance(s.get("history"), dict) else None
        out.extend(e for e in results or [] if isinstance(e, dict))
    return out


def generator_outputs(trajectory: dict) -> list[str]:
    """The generator's text the agent recorded (``agent_fields.generator_output``) on any step.
    ``enhanced_task`` is not evidence: it is the instruction plus the generator's note (already in
    ``generator_output``), so it would count the instruction's own words as retrieved."""
    out: list[str] = []
    for s in trajectory.get("steps", []):
        fields = s.get("agent_fields") if isinstance(s.get("agent_fields"), dict) else {}
        if isinstance(fields.get("generator_output"), str):
            out.append(fields["generator_output"])
    return out


def retrieval_evidence(trajectory: dict) -> list[str]:
    """Texts in which retrieved preference and location values are looked for: each returned
    entry's ``object`` (not its timestamp, type or website: "10:42:00" would give size "42") and
    the generator's recorded text."""
    out: list[str] = []
    for entry in retrieved_entries(trajectory):
        out.extend(_strings(entry.get("object")))
    return out + generator_outputs(trajectory)


def _entry_line(entry: dict) -> str:
    """A returned entry as the judge sees it: ``type: object (website)``."""
    return f"{entry.get('type') or ''}: {entry.get('object') or ''} ({entry.get('website') or ''})"


def _acting_steps(trajectory: dict) -> list[dict]:
    """Browser steps whose action is not the final answer or an infeasibility report."""
    return [s for s in browser_steps(trajectory)
            if not (isinstance(s.get("parsed"), dict) and s["parsed"].get("kind") in ENDING_KINDS)]


def visited_urls(trajectory: dict) -> list[str]:
    """URLs the agent went to or asked for: browser steps' ``url_after``, goto targets and
    ``final_url``. Never a step's pre-action ``url`` (the first is the start page, given, not
    visited), and nothing at all when the agent took no browser action but an answer or report:
    the start page alone is not a use of its site."""
    if not _acting_steps(trajectory):
        return []
    urls: list[str] = []
    for s in browser_steps(trajectory):
        if isinstance(s.get("url_after"), str) and s["url_after"]:
            urls.append(s["url_after"])
        parsed = s.get("parsed")
        if isinstance(parsed, dict) and parsed.get("kind") == "goto" and isinstance(parsed.get("url"), str):
            urls.append(parsed["url"])
    if isinstance(trajectory.get("final_url"), str) and trajectory["final_url"]:
        urls.append(trajectory["final_url"])
    return list(dict.fromkeys(urls))


# An error the backends give a load that was answered with an error status ("HTTP 404 for URL") or a
# replay miss ("not captured: the archive has no GET URL ..."): the page shown is the error page,
# whatever the step's URLs say.
_HTTP_ERROR = re.compile(r"^(HTTP [45]\d\d\b|not captured: )")
# Actions that ask for a new page whatever the URLs say afterwards.
_NAVIGATING_KINDS = ("goto", "go_back", "go_forward")


def _document_ok(document: dict, error: Any) -> bool:
    """Whether the main document the replay served for a step loaded: not a miss, a status below
    400 (none known counts as loaded), and the step not failed (a load that timed out)."""
    status = document.get("status")
    return (document.get("level") != "miss" and not (isinstance(status, int) and status >= 400)
            and not error)


def _load_outcome(step: dict) -> bool | None:
    """Whether the page a browser step left the agent on is a successfully loaded page: False when
    the step's navigation failed (a replay miss or an error status of its main document, an
    ``HTTP 4xx/5xx`` error, an error on a step that changed the URL or asked for a page: the error
    page, the page that never loaded), True when it navigated without failing, None when it did not
    navigate (the page stays what it was)."""
    replay = step.get("replay") if isinstance(step.get("replay"), dict) else {}
    document = replay.get("document")
    error = step.get("error")
    if isinstance(document, dict):
        return _document_ok(document, error)
    if isinstance(error, str) and _HTTP_ERROR.match(error):
        return False
    parsed = step.get("parsed") if isinstance(step.get("parsed"), dict) else {}
    url, after = step.get("url"), step.get("url_after")
    if after and after != url:
        return not error
    if parsed.get("kind") in _NAVIGATING_KINDS:
        # a failed load that left the page as it was (the text backend's "could not load") changes
        # nothing; one that succeeded onto the same URL is a load
        return None if error else True
    return None


def navigated_urls(trajectory: dict) -> list[str]:
    """The pages the agent successfully navigated to (Appendix D.1, STEP 2: "Did the agent successfully
    navigate to the expected website?"): the ``url_after`` of each acting browser step, and the
    ``final_url``, while the page shown there was loaded successfully. A page is not successfully
    reached when the step that brought the agent there failed (:func:`_load_outcome`: an error page,
    a replay miss, a load that never finished); a goto's target alone, asked for but not reached, is
    not a navigation. The start page the task gave counts only once the agent acted on it, as in
    :func:`visited_urls`; the trajectory's ``replay.start`` says whether it loaded."""
    if not _acting_steps(trajectory):
        return []
    replay = trajectory.get("replay") if isinstance(trajectory.get("replay"), dict) else {}
    start = replay.get("start") if isinstance(replay.get("start"), dict) else {}
    ok = _document_ok(start["document"], None) if isinstance(start.get("document"), dict) else True
    urls: list[str] = []
    for s in browser_steps(trajectory):
        outcome = _load_outcome(s)
        if outcome is not None:
            ok = outcome
        if ok and isinstance(s.get("url_after"), str) and s["url_after"]:
            urls.append(s["url_after"])
    final = trajectory.get("final_url")
    if ok and isinstance(final, str) and final:
        urls.append(final)
    return list(dict.fromkeys(urls))


class Use:
    """Where the agent used values: *fields* (``(name, text)``: a URL parameter or path step, a form
    field, a ``final_state`` field), *free text* (thoughts, typed search text, the answer, whole URLs
    decoded), *navigation* (the free text minus the agent's reasoning and answer: what it typed and
    selected, the URLs it went to or asked for, the filter controls it clicked, the final state;
    Appendix D.2.1's "applied during navigation") and *searches* (``(host, where, text)``: text typed
    into a search box on a page of ``host``, and the search parameters of the URLs it went to)."""

    def __init__(self, trajectory: dict):
        self.fields: list[tuple[str, str]] = []
        self.free: list[str] = []
        self.nav: list[str] = []
        self.searches: list[tuple[str, str, str]] = []
        for s in trajectory.get("steps", []):
            f = s.get("agent_fields") if isinstance(s.get("agent_fields"), dict) else {}
            for key in ("thought", "rationale"):
                if isinstance(f.get(key), str):
                    self.free.append(f[key])
        for s in browser_steps(trajectory):
            parsed = s.get("parsed") if isinstance(s.get("parsed"), dict) else {}
            target = s.get("target") if isinstance(s.get("target"), dict) else {}
            text = s.get("typed")
            if text is None and parsed.get("kind") == "select":
                text = parsed.get("value") or parsed.get("text")
            if text is None and parsed.get("kind") in ("fill", "type"):
                text = parsed.get("text")
            if text is not None:
                label = " ".join(str(target[k]) for k in ("role", "name", "css", "xpath") if target.get(k))
                self.fields.append((label, str(text)))
                self.free.append(str(text))
                self.nav.append(str(text))
                if parsed.get("kind") != "select" and is_search_box(target):
                    self.searches.append((_host(str(s.get("url") or "")), label, str(text)))
            elif parsed.get("kind") == "click" and str(target.get("role") or "").lower() in FILTER_ROLES:
                # a filter or option the agent set by clicking it: its name is what it applied
                for k in ("name", "value"):
                    if target.get(k):
                        self.nav.append(str(target[k]))
        for url in visited_urls(trajectory):
            try:
                parts = urlsplit(url)
            except ValueError:
                continue
            for name, value in parse_qsl(parts.query, keep_blank_values=False):
                self.fields.append((name, value))
                self.free.append(value)
                self.nav.append(value)
                if _name_words(name) & SEARCH_WORDS:
                    self.searches.append((_host(url), name, value))
            segs = [unquote(p) for p in parts.path.split("/") if p]
            self.fields.extend(zip(segs, segs[1:]))
            self.free.append(unquote_plus(url))
            self.nav.append(unquote_plus(url))
        if isinstance(trajectory.get("answer"), str):
            self.free.append(trajectory["answer"])
        self._walk(trajectory.get("final_state") or {}, "")

    def searched_on(self, sites: list[str]) -> list[tuple[str, str]]:
        """``(where, text)`` of the searches made on one of ``sites`` (on any site when empty)."""
        return [(where, text) for host, where, text in self.searches
                if not sites or any(_same_site(host, site) for site in sites)]

    def navigation(self) -> list[str]:
        """The navigation texts with the fields as ``name: text``, as the judge is shown them."""
        return self.nav + [f"{n}: {t}" for n, t in self.fields]

    def _walk(self, value: Any, name: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                self._walk(v, str(k))
        elif isinstance(value, list):
            for v in value:
                self._walk(v, name)
        elif value is not None and not isinstance(value, bool):
            self.fields.append((name, str(value)))
            self.free.append(str(value))
            self.nav.append(str(value))

    def texts(self) -> list[str]:
        return self.free + [f"{n}: {t}" for n, t in self.fields]


def key_words(key: str) -> set[str]:
    """The words naming a preference key's category: the key's own words and :data:`KEY_WORDS`."""
    own = [w for w in re.split(r"[^0-9a-z]+", key.lower()) if w]
    words = set(own) | set(KEY_WORDS.get(key.lower(), ()))
    # singular and plural forms ("prices" names a price, "size" a sizes key)
    return words | {w[:-1] for w in words if w.endswith("s") and len(w) > 3} | {w + "s" for w in words if len(w) > 2}


def _name_words(name: str) -> set[str]:
    name = re.sub(r"([a-z])([A-Z])", r"\1 \2", name)  # maxPrice -> max Price
    words = {w for w in re.split(r"[^0-9a-z]+", name.lower()) if w}
    return words | {w[:-1] for w in words if w.endswith("s") and len(w) > 3}


def _spans(text: str, needle: str) -> list[tuple[int, int]]:
    n = normalise(needle)
    if not n:
        return []
    left = r"(?<![0-9a-z])" if n[0].isalnum() else ""
    right = r"(?![0-9a-z])" if n[-1].isalnum() else ""
    return [m.span() for m in re.finditer(left + re.escape(n) + right, text)]


def near(text: str, value: str, words: Iterable[str], chars: int = NEAR_CHARS) -> bool:
    """Whether ``value`` occurs (word boundaries, normalised) within ``chars`` characters of one of
    ``words`` in ``text``; a word of :data:`ADJACENT_WORDS` counts only directly before the value."""
    t = normalise(text)
    vs = _spans(t, value)
    if not vs:
        return False
    for w in words:
        adjacent = w in ADJACENT_WORDS
        for ws in _spans(t, w):
            for v in vs:
                if ws[0] < v[1] and v[0] < ws[1]:
                    continue  # the value itself ("budget" for a price tier) is not its own context
                if adjacent:
                    if 0 <= v[0] - ws[1] <= 1:
                        return True
                    continue
                gap = max(ws[0] - v[1], v[0] - ws[1], 0)
                if gap <= chars:
                    return True
    return False


def preference_used(key: str, value: str, use: Use, sites: list[str] | None = None) -> tuple[bool, str]:
    """(used, where) by the category rule: a field named for the key holds the value, or free text
    has the value near a word of the key; keys ``p<N>`` have no category (found anywhere). Whatever
    the key, a value typed into the search box of one of ``sites`` (any site when none), or searched
    for there by URL, is an attempt to apply it (Appendix D.2, STEP 2: "the agent at least attempted
    to apply the expected value"); a value of :data:`SHORT_VALUE` characters or fewer counts there
    only next to a word of its key ("size 42")."""
    if _UNCATEGORISED.match(key.lower()):
        return (any(contains_phrase(t, value) for t in use.texts()), "anywhere")
    words = key_words(key)
    for name, text in use.fields:
        if _name_words(name) & words and contains_phrase(text, value):
            return True, f"field {name!r}"
    if key.lower() in SEARCHED_KEYS:
        for name, text in use.fields:
            if _name_words(name) & SEARCH_WORDS and contains_phrase(text, value):
                return True, f"searched for ({name!r})"
    short = len(normalise(value)) <= SHORT_VALUE
    for where, text in use.searched_on(sites or []):
        if contains_phrase(text, value) and (not short or near(text, value, words, chars=12)):
            return True, f"typed into the site's search ({where!r})"
    for text in use.free:
        if near(text, value, words):
            return True, "near the key word"
    return False, ""


def _location_found(parts: dict, texts: list[str], fields: list[tuple[str, str]] = ()) -> bool:
    for part, value in parts.items():
        if part == "state" and len(value.strip()) <= 3:
            # a state code ("CA", "OR", "IN") is an ordinary word: only in a field named for it
            if any(_name_words(n) & key_words("state") and normalise(t) == normalise(value) for n, t in fields):
                return True
            continue
        if any(contains_phrase(t, value) for t in texts):
            return True
    return False


def _host(url: str) -> str:
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""
    return host.removeprefix("www.")


def _same_site(host: str, site: str) -> bool:
    host = host.lower().removeprefix("www.")
    return bool(host) and (host == site or host.endswith("." + site))


# ------------------------------------------------------------------------------ deciding
def _stated(instruction: str, key: str, value: str) -> bool:
    """Whether the instruction states a preference's value (then nothing is left to retrieve). A
    value of one or two characters ("M", "XL") counts only next to a word of its key ("size M"):
    alone it is found in too many words ("I'm")."""
    if not instruction or not contains_phrase(instruction, value):
        return False
    if len(normalise(value)) > 2 or _UNCATEGORISED.match(key.lower()):
        return True
    return near(instruction, value, key_words(key), chars=12)


def _decide(rule: bool, judge: Judge | None, question: str, value: str, evidence: list[str]) -> tuple[bool, str]:
    """The rule's verdict when it holds; else the judge's (>= 0.5) when one is given."""
    if rule:
        return True, "rule"
    if judge is not None and evidence:
        verdict = ask(judge, question, "\n".join(evidence), value)
        return verdict >= JUDGE_THRESHOLD, judge.name
    return False, "rule"


# Persona2Web (Appendix D.3) gives 5 when the agent identified the item and "attempted the final
# decisive action (e.g., clicked 'Add to Cart') BUT was blocked by external factors". The rules see
# the attempt in the trajectory (``decisive_attempt``: a click or key press on an expected site whose
# target names such an action) followed by the agent's report that it could not go on (``infeasible``,
# or an answer saying the goal was not achieved, :func:`answer_says_not_achieved`); without the attempt a
# judge, when given, decides, else 0. An ``error`` with ``cause: provider`` (the LLM provider still
# failing after the client's retries) is infrastructure, not the task's outside world: intent 0,
# decided by "infrastructure", counted apart in reports. An ``error`` without a cause is the agent's
# own crash; ``step_limit`` and ``stopped`` are its own.
INFRASTRUCTURE = "infrastructure"
# The intent's decider (``UNDECIDED``, "undecided") when nothing decides it: no intent checks, no
# judge, and nothing in the trajectory says the goal was not achieved (:func:`not_achieved`), only the
# agent's answer that it was. The paper gives 10 only when "the requested final goal was successfully
# achieved": the agent's claim is not that evidence, so the intent is left undecided (score None),
# never credited, and reports leave such tasks out of Intent and SR and count them.
UNDECIDED_WHY = ("no final-state check and no judge, and nothing in the trajectory says the goal was not "
                 "achieved: only the agent's answer says it was done")
# Words of a target that names the final decisive action of a task: adding to a cart, buying,
# checking out, ordering, paying, reserving, booking, confirming, applying for a job, enrolling,
# registering, getting tickets. Matched on word boundaries in the normalised name, value or text of
# the acted-on element. Words that also name ordinary navigation or filtering are left out or need
# their object: a bare "Apply" is a filter button, "Schedule" a sports page, "Subscribe" and "Sign
# up" a newsletter, "Rent" a listings section.
DECISIVE_ACTION = re.compile(
    r"(?<![0-9a-z])(add(ed)? to (my )?(cart|bag|basket|trolley|order)|buy( now| it now)?|purchase|check ?out|"
    r"place (the |my |your )?order|order now|complete (the |my )?(order|purchase|booking|reservation)|"
    r"pay( now)?|reserve( now| a table| table)?|book( now| a table| table| it| tickets?)?|"
    r"confirm( (booking|reservation|order|purchase))?|apply (now|for (this |the )?job)|submit (my |your )?"
    r"application|enrol(l)?( now)?|register( now)?|rsvp|get tickets?|"
    r"request (a |an )?(booking|reservation|appointment)|schedule (an |the )?appointment|rent (it )?now)"
    r"(?![0-9a-z])")
# Browser actions that can carry out a decisive action (a click on a button or link, a key press).
DECISIVE_KINDS = ("click", "press")
# Appendix D.3 gives 0 when the agent "Failed to reach the decisive action / ... / Process abandoned".
# Without a final-state check, the rules read that from the trajectory in two ways (else the intent is
# undecided): the agent's own answer says the goal was not achieved (:data:`NOT_ACHIEVED` in a clause
# of it and no clause claiming the goal, :data:`ACHIEVED`), or the instruction asks for a decisive
# action (:data:`INSTRUCTED_DECISIVE`: buy, add to the cart, book, reserve, ... as a request) that the agent never
# attempted (:func:`decisive_attempt`). Matched in the normalised text, on word boundaries.
NOT_ACHIEVED = re.compile(
    r"(?<![0-9a-z])(could ?n[o']?t|can ?not|can't|unable to|(was|were|am|is) ?n[o']?t able to|not able to|"
    r"failed to|did ?n[o']?t (manage|succeed|complete|finish|find|add|book|reserve|buy|order|purchase|get)|"
    r"gave up|give up|giving up|abandon(ed|ing)?|not (possible|available|found|in stock|completed?)|unavailable|"
    r"out of stock|sold out|fully booked|no (results?|matches|matching|availability|slots?|tables?|rooms?)|"
    r"nothing (was |has been |could be )?(added|booked|reserved|ordered|purchased|bought|found))(?![0-9a-z])")
ACHIEVED = re.compile(
    r"(?<![0-9a-z])(added|booked|reserved|ordered|purchased|bought|placed|completed?|confirmed|scheduled|"
    r"registered|applied for|enrolled|rsvp'?d|done|success(ful(ly)?)?|in (the|your|my) (cart|bag|basket))(?![0-9a-z])")
# The verbs of a decisive action count in an instruction only where a request puts them: at its start,
# after punctuation, or after "and", "to", "please", "then", "you", "i", "me", "us" ("Book a table",
# "..., reserve a room", "I want to buy"), so that nouns ("a book by", "a nature reserve", "Best Buy")
# do not ask for one; adding something to a cart counts anywhere.
_REQUEST_AT = (r"(?:^|(?<=[,.;:!?] )|(?<=(?<![0-9a-z])and )|(?<=(?<![0-9a-z])to )|(?<=(?<![0-9a-z])please )|"
               r"(?<=(?<![0-9a-z])then )|(?<=(?<![0-9a-z])you )|(?<=(?<![0-9a-z])i )|(?<=(?<![0-9a-z])me )|"
               r"(?<=(?<![0-9a-z])us ))")
INSTRUCTED_DECISIVE = re.compile(
    r"(?<![0-9a-z])add(?![0-9a-z]).{0,60}?(?<![0-9a-z])to (my |the |our |your )?(cart|bag|basket|trolley)(?![0-9a-z])|"
    + _REQUEST_AT + r"(buy|purchase|order|book|reserve|rent|enrol(l)?|register|rsvp|apply for|get tickets?|"
    r"schedule|make (a |an )?(reservation|booking|appointment)|place (an? |the |my )?order)(?![0-9a-z])")
# Where an answer is cut into clauses: a clause claiming the goal outweighs one reporting a failure
# ("added the Acme shoes; could not find size 42" does not say the goal was not achieved).
_CLAUSES = re.compile(r"[.;!?\n]+|,\s*(?:but|so|however|although|and)(?![0-9a-z])|\s(?:but|however|although)\s")


def answer_says_not_achieved(answer: str | None) -> bool:
    """Whether the agent's own answer says the goal was not achieved ("I could not add it to the cart",
    "no results", "I gave up"): a clause of it reports a failure (:data:`NOT_ACHIEVED`) and none
    claims the goal (:data:`ACHIEVED` in a clause without a failure)."""
    clauses = [c for c in _CLAUSES.split(normalise(answer)) if c and c.strip()]
    failed = [bool(NOT_ACHIEVED.search(c)) for c in clauses]
    claimed = [bool(ACHIEVED.search(c)) and not f for c, f in zip(clauses, failed)]
    return any(failed) and not any(claimed)


def not_achieved(trajectory: dict, sites: list[str], instruction: str) -> str | None:
    """The trajectory's evidence that the goal was not achieved (Appendix D.3, 0 points), or None:
    ``"answer"`` (the agent's answer says so, :func:`answer_says_not_achieved`) or ``"no decisive
    action"`` (the instruction asks for a decisive action, :data:`INSTRUCTED_DECISIVE`, and no
    :func:`decisive_attempt` was made on an expected site: "Failed to reach the decisive action")."""
    if answer_says_not_achieved(trajectory.get("answer")):
        return "answer"
    if instruction and INSTRUCTED_DECISIVE.search(normalise(instruction)) and decisive_attempt(trajectory, sites) is None:
        return "no decisive action"
    return None


def infrastructure_failure(end: dict) -> bool:
    """Whether the episode was ended by infrastructure (the LLM provider, or a live site during a
    live run), not by the agent."""
    return is_infrastructure(end)


def decisive_attempt(trajectory: dict, sites: list[str]) -> dict | None:
    """The last browser action that attempted a task's final decisive action (Appendix D.3, "e.g.,
    clicked 'Add to Cart'"): a click or key press (:data:`DECISIVE_KINDS`) made on a page of an
    expected site (its pre-action ``url``; any site when ``sites`` is empty) whose target's name,
    value or typed text names such an action (:data:`DECISIVE_ACTION`). ``{"step", "target"}`` or
    None. The paper's "identified the item" is taken as implied by the attempt: a site offers "Add
    to cart" or "Reserve" on an item it shows."""
    for s in reversed(browser_steps(trajectory)):
        parsed = s.get("parsed") if isinstance(s.get("parsed"), dict) else {}
        if parsed.get("kind") not in DECISIVE_KINDS:
            continue
        if sites and not any(_same_site(_host(str(s.get("url") or "")), site) for site in sites):
            continue
        target = s.get("target") if isinstance(s.get("target"), dict) else {}
        labels = [str(target[k]) for k in ("name", "value") if target.get(k)]
        labels += [str(v) for v in (s.get("typed"), parsed.get("text")) if isinstance(v, str) and v]
        for label in labels:
            if DECISIVE_ACTION.search(normalise(label)):
                return {"step": s.get("step"), "target": label}
    return None


def gold_hits(rubric: dict, trajectory: dict) -> dict | None:
    """Retrieval Hit@k of the gold history entries: per key, whether one of its gold ids is among
    the ids the history steps retrieved. Keys with no gold id are left out (nothing could hit).
    None when the rubric names no gold entries."""
    gold = rubric.get("gold_entries")
    gold = {k: v for k, v in gold.items() if v} if isinstance(gold, dict) else {}
    if not gold:
        return None
    steps = history_steps(trajectory)
    ids = {e.get("id") for e in retrieved_entries(trajectory)}
    ks = sorted({s["history"]["k"] for s in steps if isinstance(s.get("history"), dict)
                 and isinstance(s["history"].get("k"), int)})
    return {"k": ks[0] if len(ks) == 1 else (ks or None), "history_steps": len(steps),
            "by_key": {key: bool(ids & set(v or [])) for key, v in sorted(gold.items())}}


def evaluate_rubric(rubric: dict, trajectory: dict, *, instruction: str = "", intent_done: bool | None = None,
                    judge: Judge | None = None, start_url: str | None = None) -> dict:
    """Score one personalised task (rules in the module docstring and docs/suites-and-runs.md).

    ``intent_done``: whether the task's intent checks (``score.intent_checks``: ``rubric.intent`` or
    the ``count`` checks of ``final_state``) say the request was carried out; None when it has none
    (then the rules, and a judge for what they cannot decide, say; with neither, an answer leaves the
    intent undecided). ``start_url`` is accepted for callers that pass it; no rule needs it since
    the 5 points rest on a decisive action, wherever it was taken."""
    retrieved_ev = retrieval_evidence(trajectory)
    judge_ev = [_entry_line(e) for e in retrieved_entries(trajectory)] + generator_outputs(trajectory)
    use = Use(trajectory)
    used_ev = use.texts()
    entries = retrieved_entries(trajectory)
    reached = navigated_urls(trajectory)
    visited = [_host(u) for u in reached]
    items: list[dict] = []
    out: dict[str, Any] = {"items": items}

    def item(kind: str, name: str, value: str, retrieved_rule: bool, used_rule: bool, where: str = "",
             explicit: bool | None = None, used_question: str = "", used_evidence: list[str] | None = None) -> dict:
        if explicit is None:
            explicit = bool(instruction) and contains_phrase(instruction, value)
        what = f"{kind} {name}" if kind != "website" else "website"
        if retrieved_rule or not explicit:
            r, r_by = _decide(retrieved_rule, judge, f"Did the agent retrieve the {what} from the user's history?",
                              value, judge_ev)
        else:
            r, r_by = True, "instruction"
        u, u_by = _decide(used_rule, judge, used_question or f"Did the agent use the {what} in its reasoning or actions?",
                          value, used_ev if used_evidence is None else used_evidence)
        entry = {"kind": kind, "name": name, "value": value, "retrieved": r, "used": u,
                 "retrieved_by": r_by, "used_by": u_by}
        if where and used_rule:
            entry["used_where"] = where
        items.append(entry)
        return entry

    sites = site_alternatives(rubric)
    if sites:
        used_site = next((s for s in sites if any(_same_site(h, s) for h in visited)), None)
        got_site = next((s for s in sites if any(_same_site(str(e.get("website") or ""), s) for e in entries)
                         or any(contains_phrase(t, s) for t in retrieved_ev)), None)
        explicit = any(instruction and contains_phrase(instruction, s) for s in sites)
        # the judge is shown every URL the agent went to or asked for, and whether it was reached
        nav_ev = [f"{u} ({'reached' if u in reached else 'asked for, not reached'})"
                  for u in dict.fromkeys(visited_urls(trajectory) + reached)]
        w = item("website", "website", got_site or used_site or " or ".join(sites), got_site is not None,
                 used_site is not None, explicit=bool(explicit),
                 used_question="Did the agent successfully navigate to the expected website?", used_evidence=nav_ev)
        out["website"] = {"retrieval": 5.0 if w["retrieved"] else 0.0, "utilisation": 5.0 if w["used"] else 0.0}
        out["website"]["score"] = out["website"]["retrieval"] + out["website"]["utilisation"]

    prefs = rubric.get("preferences") or {}
    location = location_of(rubric)
    if prefs or location:
        retrieval = utilisation = 0.0
        weight = 5.0 / len(prefs) if prefs else 0.0
        for name, value in sorted(prefs.items()):
            value = str(value)
            used, where = preference_used(name, value, use, sites)
            p = item("preference", name, value, any(contains_phrase(t, value) for t in retrieved_ev), used, where,
                     explicit=_stated(instruction, name, value))
            retrieval += weight if p["retrieved"] else 0.0
            utilisation += weight if p["used"] else 0.0
        full = 10.0 if prefs else 0.0
        if location:
            text = ", ".join(location[k] for k in LOCATION_PARTS if k in location)
            # used: applied during navigation (Appendix D.2.1 STEP 2), not named in a thought or the answer
            loc = item("location", "location", text, _location_found(location, retrieved_ev),
                       _location_found(location, use.nav, use.fields),
                       explicit=bool(instruction) and _location_found(location, [instruction]),
                       used_question="Was the location applied during navigation? (delivery address, search "
                                     "location, filters, etc.)", used_evidence=use.navigation())
            loc["parts"] = location
            retrieval += 2.5 if loc["retrieved"] else 0.0
            utilisation += 2.5 if loc["used"] else 0.0
            full += 5.0
        scale = 10.0 / full
        out["preference"] = {"retrieval": retrieval * scale, "utilisation": utilisation * scale,
                             "score": (retrieval + utilisation) * scale}

    out["intent_detail"] = _intent(trajectory, sites, instruction, intent_done, judge)
    intent = out["intent"] = out["intent_detail"]["score"]
    hits = gold_hits(rubric, trajectory)
    if hits is not None:
        out["gold_hits"] = hits
    # an undecided intent (None) is left out of the scores, neither credited nor counted as 0
    scores = [out[k]["score"] for k in ("website", "preference") if k in out] + ([intent] if intent is not None else [])
    perfect = all(abs(s - 10.0) < 1e-9 for s in scores)
    # success needs every score perfect: a decided score below 10 already fails it; otherwise it
    # waits on an undecided intent
    out["success"] = (None if intent is None else True) if perfect else False
    out["score"] = sum(scores) / (10.0 * len(scores)) if scores else 0.0
    return out


def _intent(trajectory: dict, sites: list[str], instruction: str, intent_done: bool | None,
            judge: Judge | None) -> dict:
    """Intent satisfaction (Appendix D.3), never looking at preferences: 10 "the requested final goal
    was successfully achieved", 5 the final decisive action attempted "BUT was blocked by external
    factors", 0 otherwise; None (``decided_by: "undecided"``) when only the agent's answer says it
    was done (see docs/suites-and-runs.md)."""
    end = trajectory.get("end") or {}
    steps = browser_steps(trajectory)
    last = trajectory.get("final_url") or (steps[-1].get("url_after") or steps[-1].get("url") if steps else "")
    on_site = not sites or any(_same_site(_host(str(last or "")), s) for s in sites)
    extra = {"end_reason": end.get("reason"), **({"end_cause": end["cause"]} if end.get("cause") else {})}
    if intent_done is None:
        if end.get("reason") != "answer" or not on_site:
            # the agent did not end by saying the goal was reached, on an expected site: not achieved
            done, by = False, "rule"
        elif (shown := not_achieved(trajectory, sites, instruction)) is not None:
            # its answer says the goal was not reached, or it never attempted the decisive action asked
            done, by = False, "rule"
            extra["not_achieved"] = shown
        elif judge is not None:
            evidence = [f"answer: {trajectory.get('answer') or ''}", f"final page: {last}"]
            if trajectory.get("final_state"):
                evidence.extend(f"state: {t}" for t in _strings(trajectory["final_state"]))
            done = ask(judge, "Was the requested final goal successfully achieved?", "\n".join(evidence),
                       instruction) >= JUDGE_THRESHOLD
            by = judge.name
        else:  # only the agent's word: no evidence that the goal was achieved, none that it was not
            return {"score": None, "done": None, "blocked": None, "decided_by": UNDECIDED,
                    "undecided": UNDECIDED_WHY, **extra}
    else:
        done, by = bool(intent_done), "ground truth"
    if done:
        return {"score": 10.0, "done": True, "blocked": False, "decided_by": by}
    if infrastructure_failure(end):  # the provider or live site failed: no verdict on the agent's work
        return {"score": 0.0, "done": False, "blocked": False, "decided_by": INFRASTRUCTURE, **extra}
    blocked = False
    # the agent reported that it could not go on: by its infeasibility report, or by an answer saying
    # the goal was not achieved (then the report after a decisive attempt is the outside block)
    reported = end.get("reason") == "infeasible" or (
        end.get("reason") == "answer" and answer_says_not_achieved(trajectory.get("answer")))
    if reported and on_site:
        attempt = decisive_attempt(trajectory, sites)
        if attempt is not None:
            blocked = True
            extra["decisive_action"] = attempt
        elif judge is not None:
            evidence = [f"reported: {end.get('detail') or trajectory.get('answer') or ''}", f"final page: {last}"]
            evidence.extend(f"visited: {u}" for u in visited_urls(trajectory))
            blocked = ask(judge, "Did the agent identify the item and attempt the final decisive action (e.g., "
                                 "clicking 'Add to Cart') but was blocked by external factors?",
                          "\n".join(evidence), instruction) >= JUDGE_THRESHOLD
            by = judge.name
    return {"score": 5.0 if blocked else 0.0, "done": False, "blocked": blocked, "decided_by": by, **extra}
