"""Typed pre-training configuration, named presets, and overrides from the command line.

A ``TrainConfig`` is a tree of small dataclasses (model, data, objectives, contrast, optim,
run). Presets carry the paper's hyperparameters; any field can be overridden with
``section.field=value`` (``optim.lr=1e-4``, ``data.mixup=false``) from the command line or a
JSON file. The resolved config is printed at the start of a run and saved in the run
directory and in every checkpoint.

    >>> cfg = preset("base")
    >>> cfg.contrast.layer, cfg.optim.lr, cfg.data.xlco_batch_size
    (8, 0.0002, 2048)
    >>> apply_overrides(cfg, ["optim.lr=1e-4", "data.mixup=false"]).optim.lr
    0.0001
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..data.pipeline import PipelineConfig
from ..errors import InfoXLMError


class ConfigError(InfoXLMError):
    """A configuration value or override that cannot be used."""


@dataclass
class ModelConfig:
    size: str = "base"  # an EncoderConfig preset: tiny, small, base, large
    init: str | None = None  # a Hugging Face XLM-R directory to continue from; None = from scratch
    init_scheme: str = "uniform"  # from scratch: U[-0.02, 0.02] as in the paper's appendix, or "normal"
    dropout: float = 0.0  # hidden and attention dropout; the authors use 0 for continued pre-training
    overrides: dict[str, Any] = field(default_factory=dict)  # any EncoderConfig field, e.g. {"num_hidden_layers": 6}


@dataclass
class ObjectiveConfig:
    mmlm_weight: float = 1.0
    tlm_weight: float = 1.0
    xlco_weight: float = 1.0
    # "paper": each loss is the mean over its own units (masked tokens, sentences), then summed.
    # "joint": the authors' code, one normaliser = XLCO sentences + TLM and MLM masked tokens.
    normaliser: str = "paper"


@dataclass
class ContrastConfig:
    layer: int = 8  # the universal layer (hidden_states index): 8 of 12 for base, 12 of 24 for large
    queue_size: int = 131_072
    # The authors' released code: τ = 0.25 on unnormalised vectors. Kept as the default so that
    # results compare with theirs; normalize=True with a smaller τ is the MoCo-style alternative.
    temperature: float = 0.25
    normalize: bool = False
    momentum: float = 0.9999  # constant schedule; the cap of the inverse_sqrt schedule is 0.9995
    momentum_schedule: str = "constant"  # or "inverse_sqrt" (from scratch)
    use_momentum: bool = True  # False: the −Momentum ablation (keys from the query encoder)
    # Not in the paper: the batch's other keys as extra negatives (queue_size may then be 0).
    in_batch_negatives: bool = False
    # Not in the paper: "mean" contrasts the mean of the universal layer's token states instead
    # of the <s> state ("cls", the paper) — the pooling Tatoeba-style retrieval reads.
    pooling: str = "cls"
    start_step: int = 0  # XLCO joins after this many steps (key-encoder warm-up from scratch)


@dataclass
class OptimConfig:
    lr: float = 2e-4
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-6
    weight_decay: float = 0.01
    warmup_steps: int = 10_000
    max_steps: int = 150_000
    clip_norm: float = 1.0


@dataclass
class RunConfig:
    seed: int = 0
    save_every: int = 1000
    keep_checkpoints: int = 3
    log_every: int = 10
    device: str | None = None  # default: cuda if available, else cpu
    bf16: bool = True  # autocast on GPU; CPU runs always compute in fp32
    # torch.compile every encoder layer (dynamic shapes): fuses the element-wise work around
    # the matrix products. For GPUs; costs about half a minute of compiling at the start.
    compile: bool = False
    # Weights & Biases: the metrics of metrics.jsonl and the resolved config (pip install
    # "infoxlm[wandb]"; WANDB_MODE=offline works); name defaults to the run directory's.
    wandb: bool = False
    wandb_project: str = "infoxlm"
    wandb_name: str | None = None
    wandb_entity: str | None = None
    # Every N steps, a Hugging Face directory with its model card in RUN/exports/step-N (0: never).
    export_every: int = 0


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: PipelineConfig = field(default_factory=PipelineConfig)
    objectives: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    contrast: ContrastConfig = field(default_factory=ContrastConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, fields: dict[str, Any]) -> "TrainConfig":
        config = cls()
        apply_overrides(config, _flatten(fields))
        return config


def _flatten(tree: dict[str, Any], prefix: str = "") -> list[str]:
    """{"optim": {"lr": 1e-4}} → ["optim.lr=0.0001"] (values as JSON)."""
    out = []
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and name != "model.overrides":
            out += _flatten(value, name + ".")
        else:
            out.append(f"{name}={json.dumps(value)}")
    return out


def _parse_value(text: str, current: Any, name: str) -> Any:
    """Interpret an override's text as the type of the field it replaces."""
    lowered = text.strip().lower()
    if isinstance(current, bool):
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{name}={text!r}: expected true or false")
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = text  # a bare string such as a path or a schedule name
    if lowered in ("none", "null"):
        return None
    try:
        if isinstance(current, int) and not isinstance(value, bool):
            if isinstance(value, float) and not value.is_integer():
                raise ValueError
            return int(value)
        if isinstance(current, float):
            return float(value)
        if isinstance(current, tuple):
            return tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}={text!r}: expected a {type(current).__name__}") from None
    return value


def apply_overrides(config: TrainConfig, overrides: list[str]) -> TrainConfig:
    """Apply ``section.field=value`` strings in order; returns the same (mutated) config."""
    for item in overrides:
        if "=" not in item or "." not in item.split("=", 1)[0]:
            raise ConfigError(f"override {item!r}: expected section.field=value, e.g. optim.lr=1e-4")
        name, text = item.split("=", 1)
        section_name, field_name = name.strip().split(".", 1)
        sections = {f.name for f in dataclasses.fields(TrainConfig)}
        if section_name not in sections:
            raise ConfigError(f"override {item!r}: unknown section {section_name!r}; expected one of {sorted(sections)}")
        section = getattr(config, section_name)
        known = {f.name for f in dataclasses.fields(section)}
        if field_name not in known:
            raise ConfigError(
                f"override {item!r}: {section_name} has no field {field_name!r}; expected one of {sorted(known)}"
            )
        current = getattr(section, field_name)
        if section_name == "model" and field_name == "overrides":
            value = json.loads(text) if text.strip().startswith("{") else current
        else:
            value = _parse_value(text, current, name)
        if section_name == "data":  # PipelineConfig is frozen and validates itself
            try:
                config.data = dataclasses.replace(config.data, **{field_name: value})
            except ValueError as err:
                raise ConfigError(f"override {item!r}: {err}") from None
        else:
            setattr(section, field_name, value)
    return config


def load_config_file(path: Path) -> list[str]:
    """A JSON file shaped like ``TrainConfig.to_dict()`` (any subset) → override strings."""
    try:
        tree = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a JSON object of sections")
    return _flatten(tree)


# --- presets ------------------------------------------------------------------------------


def preset(name: str) -> TrainConfig:
    """A fresh config for a named preset (see PRESETS for what each is)."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; expected one of {sorted(PRESETS)}")
    config = TrainConfig()
    apply_overrides(config, PRESETS[name])
    return config


PRESETS: dict[str, list[str]] = {
    # InfoXLM-base: continue from XLM-R base (--init), 150K steps, batch 2048, lr 2e-4.
    "base": [],
    # InfoXLM-large: continue from XLM-R large, 200K steps, lr 1e-4, momentum 0.999, layer 12.
    "large": [
        "model.size=large",
        "optim.lr=1e-4",
        "optim.max_steps=200000",
        "contrast.layer=12",
        "contrast.momentum=0.999",
    ],
    # The appendix's from-scratch recipe: BERT-base size, U[-0.02, 0.02], batch 256, 1M steps,
    # lr 1e-4, queue 16,384, XLCO after 200K steps of key-encoder warm-up, inverse-sqrt momentum.
    "scratch-base": [
        "model.init_scheme=uniform",
        "model.dropout=0.1",
        "data.mmlm_batch_size=256",
        "data.tlm_batch_size=256",
        "data.xlco_batch_size=256",
        "optim.lr=1e-4",
        "optim.max_steps=1000000",
        "contrast.queue_size=16384",
        "contrast.start_step=200000",
        "contrast.momentum_schedule=inverse_sqrt",
    ],
    # A small model that trains on a laptop CPU in minutes.
    "demo": [
        "model.size=small",
        "model.dropout=0.1",
        "data.mmlm_batch_size=16",
        "data.tlm_batch_size=16",
        "data.xlco_batch_size=32",
        "data.block_size=64",
        "data.tlm_max_length=96",
        "data.xlco_max_length=48",
        "data.max_tokens=4096",
        "contrast.layer=3",
        "contrast.queue_size=1024",
        "contrast.momentum=0.99",
        "optim.lr=5e-4",
        "optim.warmup_steps=50",
        "optim.max_steps=600",
        "run.save_every=200",
        "run.log_every=10",
    ],
    # Seconds: the tests' end-to-end runs.
    "test": [
        "model.size=tiny",
        "data.mmlm_batch_size=4",
        "data.tlm_batch_size=4",
        "data.xlco_batch_size=4",
        "data.block_size=32",
        "data.tlm_max_length=48",
        "data.xlco_max_length=24",
        "data.max_tokens=256",
        "contrast.layer=1",
        "contrast.queue_size=16",
        "contrast.momentum=0.9",
        "optim.lr=1e-3",
        "optim.warmup_steps=2",
        "optim.max_steps=20",
        "run.save_every=5",
        "run.log_every=1",
    ],
}
