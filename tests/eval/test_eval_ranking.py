"""The APeB ranking answer schema: exactly five distinct candidate ids as one JSON value."""

from __future__ import annotations

import pytest
from trajectory_builder import answer_step, trajectory

from webfreeze.eval.ranking import evaluate_ranking, parse_ranking
from webfreeze.eval.score import score_task
from webfreeze.eval.tasks import validate_task

CANDS = ["P-1", "P-10", "P-2", "P-3", "P-4", "P-5", "P-6", "P-100"]


@pytest.mark.parametrize("answer,ids", [
    ('["P-2", "P-1", "P-10", "P-3", "P-4"]', ["P-2", "P-1", "P-10", "P-3", "P-4"]),
    ('  ["P-2","P-1","P-10","P-3","P-4"]\n', ["P-2", "P-1", "P-10", "P-3", "P-4"]),
    ('{"ranking": ["P-100", "P-10", "P-1", "P-3", "P-4"]}', ["P-100", "P-10", "P-1", "P-3", "P-4"]),
    ('```json\n["P-2", "P-1", "P-10", "P-3", "P-4"]\n```', ["P-2", "P-1", "P-10", "P-3", "P-4"]),   # one fence: markup
    ('```\n["P-2", "P-1", "P-10", "P-3", "P-4"]\n```', ["P-2", "P-1", "P-10", "P-3", "P-4"]),
])
def test_valid_answers(answer, ids):
    assert parse_ranking(answer, CANDS) == (ids, None)


@pytest.mark.parametrize("answer,reason", [
    (None, "no answer"),
    ("   ", "no answer"),
    ('Here is my ranking: ["P-2", "P-1", "P-10", "P-3", "P-4"]', "text around the JSON"),
    ('["P-2", "P-1", "P-10", "P-3", "P-4"] hope this helps', "text around the JSON"),
    ("P-2, P-1, P-10, P-3, P-4", "no JSON"),
    ('["P-2", "P-1", "P-10", "P-3"]', "4 ids, not exactly 5"),
    ('["P-2", "P-1", "P-10", "P-3", "P-4", "P-5"]', "6 ids, not exactly 5"),
    ('["P-2", "P-1", "P-2", "P-3", "P-4"]', "repeated"),
    ('["P-2", "P-1", "P-7", "P-3", "P-4"]', "not a candidate id: 'P-7'"),
    ('["P-2", "P-1", "P-1 ", "P-3", "P-4"]', "not a candidate id: 'P-1 '"),       # ids compare exactly
    ('["P-2", "P-1", 10, "P-3", "P-4"]', "every id must be a JSON string"),
    ('{"ranking": ["P-2", "P-1", "P-10", "P-3", "P-4"], "why": "x"}', "nothing else"),
    ('{"top5": ["P-2", "P-1", "P-10", "P-3", "P-4"]}', "nothing else"),
    ('"P-2"', "not a JSON list"),
    ('```json\n["P-2", "P-1", "P-10", "P-3", "P-4"]\n```\nThe first is best.', "text around the JSON"),
])
def test_invalid_answers(answer, reason):
    ids, why = parse_ranking(answer, CANDS)
    assert ids is None and reason in why


def test_ids_inside_other_ids_are_not_confused():
    # "P-1" is a prefix of "P-10" and "P-100": only exact ids count, so the target P-1 is at rank 3
    r = evaluate_ranking(CANDS, "P-1", '["P-100", "P-10", "P-1", "P-2", "P-3"]')
    assert r["valid"] and r["rank"] == 3 and r["hit@1"] is False and r["hit@5"] is True
    r = evaluate_ranking(CANDS, "P-1", '["P-100", "P-10", "P-2", "P-3", "P-4"]')
    assert r["valid"] and r["rank"] is None and r["hit@5"] is False


def test_invalid_is_a_miss_and_says_why():
    r = evaluate_ranking(CANDS, "P-2", 'My pick: ["P-2", "P-1", "P-10", "P-3", "P-4"]')
    assert r["valid"] is False and r["hit@1"] is False and r["hit@5"] is False and r["ranked"] == []
    assert r["score"] == 0.0 and "text around the JSON" in r["invalid_reason"]
    r = evaluate_ranking(CANDS, "P-2", '["P-2", "P-1", "P-10", "P-3", "P-4"]')
    assert r["valid"] and r["hit@1"] and r["success"] and "invalid_reason" not in r


def test_both_ground_truth_shapes_score():
    nested = validate_task({"id": "r", "category": "ranking", "instruction": "rank", "start_url": "http://shop.test/",
                            "ground_truth": {"ranking": {"target": "P-4", "candidates": CANDS}}})
    flat = validate_task({"id": "r", "category": "ranking", "instruction": "rank", "start_url": "http://shop.test/",
                          "ground_truth": {"candidates": CANDS, "target": "P-4"}})
    answer = '["P-2", "P-4", "P-10", "P-3", "P-1"]'
    traj = trajectory("r", [answer_step(answer)], answer=answer)
    for t in (nested, flat):
        assert t.kinds == ["ranking"]
        res = score_task(t, traj)["results"]["ranking"]
        assert (res["rank"], res["hit@1"], res["hit@5"]) == (2, False, True)
    from webfreeze.eval.errors import TaskError

    with pytest.raises(TaskError, match="target must be one of"):
        validate_task({"id": "r", "category": "ranking", "instruction": "rank",
                       "ground_truth": {"ranking": {"target": "Z", "candidates": CANDS}}})
