"""The SQuAD v1.1 metric (XTREME's third_party/evaluate_squad.py) on predictions full of traps."""

from __future__ import annotations

import pytest

from infoxlm.eval.mlqa_metric import score_mlqa
from infoxlm.eval.squad_metric import SquadScoreError, exact_match_score, f1_score, normalize_answer, score_squad


def squad(*questions):
    """A SQuAD-format file: one paragraph, questions (id, [gold answers])."""
    qas = [{"id": qid, "question": "?", "answers": [{"text": t, "answer_start": 0} for t in golds]} for qid, golds in questions]
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]}


@pytest.mark.parametrize("text, normalised", [
    ("The Eiffel Tower!", "eiffel tower"),          # article and ASCII punctuation
    ("  a\tcat,  an   owl ", "cat owl"),              # whitespace collapsed, articles gone
    ("Theatre", "theatre"),                           # "the" only as a whole word
    ("¿Dónde está?", "¿dónde está"),                  # non-ASCII punctuation stays (unlike MLQA)
    ("北京。", "北京。"),                               # so does CJK punctuation; no segmentation
    ("der Hund", "der hund"),                         # no German articles: one rule for every language
    ("U.S.A.", "usa"),
    ("", ""),
])
def test_normalisation_is_squads(text, normalised):
    assert normalize_answer(text) == normalised


def test_scores_take_the_best_gold_and_count_unanswered_questions_as_zero():
    data = squad(("q1", ["the Moon", "Moon landing"]), ("q2", ["Paris"]), ("q3", ["red car"]), ("q4", ["x"]))
    predictions = {"q1": "Moon landing.", "q2": "in Paris", "q3": "car red"}  # q4 unanswered
    score = score_squad(data, predictions)
    # q1 EM 1 F1 1; q2 EM 0 F1 2·(1/2·1)/(1/2+1) = 2/3; q3 EM 0 F1 1 (a bag of tokens); q4 0.
    assert score.exact_match == pytest.approx(100 * 1 / 4)
    assert score.f1 == pytest.approx(100 * (1 + 2 / 3 + 1 + 0) / 4)
    assert score.unanswered == ["q4"] and score.total == 4


def test_an_answer_that_normalises_to_nothing():
    assert exact_match_score("The.", "a")  # both empty: equal strings
    assert f1_score("The.", "a") == 0.0    # but no shared token: F1 0, as the official script
    assert f1_score("", "Paris") == 0.0


def test_squad_and_mlqa_metrics_differ_where_xtreme_says():
    data = squad(("q1", ["¿Dónde?"]), ("q2", ["el perro"]))
    predictions = {"q1": "Dónde", "q2": "perro"}
    assert score_squad(data, predictions).exact_match == 0.0  # "¿" and the Spanish article count
    assert score_mlqa(data, predictions, "es").exact_match == 100.0  # MLQA drops both


def test_bad_inputs_are_named():
    with pytest.raises(SquadScoreError, match="preds.json: expected a JSON object"):
        score_squad(squad(("q1", ["a"])), ["a"], predictions_name="preds.json")
    with pytest.raises(SquadScoreError, match="id 'q1': expected an answer string, found int"):
        score_squad(squad(("q1", ["a"])), {"q1": 3})
    with pytest.raises(SquadScoreError, match="gold.json: no questions"):
        score_squad({"data": []}, {}, data_name="gold.json")
    with pytest.raises(SquadScoreError, match=r"data\[0\]: expected a 'paragraphs' list"):
        score_squad({"data": [{}]}, {})
