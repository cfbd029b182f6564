"""infoxlm's joint training step, as the trainer runs it, with phase timers around its parts.

``EngineStep`` builds the model with ``train.model_build.build_model`` (the trainer's builder:
encoder, fast paths, the objectives, ``JointModel``) without a token store or run directory,
and hands it to ``train.joint_step.build_joint_step``, the function the trainer builds its
step with (device, compiled layers, AdamW and its schedule); it then runs that ``JointStep``
with a ``PhaseTimer`` as its phase hook, the objectives' hooks before and after the update
included (XLCO's momentum update and enqueue). Its fp32 loss check runs the step's own
pieces (its micro-batches, the objectives' start-of-step hooks, the model's forward, counts
and sums) without the backward. What a world of one never does (all-reduce, DDP,
checkpoints) it does not do here either; the queue it fills itself before timing
(step_benchmark.fill_queue), as it has no token store to draw a pre-fill from.
tests/bench/test_engine_step.py checks that it updates the weights exactly as
``Trainer.train_step`` does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..data.pipeline import StepData
from ..model.fast_paths import FastPaths
from ..train.config import TrainConfig
from ..train.distributed import World
from ..train.joint_step import NO_PHASES, StepContext, build_joint_step, micro_steps, step_counts
from ..train.step_sums import SumsOnDevice
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
        micro-steps (after the objectives' start-of-step hooks: XLCO's step keys) without
        their backward nor their after-step hooks (what XLCO collected to enqueue, the next
        step's start forgets)."""
        step, objectives = self.joint_step, self.model.objectives
        batches = step.device_batches(data, objectives)
        context = StepContext(step, NO_PHASES)
        for objective in objectives:
            objective.before_micro_steps(batches[objective.stream], context)
        sums = SumsOnDevice(objectives, self.device)
        for picked, _ in micro_steps(batches):
            sums.add(self.model({o.name: picked[o.stream] for o in objectives if picked[o.stream] is not None}))
        return sums.read(self.world).means(step_counts(data, objectives, self.steps_done))

    def step(self, data_for_step, index: int, timer: PhaseTimer) -> StepOutcome:
        """One optimizer step on ``data_for_step(index)`` (a StepData), phases timed by ``timer``."""
        with timer("data"):
            data: StepData = data_for_step(index)
        result = self.joint_step(data, self.steps_done, timer)  # the trainer's step
        self.steps_done += 1
        return StepOutcome(tokens=step_tokens(data), losses=result.sums.means(result.counts))
