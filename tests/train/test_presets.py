"""Named presets (train/presets.py): the paper's values, one fresh valid config per call, and
one source per recipe: what `infoxlm pretrain --preset NAME --print-config` prints is what the
demo and the demo checkpoint's script train (the benchmark's sizes: tests/bench/test_sizes.py)."""

from __future__ import annotations

import json
import re

import pytest
import torch

from infoxlm.cli import main
from infoxlm.demo.checkpoint import checkpoint_dir
from infoxlm.demo.run import train_config
from infoxlm.demo.settings import FULL, PAPER, PAPER_QUICK, QUICK
from infoxlm.model.hub import read_contrast_layer
from infoxlm.train.config import TrainConfig, apply_overrides, resolve_config
from infoxlm.train.presets import PRESETS, preset


def test_presets_carry_the_papers_hyperparameters():
    base, large, scratch = preset("base"), preset("large"), preset("scratch-base")
    assert (base.optim.lr, base.optim.max_steps, base.contrast.layer, base.contrast.momentum) == (2e-4, 150_000, 8, 0.9999)
    assert (base.data.xlco_batch_size, base.contrast.queue_size, base.optim.warmup_steps) == (2048, 131_072, 10_000)
    assert (base.optim.betas, base.optim.eps, base.optim.weight_decay, base.optim.clip_norm) == ((0.9, 0.98), 1e-6, 0.01, 1.0)
    assert (large.model.size, large.optim.lr, large.contrast.layer, large.contrast.momentum) == ("large", 1e-4, 12, 0.999)
    assert scratch.contrast.momentum_schedule == "inverse_sqrt" and scratch.contrast.start_step == 200_000
    assert (scratch.contrast.queue_size, scratch.data.mmlm_batch_size, scratch.optim.max_steps) == (16_384, 256, 1_000_000)
    assert set(PRESETS) >= {"base", "large", "scratch-base", "demo", "test"}


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
    encoder = EncoderConfig.of_size(cfg.model.size, vocab_size=250_002, **cfg.model.overrides)
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


def test_each_preset_is_a_function_building_a_fresh_valid_config():
    built = {name: function() for name, function in PRESETS.items()}
    assert all(isinstance(config, TrainConfig) for config in built.values())
    assert len({config.to_json() for config in built.values()}) == len(built)  # all different
    first = preset("demo")
    first.optim.lr = 1.0
    assert preset("demo").optim.lr == 2e-3  # a fresh config each time


@pytest.mark.parametrize("name, billions, layers, universal", [("xl", 3.5, 36, 18), ("xxl", 10.7, 48, 24)])
def test_the_xl_and_xxl_presets_have_xlmr_shapes_and_shard(name, billions, layers, universal):
    from infoxlm.model.config import EncoderConfig
    from infoxlm.model.encoder import Encoder

    cfg = preset(name)
    with torch.device("meta"):  # counted, not allocated
        encoder = Encoder(EncoderConfig.of_size(cfg.model.size, vocab_size=250_880))
    assert sum(p.numel() for p in encoder.parameters()) / 1e9 == pytest.approx(billions, abs=0.05)
    assert encoder.num_layers == layers and cfg.contrast.layer == universal == layers // 2
    assert cfg.run.parallelism == "fsdp" and cfg.optim.lr == preset("large").optim.lr


def _fields(tree: dict, prefix: str = "") -> dict[str, object]:
    """{"optim": {"lr": 1e-3}} → {"optim.lr": 1e-3}: a config field by field (model.overrides whole)."""
    out = {}
    for key, value in tree.items():
        if isinstance(value, dict) and f"{prefix}{key}" != "model.overrides":
            out.update(_fields(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _printed(name: str, capsys) -> tuple[dict[str, object], str]:
    """`infoxlm pretrain --preset NAME --print-config`: (its config field by field, its stderr)."""
    assert main(["pretrain", "--preset", name, "--print-config"]) == 0
    out, err = capsys.readouterr()
    return _fields(json.loads(out)), err


def _trained(config: TrainConfig) -> dict[str, object]:
    """A config as a run resolves it before training (data.seed = run.seed), field by field, as JSON has it."""
    return _fields(json.loads(resolve_config(config).to_json()))


@pytest.mark.parametrize("settings", [FULL, QUICK, PAPER, PAPER_QUICK], ids=lambda s: s.name)
def test_print_config_of_a_demo_setting_s_preset_is_what_the_demo_trains(settings, capsys):
    """`infoxlm demo [--setting paper] [--quick]` trains its setting's preset: the config of its
    full model equals, field by field, what `infoxlm pretrain --preset NAME --print-config`
    prints, the paper setting's parts read off the shipped checkpoint included (model.init, its
    directory; contrast.layer, the universal layer it records). The demo adds one value of its
    own, run.seed (its --seed, 0 by default as in the preset); the output paths are pretrain()'s
    arguments, not config fields."""
    printed, err = _printed(settings.preset, capsys)
    assert _trained(train_config(settings, seed=0)) == printed
    if settings.from_checkpoint:
        assert printed["model.init"] == str(checkpoint_dir())
        assert printed["contrast.layer"] == read_contrast_layer(checkpoint_dir()) == 3
        assert f"contrast.layer 3 (recorded by preset {settings.preset}'s model.init {checkpoint_dir()})" in err
        assert "--init" not in err  # the user passed none
    else:
        assert printed["model.init"] is None
    assert "warning" not in err  # paper-demo's lr is a continuing rate, not a from-scratch preset's


def test_the_demo_s_seed_is_the_only_value_it_adds_to_the_preset():
    seeded, preset_s = _trained(train_config(PAPER, seed=5)), _trained(preset("paper-demo"))
    assert {k for k in preset_s if seeded[k] != preset_s[k]} == {"run.seed", "data.seed"}  # data.seed follows run.seed
    assert seeded["run.seed"] == seeded["data.seed"] == 5


def test_the_paper_demo_preset_continues_the_shipped_checkpoint_and_needs_no_init():
    config = preset("paper-demo")
    assert config.model.init == str(checkpoint_dir()) and config.contrast.layer == read_contrast_layer(checkpoint_dir())
    quick = preset("paper-demo-quick")
    assert (quick.model.init, quick.contrast.layer) == (config.model.init, config.contrast.layer)
    assert quick.optim.max_steps == 3 and config.optim.max_steps == 300


def test_the_demo_checkpoint_preset_is_the_recipe_its_model_card_states():
    """The shipped card names the command that made the checkpoint: `infoxlm pretrain --preset
    demo` with its --set lines; the demo-checkpoint preset with the same seed is that config."""
    card = (checkpoint_dir() / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"`infoxlm pretrain --preset demo` with `([^`]*)`", card).group(1).split()
    assert _trained(apply_overrides(preset("demo"), stated)) == _trained(apply_overrides(preset("demo-checkpoint"), ["run.seed=0"]))
