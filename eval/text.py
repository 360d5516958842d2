"""Text normalisation shared by the evaluators (one definition, documented in docs/suites-and-runs.md)."""

from __future__ import annotations

import re

from webfreeze.common.text import collapse_ws, fold

# Typographic quotes and apostrophes folded to their ASCII forms before comparing.
_QUOTE_MAP = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
                            "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"',
                            "\u00ab": '"', "\u00bb": '"', "`": "'"})
_EDGE = " \t\r\n\"'.,;:!?"


def fold_quotes(text: str) -> str:
    return text.translate(_QUOTE_MAP)


def normalise(text: str | None) -> str:
    """The "normalised" form of an answer: NFKC, typographic quotes folded to ASCII, case-folded,
    runs of whitespace collapsed to one space, and quotes and the punctuation ``. , ; : ! ?``
    stripped from both ends (repeatedly)."""
    if text is None:
        return ""
    # (folding quotes after case-folding, not before: no character's case-fold makes or unmakes a
    # typographic quote, so the order does not matter; tests/common/test_common_helpers.py checks that)
    text = collapse_ws(fold_quotes(fold(str(text))))
    return text.strip(_EDGE)


_TOKEN = re.compile(r"[0-9a-z]+(?:[.'][0-9a-z]+)*")


def tokens(text: str | None) -> list[str]:
    """Word tokens of ``normalise(text)``: runs of letters and digits (inner ``.`` and ``'`` kept)."""
    return _TOKEN.findall(normalise(text))


def contains_phrase(haystack: str | None, needle: str | None) -> bool:
    """Whether ``normalise(needle)`` occurs in ``normalise(haystack)`` on word boundaries (so the
    preference value "m" is not found inside "medium")."""
    n, h = normalise(needle), normalise(haystack)
    if not n or not h:
        return False
    left = r"(?<![0-9a-z])" if n[0].isalnum() else ""
    right = r"(?![0-9a-z])" if n[-1].isalnum() else ""
    return re.search(left + re.escape(n) + right, h) is not None
