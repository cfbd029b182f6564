"""Typed pre-training configuration and overrides from the command line.

A ``TrainConfig`` is a tree of small dataclasses (model, data, objectives, contrast, optim,
run) whose defaults are the paper's base recipe; the presets (train/presets.py) build one.
Any field can be overridden with ``section.field=value`` (``optim.lr=1e-4``) from the command
line or a JSON file, or changed from Python with typed values (``changed``). The resolved
config is printed at a run's start and saved in its directory and every checkpoint.

    >>> cfg = TrainConfig()
    >>> cfg.contrast.layer, cfg.optim.lr, cfg.data.xlco_batch_size
    (8, 0.0002, 2048)
    >>> apply_overrides(cfg, ["optim.lr=1e-4", "data.mixup=false"]).optim.lr
    0.0001
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import torch

from ..data.pipeline import PipelineConfig
from ..model.config import ENCODER_SIZES
from ..model.sentence_layer import POOLINGS
from ..errors import InfoXLMError
from ..json_files import CONFIG_BYTES, read_json
from .optim import LR_SCHEDULES


class ConfigError(InfoXLMError):
    """A configuration value or override that cannot be used."""


INIT_SCHEMES = ("uniform", "normal")
NORMALISERS = ("paper", "joint")
MOMENTUM_SCHEDULES = ("constant", "inverse_sqrt")
KEY_WARMUPS = ("copy", "momentum")
PARALLELISMS = ("ddp", "fsdp")
# How a run executes, not what it computes: a run may continue with other values of these
# (another device, world size, parallelism, micro-batch budget or checkpoint and log
# intervals) without --allow-config-change.
EXECUTION_FIELDS = (
    "run.device", "run.parallelism", "run.async_checkpoint", "run.compile", "run.collective_timeout_s",
    "run.activation_checkpointing", "run.expandable_segments", "run.prefetch_data", "run.token_bucket",
    "data.max_tokens", "run.save_every", "run.save_every_minutes", "run.keep_checkpoints", "run.log_every",
    "run.eval_every", "run.val_examples", "run.val_pairs",
)


class Section:
    """What every config section shares: ``validate()`` checks each field's type and range and
    raises ``ConfigError("section.field=value: expected …")``. It runs at construction
    (``__post_init__``), so a section that exists is a valid one; ``apply_overrides`` replaces
    a section rather than setting a field, and the trainer validates again before it allocates
    anything (a field may have been set by hand since)."""

    SECTION = ""

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        raise NotImplementedError

    def _fail(self, name: str, expected: str) -> None:
        value = getattr(self, name)
        shown = "null" if value is None else repr(value)
        raise ConfigError(f"{self.SECTION}.{name}={shown}: expected {expected}")

    def _integer(self, name: str, smallest: int) -> None:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < smallest:
            self._fail(name, f"an integer >= {smallest}")

    def _number(self, name: str, low: float, high: float = math.inf, *, low_open: bool = False, high_open: bool = False, finite: bool = True) -> None:
        """A real number in [low, high] (ends excluded where *_open), not NaN; finite unless told."""
        value = getattr(self, name)
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
        ok = ok and (not finite or math.isfinite(value))
        ok = ok and (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
        if not ok:
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            where = f"> {low:g}" if high == math.inf and low_open else f">= {low:g}" if high == math.inf else f"in {left}{low:g}, {high:g}{right}"
            self._fail(name, f"a {'finite ' if finite else ''}number {where}")

    def _choice(self, name: str, choices: tuple[str, ...]) -> None:
        if getattr(self, name) not in choices:
            self._fail(name, f"one of {', '.join(choices)}")

    def _boolean(self, name: str) -> None:
        if not isinstance(getattr(self, name), bool):
            self._fail(name, "true or false")


@dataclass
class ModelConfig(Section):
    SECTION: ClassVar[str] = "model"
    size: str = "base"  # an encoder size (EncoderConfig.of_size): tiny, small, base, large
    init: str | None = None  # a Hugging Face XLM-R directory to continue from; None = from scratch
    init_scheme: str = "uniform"  # from scratch: U[-0.02, 0.02] as in the paper's appendix, or "normal"
    dropout: float = 0.0  # hidden and attention dropout; the authors use 0 for continued pre-training
    overrides: dict[str, Any] = field(default_factory=dict)  # any EncoderConfig field, e.g. {"num_hidden_layers": 6}

    def validate(self) -> None:
        self._choice("size", ENCODER_SIZES)
        if self.init is not None and (not isinstance(self.init, str) or not self.init):
            self._fail("init", "a model directory, or null (from scratch)")
        self._choice("init_scheme", INIT_SCHEMES)
        self._number("dropout", 0.0, 1.0, high_open=True)
        if not isinstance(self.overrides, dict):
            self._fail("overrides", 'a JSON object of EncoderConfig fields, e.g. {"num_hidden_layers": 6}')


@dataclass
class ObjectiveConfig(Section):
    SECTION: ClassVar[str] = "objectives"
    mmlm_weight: float = 1.0
    tlm_weight: float = 1.0
    xlco_weight: float = 1.0
    # "paper": each loss is the mean over its own units (masked tokens, sentences), then summed.
    # "joint": the authors' code, one normaliser = XLCO sentences + TLM and MLM masked tokens.
    normaliser: str = "paper"

    def validate(self) -> None:
        for name in ("mmlm_weight", "tlm_weight", "xlco_weight"):
            self._number(name, 0.0)
        self._choice("normaliser", NORMALISERS)


@dataclass
class ContrastConfig(Section):
    SECTION: ClassVar[str] = "contrast"
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
    # The key encoder during those start_step steps: "copy" (the authors' code) frozen, then a
    # copy of the query encoder; "momentum" follows it all along. The paper says "a warm-up".
    key_warmup: str = "copy"
    # The authors' code runs the momentum encoder in training mode (dropout as model.dropout);
    # false runs it in eval mode (no dropout on the keys, MoCo-style).
    key_dropout: bool = True
    # Not in the paper, the translation-ranking family (LaBSE): symmetric adds the k→q direction
    # (a key ranks its query among the step's queries) and averages the two; margin is
    # subtracted from the positive's cosine (LaBSE: 0.3).
    symmetric: bool = False
    margin: float = 0.0

    def validate(self) -> None:
        self._integer("layer", 1)  # its upper bound is the encoder's depth, checked by the trainer
        self._boolean("in_batch_negatives")
        self._integer("queue_size", 0)
        self._number("temperature", 0.0, low_open=True)
        self._boolean("normalize")
        self._number("momentum", 0.0, 1.0)
        self._choice("momentum_schedule", MOMENTUM_SCHEDULES)
        self._boolean("use_momentum")
        self._choice("pooling", POOLINGS)
        self._integer("start_step", 0)
        self._choice("key_warmup", KEY_WARMUPS)
        self._boolean("key_dropout")
        self._boolean("symmetric")
        self._number("margin", 0.0)

    def validate_combination(self) -> None:
        """What one field allows only with another: checked on the whole config, once every
        ``--set`` is in (``TrainConfig.validate``), so that their order does not matter."""
        if self.queue_size == 0 and not self.in_batch_negatives:
            self._fail("queue_size", "a positive number of negative keys (0 only with contrast.in_batch_negatives=true)")
        if self.symmetric and not self.in_batch_negatives:
            # k→q ranks a key among the step's queries: without in-batch negatives there is one.
            self._fail("symmetric", "false, or true with contrast.in_batch_negatives=true")
        if self.margin > 0 and not self.normalize:
            # The margin is taken off a cosine; raw dot products have no fixed scale.
            self._fail("margin", "0, or > 0 with contrast.normalize=true (a margin on cosines)")


@dataclass
class OptimConfig(Section):
    SECTION: ClassVar[str] = "optim"
    lr: float = 2e-4
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-6
    weight_decay: float = 0.01
    warmup_steps: int = 10_000
    max_steps: int = 150_000
    clip_norm: float = 1.0
    schedule: str = "linear"  # the paper's warm-up + linear decay, or "wsd": warm-up, stable, decay
    decay_fraction: float = 0.1  # wsd: the share of max_steps over which the rate falls to 0

    def validate(self) -> None:
        self._number("lr", 0.0, low_open=True)
        betas = self.betas
        if (
            not isinstance(betas, (tuple, list))
            or len(betas) != 2
            or not all(isinstance(b, (int, float)) and not isinstance(b, bool) and 0 <= b < 1 for b in betas)
        ):
            self._fail("betas", "two numbers in [0, 1), e.g. [0.9, 0.98]")
        self.betas = tuple(float(b) for b in betas)
        self._number("eps", 0.0)
        self._number("weight_decay", 0.0)
        self._integer("warmup_steps", 0)
        self._integer("max_steps", 1)
        self._number("clip_norm", 0.0, low_open=True)
        self._choice("schedule", LR_SCHEDULES)
        self._number("decay_fraction", 0.0, 1.0, low_open=True)


@dataclass
class RunConfig(Section):
    SECTION: ClassVar[str] = "run"
    seed: int = 0
    save_every: int = 1000
    # A checkpoint also after the first step that ends this many minutes after the last one
    # (0: steps only), so that a stop loses minutes whatever the preset, --max-steps or device.
    save_every_minutes: float = 10.0
    keep_checkpoints: int = 3
    # With --validation (train/validation.py): every N steps and after the last, held-out MMLM
    # and TLM losses on val_examples examples each, retrieval on val_pairs pairs of each pair.
    eval_every: int = 1000
    val_examples: int = 64
    val_pairs: int = 256
    log_every: int = 10
    device: str | None = None  # default: cuda if available, else cpu
    bf16: bool = True  # autocast on GPU; CPU runs compute in fp32 unless cpu_bf16
    cpu_bf16: bool = False  # bf16 autocast on a CPU too: to see what bf16 does to a run without a GPU
    # torch.compile every encoder layer (dynamic shapes): fuses the element-wise work around
    # the matrix products; costs about half a minute of compiling at the start. null (the
    # default): on when the run is on a GPU, off on a CPU; the run prints what it chose.
    compile: bool | None = None
    # Weights & Biases: the metrics of metrics.jsonl and the resolved config (pip install
    # "infoxlm[wandb]"; WANDB_MODE=offline works); name defaults to the run directory's.
    wandb: bool = False
    wandb_project: str = "infoxlm"
    wandb_name: str | None = None
    wandb_entity: str | None = None
    # Every N steps, a Hugging Face directory with its model card in RUN/exports/step-N (0: never).
    export_every: int = 0
    # A collective operation (all-reduce, all-gather, barrier) that waits longer than this for
    # another process ends the run with a message instead of hanging: a rank that died or hangs.
    collective_timeout_s: int = 1800
    # The encoder's exact fast paths (model/fast_paths.py); false runs the plain reference
    # computation throughout (for comparisons: same numbers up to rounding, slower).
    fast_paths: bool = True
    # Several processes: ddp (a whole replica each) or fsdp (parameters, gradients and
    # optimizer state sharded with FSDP2; for models whose replica does not fit one GPU).
    parallelism: str = "ddp"
    # Checkpoints written by a background thread while training goes on (copied to host
    # memory first); off, the step waits for the write.
    async_checkpoint: bool = False
    # Activation checkpointing: each encoder layer's activations are recomputed in the
    # backward pass instead of kept (about a third more compute, far less activation memory;
    # the same gradients). For models or micro-batches that do not fit otherwise.
    activation_checkpointing: bool = False
    # On a GPU, the caching allocator grows its reserved segments in place
    # (expandable_segments:True) instead of reserving new ones: micro-batches whose packed
    # sizes change every step then reuse memory rather than waiting on cudaMalloc/cudaFree.
    # Left alone where the user set PYTORCH_CUDA_ALLOC_CONF.
    expandable_segments: bool = True
    # The next step's data built by a background thread (pinned for the copy to the GPU) while
    # this step runs; off, each step builds its own before it starts. The same data either way.
    # null (the default): on a GPU, off on a CPU, whose cores the step's own threads use.
    prefetch_data: bool | None = None
    # A packed pass's token count rounded up to a multiple of this (spare rows that nothing
    # reads; model/fast_paths.py), so that tensor sizes repeat between steps; 0 (the default):
    # not rounded. With expandable segments the allocator reuses its memory without it, and
    # on one H200 a base run stepped 6 % slower with 2,048 (BENCHMARKS.md).
    token_bucket: int = 0

    def validate(self) -> None:
        self._integer("seed", 0)
        if self.seed >= 2**63:
            self._fail("seed", "an integer below 2**63")
        self._integer("save_every", 1)
        self._number("save_every_minutes", 0.0)
        for name in ("eval_every", "val_examples", "val_pairs"):
            self._integer(name, 1)
        self._integer("keep_checkpoints", 0)  # 0 keeps every checkpoint
        self._integer("log_every", 1)
        if self.device is not None:
            try:
                kind = torch.device(self.device).type if isinstance(self.device, str) else None
            except RuntimeError:
                kind = None
            if kind not in ("cpu", "cuda"):
                self._fail("device", "cpu, cuda or cuda:N (CUDA's availability is checked when the run starts)")
        self._boolean("bf16")
        self._boolean("cpu_bf16")
        if self.compile is not None:
            self._boolean("compile")
        self._boolean("fast_paths")
        self._integer("collective_timeout_s", 1)
        self._choice("parallelism", PARALLELISMS)
        self._boolean("async_checkpoint")
        self._boolean("activation_checkpointing")
        self._boolean("expandable_segments")
        if self.prefetch_data is not None:
            self._boolean("prefetch_data")
        self._integer("token_bucket", 0)


@dataclass
class TrainConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    data: PipelineConfig = field(default_factory=PipelineConfig)
    objectives: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    contrast: ContrastConfig = field(default_factory=ContrastConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    run: RunConfig = field(default_factory=RunConfig)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> "TrainConfig":
        """Check every section and what spans sections; returns the config."""
        for section in (self.model, self.objectives, self.contrast, self.optim, self.run):
            section.validate()
        self.contrast.validate_combination()
        if not isinstance(self.data, PipelineConfig):
            raise ConfigError(f"data: expected a PipelineConfig, got {type(self.data).__name__}")
        if not self.data.enabled:
            raise ConfigError(
                "data.mmlm_batch_size, data.tlm_batch_size and data.xlco_batch_size are all 0: "
                "nothing to train; expected at least one objective with a positive batch size"
            )
        if self.data.seed not in (0, self.run.seed):  # 0: not set; a run resolves it to run.seed
            seed = self.data.seed
            raise ConfigError(f"data.seed={seed}: expected run.seed ({self.run.seed}), which the data follow; set run.seed={seed}")
        return self

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


# A field left unset (None) is parsed as the type its annotation names beside None.
_UNSET_PROTOTYPES = {"int | None": 0, "bool | None": False, "str | None": ""}
_KIND_NAMES = {int: "an integer", float: "a number", tuple: "a list of numbers"}


def _kind_name(value: Any) -> str:
    return _KIND_NAMES.get(type(value), type(value).__name__)


def _parse_value(text: str, current: Any, name: str, annotation: str = "") -> Any:
    """Interpret an override's text as the type of the field it replaces (``annotation``: the
    field's declared type, which decides for a field now None). ``null`` (or ``auto`` where
    the field is a number or switch that may be left unset) unsets a field."""
    lowered = text.strip().lower()
    optional = annotation in _UNSET_PROTOTYPES
    if lowered in ("none", "null") or (lowered == "auto" and optional and annotation != "str | None"):
        return None  # the section's validation refuses it where a value is required
    if current is None:
        current = _UNSET_PROTOTYPES.get(annotation)
    if isinstance(current, bool):
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{name}={text!r}: expected true or false")
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):  # (the latter: thousands of nested [ or {)
        value = text  # a bare string such as a path or a schedule name
    if current is None or isinstance(current, str):  # a name or a path: the text itself
        return value if isinstance(value, str) else text.strip()
    if isinstance(value, bool):  # JSON true / false where a number belongs
        raise ConfigError(f"{name}={text!r}: expected {_kind_name(current)}, not true or false")
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
        raise ConfigError(f"{name}={text!r}: expected {_kind_name(current)}") from None
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
        annotation = next(f.type for f in dataclasses.fields(section) if f.name == field_name)
        if section_name == "model" and field_name == "overrides":
            try:
                value = json.loads(text)
            except (json.JSONDecodeError, RecursionError):
                value = text  # refused by ModelConfig.validate
        else:
            value = _parse_value(text, current, name, annotation)
        _replace_section(config, section_name, {field_name: value})
    return config.validate()


def changed(config: TrainConfig, **sections: dict[str, Any]) -> TrainConfig:
    """``config`` with some fields of some sections replaced, from typed values (what presets
    and Python callers use; ``--set`` strings go through ``apply_overrides``): each changed
    section is a new one, validated as it is built, and the whole config is validated after
    the last. Returns the same (mutated) config.

    >>> changed(TrainConfig(), optim={"lr": 1e-4}, run={"seed": 3}).optim.lr
    0.0001
    >>> changed(TrainConfig(), contrast={"temperature": 0.0})
    Traceback (most recent call last):
    infoxlm.train.config.ConfigError: contrast.temperature=0.0: expected a finite number > 0
    """
    for name, fields in sections.items():
        _replace_section(config, name, fields)
    return config.validate()


def _replace_section(config: TrainConfig, name: str, fields: dict[str, Any]) -> None:
    """A new section ``name`` with ``fields`` replaced, validated at construction: an invalid
    value never lands in the config."""
    if name == "data":  # PipelineConfig (data/) says "field must be …" in its messages
        try:
            config.data = dataclasses.replace(config.data, **fields)
        except ValueError as err:
            raise ConfigError(f"data.{err}") from None
    else:
        setattr(config, name, dataclasses.replace(getattr(config, name), **fields))


def resolve_config(config: TrainConfig, device: torch.device | None = None) -> TrainConfig:
    """The one seed of the run decides the data as well (data.seed = run.seed); on ``device``
    (the run's, once known), ``run.compile`` and ``run.prefetch_data`` null → on a GPU only."""
    config.data = dataclasses.replace(config.data, seed=config.run.seed)
    if device is not None:
        gpu, r = device.type == "cuda", config.run
        config.run = dataclasses.replace(
            r,
            compile=gpu if r.compile is None else r.compile,
            prefetch_data=gpu if r.prefetch_data is None else r.prefetch_data,
        )
    return config


def load_config_file(path: Path) -> list[str]:
    """A JSON file shaped like ``TrainConfig.to_dict()`` (any subset) → override strings."""
    if not os.path.lexists(path):
        raise ConfigError(f"{path}: no such config file")
    tree = read_json(path, what="a JSON config file (sections of TrainConfig)", max_bytes=CONFIG_BYTES, error=ConfigError)
    if not isinstance(tree, dict):
        raise ConfigError(f"{path}: expected a JSON object of sections")
    return _flatten(tree)
