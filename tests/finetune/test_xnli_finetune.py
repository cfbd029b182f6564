"""XNLI end to end on tiny files in the official formats: loaders, #M=1 selection, results files."""

from __future__ import annotations

import json

import pytest

from infoxlm import Tokenizer
from infoxlm.cli import main
from infoxlm.eval.xnli_data import NLIExample, XNLIDataError
from infoxlm.finetune.classification import encode_pairs, load_xnli_data, run_xnli
from infoxlm.finetune.training import FinetuneConfig, FinetuneError

from finetune_formats import write_xnli


def test_settings_pick_the_training_files(tmp_path):
    write_xnli(tmp_path, languages=("en", "de"), n_train=5, n_eval=3)
    xlt = load_xnli_data(tmp_path, "cross-lingual-transfer", ["en", "de"])
    assert len(xlt.train) == 5 and "multinli.train.en.tsv" in xlt.sources["train"]
    assert "multinli.train.de.tsv" not in xlt.sources["train"]
    assert set(xlt.dev) == set(xlt.test) == {"en", "de"} and len(xlt.test["de"]) == 3
    tta = load_xnli_data(tmp_path, "translate-train-all", ["en", "de"], max_train_examples=2)
    assert len(tta.train) == 4 and all(isinstance(x, NLIExample) for x in tta.train)
    with pytest.raises(FinetuneError, match="setting 'zero-shot'"):
        load_xnli_data(tmp_path, "zero-shot")
    with pytest.raises(XNLIDataError, match="multinli.train.fr.tsv: missing XNLI-MT-1.0 training file for fr"):
        load_xnli_data(tmp_path, "translate-train-all", ["en", "fr"])
    with pytest.raises(XNLIDataError, match="XNLI language 'jp'"):
        load_xnli_data(tmp_path, "cross-lingual-transfer", ["jp"])


def test_pairs_are_xlmr_pairs_truncated_longest_first(tiny_model_dir):
    tok = Tokenizer.from_pretrained(tiny_model_dir)
    (ids, label), = encode_pairs(tok, [NLIExample("The cat sleeps.", "Open it.", 2)], max_length=128)
    a, b = tok.encode("The cat sleeps.", add_special_tokens=False), tok.encode("Open it.", add_special_tokens=False)
    assert ids == [0, *a, 2, 2, *b, 2] and label == 2
    (short, _), = encode_pairs(tok, [NLIExample("The cat sleeps on the warm sofa.", "Open it.", 0)], max_length=12)
    assert len(short) == 12 and short[-1] == 2
    assert short[short.index(2) + 2:-1] == b[:len(short[short.index(2) + 2:-1])]


@pytest.mark.slow
def test_tiny_xnli_run_learns_and_writes_results(tiny_model_dir, tmp_path):
    data = write_xnli(tmp_path / "data", languages=("en", "de"), n_train=48, n_eval=12)
    config = FinetuneConfig(lr=1e-2, batch_size=8, epochs=6, warmup="2", eval_every=10, seed=3)
    results = run_xnli(tiny_model_dir, data, "cross-lingual-transfer", tmp_path / "run", config, seeds=2,
                       languages=["en", "de"], progress=False, log=lambda _: None)
    for run in results["runs"]:
        losses = run["train_loss"]["per_step"]
        assert len(losses) == 36
        assert sum(losses[-6:]) / 6 < 0.6 * sum(losses[:6]) / 6  # the toy task is learnable
        # evaluations every 10 steps and at each epoch end (every 6); the selected one is the best
        assert [e["step"] for e in run["evaluations"]] == [6, 10, 12, 18, 20, 24, 30, 36]
        best = max(run["evaluations"], key=lambda e: e["dev_average"])
        assert run["selected_step"] == best["step"] and run["dev_average"] == best["dev_average"]
        assert run["transfer_gap"] == pytest.approx(run["test"]["en"] - run["test"]["de"])
    assert results["seeds"] == [3, 4]
    assert results["mean"]["test_average"] == pytest.approx(sum(r["test_average"] for r in results["runs"]) / 2)
    assert json.loads((tmp_path / "run" / "results.json").read_text())["mean"] == results["mean"]
    md = (tmp_path / "run" / "results.md").read_text()
    assert "| run | en | de | Avg | gap |" in md and "**mean of 2**" in md
    assert (tmp_path / "run" / "seed-3" / "model" / "model.safetensors").is_file()
    assert (tmp_path / "run" / "seed-4" / "model" / "tokenizer.json").is_file()


def test_finetune_on_hf_xnli_offline_and_not_cached_says_so_in_one_line(tiny_model_dir, tmp_path, offline_hub, capsys):
    from infoxlm.cli import main

    args = ["finetune", "xnli", "--model", str(tiny_model_dir), "--data", "hf:xnli", "--setting", "cross-lingual-transfer",
            "--output", str(tmp_path / "run")]
    assert main(args) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"infoxlm: error: hf:xnli (config 'en', split 'train'): not in the local cache ({offline_hub}) and offline "
        "(HF_DATASETS_OFFLINE is set); expected a dataset downloaded before, with network access"
    )


def test_selection_reads_the_english_dev_set_only_or_none(tiny_model_dir, tmp_path, capsys):
    data = write_xnli(tmp_path / "data", languages=("en", "de"), n_train=8, n_eval=4)
    base = ["finetune", "xnli", "--model", str(tiny_model_dir), "--data", str(data), "--setting", "cross-lingual-transfer",
            "--batch-size", "4", "--epochs", "2", "--no-progress", "--device", "cpu", "--no-save-model"]
    assert main([*base, "--languages", "en", "de", "--selection", "en-dev", "--output", str(tmp_path / "en")]) == 0
    run, = json.loads((tmp_path / "en" / "results.json").read_text())["runs"]
    assert set(run["dev"]) == {"en"} and [e["epoch"] for e in run["evaluations"]] == [1.0, 2.0]
    assert (tmp_path / "en" / "predictions" / "xnli" / "test-de.tsv").read_text().splitlines()[0] in (
        "entailment", "neutral", "contradiction")
    assert main([*base, "--languages", "de", "--selection", "last", "--output", str(tmp_path / "last")]) == 0
    run, = json.loads((tmp_path / "last" / "results.json").read_text())["runs"]
    assert run["evaluations"] == [] and run["selected_step"] == 4
    assert main([*base, "--languages", "de", "--selection", "en-dev", "--output", str(tmp_path / "no-en")]) != 0
    assert "selection on the en dev set, but no en dev data was read" in capsys.readouterr().err
