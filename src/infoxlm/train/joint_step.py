"""The joint training step, top to bottom, and the one function that builds it.

``build_joint_step`` puts the model (``JointModel``, built by ``model_build.build_model``) on
the device, compiles its layers if asked, wraps it in DDP or shards it with FSDP in a world of
several processes, and makes the optimizer and the schedule; ``JointStep`` then runs one
optimizer step on one step's data: the objectives' hooks before it → micro-batches → losses
→ backward → clip → optimizer → the objectives' hooks after it. It names no objective: it
runs the model's (objectives/objective.py), whatever they are. The trainer (loop.py) and
``infoxlm bench`` (bench/engine_step.py) both build theirs here, so the step the benchmark
times is the step training runs, hooks included.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Iterator

import torch

from ..data.pipeline import FILLERS, OBJECTIVES, DataPipeline, StepData
from ..data.store import TokenStore
from ..model.encoder import Encoder
from ..objectives.objective import Draws, Objective
from .config import TrainConfig
from .device_memory import configure_allocator
from .distributed import World, all_gather_rows, all_reduce_max, sum_over_ranks
from .errors import NonFiniteStep
from .joint_model import JointModel, MicroStepLosses
from .optim import build_optimizer, build_scheduler
from .parallelism import clip_gradients_with_norm, distribute, fill_missing_gradients, is_sharded, no_gradient_sync
from .step_sums import StepResult, SumsOnDevice

__all__ = [
    "JointStep", "StepPhases", "aligned_micro_batch", "build_joint_step", "computes_in_bf16", "even_out",
    "micro_steps", "step_autocast", "step_counts",
]  # fmt: skip


def build_joint_step(
    config: TrainConfig, world: World, model: JointModel, *, store: TokenStore | None = None, progress: bool = False,
    stop_requested: Callable[[], bool] = lambda: False,
) -> "JointStep":
    """The step for this model (built with its fast paths): moved to the world's device, its
    layers compiled if ``run.compile``, in DDP or sharded by FSDP2 (``run.parallelism``) when
    there are several processes, AdamW with the warm-up / linear-decay schedule. ``store``:
    where an objective's own draws come from (XLCO's queue pre-fill); without one, an
    objective that needs them says so. ``progress``: an objective's long work (a queue
    pre-fill) draws a progress bar. ``stop_requested``: whether the run was asked to stop, the
    same on every rank, which such work reads to end early (``StepAbandoned``)."""
    configure_allocator(world.device, config.run.expandable_segments)  # before the first tensor goes to the GPU
    model.to(world.device)
    if config.run.compile:
        compile_encoders([model.encoder, *(e for o in model.objectives for e in o.extra_encoders())])
    parallel_model = distribute(model, world, config.run.parallelism, bf16=computes_in_bf16(config, world))
    o = config.optim
    optimizer = build_optimizer(
        model.trainable_parameters(), lr=o.lr, betas=tuple(o.betas), eps=o.eps, weight_decay=o.weight_decay
    )
    scheduler = build_scheduler(optimizer, o.warmup_steps, o.max_steps, o.schedule, o.decay_fraction)
    return JointStep(
        config, world, model, parallel_model, optimizer, scheduler, store=store, progress=progress, stop_requested=stop_requested
    )


class StepPhases:
    """The step's phase hook: ``with phases(name): …`` around each part of a training step.

    Parts: data, forward, backward, optimizer, and the objectives' own (XLCO: ema, queue;
    forward also around its step keys). This default does nothing; the benchmark passes a
    timer (``bench/timing.PhaseTimer``, which synchronises a GPU at each boundary).
    """

    def __call__(self, phase: str) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()


NO_PHASES = StepPhases()


class JointStep:
    """The joint step on one step's data. ``Trainer.train_step`` runs it; so does the
    benchmark (bench/), timing its phases through the ``phases`` hook.

    ``parallel_model`` is what the step calls: ``model`` itself in a world of one or sharded
    by FSDP2 (see parallelism.py), else its DistributedDataParallel wrapper.
    """

    def __init__(
        self,
        config: TrainConfig,
        world: World,
        model: JointModel,
        parallel_model: torch.nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        *,
        store: TokenStore | None = None,
        progress: bool = False,
        stop_requested: Callable[[], bool] = lambda: False,
    ):
        self.config, self.world, self.model, self.parallel_model = config, world, model, parallel_model
        self.optimizer, self.scheduler, self.store, self.progress = optimizer, scheduler, store, progress
        self.stop_requested = stop_requested
        self.parameters = model.trainable_parameters()
        self.sharded = is_sharded(parallel_model)

    @property
    def objectives(self) -> list[Objective]:
        return self.model.objectives

    def __call__(self, data: StepData, step: int, phases: StepPhases = NO_PHASES) -> StepResult:
        cfg, world = self.config, self.world
        context = StepContext(self, phases)
        for objective in self.objectives:
            objective.before_step(step, self.model.encoder, context)
        active = [o for o in self.objectives if o.active_at(step)]
        with phases("data"):
            batches = self.device_batches(data, active)
            counts = self.global_counts(data, step)
        sums = SumsOnDevice(self.objectives, world.device)
        for objective in active:
            objective.before_micro_steps(batches[objective.stream], context)
        autocast = step_autocast(cfg, world)
        for picked, last in micro_steps(batches):
            with no_gradient_sync(self.parallel_model, last):
                with phases("forward"):
                    with autocast:
                        # The last micro-step touches what no objective reached (see JointModel);
                        # FSDP gets zero gradients for them after the backward instead.
                        touch = last and not self.sharded
                        micro = {o.name: picked[o.stream] for o in active if picked[o.stream] is not None}
                        out: MicroStepLosses = self.parallel_model(micro, touch_unreached=touch)
                    loss = self.combine(out, counts) * world.size  # DDP averages over ranks; we want the sum
                    sums.add(out)
                with phases("backward"):
                    loss.backward()

        with phases("optimizer"):
            grad_norm, step_sums, lr = self.update(sums, counts, step)
        metrics: dict[str, float] = {}
        for objective in self.objectives:
            metrics.update(objective.step_metrics(step_sums.extras[objective.name], counts[objective.name]))
        for objective in self.objectives:
            metrics.update(objective.after_step(step, self.model.encoder, context))
        return StepResult(sums=step_sums, counts=counts, grad_norm=grad_norm, lr=lr, objective_metrics=metrics)

    # --- pieces of the step -----------------------------------------------------------------

    def update(self, sums: SumsOnDevice, counts: dict[str, int], step: int):
        """Clip, check, step the optimizer and the schedule: (gradient norm, the step's sums, lr)."""
        if self.sharded:
            fill_missing_gradients(self.parameters)
        norm = clip_gradients_with_norm(self.parameters, self.config.optim.clip_norm)  # () on the device
        # The step's one wait for the device: the losses and the norm read together, since
        # the host must see both before it lets the optimizer write the weights.
        *loss_values, grad_norm = torch.cat([sums.all_reduced(self.world), norm.reshape(1).double()]).tolist()
        step_sums = sums.to_sums(loss_values)
        for name, mean in step_sums.means(counts).items():
            if not math.isfinite(step_sums.losses[name]):
                raise NonFiniteStep(f"step {step}: the {name} loss is not finite ({mean}); stopping")
        if not math.isfinite(grad_norm):
            # Finite losses, non-finite gradient: the step would write NaN into every weight.
            # Stop before it (as torchtitan does): a run that diverged is not continued
            # blindly; the user lowers optim.lr or raises the warm-up and resumes.
            raise NonFiniteStep(
                f"step {step}: the gradient norm is not finite ({grad_norm}) while the losses are; stopping before the update"
            )
        lr = self.scheduler.get_last_lr()[0]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return grad_norm, step_sums, lr

    def device_batches(self, data: StepData, active: list[Objective]) -> dict[str, list]:
        """The step's micro-batches per stream on the device (none of a stream that no active
        objective reads), as many on every rank (``even_out``)."""
        read = {o.stream for o in active}
        local = {stream: data.batches(stream) if stream in read else [] for stream in OBJECTIVES}
        return {name: [b.to(self.world.device, non_blocking=True) for b in bs] for name, bs in even_out(local, self.world).items()}

    def global_counts(self, data: StepData, step: int) -> dict[str, int]:
        """``step_counts`` over all ranks: the loss normalisers."""
        local = step_counts(data, self.objectives, step)
        return {name: int(total) for name, total in zip(local, sum_over_ranks(list(local.values()), self.world))}

    def combine(self, out: MicroStepLosses, counts: dict[str, int]) -> torch.Tensor:
        """This micro-step's share of the joint loss L = Σ_o w_o · L_o."""
        joint_count = sum(counts.values())
        touch = out.get("")
        total = touch.loss_sum if touch is not None else 0.0
        for objective in self.objectives:
            term = out.get(objective.name)
            if term is None:
                continue
            # paper: each objective is the mean over its own units; joint: one shared normaliser.
            normaliser = counts[objective.name] if self.config.objectives.normaliser == "paper" else joint_count
            total = total + objective.weight * term.loss_sum / normaliser
        return total

    def draws(self, stream: str, seed_offset: int) -> Draws:
        """``StepContext.draws``: the store's examples of ``stream`` from the run's seed plus
        ``seed_offset``, the same micro-batches on every rank, on the device."""
        if self.store is None:
            raise ValueError(f"no token store to draw {stream} examples from (fill the queue first)")
        data = self.config.data.only(stream, self.config.run.seed + seed_offset)
        pipeline, world = DataPipeline(self.store, data), self.world

        def batches(j: int) -> list:
            local = pipeline.step(j, world.rank, world.size).batches(stream)
            return [b.to(world.device) for b in even_out({stream: local}, world)[stream]]

        return Draws(data.batch_size(stream), batches)


class StepContext:
    """What an objective's hooks may use (``objectives.objective.StepContext``): the model's
    forward for its side passes, the world's gather, its own draws, the phase timer."""

    def __init__(self, step: JointStep, phases: StepPhases):
        self._step, self.phase, self.progress = step, phases, step.progress

    def side_pass(self, objective: str, method: str, *args: Any) -> Any:
        # Without gradient: DDP prepares its gradient reduction at a forward under grad mode and
        # would then wait for a backward that a side pass never has.
        with torch.no_grad(), step_autocast(self._step.config, self._step.world):
            return self._step.parallel_model(side_pass=(objective, method, args))

    def gather_rows(self, rows: torch.Tensor) -> torch.Tensor:
        return all_gather_rows(rows, self._step.world)

    def draws(self, stream: str, seed_offset: int) -> Draws:
        return self._step.draws(stream, seed_offset)

    def stop_requested(self) -> bool:
        return self._step.stop_requested()


def step_counts(data: StepData, objectives: list[Objective], step: int) -> dict[str, int]:
    """The loss normalisers of this rank's part of a step, per objective (0 while one is not
    active): masked tokens for MMLM and TLM, pairs for XLCO (``Objective.count``)."""
    return {o.name: o.count(data.stats[o.stream]) if o.active_at(step) else 0 for o in objectives}


def micro_steps(batches: dict[str, list]) -> Iterator[tuple[dict, bool]]:
    """(micro-batch per stream or None, whether last) for each micro-step. The lists are
    aligned at the end, so that the last (synchronising) micro-step carries every stream of
    the step."""
    count = max(len(b) for b in batches.values())
    for i in range(count):
        yield {name: aligned_micro_batch(b, i, count) for name, b in batches.items()}, i == count - 1


def computes_in_bf16(config: TrainConfig, world: World) -> bool:
    """bf16 autocast (and FSDP's bf16 compute): on a GPU with run.bf16, on a CPU only with run.cpu_bf16."""
    return config.run.bf16 and (world.device.type == "cuda" or config.run.cpu_bf16)


def step_autocast(config: TrainConfig, world: World) -> torch.autocast:
    """The autocast the step's forward passes run in (``computes_in_bf16``)."""
    return torch.autocast(world.device.type, dtype=torch.bfloat16, enabled=computes_in_bf16(config, world))


# Graphs torch.compile may make of one function: training calls the layers' one forward in up
# to 12 forms (see Encoder.compile_layers), more than torch's default of 8.
LAYER_GRAPHS = 16


def compile_encoders(encoders: list[Encoder], backend: str = "inductor") -> None:
    """``run.compile``: the layers of these encoders (the query encoder and the objectives' own,
    XLCO's key encoder; see ``Encoder.compile_layers``)."""
    # torch._dynamo's recompile limit is one setting for the whole process, so it is raised
    # here, where a run decides to compile, once, and never lowered: past the limit the
    # layers' remaining forms would run uncompiled. Only a function that really meets more
    # forms than the default makes more graphs.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, LAYER_GRAPHS)
    for encoder in encoders:
        encoder.compile_layers(backend)


def even_out(batches: dict[str, list], world: World) -> dict[str, list]:
    """Each stream's micro-batches (name → list, names from ``data.pipeline.FILLERS``), led by
    as many fillers as it takes to reach the most that any rank has.

    Ranks draw different examples, so one may need more micro-batches of a stream than
    another. Every rank must still run the same micro-steps, each with the same objectives:
    FSDP gathers a layer's weights for every call of it and reduce-scatters its gradients in
    the backward pass, so every rank has to call the same modules in the same order, and DDP
    needs a loss in every micro-step. A filler (one short row) runs those modules and counts
    0 (``JointModel.forward``). One all-reduce of a count per stream; nothing in one process.
    """
    if not world.distributed:
        return batches
    local = torch.tensor([len(b) for b in batches.values()], device=world.device)
    most = all_reduce_max(local, world).tolist()
    return {name: [FILLERS[name]() for _ in range(n - len(b))] + b for (name, b), n in zip(batches.items(), most)}


def aligned_micro_batch(batches: list, i: int, micro_steps: int):
    """Micro-batch for micro-step i when the list is aligned to end with the last micro-step."""
    offset = micro_steps - len(batches)
    return batches[i - offset] if i >= offset else None
