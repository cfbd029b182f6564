"""MLQA / SQuAD v1.1 files → flat examples; MLQA's file naming and layout; clear errors."""

from __future__ import annotations

import json

import pytest

from infoxlm.eval.mlqa_data import (
    MLQADataError,
    QAExample,
    find_mlqa_file,
    load_mlqa,
    mlqa_file_name,
    read_json,
    read_squad,
)

CONTEXT = "Der Bundestag tagt in Berlin. Berlin ist groß."
DATA = {
    "version": "1.0",
    "data": [
        {
            "title": "Bundestag",
            "paragraphs": [
                {
                    "context": CONTEXT,
                    "qas": [
                        {"id": "a1", "question": "Wo tagt er?", "answers": [{"text": "Berlin", "answer_start": 22}]},
                        {"id": "a2", "question": "Wer tagt?", "answers": [
                            {"text": "Der Bundestag", "answer_start": 0}, {"text": "Bundestag", "answer_start": 4},
                        ]},
                    ],
                },
                {"context": "Zweiter Absatz.", "qas": [
                    {"id": "b1", "question": "Was?", "answers": [{"text": "Absatz", "answer_start": 8}]},
                ]},
            ],
        }
    ],
}


def test_flat_examples_in_file_order(tmp_path):
    path = tmp_path / "test" / "test-context-de-question-de.json"
    path.parent.mkdir()
    path.write_text(json.dumps(DATA, ensure_ascii=False), encoding="utf-8")
    examples = load_mlqa(tmp_path, "test", "de")
    assert [e.id for e in examples] == ["a1", "a2", "b1"]
    assert examples[1] == QAExample(
        "a2", "Bundestag", CONTEXT, "Wer tagt?", ("Der Bundestag", "Bundestag"), (0, 4)
    )
    for e in examples:
        for text, start in zip(e.answers, e.answer_starts):
            assert e.context[start:start + len(text)] == text
    assert read_squad(path) == examples


def test_mlqa_file_names_and_layout(tmp_path):
    assert mlqa_file_name("test", "zh") == "test-context-zh-question-zh.json"
    assert mlqa_file_name("dev", "ar", "en") == "dev-context-ar-question-en.json"
    (tmp_path / "dev-context-hi-question-hi.json").write_text("{}")
    assert find_mlqa_file(tmp_path, "dev", "hi") == tmp_path / "dev-context-hi-question-hi.json"
    with pytest.raises(MLQADataError, match="no test-context-vi-question-vi.json"):
        find_mlqa_file(tmp_path, "test", "vi")
    with pytest.raises(MLQADataError, match="context language 'fr'"):
        mlqa_file_name("test", "fr")
    with pytest.raises(MLQADataError, match="split 'train'"):
        mlqa_file_name("train", "en")


def test_malformed_files_are_clear_errors(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"version": "1.0",\n "data": [}\n')
    with pytest.raises(MLQADataError, match=r"bad\.json:2:11: invalid JSON"):
        read_squad(bad_json)
    with pytest.raises(MLQADataError, match=r"missing\.json: no such file; expected a JSON file$"):
        read_json(tmp_path / "missing.json")
    with pytest.raises(MLQADataError, match=f"{tmp_path}: is a directory; expected a SQuAD/MLQA JSON file$"):
        read_squad(tmp_path)
    (tmp_path / "latin1.json").write_bytes(b'{"data": "caf\xe9"}')
    with pytest.raises(MLQADataError, match=r"latin1\.json:1:14: not UTF-8 \(byte 0xe9\); expected a SQuAD/MLQA JSON file$"):
        read_squad(tmp_path / "latin1.json")
    missing_id = json.loads(json.dumps(DATA))
    del missing_id["data"][0]["paragraphs"][1]["qas"][0]["id"]
    (tmp_path / "noid.json").write_text(json.dumps(missing_id))
    with pytest.raises(MLQADataError, match=r"noid\.json: data\[0\]\.paragraphs\[1\]\.qas\[0\]: expected 'id' to be a str"):
        read_squad(tmp_path / "noid.json")
    outside = json.loads(json.dumps(DATA))
    outside["data"][0]["paragraphs"][1]["qas"][0]["answers"][0]["answer_start"] = 99
    (tmp_path / "outside.json").write_text(json.dumps(outside))
    with pytest.raises(MLQADataError, match="answer_start 99 is outside the context"):
        read_squad(tmp_path / "outside.json")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(MLQADataError, match="expected a SQuAD v1.1 object"):
        read_squad(tmp_path / "list.json")
