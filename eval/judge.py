"""The judge interface: what decides the questions rules cannot (semantic key nodes, and rubric
items the rules did not find).

A judge is any object with a ``name`` and ``judge(question, candidate, reference) -> float`` in
[0, 1], passed in by the caller. The LLM-backed judge is :mod:`.llm_judge` (through the LLM layer,
``webfreeze.llm``, and its cassette; never ``agents``). The built-in :class:`TokenOverlapJudge` is
a deterministic, rule-based stand-in, not a language model; reports name the judge they were
scored with.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .text import tokens


@runtime_checkable
class Judge(Protocol):
    name: str

    def judge(self, question: str, candidate: str, reference: str) -> float:
        """How well ``candidate`` satisfies ``reference`` (or, when ``reference`` is empty, the
        criterion stated in ``question``), from 0 (not at all) to 1 (fully)."""
        ...


# Words that carry no content in WebCanvas's semantic criteria ("Decide whether the content means
# gift card") or in short answers.
STOP_WORDS = frozenset("""
a an the and or of to in on at for by with from is are was were be been being it its this that these those
decide whether if means mean meaning content contents searching search searched looking look for about
as into than then there their they them he she we you your i my me do does did not no yes
""".split())


class TokenOverlapJudge:
    """Rule-based stand-in for an LLM judge (deterministic; no model involved).

    Score = share of the criterion's content words found in the candidate:
    ``|C ∩ R| / |R|`` where R is the set of tokens (``text.tokens``) of ``reference``, or of
    ``question`` when ``reference`` is empty, minus :data:`STOP_WORDS`, and C the tokens of
    ``candidate``. 0 when R or C is empty.
    """

    name = "token-overlap (rule-based stand-in, no language model)"

    def judge(self, question: str, candidate: str, reference: str) -> float:
        ref = {t for t in tokens(reference or question) if t not in STOP_WORDS}
        cand = set(tokens(candidate))
        if not ref or not cand:
            return 0.0
        return len(ref & cand) / len(ref)


DEFAULT_JUDGE = TokenOverlapJudge()


def judge_name(judge: Judge | None) -> str:
    return (judge or DEFAULT_JUDGE).name


def ask(judge: Judge, question: str, candidate: str, reference: str) -> float:
    """Call a judge and clamp its verdict to [0, 1] (a judge returning junk scores 0)."""
    try:
        value = float(judge.judge(question, candidate, reference))
    except (TypeError, ValueError):
        return 0.0
    if value != value:  # NaN
        return 0.0
    return min(1.0, max(0.0, value))
