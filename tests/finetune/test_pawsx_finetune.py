"""PAWS-X end to end on the shipped demo checkpoint: x-final files, XTREME's predictions layout."""

from __future__ import annotations

import json

import pytest

from infoxlm.cli import main
from infoxlm.shipped import demo_checkpoint_dir

from finetune_formats import PAWSX_LANGUAGES, write_pawsx


def finetune(tmp_path, *extra: str) -> int:
    return main(["finetune", "pawsx", "--model", str(demo_checkpoint_dir()), "--data", str(tmp_path / "PAWSX"),
                 "--output", str(tmp_path / "run"), "--batch-size", "8", "--max-length", "48", "--no-progress",
                 "--device", "cpu", "--no-save-model", *extra])


@pytest.mark.slow
def test_pawsx_run_selects_on_english_dev_each_epoch_and_writes_xtreme_predictions(tmp_path):
    write_pawsx(tmp_path / "PAWSX", languages=PAWSX_LANGUAGES, n_train=16, n_eval=6)
    assert finetune(tmp_path, "--epochs", "3", "--lr", "1e-4", "--seeds", "2") == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["task"] == "pawsx" and results["languages"] == list(PAWSX_LANGUAGES)
    assert results["config"]["lr"] == 1e-4 and results["config"]["epochs"] == 3.0
    assert results["config"]["warmup"] == "0" and results["max_length"] == 48  # XTREME's row, --max-length over it
    run = results["runs"][0]
    assert [e["epoch"] for e in run["evaluations"]] == [1.0, 2.0, 3.0]  # after each epoch, on English dev
    assert set(run["dev"]) == {"en"}
    best = max(run["evaluations"], key=lambda e: e["dev_average"])  # the first among equals
    assert run["selected_step"] == best["step"] and run["dev_average"] == best["dev_average"]
    assert set(results["std"]) == {"test_average"} and results["seeds"] == [0, 1]
    for lang in PAWSX_LANGUAGES:
        lines = (tmp_path / "run" / "predictions" / "pawsx" / f"test-{lang}.tsv").read_text().splitlines()
        gold = [line.split("\t")[3] for line in (tmp_path / "PAWSX" / lang / "test_2k.tsv").read_text().splitlines()[1:]]
        assert len(lines) == 6 and set(lines) <= {"0", "1"}
        assert 100.0 * sum(p == g for p, g in zip(lines, gold)) / 6 == pytest.approx(run["test"][lang])
    assert "std over seeds" in (tmp_path / "run" / "results.md").read_text()


def test_bad_pawsx_inputs_are_one_line(tmp_path, capsys):
    write_pawsx(tmp_path / "PAWSX", languages=("en", "de"), n_train=4, n_eval=2)
    assert finetune(tmp_path, "--languages", "en", "de", "--max-steps", "1", "--setting", "translate-train-all") == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["train_examples"] == 8  # en/train.tsv and de/translated_train.tsv
    bad = tmp_path / "PAWSX" / "de" / "test_2k.tsv"
    bad.write_text(bad.read_text() + "9\ta\tb\tyes\n", encoding="utf-8")
    assert finetune(tmp_path, "--languages", "de") != 0
    err = capsys.readouterr().err
    assert "de/test_2k.tsv:4: label 'yes': expected 0 or 1" in err and "Traceback" not in err
    (tmp_path / "PAWSX" / "en" / "dev_2k.tsv").unlink()
    assert finetune(tmp_path, "--languages", "en", "--max-steps", "1") != 0
    assert "en/dev_2k.tsv: missing PAWS-X dev file for en" in capsys.readouterr().err
