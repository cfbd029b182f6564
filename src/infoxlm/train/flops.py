"""Useful FLOPs of one joint training step: the numerator of MFU, in the training log and in
``infoxlm bench`` alike.

"Useful" counts the arithmetic the method needs, on real (non-padding) tokens only, so a
faster implementation never earns a better MFU by doing extra work (padding, vocabulary
logits at unmasked positions, key layers above the universal layer, top-layer outputs
nobody reads). A multiply-add is 2 FLOPs. With d the hidden size, f the feed-forward size,
V the vocabulary, K the queue size:

    P_layer = 4·d² + 2·d·f                  matmul weights of one layer (Q, K, V, O, two FFN)
    encoder forward, one sequence of T real tokens through n layers, m of whose top-layer
    outputs are read (m = T unless said otherwise):
        2·P_layer·(n − 1)·T                 the weight matmuls below the top layer, per token
      + 4·d²·T + 2·(2·d² + 2·d·f)·m         top layer: keys and values of every token; query,
                                            output projection and feed-forward of the m only
      + 4·T·d·(n − 1)·T + 4·m·d·T           attention: QKᵀ and A·V, 2·T·d each per query and layer
    embeddings                              free (a gather)
    MLM head forward, per *masked* token:   2·d·d (dense) + 2·d·V (tied decoder)
    XLCO, per query:                        2·d·d (projection) + 2·d·(1 + K) (positive + queue logits)

    MMLM, TLM      3 × (encoder forward over all L layers, m = the masked tokens
                        + head over the masked tokens)
    XLCO query     3 × (encoder forward to the universal layer l + projection)
                   + 2 × logits (forward, and the gradient for q only: the queue is not trained)
    XLCO key       1 × (encoder forward to layer l + projection): no backward
                   (m = 1 per view with the paper's <s> pooling; m = T with mean pooling)

Backward = 2 × forward for everything trained (gradients for activations and for weights).
In-batch negatives (``contrast.in_batch_negatives``, the demo's) add 2·d·(B − 1) logit FLOPs
per query, under 0.1 % of the demo's step; they are not counted.

    >>> shape = ModelShape(hidden_size=2, intermediate_size=4, num_layers=1, vocab_size=10)
    >>> shape.layer_params                  # 4·4 + 2·2·4
    32
    >>> encoder_forward_flops([3], shape, 1)  # 2·32·3 + 4·3·2·3
    264.0
    >>> encoder_forward_flops([3], shape, 1, outputs=[1])  # 4·4·3 + 2·(2·4 + 2·2·4)·1 + 4·1·2·3
    120.0
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
import torch


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
    mmlm_masked: Sequence[int],
    tlm_lengths: Sequence[int],
    tlm_masked: Sequence[int],
    xlco_query_lengths: Sequence[int],
    xlco_key_lengths: Sequence[int],
    contrast_layer: int,
    queue_size: int,
    pooling: str = "cls",
) -> StepFlops:
    """Useful FLOPs of one MMLM + TLM + XLCO step (see the module docstring for the formula).

    ``*_masked``: masked tokens per sequence; ``pooling``: XLCO's, "cls" (the paper) or "mean"."""
    if not 1 <= contrast_layer <= shape.num_layers:
        raise ValueError(f"contrast_layer={contrast_layer}: expected 1 … {shape.num_layers}")
    if len(xlco_query_lengths) != len(xlco_key_lengths):
        raise ValueError(
            f"{len(xlco_query_lengths)} query views but {len(xlco_key_lengths)} key views; expected one key per query"
        )
    if pooling not in ("cls", "mean"):
        raise ValueError(f"pooling={pooling!r}: expected 'cls' or 'mean'")
    d, L = shape.hidden_size, shape.num_layers
    queries = len(xlco_query_lengths)
    projection = 2.0 * d * d * queries
    logits = 2.0 * d * (1 + queue_size) * queries

    def masked_lm(lengths: Sequence[int], masked: Sequence[int]) -> float:
        return 3.0 * (encoder_forward_flops(lengths, shape, L, masked) + mlm_head_forward_flops(sum(masked), shape))

    def view(lengths: Sequence[int]) -> float:  # one forward to the universal layer
        read = [1] * len(lengths) if pooling == "cls" else None
        return encoder_forward_flops(lengths, shape, contrast_layer, read)

    query = 3.0 * (view(xlco_query_lengths) + projection) + 2.0 * logits
    key = view(xlco_key_lengths) + projection
    return StepFlops(
        mmlm=masked_lm(mmlm_lengths, mmlm_masked), tlm=masked_lm(tlm_lengths, tlm_masked), xlco_query=query, xlco_key=key
    )


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


def product_rate(
    m: int, k: int, n: int, *, device: torch.device, dtype: torch.dtype, transposed: str = "", repeat: int = 5
) -> float:
    """FLOP/s of (m × k) @ (k × n) on ``device``, the median of ``repeat`` products after two
    warm-ups: the rate a device without a known peak (a CPU) is measured at.

    ``transposed``: "left" or "right" makes that operand a transposed view of a contiguous
    tensor, as autograd hands them to the backward products."""

    def operand(rows: int, cols: int, stored_transposed: bool) -> torch.Tensor:
        if stored_transposed:
            return torch.randn(cols, rows, device=device, dtype=dtype).t()
        return torch.randn(rows, cols, device=device, dtype=dtype)

    left, right = operand(m, k, transposed == "left"), operand(k, n, transposed == "right")
    # A GPU works asynchronously: each product is timed from an idle device to an idle device.
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    seconds = []
    for i in range(repeat + 2):
        sync()
        start = time.perf_counter()
        torch.mm(left, right)
        sync()
        if i >= 2:
            seconds.append(time.perf_counter() - start)
    return 2.0 * m * k * n / statistics.median(seconds)


def mfu(flops_per_step: float, step_seconds: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: useful FLOPs per second / the device's peak."""
    if step_seconds <= 0 or peak_flops <= 0:
        raise ValueError(f"step_seconds={step_seconds}, peak_flops={peak_flops}: expected positive numbers")
    return flops_per_step / (step_seconds * peak_flops)


def step_data_flops(data, shape: ModelShape, contrast_layer: int, queue_size: int, pooling: str) -> StepFlops:
    """Useful FLOPs of a step's batches (a ``data.pipeline.StepData``; real lengths and masked
    tokens read off their masks) under these contrast settings."""

    def per_row(batches, mask: str) -> list[int]:
        return [n for b in batches for n in getattr(b, mask).sum(dim=1).tolist()]

    return joint_step_flops(
        shape,
        mmlm_lengths=per_row(data.mmlm, "attention_mask"),
        mmlm_masked=per_row(data.mmlm, "masked_positions"),
        tlm_lengths=per_row(data.tlm, "attention_mask"),
        tlm_masked=per_row(data.tlm, "masked_positions"),
        xlco_query_lengths=per_row((b.query for b in data.xlco), "attention_mask"),
        xlco_key_lengths=per_row((b.key for b in data.xlco), "attention_mask"),
        contrast_layer=contrast_layer,
        queue_size=queue_size,
        pooling=pooling,
    )


def trained_flops(data, shape: ModelShape, contrast, xlco_active: bool) -> float:
    """Useful FLOPs of the step a run trains on ``data`` (a ``StepData``) under its
    ``contrast`` settings (a ``ContrastConfig``): no XLCO part while XLCO is not active."""
    if not xlco_active:
        data = dataclasses.replace(data, xlco=[])
    layer = contrast.layer if data.xlco else shape.num_layers
    return step_data_flops(data, shape, layer, contrast.queue_size, contrast.pooling).total


def run_peak_flops(device: torch.device, bf16: bool) -> float | None:
    """The peak a run's MFU divides by: the GPU's dense bf16 peak when it computes in bf16
    and the GPU is known (``PEAK_BF16_FLOPS``); None otherwise (no MFU)."""
    if device.type != "cuda" or not bf16:
        return None
    return peak_bf16_flops(torch.cuda.get_device_name(device))


def throughput_metrics(
    tokens: float, positions: float, flops: float, *, seconds: float, devices: int, peak_flops: float | None
) -> dict[str, float]:
    """A step's rates from its totals over all devices: real tokens (and the positions they
    fill, padding included) and useful FLOPs, per second and per device; MFU where there is
    a peak; the share of padding.

    >>> throughput_metrics(750.0, 1000.0, 4e12, seconds=2.0, devices=2, peak_flops=4e12)
    {'tokens_per_s': 375.0, 'tokens_per_s_per_device': 187.5, 'tflops_per_s_per_device': 1.0, 'mfu': 0.25, 'padding_fraction': 0.25}
    """
    metrics = {"tokens_per_s": tokens / seconds, "tokens_per_s_per_device": tokens / seconds / devices}
    # Useful FLOPs (as infoxlm bench counts them) per second and device; MFU against the
    # device's dense bf16 peak where it is known (GPUs computing in bf16).
    metrics["tflops_per_s_per_device"] = flops / seconds / devices / 1e12
    if peak_flops:
        metrics["mfu"] = mfu(flops / devices, seconds, peak_flops)
    metrics["padding_fraction"] = float(1 - tokens / positions) if positions else 0.0
    return metrics
