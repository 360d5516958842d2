"""Comparing text loosely: the folding and whitespace rules that the agents (matching what a page
shows) and the evaluators (matching answers) share, so that both read a text the same way."""

from __future__ import annotations

import unicodedata


def fold(text: str) -> str:
    """``text`` NFKC-normalised (full-width forms, ligatures and the like to their plain forms),
    then case-folded."""
    return unicodedata.normalize("NFKC", text).casefold()


def collapse_ws(text: str) -> str:
    """``text`` with every run of whitespace (Unicode's, as ``str.split`` sees it) as one space and
    none at either end."""
    return " ".join(text.split())


__all__ = ["collapse_ws", "fold"]
