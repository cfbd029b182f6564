"""`infoxlm finetune`: bad input → exit 1 with one line naming the file / value / what was expected."""

from __future__ import annotations

import json
import shutil

import pytest

from infoxlm.cli import main

from finetune_formats import write_xnli


def error_of(capsys, *argv):
    code = main(list(argv))
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    return err


def test_finetune_errors(tiny_model_dir, tmp_path, capsys):
    data = write_xnli(tmp_path / "data", n_train=4, n_eval=2)
    base = ["finetune", "xnli", "--model", str(tiny_model_dir), "--data", str(data), "--output", str(tmp_path / "run")]
    assert "setting 'zero-shot': expected one of cross-lingual-transfer, translate-train-all" in error_of(
        capsys, *base, "--setting", "zero-shot")
    assert "XNLI language 'jp'" in error_of(capsys, *base, "--setting", "cross-lingual-transfer", "--languages", "jp")
    (data / "XNLI-1.0" / "xnli.test.tsv").unlink()
    assert "no XNLI-1.0 test file xnli.test.tsv" in error_of(capsys, *base, "--setting", "cross-lingual-transfer")
    no_tokenizer = tmp_path / "no-tokenizer"
    no_tokenizer.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_model_dir / name, no_tokenizer / name)
    err = error_of(capsys, "finetune", "mlqa", "--model", str(no_tokenizer), "--train", str(tmp_path / "t.json"),
                   "--data", str(tmp_path), "--output", str(tmp_path / "r"))
    assert "holds neither tokenizer.json nor sentencepiece.bpe.model" in err
    err = error_of(capsys, "finetune", "mlqa", "--model", str(tiny_model_dir), "--train", str(tmp_path / "t.json"),
                   "--data", str(tmp_path), "--output", str(tmp_path / "r"), "--languages", "en")
    assert "no test-context-en-question-en.json" in err
    assert "warmup '5x'" in error_of(capsys, *base, "--setting", "cross-lingual-transfer", "--warmup", "5x")


@pytest.mark.slow
def test_finetune_takes_a_run_directory_and_names_it(tiny_run, tmp_path, capsys):
    data = write_xnli(tmp_path / "data", n_train=4, n_eval=2)
    assert main(["finetune", "xnli", "--model", str(tiny_run), "--step", "1", "--data", str(data), "--output",
                 str(tmp_path / "ft"), "--setting", "cross-lingual-transfer", "--languages", "en", "de", "--max-steps", "1",
                 "--no-save-model", "--no-progress"]) == 0
    name = f"{tiny_run} (run directory, checkpoint step 1)"
    assert f"[xnli] {name}: fine-tuning all 2 layers" in capsys.readouterr().out
    assert json.loads((tmp_path / "ft" / "results.json").read_text())["model"] == name  # not a temporary copy
