"""Comparing text loosely: the folding and whitespace rules that the agents (matching what a page
shows) and the evaluators (matching answers) share, so that both read a text the same way."""

from __future__ import annotations

import re
import unicodedata


def one_line(text: object, limit: int = 400) -> str:
    """``text`` as one line: runs of whitespace (newlines included) collapsed, cut at ``limit``
    characters (a provider's error body can be a whole HTML page)."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def counted(n: int, word: str, plural: str | None = None) -> str:
    """``n`` and ``word``, plural unless ``n`` is 1: ``1 page``, ``3 pages`` (``plural`` when
    adding an s will not do)."""
    return f"{n} {word if n == 1 else plural or word + 's'}"


def fold(text: str) -> str:
    """``text`` NFKC-normalised (full-width forms, ligatures and the like to their plain forms),
    then case-folded."""
    return unicodedata.normalize("NFKC", text).casefold()


def collapse_ws(text: str) -> str:
    """``text`` with every run of whitespace (Unicode's, as ``str.split`` sees it) as one space and
    none at either end."""
    return " ".join(text.split())


def fold_text(text: str | None) -> str:
    """Text as evidence is compared (a task's evidence against what a page shows): NFKC, case-folded,
    every whitespace run removed. The page's text and the evidence may break lines, or split into
    nodes, at different places (``use <code>append()</code>.``). The recorder (``record_answer``),
    the reference agent and drift fold alike, through this one function."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text or "")).casefold()


# Input types whose value a person does not read as text on the page, so no evidence stands on it:
# the recorder's visible-text script (``record_answer``), drift's reading of a captured DOM, one list.
UNSHOWN_INPUT_TYPES = ("hidden", "password", "checkbox", "radio", "file", "image", "range", "color")


__all__ = ["UNSHOWN_INPUT_TYPES", "collapse_ws", "fold", "fold_text"]
