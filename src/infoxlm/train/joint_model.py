"""The trainable part of InfoXLM in one module: what the optimizer updates and DDP synchronises.

It holds the encoder (with its tied MLM head) and the XLCO unit (``MomentumContrast``): its
query projection trains with the encoder, while its key encoder and key projection need no
gradient (DDP leaves them alone) and its queue is a buffer. One ``forward`` call computes one
micro-step's summed losses for whatever objectives the micro-step carries, so DDP sees exactly
one forward per backward.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn

from ..data.batching import ContrastBatch, MLMBatch
from ..model.encoder import Encoder
from ..objectives.vocab_loss import token_cross_entropy
from ..objectives.xlco import MomentumContrast, StepKeys, positive_ranked_first


@dataclass
class MicroStepLosses:
    """Summed (not averaged) losses of one micro-step; the caller divides by global counts."""

    mmlm: torch.Tensor | None = None  # Σ cross-entropy over masked tokens
    tlm: torch.Tensor | None = None
    xlco: torch.Tensor | None = None  # Σ InfoNCE over queries
    # Queries whose positive key ranked first: a 0-d tensor on the device (reading it here
    # would make the host wait for the micro-step's kernels), 0 without XLCO.
    xlco_correct: torch.Tensor | int = 0
    keys: torch.Tensor | None = None  # (B, d) this micro-step's keys, to enqueue after the step
    key_slots: torch.Tensor | None = None  # (B,) their slots in the global batch
    queries: torch.Tensor | None = None  # (B, d) with keys_of and queries_too: query vectors, no gradient
    touch: torch.Tensor | None = None  # 0 × each parameter the objectives miss (see JointModel.forward)


# Rows of the head's logits then start at 128-byte boundaries in bf16 (64 × 2 bytes).
VOCAB_MULTIPLE_ON_GPU = 64


class JointModel(nn.Module):
    """The encoder runs the fast paths it was built with (``encoder.fast_paths``; the key
    encoder has the same): on real tokens only, the top layer on the rows the losses read, the
    in-place word gradient (a single process only), and on a GPU the head's product padded
    to a multiple of 64 columns (``padded_vocab_logits``; the loss gives the padding
    probability 0) and the cross-entropy over it in fused kernels (``fused_vocab_loss``).
    """

    def __init__(self, encoder: Encoder, contrast: MomentumContrast | None):
        super().__init__()
        self.encoder = encoder
        # A submodule like the encoder. DDP leaves its key encoder and key projection alone
        # (they need no gradient) and the trainer does not broadcast buffers (the queue is
        # the same on every rank by construction); its query projection is trained here.
        self.contrast = contrast

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    def masked_lm_losses(self, *batches: MLMBatch) -> list[torch.Tensor]:
        """Σ cross-entropy of the masked tokens of each batch; vocabulary logits only at those.

        One head call for all batches' masked states, so that the V × d decoder (tied
        word-embedding) gradient is made once per micro-step, not once per objective; the
        head is row-wise, so each batch's sum is what a call of its own gives.
        """
        hidden = [
            self.encoder.states_at(b.input_ids, b.masked_rows, b.attention_mask, packing=b.packing) for b in batches
        ]  # each (N_i, d): the masked tokens' final states; the top layer runs its rows only
        states = torch.cat(hidden) if len(hidden) > 1 else hidden[0]  # (ΣN_i, d)
        vocab_multiple = VOCAB_MULTIPLE_ON_GPU if states.is_cuda and self.encoder.fast_paths.padded_vocabulary else 1
        logits = self.encoder.lm_head(states, vocab_multiple=vocab_multiple)  # (ΣN_i, V), or V padded
        targets = torch.cat([b.targets for b in batches]) if len(batches) > 1 else batches[0].targets  # (ΣN_i,)
        fused = self.encoder.fast_paths.fused_vocab_loss  # the Triton kernels, where they run (a GPU)
        per_token = token_cross_entropy(logits, targets, fused=fused)  # (ΣN_i,) fp32
        return [part.sum() for part in per_token.split([h.shape[0] for h in hidden])]

    def unreached_parameters(self, mlm: bool, xlco: bool) -> list[nn.Parameter]:
        """Trainable parameters that a micro-step with these objectives leaves out of the graph.

        MMLM/TLM reach the whole encoder and head; XLCO alone reaches the embeddings and the
        layers up to the universal one; the query projection only XLCO reaches.
        """
        reached: list[nn.Parameter] = []
        if mlm:
            reached += self.encoder.parameters()
        elif xlco:
            reached += self.encoder.embeddings.parameters()
            reached += self.encoder.encoder.layer[: self.contrast.layer].parameters()
        if xlco:
            reached += self.contrast.query_projection.parameters()
        reached_ids = {id(p) for p in reached}
        return [p for p in self.trainable_parameters() if id(p) not in reached_ids]

    def forward(
        self,
        mmlm: MLMBatch | None = None,
        tlm: MLMBatch | None = None,
        xlco: ContrastBatch | None = None,
        touch_unreached: bool = False,
        keys_of: ContrastBatch | None = None,
        queries_too: bool = False,
        step_keys: StepKeys | None = None,
        query_seed: int | None = None,
    ) -> MicroStepLosses:
        """Losses of the given micro-batches (any may be None); a filler's count 0 and its
        keys are not returned.

        touch_unreached adds 0 × one element of every trainable parameter that this
        micro-step's objectives do not reach (layers above the universal layer in an XLCO-only
        micro-step, the query projection while XLCO is off), so that each parameter takes
        part in the graph. The trainer touches on a step's last micro-step, in one process and
        under DDP (FSDP gives such parameters zero gradients after the backward instead): DDP
        then never meets an unused parameter, and every parameter has a gradient (zero, not
        missing: AdamW decays and moves a parameter with a zero gradient and skips one with
        none) with one process or many. Only those parameters get the (dense, zero) gradient of
        the touch.

        keys_of: only the key vectors of these pairs (filling the queue, or a step's keys
        before its queries), without gradient, and with queries_too their query vectors; through
        ``forward`` so that FSDP gathers the weights it needs as in a training step.

        step_keys: every key of the step (``StepKeys``): the XLCO queries are contrasted with
        them, and no key is encoded or returned for the queue (the step queues ``step_keys``).

        query_seed: the XLCO query views' dropout drawn from this seed, not from the running
        RNG, so that the pass without gradient (queries_too) and the pass with it draw the same
        masks: the symmetric loss's k→q gradient is computed from the first (``StepKeys``).
        """
        out = MicroStepLosses()
        if keys_of is not None:
            query, view = keys_of.query, keys_of.key
            keys = self.contrast.encode_keys(view.input_ids, view.attention_mask, encoder=self.encoder, packing=view.packing)
            out.keys, out.key_slots = _queued(keys, keys_of)
            if queries_too:
                with torch.no_grad(), seeded_dropout(query_seed, query.input_ids.device):
                    queries = self.contrast.encode_queries(
                        self.encoder, query.input_ids, query.attention_mask, packing=query.packing
                    )
                out.queries = _queued(queries, keys_of)[0]
            return out
        mlm = [b for b in (mmlm, tlm) if b is not None]
        if mlm:
            sums = iter(self.masked_lm_losses(*mlm))
            out.mmlm = _counted(next(sums), mmlm) if mmlm is not None else None
            out.tlm = _counted(next(sums), tlm) if tlm is not None else None
        if xlco is not None:
            query, key = xlco.query, xlco.key
            with seeded_dropout(query_seed, query.input_ids.device):
                contrast = self.contrast(
                    self.encoder, query.input_ids, query.attention_mask, key.input_ids, key.attention_mask,
                    query_packing=query.packing, key_packing=key.packing, step=step_keys, slots=xlco.slots,
                )  # fmt: skip
            out.xlco = _counted(contrast.loss_sum(), xlco)
            if not xlco.filler:
                out.xlco_correct = positive_ranked_first(contrast.logits.detach()).sum()
            if step_keys is None:
                out.keys, out.key_slots = _queued(contrast.keys, xlco)
        if touch_unreached:
            unreached = self.unreached_parameters(bool(mlm), xlco is not None)
            if unreached:
                out.touch = sum(p.view(-1)[0] for p in unreached) * 0.0
        return out


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


def _counted(loss_sum: torch.Tensor, batch: MLMBatch | ContrastBatch) -> torch.Tensor:
    """A filler's loss (``data.batching.filler_mlm_batch``) stays in the graph, so that its
    backward pass runs the modules every rank runs, but counts 0: no loss, zero gradients."""
    return loss_sum * 0.0 if batch.filler else loss_sum


def _queued(keys: torch.Tensor, batch: ContrastBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """The keys to enqueue and their slots: none of a filler's, (0, d) and (0,)."""
    if batch.filler:
        return keys[:0], batch.slots[:0]
    return keys, batch.slots
