"""What continuing a pre-trained model (``model.init``, ``--init``) means for a run's config,
settled where ``infoxlm pretrain`` resolves it, before anything is read or written:

- the presets of the paper's continued training (``base``, ``large``, and ``xl``, ``xxl`` after
  them: no key-encoder warm-up, dropout 0) refuse to start without a model to continue; trained
  from scratch they would be neither of the paper's settings. The refusal names the command
  that trains their shape from scratch: ``scratch-base``, with the shape's fields set;
- the contrast layer a model records (``infoxlm_contrast_layer`` in its config.json, written by
  ``infoxlm export``; the ``contrast.layer`` a run directory's checkpoint holds) becomes
  ``contrast.layer``, unless the user set one (the preset's value is the layer of a model
  trained by that preset, not of the one continued);
- two things that make a short continued run unlearn what it started from are warned about:
  warm-up at or past the last step (the peak learning rate is never reached, as finetune
  warns), and a learning rate a from-scratch preset chose.

The checks read the command's choices (the preset's name, the fields the user set), so they
live at the command line's edge; a Python caller of ``pretrain()`` states its config whole.

    >>> from_scratch_command("large")
    '--preset scratch-base --set model.size=large --set contrast.layer=12'
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..model.hub import read_contrast_layer
from .checkpoint import checkpoint_path, load_checkpoint, state_json
from .config import ConfigError, TrainConfig
from .model_source import RUN, resolve_model
from .optim import warmup_unreached
from .presets import preset

CONTINUING_PRESETS = ("base", "large", "xl", "xxl")
FROM_SCRATCH_PRESET = "scratch-base"
# What makes a preset's shape (and what such a shape needs to run): the --set lines that turn
# scratch-base into the same model trained from scratch.
SHAPE_FIELDS = ("model.size", "contrast.layer", "run.parallelism")


def from_scratch_command(name: str) -> str:
    """The ``infoxlm pretrain`` options that train preset ``name``'s shape from scratch with the
    paper's from-scratch recipe."""
    ours, scratch = preset(name), preset(FROM_SCRATCH_PRESET)
    sets = [f"--set {field}={_field(ours, field)}" for field in SHAPE_FIELDS if _field(ours, field) != _field(scratch, field)]
    return " ".join([f"--preset {FROM_SCRATCH_PRESET}", *sets])


def refuse_without_init(name: str, config: TrainConfig) -> None:
    """A continuing preset with no model to continue: ``ConfigError`` in one line."""
    if name in CONTINUING_PRESETS and not config.model.init:
        raise ConfigError(
            f"--preset {name} continues a pre-trained model: pass --init MODEL (a Hugging Face XLM-R directory, "
            f"a sentence-transformers export or a run directory); to train its shape from scratch use "
            f"{from_scratch_command(name)} (the paper's from-scratch recipe: key-encoder warm-up, dropout 0.1)"
        )


def recorded_contrast_layer(init: str | Path) -> int | None:
    """The contrast layer model ``init`` records, read from its small files (a run's from its
    checkpoint's config); None if none."""
    source = resolve_model(init, flag="--init", step_flag=None)
    if source.kind != RUN:
        return read_contrast_layer(source.weights)
    # A run's own: the layer the checkpoint continued from was trained on, read from that
    # checkpoint as `infoxlm export` reads it. RUN/config.json is the config of the run's last
    # start and can name another model than its checkpoints hold (a run restarted elsewhere, a
    # file copied in), so it is not asked.
    found = checkpoint_path(source.path, source.step)
    state = load_checkpoint(found, keys=["config"])  # no tensor is read
    if "config" not in state:
        return None
    try:
        layer = state_json(state, "config", found)["contrast"]["layer"]
    except (KeyError, TypeError):
        return None
    return layer if isinstance(layer, int) and not isinstance(layer, bool) else None


def adopt_recorded_layer(config: TrainConfig, name: str, user_set: set[str]) -> str | None:
    """Set ``contrast.layer`` to the one ``model.init`` records unless the user set it; returns
    the line that says which layer the run uses and why (None without ``model.init``)."""
    init = config.model.init
    if not init:
        return None
    # Where the model came from: the user's --init (or model.init), or the preset's own model
    # (paper-demo continues the shipped checkpoint without an --init).
    source = f"--init {init}" if "model.init" in user_set else f"preset {name}'s model.init {init}"
    recorded, layer = recorded_contrast_layer(init), config.contrast.layer
    if "contrast.layer" in user_set:
        said = f"records {recorded}" if recorded is not None else "records none"
        return f"contrast.layer {layer} (as set; {source} {said})"
    if recorded is None:
        return f"contrast.layer {layer} (preset {name}'s; {source} records none)"
    config.contrast = dataclasses.replace(config.contrast, layer=recorded)  # validated as it is made
    if "model.init" not in user_set:
        return f"contrast.layer {recorded} (recorded by {source})"
    return f"contrast.layer {recorded} (recorded by {source}; preset {name} has {layer})"


def continuation_warnings(config: TrainConfig, name: str, user_set: set[str]) -> list[str]:
    """``warning: …`` lines for a schedule that never reaches its peak and, while continuing, a
    learning rate that a from-scratch preset chose."""
    o, warnings = config.optim, []
    unreached = warmup_unreached(o.warmup_steps, o.max_steps)
    if unreached:
        warnings.append(f"warning: {unreached} (optim.warmup_steps; lower it with --set optim.warmup_steps=N)")
    from_scratch = name not in CONTINUING_PRESETS and not preset(name).model.init  # paper-demo continues its own
    if config.model.init and from_scratch and "optim.lr" not in user_set:
        warnings.append(
            f"warning: optim.lr={o.lr:g} is preset {name}'s, a learning rate for training from scratch, and --init "
            f"continues a trained model, which a from-scratch rate can undo (the paper continues XLM-R base at "
            f"{_short(preset('base').optim.lr)} and large at {_short(preset('large').optim.lr)}); choose one with --set optim.lr=…"
        )
    return warnings


def _short(rate: float) -> str:
    """2e-4 rather than 0.0002."""
    return f"{rate:.0e}".replace("e-0", "e-")


def _field(config: TrainConfig, dotted: str):
    section, name = dotted.split(".")
    return getattr(getattr(config, section), name)
