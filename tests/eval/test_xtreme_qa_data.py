"""XQuAD and TyDiQA-GoldP files: released and XTREME-renamed layouts, English training questions."""

from __future__ import annotations

import json

import pytest

from infoxlm.eval.xtreme_qa_data import XtremeQADataError, read_tydiqa_english_train, tydiqa_test_file, xquad_file



def toy_squad(n, seed=0, prefix="q"):
    """SQuAD v1.1 JSON with n one-question paragraphs, ids prefix0 … prefix{n-1}."""
    context = "We walked to the old bridge."
    paragraphs = [{"context": context, "qas": [{"id": f"{prefix}{i}", "question": "Where?",
                                                  "answers": [{"text": "old bridge", "answer_start": 17}]}]} for i in range(n)]
    return {"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}


def write_tydiqa(root, languages=("en",), n_train=4):
    """TyDiQA-GoldP as released: the all-language training file (n English, n // 2 Finnish
    questions) and tydiqa-goldp-v1.1-dev/tydiqa-goldp-dev-{name}.json."""
    names = {"en": "english", "fi": "finnish"}
    train = toy_squad(n_train, prefix="english--1234-")
    train["data"] += toy_squad(n_train // 2, prefix="finnish--5678-")["data"]
    (root / "tydiqa-goldp-v1.1-dev").mkdir(parents=True)
    (root / "tydiqa-goldp-v1.1-train.json").write_text(json.dumps(train))
    for lang in languages:
        (root / "tydiqa-goldp-v1.1-dev" / f"tydiqa-goldp-dev-{names[lang]}.json").write_text(json.dumps(toy_squad(2)))
    return root


def write_xquad(root, languages=("en",)):
    root.mkdir(parents=True)
    for lang in languages:
        (root / f"xquad.{lang}.json").write_text(json.dumps(toy_squad(2, prefix=lang)))
    return root


def test_tydiqa_trains_on_its_english_questions_only(tmp_path):
    root = write_tydiqa(tmp_path / "tydiqa", languages=("en", "fi"), n_train=6)
    path, questions = read_tydiqa_english_train(root)
    assert path.name == "tydiqa-goldp-v1.1-train.json"
    assert len(questions) == 6 and all(q.id.startswith("english-") for q in questions)  # the 3 Finnish left out


def test_tydiqa_reads_xtremes_renamed_files_too(tmp_path):
    root = tmp_path / "tydiqa"
    (root / "tydiqa-goldp-v1.1-dev").mkdir(parents=True)
    (root / "tydiqa-goldp-v1.1-dev" / "tydiqa.goldp.sw.dev.json").write_text(json.dumps(toy_squad(1)))
    (root / "tydiqa-goldp-v1.1-train").mkdir()
    (root / "tydiqa-goldp-v1.1-train" / "tydiqa.goldp.en.train.json").write_text(json.dumps(toy_squad(2)))
    assert tydiqa_test_file(root, "sw").name == "tydiqa.goldp.sw.dev.json"
    assert len(read_tydiqa_english_train(root)[1]) == 2


def test_missing_files_are_named(tmp_path):
    root = write_tydiqa(tmp_path / "tydiqa", languages=("en",))
    with pytest.raises(XtremeQADataError, match="no tydiqa-goldp-dev-telugu.json or tydiqa.goldp.te.dev.json"):
        tydiqa_test_file(root, "te")
    with pytest.raises(XtremeQADataError, match="no tydiqa-goldp-v1.1-train.json"):
        read_tydiqa_english_train(tmp_path)
    no_english = tmp_path / "other"
    no_english.mkdir()
    (no_english / "tydiqa-goldp-v1.1-train.json").write_text(json.dumps(toy_squad(2, prefix="finnish-1-")))
    with pytest.raises(XtremeQADataError, match="no English training question"):
        read_tydiqa_english_train(no_english)
    write_xquad(tmp_path / "xquad", languages=("en",))
    with pytest.raises(XtremeQADataError, match="no xquad.th.json"):
        xquad_file(tmp_path / "xquad", "th")
