"""Key-node evaluation with WebCanvas semantics (Mind2Web-Live's ground truth, read as published).

Every node is scored at every step and keeps its best score (order-free: a node reached at any
step counts). WebCanvas checks element nodes against the page's HTML at the moment of the action
(``page.content()`` before the action runs; ``evaluate/step_score.py``, ``path_exact_match``);
our environment stores that page as the step's DOM snapshot (``step.dom``), and the element
nodes are evaluated on it. The rules (also in docs/suites-and-runs.md):

A step shows the page URLs ``url`` (where the action was chosen) and ``url_after`` (where it led);
the last step also shows ``final_url``. Its element is ``target`` (``css``, ``xpath``, ``value``)
and its value is ``typed`` (falling back to ``target.value``). ``netloc(url)`` is WebCanvas's site
label: the host's second label when the host starts with ``www``, else its first label
(``www.imdb.com`` -> ``imdb``, ``discussions.apple.com`` -> ``discussions``).

- ``url_included_match``: with ``key``, the first value of query parameter ``key`` (form-decoded),
  else the whole URL; percent-unquoted; score 1 when ``reference_answer`` is a substring of it.
- ``url_exactly_match``: the same input; score 1 when it equals ``reference_answer``.
- ``url_semantic_match``: the same input, scored by the judge against the criterion in
  ``reference_answer`` (``judge(question=reference_answer, candidate=input, reference="")``).
- ``element_path_exactly_match`` (``method`` selector, or xpath): 0 when the node has a ``netloc``
  that differs from ``netloc(step.url)``. With the step's DOM snapshot: the reference element is
  the *first* element in document order that the reference selector matches (WebCanvas's
  ``select_one``; CSS through cssselect, XPath through lxml), the step's element is the one
  carrying the target's ``bid`` (``data-wf-bid``); 1 when they are the same element, or when the
  reference is a ``span, h1-h6, div, li, ul, p`` and the step's element is one of its three
  nearest ancestors (WebCanvas's ``MapTagNameList`` climb). A selector that cannot be decided
  offline (see :func:`undecidable`: pseudo-classes of live state such as ``:hover`` or
  ``:focus``, pseudo-elements, non-CSS engines such as Playwright's ``:has-text()``, syntax that
  cssselect does not read) scores 0 at that step and the node says why (``undecided``). Without a
  snapshot (older trajectories, hand-built ones), the selector text decides: 1 when the target's
  selector equals ``reference_answer`` after ``normalise_selector`` (whitespace collapsed, no
  spaces around ``> + ~``), or equals the reference with its last 1-3 ``>``-steps removed when
  the reference ends in one of those tags. Each node counts how its steps were decided
  (``decided``: ``dom``, ``selector_text``, ``undecidable``).
- ``element_value_exactly_match``: netloc as above; when the node has ``path``, the step's
  element must match it as for path nodes (a CSS selector); score 1 when the step's value equals
  ``reference_answer`` exactly.
- ``element_value_semantic_match``: as above, with a non-empty value scored by the judge against
  the criterion in ``reference_answer``.

Results: per node the best score (a judge may give fractions) and the first step reaching it;
``completion_rate`` = mean of the node scores; a node is *matched* at score 1 (as WebCanvas
counts); ``success`` = every node matched; ``near_success`` = exactly one node not matched;
``efficiency`` = ``behaviour.efficiency_ratio(reference_length, trajectory)``: reference length /
agent steps (browser steps; None without a reference length or with no steps).
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable
from urllib.parse import parse_qs, unquote, urlsplit

from webfreeze.simulator.axtree import BID_ATTR  # the attribute a DOM snapshot's bids are stamped in

from .behaviour import efficiency_ratio
from .judge import DEFAULT_JUDGE, Judge, ask
from .trajectory import normalise_selector, step_urls

# WebCanvas climbs from a reference element with one of these tags to its ancestors.
CLIMBING_TAGS = frozenset({"span", "h1", "h2", "h3", "h4", "h5", "h6", "div", "li", "ul", "p"})
MAX_CLIMB = 3


def netloc(url: str | None) -> str:
    """WebCanvas's site label of a URL (see the module docstring); "" when there is none."""
    try:
        host = urlsplit(url or "").hostname or ""
    except ValueError:
        return ""
    labels = host.split(".")
    if len(labels) < 2:
        return ""
    if host.startswith("www"):
        return labels[1] if len(labels) > 2 else ""
    return labels[0]


def url_input(url: str, key: str | None) -> str | None:
    """What a URL node compares: the first value of query parameter ``key`` or the whole URL,
    percent-unquoted (None when the parameter is absent)."""
    if key:
        try:
            values = parse_qs(urlsplit(url).query).get(key)
        except ValueError:
            return None
        if not values:
            return None
        return unquote(values[0])
    return unquote(url)


def _split_steps(selector: str) -> list[str]:
    """Split a normalised selector on top-level ``>`` (outside brackets, parentheses and quotes)."""
    parts, depth, quote, cur = [], 0, "", []
    for ch in selector:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == ">" and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    parts.append("".join(cur))
    return parts


def _tag_of(compound: str) -> str:
    last = compound.strip().split(" ")[-1]
    m = re.match(r"[A-Za-z][A-Za-z0-9-]*", last)
    return m.group(0).lower() if m else ""


def selector_matches(candidate: str | None, reference: str, method: str = "selector") -> bool:
    """Whether a step's selector (css, or xpath with ``method="xpath"``) designates the reference
    element, per the module rules."""
    if not candidate:
        return False
    if method == "xpath":
        return re.sub(r"\s+", "", candidate) == re.sub(r"\s+", "", reference)
    cand, ref = normalise_selector(candidate), normalise_selector(reference)
    if cand == ref:
        return True
    parts = _split_steps(ref)
    if _tag_of(parts[-1]) not in CLIMBING_TAGS:
        return False
    return any(">".join(parts[:-k]) == cand for k in range(1, MAX_CLIMB + 1) if len(parts) > k)


# Pseudo-classes whose answer lives in the running page (input focus, pointer, history, the URL's
# fragment) or in layout: a stored DOM cannot decide them. cssselect would quietly never match them.
LIVE_PSEUDO = frozenset({"hover", "active", "focus", "focus-visible", "focus-within", "visited", "target",
                         "target-within", "current", "past", "future", "playing", "paused", "fullscreen",
                         "modal", "picture-in-picture", "autofill", "user-invalid", "user-valid",
                         "placeholder-shown", "visible", "hidden", "scope", "defined", "popover-open"})
# Functional pseudo-classes of non-CSS engines (Playwright, jQuery): they need text layout or the engine.
# (:has(), :is(), :where() and :not() are CSS, and cssselect evaluates them.)
ENGINE_FUNCTIONS = frozenset({"has-text", "text", "text-is", "text-matches", "visible", "nth-match", "left-of",
                              "right-of", "above", "below", "near", "eq", "gt", "lt"})


@functools.lru_cache(maxsize=4096)
def undecidable(selector: str, method: str = "selector") -> str | None:
    """Why a reference selector cannot be evaluated on a stored DOM (None when it can): the reason
    names the part (a live-state pseudo-class, a pseudo-element, a non-CSS engine, unreadable
    syntax)."""
    if method == "xpath":
        from lxml import etree

        try:
            etree.XPath(selector)
        except etree.XPathError as exc:
            return f"lxml cannot compile this XPath ({exc})"
        return None
    sel = selector.strip()
    if not sel:
        return "empty selector"
    if ">>" in sel or re.match(r"^(text|xpath|css|id|data-testid|role|internal:[a-z-]+)=", sel):
        return "a Playwright selector chain or engine prefix, not CSS"
    import cssselect
    from cssselect.parser import Function, Pseudo

    try:
        parsed = cssselect.parse(sel)
    except cssselect.SelectorSyntaxError as exc:
        return f"cssselect cannot parse it ({exc})"
    for s in parsed:
        if s.pseudo_element is not None:
            return f"pseudo-element ::{s.pseudo_element} selects no element"
        for part in _parts(s.parsed_tree):
            if isinstance(part, Pseudo) and part.ident.lower() in LIVE_PSEUDO:
                return f":{part.ident} depends on the live page (pointer, focus, history or layout)"
            if isinstance(part, Function) and part.name.lower() in ENGINE_FUNCTIONS:
                return f":{part.name}() is not evaluated by cssselect (needs text layout or another engine)"
    try:
        cssselect.HTMLTranslator().css_to_xpath(sel)
    except cssselect.ExpressionError as exc:
        return f"cssselect cannot translate it ({exc})"
    return None


def _parts(tree) -> list:
    """Every node of a cssselect parse tree."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        for attr in ("selector", "subselector", "selector_list", "parsed_tree"):
            child = getattr(node, attr, None)
            if isinstance(child, list):
                todo.extend(c for c in child if c is not None and not isinstance(c, str))
            elif child is not None and not isinstance(child, str):
                todo.append(child)
    return out


class DomCache:
    """Parsed DOM snapshots of one trajectory (``load``: a snapshot path -> HTML bytes or None)."""

    def __init__(self, load: Callable[[str], bytes | None] | None):
        self.load = load
        self.docs: dict[str, Any] = {}
        self.queries: dict[tuple, Any] = {}

    def get(self, path: str):
        """(document, {bid: element}) or (None, why)."""
        if path in self.docs:
            return self.docs[path]
        if self.load is None:
            out = (None, "no DOM snapshots were given to the evaluator")
        else:
            try:
                html = self.load(path)
            except Exception as exc:  # unreadable, damaged or misnamed: undecided, never a crash
                html, why = None, f"DOM snapshot {path} unreadable ({type(exc).__name__})"
            else:
                why = f"DOM snapshot {path} not found"
            if html is None:
                out = (None, why)
            else:
                from lxml import etree

                parser = etree.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)
                doc = etree.fromstring(html or b"<html></html>", parser)
                out = (doc, {el.get(BID_ATTR): el for el in doc.iter() if isinstance(el.tag, str)
                             and el.get(BID_ATTR) is not None})
        self.docs[path] = out
        return out

    def first_match(self, path: str, doc, selector: str, method: str):
        key = (path, selector, method)
        if key not in self.queries:
            try:
                if method == "xpath":
                    found = doc.xpath(selector)
                else:
                    from cssselect import HTMLTranslator

                    found = doc.xpath(HTMLTranslator().css_to_xpath(selector.strip()))
            except Exception as exc:  # an XPath that compiles but fails on this document
                self.queries[key] = f"evaluating it failed ({type(exc).__name__}: {exc})"
            else:
                found = found if isinstance(found, list) else []
                self.queries[key] = next((e for e in found if hasattr(e, "tag") and isinstance(e.tag, str)), None)
        return self.queries[key]


DOM_PATH = re.compile(r"dom/[0-9a-f]{64}\.html\.zst\Z")


def run_dom_loader(run_dir) -> Callable[[str], bytes | None]:
    """A loader of a run's DOM snapshots: ``dom/<sha256>.html.zst`` under ``run_dir``, zstd-
    decompressed and checked against its name (None when absent; other paths are refused)."""
    import hashlib
    from pathlib import Path

    root = Path(run_dir)

    def load(path: str) -> bytes | None:
        if not DOM_PATH.match(path):
            raise ValueError(f"{path!r} is not a DOM snapshot path")
        f = root / path
        if not f.is_file():
            return None
        import zstandard

        html = zstandard.ZstdDecompressor().decompress(f.read_bytes(), max_output_size=1 << 30)
        if hashlib.sha256(html).hexdigest() != path[4:68]:
            raise ValueError(f"{path}: its content does not match its name")
        return html

    return load


def element_match(step: dict, reference: str, method: str, doms: DomCache) -> tuple[bool, str, str | None]:
    """Whether the step's element is the reference element (module rules): ``(matched, how, why)``
    with ``how`` one of ``dom``, ``selector_text``, ``undecidable`` and ``why`` the reason a DOM
    check was not made (None when it was)."""
    target = step.get("target") if isinstance(step.get("target"), dict) else {}
    candidate = target.get("xpath") if method == "xpath" else target.get("css")
    path = step.get("dom")
    why = None
    if isinstance(path, str) and path:
        why = undecidable(reference, method)
        if why is None:
            doc, by_bid = doms.get(path)
            if doc is None:
                why = by_bid
            else:
                el = by_bid.get(str(target.get("bid")))
                if el is None:
                    why = f"the target (bid {target.get('bid')}) is not in its DOM snapshot"
                else:
                    ref = doms.first_match(path, doc, reference, method)
                    if isinstance(ref, str):
                        why = ref
                    elif ref is None:
                        return False, "dom", None
                    elif el is ref:
                        return True, "dom", None
                    else:
                        if ref.tag.lower() in CLIMBING_TAGS:
                            up = ref
                            for _ in range(MAX_CLIMB):
                                up = up.getparent()
                                if up is None:
                                    break
                                if up is el:
                                    return True, "dom", None
                        return False, "dom", None
    else:
        why = "the step has no DOM snapshot"
    # no DOM decision: the selector text (a textual match is a decision; no match is not one when
    # the step had a snapshot that could not be used)
    if selector_matches(candidate, reference, method):
        return True, "selector_text", why
    return False, ("undecidable" if path else "selector_text"), why


def _step_value(step: dict) -> str | None:
    if step.get("typed") is not None:
        return str(step["typed"])
    target = step.get("target")
    if isinstance(target, dict) and target.get("value") is not None:
        return str(target["value"])
    return None


def score_node(node: dict, step: dict, urls: list[str], judge: Judge, doms: DomCache | None = None,
               notes: dict | None = None) -> float:
    """One node's score at one step (``urls``: the page URLs that step shows; ``doms``: the
    trajectory's DOM snapshots; ``notes`` collects how element checks were decided)."""
    doms = doms if doms is not None else DomCache(None)
    fn = node["match_function_name"]
    content = node.get("content") or {}
    ref = content.get("reference_answer", "")
    key = content.get("key") or None
    if fn.startswith("url_"):
        best = 0.0
        for url in urls:
            inp = url_input(url, key)
            if inp is None:
                continue
            if fn == "url_included_match":
                s = 1.0 if ref in inp else 0.0
            elif fn == "url_exactly_match":
                s = 1.0 if inp == ref else 0.0
            else:
                s = ask(judge, ref, inp, "")
            best = max(best, s)
        return best
    want_netloc = content.get("netloc")
    if want_netloc and netloc(step.get("url")) != want_netloc:
        return 0.0
    if fn == "element_path_exactly_match":
        if not isinstance(step.get("target"), dict):
            return 0.0
        ok, how, why = element_match(step, ref, node.get("method") or "selector", doms)
        _note(notes, how, why)
        return 1.0 if ok else 0.0
    path = content.get("path")
    if path:
        if not isinstance(step.get("target"), dict):
            return 0.0
        ok, how, why = element_match(step, path, "selector", doms)
        _note(notes, how, why)
        if not ok:
            return 0.0
    value = _step_value(step)
    if value is None:
        return 0.0
    if fn == "element_value_exactly_match":
        return 1.0 if value == ref else 0.0
    if fn == "element_value_semantic_match":
        return ask(judge, ref, value, "") if value else 0.0
    return 0.0


def _note(notes: dict | None, how: str, why: str | None) -> None:
    if notes is None:
        return
    notes["decided"][how] = notes["decided"].get(how, 0) + 1
    if why and how != "dom" and why not in notes["why"]:
        notes["why"].append(why)


def evaluate_key_nodes(nodes: list[dict], trajectory: dict, *, reference_length: int | None = None,
                       judge: Judge | None = None, dom_loader: Callable[[str], bytes | None] | None = None) -> dict:
    """Score WebCanvas key nodes over a trajectory (see the module docstring). ``dom_loader`` reads
    a step's DOM snapshot (its ``dom`` path -> HTML bytes, None when absent)."""
    judge = judge or DEFAULT_JUDGE
    doms = DomCache(dom_loader)
    steps = trajectory.get("steps", [])
    final_url = trajectory.get("final_url")
    states: list[tuple[int | None, dict, list[str]]] = []
    for i, step in enumerate(steps):
        urls = step_urls(step)
        if i == len(steps) - 1 and isinstance(final_url, str) and final_url and final_url not in urls:
            urls.append(final_url)
        states.append((i, step, urls))
    if not steps and isinstance(final_url, str) and final_url:
        states.append((None, {"url": final_url}, [final_url]))

    results: list[dict[str, Any]] = []
    for n, node in enumerate(nodes):
        best, at = 0.0, None
        notes: dict = {"decided": {}, "why": []}
        for i, step, urls in states:
            s = score_node(node, step, urls, judge, doms, notes)
            if s > best:
                best, at = s, i
            if best >= 1.0:
                break
        result = {"node": n, "function": node["match_function_name"],
                  "reference_answer": (node.get("content") or {}).get("reference_answer"),
                  "score": best, "matched": best >= 1.0, "step": at}
        if notes["decided"]:
            result["decided"] = dict(sorted(notes["decided"].items()))
            result["undecided"] = notes["why"][0] if notes["decided"].get("undecidable") else None
            if notes["why"]:
                result["not_by_dom"] = notes["why"]
        results.append(result)
    matched = sum(1 for r in results if r["matched"])
    total = len(results)
    n_steps = len(steps)
    efficiency = efficiency_ratio(reference_length, trajectory)
    return {"nodes": results, "matched": matched, "total": total,
            "completion_rate": sum(r["score"] for r in results) / total if total else 0.0,
            "success": total > 0 and matched == total, "near_success": total > 0 and matched == total - 1,
            "steps": n_steps, "reference_length": reference_length, "efficiency": efficiency}
