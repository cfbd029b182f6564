"""The joint training step, top to bottom, and the one function that builds it.

``build_joint_step`` puts the model (``JointModel``, built by ``model_build.build_model``) on
the device, compiles its layers if asked, wraps it in DDP or shards it with FSDP in a world of
several processes, and makes the optimizer and the schedule; ``JointStep`` then runs one
optimizer step on one step's data: (with in-batch negatives, every key of the step first) →
micro-batches → losses → backward → clip → optimizer → EMA → enqueue, and fills XLCO's queue
before its first step (``prefill_queue``). The trainer (loop.py) and ``infoxlm bench``
(bench/engine_step.py) both build theirs here, so the step the benchmark times is the step
training runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from pathlib import Path
from typing import Iterator

import torch
from tqdm.auto import tqdm

from .. import interrupt
from ..data.batching import filler_contrast_batch, filler_mlm_batch
from ..data.pipeline import OBJECTIVES, DataPipeline, StepData
from ..data.store import TokenStore
from ..model.encoder import Encoder
from ..objectives.xlco import MomentumContrast, StepKeys
from .checkpoint import last_good_checkpoint
from .config import TrainConfig
from .device_memory import configure_allocator
from .errors import TrainingError
from .distributed import World, all_gather_rows, all_reduce_max, all_reduce_sum, sum_over_ranks
from .joint_model import JointModel, MicroStepLosses
from .optim import build_optimizer, build_scheduler
from .parallelism import clip_gradients_with_norm, distribute, fill_missing_gradients, is_sharded, no_gradient_sync

__all__ = [
    "OBJECTIVES", "JointStep", "LossSums", "StepPhases", "StepResult", "TrainingError", "aligned_micro_batch", "build_joint_step",
    "even_out", "micro_steps", "step_autocast", "step_counts",
]  # fmt: skip


# The queue pre-fill draws its own XLCO examples, from a seed stream apart from training's.
PREFILL_SEED_OFFSET = 1_000_003


def build_joint_step(config: TrainConfig, world: World, model: JointModel, *, run_dir: Path | None = None) -> "JointStep":
    """The step for this model (built with its fast paths): moved to the world's device, its
    layers compiled if ``run.compile``, in DDP or sharded by FSDP2 (``run.parallelism``) when
    there are several processes, AdamW with the warm-up / linear-decay schedule."""
    configure_allocator(world.device, config.run.expandable_segments)  # before the first tensor goes to the GPU
    model.to(world.device)
    if config.run.compile:
        compile_encoders(model.encoder, model.contrast)
    parallel_model = distribute(model, world, config.run.parallelism, bf16=computes_in_bf16(config, world))
    o = config.optim
    optimizer = build_optimizer(
        model.trainable_parameters(), lr=o.lr, betas=tuple(o.betas), eps=o.eps, weight_decay=o.weight_decay
    )
    scheduler = build_scheduler(optimizer, o.warmup_steps, o.max_steps, o.schedule, o.decay_fraction)
    return JointStep(config, world, model, parallel_model, optimizer, scheduler, run_dir=run_dir)


class StepPhases:
    """The step's phase hook: ``with phases(name): …`` around each part of a training step.

    Parts: data, forward, backward, optimizer, ema, queue (forward and backward once per
    micro-step; forward also around the step's keys, encoded before any query with in-batch
    negatives). This default does nothing; the benchmark passes a timer
    (``bench/timing.PhaseTimer``, which synchronises a GPU at each boundary).
    """

    def __call__(self, phase: str) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()


NO_PHASES = StepPhases()


@dataclasses.dataclass
class LossSums:
    """A step's summed losses per objective and its XLCO queries whose positive ranked first,
    over all micro-steps (and, once ``all_reduced``, all ranks)."""

    mmlm: float = 0.0
    tlm: float = 0.0
    xlco: float = 0.0
    xlco_correct: float = 0.0

    def means(self, counts: dict[str, int]) -> dict[str, float]:
        """Mean loss per objective present in the step (``counts``: its normalisers)."""
        return {name: getattr(self, name) / counts[name] for name in OBJECTIVES if counts[name] > 0}


class SumsOnDevice:
    """``LossSums`` accumulated on the device in float64 as the micro-steps come (reading a
    loss on the host would wait for its kernels), read once, after one all-reduce."""

    FIELDS = tuple(f.name for f in dataclasses.fields(LossSums))

    def __init__(self, device: torch.device):
        self.values = {name: torch.zeros((), dtype=torch.float64, device=device) for name in self.FIELDS}

    def add(self, out: MicroStepLosses) -> None:
        for name in OBJECTIVES:
            if getattr(out, name) is not None:
                self.values[name] += getattr(out, name).detach().double()
        self.values["xlco_correct"] += out.xlco_correct

    def all_reduced(self, world: World) -> torch.Tensor:
        """(fields,) float64 on the device: every rank's sums, in ``FIELDS`` order."""
        return all_reduce_sum(torch.stack([self.values[name] for name in self.FIELDS]), world)

    def read(self, world: World) -> LossSums:
        """Every rank's sums on the host (waits for the device)."""
        return LossSums(*self.all_reduced(world).tolist())


@dataclasses.dataclass
class StepResult:
    """What one JointStep call leaves for the metrics."""

    sums: LossSums  # all ranks
    counts: dict[str, int]  # the loss normalisers (all ranks)
    grad_norm: float
    lr: float
    momentum: float | None

    def loss_metrics(self) -> dict[str, float]:
        metrics = {f"loss/{name}": mean for name, mean in self.sums.means(self.counts).items()}
        if self.counts["xlco"] > 0:
            metrics["xlco/accuracy"] = self.sums.xlco_correct / self.counts["xlco"]
        return metrics


class JointStep:
    """The joint step on one step's data: micro-batches → losses → backward → clip → step →
    EMA → enqueue. ``Trainer.train_step`` runs it; so does the benchmark (bench/), timing its
    phases through the ``phases`` hook.

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
        run_dir: Path | None = None,
    ):
        self.config, self.world, self.model, self.parallel_model = config, world, model, parallel_model
        self.optimizer, self.scheduler, self.run_dir = optimizer, scheduler, run_dir
        self.parameters = model.trainable_parameters()
        self.sharded = is_sharded(parallel_model)

    @property
    def contrast(self) -> MomentumContrast | None:
        return self.model.contrast

    def __call__(self, data: StepData, step: int, xlco_active: bool, phases: StepPhases = NO_PHASES) -> StepResult:
        cfg, world = self.config, self.world
        with phases("data"):
            batches = self.device_batches(data, xlco_active)
            counts = self._global_counts(data, xlco_active)
        sums = SumsOnDevice(world.device)
        keys, key_slots = [], []
        autocast = step_autocast(cfg, world)
        step_keys, query_seeds = None, [None] * len(batches["xlco"])
        if batches["xlco"] and self.contrast.in_batch_negatives:
            if self.contrast.symmetric:  # one dropout seed per XLCO micro-batch, for both its query passes
                query_seeds = torch.randint(0, 2**62, (len(batches["xlco"]),)).tolist()
            with phases("forward"):
                step_keys = self.encode_step_keys(batches["xlco"], query_seeds, autocast)
        for picked, query_seed, last in micro_steps(batches, query_seeds):
            with no_gradient_sync(self.parallel_model, last):
                with phases("forward"):
                    with autocast:
                        # The last micro-step touches what no objective reached (see JointModel);
                        # FSDP gets zero gradients for them after the backward instead.
                        touch = last and not self.sharded
                        out: MicroStepLosses = self.parallel_model(
                            picked["mmlm"], picked["tlm"], picked["xlco"], touch_unreached=touch,
                            step_keys=step_keys, query_seed=query_seed,
                        )  # fmt: skip
                    loss = self._combine(out, counts) * world.size  # DDP averages over ranks; we want the sum
                    sums.add(out)
                    if out.keys is not None:
                        keys.append(out.keys)
                        key_slots.append(out.key_slots)
                with phases("backward"):
                    loss.backward()

        with phases("optimizer"):
            if self.sharded:
                fill_missing_gradients(self.parameters)
            norm = clip_gradients_with_norm(self.parameters, cfg.optim.clip_norm)  # () on the device
            # The step's one wait for the device: the losses and the norm read together, since
            # the host must see both before it lets the optimizer write the weights.
            *loss_values, grad_norm = torch.cat([sums.all_reduced(world), norm.reshape(1).double()]).tolist()
            step_sums = LossSums(*loss_values)
            self._stop_if_not_finite(step_sums, counts, step)
            if not math.isfinite(grad_norm):
                # Finite losses, non-finite gradient: the step would write NaN into every weight.
                # Stop before it (as torchtitan does): a run that diverged is not continued
                # blindly; the user lowers optim.lr or raises the warm-up and resumes.
                raise TrainingError(
                    f"step {step}: the gradient norm is not finite ({grad_norm}) while the losses are; "
                    f"stopping before the update; {last_good_checkpoint(self.run_dir)}"
                )
            lr = self.scheduler.get_last_lr()[0]
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)

        with phases("ema"):  # the key encoder follows (or, in the copy warm-up, waits: m = 1)
            momentum = self.contrast.follow(self.model.encoder, step) if self.contrast is not None else None
        with phases("queue"):
            if step_keys is not None:  # every rank's, in slot order already
                self.contrast.enqueue(step_keys.keys)
            elif keys:  # on every rank or none: even_out gave each rank XLCO micro-steps alike
                self.enqueue_in_slot_order(torch.cat(keys), torch.cat(key_slots))
        return StepResult(sums=step_sums, counts=counts, grad_norm=grad_norm, lr=lr, momentum=momentum)

    # --- pieces of the step -----------------------------------------------------------------

    def device_batches(self, data: StepData, xlco_active: bool) -> dict[str, list]:
        """The step's micro-batches per objective on the device, as many on every rank (``even_out``)."""
        local = {"mmlm": data.mmlm, "tlm": data.tlm, "xlco": data.xlco if xlco_active else []}
        return {name: [b.to(self.world.device, non_blocking=True) for b in bs] for name, bs in even_out(local, self.world).items()}

    def _global_counts(self, data: StepData, xlco_active: bool) -> dict[str, int]:
        """``step_counts`` over all ranks: the loss normalisers."""
        local = step_counts(data, xlco_active)
        return {name: int(total) for name, total in zip(local, sum_over_ranks(list(local.values()), self.world))}

    def _combine(self, out: MicroStepLosses, counts: dict[str, int]) -> torch.Tensor:
        """This micro-step's share of the joint loss L = Σ_o w_o · L_o."""
        cfg = self.config.objectives
        weights = {"mmlm": cfg.mmlm_weight, "tlm": cfg.tlm_weight, "xlco": cfg.xlco_weight}
        joint_count = sum(counts.values())
        total = out.touch if out.touch is not None else 0.0
        for name in OBJECTIVES:
            loss_sum = getattr(out, name)
            if loss_sum is None:
                continue
            # paper: each objective is the mean over its own units; joint: one shared normaliser.
            normaliser = counts[name] if cfg.normaliser == "paper" else joint_count
            total = total + weights[name] * loss_sum / normaliser
        return total

    def _stop_if_not_finite(self, sums: LossSums, counts: dict[str, int], step: int) -> None:
        for name, mean in sums.means(counts).items():
            if not math.isfinite(getattr(sums, name)):
                raise TrainingError(
                    f"step {step}: the {name} loss is not finite ({mean}); stopping; {last_good_checkpoint(self.run_dir)}"
                )

    @torch.no_grad()
    def encode_step_keys(self, batches: list, query_seeds: list, autocast) -> StepKeys:
        """Every key of the step, before any query: each XLCO micro-batch's keys (without
        gradient), gathered from all ranks in slot order (the order of the global batch, the
        same for any world size or micro-batch budget); with ``contrast.symmetric`` the query
        vectors too (an extra forward pass without gradient to the universal layer), from
        which the k→q direction is computed once for the step. Fillers run (every rank calls
        the same modules) but their vectors are dropped: no filler is a negative."""
        keys, slots, queries = [], [], []
        symmetric = self.contrast.symmetric
        for batch, seed in zip(batches, query_seeds):
            with autocast:
                out: MicroStepLosses = self.parallel_model(keys_of=batch, queries_too=symmetric, query_seed=seed)
            keys.append(out.keys.float())
            slots.append(out.key_slots)
            if symmetric:
                queries.append(out.queries.float())
        keys, slots = torch.cat(keys), torch.cat(slots)
        order = torch.argsort(slots)  # ranks hold contiguous slot ranges: gathered in rank order = slot order
        gathered = [all_gather_rows(keys[order], self.world), all_gather_rows(slots[order], self.world)]
        if symmetric:
            gathered.append(all_gather_rows(torch.cat(queries)[order], self.world))
        return self.contrast.step_keys(*gathered)

    def enqueue_in_slot_order(self, keys: torch.Tensor, slots: torch.Tensor) -> None:
        """Keys of all ranks, in global slot order (ranks hold contiguous slot ranges)."""
        self.contrast.enqueue(self.keys_in_slot_order(keys, slots))

    def keys_in_slot_order(self, keys: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """This rank's keys (n, d) and their slots (n,) → every rank's (N, d), in global slot order."""
        return all_gather_rows(keys[torch.argsort(slots)].float(), self.world)

    # --- before XLCO's first step -------------------------------------------------------------

    @torch.no_grad()
    def prefill_queue(self, store: TokenStore, *, progress: bool = False) -> None:
        """Fill XLCO's queue with the keys of examples drawn for the purpose (their own seed
        stream, XLCO only), encoded as a training step encodes keys: through the parallel
        model, the same micro-batches on every rank (FSDP gathers layer by layer)."""
        data_cfg = dataclasses.replace(
            self.config.data, seed=self.config.run.seed + PREFILL_SEED_OFFSET, mmlm_batch_size=0, tlm_batch_size=0
        )
        pipeline = DataPipeline(store, data_cfg)
        needed = self.contrast.prefill_batches_needed(data_cfg.xlco_batch_size)
        bar = tqdm(range(needed), desc="filling the XLCO queue", unit="batch", disable=not progress)
        self.contrast.prefill(self._prefill_keys(pipeline, j) for j in bar)

    def _prefill_keys(self, pipeline: DataPipeline, j: int) -> torch.Tensor:
        """The keys of the pre-fill's batch ``j``, all ranks', in slot order: (N, d)."""
        interrupt.check()  # the pre-fill of a large queue takes a while
        world = self.world
        keys, slots = [], []
        for batch in even_out({"xlco": pipeline.step(j, world.rank, world.size).xlco}, world)["xlco"]:
            out: MicroStepLosses = self.parallel_model(keys_of=batch.to(world.device))
            keys.append(out.keys)
            slots.append(out.key_slots)
        empty = torch.zeros(0, self.model.encoder.config.hidden_size, device=world.device)
        return self.keys_in_slot_order(
            torch.cat(keys) if keys else empty,
            torch.cat(slots) if slots else torch.zeros(0, dtype=torch.long, device=world.device),
        )


def step_counts(data: StepData, xlco_active: bool = True) -> dict[str, int]:
    """The loss normalisers of this rank's part of a step: masked tokens (MMLM, TLM) and
    sentences (XLCO, none while it is not active)."""
    return {
        "mmlm": data.stats["mmlm"].num_masked,
        "tlm": data.stats["tlm"].num_masked,
        "xlco": data.stats["xlco"].num_examples if xlco_active else 0,
    }


def micro_steps(batches: dict[str, list], query_seeds: list) -> Iterator[tuple[dict, int | None, bool]]:
    """(micro-batch per objective or None, XLCO query seed, whether last) for each micro-step.
    The lists are aligned at the end, so that the last (synchronising) micro-step carries
    every objective of the step."""
    count = max(len(b) for b in batches.values())
    for i in range(count):
        picked = {name: aligned_micro_batch(b, i, count) for name, b in batches.items()}
        yield picked, aligned_micro_batch(query_seeds, i, count), i == count - 1


def computes_in_bf16(config: TrainConfig, world: World) -> bool:
    """bf16 autocast (and FSDP's bf16 compute): on a GPU with run.bf16, on a CPU only with run.cpu_bf16."""
    return config.run.bf16 and (world.device.type == "cuda" or config.run.cpu_bf16)


def step_autocast(config: TrainConfig, world: World) -> torch.autocast:
    """The autocast the step's forward passes run in (``computes_in_bf16``)."""
    return torch.autocast(world.device.type, dtype=torch.bfloat16, enabled=computes_in_bf16(config, world))


# Graphs torch.compile may make of one function: training calls the layers' one forward in up
# to 12 forms (see Encoder.compile_layers), more than torch's default of 8.
LAYER_GRAPHS = 16


def compile_encoders(encoder: Encoder, contrast: MomentumContrast | None, backend: str = "inductor") -> None:
    """``run.compile``: the query encoder's layers and the key encoder's (see ``Encoder.compile_layers``)."""
    # torch._dynamo's recompile limit is one setting for the whole process, so it is raised
    # here, where a run decides to compile, once, and never lowered: past the limit the
    # layers' remaining forms would run uncompiled. Only a function that really meets more
    # forms than the default makes more graphs.
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, LAYER_GRAPHS)
    encoder.compile_layers(backend)
    if contrast is not None and contrast.key_encoder is not None:
        contrast.key_encoder.compile_layers(backend)


FILLERS = {"mmlm": filler_mlm_batch, "tlm": filler_mlm_batch, "xlco": filler_contrast_batch}


def even_out(batches: dict[str, list], world: World) -> dict[str, list]:
    """Each objective's micro-batches (name → list, names from ``FILLERS``), led by as many
    fillers as it takes to reach the most that any rank has.

    Ranks draw different examples, so one may need more micro-batches of an objective than
    another. Every rank must still run the same micro-steps, each with the same objectives:
    FSDP gathers a layer's weights for every call of it and reduce-scatters its gradients in
    the backward pass, so every rank has to call the same modules in the same order, and DDP
    needs a loss in every micro-step. A filler (one short row) runs those modules and counts
    0 (``JointModel.forward``). One all-reduce of a count per objective; nothing in one process.
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
