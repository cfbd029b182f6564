"""The model a run trains, built from its config one way for the trainer and ``infoxlm bench``.

``build_model`` makes the query encoder (fresh, of ``model.size``, or continued from
``model.init``), the run's objectives on it (objectives/registry.py: MMLM, TLM, XLCO's
momentum contrast, each when its batch size is positive) and the module holding them all
(``JointModel``), with the fast paths and activation checkpointing the config
asks for, chosen here once. ``joint_step.build_joint_step`` then puts it on the device and
in parallel. The trainer (loop.py) and the benchmark (bench/engine_step.py) both call it, so
the model the benchmark times is the one training builds.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from ..model.config import EncoderConfig
from ..model.encoder import Encoder
from ..model.fast_paths import FastPaths
from ..objectives.objective import Objective
from ..objectives.registry import build_objectives as build_registered
from .config import TrainConfig
from .errors import TrainingError
from .joint_model import JointModel
from .model_source import open_model, resolve_model
from .store_identity import TOKENIZER_FILES, tokenizer_file_fingerprints


def build_model(
    config: TrainConfig,
    vocab_size: int,
    *,
    distributed: bool = False,
    fast_paths: FastPaths | None = None,
    store_root: Path | None = None,
    check_encoder: Callable[[EncoderConfig], None] | None = None,
) -> JointModel:
    """The encoder and the run's objectives, in one ``JointModel``, on the CPU.

    ``vocab_size``: the token store's (a fresh encoder's vocabulary; an ``model.init`` one
    must have it, else a TrainingError naming ``store_root``). ``fast_paths``: default, the
    trainer's choice (``run.fast_paths``; the in-place word gradient in one process only).
    ``check_encoder``: called with the encoder's config before anything is built on it (a
    resume compares it with its checkpoint's, so that a model of another shape is named as
    such). The weights are drawn from torch's RNG: seed it first."""
    if fast_paths is None:
        fast_paths = training_fast_paths(config, distributed)
    encoder = build_encoder(config, vocab_size, fast_paths, store_root=store_root)
    if check_encoder is not None:
        check_encoder(encoder.config)
    return JointModel(encoder, build_objectives(config, encoder))


def training_fast_paths(config: TrainConfig, distributed: bool) -> FastPaths:
    """``run.fast_paths``: every fast path that holds here (the in-place word-embedding
    gradient in a single process only; the token bucket of ``run.token_bucket``), or the plain
    reference path."""
    if not config.run.fast_paths:
        return FastPaths.plain()
    return FastPaths.training(single_process=not distributed, token_bucket=config.run.token_bucket)


def build_encoder(config: TrainConfig, vocab_size: int, fast_paths: FastPaths, *, store_root: Path | None = None) -> Encoder:
    """The query encoder: ``model.init``'s weights or fresh ones (``model.init_scheme``),
    ``model.dropout``, the pooler frozen. Its fast paths and activation checkpointing are
    chosen here, once: every encoder built from this one (the key encoder) keeps them."""
    cfg = config.model
    # The key encoder, built from this one, runs without gradients: nothing to recompute.
    checkpointing = config.run.activation_checkpointing
    if cfg.init:
        encoder = encoder_to_continue(cfg.init, fast_paths, activation_checkpointing=checkpointing)
        if encoder.config.vocab_size != vocab_size:
            raise TrainingError(
                f"--init {cfg.init}: vocabulary of {encoder.config.vocab_size} pieces, but the store "
                f"{store_root} was tokenized with {vocab_size}; prepare it with that model's tokenizer"
            )
    else:
        shape = EncoderConfig.of_size(cfg.size, vocab_size=vocab_size, **cfg.overrides)
        encoder = Encoder(shape, fast_paths, activation_checkpointing=checkpointing)
        encoder.reset_parameters(cfg.init_scheme)
    encoder.set_dropout(cfg.dropout)
    encoder.pooler.requires_grad_(False)  # not trained by any objective; kept for checkpoints
    return encoder


def build_objectives(config: TrainConfig, encoder: Encoder) -> list[Objective]:
    """The run's objectives on ``encoder`` (objectives/registry.py: MMLM, TLM, XLCO and any
    registered one, each on where the config turns it on). A value one cannot take is a
    TrainingError naming the field."""
    if config.data.xlco_batch_size > 0 and not 1 <= config.contrast.layer <= encoder.num_layers:
        raise TrainingError(f"contrast.layer={config.contrast.layer}: the encoder has layers 1 … {encoder.num_layers}")
    try:
        return build_registered(config, encoder)
    except ValueError as err:  # the built-in ones' messages start with the field: "layer=9: …"
        raise TrainingError(f"objectives: {err}") from None


def encoder_to_continue(
    init: str | Path, fast_paths: FastPaths = FastPaths(), *, activation_checkpointing: bool = False
) -> Encoder:
    """``model.init``: a Hugging Face XLM-R directory, a sentence-transformers export (its
    Transformer module's weights) or a run directory (the weights of its latest checkpoint, as
    `infoxlm export` writes them, without its optimizer state); see model_source.py. Built with
    ``fast_paths`` and ``activation_checkpointing`` (see ``Encoder``)."""
    with open_model(init, flag="--init", step_flag=None) as model:
        return Encoder.from_pretrained(
            model.directory, fast_paths=fast_paths, activation_checkpointing=activation_checkpointing
        )


def check_init_tokenizer(init: str, store_root: Path, store_fingerprint: str | None, *, warn: bool) -> None:
    """--init's tokenizer must be the store's: the model's ids must mean the store's pieces.
    A model without a tokenizer file cannot be checked: a warning on stderr where ``warn``."""
    source = resolve_model(init, flag="--init", step_flag=None)
    theirs = tokenizer_file_fingerprints(source.tokenizer) if source.tokenizer is not None else {}
    if not theirs:
        if warn:
            print(
                f"warning: --init {init} has no tokenizer file ({' or '.join(TOKENIZER_FILES)}); "
                f"cannot check that {store_root} was tokenized with the model's tokenizer",
                file=sys.stderr,
                flush=True,
            )
        return
    if store_fingerprint not in theirs.values():
        name, fingerprint = next(iter(theirs.items()))
        raise TrainingError(
            f"--init {init}: its tokenizer ({name}, {fingerprint[:12]}…) is not the one {store_root} "
            f"was tokenized with ({store_fingerprint[:12] if store_fingerprint else None}…); prepare the store with the model's tokenizer"
        )
