"""XLCO: cross-lingual contrast with a momentum key encoder and a queue of negatives.

A translation pair is two views of one meaning. The query view goes through the model being
trained (the *query encoder*); the key view through a slowly moving copy of it (the *key
encoder*, updated as k ← m·k + (1 − m)·q and never by gradients). Both take the ``<s>`` hidden
state at the *universal layer* (8 of 12 for base, 12 of 24 for large) and run no further; a
linear projection (with its own momentum copy) maps it to the contrast space. The query must
pick its own key out of the positive and the K keys of earlier batches kept in a FIFO queue:

    logits = [q·k⁺, q·n_1, …, q·n_K] / τ          loss = cross-entropy with target 0

``MomentumContrast`` is this objective whole, life cycle included, through the hooks every
objective has (objective.py), which the joint step calls in this order: before the step, the
warm-up's end (``contrast.start_step``: the key encoder frozen, then a copy of the query
encoder) and the queue's pre-fill with real keys; the loss of each micro-batch; after the
optimizer step, the momentum update and the enqueue of the step's keys. The query encoder is
the shared model and is passed in, so its parameters live only once, in the model, the
optimizer and DDP. ``use_momentum=False`` is the paper's −Momentum ablation: keys come from
the query encoder itself (without gradient) and there is no copy at all. The translation
ranking family (in-step negatives, the k→q direction, a margin) extends it in
translation_ranking.py; ``registry.contrast_objective`` picks the class from the options.

Every option is a field of ``train.config.ContrastConfig`` (``ContrastSettings`` below names
them), which gives the defaults and checks every value: the module is built from such an
object alone.

Example::

    >>> import torch
    >>> from infoxlm import Encoder, EncoderConfig
    >>> from infoxlm.objectives.xlco import MomentumContrast
    >>> from infoxlm.train.config import ContrastConfig
    >>> enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=50))
    >>> xlco = MomentumContrast(enc, ContrastConfig(layer=1, queue_size=8))
    >>> ids = torch.randint(4, 49, (4, 6)); mask = torch.ones_like(ids)
    >>> xlco.enqueue(xlco.encode_keys(ids, mask)); xlco.enqueue(xlco.encode_keys(ids, mask))
    >>> out = xlco(enc, ids, mask, ids, mask)
    >>> tuple(out.logits.shape)   # (B, 1 + K)
    (4, 9)
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Protocol, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from .. import interrupt
from ..data.batching import ContrastBatch
from ..model.encoder import Encoder
from ..model.flops import ModelShape, encoder_forward_flops, row_sums
from ..model.packing import Packing
from .objective import Draws, EncoderPass, LossTerm, Objective, StepAbandoned, StepContext

__all__ = ["ContrastOutput", "ContrastSettings", "MomentumContrast", "contrast_flops", "momentum_at", "positive_ranked_first"]

# The queue pre-fill draws its own XLCO examples, from a seed stream apart from training's.
PREFILL_SEED_OFFSET = 1_000_003


class ContrastSettings(Protocol):
    """What XLCO is built from: the fields of ``train.config.ContrastConfig`` (which gives
    their defaults and meaning, and validates them), named here so that this module need not
    import the trainer's config."""

    layer: int
    queue_size: int
    temperature: float
    normalize: bool
    momentum: float
    momentum_schedule: str
    use_momentum: bool
    in_batch_negatives: bool
    pooling: str
    start_step: int
    key_warmup: str
    key_dropout: bool
    symmetric: bool
    margin: float


def momentum_at(step: int, schedule: str, base: float, cap: float = 0.9995) -> float:
    """Momentum coefficient m for optimizer step ``step`` (0-based).

    constant: m = base (the paper: 0.9999 for base, 0.999 for large, continued pre-training).
    inverse_sqrt: m = min(1 − t^−0.51, cap) with t = step + 1 (the paper's from-scratch
    recipe); m = 0 at the first step, so the key encoder starts as an exact copy of the query.
    """
    if schedule == "constant":
        return base
    if schedule == "inverse_sqrt":
        return min(1.0 - (step + 1) ** -0.51, cap)
    raise ValueError(f"momentum schedule {schedule!r}: expected 'constant' or 'inverse_sqrt'")


@dataclass
class ContrastOutput:
    """logits (B, 1 + K): column 0 is the positive key; keys (B, d): to enqueue after the step."""

    logits: torch.Tensor
    keys: torch.Tensor

    def loss(self) -> torch.Tensor:
        """Mean InfoNCE loss over the B queries."""
        return F.cross_entropy(self.logits.float(), self.targets())

    def loss_sum(self) -> torch.Tensor:
        """Summed InfoNCE loss over the B queries: what the joint step adds up."""
        return F.cross_entropy(self.logits.float(), self.targets(), reduction="sum")

    def targets(self) -> torch.Tensor:
        return torch.zeros(self.logits.shape[0], dtype=torch.long, device=self.logits.device)

    def accuracy(self) -> float:
        """Share of queries whose positive key scores strictly highest."""
        return float(positive_ranked_first(self.logits).float().mean())


def positive_ranked_first(logits: torch.Tensor) -> torch.Tensor:
    """logits (B, 1 + N) with the positive in column 0 → (B,) bool: positive strictly above all.

    Strictly: a collapsed encoder gives every key the same score, and argmax would then pick
    column 0 and report perfect accuracy.
    """
    if logits.shape[1] == 1:
        return torch.ones(logits.shape[0], dtype=torch.bool, device=logits.device)
    return logits[:, 0] > logits[:, 1:].max(dim=1).values


class MomentumContrast(Objective):
    """Key encoder, query/key projections and the queue of negative keys, for the query
    encoder ``encoder`` and the options ``settings`` (a ``ContrastConfig``, checked there)."""

    name = stream = "xlco"
    extras = ("correct",)  # queries whose positive ranked first, summed over the step

    def __init__(self, encoder: Encoder, settings: ContrastSettings, weight: float = 1.0):
        super().__init__(weight)
        config = encoder.config
        if not 1 <= settings.layer <= config.num_hidden_layers:
            raise ValueError(f"layer={settings.layer}: expected 1 … {config.num_hidden_layers} (the universal layer)")
        d = config.hidden_size
        self.layer, self.temperature, self.normalize = settings.layer, settings.temperature, settings.normalize
        self.use_momentum, self.pooling, self.key_dropout = settings.use_momentum, settings.pooling, settings.key_dropout
        # The life cycle: when XLCO starts, how the key encoder waits for it, how it follows.
        self.start_step, self.key_warmup = settings.start_step, settings.key_warmup
        self.momentum, self.momentum_schedule = settings.momentum, settings.momentum_schedule

        self.query_projection = nn.Linear(d, d, bias=False)
        nn.init.normal_(self.query_projection.weight, std=config.initializer_range)
        if settings.use_momentum:
            # The key encoder needs only the layers up to the universal one.
            key_config = copy.deepcopy(config)
            key_config.num_hidden_layers = settings.layer
            self.key_encoder = Encoder(key_config, encoder.fast_paths)
            self.key_projection = copy.deepcopy(self.query_projection)
            self.key_encoder.requires_grad_(False)
            self.key_projection.requires_grad_(False)
            self.momentum_update(encoder, momentum=0.0)  # start as an exact copy
        else:
            self.key_encoder = None
            self.key_projection = None

        # The queue starts as random vectors and is only trusted once real keys fill it.
        self.register_buffer("queue", torch.randn(settings.queue_size, d) * config.initializer_range)  # (K, d)
        self.register_buffer("queue_pointer", torch.zeros((), dtype=torch.long))
        self.register_buffer("queue_filled", torch.zeros((), dtype=torch.long))
        # (pointer, filled) as host ints: every step reads them, and reading a buffer on a GPU
        # waits for every queued kernel. Read from the buffers once, again after a load.
        self._queue_position: tuple[int, int] | None = None
        self.register_load_state_dict_post_hook(MomentumContrast._forget_queue_position)
        self._step_keys: list[tuple[torch.Tensor, torch.Tensor]] = []  # this step's (keys, slots), to enqueue

    @property
    def state_key(self) -> str:
        return "contrast"  # its place in every checkpoint's state

    @property
    def queue_size(self) -> int:
        return self.queue.shape[0]

    @property
    def is_full(self) -> bool:
        """True once K real keys have been enqueued; the loss is meaningful only then."""
        return self._position()[1] >= self.queue_size

    def _position(self) -> tuple[int, int]:
        """(queue_pointer, queue_filled) on the host, read from the device once."""
        if self._queue_position is None:
            self._queue_position = (int(self.queue_pointer), int(self.queue_filled))
        return self._queue_position

    def _forget_queue_position(self, incompatible_keys) -> None:
        self._queue_position = None  # loaded buffers: read them again when next needed

    # --- encoding -------------------------------------------------------------------------

    def _encode(self, encoder: Encoder, projection: nn.Linear, ids: torch.Tensor, mask: torch.Tensor, packing: Packing | None) -> torch.Tensor:
        """(B, T) views → contrast vectors (B, d): each sentence's state at the universal layer,
        pooled as ``embedding.pool`` pools a padded state — the ``<s>`` state (the paper) or the
        mean over real tokens (as retrieval pools them), computing nothing the pooling does not
        read — then projected, and unit length with normalize."""
        if packing is None:
            packing = Packing.of(mask)
        if self.pooling == "cls":
            rows = packing.first_rows  # (B,) each view's <s>
            vectors = encoder.states_at(ids, rows, mask, num_layers=self.layer, packing=packing)
        else:
            tokens = encoder(ids, mask, num_layers=self.layer, packing=packing).token_states()  # (n, d)
            vectors = packing.sequence_means(tokens)
        z = projection(vectors)
        return F.normalize(z, dim=-1) if self.normalize else z

    def encode_queries(self, encoder: Encoder, ids: torch.Tensor, mask: torch.Tensor, *, packing: Packing | None = None) -> torch.Tensor:
        """Query vectors (B, d), with gradients, from the query encoder stopped at the universal
        layer. ``packing``: the batch's, if it carries one (see ``Encoder.forward``)."""
        return self._encode(encoder, self.query_projection, ids, mask, packing)

    @torch.no_grad()
    def encode_keys(self, ids: torch.Tensor, mask: torch.Tensor, encoder: Encoder | None = None, *, packing: Packing | None = None) -> torch.Tensor:
        """Key vectors (B, d), without gradients. ``encoder`` is needed only with use_momentum=False."""
        if self.key_encoder is None:
            if encoder is None:
                raise ValueError("use_momentum=False: keys come from the query encoder; pass encoder=")
            return self._encode(encoder, self.query_projection, ids, mask, packing).detach()
        # key_dropout: the key encoder in training mode, with the query encoder's dropout (the
        # authors' code); else in eval mode, keys without dropout (a target not itself noisy).
        self.key_encoder.train(self.key_dropout)
        return self._encode(self.key_encoder, self.key_projection, ids, mask, packing)

    def forward(self, encoder: Encoder, query_ids: torch.Tensor, query_mask: torch.Tensor, key_ids: torch.Tensor,
                key_mask: torch.Tensor, *, query_packing: Packing | None = None, key_packing: Packing | None = None) -> ContrastOutput:
        """XLCO on B translation pairs: query vectors (with gradients) from ``encoder``, key
        vectors from the key encoder, logits against the positive and the negatives."""
        q = self.encode_queries(encoder, query_ids, query_mask, packing=query_packing)  # (B, d)
        k = self.encode_keys(key_ids, key_mask, encoder=encoder, packing=key_packing)  # (B, d)
        return ContrastOutput(self.contrast_logits(q, k), k)

    def contrast_logits(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """q, k (B, d) → logits (B, 1 + K) = [q·k, q·queueᵀ] / τ, in fp32."""
        q, k = q.float(), k.float()
        positive = (q * k).sum(dim=-1, keepdim=True)  # (B, 1)
        return torch.cat([positive, q @ self.queue.t().float()], dim=1) / self.temperature

    # --- the objective: a micro-batch's loss, its count, its reach and cost ---------------

    def contrast(self, encoder: Encoder, batch: ContrastBatch, **options) -> ContrastOutput:
        """``forward`` on a batch of pairs (its views' packing included), with ``options``."""
        query, key = batch.query, batch.key
        return self(encoder, query.input_ids, query.attention_mask, key.input_ids, key.attention_mask,
                    query_packing=query.packing, key_packing=key.packing, **options)  # fmt: skip

    def before_micro_steps(self, batches: list[ContrastBatch], context: StepContext) -> None:
        self._step_keys = []  # a step run for its losses only (the benchmark's check) left some

    def loss(self, encoder: Encoder, batch: ContrastBatch) -> LossTerm:
        out = self.contrast(encoder, batch)
        self._step_keys.append(_queued(out.keys, batch))  # enqueued after the optimizer step
        return contrast_term(out)

    def count(self, stats) -> int:
        return stats.num_examples  # pairs (queries)

    def reached_parameters(self, encoder: Encoder) -> list[nn.Parameter]:
        """The embeddings, the layers up to the universal one and the query projection."""
        return [*encoder.embeddings.parameters(), *encoder.encoder.layer[: self.layer].parameters(),
                *self.query_projection.parameters()]  # fmt: skip

    def step_metrics(self, extras: dict[str, float], count: int) -> dict[str, float]:
        return {"xlco/accuracy": extras["correct"] / count} if count > 0 else {}

    def flops(self, batches: list[ContrastBatch], shape: ModelShape) -> float:
        return sum(contrast_flops(*view_lengths(batches), shape, self.layer, self.queue_size, self.pooling))

    def pending_flops(self, batches: list[ContrastBatch], shape: ModelShape, examples_per_step: int) -> float:
        """The keys of the queue's pre-fill still to come, at this step's key FLOPs per draw."""
        if self.is_full:
            return 0.0
        key_flops = contrast_flops(*view_lengths(batches), shape, self.layer, self.queue_size, self.pooling)[1]
        return self.prefill_batches_needed(examples_per_step) * key_flops

    def encoder_passes(self) -> tuple[EncoderPass, ...]:
        """Half its tokens (the query view) to the universal layer with gradients, half (the
        key view) to it without."""
        return (EncoderPass(0.5, self.layer), EncoderPass(0.5, self.layer, gradients=False))

    def extra_encoders(self) -> list[nn.Module]:
        return [self.key_encoder] if self.key_encoder is not None else []

    # --- the life cycle: warm-up, pre-fill, momentum update, enqueue -------------------------

    def active_at(self, step: int) -> bool:
        """Whether XLCO trains at optimizer step ``step`` (0-based): from ``start_step`` on."""
        return step >= self.start_step

    def before_step(self, step: int, encoder: Encoder, context: StepContext) -> None:
        """At XLCO's first step: the warm-up's end, then a queue of real keys."""
        if not self.active_at(step):
            return
        self.end_warm_up(encoder, step)
        if not self.is_full:
            self.prefill_from(context)

    def after_step(self, step: int, encoder: Encoder, context: StepContext) -> dict[str, float]:
        """The key encoder follows (or, in the copy warm-up, waits: m = 1); the step's keys,
        every rank's in slot order, go into the queue."""
        with context.phase("ema"):
            momentum = self.follow(encoder, step)
        with context.phase("queue"):
            self.enqueue_step_keys(context)
        return {} if momentum is None else {"momentum": momentum}

    def enqueue_step_keys(self, context: StepContext) -> None:
        """The keys the step's micro-batches encoded: on every rank or none (the joint step gives
        each rank XLCO micro-steps alike), so every rank joins the gather."""
        if self._step_keys:
            keys, slots = (torch.cat(part) for part in zip(*self._step_keys))
            self.enqueue(keys_in_slot_order(keys, slots, context))
        self._step_keys = []

    def key_encoder_frozen_at(self, step: int) -> bool:
        """``key_warmup="copy"`` (the authors' warm-up): no momentum update before ``start_step``."""
        return step < self.start_step and self.key_warmup == "copy"

    @torch.no_grad()
    def end_warm_up(self, encoder: Encoder, step: int) -> None:
        """Before step ``step``: at ``start_step`` (> 0) with ``key_warmup="copy"``, the key
        encoder, frozen until now, becomes a copy of the query encoder, before it fills the
        queue. Nothing at any other step, nor with "momentum" (it followed all along)."""
        if step == self.start_step and step > 0 and self.key_warmup == "copy":
            self.momentum_update(encoder, momentum=0.0)

    @torch.no_grad()
    def prefill_from(self, context: StepContext) -> None:
        """Enqueue the keys of pairs drawn for the purpose (their own seed stream), encoded as a
        training step encodes keys, until the queue holds K real keys: through the model's
        forward (FSDP gathers layer by layer), every rank's in slot order."""
        draws = context.draws(self.stream, PREFILL_SEED_OFFSET)
        needed = self.prefill_batches_needed(draws.examples_per_draw)
        bar = tqdm(range(needed), desc="filling the XLCO queue", unit="batch", disable=not context.progress)
        self.prefill(self._drawn_keys(draws, j, context) for j in bar)

    def _drawn_keys(self, draws: Draws, j: int, context: StepContext) -> torch.Tensor:
        """Every rank's keys of draw ``j``, in slot order: (N, d)."""
        interrupt.check()  # the pre-fill of a large queue takes a while (minutes on a CPU)
        if context.stop_requested():
            raise StepAbandoned(f"during the XLCO queue's pre-fill ({j} key batches encoded)")
        parts = [context.side_pass(self.name, "encode_keys_of", batch) for batch in draws.batches(j)]
        keys, slots = (torch.cat(part) for part in zip(*parts))
        return keys_in_slot_order(keys, slots, context)

    def encode_keys_of(self, encoder: Encoder, batch: ContrastBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """The key vectors (B, d) of a batch and their slots (B,); none of a filler's."""
        key = batch.key
        return _queued(self.encode_keys(key.input_ids, key.attention_mask, encoder=encoder, packing=key.packing), batch)

    def prefill_batches_needed(self, keys_per_batch: int) -> int:
        """Key batches to encode (without gradient) before the queue holds K real keys."""
        missing = self.queue_size - self._position()[1]
        return max(0, math.ceil(missing / keys_per_batch))

    @torch.no_grad()
    def follow(self, encoder: Encoder, step: int) -> float | None:
        """After optimizer step ``step``: the key encoder follows the query encoder,
        k ← m·k + (1 − m)·q with m from the schedule (``momentum_at``); returns m, 1 while it
        is frozen (``key_encoder_frozen_at``), None without a key encoder (−Momentum)."""
        if self.key_encoder is None:
            return None
        if self.key_encoder_frozen_at(step):
            return 1.0
        momentum = momentum_at(step, self.momentum_schedule, self.momentum)
        self.momentum_update(encoder, momentum)
        return momentum

    def _paired_parameters(self, encoder: Encoder) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """(key tensors, matching query tensors): embeddings, layers 1…layer, projection."""
        query = dict(encoder.named_parameters())
        keys, queries = [], []
        for name, key_param in self.key_encoder.named_parameters():
            if name.startswith(("lm_head.", "pooler.")):
                continue
            keys.append(key_param)
            queries.append(query[name])
        keys.append(self.key_projection.weight)
        queries.append(self.query_projection.weight)
        return keys, queries

    @torch.no_grad()
    def momentum_update(self, encoder: Encoder, momentum: float) -> None:
        """k ← m·k + (1 − m)·q over every key parameter, as one fused foreach operation."""
        if self.key_encoder is None:
            return
        keys, queries = self._paired_parameters(encoder)
        queries = [q.detach().to(k.dtype) for q, k in zip(queries, keys)]
        torch._foreach_lerp_(keys, queries, 1.0 - momentum)

    @torch.no_grad()
    def enqueue(self, keys: torch.Tensor) -> None:
        """Write keys (N, d) — from all ranks, gathered by the caller — over the oldest entries."""
        keys = keys.detach().to(self.queue.dtype)
        K = self.queue_size
        if K == 0:  # in-batch negatives only
            return
        if keys.shape[0] > K:  # only the newest K can stay
            keys = keys[-K:]
        n = keys.shape[0]
        start, filled = self._position()
        first = min(n, K - start)
        self.queue[start : start + first] = keys[:first]
        self.queue[: n - first] = keys[first:]  # wrap around to the front
        self._queue_position = ((start + n) % K, min(filled + n, K))
        self.queue_pointer.fill_(self._queue_position[0])  # the buffers, for checkpoints
        self.queue_filled.fill_(self._queue_position[1])

    def prefill(self, key_batches) -> None:
        """Enqueue each batch of real keys (N_j, d) in turn (``prefill_from``'s, or a test's)."""
        for keys in key_batches:
            self.enqueue(keys)


def contrast_term(out: ContrastOutput) -> LossTerm:
    """The summed loss of a micro-batch's contrast, with its queries whose positive ranked first."""
    return LossTerm(out.loss_sum(), {"correct": positive_ranked_first(out.logits.detach()).sum()})


def keys_in_slot_order(keys: torch.Tensor, slots: torch.Tensor, context: StepContext) -> torch.Tensor:
    """This rank's keys (n, d) and their slots (n,) → every rank's (N, d) in global slot order
    (ranks hold contiguous slot ranges, so rank order is slot order)."""
    return context.gather_rows(keys[torch.argsort(slots)].float())


def _queued(keys: torch.Tensor, batch: ContrastBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys to enqueue and their slots: none of a filler's, (0, d) and (0,)."""
    if batch.filler:
        return keys[:0], batch.slots[:0]
    return keys, batch.slots


def view_lengths(batches: list[ContrastBatch]) -> tuple[list[int], list[int]]:
    """The real lengths of the batches' query views and key views."""
    return row_sums(b.query.attention_mask for b in batches), row_sums(b.key.attention_mask for b in batches)


def contrast_flops(query_lengths: Sequence[int], key_lengths: Sequence[int], shape: ModelShape, layer: int,
                   queue_size: int, pooling: str) -> tuple[float, float]:
    """(query side, key side) FLOPs of XLCO on views of these real lengths: the queries forward
    and backward to the universal layer with their projection, their logits against the
    positive and the queue (forward, and the gradient for q only); the keys forward only."""
    d = shape.hidden_size
    queries = len(query_lengths)
    projection = 2.0 * d * d * queries
    logits = 2.0 * d * (1 + queue_size) * queries

    def view(lengths: Sequence[int]) -> float:  # one forward to the universal layer
        read = [1] * len(lengths) if pooling == "cls" else None
        return encoder_forward_flops(lengths, shape, layer, read)

    return 3.0 * (view(query_lengths) + projection) + 2.0 * logits, view(key_lengths) + projection
