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
import sys
import time
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
from .errors import CheckpointCorrupt, TrainingError, UnsafeCheckpoint

__all__ = ["export", "export_checkpoint", "write_run_encoder"]


def write_run_encoder(
    output: Path,
    run_dir: Path,
    config: EncoderConfig,
    weights: Mapping[str, torch.Tensor],
    run_config: dict,
    *,
    loaded_parts: set[str] | None = None,
) -> Path:
    """Write ``weights`` (an encoder's state dict) as a Hugging Face directory ``output``,
    recording the universal layer of ``run_config`` (the run's ``TrainConfig.to_dict()``) and
    whether the run contrasted there (a run without XLCO did not).

    ``loaded_parts``: the optional parts that came from a checkpoint (the pooler is written
    only then; see ``hub.save_encoder``)."""
    encoder = Encoder(dataclasses.replace(config, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1))
    encoder.load_state_dict(weights)
    encoder.loaded_parts = set(loaded_parts or ())
    tokenizer_dir = Path(run_dir) / "tokenizer"
    tokenizer = Tokenizer.from_pretrained(tokenizer_dir) if tokenizer_dir.is_dir() else None
    encoder.save_pretrained(output, tokenizer)
    contrasted = run_config.get("data", {}).get("xlco_batch_size", 1) > 0
    record_contrast_layer(output, run_config["contrast"]["layer"], contrasted)
    return output


def export(run_dir: str | Path, output: str | Path, step: int | None = None) -> Path:
    """Write a run's query encoder + MLM head (+ tokenizer) as a Hugging Face XLM-R directory."""
    export_checkpoint(run_dir, output, step)
    return Path(output)


def export_checkpoint(run_dir: str | Path, output: str | Path, step: int | None = None) -> int:
    """``export``, returning the step written: ``step``'s checkpoint, or the newest.

    A run still training deletes its oldest checkpoint once a newer one is in place (it keeps
    the last ``run.keep_checkpoints``), so the newest can vanish while it is read. Without
    ``step`` the export then reads the newest again and says so on stderr; with ``step`` it
    stops, naming the checkpoint that replaced it. Neither is called damaged."""
    run_dir = Path(run_dir)
    for _ in range(_TRIES):
        found = _checkpoint(run_dir, step)
        try:
            state = load_checkpoint(verified_checkpoint(found))  # its files match their digests
        except UnsafeCheckpoint:
            raise
        except (CheckpointCorrupt, OSError):  # OSError: a file gone between two reads of it
            newest = _replacement(run_dir, found)
            if newest is None:
                raise
            replaced = f"{found}: replaced by the newer {newest.name} while it was read (a run still training keeps only its newest checkpoints)"
            if step is not None:
                raise TrainingError(f"{replaced}; the newest is --step {_step_of(newest)}") from None
            print(f"note: {replaced}; exporting {newest.name}", file=sys.stderr, flush=True)
            continue
        refuse_non_finite(state["model"], str(found), "refusing to export a diverged model: pick an earlier checkpoint with --step")
        config = EncoderConfig(**state_json(state, "encoder_config", found))
        write_run_encoder(Path(output), run_dir, config, state["model"], state_json(state, "config", found))
        return _step_of(found)
    raise TrainingError(
        f"{run_dir}: its newest checkpoint was replaced by a newer one while it was read, {_TRIES} times over; "
        "export once the run has stopped, or from a run that keeps more (run.keep_checkpoints)"
    )


_TRIES = 5  # a run saving checkpoints faster than they can be read is a run to export later
# How long a checkpoint a run is deleting may take to vanish: rmtree removes its files first.
_REMOVAL_S = 2.0


def _checkpoint(run_dir: Path, step: int | None) -> Path:
    """``step``'s checkpoint directory, or the newest; a TrainingError where there is none."""
    if step is None:
        found = latest_checkpoint(run_dir)
        if found is None:
            raise TrainingError(f"{run_dir}: no checkpoint to export (is it an `infoxlm pretrain` run directory?)")
        return found
    found = checkpoint_path(run_dir, step)
    if not found.is_dir():
        steps = [s for s, _ in list_checkpoints(run_dir)]
        raise TrainingError(f"{run_dir}: no checkpoint of step {step}; available: {steps}")
    return found


def _step_of(checkpoint: Path) -> int:
    return int(checkpoint.name.removeprefix("step-"))


def _replacement(run_dir: Path, found: Path) -> Path | None:
    """The newest checkpoint, where ``found`` failed to read because a run removed it for that
    one: a newer checkpoint is in place and ``found`` is gone (within ``_REMOVAL_S``). None
    where ``found`` stays: it is damaged, and the error that said so stands."""
    newest = latest_checkpoint(run_dir)
    if newest is None or newest.name <= found.name:
        return None
    deadline = time.monotonic() + _REMOVAL_S
    while found.exists():
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)
    return latest_checkpoint(run_dir)
