"""The trainable part of InfoXLM in one module: what the optimizer updates and DDP synchronises.

It holds the encoder (with its tied MLM head) and XLCO's query projection; the key encoder,
key projection and queue stay outside (in ``MomentumContrast``), with no gradients and outside
DDP. One ``forward`` call computes one micro-step's summed losses for whatever objectives the
micro-step carries, so DDP sees exactly one forward per backward.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..data.batching import ContrastBatch, MLMBatch
from ..model.encoder import Encoder
from ..objectives.xlco import MomentumContrast, positive_ranked_first


@dataclass
class MicroStepLosses:
    """Summed (not averaged) losses of one micro-step; the caller divides by global counts."""

    mmlm: torch.Tensor | None = None  # Σ cross-entropy over masked tokens
    tlm: torch.Tensor | None = None
    xlco: torch.Tensor | None = None  # Σ InfoNCE over queries
    xlco_correct: int = 0  # queries whose positive key ranked first
    keys: torch.Tensor | None = None  # (B, d) this micro-step's keys, to enqueue after the step
    key_slots: torch.Tensor | None = None  # (B,) their slots in the global batch
    touch: torch.Tensor | None = None  # 0 × every trainable parameter (see JointModel.forward)


class JointModel(nn.Module):
    def __init__(self, encoder: Encoder, contrast: MomentumContrast | None):
        super().__init__()
        self.encoder = encoder
        self.query_projection = contrast.query_projection if contrast is not None else None
        # Held without registering it: its key encoder and queue must stay out of DDP.
        self._contrast = [contrast]

    @property
    def contrast(self) -> MomentumContrast | None:
        return self._contrast[0]

    def trainable_parameters(self) -> list[nn.Parameter]:
        return [p for p in self.parameters() if p.requires_grad]

    def masked_lm_loss(self, batch: MLMBatch) -> torch.Tensor:
        """Σ cross-entropy of the masked tokens; vocabulary logits only at those positions."""
        hidden = self.encoder(batch.input_ids, batch.attention_mask).last_hidden_state  # (B, T, d)
        logits = self.encoder.lm_head(hidden, batch.masked_positions)  # (N, V)
        return F.cross_entropy(logits.float(), batch.targets, reduction="sum")

    def forward(
        self,
        mmlm: MLMBatch | None = None,
        tlm: MLMBatch | None = None,
        xlco: ContrastBatch | None = None,
        touch_all: bool = False,
    ) -> MicroStepLosses:
        """Losses of the given micro-batches (any may be None).

        touch_all adds 0 × one element of every trainable parameter, so each parameter takes
        part in the graph even when this micro-step's objectives do not reach it (layers above
        the universal layer in an XLCO-only micro-step, the query projection while XLCO is
        off): DDP then never meets an unused parameter, and a parameter's gradient is the same
        (zero, not missing) with one process or many.
        """
        out = MicroStepLosses()
        if mmlm is not None:
            out.mmlm = self.masked_lm_loss(mmlm)
        if tlm is not None:
            out.tlm = self.masked_lm_loss(tlm)
        if xlco is not None:
            contrast = self.contrast
            q = contrast.encode_queries(self.encoder, xlco.query.input_ids, xlco.query.attention_mask)
            k = contrast.encode_keys(xlco.key.input_ids, xlco.key.attention_mask, encoder=self.encoder)
            logits = contrast.contrast_logits(q, k)  # (B, 1 + K)
            targets = torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
            out.xlco = F.cross_entropy(logits, targets, reduction="sum")
            out.xlco_correct = int(positive_ranked_first(logits.detach()).sum())
            out.keys, out.key_slots = k, xlco.slots
        if touch_all:
            out.touch = sum(p.view(-1)[0] for p in self.trainable_parameters()) * 0.0
        return out
