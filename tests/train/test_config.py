"""Training configs: presets with the paper's values, overrides, clear errors."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import torch

from infoxlm.train.config import ConfigError, TrainConfig, apply_overrides, load_config_file, resolve_config
from infoxlm.train.contrast_recipes import CONTRAST_RECIPES, recipe_overrides
from infoxlm.train.presets import preset


def test_overrides_parse_to_the_fields_type():
    cfg = apply_overrides(preset("test"), ["optim.lr=3e-4", "data.mixup=false", "run.device=cpu", "optim.max_steps=7"])
    assert (cfg.optim.lr, cfg.data.mixup, cfg.run.device, cfg.optim.max_steps) == (3e-4, False, "cpu", 7)
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    "override, message",
    [
        ("optim.lr=fast", "expected a number"),
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
    with pytest.raises(ConfigError, match=r"c\.json:1:18: invalid JSON \(Expecting value\)"):
        load_config_file(path)


@pytest.mark.parametrize(
    "override, message",
    [
        ("optim.lr=-1", "optim.lr=-1.0: expected a finite number > 0"),
        ("optim.lr=nan", "optim.lr=nan"),
        ("optim.lr=null", "optim.lr=null"),
        ("optim.lr=true", "optim.lr='true': expected a number, not true or false"),
        ("optim.betas=[0.9, 1.5]", "optim.betas"),
        ("optim.max_steps=0", "optim.max_steps=0: expected an integer >= 1"),
        ("optim.warmup_steps=-1", "optim.warmup_steps=-1"),
        ("optim.clip_norm=0", "optim.clip_norm=0.0"),
        ("model.size=huge", "model.size='huge': expected one of tiny, small, base, large"),
        ("model.dropout=2", "model.dropout=2.0: expected a finite number in [0, 1)"),
        ("model.init_scheme=zeros", "model.init_scheme='zeros'"),
        ("model.overrides=5", "model.overrides=5"),
        ("objectives.xlco_weight=-1", "objectives.xlco_weight=-1.0"),
        ("objectives.normaliser=sum", "objectives.normaliser='sum': expected one of paper, joint"),
        ("contrast.momentum=1.5", "contrast.momentum=1.5: expected a finite number in [0, 1]"),
        ("contrast.queue_size=0", "contrast.queue_size=0"),
        ("contrast.start_step=-1", "contrast.start_step=-1"),
        ("contrast.momentum_schedule=cosine", "contrast.momentum_schedule='cosine'"),
        ("contrast.layer=0", "contrast.layer=0"),
        ("run.save_every=0", "run.save_every=0: expected an integer >= 1"),
        ("run.log_every=-1", "run.log_every=-1"),
        ("run.device=banana", "run.device='banana'"),
        ("run.keep_checkpoints=-1", "run.keep_checkpoints=-1"),
        ("data.mmlm_batch_size=-1", "data.mmlm_batch_size must be an integer >= 0"),
    ],
)
def test_every_section_validates_its_fields(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        apply_overrides(preset("test"), [override])


def test_sections_validate_at_construction_and_whole_configs_on_request():
    from infoxlm.train.config import ContrastConfig, OptimConfig

    with pytest.raises(ConfigError, match=re.escape("optim.lr=0: expected")):
        OptimConfig(lr=0)
    with pytest.raises(ConfigError, match=re.escape("contrast.momentum=-0.1")):
        ContrastConfig(momentum=-0.1)
    cfg = preset("test")
    cfg.optim.lr = float("inf")  # set by hand after construction: caught by validate()
    with pytest.raises(ConfigError, match="optim.lr=inf"):
        cfg.validate()
    with pytest.raises(ConfigError, match="all 0: nothing to train"):
        apply_overrides(preset("test"), ["data.mmlm_batch_size=0", "data.tlm_batch_size=0", "data.xlco_batch_size=0"])
    # One objective left is enough; queue_size=0 is fine with in-batch negatives.
    apply_overrides(preset("test"), ["data.mmlm_batch_size=0", "data.tlm_batch_size=0"])
    apply_overrides(preset("test"), ["contrast.in_batch_negatives=true", "contrast.queue_size=0"])


def test_print_config_needs_no_data_and_prints_the_resolved_json(capsys):
    from infoxlm.cli import main

    assert main(["pretrain", "--preset", "scratch-base", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["optim"]["betas"] == [0.9, 0.999] and printed["optim"]["max_steps"] == 1_000_000
    assert main(["pretrain", "--preset", "test", "--set", "optim.lr=0.5", "--seed", "7", "--no-xlco", "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["optim"]["lr"] == 0.5 and printed["data"]["xlco_batch_size"] == 0 and printed["data"]["seed"] == 7
    assert main(["pretrain", "--preset", "test"]) == 1
    assert "--data and --output required" in capsys.readouterr().err


def test_a_bad_value_in_a_preset_fails_where_it_is_built():
    from infoxlm.train.config import changed

    with pytest.raises(ConfigError, match=r"contrast\.temperature"):
        changed(TrainConfig(), contrast={"temperature": -1.0})
    with pytest.raises(ConfigError, match=r"data\.block_size must be an integer >= 3"):
        changed(TrainConfig(), data={"block_size": 2})


def test_model_size_takes_exactly_the_encoders_named_sizes():
    from infoxlm.model.config import ENCODER_SIZES, EncoderConfig
    from infoxlm.train.config import ModelConfig

    assert ENCODER_SIZES == ("tiny", "small", "base", "large", "xl", "xxl")
    for name in ENCODER_SIZES:
        assert ModelConfig(size=name).size == name and EncoderConfig.of_size(name).hidden_size > 0
    with pytest.raises(ConfigError, match=re.escape("model.size='huge': expected one of tiny, small, base, large, xl, xxl")):
        apply_overrides(preset("test"), ["model.size=huge"])


def test_what_is_left_to_the_device_is_chosen_by_it_unless_told():
    from infoxlm.train.config import resolve_config

    assert resolve_config(preset("base"), torch.device("cuda")).run.compile is True
    assert resolve_config(preset("base"), torch.device("cpu")).run.compile is False
    told = apply_overrides(preset("base"), ["run.compile=false"])
    assert resolve_config(told, torch.device("cuda")).run.compile is False
    # The data built ahead: a GPU's speed lever, the CPU's cores are the step's own.
    gpu, cpu = (resolve_config(preset("base"), torch.device(d)).run for d in ("cuda", "cpu"))
    assert (gpu.prefetch_data, cpu.prefetch_data, gpu.token_bucket) == (True, False, 0)
    told = apply_overrides(preset("base"), ["run.token_bucket=512", "run.prefetch_data=false"])
    assert (resolve_config(told, torch.device("cuda")).run.token_bucket, told.run.prefetch_data) == (512, False)
    with pytest.raises(ConfigError, match="run.token_bucket=-1: expected an integer >= 0"):
        apply_overrides(preset("base"), ["run.token_bucket=-1"])


def test_a_field_that_may_be_unset_parses_as_its_declared_type_and_auto_unsets_it():
    config = apply_overrides(preset("base"), ["data.max_tokens=98304", "run.compile=true", "run.wandb_name=auto"])
    assert (config.data.max_tokens, config.run.compile, config.run.wandb_name) == (98304, True, "auto")
    config = apply_overrides(config, ["data.max_tokens=auto", "run.compile=auto", "run.wandb_name=null"])
    assert (config.data.max_tokens, config.run.compile, config.run.wandb_name) == (None, None, None)
    assert preset("base").data.max_tokens is None and preset("demo").data.max_tokens == 8192
    with pytest.raises(ConfigError, match="data.max_tokens='lots': expected an integer"):
        apply_overrides(preset("base"), ["data.max_tokens=lots"])


# LaBSE's objective, as the acceptance of in-step negatives states it.
TRANSLATION_RANKING = ["contrast.use_momentum=false", "contrast.in_batch_negatives=true", "contrast.queue_size=0",
                       "contrast.symmetric=true", "contrast.margin=0.3", "contrast.normalize=true",
                       "contrast.temperature=0.05"]  # fmt: skip


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["contrast.margin=-0.1", "contrast.normalize=true"], "contrast.margin=-0.1: expected a finite number >= 0"),
        (["contrast.margin=inf", "contrast.normalize=true"], "contrast.margin=inf: expected a finite number >= 0"),
        (["contrast.margin=0.3"], "contrast.margin=0.3: expected 0, or > 0 with contrast.normalize=true"),
        (["contrast.symmetric=true"], "contrast.symmetric=True: expected false, or true with contrast.in_batch_negatives=true"),
        (["contrast.symmetric=maybe"], "contrast.symmetric='maybe': expected true or false"),
        (["contrast.queue_size=0", "contrast.in_batch_negatives=false"], "contrast.queue_size=0: expected a positive number"),
    ],
)
def test_translation_ranking_fields_are_validated(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        apply_overrides(preset("test"), overrides)


def test_fields_that_need_each_other_may_be_set_in_any_order():
    """A field allowed only with another (margin with normalize, symmetric and queue_size=0
    with in-batch negatives) is checked once every --set is in."""
    forward = apply_overrides(preset("test"), TRANSLATION_RANKING)
    backward = apply_overrides(preset("test"), TRANSLATION_RANKING[::-1])
    assert forward.to_json() == backward.to_json()
    c = forward.contrast
    assert (c.symmetric, c.margin, c.queue_size, c.use_momentum, c.normalize) == (True, 0.3, 0, False, True)


def test_print_config_shows_the_translation_ranking_fields(capsys):
    from infoxlm.cli import main

    sets = [arg for o in TRANSLATION_RANKING for arg in ("--set", o)]
    assert main(["pretrain", "--preset", "test", *sets, "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)["contrast"]
    assert {k: printed[k] for k in ("symmetric", "margin", "in_batch_negatives", "queue_size", "use_momentum")} == {
        "symmetric": True, "margin": 0.3, "in_batch_negatives": True, "queue_size": 0, "use_momentum": False}  # fmt: skip
    assert main(["pretrain", "--preset", "test", "--set", "contrast.margin=0.3", "--print-config"]) == 1
    assert "contrast.margin=0.3: expected 0, or > 0 with contrast.normalize=true" in capsys.readouterr().err


def test_the_contrast_recipes_are_what_the_presets_train_and_apply_to_any_preset():
    for name, preset_name in (("moco", "base"), ("demo", "demo")):  # each names a preset's contrast as it is
        contrast = dataclasses.asdict(preset(preset_name).contrast)
        assert {k: contrast[k] for k in CONTRAST_RECIPES[name]} == CONTRAST_RECIPES[name], name
    translation = apply_overrides(preset("test"), recipe_overrides("translation-ranking"))
    assert translation.to_json() == apply_overrides(preset("test"), TRANSLATION_RANKING).to_json()
    for name in CONTRAST_RECIPES:
        for preset_name in ("base", "demo", "test"):
            apply_overrides(preset(preset_name), recipe_overrides(name))  # valid everywhere
    with pytest.raises(ConfigError, match="contrast recipe 'labse': expected one of moco, demo, translation-ranking"):
        recipe_overrides("labse")


def test_the_pretraining_guide_lists_each_contrast_recipe_as_its_set_lines():
    text = (Path(__file__).parents[2] / "docs" / "pretraining.md").read_text(encoding="utf-8")
    for name in CONTRAST_RECIPES:
        listed = re.search(rf"- `{re.escape(name)}`.*?`(--set\s[^`]*)`", text, re.S).group(1)
        assert listed.split() == [word for line in recipe_overrides(name) for word in ("--set", line)], name


def test_print_config_shows_the_schedules_and_refuses_a_malformed_one(capsys):
    from infoxlm.cli import main

    sets = ["data.mask_schedule=0:0.3,200:0.15", "data.alpha_schedule=0:0.7,200:0.3", "data.language_starts=sw:100",
            "optim.schedule=wsd", "optim.decay_fraction=0.2"]  # fmt: skip
    assert main(["pretrain", "--preset", "test", *(a for s in sets for a in ("--set", s)), "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["data"]["mask_schedule"] == "0:0.3,200:0.15" and printed["data"]["alpha_schedule"] == "0:0.7,200:0.3"
    assert printed["data"]["language_starts"] == "sw:100"
    assert (printed["optim"]["schedule"], printed["optim"]["decay_fraction"]) == ("wsd", 0.2)
    assert main(["pretrain", "--preset", "test", "--set", "data.mask_schedule=0:0.3,200", "--print-config"]) == 1
    assert "mask_schedule: '200' is not STEP:VALUE" in capsys.readouterr().err
    assert main(["pretrain", "--preset", "test", "--set", "optim.schedule=cosine", "--print-config"]) == 1
    assert "optim.schedule='cosine': expected one of linear, wsd" in capsys.readouterr().err


def test_the_data_follow_run_seed_and_another_data_seed_is_refused():
    """One seed per run: data.seed is resolved to run.seed (visible in --print-config), and a
    data.seed that differs is refused rather than silently overwritten."""
    resolved = resolve_config(apply_overrides(preset("test"), ["run.seed=7"]))
    assert resolved.data.seed == 7
    assert apply_overrides(preset("test"), ["run.seed=5", "data.seed=5"]).data.seed == 5
    with pytest.raises(ConfigError, match=r"data.seed=5: expected run.seed \(0\), which the data follow; set run.seed=5"):
        apply_overrides(preset("test"), ["data.seed=5"])
