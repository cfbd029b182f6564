"""FLOPs of the encoder's parts, the units every objective's count is made of (the numerator
of MFU, objectives/*.py and train/flops.py). A multiply-add is 2 FLOPs; only real
(non-padding) tokens count. With d the hidden size, f the feed-forward size, V the vocabulary:

    P_layer = 4·d² + 2·d·f                  matmul weights of one layer (Q, K, V, O, two FFN)
    encoder forward, one sequence of T real tokens through n layers, m of whose top-layer
    outputs are read (m = T unless said otherwise):
        2·P_layer·(n − 1)·T                 the weight matmuls below the top layer, per token
      + 4·d²·T + 2·(2·d² + 2·d·f)·m         top layer: keys and values of every token; query,
                                            output projection and feed-forward of the m only
      + 4·T·d·(n − 1)·T + 4·m·d·T           attention: QKᵀ and A·V, 2·T·d each per query and layer
    embeddings                              free (a gather)
    MLM head forward, per *masked* token:   2·d·d (dense) + 2·d·V (tied decoder)

    >>> shape = ModelShape(hidden_size=2, intermediate_size=4, num_layers=1, vocab_size=10)
    >>> shape.layer_params                  # 4·4 + 2·2·4
    32
    >>> encoder_forward_flops([3], shape, 1)  # 2·32·3 + 4·3·2·3
    264.0
    >>> encoder_forward_flops([3], shape, 1, outputs=[1])  # 4·4·3 + 2·(2·4 + 2·2·4)·1 + 4·1·2·3
    120.0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

__all__ = ["ModelShape", "encoder_forward_flops", "mlm_head_forward_flops", "row_sums"]


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

    @classmethod
    def of(cls, config) -> "ModelShape":
        """The shape of an encoder with this ``EncoderConfig``."""
        return cls(config.hidden_size, config.intermediate_size, config.num_hidden_layers, config.vocab_size)


def encoder_forward_flops(
    lengths: Sequence[int], shape: ModelShape, num_layers: int, outputs: Sequence[int] | None = None
) -> float:
    """Forward FLOPs of sequences with these real lengths through ``num_layers`` layers.

    ``outputs``: per sequence, how many of its top-layer outputs are read (default: all)."""
    T = np.asarray(lengths, dtype=np.float64)  # (s,)
    m = T if outputs is None else np.asarray(outputs, dtype=np.float64)  # (s,)
    if m.shape != T.shape or (m > T).any():
        raise ValueError(f"outputs {list(m)}: expected one count per sequence, each at most its length {list(T)}")
    if num_layers == 0:
        return 0.0
    d, f, below = shape.hidden_size, shape.intermediate_size, num_layers - 1
    lower = 2.0 * shape.layer_params * below * T + 4.0 * T * T * d * below
    top = 4.0 * d * d * T + 2.0 * (2.0 * d * d + 2.0 * d * f) * m + 4.0 * m * T * d
    return float((lower + top).sum())


def mlm_head_forward_flops(num_masked: int, shape: ModelShape) -> float:
    """Forward FLOPs of the MLM head at ``num_masked`` positions: dense d×d, decoder d×V."""
    d = shape.hidden_size
    return float(num_masked) * (2.0 * d * d + 2.0 * d * shape.vocab_size)


def row_sums(masks: Iterable) -> list[int]:
    """Per row of these (B, T) 0/1 masks (a step's batches'), its count: real lengths from
    attention masks, masked tokens from masked positions."""
    return [n for mask in masks for n in mask.sum(dim=1).tolist()]
