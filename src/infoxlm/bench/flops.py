"""Useful FLOPs of one joint training step: the numerator of MFU.

"Useful" counts the arithmetic the method needs, on real (non-padding) tokens only, so a
faster implementation never earns a better MFU by doing extra work (padding, vocabulary
logits at unmasked positions, key layers above the universal layer). A multiply-add is 2
FLOPs. With d the hidden size, f the feed-forward size, V the vocabulary, K the queue size:

    P_layer = 4·d² + 2·d·f                  matmul weights of one layer (Q, K, V, O, two FFN)
    encoder forward, one sequence of T real tokens through n layers:
        2·P_layer·n·T                       the weight matmuls, per token
      + 4·T·d·n·T                           attention: QKᵀ and A·V, 2·T·d each per token and layer
    embeddings                              free (a gather)
    MLM head forward, per *masked* token:   2·d·d (dense) + 2·d·V (tied decoder)
    XLCO, per query:                        2·d·d (projection) + 2·d·(1 + K) (positive + queue logits)

    MMLM, TLM      3 × (encoder forward over all L layers + head over masked tokens)
    XLCO query     3 × (encoder forward to the universal layer l + projection)
                   + 2 × logits (forward, and the gradient for q only: the queue is not trained)
    XLCO key       1 × (encoder forward to layer l + projection): no backward

Backward = 2 × forward for everything trained (gradients for activations and for weights).
In-batch negatives (``contrast.in_batch_negatives``, the demo's) add 2·d·(B − 1) logit FLOPs
per query, under 0.1 % of the demo's step; they are not counted.

    >>> shape = ModelShape(hidden_size=2, intermediate_size=4, num_layers=1, vocab_size=10)
    >>> shape.layer_params                  # 4·4 + 2·2·4
    32
    >>> encoder_forward_flops([3], shape, 1)  # 2·32·3 + 4·3·2·3
    264.0
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class ModelShape:
    """The sizes the FLOP count depends on."""

    hidden_size: int  # d
    intermediate_size: int  # f
    num_layers: int  # L
    vocab_size: int  # V

    @property
    def layer_params(self) -> int:
        """Matmul weights of one layer: Q, K, V, O (4·d²) and the feed-forward pair (2·d·f)."""
        d, f = self.hidden_size, self.intermediate_size
        return 4 * d * d + 2 * d * f


def encoder_forward_flops(lengths: Sequence[int], shape: ModelShape, num_layers: int) -> float:
    """Forward FLOPs of sequences with these real lengths through ``num_layers`` layers."""
    T = np.asarray(lengths, dtype=np.float64)  # (n,)
    d, n = shape.hidden_size, num_layers
    return float((2.0 * shape.layer_params * n * T + 4.0 * T * T * d * n).sum())


def mlm_head_forward_flops(num_masked: int, shape: ModelShape) -> float:
    """Forward FLOPs of the MLM head at ``num_masked`` positions: dense d×d, decoder d×V."""
    d = shape.hidden_size
    return float(num_masked) * (2.0 * d * d + 2.0 * d * shape.vocab_size)


@dataclass(frozen=True)
class StepFlops:
    """Useful FLOPs of one step, by objective (forward + backward where trained)."""

    mmlm: float
    tlm: float
    xlco_query: float
    xlco_key: float

    @property
    def total(self) -> float:
        return self.mmlm + self.tlm + self.xlco_query + self.xlco_key

    def to_dict(self) -> dict[str, float]:
        return {**asdict(self), "total": self.total}


def joint_step_flops(
    shape: ModelShape,
    *,
    mmlm_lengths: Sequence[int],
    mmlm_masked: int,
    tlm_lengths: Sequence[int],
    tlm_masked: int,
    xlco_query_lengths: Sequence[int],
    xlco_key_lengths: Sequence[int],
    contrast_layer: int,
    queue_size: int,
) -> StepFlops:
    """Useful FLOPs of one MMLM + TLM + XLCO step (see the module docstring for the formula)."""
    if not 1 <= contrast_layer <= shape.num_layers:
        raise ValueError(f"contrast_layer={contrast_layer}: expected 1 … {shape.num_layers}")
    if len(xlco_query_lengths) != len(xlco_key_lengths):
        raise ValueError(
            f"{len(xlco_query_lengths)} query views but {len(xlco_key_lengths)} key views; expected one key per query"
        )
    d, L = shape.hidden_size, shape.num_layers
    queries = len(xlco_query_lengths)
    projection = 2.0 * d * d * queries
    logits = 2.0 * d * (1 + queue_size) * queries
    mmlm = 3.0 * (encoder_forward_flops(mmlm_lengths, shape, L) + mlm_head_forward_flops(mmlm_masked, shape))
    tlm = 3.0 * (encoder_forward_flops(tlm_lengths, shape, L) + mlm_head_forward_flops(tlm_masked, shape))
    query = 3.0 * (encoder_forward_flops(xlco_query_lengths, shape, contrast_layer) + projection) + 2.0 * logits
    key = encoder_forward_flops(xlco_key_lengths, shape, contrast_layer) + projection
    return StepFlops(mmlm=mmlm, tlm=tlm, xlco_query=query, xlco_key=key)


# Dense bf16 peak of the accelerators we compare against (no sparsity), FLOP/s. Keys are
# matched against torch.cuda.get_device_name() in order, so the more specific come first.
PEAK_BF16_FLOPS: tuple[tuple[tuple[str, ...], float], ...] = (
    (("H200",), 989.4e12),
    (("H100", "PCIe"), 756e12),
    (("H100",), 989.4e12),  # SXM (HBM3)
    (("A100",), 312e12),
)


def peak_bf16_flops(device_name: str) -> float | None:
    """Dense bf16 peak for a GPU name such as 'NVIDIA H100 80GB HBM3'; None when unknown."""
    for words, peak in PEAK_BF16_FLOPS:
        if all(w.lower() in device_name.lower() for w in words):
            return peak
    return None


def mfu(flops_per_step: float, step_seconds: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: useful FLOPs per second / the device's peak."""
    if step_seconds <= 0 or peak_flops <= 0:
        raise ValueError(f"step_seconds={step_seconds}, peak_flops={peak_flops}: expected positive numbers")
    return flops_per_step / (step_seconds * peak_flops)
