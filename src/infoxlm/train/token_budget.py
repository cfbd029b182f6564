"""The micro-batch token budget a run picks for itself when ``data.max_tokens`` is left unset.

``data.max_tokens`` bounds each objective's micro-batch (padded tokens: rows × longest row,
both views for XLCO); the step accumulates gradients over as many micro-batches as a
rank's share of the global batch needs, so the budget decides speed and memory, never what
a step computes (losses are normalised by global counts). On a GPU larger micro-batches are
faster (fewer kernel launches, fuller matrix products: BENCHMARKS.md, "Compiled layers and
large micro-batches"), so a GPU run takes the largest rung of ``LADDER`` whose estimated peak
fits the memory the device has left once the model is on it. A CPU run uses 16,384 where its
estimate fits the memory the machine has available, else the largest of ``CPU_LADDER`` that
fits, and is refused before its first step where none does (a preset made for GPUs, such as
``scratch-base`` on a laptop, would otherwise grow until the kernel kills it).
``--set data.max_tokens=N`` fixes it by hand.

The estimate (bytes on one device; values in bf16 under autocast, fp32 otherwise):

- what the first step still allocates beside the weights already placed (and DDP's gradient
  buckets): fp32 gradients (4 bytes per trainable parameter held on this device), AdamW's
  two moments (8), the bf16 weight copies autocast keeps for a forward (2); under FSDP
  instead of those copies, the root unit and two layers gathered whole with their unsharded
  gradients;
- the fullest micro-step. The step aligns the objectives' micro-batch lists to end together
  (``joint_step.aligned_micro_batch``), so its last micro-step can hold a full micro-batch of
  every objective at once, each going through the encoder as its ``encoder_passes`` say
  (objectives/objective.py): MMLM and TLM tokens through every layer, the XLCO query view
  (half of its micro-batch) through the layers up to the universal one, the key view one layer
  at a time without gradients. Each objective's micro-batch holds min(budget, the tokens of this
  rank's share of a step) tokens, the share bounded by its examples × the longest example
  and by 1.25 × the most seen in the next 8 steps' data (drawn at the start: a step's data is
  a pure function of its number). Per layer and token the backward pass keeps
  ``18·d + 4·f`` bytes in bf16 (d the hidden size, f the feed-forward size): the layer's
  input, Q, K, V and the attention output (flash attention keeps no score matrix), the
  feed-forward's input and its inner activation before and after the GELU, the two
  LayerNorms' inputs (2 bytes each), the two dropout masks (1 byte each). With activation
  checkpointing a layer keeps its input (2·d) and one layer at a time is recomputed;
- the vocabulary logits of the masked tokens (``mask_prob`` of the scored passes' tokens) and
  their gradient, 2 + 2 bytes per vocabulary entry in bf16 (with ``run.fast_paths=false``
  every padded position counts, at 4 bytes a value);
- on a CPU with attention dropout, SDPA's reference kernel keeps each layer's attention
  probabilities, their dropped copy and the dropout mask for the backward pass: 9 bytes per
  score, sequences × heads × length², bounded by tokens × heads × the longest example (GPU
  kernels and a CPU without attention dropout keep none);
- a margin of max(2 GiB, 5 % of the device) for the CUDA context, cuBLAS workspaces, the
  allocator's fragmentation and NCCL's buffers (on a CPU: the host's other work).

Against the two peaks measured on an H100 (BENCHMARKS.md, "GPU: one H100, base and large":
base at 98,304 tokens, large at 16,384) the estimate is 4.9 and 3.6 % high (``tests/train/
test_token_budget.py`` recomputes both from the benchmark's own batches). On this project's
2-core CPU, first steps of ``scratch-base`` (the demo corpus's 8,000-piece vocabulary, small
batches) grew by 4.75 and 7.61 GiB at 2,048 and 4,096 tokens, against estimates of 4.7 and
10.4 GiB with the score term (without attention dropout: 2.15 GiB, estimate 3.07).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn

from ..data.pipeline import DEFAULT_MAX_TOKENS
from ..objectives.objective import EncoderPass
from .distributed import World, all_reduce_min, barrier
from .errors import TrainingError
from .host_memory import host_memory

GIB = 1024**3
LADDER = tuple(range(8192, 98_304 + 1, 8192))  # 98,304: the largest measured, the fastest at base on an H100
CPU_MAX_TOKENS = DEFAULT_MAX_TOKENS  # 16,384
CPU_LADDER = (1024, 2048, 4096, 8192, CPU_MAX_TOKENS)  # a CPU's rungs where 16,384 does not fit
CPU_SCORE_BYTES = 9  # fp32 probabilities and their dropped copy, 1-byte dropout mask (see above)
MIN_MARGIN_BYTES = 2 * GIB
MARGIN_SHARE = 0.05
PROBE_STEPS = 8  # steps whose data is drawn to see how many tokens a share really holds
SHARE_HEADROOM = 1.25

__all__ = [
    "CPU_LADDER", "CPU_MAX_TOKENS", "LADDER", "ActivationCost", "BudgetChoice", "MicroStep", "ObjectivePasses", "PeakEstimate",
    "available_bytes", "choose_max_tokens", "longest_example",
    "first_step_bytes", "fullest_micro_step", "observed_shares", "peak_estimate", "resolve_max_tokens",
    "share_bounds",
]  # fmt: skip


@dataclass(frozen=True)
class MicroStep:
    """What one micro-step carries: each objective's passes with their tokens, and the masked
    tokens the MLM head scores."""

    passes: tuple[tuple[float, EncoderPass], ...]  # (tokens, how they go through the encoder)
    masked_tokens: float


ObjectivePasses = tuple[tuple[str, tuple[EncoderPass, ...]], ...]  # (stream, its passes) per objective


@dataclass(frozen=True)
class ActivationCost:
    """Bytes a micro-step's forward keeps for its backward, from the model's shape."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    vocab_size: int
    bytes_per_value: int = 2  # 2 under bf16 autocast, 4 in fp32
    activation_checkpointing: bool = False
    # Attention scores kept for the backward pass (a CPU with attention dropout): bytes per
    # score, and the heads and longest row that bound a layer's scores at tokens × heads × row.
    score_bytes: int = 0
    num_heads: int = 0
    longest_row: int = 0

    @property
    def layer_bytes_per_token(self) -> float:
        """One layer's saved activations per token: 18·d + 4·f bytes in bf16 (see the module's notes)."""
        d, f, scale = self.hidden_size, self.intermediate_size, self.bytes_per_value / 2
        values = 8 * d + 2 * f  # input, Q, K, V, attention output, feed-forward input, 2·f inner, 2 LayerNorm inputs
        return 2 * values * scale + 2 * d  # + two dropout masks of d, 1 byte each

    @property
    def layer_bytes_per_trained_token(self) -> float:
        """One layer's saved activations per token with gradients: its values and, where
        they are kept, its attention scores (at most the longest row per token and head)."""
        return self.layer_bytes_per_token + self.score_bytes * self.num_heads * self.longest_row

    def through(self, layers: int, tokens: float) -> float:
        """Saved activations of ``tokens`` through ``layers`` layers with gradients."""
        if self.activation_checkpointing:  # each layer's input; one layer recomputed at a time
            return tokens * (layers * 2 * self.hidden_size * self.bytes_per_value / 2 + self.layer_bytes_per_trained_token)
        return tokens * layers * self.layer_bytes_per_trained_token

    def micro_step_bytes(self, micro: MicroStep) -> float:
        total = micro.masked_tokens * self.vocab_size * 2 * self.bytes_per_value  # logits and their gradient
        for tokens, p in micro.passes:
            layers = self.num_layers if p.layers is None else p.layers
            total += self.through(layers, tokens) if p.gradients else tokens * self.layer_bytes_per_token  # one layer live
        return total


def fullest_micro_step(shares: dict[str, float], objectives: ObjectivePasses, max_tokens: int, mask_prob: float) -> MicroStep:
    """The largest micro-step a rank can see at this budget: every objective's micro-batch at
    once, each holding min(budget, the real tokens of this rank's share of its stream's step)
    tokens (``shares``: stream → tokens, both views for XLCO), through its passes."""
    passes = []
    for stream, its_passes in objectives:
        tokens = min(max_tokens, shares.get(stream, 0))
        passes += [(p.share * tokens, p) for p in its_passes]
    masked = mask_prob * sum(tokens for tokens, p in passes if p.scored)
    return MicroStep(tuple(passes), masked)


def share_bounds(data, world_size: int, observed: dict[str, int] | None = None) -> dict[str, float]:
    """Tokens of one rank's share of a step, per objective: at most its examples × the longest
    example (the bound that always holds), and, where steps were observed (``observed``: the
    most real tokens seen per objective), that × ``SHARE_HEADROOM``. Sentences are far shorter
    than the longest TLM and XLCO example, and a share's sum of hundreds of lengths varies
    little from step to step."""
    bounds = {}
    for objective in data.enabled:
        bound = float(math.ceil(data.batch_size(objective) / world_size) * data.longest_example(objective))
        if observed is not None:
            bound = min(bound, SHARE_HEADROOM * observed.get(objective, 0))
        bounds[objective] = bound
    return bounds


@dataclass(frozen=True)
class PeakEstimate:
    """A step's estimated peak on one device, in bytes beyond what it held before the first
    step, as a function of the budget."""

    shares: dict[str, float]  # from share_bounds
    objectives: ObjectivePasses
    cost: ActivationCost
    first_step_bytes: float
    mask_prob: float

    def __call__(self, max_tokens: int) -> float:
        micro = fullest_micro_step(self.shares, self.objectives, max_tokens, self.mask_prob)
        return self.first_step_bytes + self.cost.micro_step_bytes(micro)


@dataclass(frozen=True)
class BudgetChoice:
    max_tokens: int
    estimated_peak_bytes: float  # on top of what the device held when the budget was chosen
    available_bytes: float  # free memory then, less the margin

    @property
    def fits(self) -> bool:
        return self.estimated_peak_bytes <= self.available_bytes

    def describe(self, device: str) -> str:
        gib = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731
        line = (
            f"micro-batch token budget: {self.max_tokens:,} tokens per objective (data.max_tokens unset: the "
            f"largest of {LADDER[0]:,} … {LADDER[-1]:,} whose estimated peak, {gib(self.estimated_peak_bytes)}, fits "
            f"the {gib(self.available_bytes)} left on {device} (its free memory less a margin); --set "
            "data.max_tokens=N fixes it)"
        )
        if not self.fits:
            line += (
                "; even this budget's estimate exceeds the free memory: expect running out of memory, or use "
                "run.parallelism=fsdp, run.activation_checkpointing=true or smaller batches"
            )
        return line


def available_bytes(free_bytes: float, total_bytes: float, processes: int = 1) -> float:
    """What one process may count on: the free memory less the margin, shared by the
    ``processes`` that use the same memory."""
    return (free_bytes - max(MIN_MARGIN_BYTES, MARGIN_SHARE * total_bytes)) / processes


def longest_example(data) -> int:
    """The longest example of the run's objectives (``data``: its PipelineConfig): the
    smallest budget that holds one, and the longest row a pass has."""
    return max(data.longest_example(o) for o in data.enabled)


def choose_max_tokens(
    peak: PeakEstimate, smallest: int, free_bytes: float, total_bytes: float, *, ladder: tuple[int, ...] = LADDER,
    processes: int = 1,
) -> BudgetChoice:
    """The largest rung of ``ladder`` (at least ``smallest``, the longest example) whose
    estimated peak fits ``available_bytes``; when none fits, the smallest rung (``fits`` False)."""
    available = available_bytes(free_bytes, total_bytes, processes)
    rungs = [t for t in ladder if t >= smallest] or [smallest]
    fitting = [t for t in rungs if peak(t) <= available]
    chosen = fitting[-1] if fitting else rungs[0]
    return BudgetChoice(chosen, peak(chosen), available)


def observed_shares(
    pipeline, first_step: int, world: World, steps: int = PROBE_STEPS, positions: bool = False
) -> dict[str, int]:
    """The most real tokens (``positions``: padded positions) of each objective in this rank's
    share of a step, over the ``steps`` steps from ``first_step`` (their data is drawn here and
    again when trained on: each step's data is a pure function of its number)."""
    most: dict[str, int] = {}
    for step in range(first_step, first_step + steps):
        for objective, stats in pipeline.step(step, world.rank, world.size).stats.items():
            most[objective] = max(most.get(objective, 0), stats.num_positions if positions else stats.num_tokens)
    return most


def _local_numel(p: torch.Tensor) -> int:
    """Elements this process holds: its shard of an FSDP parameter (a DTensor)."""
    return p.to_local().numel() if hasattr(p, "to_local") else p.numel()


def first_step_bytes(model: nn.Module, bf16: bool, sharded: bool) -> float:
    """What the first step allocates beside what is already on the device (the weights, and
    DDP's gradient buckets, made when DDP wraps the model): fp32 gradients and AdamW's two
    moments for the parameters held here; in one process or under DDP, autocast's bf16 weight
    copies; under FSDP, the root unit (embeddings, tied head, projections) gathered whole from
    forward to backward with its unsharded gradient (and the fp32 copy reduced), and two
    layers the same way (the one in use and the one prefetched)."""
    trainable = model.trainable_parameters()
    local = sum(_local_numel(p) for p in trainable)
    total = 4 * local + 8 * local  # fp32 gradients, AdamW's exp_avg and exp_avg_sq
    value = 2 if bf16 else 4
    if sharded:
        layers = model.encoder.encoder.layer
        in_layers = {id(p) for p in layers.parameters()}
        root = sum(p.numel() for p in trainable if id(p) not in in_layers)  # numel of a DTensor: the whole
        layer = sum(p.numel() for p in layers[0].parameters())
        total += (root + 2 * layer) * (value + value + 4)  # gathered, its gradient, the fp32 one reduced
    elif bf16:
        total += 2 * local
    return total


def peak_estimate(
    config, world: World, model: nn.Module, pipeline, first_step: int, *, bf16: bool, sharded: bool, observe: bool = True
) -> PeakEstimate:
    """This run's estimate on this device: the shares seen in the steps from ``first_step``
    (``observe=False``: the bound that always holds, without drawing any step), the model's
    shape, what its first step allocates."""
    data = config.data
    # The fast paths run the layers on real tokens only with a bf16 residual stream; without
    # them every padded position goes through in a wider stream: count positions, 4 bytes.
    fast = config.run.fast_paths
    observed = observed_shares(pipeline, first_step, world, positions=not fast) if observe else None
    shares = share_bounds(data, world.size, observed)
    encoder = model.encoder.config
    keeps_scores = world.device.type == "cpu" and encoder.attention_probs_dropout_prob > 0
    cost = ActivationCost(
        encoder.hidden_size, encoder.intermediate_size, encoder.num_hidden_layers, encoder.vocab_size,
        bytes_per_value=2 if bf16 and fast else 4, activation_checkpointing=config.run.activation_checkpointing,
        score_bytes=CPU_SCORE_BYTES if keeps_scores else 0, num_heads=encoder.num_attention_heads,
        longest_row=longest_example(data),
    )  # fmt: skip
    objectives = tuple((o.stream, o.encoder_passes()) for o in model.objectives if o.stream in shares)
    return PeakEstimate(shares, objectives, cost, first_step_bytes(model, bf16, sharded), data.highest_mask_rate)


def resolve_max_tokens(
    config, world: World, model: nn.Module, pipeline, first_step: int, *, bf16: bool, sharded: bool,
    memory: tuple[int, int] | None = None,
) -> tuple[int, str | None]:
    """``data.max_tokens`` for this run and the message that says how it was chosen (None when
    nothing was chosen): the config's value where set; on a CPU ``cpu_max_tokens``; on a GPU the largest
    rung that fits (``choose_max_tokens``), the same on every rank (the smallest of theirs).
    ``memory``: (free, total) bytes of the device; by default ``torch.cuda.mem_get_info`` on a
    GPU, ``host_memory`` on a CPU."""
    data = config.data
    if data.max_tokens is not None:
        return data.max_tokens, None
    if world.device.type != "cuda":
        return cpu_max_tokens(config, world, model, pipeline, first_step, bf16=bf16, sharded=sharded, memory=memory)
    peak = peak_estimate(config, world, model, pipeline, first_step, bf16=bf16, sharded=sharded)
    if memory is None:  # what the driver has free, and what torch's allocator holds unused
        barrier(world)  # NCCL sets up its communicator (and its buffers) at the first collective
        free, total = torch.cuda.mem_get_info(world.device)
        free += torch.cuda.memory_reserved(world.device) - torch.cuda.memory_allocated(world.device)
    else:
        free, total = memory
    choice = choose_max_tokens(peak, longest_example(data), free, total)
    agreed = _agreed(choice.max_tokens, world)
    choice = BudgetChoice(agreed, peak(agreed), choice.available_bytes)
    return agreed, choice.describe(str(world.device))


def cpu_max_tokens(
    config, world: World, model: nn.Module, pipeline, first_step: int, *, bf16: bool, sharded: bool,
    memory: tuple[int, int] | None,
) -> tuple[int, str | None]:
    """A CPU run's budget: 16,384 where its estimate fits the memory available (first with the
    bound that always holds, which needs no step drawn), else the largest of ``CPU_LADDER``
    that fits, said in a line; a ``TrainingError`` where none does, before anything is written.
    Processes on one machine share its memory (each counts its share, ``LOCAL_WORLD_SIZE``)
    and agree on one budget, the smallest of theirs; where one fits none, every one stops."""
    memory = memory if memory is not None else host_memory()
    if memory is None:  # nothing to check against here: the default, still agreed with the other ranks
        chosen = _agreed(CPU_MAX_TOKENS, world)
        if chosen == 0:
            raise TrainingError("another process of this run found no micro-batch budget that fits its machine's "
                                "memory (its error says what would fit); this one stops with it")
        return chosen, None
    processes = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    available = available_bytes(*memory, processes)
    estimate = partial(peak_estimate, config, world, model, pipeline, first_step, bf16=bf16, sharded=sharded)
    peak = None
    if estimate(observe=False)(CPU_MAX_TOKENS) <= available:
        chosen = CPU_MAX_TOKENS
    else:
        peak = estimate()
        choice = choose_max_tokens(peak, longest_example(config.data), *memory, ladder=CPU_LADDER, processes=processes)
        chosen = choice.max_tokens if choice.fits else 0  # 0: none fits
    chosen = _agreed(chosen, world)
    if chosen == CPU_MAX_TOKENS:
        return chosen, None
    peak = peak or estimate()
    gib = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731
    if chosen == 0:
        longest = longest_example(config.data)
        smallest = next((t for t in CPU_LADDER if t >= longest), longest)  # choose_max_tokens's first rung
        raise TrainingError(
            f"this run's first step needs an estimated {gib(peak(smallest))} of memory even at {smallest:,} tokens "
            f"per micro-batch, and this machine has {gib(available)} available per process (less a margin): it "
            "would be killed for want of memory. On a CPU, --preset demo (minutes) or --preset test (seconds) fit; "
            "or --set run.activation_checkpointing=true, --set model.dropout=0 (a CPU keeps attention scores for "
            "dropout), fewer examples per step (--set data.mmlm_batch_size=N, and tlm_, xlco_) or a smaller model"
        )
    return chosen, (
        f"micro-batch token budget: {chosen:,} tokens per objective (data.max_tokens unset: a CPU's {CPU_MAX_TOKENS:,} "
        f"needs an estimated {gib(peak(CPU_MAX_TOKENS))}, more than the {gib(available)} this machine has available "
        f"per process less a margin; {chosen:,} needs {gib(peak(chosen))}; --set data.max_tokens=N fixes it)"
    )


def _agreed(max_tokens: int, world: World) -> int:
    """One budget for all ranks, the smallest of theirs (0: one of them fits none). Every rank
    joins, also one that could not read its memory, so that the collectives stay paired."""
    if not world.distributed:
        return max_tokens
    return int(all_reduce_min(torch.tensor(max_tokens, device=world.device), world))
