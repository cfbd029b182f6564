"""The model card: front matter from the run's data, and what the run directory records."""

from __future__ import annotations

import json

from infoxlm.export.model_card import languages_of, write_model_card


def fake_run(root):
    root.mkdir()
    (root / "config.json").write_text(json.dumps({"model": {"init": "FacebookAI/xlm-roberta-base"}, "optim": {"max_steps": 10},
                                                   "data": {"enabled": ["mmlm", "tlm", "xlco"]}}))
    (root / "data.json").write_text(json.dumps({
        "store": "s", "alpha": 0.7,
        "mono": {"sw": {"tokens": 10, "probability": 0.4}, "zh-Hans": {"tokens": 20, "probability": 0.6}},
        "parallel": {"en-sw": {"tokens": 30, "probability": 1.0}},
    }))
    rows = [{"step": s, "loss/mmlm": 5.0 - s / 10, "xlco/accuracy": 0.5, "lr": 1e-4} for s in (5, 10)]
    (root / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 11, "loss')  # cut line
    (root / "tatoeba.json").write_text(json.dumps({"layer": 8, "pooling": "mean", "languages": {
        "swh": {"xx2en": 40.0, "en2xx": 30.0, "n": 100}}, "average": {"xx2en": 40.0, "en2xx": 30.0}}))
    (root / "checkpoints").mkdir()
    (root / "checkpoints" / "junk.json").write_text(json.dumps({"average": 1}))  # not an evaluation
    return root


def test_languages_come_from_both_pools():
    assert languages_of({"mono": {"de": {}}, "parallel": {"en-zh-Hans": {}, "en-sw": {}}}) == ["de", "en", "sw", "zh-Hans"]


def test_card_of_a_run(tmp_path):
    run = fake_run(tmp_path / "run")
    out = tmp_path / "out"
    out.mkdir()
    text = write_model_card(out, run_dir=run, step=10, license="apache-2.0").read_text()
    front, body = text.split("\n---\n", 1)
    assert front.splitlines() == [
        "---", "language:", "- en", "- sw", "- zh-Hans", "license: apache-2.0", "library_name: transformers",
        "pipeline_tag: fill-mask", "tags:", "- xlm-roberta", "- fill-mask", "- infoxlm", "- cross-lingual",
        'base_model: "FacebookAI/xlm-roberta-base"',
    ]
    for expected in ("Weights after step 10 of 10", "Objectives: MMLM, TLM, XLCO", "| en-sw | 30 | 1.000 |",
                     "| loss/mmlm | 4 |", "| xlco/accuracy | 0.5 |", "`tatoeba.json`", "| swh | 40.0 | 30.0 |"):
        assert expected in body, expected
    assert "junk.json" not in body


def test_card_of_a_converted_directory_takes_its_languages(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    (source / "README.md").write_text("---\nlanguage:\n- de\n- fr\nlicense: mit\n---\n# x\n")
    out = tmp_path / "out"
    out.mkdir()
    text = write_model_card(out, kind="sentence-similarity", source=source, layer=4, pooling="cls").read_text()
    assert "language:\n- de\n- fr\n" in text and "library_name: sentence-transformers" in text
    assert "hidden state 4" in text and "the `<s>` state" in text and "base_model" not in text
