"""MMLM and TLM: one objective, two instances.

Multilingual masked LM (MMLM) predicts the masked tokens of monolingual blocks; translation LM
(TLM) those of a translation pair written one after the other (``<s> a </s> b </s>``), so that
a token masked in one language can be read off the other. The loss is the same, so is the
model: the final states at the masked positions go through the tied MLM head, and the loss is
the cross-entropy with the original tokens, summed over masked tokens and divided by their
count over the step (the paper's normaliser). The head call itself is the model's
(``VocabularyTargets``): one for every token-predicting objective of a micro-step.
"""

from __future__ import annotations

from torch import nn

from ..data.batching import MLMBatch
from ..model.flops import ModelShape, encoder_forward_flops, mlm_head_forward_flops, row_sums
from .objective import Objective, VocabularyTargets

__all__ = ["MaskedLM", "masked_lm_flops"]


class MaskedLM(Objective):
    """Masked-token prediction on the stream ``stream`` ("mmlm" or "tlm"), logged as ``loss/NAME``."""

    predicts_tokens = True

    def __init__(self, name: str, weight: float = 1.0):
        super().__init__(weight)
        self.name = self.stream = name

    def count(self, stats) -> int:
        return stats.num_masked  # masked tokens

    def loss(self, encoder: nn.Module, batch: MLMBatch) -> VocabularyTargets:
        # (N, d): the masked tokens' final states; the top layer runs those rows only.
        states = encoder.states_at(batch.input_ids, batch.masked_rows, batch.attention_mask, packing=batch.packing)
        return VocabularyTargets(states, batch.targets)

    def reached_parameters(self, encoder: nn.Module) -> list[nn.Parameter]:
        return list(encoder.parameters())  # every layer and the head

    def flops(self, batches: list[MLMBatch], shape: ModelShape) -> float:
        lengths, masked = row_sums(b.attention_mask for b in batches), row_sums(b.masked_positions for b in batches)
        return masked_lm_flops(lengths, masked, shape)


def masked_lm_flops(lengths: list[int], masked: list[int], shape: ModelShape) -> float:
    """Forward and backward (3 × forward) over all layers, the top one and the head at the
    masked tokens only: sequences of these real lengths with these masked tokens each."""
    return 3.0 * (encoder_forward_flops(lengths, shape, shape.num_layers, masked) + mlm_head_forward_flops(sum(masked), shape))
