"""A run's encoder as a Hugging Face XLM-R directory: ``infoxlm export`` and the exports a run
writes as it goes (``run.export_every``) share one writer.

The directory holds the query encoder with its MLM head, the run's tokenizer (the store's copy
kept in RUN/tokenizer) and, in ``config.json``, the universal layer XLCO contrasted
(``infoxlm_contrast_layer``, which ``infoxlm eval tatoeba`` reads as its default layer where
XTREME's rule does not apply). Dropout is XLM-R's 0.1 whatever pre-training used, since
fine-tuning from the export expects it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

import torch

from ..model.config import EncoderConfig
from ..model.encoder import Encoder
from ..model.hub import record_contrast_layer
from ..tokenizer import Tokenizer
from .checkpoint import (
    checkpoint_path, latest_checkpoint, list_checkpoints, load_checkpoint, refuse_non_finite, state_json, verified_checkpoint,
)
from .errors import TrainingError

__all__ = ["export", "write_run_encoder"]


def write_run_encoder(
    output: Path,
    run_dir: Path,
    config: EncoderConfig,
    weights: Mapping[str, torch.Tensor],
    contrast_layer: int,
    *,
    loaded_parts: set[str] | None = None,
) -> Path:
    """Write ``weights`` (an encoder's state dict) as a Hugging Face directory ``output``.

    ``loaded_parts``: the optional parts that came from a checkpoint (the pooler is written
    only then; see ``hub.save_encoder``)."""
    encoder = Encoder(dataclasses.replace(config, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1))
    encoder.load_state_dict(weights)
    encoder.loaded_parts = set(loaded_parts or ())
    tokenizer_dir = Path(run_dir) / "tokenizer"
    tokenizer = Tokenizer.from_pretrained(tokenizer_dir) if tokenizer_dir.is_dir() else None
    encoder.save_pretrained(output, tokenizer)
    record_contrast_layer(output, contrast_layer)
    return output


def export(run_dir: str | Path, output: str | Path, step: int | None = None) -> Path:
    """Write a run's query encoder + MLM head (+ tokenizer) as a Hugging Face XLM-R directory."""
    run_dir = Path(run_dir)
    if step is None:
        found = latest_checkpoint(run_dir)
        if found is None:
            raise TrainingError(f"{run_dir}: no checkpoint to export (is it an `infoxlm pretrain` run directory?)")
    else:
        found = checkpoint_path(run_dir, step)
        if not found.is_dir():
            steps = [s for s, _ in list_checkpoints(run_dir)]
            raise TrainingError(f"{run_dir}: no checkpoint of step {step}; available: {steps}")
    state = load_checkpoint(verified_checkpoint(found))  # its files match their digests
    refuse_non_finite(state["model"], str(found), "refusing to export a diverged model: pick an earlier checkpoint with --step")
    config = EncoderConfig(**state_json(state, "encoder_config", found))
    layer = state_json(state, "config", found)["contrast"]["layer"]
    return write_run_encoder(Path(output), run_dir, config, state["model"], layer)
