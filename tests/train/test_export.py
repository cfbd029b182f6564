"""A run's checkpoint as a Hugging Face directory (train/export.py), read while the run that
writes it goes on saving and removing checkpoints."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from infoxlm import Encoder, EncoderConfig
from infoxlm.cli import main
from infoxlm.train import export as export_module
from infoxlm.train.checkpoint import save_checkpoint


def save_step(run: Path, step: int) -> None:
    """A checkpoint of a 2-layer encoder whose every weight is the step; the newest one kept,
    as a run with run.keep_checkpoints=1 saves it."""
    encoder = Encoder(EncoderConfig.of_size("tiny", vocab_size=40))
    with torch.no_grad():
        for tensor in encoder.state_dict().values():
            if tensor.is_floating_point():
                tensor.fill_(float(step))
    state = {
        "step": step, "model": encoder.state_dict(),
        "encoder_config": json.dumps(dataclasses.asdict(encoder.config)), "config": json.dumps({"contrast": {"layer": 1}}),
    }  # fmt: skip
    save_checkpoint(run, step, state, keep=1)


@pytest.fixture
def rotating_run(tmp_path, monkeypatch) -> Path:
    """A run at step 1 that saves step 2 (removing step 1) while step 1 is being read."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"optim": {}, "run": {}, "contrast": {"layer": 1}}))
    save_step(run, 1)
    read = export_module.load_checkpoint

    def load_while_the_run_saves(directory, *args, **kwargs):
        if directory.name == "step-00000001":
            save_step(run, 2)
        return read(directory, *args, **kwargs)

    monkeypatch.setattr(export_module, "load_checkpoint", load_while_the_run_saves)
    return run


def test_a_checkpoint_replaced_while_read_is_passed_over_for_the_newest(rotating_run, tmp_path, capsys):
    """It was called damaged (its index gone) with "no older checkpoint is intact"."""
    assert main(["export", str(rotating_run), str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    step_1 = rotating_run / "checkpoints" / "step-00000001"
    assert err == (
        f"note: {step_1}: replaced by the newer step-00000002 while it was read (a run still training keeps only its "
        "newest checkpoints); exporting step-00000002\n"
    )
    assert out.startswith(f"exported {rotating_run} (run directory, checkpoint step 2) → ")
    weights = Encoder.from_pretrained(tmp_path / "out").embeddings.word_embeddings.weight
    assert torch.all(weights == 2.0)


def test_a_step_asked_for_and_replaced_while_read_names_the_newest(rotating_run, tmp_path, capsys):
    assert main(["export", str(rotating_run), str(tmp_path / "out"), "--step", "1"]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"infoxlm: error: {rotating_run / 'checkpoints' / 'step-00000001'}: replaced by the newer step-00000002 while it "
        "was read (a run still training keeps only its newest checkpoints); the newest is --step 2\n"
    )
    assert not (tmp_path / "out").exists()


def test_an_export_of_a_run_without_xlco_records_that_its_layer_was_never_contrasted(built_store, tmp_path):
    import contextlib
    import io

    from infoxlm.model.hub import CONTRASTED_KEY, UNCONTRASTED_LAYER, recorded_layer_rule
    from infoxlm.train import changed, preset, pretrain

    for name, xlco in (("with", 4), ("without", 0)):
        config = changed(preset("test"), optim={"max_steps": 1}, data={"xlco_batch_size": xlco}, run={"export_every": 1})
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            run = pretrain(config, built_store, tmp_path / name, progress=False)
            main(["export", str(run), str(tmp_path / f"{name}-model")])
        for model in (tmp_path / f"{name}-model", run / "exports" / "step-1"):  # infoxlm export, run.export_every
            fields = json.loads((model / "config.json").read_text())
            assert fields["infoxlm_contrast_layer"] == config.contrast.layer
            assert (fields.get(CONTRASTED_KEY) is False) is (xlco == 0)
            assert (recorded_layer_rule(model) == UNCONTRASTED_LAYER) is (xlco == 0)
