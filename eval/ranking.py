"""Ranking tasks (APeB): Hit@1 and Hit@5 of the agent's ranked candidate ids.

The agent's answer is read as an ordered list of candidate ids (FORMATS.md): a JSON list when the
answer parses as one, else the candidate ids in the order they first occur in the answer text
(on word boundaries, so ``P-1`` is not found inside ``P-10``). Ids that are not candidates are
ignored; repeats count once. Hit@k = the target is among the first k; ``success`` = Hit@1.
"""

from __future__ import annotations

import json
import re


def ranked_ids(answer: str | None, candidates: list[str]) -> list[str]:
    """The candidate ids the answer ranks, best first."""
    if not answer:
        return []
    cands = set(candidates)
    try:
        parsed = json.loads(answer)
    except ValueError:
        parsed = None
    if isinstance(parsed, list):
        out: list[str] = []
        for x in parsed:
            x = str(x).strip()
            if x in cands and x not in out:
                out.append(x)
        return out
    found = []
    for c in candidates:
        m = re.search(r"(?<![\w-])" + re.escape(c) + r"(?![\w-])", answer)
        if m:
            found.append((m.start(), c))
    return [c for _, c in sorted(found)]


def evaluate_ranking(candidates: list[str], target: str, answer: str | None) -> dict:
    ranked = ranked_ids(answer, candidates)
    rank = ranked.index(target) + 1 if target in ranked else None
    hit1 = rank == 1
    hit5 = rank is not None and rank <= 5
    return {"ranked": ranked, "rank": rank, "hit@1": hit1, "hit@5": hit5, "success": hit1,
            "score": 1.0 if hit1 else 0.0}
