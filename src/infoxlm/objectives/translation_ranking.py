"""The translation-ranking family (LaBSE's objective, Feng et al., 2022) on XLCO's momentum
contrast: options beyond the paper, each a field of ``train.config.ContrastConfig``.

* ``in_batch_negatives``: the other keys of the step are negatives too, beside the queue. In
  training, a batch is the whole step: every key of the step is computed before any query
  (``StepKeys``, in ``before_micro_steps``), so that what a query is contrasted with does not depend
  on how the step is cut into micro-batches or processes. They come from the same
  key-encoder state as the positive, so a fast-changing encoder (from-scratch training)
  cannot tell its positive from the negatives by age alone, as it can with a queue of older
  keys.
* ``symmetric``: the k→q direction as well (a key ranks its query among the step's queries),
  averaged with q→k. It is computed once a step from query vectors encoded without gradient,
  and each query's micro-step passes the step's gradient with respect to it into the
  encoder (GradCache's way); both query passes draw the same dropout (a seed per micro-batch).
* ``margin``: subtracted from the positive's score (in logit units, margin / τ) by the loss
  only, so that the accuracy reads the scores themselves.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..data.batching import ContrastBatch
from ..model.encoder import Encoder
from .objective import LossTerm, StepContext
from .xlco import ContrastOutput, ContrastSettings, MomentumContrast, contrast_term

__all__ = ["RankingOutput", "StepKeys", "TranslationRanking", "seeded_dropout"]


@dataclass
class RankingOutput(ContrastOutput):
    """``ContrastOutput`` with the family's terms. margin: subtracted from column 0 by the loss
    only; reverse (B,): with ``symmetric``, each pair's k→q loss, averaged with q→k."""

    margin: float = 0.0
    reverse: torch.Tensor | None = None

    def loss(self) -> torch.Tensor:
        return self.loss_sum() / self.logits.shape[0]

    def loss_sum(self) -> torch.Tensor:
        if not self.margin and self.reverse is None:  # the paper's contrast
            return super().loss_sum()
        forward = F.cross_entropy(with_margin(self.logits.float(), self.margin), self.targets(), reduction="none")
        if self.reverse is None:
            return forward.sum()
        return 0.5 * (forward + self.reverse).sum()


def with_margin(logits: torch.Tensor, margin: float) -> torch.Tensor:
    """logits (B, 1 + N) with column 0 lowered by ``margin``: LaBSE's additive margin."""
    if not margin:
        return logits
    return torch.cat([logits[:, :1] - margin, logits[:, 1:]], dim=1)


def with_margin_on_diagonal(scores: torch.Tensor, margin: float) -> torch.Tensor:
    """scores (N, N), pair i's own at [i, i], that one lowered by ``margin``."""
    if not margin:
        return scores
    return scores - margin * torch.eye(scores.shape[0], dtype=scores.dtype, device=scores.device)


@dataclass
class StepKeys:
    """Every key of a training step, all ranks', in global slot order: the positives and the
    in-step negatives. Fillers' keys are never among them. With ``symmetric``, also each
    anchor key's k→q loss and, for each query, the gradient of the step's summed k→q loss
    with respect to it."""

    keys: torch.Tensor  # (N, d) fp32
    slots: torch.Tensor  # (N,) long, ascending
    reverse_loss: torch.Tensor | None = None  # (N,) k→q loss of anchor key i
    reverse_grad: torch.Tensor | None = None  # (N, d) ∂(Σ_i reverse_loss_i) / ∂q_j

    def rows(self, slots: torch.Tensor) -> torch.Tensor:
        """slots (B,) → their rows (B,). A filler's (slot 0, maybe absent) gets some row: it counts 0."""
        return torch.searchsorted(self.slots, slots).clamp(max=self.slots.shape[0] - 1)


class TranslationRanking(MomentumContrast):
    """XLCO with in-step negatives, the k→q direction and a margin (the module docstring)."""

    def __init__(self, encoder: Encoder, settings: ContrastSettings, weight: float = 1.0):
        super().__init__(encoder, settings, weight)
        self.in_batch_negatives, self.symmetric, self.margin = settings.in_batch_negatives, settings.symmetric, settings.margin
        # The step under way (from before_micro_steps to after_step): its keys, with
        # in_batch_negatives, and the dropout seeds of its micro-batches still to come.
        self.in_step_keys: StepKeys | None = None
        self.query_seeds: list = []

    # --- a batch that is the whole batch (outside training, or without in-step keys) -------

    def forward(self, encoder: Encoder, query_ids: torch.Tensor, query_mask: torch.Tensor, key_ids: torch.Tensor,
                key_mask: torch.Tensor, *, query_packing=None, key_packing=None, step: StepKeys | None = None,
                slots: torch.Tensor | None = None) -> RankingOutput:
        """As ``MomentumContrast.forward``; with ``step`` and ``slots`` (the pairs' slots (B,) in
        the step), the positives and in-step negatives are read from the step's keys and no
        key is encoded here."""
        q = self.encode_queries(encoder, query_ids, query_mask, packing=query_packing)  # (B, d)
        if step is not None:
            return self.step_contrast(q, step, step.rows(slots))
        k = self.encode_keys(key_ids, key_mask, encoder=encoder, packing=key_packing)  # (B, d)
        return self.batch_contrast(q, k)

    def batch_contrast(self, q: torch.Tensor, k: torch.Tensor) -> RankingOutput:
        """q, k (B, d) of B pairs that are the whole batch: q→k logits (``contrast_logits``)
        and, with symmetric, each pair's k→q loss over the batch's queries."""
        reverse = None
        if self.symmetric:  # the gradient flows through the queries, the candidates here
            scores = with_margin_on_diagonal(k.float() @ q.float().t(), self.margin) / self.temperature  # (B, B)
            reverse = F.cross_entropy(scores, torch.arange(q.shape[0], device=q.device), reduction="none")
        return RankingOutput(self.contrast_logits(q, k), k, self.margin / self.temperature, reverse)

    def contrast_logits(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """q, k (B, d) → logits (B, 1 + K), with in_batch_negatives (B, 1 + B + K): the other
        B − 1 keys between the positive and the queue, a query's own key masked to −inf."""
        if not self.in_batch_negatives:
            return super().contrast_logits(q, k)
        q, k = q.float(), k.float()
        own = torch.eye(q.shape[0], dtype=torch.bool, device=q.device)
        parts = [(q * k).sum(dim=-1, keepdim=True), (q @ k.t()).masked_fill(own, float("-inf"))]  # (B, 1), (B, B)
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

    def step_contrast(self, q: torch.Tensor, step: StepKeys, rows: torch.Tensor) -> RankingOutput:
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
        return RankingOutput(logits, positives, self.margin / self.temperature, reverse)

    # --- in training: the step's keys first, then each micro-batch against them ---------------

    def before_micro_steps(self, batches: list[ContrastBatch], context: StepContext) -> None:
        """With in-step negatives, every key of the step (and with symmetric its query vectors)
        before any query: each micro-batch's, gathered from all ranks in slot order (the order
        of the global batch, the same for any world size or micro-batch budget). Fillers run
        (every rank calls the same modules) but their vectors are dropped."""
        super().before_micro_steps(batches, context)
        self.in_step_keys, self.query_seeds = None, [None] * len(batches)
        if not (batches and self.in_batch_negatives):
            return
        if self.symmetric:  # one dropout seed per micro-batch, for both its query passes
            self.query_seeds = torch.randint(0, 2**62, (len(batches),)).tolist()
        with context.phase("forward"):
            parts = [context.side_pass(self.name, "encode_step_views", b, s) for b, s in zip(batches, self.query_seeds)]
            keys, slots, queries = (torch.cat(part) for part in zip(*parts))
            order = torch.argsort(slots)  # ranks hold contiguous slot ranges: gathered in rank order = slot order
            gathered = [context.gather_rows(keys[order]), context.gather_rows(slots[order])]
            if self.symmetric:
                gathered.append(context.gather_rows(queries[order]))
            self.in_step_keys = self.step_keys(*gathered)

    @torch.no_grad()
    def encode_step_views(self, encoder: Encoder, batch: ContrastBatch, query_seed: int | None):
        """A micro-batch's keys (B, d) fp32, slots (B,) and, with symmetric, query vectors (B, d)
        without gradient, drawn with the dropout of ``query_seed`` (that its loss pass redraws)."""
        keys, slots = self.encode_keys_of(encoder, batch)
        queries = keys[:0]
        if self.symmetric:
            query = batch.query
            with seeded_dropout(query_seed, query.input_ids.device):
                queries = self.encode_queries(encoder, query.input_ids, query.attention_mask, packing=query.packing)
            queries = queries[: keys.shape[0]]  # none of a filler's, as its keys
        return keys.float(), slots, queries.float()

    def loss(self, encoder: Encoder, batch: ContrastBatch) -> LossTerm:
        if self.in_step_keys is None:  # no in-step negatives: the paper's flow, with the margin
            return super().loss(encoder, batch)
        with seeded_dropout(self.query_seeds.pop(0), batch.query.input_ids.device):
            out = self.contrast(encoder, batch, step=self.in_step_keys, slots=batch.slots)
        return contrast_term(out)

    def enqueue_step_keys(self, context: StepContext) -> None:
        """With in-step keys, those (every rank's, in slot order already); else the micro-batches'."""
        if self.in_step_keys is None:
            return super().enqueue_step_keys(context)
        self.enqueue(self.in_step_keys.keys)
        self.in_step_keys = None


def seeded_dropout(seed: int | None, device: torch.device) -> contextlib.AbstractContextManager:
    """Random draws (dropout) inside from a generator seeded with ``seed``, the running RNG
    left as it was; nothing changed with None."""
    if seed is None:
        return contextlib.nullcontext()
    return _seeded(seed, device)


@contextlib.contextmanager
def _seeded(seed: int, device: torch.device):
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(seed)
        yield
