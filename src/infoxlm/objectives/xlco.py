"""XLCO: cross-lingual contrast with a momentum key encoder and a queue of negatives.

A translation pair is two views of one meaning. The query view goes through the model being
trained (the *query encoder*); the key view through a slowly moving copy of it (the *key
encoder*, updated as k ← m·k + (1 − m)·q and never by gradients). Both take the ``<s>`` hidden
state at the *universal layer* (8 of 12 for base, 12 of 24 for large) and run no further; a
linear projection (with its own momentum copy) maps it to the contrast space. The query must
pick its own key out of the positive and the K keys of earlier batches kept in a FIFO queue:

    logits = [q·k⁺, q·n_1, …, q·n_K] / τ          loss = cross-entropy with target 0

This module owns the key side (key encoder, projections, queue) and its whole life in a run:
the warm-up (``contrast.start_step``: the key encoder frozen, then a copy of the query
encoder), the queue's pre-fill with real keys before XLCO's first step, the momentum update
after each optimizer step and the enqueue of the step's keys (the trainer calls them in that
order, see train/loop.py and train/joint_step.py). The query encoder is the shared model and
is passed in, so its parameters live only once, in the model, the optimizer and DDP.
``use_momentum=False`` is the paper's −Momentum ablation: keys come from the query encoder
itself (without gradient) and there is no copy at all.

Every option is a field of ``train.config.ContrastConfig`` (``ContrastSettings`` below names
them), whose defaults are the only ones: the module is built from such an object alone.

Beyond the paper, the translation-ranking family (LaBSE's objective, Feng et al., 2022) is
options of the same contrast: ``in_batch_negatives`` (the batch's other keys are negatives
too), ``symmetric`` (the k→q direction as well, averaged), ``margin`` (subtracted from the
positive's score). In training, a batch is the whole step: ``StepKeys`` holds every key of
the step, computed before any query, so that what a query is contrasted with does not depend
on how the step is cut into micro-batches or processes.

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
from typing import Iterable, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from ..model.encoder import Encoder
from ..model.packing import Packing
from ..model.sentence_layer import POOLINGS


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
    """logits (B, 1 + K): column 0 is the positive key; keys (B, d): to enqueue after the step.

    margin: subtracted from column 0 by the loss only (in logit units, margin / τ), so that
    ``accuracy`` reads the scores themselves. reverse (B,): with ``symmetric``, each pair's
    k→q loss, which the loss averages with the q→k one."""

    logits: torch.Tensor
    keys: torch.Tensor
    margin: float = 0.0
    reverse: torch.Tensor | None = None

    def loss(self) -> torch.Tensor:
        """Mean InfoNCE loss over the B queries."""
        if not self.margin and self.reverse is None:
            return F.cross_entropy(self.logits.float(), self.targets())
        return self.loss_sum() / self.logits.shape[0]

    def loss_sum(self) -> torch.Tensor:
        if not self.margin and self.reverse is None:  # the paper's contrast
            return F.cross_entropy(self.logits.float(), self.targets(), reduction="sum")
        forward = F.cross_entropy(with_margin(self.logits.float(), self.margin), self.targets(), reduction="none")
        if self.reverse is None:
            return forward.sum()
        return 0.5 * (forward + self.reverse).sum()

    def targets(self) -> torch.Tensor:
        return torch.zeros(self.logits.shape[0], dtype=torch.long, device=self.logits.device)

    def accuracy(self) -> float:
        """Share of queries whose positive key scores strictly highest."""
        return float(positive_ranked_first(self.logits).float().mean())


def with_margin(logits: torch.Tensor, margin: float) -> torch.Tensor:
    """logits (B, 1 + N) with column 0 lowered by ``margin``: LaBSE's additive margin."""
    if not margin:
        return logits
    return torch.cat([logits[:, :1] - margin, logits[:, 1:]], dim=1)


@dataclass
class StepKeys:
    """Every key of a training step, all ranks', in global slot order: the positives and the
    in-step negatives of ``in_batch_negatives``. They need no gradient, so the trainer
    computes them all before any query; a query is then contrasted with the same keys
    whatever the micro-batch budget or the number of processes (``MomentumContrast.forward``
    with ``step=``). Fillers' keys are never among them.

    With ``symmetric``, also the k→q direction, whose softmax runs over the step's queries:
    computed once from query vectors encoded without gradient, as each anchor key's loss
    and, for each query, the gradient of the step's summed k→q loss with respect to it,
    which the query's own micro-step then passes into the encoder (GradCache's way)."""

    keys: torch.Tensor  # (N, d) fp32
    slots: torch.Tensor  # (N,) long, ascending
    reverse_loss: torch.Tensor | None = None  # (N,) k→q loss of anchor key i
    reverse_grad: torch.Tensor | None = None  # (N, d) ∂(Σ_i reverse_loss_i) / ∂q_j

    def rows(self, slots: torch.Tensor) -> torch.Tensor:
        """slots (B,) → their rows (B,). A filler's (slot 0, maybe absent) gets some row: it counts 0."""
        return torch.searchsorted(self.slots, slots).clamp(max=self.slots.shape[0] - 1)


def with_margin_on_diagonal(scores: torch.Tensor, margin: float) -> torch.Tensor:
    """scores (N, N), pair i's own at [i, i], that one lowered by ``margin``."""
    if not margin:
        return scores
    return scores - margin * torch.eye(scores.shape[0], dtype=scores.dtype, device=scores.device)


def positive_ranked_first(logits: torch.Tensor) -> torch.Tensor:
    """logits (B, 1 + N) with the positive in column 0 → (B,) bool: positive strictly above all.

    Strictly: a collapsed encoder gives every key the same score, and argmax would then pick
    column 0 and report perfect accuracy.
    """
    if logits.shape[1] == 1:
        return torch.ones(logits.shape[0], dtype=torch.bool, device=logits.device)
    return logits[:, 0] > logits[:, 1:].max(dim=1).values


class MomentumContrast(nn.Module):
    """Key encoder, query/key projections and the queue of negative keys, for the query
    encoder ``encoder`` and the options ``settings`` (a ``ContrastConfig``); a ValueError
    names a value that cannot be used."""

    def __init__(self, encoder: Encoder, settings: ContrastSettings):
        super().__init__()
        config = encoder.config
        layer, queue_size, temperature = settings.layer, settings.queue_size, settings.temperature
        normalize, use_momentum, in_batch_negatives = settings.normalize, settings.use_momentum, settings.in_batch_negatives
        pooling, symmetric, margin = settings.pooling, settings.symmetric, settings.margin
        if not 1 <= layer <= config.num_hidden_layers:
            raise ValueError(f"layer={layer}: expected 1 … {config.num_hidden_layers} (the universal layer)")
        if queue_size < (0 if in_batch_negatives else 1):
            raise ValueError(
                f"queue_size={queue_size}: expected a positive number of negative keys "
                "(0 is allowed only with in_batch_negatives=True)"
            )
        if not temperature > 0:
            raise ValueError(f"temperature={temperature}: expected a positive number")
        if pooling not in POOLINGS:
            raise ValueError(f"pooling={pooling!r}: expected one of {', '.join(POOLINGS)}")
        if symmetric and not in_batch_negatives:
            # k→q ranks a key among the batch's queries: without them it has one candidate.
            raise ValueError("symmetric=True: expected in_batch_negatives=True (k→q ranks among the batch's queries)")
        if not (margin >= 0 and math.isfinite(margin)):
            raise ValueError(f"margin={margin}: expected a finite number >= 0")
        if margin > 0 and not normalize:
            # A margin is a distance in cosine units; raw dot products have no fixed scale.
            raise ValueError(f"margin={margin}: expected normalize=True (the margin is subtracted from a cosine)")
        d = config.hidden_size
        self.layer = layer
        self.temperature = temperature
        self.normalize = normalize
        self.use_momentum = use_momentum
        self.in_batch_negatives = in_batch_negatives
        self.pooling = pooling
        self.key_dropout = settings.key_dropout
        self.symmetric = symmetric
        self.margin = margin
        # The life cycle: when XLCO starts, how the key encoder waits for it, how it follows.
        self.start_step, self.key_warmup = settings.start_step, settings.key_warmup
        self.momentum, self.momentum_schedule = settings.momentum, settings.momentum_schedule

        self.query_projection = nn.Linear(d, d, bias=False)
        nn.init.normal_(self.query_projection.weight, std=config.initializer_range)
        if use_momentum:
            # The key encoder needs only the layers up to the universal one.
            key_config = copy.deepcopy(config)
            key_config.num_hidden_layers = layer
            self.key_encoder = Encoder(key_config, encoder.fast_paths)
            self.key_projection = copy.deepcopy(self.query_projection)
            self.key_encoder.requires_grad_(False)
            self.key_projection.requires_grad_(False)
            self.momentum_update(encoder, momentum=0.0)  # start as an exact copy
        else:
            self.key_encoder = None
            self.key_projection = None

        # The queue starts as random vectors and is only trusted once real keys fill it.
        self.register_buffer("queue", torch.randn(queue_size, d) * config.initializer_range)  # (K, d)
        self.register_buffer("queue_pointer", torch.zeros((), dtype=torch.long))
        self.register_buffer("queue_filled", torch.zeros((), dtype=torch.long))
        # (pointer, filled) as host ints: every step reads them, and reading a buffer on a GPU
        # waits for every queued kernel. Read from the buffers once, again after a load.
        self._queue_position: tuple[int, int] | None = None
        self.register_load_state_dict_post_hook(MomentumContrast._forget_queue_position)

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

    def _encode(
        self,
        encoder: Encoder,
        projection: nn.Linear,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        packing: Packing | None,
    ) -> torch.Tensor:
        """(B, T) views → contrast vectors (B, d): each sentence's state at the universal layer,
        pooled as ``embedding.pool`` pools a padded state — the ``<s>`` state (the paper) or the
        mean over real tokens (as retrieval pools them), computing nothing the pooling does not
        read — then projected, and unit length with normalize."""
        if packing is None:
            packing = Packing.of(attention_mask)
        if self.pooling == "cls":
            rows = packing.first_rows  # (B,) each view's <s>
            vectors = encoder.states_at(input_ids, rows, attention_mask, num_layers=self.layer, packing=packing)
        else:
            tokens = encoder(input_ids, attention_mask, num_layers=self.layer, packing=packing).token_states()  # (n, d)
            vectors = packing.sequence_means(tokens)
        z = projection(vectors)
        return F.normalize(z, dim=-1) if self.normalize else z

    def encode_queries(
        self, encoder: Encoder, input_ids: torch.Tensor, attention_mask: torch.Tensor, *, packing: Packing | None = None
    ) -> torch.Tensor:
        """Query vectors (B, d), with gradients, from the query encoder stopped at the universal layer.

        ``packing``: the batch's, if it carries one (see ``Encoder.forward``)."""
        return self._encode(encoder, self.query_projection, input_ids, attention_mask, packing)

    @torch.no_grad()
    def encode_keys(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        encoder: Encoder | None = None,
        *,
        packing: Packing | None = None,
    ) -> torch.Tensor:
        """Key vectors (B, d), without gradients. ``encoder`` is needed only with use_momentum=False."""
        if self.key_encoder is None:
            if encoder is None:
                raise ValueError("use_momentum=False: keys come from the query encoder; pass encoder=")
            return self._encode(encoder, self.query_projection, input_ids, attention_mask, packing).detach()
        # key_dropout: the key encoder in training mode, with the query encoder's dropout (the
        # authors' code); else in eval mode, keys without dropout (a target not itself noisy).
        self.key_encoder.train(self.key_dropout)
        return self._encode(self.key_encoder, self.key_projection, input_ids, attention_mask, packing)

    def forward(
        self,
        encoder: Encoder,
        query_ids: torch.Tensor,
        query_mask: torch.Tensor,
        key_ids: torch.Tensor,
        key_mask: torch.Tensor,
        *,
        query_packing: Packing | None = None,
        key_packing: Packing | None = None,
        step: StepKeys | None = None,
        slots: torch.Tensor | None = None,
    ) -> ContrastOutput:
        """XLCO on B translation pairs: query vectors (with gradients) from ``encoder``, key
        vectors from the key encoder, logits against the positive and the negatives. The
        trainer's loss is ``.loss_sum()`` of this; the keys go into the queue after the
        optimizer step. ``*_packing``: the views' own, if the batch carries them.

        step, slots: the step's keys, computed before (``StepKeys``), and the pairs' slots
        (B,) in the step: the positives and in-step negatives are read there and no key is
        encoded here; without them the B pairs are the whole batch."""
        q = self.encode_queries(encoder, query_ids, query_mask, packing=query_packing)  # (B, d)
        if step is not None:
            return self.step_contrast(q, step, step.rows(slots))
        k = self.encode_keys(key_ids, key_mask, encoder=encoder, packing=key_packing)  # (B, d)
        return self.batch_contrast(q, k)

    def batch_contrast(self, q: torch.Tensor, k: torch.Tensor) -> ContrastOutput:
        """q, k (B, d) of B pairs that are the whole batch: q→k logits (``contrast_logits``)
        and, with symmetric, each pair's k→q loss over the batch's queries."""
        reverse = None
        if self.symmetric:  # the gradient flows through the queries, the candidates here
            scores = with_margin_on_diagonal(k.float() @ q.float().t(), self.margin) / self.temperature  # (B, B)
            reverse = F.cross_entropy(scores, torch.arange(q.shape[0], device=q.device), reduction="none")
        return ContrastOutput(self.contrast_logits(q, k), k, self.margin / self.temperature, reverse)

    def contrast_logits(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """q, k (B, d) → logits (B, 1 + K) = [q·k, q·queueᵀ] / τ, in fp32.

        With in_batch_negatives the other B − 1 keys of the batch are negatives too, placed
        between the positive and the queue: (B, 1 + B + K), a query's own key masked to −inf
        in the middle block. They come from the same key-encoder state as the positive, so a
        fast-changing encoder (from-scratch training) cannot tell its positive from the
        negatives by age alone, as it can with a queue of older keys.
        """
        q, k = q.float(), k.float()
        parts = [(q * k).sum(dim=-1, keepdim=True)]  # (B, 1)
        if self.in_batch_negatives:
            others = q @ k.t()  # (B, B)
            own = torch.eye(q.shape[0], dtype=torch.bool, device=q.device)
            parts.append(others.masked_fill(own, float("-inf")))
        if self.queue_size > 0:
            parts.append(q @ self.queue.t().float())  # (B, K)
        return torch.cat(parts, dim=1) / self.temperature

    # --- a whole step's keys ------------------------------------------------------------------

    @torch.no_grad()
    def step_keys(self, keys: torch.Tensor, slots: torch.Tensor, queries: torch.Tensor | None = None) -> StepKeys:
        """``StepKeys`` from every key of the step (N, d) and their slots (N,), in any order;
        with ``symmetric``, ``queries`` (N, d): the same pairs' query vectors, without gradient."""
        order = torch.argsort(slots)
        keys, slots = keys[order].float(), slots[order]
        if not self.symmetric:
            return StepKeys(keys, slots)
        q = queries[order].float()
        # Anchors: the keys (rows); candidates: the step's queries (columns).
        scores = with_margin_on_diagonal(keys @ q.t(), self.margin) / self.temperature  # (N, N)
        log_z = torch.logsumexp(scores, dim=1)  # (N,)
        loss = log_z - scores.diagonal()  # (N,)
        # ∂loss_i/∂q_j = (p_ij − [i = j]) · k_i / τ, with p_ij = softmax over j of row i.
        weights = torch.exp(scores - log_z[:, None])  # (N, N)
        weights.diagonal().sub_(1.0)
        return StepKeys(keys, slots, loss, weights.t() @ keys / self.temperature)

    def step_contrast(self, q: torch.Tensor, step: StepKeys, rows: torch.Tensor) -> ContrastOutput:
        """q (B, d), the pairs' rows (B,) in ``step`` → logits (B, 1 + N + K): the positive,
        the step's N keys (a query's own masked to −inf), the queue; all in fp32."""
        q32 = q.float()
        positives = step.keys[rows]  # (B, d)
        parts = [(q32 * positives).sum(dim=-1, keepdim=True)]  # (B, 1)
        own = torch.zeros(q.shape[0], step.keys.shape[0], dtype=torch.bool, device=q.device)
        own[torch.arange(q.shape[0], device=q.device), rows] = True
        parts.append((q32 @ step.keys.t()).masked_fill(own, float("-inf")))  # (B, N)
        if self.queue_size > 0:
            parts.append(q32 @ self.queue.t().float())  # (B, K)
        logits = torch.cat(parts, dim=1) / self.temperature
        reverse = None
        if step.reverse_grad is not None:
            # The k→q losses of these pairs' anchors, and a term that is 0 in value and whose
            # gradient with respect to q is the step's: ∂(Σ_i loss_i)/∂q_j for each query j.
            passed = (q32 * step.reverse_grad[rows]).sum(dim=-1)  # (B,)
            reverse = step.reverse_loss[rows] + (passed - passed.detach())
        return ContrastOutput(logits, positives, self.margin / self.temperature, reverse)

    # --- the life cycle: warm-up, pre-fill, momentum update, enqueue -------------------------

    def active_at(self, step: int) -> bool:
        """Whether XLCO trains at optimizer step ``step`` (0-based): from ``start_step`` on."""
        return step >= self.start_step

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
    def prefill(self, key_batches: Iterable[torch.Tensor]) -> None:
        """Before XLCO's first step: enqueue each batch of real keys (N_j, d), drawn for the
        purpose and encoded without gradient (all ranks', in slot order; the trainer draws
        ``prefill_batches_needed`` of them), so that the first negatives are keys, not the
        random vectors the queue starts with."""
        for keys in key_batches:
            self.enqueue(keys)

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
