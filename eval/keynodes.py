"""Key-node evaluation with WebCanvas semantics (Mind2Web-Live's ground truth, read as published).

Every node is scored at every step and keeps its best score (order-free: a node reached at any
step counts). WebCanvas checks nodes against the live page; a trajectory file holds no DOM, so
the element nodes compare the selector the step's target carries. The rules (also in FORMATS.md):

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
  that differs from ``netloc(step.url)``; else 1 when the step target's selector equals
  ``reference_answer`` after ``normalise_selector`` (whitespace collapsed, no spaces around
  ``> + ~``). WebCanvas also accepts a click on one of the three nearest ancestors of a reference
  ``span, h1-h6, div, li, ul, p``; here: the reference with its last 1-3 ``>``-steps removed.
- ``element_value_exactly_match``: netloc as above; when the node has ``path``, the step's
  selector must match it as for path nodes; score 1 when the step's value equals
  ``reference_answer`` exactly.
- ``element_value_semantic_match``: as above, with a non-empty value scored by the judge against
  the criterion in ``reference_answer``.

Results: per node the best score (a judge may give fractions) and the first step reaching it;
``completion_rate`` = mean of the node scores; a node is *matched* at score 1 (as WebCanvas
counts); ``success`` = every node matched; ``near_success`` = exactly one node not matched;
``efficiency`` = ``reference_length / steps`` (None without a reference length or with no steps).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

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


def _step_value(step: dict) -> str | None:
    if step.get("typed") is not None:
        return str(step["typed"])
    target = step.get("target")
    if isinstance(target, dict) and target.get("value") is not None:
        return str(target["value"])
    return None


def score_node(node: dict, step: dict, urls: list[str], judge: Judge) -> float:
    """One node's score at one step (``urls``: the page URLs that step shows)."""
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
    target = step.get("target") if isinstance(step.get("target"), dict) else {}
    if fn == "element_path_exactly_match":
        method = node.get("method") or "selector"
        candidate = target.get("xpath") if method == "xpath" else target.get("css")
        return 1.0 if selector_matches(candidate, ref, method) else 0.0
    path = content.get("path")
    if path and not selector_matches(target.get("css"), path):
        return 0.0
    value = _step_value(step)
    if value is None:
        return 0.0
    if fn == "element_value_exactly_match":
        return 1.0 if value == ref else 0.0
    if fn == "element_value_semantic_match":
        return ask(judge, ref, value, "") if value else 0.0
    return 0.0


def evaluate_key_nodes(nodes: list[dict], trajectory: dict, *, reference_length: int | None = None,
                       judge: Judge | None = None) -> dict:
    """Score WebCanvas key nodes over a trajectory (see the module docstring)."""
    judge = judge or DEFAULT_JUDGE
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
        for i, step, urls in states:
            s = score_node(node, step, urls, judge)
            if s > best:
                best, at = s, i
            if best >= 1.0:
                break
        results.append({"node": n, "function": node["match_function_name"],
                        "reference_answer": (node.get("content") or {}).get("reference_answer"),
                        "score": best, "matched": best >= 1.0, "step": at})
    matched = sum(1 for r in results if r["matched"])
    total = len(results)
    n_steps = len(steps)
    efficiency = efficiency_ratio(reference_length, trajectory)
    return {"nodes": results, "matched": matched, "total": total,
            "completion_rate": sum(r["score"] for r in results) / total if total else 0.0,
            "success": total > 0 and matched == total, "near_success": total > 0 and matched == total - 1,
            "steps": n_steps, "reference_length": reference_length, "efficiency": efficiency}
