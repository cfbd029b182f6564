"""The official MLQA metric: normalisation per language, EM/F1, totals, the CLI's one JSON line.

Every expected value below is worked out by hand from the documented order
lowercase → punctuation → articles → tokens.
"""

from __future__ import annotations

import argparse
import json
import warnings

import pytest

from infoxlm.errors import InfoXLMError
from infoxlm.commands.eval_mlqa import add_mlqa_score_command
from infoxlm.eval.mlqa_metric import (
    MLQAScoreError,
    answer_tokens,
    evaluate_mlqa,
    exact_match_score,
    f1_score,
    normalize_answer,
    score_mlqa,
)


def squad(questions, version="1.0"):
    """A SQuAD v1.1-format object: questions = [(id, [gold answers])]."""
    qas = [
        {"id": qid, "question": "?", "answers": [{"text": g, "answer_start": 0} for g in golds]}
        for qid, golds in questions
    ]
    return {"version": version, "data": [{"title": "t", "paragraphs": [{"context": "c", "qas": qas}]}]}


@pytest.mark.parametrize(
    "lang, text, expected",
    [
        # en: case, ASCII and Unicode punctuation, articles as whole words only
        ("en", "The Eiffel Tower!", "eiffel tower"),
        ("en", "“A” theatre, an ant…", "theatre ant"),
        ("en", "hello—world", "helloworld"),  # a dash is removed, not replaced by a space
        ("en", "$100 and €100", "100 and €100"),  # $ is ASCII punctuation, € (Sc) is not
        ("en", "x+y=z | a~b", "xyz ab"),  # + = | ~ are in string.punctuation; "a~b" → "ab" before articles go
        ("en", "a-b", "ab"),
        # es: ¿ ¡ are punctuation; "los" inside "losa" stays
        ("es", "¿La Casa Blanca?", "casa blanca"),
        ("es", "Unos losas, El Niño", "losas niño"),
        # de: all twelve articles, „quotes“, but "dessen" stays
        ("de", "„Der Deutsche Bundestag“", "deutsche bundestag"),
        ("de", "dem Mann, dessen Hund", "mann dessen hund"),
        # vi: articles as whole words; "làm" keeps its "là"
        ("vi", "Những con mèo của tôi", "con mèo tôi"),
        ("vi", "là làm", "làm"),
        # ar: every "ال" goes, inside words too; Arabic comma and question mark are punctuation
        ("ar", "الكتاب", "كتاب"),
        ("ar", "فالكتاب، مال؟", "ف كتاب م"),
        # hi: no articles; the danda is punctuation; vowel signs (Mn/Mc) are kept
        ("hi", "नई दिल्ली।", "नई दिल्ली"),
        # zh: one token per CJK character, Latin/digit runs stay whole, full-width punctuation goes
        ("zh", "《北京大学》，", "北 京 大 学"),
        ("zh", "iPhone12手机", "iphone12 手 机"),
        ("zh", "第 2 次 World War", "第 2 次 world war"),
        ("zh", "a䶮b \u9fa6x", "a䶮b \u9fa6x"),  # outside U+4E00–U+9FA5: not split
        ("zh", "The 北京", "the 北 京"),  # no articles in zh
    ],
)
def test_normalize_answer(lang, text, expected):
    assert normalize_answer(text, lang) == expected


def test_chinese_f1_counts_characters_and_runs():
    assert answer_tokens("iPhone12手机", "zh") == ["iphone12", "手", "机"]
    # prediction iphone|12|手|机 vs gold iphone12|手|机: 2 shared, P = 2/4, R = 2/3, F1 = 4/7
    assert f1_score("iphone 12 手机", "iPhone12手机", "zh") == pytest.approx(4 / 7)
    assert f1_score("北京", "北京大学", "zh") == pytest.approx(2 / 3)
    assert exact_match_score("北 京", "北京", "zh")


@pytest.mark.parametrize(
    "lang, prediction, gold, em, f1",
    [
        ("en", "BERLIN.", "berlin", True, 1.0),
        ("en", "Apple", "an apple a day", False, 2 / 3),  # gold tokens apple, day
        ("en", "the atre", "theatre", False, 0.0),
        ("es", "Casa Blanca.", "la Casa Blanca", True, 1.0),
        ("de", "Bundestag", "der Deutsche Bundestag", False, 2 / 3),
        ("vi", "con mèo", "những con mèo", True, 1.0),
        ("ar", "كتاب", "فالكتاب", False, 2 / 3),  # gold tokens ف, كتاب
        ("ar", "م", "مال", True, 1.0),  # "مال" loses its "ال"
        ("hi", "दिल्ली", "नई दिल्ली", False, 2 / 3),
        ("zh", "北京大学", "北京大学。", True, 1.0),
        ("en", "the", "a", True, 0.0),  # both normalise to "": EM yes, F1 has nothing to share
        ("en", "the the", "the", True, 0.0),
        ("en", "x b b", "b b c", False, 2 / 3),  # bags: {b: 2} shared, P = R = 2/3
        ("en", "a b b", "b b c", False, 0.8),  # "a" is an article: P = 2/2, R = 2/3
    ],
)
def test_pair_scores(lang, prediction, gold, em, f1):
    assert exact_match_score(prediction, gold, lang) is em
    assert f1_score(prediction, gold, lang) == pytest.approx(f1)


def test_totals_take_the_best_gold_and_count_unanswered_as_zero():
    data = squad([
        ("q1", ["Paris", "the city of Paris"]),  # EM 1 via the second gold
        ("q2", ["an apple a day"]),  # F1 2/3
        ("q3", ["x"]),  # no prediction
        ("q4", ["Berlin"]),  # wrong
    ])
    predictions = {"q1": "City of Paris", "q2": "apple", "q4": "Rome", "extra": "ignored"}
    score = score_mlqa(data, predictions, "en")
    assert score.exact_match == pytest.approx(100 * 1 / 4)
    assert score.f1 == pytest.approx(100 * (1 + 2 / 3) / 4)
    assert score.total == 4 and score.unanswered == ["q3"]
    assert score.version_warning is None
    assert evaluate_mlqa(data, predictions, "en") == score.as_dict()


def test_the_float_sum_is_the_official_order():
    # The official script sums per question and divides once: keep that so the digits match.
    data = squad([(f"q{i}", ["a b c"]) for i in range(3)])
    predictions = {"q0": "b", "q1": "a b", "q2": "c d e"}
    f1s = [f1_score(predictions[f"q{i}"], "a b c", "en") for i in range(3)]
    total = 0
    for f in f1s:
        total += f
    assert evaluate_mlqa(data, predictions, "en")["f1"] == 100.0 * total / 3


def test_version_other_than_1_0_warns_but_scores():
    data = squad([("q1", ["x"])], version="1.1")
    with pytest.warns(UserWarning, match="expects v-1.0, but got dataset with v-1.1"):
        assert evaluate_mlqa(data, {"q1": "x"}, "en") == {"exact_match": 100.0, "f1": 100.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        evaluate_mlqa(squad([("q1", ["x"])], version=1.0), {"q1": "x"}, "en")  # str(1.0) == "1.0"


@pytest.mark.parametrize(
    "data, predictions, lang, message",
    [
        (squad([("q1", ["x"])]), {"q1": "x"}, "fr", "language 'fr'"),
        (squad([("q1", ["x"])]), {"q1": 3}, "en", "id 'q1': expected an answer string"),
        (squad([("q1", ["x"])]), ["x"], "en", "expected a JSON object"),
        ({"version": "1.0"}, {}, "en", "expected a SQuAD v1.1 object"),
        (squad([]), {}, "en", "no questions"),
        (squad([("q1", [])]), {"q1": "x"}, "en", "no gold answers"),
    ],
)
def test_unscorable_input_is_a_clear_error(data, predictions, lang, message):
    with pytest.raises(MLQAScoreError, match=message):
        evaluate_mlqa(data, predictions, lang)


def run_cli(*argv):
    parser = argparse.ArgumentParser()
    add_mlqa_score_command(parser.add_subparsers())
    args = parser.parse_args(["mlqa-score", *argv])
    return args.func(args)


def test_cli_prints_one_json_line(tmp_path, capsys):
    data = tmp_path / "test-context-zh-question-zh.json"
    data.write_text(json.dumps(squad([("q1", ["北京大学"]), ("q2", ["上海"])]), ensure_ascii=False), encoding="utf-8")
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps({"q1": "北京"}, ensure_ascii=False), encoding="utf-8")
    assert run_cli("--data", str(data), "--predictions", str(predictions), "--lang", "zh") == 0
    out, err = capsys.readouterr()
    assert out.count("\n") == 1
    assert json.loads(out) == {"exact_match": 0.0, "f1": pytest.approx(100 * (2 / 3) / 2)}
    assert "1 of 2 questions have no prediction" in err


def test_cli_errors_name_the_file(tmp_path):
    data = tmp_path / "data.json"
    data.write_text(json.dumps(squad([("q1", ["x"])])))
    bad = tmp_path / "bad.json"
    bad.write_text('{"q1": "x",\n}')
    with pytest.raises(InfoXLMError, match=r"missing\.json: no such file; expected a prediction file"):
        run_cli("--data", str(data), "--predictions", str(tmp_path / "missing.json"), "--lang", "en")
    with pytest.raises(InfoXLMError, match=r"bad\.json:2:1: invalid JSON"):
        run_cli("--data", str(data), "--predictions", str(bad), "--lang", "en")
    with pytest.raises(InfoXLMError, match="language 'xx'"):
        run_cli("--data", str(data), "--predictions", str(bad), "--lang", "xx")
