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
    # a set of two languages, without --languages (all 15 by default): the error names the way out
    assert "no ar examples; it has de en: name those with --languages de en" in error_of(
        capsys, *base, "--setting", "cross-lingual-transfer")
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


@pytest.mark.parametrize("earlier", [False, True], ids=["new", "over an earlier run"])
def test_finetune_that_fills_the_disk_takes_back_what_it_added(tiny_model_dir, tmp_path, capsys, monkeypatch, earlier):
    """safetensors' own error while seed 1's model is written: the line names that model, what
    the command added to --output is gone (all of it, if it made --output) and every file left
    is whole: an earlier run's results stay, its seed 0 model replaced by a complete one."""
    from full_disk import partial_then
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    import infoxlm.finetune.heads as heads

    data = write_xnli(tmp_path / "data", n_train=4, n_eval=2)
    out = tmp_path / "runs" / "xnli"
    args = ["finetune", "xnli", "--model", str(tiny_model_dir), "--data", str(data), "--output", str(out),
            "--setting", "cross-lingual-transfer", "--languages", "en", "de", "--max-steps", "1", "--no-progress"]
    if earlier:
        assert main(args) == 0
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    results = (out / "results.json").read_bytes() if earlier else None
    real_save_file, saved = heads.save_file, []

    def save_file(tensors, path, **kwargs):  # seed 0's model fits, seed 1's does not
        if saved:
            no_space = SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
            partial_then(no_space, 1)(tensors, path)
        saved.append(path)
        return real_save_file(tensors, path, **kwargs)

    monkeypatch.setattr(heads, "save_file", save_file)
    err = error_of(capsys, *args, "--seeds", "2")
    assert err == f"infoxlm: error: no space left on device while writing {out / 'seed-1' / 'model'}"
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    if earlier:
        assert (out / "results.json").read_bytes() == results
        assert load_file(out / "seed-0" / "model" / "model.safetensors")  # whole: it reads
