"""Training configs: presets with the paper's values, overrides, clear errors."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import torch

from infoxlm.train.config import ConfigError, PRESETS, TrainConfig, apply_overrides, load_config_file, preset
from infoxlm.train.contrast_recipes import CONTRAST_RECIPES, recipe_overrides


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
    with pytest.raises(ConfigError, match="c.json:1: not valid JSON"):
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


# The paper's appendix table "Hyperparameters used for InfoXLM pre-training", column by column,
# plus the from-scratch recipe of its appendix text (init, key-encoder warm-up, schedule).
APPENDIX = {
    "scratch-base": dict(layers=12, hidden=768, ffn=3072, heads=12, steps=1_000_000, batch=256, eps=1e-6,
                         betas=(0.9, 0.999), lr=1e-4, warmup=10_000, clip=1.0, weight_decay=0.01,
                         momentum=0.9995, queue=16_384, layer=8),
    "base": dict(layers=12, hidden=768, ffn=3072, heads=12, steps=150_000, batch=2048, eps=1e-6,
                 betas=(0.9, 0.98), lr=2e-4, warmup=10_000, clip=1.0, weight_decay=0.01,
                 momentum=0.9999, queue=131_072, layer=8),
    "large": dict(layers=24, hidden=1024, ffn=4096, heads=16, steps=200_000, batch=2048, eps=1e-6,
                  betas=(0.9, 0.98), lr=1e-4, warmup=10_000, clip=1.0, weight_decay=0.01,
                  momentum=0.999, queue=131_072, layer=12),
}


@pytest.mark.parametrize("name", sorted(APPENDIX))
def test_presets_match_the_papers_appendix_table(name):
    from infoxlm.model.config import EncoderConfig
    from infoxlm.objectives.xlco import momentum_at

    cfg, paper = preset(name), APPENDIX[name]
    encoder = EncoderConfig.preset(cfg.model.size, vocab_size=250_002, **cfg.model.overrides)
    assert (encoder.num_hidden_layers, encoder.hidden_size, encoder.intermediate_size, encoder.num_attention_heads) == (
        paper["layers"], paper["hidden"], paper["ffn"], paper["heads"])
    assert cfg.optim.max_steps == paper["steps"]
    assert (cfg.data.mmlm_batch_size, cfg.data.tlm_batch_size, cfg.data.xlco_batch_size) == (paper["batch"],) * 3
    assert (cfg.optim.eps, cfg.optim.betas, cfg.optim.lr) == (paper["eps"], paper["betas"], paper["lr"])
    assert (cfg.optim.warmup_steps, cfg.optim.clip_norm, cfg.optim.weight_decay) == (paper["warmup"], paper["clip"], paper["weight_decay"])
    # "Momentum coefficient": constant, or the cap of the inverse-square-root schedule (*).
    late = momentum_at(10**9, cfg.contrast.momentum_schedule, base=cfg.contrast.momentum)
    assert late == paper["momentum"]
    assert (cfg.contrast.queue_size, cfg.contrast.layer) == (paper["queue"], paper["layer"])
    if name == "scratch-base":
        assert cfg.contrast.momentum_schedule == "inverse_sqrt" and cfg.contrast.start_step == 200_000
        assert cfg.model.init_scheme == "uniform" and cfg.model.init is None
    else:
        assert cfg.contrast.momentum_schedule == "constant" and cfg.contrast.start_step == 0


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


def test_each_preset_is_a_function_building_a_fresh_valid_config():
    built = {name: function() for name, function in PRESETS.items()}
    assert all(isinstance(config, TrainConfig) for config in built.values())
    assert len({config.to_json() for config in built.values()}) == len(built)  # all different
    first = preset("demo")
    first.optim.lr = 1.0
    assert preset("demo").optim.lr == 2e-3  # a fresh config each time


def test_a_bad_value_in_a_preset_fails_where_it_is_built():
    from infoxlm.train.config import _changed

    with pytest.raises(ConfigError, match=r"contrast\.temperature"):
        _changed(TrainConfig(), contrast={"temperature": -1.0})
    with pytest.raises(ConfigError, match=r"data\.block_size must be an integer >= 3"):
        _changed(TrainConfig(), data={"block_size": 2})


def test_pretrain_preset_demo_is_what_the_demo_and_its_benchmark_run():
    from infoxlm.bench.sizes import bench_size
    from infoxlm.demo.run import FULL, train_config

    demo = preset("demo")
    assert train_config(FULL, seed=0, extra=[]).to_json() == apply_overrides(preset("demo"), ["run.seed=0"]).to_json()
    size = bench_size("demo")
    assert (size.encoder, size.block_size, size.tlm_max_length, size.xlco_max_length) == (
        demo.model.size, demo.data.block_size, demo.data.tlm_max_length, demo.data.xlco_max_length
    )
    assert size.contrast == {key: getattr(demo.contrast, key) for key in size.contrast}
    assert (size.cpu.mmlm, size.cpu.tlm, size.cpu.xlco, size.cpu.max_tokens) == (
        demo.data.mmlm_batch_size, demo.data.tlm_batch_size, demo.data.xlco_batch_size, demo.data.max_tokens
    )


@pytest.mark.parametrize("name, billions, layers, universal", [("xl", 3.5, 36, 18), ("xxl", 10.7, 48, 24)])
def test_the_xl_and_xxl_presets_have_xlmr_shapes_and_shard(name, billions, layers, universal):
    from infoxlm.model.config import EncoderConfig
    from infoxlm.model.encoder import Encoder

    cfg = preset(name)
    with torch.device("meta"):  # counted, not allocated
        encoder = Encoder(EncoderConfig.preset(cfg.model.size, vocab_size=250_880))
    assert sum(p.numel() for p in encoder.parameters()) / 1e9 == pytest.approx(billions, abs=0.05)
    assert encoder.num_layers == layers and cfg.contrast.layer == universal == layers // 2
    assert cfg.run.parallelism == "fsdp" and cfg.optim.lr == preset("large").optim.lr


def test_model_size_takes_exactly_the_encoders_named_sizes():
    from infoxlm.model.config import ENCODER_SIZES, EncoderConfig
    from infoxlm.train.config import ModelConfig

    assert ENCODER_SIZES == ("tiny", "small", "base", "large", "xl", "xxl")
    for name in ENCODER_SIZES:
        assert ModelConfig(size=name).size == name and EncoderConfig.preset(name).hidden_size > 0
    with pytest.raises(ConfigError, match=re.escape("model.size='huge': expected one of tiny, small, base, large, xl, xxl")):
        apply_overrides(preset("test"), ["model.size=huge"])


def test_compiling_is_left_to_the_device_unless_told():
    from infoxlm.train.config import resolve_config

    assert resolve_config(preset("base"), torch.device("cuda")).run.compile is True
    assert resolve_config(preset("base"), torch.device("cpu")).run.compile is False
    told = apply_overrides(preset("base"), ["run.compile=false"])
    assert resolve_config(told, torch.device("cuda")).run.compile is False


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
