"""MLQA end to end: SQuAD v1.1 training file, MLQA test files, official scores, predictions files."""

from __future__ import annotations

import json

import pytest

from infoxlm.cli import main
from infoxlm.eval.mlqa_data import MLQADataError
from infoxlm.finetune.qa import run_mlqa
from infoxlm.finetune.training import FinetuneConfig, FinetuneError

from finetune_formats import toy_squad, write_mlqa


@pytest.mark.slow
def test_tiny_mlqa_run_learns_and_scores_every_language_pair(tiny_model_dir, tmp_path):
    train = tmp_path / "train-v1.1.json"
    train.write_text(json.dumps(toy_squad(24, seed=0)), encoding="utf-8")
    mlqa = write_mlqa(tmp_path / "MLQA_V1", languages=("en", "de"), n=4)
    config = FinetuneConfig(lr=1e-2, batch_size=8, epochs=6, warmup="10%", selection="last", seed=0)
    results = run_mlqa(tiny_model_dir, train, mlqa, tmp_path / "run", config, languages=["en", "de"],
                       cross_language=True, max_length=96, doc_stride=48, progress=False, log=lambda _: None)
    run, = results["runs"]
    losses = run["train_loss"]["per_step"]
    assert sum(losses[-4:]) / 4 < 0.6 * sum(losses[:4]) / 4
    assert set(run["test"]) == {"en", "de"} and all(set(s) == {"f1", "exact_match"} for s in run["test"].values())
    assert run["average_f1"] == pytest.approx((run["test"]["en"]["f1"] + run["test"]["de"]["f1"]) / 2)
    assert run["transfer_gap_f1"] == pytest.approx(run["test"]["en"]["f1"] - run["test"]["de"]["f1"])
    assert set(run["cross_language"]["f1"]["en"]) == {"en", "de"}
    assert run["cross_language"]["f1"]["de"]["de"] == run["test"]["de"]["f1"]
    predictions = json.loads((tmp_path / "run" / "seed-0" / "predictions" / "test-context-de-question-en.json").read_text())
    assert len(predictions) == 4 and all(isinstance(v, str) for v in predictions.values())
    assert (tmp_path / "run" / "seed-0" / "model" / "model.safetensors").is_file()
    assert "| run | en | es |" not in (tmp_path / "run" / "results.md").read_text()
    assert "F1 (%) per context language" in (tmp_path / "run" / "results.md").read_text()


def test_missing_mlqa_file_is_named(tiny_model_dir, tmp_path):
    train = tmp_path / "train.json"
    train.write_text(json.dumps(toy_squad(2, seed=0)), encoding="utf-8")
    write_mlqa(tmp_path / "MLQA_V1", languages=("en",), n=1)
    config = FinetuneConfig(lr=1e-3, batch_size=2, epochs=1, selection="last")
    with pytest.raises(MLQADataError, match="no test-context-hi-question-hi.json"):
        run_mlqa(tiny_model_dir, train, tmp_path / "MLQA_V1", tmp_path / "run", config, languages=["en", "hi"], progress=False)
    with pytest.raises(MLQADataError, match="MLQA language 'fr'"):
        run_mlqa(tiny_model_dir, train, tmp_path / "MLQA_V1", tmp_path / "run", config, languages=["fr"], progress=False)


def test_an_answer_start_that_disagrees_with_the_answer_is_named_and_skipped(tiny_model_dir, tmp_path, capsys):
    squad = toy_squad(4, seed=0)
    qa = squad["data"][0]["paragraphs"][1]["qas"][0]
    qa["answers"][0]["answer_start"] += 1  # points one character past "old bridge"
    train = tmp_path / "train.json"
    train.write_text(json.dumps(squad), encoding="utf-8")
    mlqa = write_mlqa(tmp_path / "MLQA_V1", languages=("en",), n=1)
    code = main(["finetune", "mlqa", "--model", str(tiny_model_dir), "--train", str(train), "--data", str(mlqa),
                 "--languages", "en", "--output", str(tmp_path / "run"), "--max-steps", "1", "--batch-size", "2",
                 "--max-length", "64", "--doc-stride", "32", "--no-save-model", "--no-progress", "--device", "cpu"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    warning = (f"warning: {train}: question 'q1': answer_start {qa['answers'][0]['answer_start']} reads 'ld bridge.', "
               "but the answer text is 'old bridge'; the question is skipped")
    assert warning in captured.err.splitlines(), captured.err
    assert "1 skipped" in captured.out


def test_a_training_file_whose_every_answer_is_misplaced_is_refused(tiny_model_dir, tmp_path):
    squad = toy_squad(2, seed=0)
    for paragraph in squad["data"][0]["paragraphs"]:
        paragraph["qas"][0]["answers"][0]["answer_start"] = 0
    train = tmp_path / "train.json"
    train.write_text(json.dumps(squad), encoding="utf-8")
    write_mlqa(tmp_path / "MLQA_V1", languages=("en",), n=1)
    config = FinetuneConfig(lr=1e-3, batch_size=2, epochs=1, selection="last")
    with pytest.raises(FinetuneError, match=rf"{train}: none of its 2 training questions has an answer at its "
                       "answer_start; expected SQuAD v1.1 training data"):
        run_mlqa(tiny_model_dir, train, tmp_path / "MLQA_V1", tmp_path / "run", config, languages=["en"],
                 progress=False, log=lambda _: None)
    assert not (tmp_path / "run").exists()


def test_en_dev_selection_needs_only_the_english_dev_file(tiny_model_dir, tmp_path):
    train = tmp_path / "train.json"
    train.write_text(json.dumps(toy_squad(4, seed=0)), encoding="utf-8")
    mlqa = write_mlqa(tmp_path / "MLQA_V1", languages=("en", "de"), n=1)
    (mlqa / "dev" / "dev-context-de-question-de.json").unlink()
    base = ["finetune", "mlqa", "--model", str(tiny_model_dir), "--train", str(train), "--data", str(mlqa), "--languages",
            "en", "de", "--batch-size", "2", "--max-length", "64", "--doc-stride", "32", "--no-save-model",
            "--no-progress", "--device", "cpu", "--epochs", "1"]
    assert main([*base, "--selection", "en-dev", "--output", str(tmp_path / "en")]) == 0
    run, = json.loads((tmp_path / "en" / "results.json").read_text())["runs"]
    assert set(run["dev_f1"]) == {"en"} and run["evaluations"]
    assert main([*base, "--selection", "all-dev", "--output", str(tmp_path / "all")]) != 0  # de's dev file is missing
