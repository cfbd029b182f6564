"""XTREME's evaluate.py scores on predictions full of traps, each expected value worked out by hand."""

from __future__ import annotations

import json
import sys

import pytest

from infoxlm.cli import main
from infoxlm.errors import EvalDataError
from infoxlm.eval.xtreme_score import format_tag_file, tagging_scores, token_accuracy, xtreme_score


def _write(path, sentences):
    path.write_text(format_tag_file(sentences), encoding="utf-8")
    return path


def test_broken_bio_is_scored_as_seqeval_scores_it_leniently():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    # I- without B- opens an entity (PER 0-1 and LOC 3 both found): perfect.
    assert tagging_scores(gold, [["I-PER", "I-PER", "O", "I-LOC"]]) == {"f1": 100.0, "precision": 100.0, "recall": 100.0}
    # A type change inside an entity splits it: PER 0 and LOC 1 are both wrong.
    assert tagging_scores(gold, [["B-PER", "I-LOC", "O", "O"]]) == {"f1": 0.0, "precision": 0.0, "recall": 0.0}
    # Two B-PER: PER 0 and PER 1, neither the gold PER 0-1; LOC right. p = 1/3, r = 1/2, f1 = 0.4.
    s = tagging_scores(gold, [["B-PER", "B-PER", "O", "B-LOC"]])
    assert s["precision"] == pytest.approx(100 / 3) and s["recall"] == pytest.approx(50.0) and s["f1"] == pytest.approx(40.0)


def test_udpos_f1_is_not_token_accuracy():
    # Equal neighbouring tags form one seqeval "entity": NOUN NOUN is one, so NOUN NOUN NOUN matches nothing.
    gold, pred = [["NOUN", "NOUN", "VERB"]], [["NOUN", "NOUN", "NOUN"]]
    assert tagging_scores(gold, pred)["f1"] == 0.0
    assert token_accuracy(gold, pred) == pytest.approx(200 / 3)


def test_tag_files_score_across_sentences_and_accept_the_word_label_test_file(tmp_path):
    labels = tmp_path / "test"  # the task's own word<TAB>label file
    labels.write_text("Angela\tB-PER\nMerkel\tI-PER\nin\tO\nBerlin\tB-LOC\n\n\nSiemens\tB-ORG\nAG\tI-ORG\n", encoding="utf-8")
    pred = _write(tmp_path / "test-de.tsv", [["I-PER", "I-PER", "O", "I-LOC"], ["B-ORG", "O"]])
    # 2 of 3 predicted entities right, 2 of 3 gold found (the doubled blank line is no sentence).
    scores = xtreme_score("panx", labels, pred, "de")
    assert list(scores) == ["f1", "precision", "recall"]
    assert scores["f1"] == pytest.approx(200 / 3) and scores["precision"] == pytest.approx(200 / 3)


def test_misaligned_predictions_name_both_files_and_the_sentence(tmp_path):
    labels = _write(tmp_path / "l.tsv", [["B-PER", "O"], ["O"]])
    with pytest.raises(EvalDataError, match=r"p.tsv:4: sentence 2 has 2 labels, .*l.tsv:4 has 1; expected one label per word"):
        xtreme_score("panx", labels, _write(tmp_path / "p.tsv", [["B-PER", "O"], ["O", "O"]]))
    with pytest.raises(EvalDataError, match=r"q.tsv: 1 sentences, .*l.tsv has 2"):
        xtreme_score("udpos", labels, _write(tmp_path / "q.tsv", [["B-PER", "O"]]))
    (tmp_path / "r.tsv").write_text("B-PER\tB-PER\nO\n\nO\n", encoding="utf-8")
    with pytest.raises(EvalDataError, match=r"r.tsv:1: 2 tab-separated fields .*expected one label"):
        xtreme_score("panx", labels, tmp_path / "r.tsv")
    (tmp_path / "empty.tsv").write_text("\n\n", encoding="utf-8")
    with pytest.raises(EvalDataError, match=r"empty.tsv: no labels"):
        xtreme_score("panx", labels, tmp_path / "empty.tsv")


def test_classification_accuracy_strips_lines_and_counts_them(tmp_path):
    (tmp_path / "l.tsv").write_text("1\n0\n1\n0\n", encoding="utf-8")
    (tmp_path / "p.tsv").write_text("1 \n1\n1\n0\n", encoding="utf-8")
    assert xtreme_score("pawsx", tmp_path / "l.tsv", tmp_path / "p.tsv") == {"accuracy": 75.0}
    (tmp_path / "short.tsv").write_text("1\n", encoding="utf-8")
    with pytest.raises(EvalDataError, match="short.tsv: 1 lines, .*l.tsv has 4"):
        xtreme_score("xnli", tmp_path / "l.tsv", tmp_path / "short.tsv")


def _squad(tmp_path):
    data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "Der alte Brücke.", "qas": [
        {"id": "a", "question": "?", "answers": [{"text": "the old bridge", "answer_start": 0}]},
        {"id": "b", "question": "?", "answers": [{"text": "Berlin", "answer_start": 0}]},
    ]}]}]}
    (tmp_path / "l.json").write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "p.json").write_text(json.dumps({"a": "Old bridge!"}), encoding="utf-8")  # b unanswered
    return tmp_path / "l.json", tmp_path / "p.json"


def test_mlqa_strips_articles_and_punctuation_and_scores_unanswered_as_zero(tmp_path):
    labels, pred = _squad(tmp_path)
    assert xtreme_score("mlqa", labels, pred, "en") == {"exact_match": 50.0, "f1": 50.0}
    with pytest.raises(EvalDataError, match="--task mlqa needs --lang"):
        xtreme_score("mlqa", labels, pred)


def test_squad_tasks_match_squad_v1_1_on_the_same_traps(tmp_path):
    # SQuAD v1.1 normalises "Old bridge!" and "the old bridge" alike (articles, punctuation, case).
    assert xtreme_score("tydiqa", *_squad(tmp_path)) == {"exact_match": 50.0, "f1": 50.0}


def test_cli_prints_one_json_line_with_xtremes_keys(tmp_path, capsys):
    labels = _write(tmp_path / "l.tsv", [["B-PER", "I-PER", "O"]])
    pred = _write(tmp_path / "p.tsv", [["B-PER", "I-PER", "O"]])
    assert main(["eval", "xtreme-score", "--task", "panx", "--labels", str(labels), "--predictions", str(pred), "--lang", "de"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and json.loads(out[0]) == {"f1": 100.0, "precision": 100.0, "recall": 100.0}
    assert main(["eval", "xtreme-score", "--task", "panx", "--labels", str(labels), "--predictions", str(tmp_path / "none.tsv")]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == f"infoxlm: error: {tmp_path / 'none.tsv'}: no such file; expected a UTF-8 file of one label per line"


def test_without_seqeval_the_tagging_scores_name_the_extra(monkeypatch):
    import sys

    from infoxlm.errors import InfoXLMError
    from infoxlm.eval.xtreme_score import tagging_scores

    monkeypatch.setitem(sys.modules, "seqeval.metrics", None)  # import fails as if not installed
    with pytest.raises(InfoXLMError, match=r"pip install 'infoxlm\[xtreme\]'"):
        tagging_scores([["B-PER"]], [["B-PER"]])
