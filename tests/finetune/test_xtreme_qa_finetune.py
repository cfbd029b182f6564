"""XQuAD and TyDiQA-GoldP end to end on the shipped demo checkpoint: SQuAD-format files, the
SQuAD v1.1 metric, XTREME's predictions layout, and the selections each task allows."""

from __future__ import annotations

import json

import pytest

from infoxlm.cli import main
from infoxlm.eval.squad_metric import score_squad
from infoxlm.shipped import demo_checkpoint_dir

from finetune_formats import TYDIQA_NAMES, XQUAD_LANGUAGES, write_squad, write_tydiqa, write_xquad

SMALL = ["--batch-size", "8", "--max-length", "64", "--doc-stride", "32", "--no-progress", "--device", "cpu", "--no-save-model"]


def finetune(task: str, tmp_path, *extra: str) -> int:
    return main(["finetune", task, "--model", str(demo_checkpoint_dir()), "--output", str(tmp_path / "runs" / task), *SMALL, *extra])


def check_predictions(run_dir, task: str, test_files: dict) -> dict:
    """Every language's predictions file scores, with the SQuAD metric, what results.json says."""
    results = json.loads((run_dir / "results.json").read_text())
    run, = results["runs"]
    for lang, path in test_files.items():
        predictions = json.loads((run_dir / "predictions" / task / f"test-{lang}.json").read_text())
        assert score_squad(json.loads(path.read_text()), predictions).as_dict() == run["test"][lang]
    return results


@pytest.mark.slow
def test_xquad_trains_on_squad_and_scores_eleven_languages_with_the_squad_metric(tmp_path):
    train = write_squad(tmp_path / "squad", n_train=16, n_dev=4)
    xquad = write_xquad(tmp_path / "xquad", languages=XQUAD_LANGUAGES, n=2)
    assert finetune("xquad", tmp_path, "--train", str(train), "--data", str(xquad), "--max-steps", "6",
                    "--selection", "en-dev", "--epochs", "2") == 0
    results = check_predictions(tmp_path / "runs" / "xquad", "xquad", {lang: xquad / f"xquad.{lang}.json" for lang in XQUAD_LANGUAGES})
    assert results["data"]["dev"].endswith("squad/dev-v1.1.json")  # SQuAD's English dev, found beside --train
    assert results["config"]["warmup"] == "500" and results["config"]["weight_decay"] == 1e-4  # XTREME's QA row
    run, = results["runs"]
    assert [e["epoch"] for e in run["evaluations"]] == [1.0, 1.5]  # each epoch end; --max-steps cut epoch 2


@pytest.mark.slow
def test_tydiqa_trains_on_english_questions_and_tests_every_language(tmp_path):
    root = write_tydiqa(tmp_path / "tydiqa", languages=tuple(TYDIQA_NAMES), n_train=8)
    assert finetune("tydiqa", tmp_path, "--data", str(root), "--max-steps", "2") == 0
    files = {lang: root / "tydiqa-goldp-v1.1-dev" / f"tydiqa-goldp-dev-{name}.json" for lang, name in TYDIQA_NAMES.items()}
    results = check_predictions(tmp_path / "runs" / "tydiqa", "tydiqa", files)
    assert results["train_examples"] == 8  # the 4 Finnish training questions are left out
    assert results["selected_on"] == "the final model" and results["runs"][0]["evaluations"] == []


def test_selections_without_their_dev_files_are_refused_in_one_line(tmp_path, capsys):
    root = write_tydiqa(tmp_path / "tydiqa", languages=("en",), n_train=2)
    assert finetune("tydiqa", tmp_path, "--data", str(root), "--languages", "en", "--selection", "en-dev") != 0
    assert "English dev file is XTREME's English test set" in capsys.readouterr().err
    assert finetune("tydiqa", tmp_path, "--data", str(root), "--languages", "en", "--selection", "all-dev") != 0
    assert "tydiqa has no dev file per language" in capsys.readouterr().err
    train = write_squad(tmp_path / "squad", n_train=2)
    (tmp_path / "squad" / "dev-v1.1.json").unlink()
    xquad = write_xquad(tmp_path / "xquad", languages=("en",), n=1)
    assert finetune("xquad", tmp_path, "--train", str(train), "--data", str(xquad), "--languages", "en",
                    "--selection", "en-dev") != 0
    assert "no dev-v1.1.json; selection on the English dev set (en-dev) needs" in capsys.readouterr().err
    assert finetune("xquad", tmp_path, "--train", str(train), "--data", str(xquad), "--languages", "en", "fr") != 0
    assert "xquad language 'fr': expected one of ar de el" in capsys.readouterr().err


def test_an_empty_test_file_is_refused_before_training(tmp_path, capsys):
    train = write_squad(tmp_path / "squad", n_train=2)
    xquad = write_xquad(tmp_path / "xquad", languages=("en",), n=1)
    (xquad / "xquad.en.json").write_text(json.dumps({"version": "1.0", "data": []}))
    assert finetune("xquad", tmp_path, "--train", str(train), "--data", str(xquad), "--languages", "en") != 0
    err = capsys.readouterr().err
    assert "xquad.en.json: no questions; expected a SQuAD v1.1 file" in err and "step" not in err
