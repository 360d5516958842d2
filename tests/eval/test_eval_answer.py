"""Answer checks (strict WebArxiv match; normalised, must-include, one-of, numeric) on hand-picked answers."""

from __future__ import annotations

import pytest

from webfreeze.eval.answer import evaluate_answer, parse_numbers
from webfreeze.eval.text import contains_phrase, normalise


def test_normalise_folds_case_quotes_whitespace_and_end_punctuation():
    # NFKC + curly quotes -> ASCII, casefold, whitespace runs -> one space, quotes/.,;:!? stripped at the ends
    assert normalise("  \u201cAttention  Is All\tYou Need.\u201d ") == "attention is all you need"
    assert normalise("It\u2019s 42!") == "it's 42"
    assert normalise(None) == ""


def test_exact_is_strict_except_surrounding_whitespace():
    spec = {"exact": "2406.12373"}
    assert evaluate_answer(spec, " 2406.12373\n")["success"] is True      # only outer whitespace is forgiven
    assert evaluate_answer(spec, "2406.12373.")["success"] is False       # a trailing period counts
    assert evaluate_answer({"exact": "Quantum"}, "quantum")["success"] is False  # so does case
    assert evaluate_answer(spec, None)["success"] is False                 # no answer fails


def test_normalised_match():
    spec = {"normalised": "Attention Is All You Need"}
    assert evaluate_answer(spec, '"attention is all you need."')["success"] is True
    assert evaluate_answer(spec, "Attention is all you need, probably")["success"] is False


def test_must_include_reports_what_is_missing():
    spec = {"must_include": ["Vaswani", "2017"]}
    ok = evaluate_answer(spec, "By A. VASWANI et al., published in 2017.")
    assert ok["success"] is True and ok["checks"][0]["detail"]["missing"] == []
    bad = evaluate_answer(spec, "By Vaswani et al.")
    assert bad["success"] is False and bad["checks"][0]["detail"]["missing"] == ["2017"]


def test_one_of_alternatives():
    spec = {"one_of": ["cs.CL", "Computation and Language"]}
    assert evaluate_answer(spec, "computation and language")["success"] is True
    assert evaluate_answer(spec, "cs.LG")["success"] is False


def test_parse_numbers():
    # thousands groups, decimals, signs, exponents; a hyphen between digits is not a minus sign
    assert parse_numbers("1,234.5 papers, -3 votes, .5, 2e3 and 2020-2021") == [1234.5, -3.0, 0.5, 2000.0, 2020.0, 2021.0]
    assert parse_numbers("no digits") == []


@pytest.mark.parametrize("answer,ok", [
    ("The mean is 12.504 ms", True),    # |12.504 - 12.5| = 0.004 <= 0.01
    ("about 12.52", False),             # |12.52 - 12.5| = 0.02 > 0.01
    ("12 or 12.49", True),              # 12.49 is within 0.01 (any number in the answer may match)
    ("twelve and a half", False),       # words are not parsed
    (None, False),
])
def test_numeric_with_tolerance(answer, ok):
    assert evaluate_answer({"numeric": 12.5, "tolerance": 0.01}, answer)["success"] is ok


def test_numeric_default_tolerance_is_zero():
    assert evaluate_answer({"numeric": 320}, "320 papers")["success"] is True
    assert evaluate_answer({"numeric": 320}, "321 papers")["success"] is False


def test_list_of_checks_all_must_hold_and_score_is_share():
    spec = [{"must_include": ["Vaswani"]}, {"numeric": 2017}, {"exact": "nope"}]
    r = evaluate_answer(spec, "Vaswani, 2017")
    # 2 of 3 checks hold: score 2/3, no success
    assert r["success"] is False and r["score"] == pytest.approx(2 / 3)


def test_contains_phrase_respects_word_boundaries():
    assert contains_phrase("Size: M, colour blue", "m") is True
    assert contains_phrase("medium", "m") is False
    assert contains_phrase("under $50 please", "$50") is True
