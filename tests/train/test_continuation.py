"""`infoxlm pretrain --init`: the presets that continue a model refuse to start without one, and
a model that records its contrast layer hands it to the run (train/continuation.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from infoxlm.cli import main
from infoxlm.model.hub import record_contrast_layer
from infoxlm.train.checkpoint import save_checkpoint
from infoxlm.train.continuation import CONTINUING_PRESETS, from_scratch_command, recorded_contrast_layer
from infoxlm.train.presets import preset

from training_stores import build_store


@pytest.fixture
def recording_model(tiny_model_dir, tmp_path):
    """The tiny model (2 layers) recording contrast layer 2, as `infoxlm export` writes it; the
    test preset contrasts on layer 1."""
    model = shutil.copytree(tiny_model_dir, tmp_path / "model")
    record_contrast_layer(model, 2)
    return model


@pytest.mark.parametrize("name", CONTINUING_PRESETS)
def test_a_continuing_preset_without_init_is_refused_before_anything_is_written(name, tmp_path, capsys):
    """`--preset base` without --init trained XLM-R's shape from scratch with the continued-training
    recipe (no key warm-up, dropout 0): neither of the paper's settings."""
    run = tmp_path / "run"
    assert main(["pretrain", "--preset", name, "--data", str(tmp_path / "store"), "--output", str(run)]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert f"--preset {name} continues a pre-trained model: pass --init" in err
    assert from_scratch_command(name) in err and "--preset scratch-base" in err
    assert not run.exists()


def test_the_from_scratch_command_keeps_the_preset_s_shape():
    """scratch-base is base's shape; larger presets name the fields that make theirs."""
    assert from_scratch_command("base") == "--preset scratch-base"
    assert from_scratch_command("large") == "--preset scratch-base --set model.size=large --set contrast.layer=12"
    assert from_scratch_command("xxl") == (
        "--preset scratch-base --set model.size=xxl --set contrast.layer=24 --set run.parallelism=fsdp"
    )
    for name in CONTINUING_PRESETS:
        assert preset(name).model.init is None  # what --init fills in


def test_init_s_recorded_contrast_layer_becomes_contrast_layer(recording_model, capsys):
    """The demo checkpoint records infoxlm_contrast_layer 3; continuing it under `--preset demo`
    kept the preset's layer 2 and retrieval fell from 21.3 to 11.3."""
    assert main(["pretrain", "--preset", "test", "--init", str(recording_model), "--print-config"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["contrast"]["layer"] == 2
    assert f"contrast.layer 2 (recorded by --init {recording_model}; preset test has 1)" in err


def test_a_run_s_layer_is_its_checkpoint_s_not_its_config_json_s(tmp_path, capsys):
    """RUN/config.json is the config of a run's last start; the checkpoint --init continues
    holds the layer its weights were trained on. Here config.json says base (layer 8) and the
    checkpoint a 2-layer model contrasted on layer 2: --init took 8."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"model": {"size": "base"}, "optim": {}, "run": {}, "contrast": {"layer": 8}}))
    save_checkpoint(run, 4, {"step": 4, "config": json.dumps({"contrast": {"layer": 2}})})
    assert recorded_contrast_layer(run) == 2
    assert main(["pretrain", "--preset", "test", "--init", str(run), "--print-config"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["contrast"]["layer"] == 2
    assert f"contrast.layer 2 (recorded by --init {run}; preset test has 1)" in err


@pytest.mark.parametrize("flags", [["--contrast-layer", "1"], ["--set", "contrast.layer=1"]])
def test_a_contrast_layer_the_user_sets_wins_over_the_recorded_one(flags, recording_model, capsys):
    assert main(["pretrain", "--preset", "test", "--init", str(recording_model), *flags, "--print-config"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["contrast"]["layer"] == 1
    assert f"contrast.layer 1 (as set; --init {recording_model} records 2)" in err


def test_a_contrast_layer_from_a_config_file_wins_too(recording_model, tmp_path, capsys):
    config = tmp_path / "c.json"
    config.write_text('{"contrast": {"layer": 1}}', encoding="utf-8")
    assert main(["pretrain", "--preset", "test", "--init", str(recording_model), "--config", str(config), "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["contrast"]["layer"] == 1


def test_a_model_that_records_no_layer_leaves_the_preset_s(tiny_model_dir, capsys):
    assert main(["pretrain", "--preset", "test", "--init", str(tiny_model_dir), "--print-config"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["contrast"]["layer"] == 1
    assert f"contrast.layer 1 (preset test's; --init {tiny_model_dir} records none)" in err


def test_warm_up_past_the_last_step_is_warned_about(capsys):
    """The demo preset's 40 warm-up steps in a 20-step run: the peak learning rate is never
    reached (finetune said so; pretrain did not)."""
    assert main(["pretrain", "--preset", "demo", "--max-steps", "20", "--print-config"]) == 0
    err = capsys.readouterr().err
    assert "warning: warm-up of 40 steps ≥ all 20 steps: the peak learning rate is never reached" in err
    assert main(["pretrain", "--preset", "demo", "--max-steps", "41", "--print-config"]) == 0
    assert "warm-up" not in capsys.readouterr().err


def test_a_from_scratch_learning_rate_while_continuing_is_warned_about(tiny_model_dir, capsys):
    assert main(["pretrain", "--preset", "demo", "--init", str(tiny_model_dir), "--print-config"]) == 0
    err = capsys.readouterr().err
    assert "warning: optim.lr=0.002 is preset demo's, a learning rate for training from scratch" in err
    assert main(["pretrain", "--preset", "demo", "--init", str(tiny_model_dir), "--set", "optim.lr=1e-4", "--print-config"]) == 0
    assert "optim.lr" not in capsys.readouterr().err
    assert main(["pretrain", "--preset", "demo", "--print-config"]) == 0  # from scratch, as the preset means
    assert "optim.lr" not in capsys.readouterr().err


@pytest.mark.slow  # two short training runs
def test_a_continued_run_trains_on_the_recorded_layer(tmp_path, capsys):
    """What the run saves is what was printed: contrast.layer from the model, in RUN/config.json."""
    store = tmp_path / "store"
    build_store(store)
    common = ["pretrain", "--preset", "test", "--data", str(store), "--max-steps", "2", "--no-progress"]
    assert main([*common, "--output", str(tmp_path / "first")]) == 0
    init = tmp_path / "init"
    assert main(["export", str(tmp_path / "first"), str(init)]) == 0
    record_contrast_layer(init, 2)  # as if the first run had contrasted on layer 2
    capsys.readouterr()
    assert main([*common, "--init", str(init), "--output", str(tmp_path / "second")]) == 0
    assert f"contrast.layer 2 (recorded by --init {init}; preset test has 1)" in capsys.readouterr().err
    assert json.loads((tmp_path / "second" / "config.json").read_text())["contrast"]["layer"] == 2
