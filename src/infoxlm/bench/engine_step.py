"""infoxlm's joint training step, as the trainer runs it, with phase timers around its parts.

``EngineStep`` builds the encoder (with the trainer's fast paths) and ``MomentumContrast``
without a token store or run directory, and hands them to ``train.joint_step.build_joint_step``,
the function the trainer builds its step with (device, compiled layers, ``JointModel``, AdamW
and its schedule); it then runs that ``JointStep`` with a ``PhaseTimer`` as its phase hook.
What a world of one never does (all-reduce, DDP, checkpoints, the queue pre-fill) it does not
do here either. tests/bench/test_engine_step.py checks that it updates the weights exactly as
``Trainer.train_step`` does.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from ..data.pipeline import StepData
from ..model.config import EncoderConfig
from ..model.encoder import Encoder
from ..model.fast_paths import FastPaths
from ..objectives.xlco import MomentumContrast
from ..train.config import TrainConfig
from ..train.distributed import World
from ..train.joint_step import OBJECTIVES, aligned_micro_batch, build_joint_step
from .synthetic_batches import step_tokens
from .timing import PhaseTimer, optimizer_state_tensors, tensor_bytes


def step_counts(data: StepData) -> dict[str, int]:
    """The loss normalisers of a step: masked tokens (MMLM, TLM), sentences (XLCO)."""
    return {
        "mmlm": data.stats["mmlm"].num_masked,
        "tlm": data.stats["tlm"].num_masked,
        "xlco": data.stats["xlco"].num_examples,
    }


def autocast_for(device: torch.device, bf16: bool):
    """The trainer's autocast: bf16 on a GPU when asked, fp32 on a CPU."""
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda" and bf16)


@dataclass
class StepOutcome:
    tokens: int  # real input tokens of all three objectives (both XLCO views)
    losses: dict[str, float]  # mean loss per objective


class EngineStep:
    """Builds infoxlm's model, contrast and optimizer for ``config`` and runs its step.

    ``config`` is a TrainConfig (the model section is ignored: ``encoder_config`` gives the
    shape). The weights are drawn with ``torch.manual_seed(seed)``; dropout is set to
    ``config.model.dropout``. ``fast_paths``: the encoders' (default: the trainer's in one
    process, or the plain path with ``run.fast_paths=false``).
    """

    name = "infoxlm"

    def __init__(
        self,
        encoder_config: EncoderConfig,
        config: TrainConfig,
        device: torch.device,
        *,
        seed: int = 0,
        fast_paths: FastPaths | None = None,
    ):
        self.config = config
        self.device = device
        torch.manual_seed(seed)
        if fast_paths is None:  # the trainer's choice in a world of one (run.fast_paths=false: plain)
            fast_paths = FastPaths.training(single_process=True) if config.run.fast_paths else FastPaths.plain()
        encoder = Encoder(encoder_config, fast_paths)
        encoder.set_dropout(config.model.dropout)
        encoder.pooler.requires_grad_(False)  # as the trainer: no objective trains it
        self.encoder, self.contrast = encoder, MomentumContrast.from_config(encoder, config.contrast)
        # The trainer's own builder, in a world of one process on this device.
        self.joint_step = build_joint_step(config, World(device=device), self.encoder, self.contrast)
        self.model, self.optimizer, self.scheduler = self.joint_step.model, self.joint_step.optimizer, self.joint_step.scheduler
        self.steps_done = 0

    def autocast(self):
        return autocast_for(self.device, self.config.run.bf16)

    def state_bytes(self) -> int:
        """Bytes held between steps: weights, optimizer state, key encoder, queue."""
        tensors = [*self.encoder.parameters(), *self.encoder.buffers(), *self.contrast.parameters()]
        tensors += [*self.contrast.buffers(), *optimizer_state_tensors(self.optimizer)]
        return tensor_bytes(tensors)

    @torch.no_grad()
    def losses(self, data: StepData) -> dict[str, float]:
        """Mean loss per objective of a step's batches, in fp32, changing nothing."""
        counts = step_counts(data)
        batches = {name: [b.to(self.device) for b in getattr(data, name)] for name in OBJECTIVES}
        sums = dict.fromkeys(OBJECTIVES, 0.0)
        micro_steps = max(len(b) for b in batches.values())
        step_keys = None  # with in-batch negatives, every key of the step, as the step computes them
        if batches["xlco"] and self.contrast.in_batch_negatives:
            seeds = [None] * len(batches["xlco"])
            step_keys = self.joint_step.encode_step_keys(batches["xlco"], seeds, contextlib.nullcontext())
        for i in range(micro_steps):
            picked = {name: aligned_micro_batch(b, i, micro_steps) for name, b in batches.items()}
            out = self.model(picked["mmlm"], picked["tlm"], picked["xlco"], step_keys=step_keys)
            for name in OBJECTIVES:
                if getattr(out, name) is not None:
                    sums[name] += float(getattr(out, name))
        return {name: sums[name] / counts[name] for name in OBJECTIVES if counts[name]}

    def step(self, data_for_step, index: int, timer: PhaseTimer) -> StepOutcome:
        """One optimizer step on ``data_for_step(index)`` (a StepData), phases timed by ``timer``."""
        with timer("data"):
            data: StepData = data_for_step(index)
        result = self.joint_step(data, self.steps_done, True, timer)  # the trainer's step, XLCO on
        self.steps_done += 1
        losses = {name: result.sums[j] / result.counts[name] for j, name in enumerate(OBJECTIVES) if result.counts[name]}
        return StepOutcome(tokens=step_tokens(data), losses=losses)
