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


def test_card_says_the_sampling_unit_the_run_had(tmp_path):
    run = fake_run(tmp_path / "run")
    out = tmp_path / "out"
    out.mkdir()
    # a run from before data.json recorded the unit: its config says it
    assert "p ∝ (n/N)^0.7." in write_model_card(out, run_dir=run).read_text()  # neither says: no unit claimed
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "data": {**config["data"], "sampling_unit": "instances"}}))
    text = write_model_card(out, run_dir=run).read_text()
    assert "p ∝ (n/N)^0.7, n in lines (monolingual) and pairs (parallel)." in text and "n in tokens" not in text
    data = json.loads((run / "data.json").read_text())
    (run / "data.json").write_text(json.dumps({**data, "sampling_unit": "tokens"}))
    assert "p ∝ (n/N)^0.7, n in tokens." in write_model_card(out, run_dir=run).read_text()


def test_a_sentence_transformers_card_counts_the_layers_it_keeps_of_the_runs(tmp_path, tiny_model_dir):
    """'keeps the first 1 layers' named neither the singular nor the run's depth."""
    from infoxlm import Encoder, Tokenizer
    from infoxlm.export.sentence_transformers import write_sentence_transformers

    encoder = Encoder.from_pretrained(tiny_model_dir)
    assert encoder.num_layers == 2
    run = fake_run(tmp_path / "run")
    for layer, kept in ((1, "the encoder's first layer of 2"), (2, "the encoder's first 2 layers of 2")):
        out = tmp_path / f"st-{layer}"
        write_sentence_transformers(encoder, Tokenizer.from_pretrained(tiny_model_dir), out, layer=layer)
        text = write_model_card(out, kind="sentence-similarity", run_dir=run, layer=layer, pooling="mean").read_text()
        assert f"The directory keeps {kept}, so its output is hidden state {layer}" in text
        assert "Encoder: 2 layers, hidden size" in text  # the run's encoder, not the cut copy
    assert "first 1 layers" not in (tmp_path / "st-1" / "README.md").read_text()


def test_the_cards_sentence_vectors_load_cleanly_in_transformers_and_equal_infoxlms(tmp_path, tiny_run, transformers):
    import re

    import numpy as np
    import torch

    from infoxlm.cli import main
    from infoxlm.embedding import embed

    out = tmp_path / "model"
    assert main(["export", str(tiny_run), str(out)]) == 0
    card = (out / "README.md").read_text()
    assert "hidden state 2 (the contrast layer the model records)" in card
    snippet = re.findall(r"```python\n(.*?)```", card, re.S)
    scope: dict = {}
    exec(snippet[0].replace('"model"', repr(str(out))), scope)  # noqa: S102 (the card's own code)
    with torch.no_grad():
        exec(snippet[1].replace('"model"', repr(str(out))), scope)  # noqa: S102
    _, info = transformers.AutoModel.from_pretrained(out, add_pooling_layer=False, output_loading_info=True)
    assert not info["missing_keys"]  # nothing left at a fresh initialisation
    ours = embed(out, ["Hello world.", "Hallo Welt."], device="cpu")
    np.testing.assert_allclose(scope["vectors"].numpy(), ours, rtol=1e-4, atol=1e-5)
