"""Ranking tasks (APeB): Hit@1 and Hit@5 of the agent's ranked candidate ids.

The answer schema (docs/suites-and-runs.md, "Ranking"): the agent's answer is exactly one JSON value, either a
list of exactly five distinct candidate ids (strings), best first, or the object
``{"ranking": [those five ids]}`` and nothing else. Whitespace around it and one Markdown code
fence around the whole answer (```` ```json ... ``` ````) are allowed; anything else is *invalid*:
prose before or after the JSON, 4 or 6 ids, a repeated id, an id that is not a candidate (ids are
compared exactly, so ``P-1`` is never read out of ``P-10``), a number instead of a string. An
invalid answer ranks nothing: a miss for Hit@1 and Hit@5, counted as invalid with its reason.
"""

from __future__ import annotations

import json
import re

RANK_SIZE = 5
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*[ \t]*\n(?P<body>.*?)\n?```$", re.S)


def parse_ranking(answer: str | None, candidates: list[str]) -> tuple[list[str] | None, str | None]:
    """``(ids, None)`` for a valid answer, ``(None, reason)`` for an invalid one."""
    if answer is None or not answer.strip():
        return None, "no answer"
    text = answer.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group("body").strip()
    try:
        value = json.loads(text)
    except ValueError:
        return None, "not exactly one JSON value (text around the JSON, or no JSON)"
    if isinstance(value, dict):
        if set(value) != {"ranking"}:
            return None, "a JSON object must be {\"ranking\": [...]} and nothing else"
        value = value["ranking"]
    if not isinstance(value, list):
        return None, f"not a JSON list of ids (got {type(value).__name__})"
    if not all(isinstance(x, str) for x in value):
        return None, "every id must be a JSON string"
    if len(value) != RANK_SIZE:
        return None, f"{len(value)} ids, not exactly {RANK_SIZE}"
    if len(set(value)) != len(value):
        return None, "an id is repeated"
    known = set(candidates)
    unknown = [x for x in value if x not in known]
    if unknown:
        return None, f"not a candidate id: {unknown[0]!r}"
    return list(value), None


def ranked_ids(answer: str | None, candidates: list[str]) -> list[str]:
    """The candidate ids a valid answer ranks, best first; ``[]`` for an invalid answer."""
    ids, _ = parse_ranking(answer, candidates)
    return ids or []


def evaluate_ranking(candidates: list[str], target: str, answer: str | None) -> dict:
    """Hit@1/Hit@5 of one answer; ``valid`` and, when invalid, ``invalid_reason``."""
    ids, reason = parse_ranking(answer, candidates)
    ranked = ids or []
    rank = ranked.index(target) + 1 if target in ranked else None
    hit1 = rank == 1
    hit5 = rank is not None and rank <= RANK_SIZE
    out = {"valid": ids is not None, "ranked": ranked, "rank": rank, "hit@1": hit1, "hit@5": hit5,
           "success": hit1, "score": 1.0 if hit1 else 0.0}
    if reason is not None:
        out["invalid_reason"] = reason
    return out
