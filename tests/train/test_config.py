"""Training configs: presets with the paper's values, overrides, clear errors."""

from __future__ import annotations

import json

import pytest

from infoxlm.train.config import ConfigError, PRESETS, TrainConfig, apply_overrides, load_config_file, preset


def test_presets_carry_the_papers_hyperparameters():
    base, large, scratch = preset("base"), preset("large"), preset("scratch-base")
    assert (base.optim.lr, base.optim.max_steps, base.contrast.layer, base.contrast.momentum) == (2e-4, 150_000, 8, 0.9999)
    assert (base.data.xlco_batch_size, base.contrast.queue_size, base.optim.warmup_steps) == (2048, 131_072, 10_000)
    assert (base.optim.betas, base.optim.eps, base.optim.weight_decay, base.optim.clip_norm) == ((0.9, 0.98), 1e-6, 0.01, 1.0)
    assert (large.model.size, large.optim.lr, large.contrast.layer, large.contrast.momentum) == ("large", 1e-4, 12, 0.999)
    assert scratch.contrast.momentum_schedule == "inverse_sqrt" and scratch.contrast.start_step == 200_000
    assert (scratch.contrast.queue_size, scratch.data.mmlm_batch_size, scratch.optim.max_steps) == (16_384, 256, 1_000_000)
    assert set(PRESETS) >= {"base", "large", "scratch-base", "demo", "test"}


def test_overrides_parse_to_the_fields_type():
    cfg = apply_overrides(preset("test"), ["optim.lr=3e-4", "data.mixup=false", "run.device=cpu", "optim.max_steps=7"])
    assert (cfg.optim.lr, cfg.data.mixup, cfg.run.device, cfg.optim.max_steps) == (3e-4, False, "cpu", 7)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    "override, message",
    [
        ("optim.lr=fast", "expected a float"),
        ("nosuch.x=1", "unknown section 'nosuch'"),
        ("optim.speed=1", "optim has no field 'speed'"),
        ("data.block_size=2", "block_size must be an integer >= 3"),
        ("run.bf16=maybe", "expected true or false"),
        ("lr=1", "expected section.field=value"),
    ],
)
def test_bad_overrides_are_named(override, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(preset("test"), [override])


def test_config_file(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"optim": {"lr": 0.005}, "contrast": {"temperature": 0.1}}))
    cfg = apply_overrides(preset("test"), load_config_file(path))
    assert cfg.optim.lr == 0.005 and cfg.contrast.temperature == 0.1
    path.write_text('{"optim": {"lr": }}')
    with pytest.raises(ConfigError, match="c.json:1: not valid JSON"):
        load_config_file(path)
