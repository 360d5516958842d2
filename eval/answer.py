"""Final-answer evaluators (WebArxiv strict match; WebArena-style normalised / must-include).

Each check is a pure function of the agent's answer text (``None`` when the agent gave none, which
fails every check) and returns ``{"check", "expected", "success", "detail"}``.

Rules (also in docs/suites-and-runs.md):

- ``exact`` (strict, WebArxiv): the answer equals the expected text after removing leading and
  trailing whitespace only. Case, quotes and punctuation count.
- ``normalised``: ``normalise(answer) == normalise(expected)``; ``normalise`` = NFKC, typographic
  quotes folded to ASCII, case-folded, whitespace runs collapsed, quotes and ``. , ; : ! ?``
  stripped from both ends.
- ``must_include``: every listed phrase, normalised, occurs in the normalised answer (substring,
  as in WebArena).
- ``one_of``: the normalised answer equals one of the normalised alternatives.
- ``numeric`` (+ ``tolerance``, default 0): some number written in the answer is within
  ``tolerance`` (absolute) of the expected value. Numbers: optional sign, digits with optional
  ``,`` thousands groups, optional decimals and exponent (``1,234.5``, ``-3``, ``.5``, ``2e3``); a
  ``-`` right after a letter or digit is a hyphen, not a sign (``2020-2021`` is 2020 and 2021).
- A list of checks: all must hold.
"""

from __future__ import annotations

import re
from typing import Any

from .text import normalise

_NUMBER = re.compile(r"(?:(?<![0-9A-Za-z.])[-+\u2212])?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


def parse_numbers(text: str | None) -> list[float]:
    """Every number written in ``text``, in order (see the module rules)."""
    if not text:
        return []
    out = []
    for m in _NUMBER.finditer(text):
        s = m.group(0).replace(",", "").replace("\u2212", "-")
        try:
            out.append(float(s))
        except ValueError:
            continue
    return out


def check_exact(answer: str | None, expected: str) -> bool:
    return answer is not None and answer.strip() == expected.strip()


def check_normalised(answer: str | None, expected: str) -> bool:
    return answer is not None and normalise(answer) == normalise(expected)


def check_must_include(answer: str | None, phrases: list[str]) -> tuple[bool, list[str]]:
    """(all found, the phrases not found)."""
    if answer is None:
        return False, list(phrases)
    text = normalise(answer)
    missing = [p for p in phrases if normalise(p) not in text]
    return not missing, missing


def check_one_of(answer: str | None, alternatives: list[str]) -> bool:
    return answer is not None and normalise(answer) in {normalise(a) for a in alternatives}


def check_numeric(answer: str | None, expected: float, tolerance: float = 0.0) -> tuple[bool, list[float]]:
    """(some number within tolerance, the numbers found)."""
    numbers = parse_numbers(answer)
    # A tiny epsilon so that 0.1 + 0.2 style representation error never flips a boundary case.
    return any(abs(n - expected) <= tolerance + 1e-12 for n in numbers), numbers


def evaluate_check(answer: str | None, spec: dict) -> dict:
    """One answer check (``{"exact": ...}``, ``{"normalised": ...}``, ...)."""
    if "exact" in spec:
        ok = check_exact(answer, spec["exact"])
        return {"check": "exact", "expected": spec["exact"], "success": ok, "detail": None}
    if "normalised" in spec:
        ok = check_normalised(answer, spec["normalised"])
        return {"check": "normalised", "expected": spec["normalised"], "success": ok,
                "detail": {"answer_normalised": normalise(answer) if answer is not None else None}}
    if "must_include" in spec:
        ok, missing = check_must_include(answer, spec["must_include"])
        return {"check": "must_include", "expected": spec["must_include"], "success": ok,
                "detail": {"missing": missing}}
    if "one_of" in spec:
        ok = check_one_of(answer, spec["one_of"])
        return {"check": "one_of", "expected": spec["one_of"], "success": ok, "detail": None}
    if "numeric" in spec:
        tol = float(spec.get("tolerance", 0))
        ok, numbers = check_numeric(answer, float(spec["numeric"]), tol)
        return {"check": "numeric", "expected": spec["numeric"], "success": ok,
                "detail": {"tolerance": tol, "numbers_found": numbers}}
    raise ValueError(f"unknown answer check {sorted(spec)}")


def evaluate_answer(spec: Any, answer: str | None) -> dict:
    """All checks of a task's ``answer`` ground truth.

    Returns ``{"success", "score", "answer", "checks": [...]}``; ``score`` is the share of checks
    that hold (1.0 or 0.0 for a single check); ``success`` when all hold.
    """
    specs = spec if isinstance(spec, list) else [spec]
    checks = [evaluate_check(answer, s) for s in specs]
    passed = sum(1 for c in checks if c["success"])
    return {"success": passed == len(checks), "score": passed / len(checks), "answer": answer, "checks": checks}
