"""Persona2Web's rubric for personalised tasks, decided by rules over the trajectory.

Ground truth: ``{"website": "shop.test", "preferences": {"size": "M", ...}, "location": "Boston"}``
(each part optional). The scores follow Persona2Web (each 0-10); the evidence rules are ours
(also in FORMATS.md):

Evidence
- *retrieval evidence*: every step's ``agent_fields.history_queries`` and every value of its
  ``agent_fields.retrieved`` entries except ``id`` and ``score`` (text, website, type, ...);
- *utilisation evidence*: typed or selected text, the URLs the agent visited or asked for
  (``url``, ``url_after``, goto targets, ``final_url``; percent- and form-decoded), the answer,
  and every string or number in ``final_state``.
- A value is *found* in evidence when ``text.contains_phrase`` finds it (normalised, on word
  boundaries). A value written in the task's instruction counts as retrieved (nothing was left
  to retrieve: Persona2Web's level-0 queries).
- Website utilisation: a visited URL's host equals the expected website or ends with
  ``.<website>`` (``www.`` ignored). Website retrieval: the website, or its first label
  (``kohls`` for ``kohls.com``), is found in the retrieval evidence.
- When the rules do not find an item and a judge was given, the judge decides:
  ``judge(question="Did the agent <retrieve|use> <what>?", candidate=<evidence joined>,
  reference=<value>) >= 0.5`` credits it. Without a judge, rules only.

Scores
- website score = 5 (retrieved) + 5 (used): 0, 5 or 10.
- preference score: each of the k preferences earns 5/k for retrieval and 5/k for use (10 for all);
  with a location, the location earns 2.5 + 2.5 more and the sum is rescaled to 10 (x 10/15).
- intent satisfaction: 10 when the task is done (``intent_done``, decided by the caller from the
  task's other ground truth; when the caller cannot tell, done = the agent ended with an answer
  after using the website and every preference); 5 when it is not done but the agent ended ``infeasible`` or on an
  error after using the website and every preference (the right action, blocked by something
  outside it); 0 otherwise.
- success: every score present is 10.
"""

from __future__ import annotations

import json
from typing import Any, Iterable
from urllib.parse import unquote_plus, urlsplit

from .judge import Judge, ask
from .text import contains_phrase
from .trajectory import all_urls, iter_agent_fields

JUDGE_THRESHOLD = 0.5


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


def retrieval_evidence(trajectory: dict) -> list[str]:
    out: list[str] = []
    for fields in iter_agent_fields(trajectory):
        out.extend(q for q in fields.get("history_queries") or [] if isinstance(q, str))
        for entry in fields.get("retrieved") or []:
            if isinstance(entry, dict):
                out.extend(_strings({k: v for k, v in entry.items() if k not in ("id", "score")}))
            else:
                out.extend(_strings(entry))
    return out


def visited_urls(trajectory: dict) -> list[str]:
    urls = all_urls(trajectory)
    for step in trajectory.get("steps", []):
        parsed = step.get("parsed")
        if isinstance(parsed, dict) and parsed.get("kind") == "goto" and isinstance(parsed.get("url"), str):
            urls.append(parsed["url"])
    return urls


def utilisation_evidence(trajectory: dict) -> list[str]:
    out: list[str] = []
    for step in trajectory.get("steps", []):
        if step.get("typed") is not None:
            out.append(str(step["typed"]))
    out.extend(unquote_plus(u) for u in visited_urls(trajectory))
    if isinstance(trajectory.get("answer"), str):
        out.append(trajectory["answer"])
    out.extend(_strings(trajectory.get("final_state") or {}))
    return out


def _host(url: str) -> str:
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return ""
    return host[4:] if host.startswith("www.") else host


def _found(value: str, evidence: list[str]) -> bool:
    return any(contains_phrase(e, value) for e in evidence)


def _decide(rule: bool, judge: Judge | None, verb: str, what: str, value: str, evidence: list[str]) -> tuple[bool, str]:
    if rule:
        return True, "rule"
    if judge is not None and evidence:
        verdict = ask(judge, f"Did the agent {verb} the {what}?", "\n".join(evidence), value)
        if verdict >= JUDGE_THRESHOLD:
            return True, "judge"
    return False, "rule"


def evaluate_rubric(rubric: dict, trajectory: dict, *, instruction: str = "", intent_done: bool | None = None,
                    judge: Judge | None = None) -> dict:
    """Score one personalised task (see the module docstring for every rule)."""
    retrieved_ev = retrieval_evidence(trajectory)
    used_ev = utilisation_evidence(trajectory)
    hosts = {_host(u) for u in visited_urls(trajectory)}
    items: list[dict] = []
    out: dict[str, Any] = {"items": items}

    def item(kind: str, name: str, value: str, retrieved_rule: bool, used_rule: bool) -> dict:
        explicit = bool(instruction) and contains_phrase(instruction, value)
        r, r_by = _decide(retrieved_rule or explicit, judge, "retrieve from the user's history", f"{kind} {name}",
                          value, retrieved_ev)
        u, u_by = _decide(used_rule, judge, "use", f"{kind} {name}", value, used_ev)
        entry = {"kind": kind, "name": name, "value": value, "retrieved": r, "used": u,
                 "retrieved_by": "instruction" if explicit and not retrieved_rule else r_by, "used_by": u_by}
        items.append(entry)
        return entry

    if rubric.get("website"):
        site = str(rubric["website"]).lower().removeprefix("www.")
        label = site.split(".")[0]
        used = any(h == site or h.endswith("." + site) for h in hosts)
        retrieved = _found(site, retrieved_ev) or _found(label, retrieved_ev)
        w = item("website", "website", site, retrieved, used)
        out["website"] = {"retrieval": 5.0 if w["retrieved"] else 0.0, "utilisation": 5.0 if w["used"] else 0.0}
        out["website"]["score"] = out["website"]["retrieval"] + out["website"]["utilisation"]

    prefs = rubric.get("preferences") or {}
    location = rubric.get("location")
    if prefs or location:
        retrieval = utilisation = 0.0
        weight = 5.0 / len(prefs) if prefs else 0.0
        for name, value in sorted(prefs.items()):
            value = str(value)
            p = item("preference", name, value, _found(value, retrieved_ev), _found(value, used_ev))
            retrieval += weight if p["retrieved"] else 0.0
            utilisation += weight if p["used"] else 0.0
        full = 10.0 if prefs else 0.0
        if location:
            loc = item("location", "location", str(location), _found(str(location), retrieved_ev),
                       _found(str(location), used_ev))
            retrieval += 2.5 if loc["retrieved"] else 0.0
            utilisation += 2.5 if loc["used"] else 0.0
            full += 5.0
        scale = 10.0 / full
        out["preference"] = {"retrieval": retrieval * scale, "utilisation": utilisation * scale,
                             "score": (retrieval + utilisation) * scale}

    end_reason = (trajectory.get("end") or {}).get("reason")
    all_used = all(i["used"] for i in items)
    if intent_done is None:  # nothing else tells whether the task was done: the rules decide
        intent_done = end_reason == "answer" and bool(items) and all_used
    if intent_done:
        intent = 10.0
    elif end_reason in ("infeasible", "error") and items and all_used:
        intent = 5.0
    else:
        intent = 0.0
    out["intent"] = intent
    scores = [out[k]["score"] for k in ("website", "preference") if k in out] + [intent]
    out["success"] = all(abs(s - 10.0) < 1e-9 for s in scores)
    out["score"] = sum(scores) / (10.0 * len(scores))
    return out
