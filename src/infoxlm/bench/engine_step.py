"""infoxlm's joint training step, as the trainer runs it, with phase timers around its parts.

``EngineStep`` builds the model with ``train.model_build.build_model`` (the trainer's builder:
encoder, fast paths, ``MomentumContrast``, ``JointModel``) without a token store or run
directory, and hands it to ``train.joint_step.build_joint_step``, the function the trainer
builds its step with (device, compiled layers, AdamW and its schedule); it then runs that
``JointStep`` with a ``PhaseTimer`` as its phase hook. Its fp32 loss check reads the step's
own pieces (its micro-batches, micro-steps, counts and sums). What a world of one never does
(all-reduce, DDP, checkpoints) it does not do here either, nor the queue pre-fill (the
benchmark fills the queue itself, see step_benchmark.fill_queue).
tests/bench/test_engine_step.py checks that it updates the weights exactly as
``Trainer.train_step`` does.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from ..data.pipeline import StepData
from ..model.fast_paths import FastPaths
from ..train.config import TrainConfig
from ..train.distributed import World
from ..train.joint_step import SumsOnDevice, build_joint_step, micro_steps, step_counts
from ..train.model_build import build_model
from ..data.synthetic_batches import step_tokens
from .timing import PhaseTimer, optimizer_state_tensors, tensor_bytes


@dataclass
class StepOutcome:
    tokens: int  # real input tokens of all three objectives (both XLCO views)
    losses: dict[str, float]  # mean loss per objective


class EngineStep:
    """Builds infoxlm's model, contrast and optimizer for ``config`` and runs its step.

    ``config`` is a TrainConfig with XLCO on; its model section gives the shape, with
    ``vocab_size`` pieces. The weights are drawn with ``torch.manual_seed(seed)``.
    ``fast_paths``: the encoders' (default: the trainer's in one process, or the plain path
    with ``run.fast_paths=false``).
    """

    name = "infoxlm"

    def __init__(
        self,
        config: TrainConfig,
        device: torch.device,
        *,
        vocab_size: int,
        seed: int = 0,
        fast_paths: FastPaths | None = None,
    ):
        self.config = config
        self.device = device
        self.world = World(device=device)  # a world of one process on this device
        torch.manual_seed(seed)
        model = build_model(config, vocab_size, fast_paths=fast_paths)
        self.encoder, self.contrast = model.encoder, model.contrast
        self.joint_step = build_joint_step(config, self.world, model)
        self.model, self.optimizer, self.scheduler = self.joint_step.model, self.joint_step.optimizer, self.joint_step.scheduler
        self.steps_done = 0

    def state_bytes(self) -> int:
        """Bytes held between steps: weights, optimizer state, key encoder, queue."""
        tensors = [*self.encoder.parameters(), *self.encoder.buffers(), *self.contrast.parameters()]
        tensors += [*self.contrast.buffers(), *optimizer_state_tensors(self.optimizer)]
        return tensor_bytes(tensors)

    @torch.no_grad()
    def losses(self, data: StepData) -> dict[str, float]:
        """Mean loss per objective of a step's batches, in fp32, changing nothing: the step's
        micro-steps (with in-batch negatives, the step's keys first) without their backward."""
        batches = self.joint_step.device_batches(data, xlco_active=True)
        no_seeds = [None] * len(batches["xlco"])
        step_keys = None
        if batches["xlco"] and self.contrast.in_batch_negatives:
            step_keys = self.joint_step.encode_step_keys(batches["xlco"], no_seeds, contextlib.nullcontext())
        sums = SumsOnDevice(self.device)
        for picked, _, _ in micro_steps(batches, no_seeds):
            sums.add(self.model(picked["mmlm"], picked["tlm"], picked["xlco"], step_keys=step_keys))
        return sums.read(self.world).means(step_counts(data))

    def step(self, data_for_step, index: int, timer: PhaseTimer) -> StepOutcome:
        """One optimizer step on ``data_for_step(index)`` (a StepData), phases timed by ``timer``."""
        with timer("data"):
            data: StepData = data_for_step(index)
        result = self.joint_step(data, self.steps_done, True, timer)  # the trainer's step, XLCO on
        self.steps_done += 1
        return StepOutcome(tokens=step_tokens(data), losses=result.sums.means(result.counts))
