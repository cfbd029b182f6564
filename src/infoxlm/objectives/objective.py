"""What a pre-training objective is to the trainer: one unit that the joint step calls
without knowing its name.

An objective reads one of the data pipeline's example streams (``stream``: "mmlm" blocks,
"tlm" concatenated pairs or "xlco" pair views, data/pipeline.py), gives the summed loss of a
micro-batch of it (``loss``), says what that sum is divided by (``count``: masked tokens,
pairs, …) and which trainable parameters it reaches, and may act around each optimizer step
(``before_step``, ``before_micro_steps``, ``after_step``: XLCO's queue and momentum encoder live
there). The joint step (train/joint_step.py) runs every configured objective through these
calls, and so do the FLOP count and the benchmark. MMLM and TLM are objectives/masked_lm.py,
XLCO objectives/xlco.py; registry.py says how a run builds them and how to add one.

A fourth objective is one subclass and a ``registry.register`` call; docs/architecture.md
("Adding an objective") trains one through ``pretrain``, and tests/objectives/test_registry.py
checks that it trains, is logged, checkpointed and resumed like the built-in ones.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Protocol

import torch
from torch import nn

__all__ = ["Draws", "EncoderPass", "LossTerm", "Objective", "StepAbandoned", "StepContext", "VocabularyTargets"]


class StepAbandoned(Exception):
    """Raised by an objective's long work before a step's update (a queue pre-fill) when a stop
    was asked for (``StepContext.stop_requested``): the step has not run, nothing it would
    have written is kept, and the run ends at the step before it."""


@dataclass
class LossTerm:
    """One micro-batch's summed (not averaged) loss, a 0-d tensor with its graph; ``extras``:
    other 0-d sums the objective reports per step (e.g. XLCO's queries ranked first), summed
    over micro-steps and ranks on the device and read once a step (``Objective.step_metrics``)."""

    loss_sum: torch.Tensor
    extras: dict[str, torch.Tensor] = field(default_factory=dict)


@dataclass
class VocabularyTargets:
    """What a token-predicting objective hands the model instead of a loss: final states (N, d)
    and the token ids (N,) the tied MLM head should predict there. The model runs one head
    call over every such objective of a micro-step (JointModel), so that the V × d decoder
    gradient is made once, not once per objective; the head is row-wise, so each objective's
    sum is what a call of its own gives."""

    states: torch.Tensor  # (N, d)
    targets: torch.Tensor  # (N,) long


@dataclass(frozen=True)
class EncoderPass:
    """One pass of an objective's micro-batch through the encoder, as the memory estimate
    counts it (train/token_budget.py): ``share`` of the micro-batch's tokens, through
    ``layers`` layers (None: every one), with gradients (each layer's activations kept for the
    backward pass) or without (one layer's alive at a time); ``scored``: its masked share of
    tokens scored over the vocabulary by the MLM head (logits and their gradient)."""

    share: float = 1.0
    layers: int | None = None
    gradients: bool = True
    scored: bool = False


@dataclass
class Draws:
    """``batches(j)``: this rank's micro-batches of draw ``j`` (on the device, as many on every
    rank); each draw holds ``examples_per_draw`` examples over all ranks (the stream's batch size)."""

    examples_per_draw: int
    batches: Callable[[int], list]


class StepContext(Protocol):
    """What the joint step offers an objective's hooks (train/joint_step.py implements it)."""

    progress: bool  # whether long work (a queue pre-fill) may draw a progress bar

    def side_pass(self, objective: str, method: str, *args: Any) -> Any:
        """``objective.method(encoder, *args)`` run inside the model's forward, without
        gradient, so that DDP and FSDP see it as they see a training micro-step (FSDP gathers
        the weights it reads)."""

    def gather_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """Every rank's rows (n_r, …), concatenated in rank order; ``rows`` itself in one process."""

    def draws(self, stream: str, seed_offset: int) -> "Draws":
        """Examples of ``stream`` drawn for the objective's own purpose (a queue's pre-fill),
        from the run's seed plus ``seed_offset``, apart from training's."""

    def stop_requested(self) -> bool:
        """Whether the run was asked to stop (SIGTERM, SIGUSR1, a first Ctrl-C), the same answer
        on every rank: long work before the update may then raise ``StepAbandoned``."""

    def phase(self, name: str) -> contextlib.AbstractContextManager:
        """A part of the step the benchmark times (``bench/timing.PhaseTimer``)."""


class Objective(nn.Module):
    """One pre-training objective. Subclasses set ``name`` (its loss is logged as
    ``loss/NAME``) and ``stream``, and implement ``count`` and ``loss``; the rest has
    defaults that do nothing. An ``nn.Module``, so that what it trains (a projection, a head)
    is trained, saved and distributed with the encoder (its state sits in checkpoints under
    ``state_key``)."""

    name: str = ""
    stream: str = ""  # the data pipeline's examples it reads: "mmlm", "tlm" or "xlco"
    extras: tuple[str, ...] = ()  # the names of its LossTerm.extras (every micro-batch's, fillers' too)
    predicts_tokens: bool = False  # its loss is VocabularyTargets, which the model's one head call scores

    def __init__(self, weight: float = 1.0):
        super().__init__()
        self.weight = weight  # its weight w in the joint loss Σ w · L

    @property
    def state_key(self) -> str:
        """Where its parameters and buffers sit in the joint model's state (and checkpoints)."""
        return self.name

    # --- the step -----------------------------------------------------------------------

    def active_at(self, step: int) -> bool:
        """Whether it trains at optimizer step ``step`` (0-based); its examples are not drawn
        into the step otherwise."""
        return True

    def count(self, stats) -> int:
        """The normaliser of this rank's part of a step (a ``data.pipeline.ObjectiveStats`` of
        its stream): the step's loss is the sum over all ranks and micro-steps divided by the
        sum of these."""
        raise NotImplementedError

    def loss(self, encoder: nn.Module, batch) -> LossTerm | VocabularyTargets:
        """The summed loss of one micro-batch of its stream (a filler's is counted 0 by the model)."""
        raise NotImplementedError

    def reached_parameters(self, encoder: nn.Module) -> Iterable[nn.Parameter]:
        """The trainable parameters its loss reaches (default: the whole encoder and its own);
        the model touches the rest, so that every parameter has a gradient every step."""
        return [*encoder.parameters(), *self.parameters()]

    def step_metrics(self, extras: dict[str, float], count: int) -> dict[str, float]:
        """Metrics from its ``LossTerm.extras`` summed over the step (all ranks) and its count."""
        return {}

    def flops(self, batches: list, shape) -> float:
        """Useful FLOPs of training on ``batches`` (its stream's, this rank's) for an encoder of
        ``shape`` (``model.flops.ModelShape``): the numerator of MFU. 0: not counted."""
        return 0.0

    def pending_flops(self, batches: list, shape, examples_per_step: int) -> float:
        """FLOPs of its work before its first step still to do (XLCO: the queue's pre-fill),
        for a step of ``batches`` (this rank's) of ``examples_per_step`` examples in all."""
        return 0.0

    def encoder_passes(self) -> tuple[EncoderPass, ...]:
        """How one micro-batch of it goes through the encoder (default: every token through
        every layer with gradients, scored over the vocabulary if it predicts tokens), so that
        a run's automatic micro-batch budget counts its memory."""
        return (EncoderPass(scored=self.predicts_tokens),)

    def extra_encoders(self) -> list[nn.Module]:
        """Encoders of its own (XLCO's key encoder) that FSDP shards layer by layer, as the query encoder."""
        return []

    # --- around the step ----------------------------------------------------------------

    def before_step(self, step: int, encoder: nn.Module, context: StepContext) -> None:
        """Before step ``step``'s data is used (XLCO: the warm-up's end, the queue's pre-fill)."""

    def before_micro_steps(self, batches: list, context: StepContext) -> None:
        """With the step's micro-batches of its stream on the device, before the first
        micro-step (XLCO with in-step negatives: every key of the step)."""

    def after_step(self, step: int, encoder: nn.Module, context: StepContext) -> dict[str, float]:
        """After the optimizer step (XLCO: the momentum update, the enqueue); metrics to log."""
        return {}
