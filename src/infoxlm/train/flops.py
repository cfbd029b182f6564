"""Useful FLOPs of one joint training step: the numerator of MFU, in the training log and in
``infoxlm bench`` alike.

"Useful" counts the arithmetic the method needs, on real (non-padding) tokens only, so a
faster implementation never earns a better MFU by doing extra work (padding, vocabulary
logits at unmasked positions, key layers above the universal layer, top-layer outputs
nobody reads). The encoder's and the head's counts are model/flops.py; each objective adds
up its own (``Objective.flops``), a step is their sum (``trained_flops``):

    MMLM, TLM      3 × (encoder forward over all L layers, m = the masked tokens
                        + head over the masked tokens)                  objectives/masked_lm.py
    XLCO query     3 × (encoder forward to the universal layer l + projection)
                   + 2 × logits (forward, and the gradient for q only: the queue is not trained)
    XLCO key       1 × (encoder forward to layer l + projection): no backward
                   (m = 1 per view with the paper's <s> pooling; m = T with mean pooling)
                   with 2·d·d (projection) + 2·d·(1 + K) (positive + queue logits) per query,
                   K the queue size                                     objectives/xlco.py

Backward = 2 × forward for everything trained (gradients for activations and for weights).
In-batch negatives (``contrast.in_batch_negatives``, the demo's) add 2·d·(B − 1) logit FLOPs
per query, under 0.1 % of the demo's step; they are not counted.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Sequence

import torch

from ..model.flops import ModelShape, encoder_forward_flops, mlm_head_forward_flops, row_sums
from ..objectives.masked_lm import masked_lm_flops
from ..objectives.xlco import contrast_flops

__all__ = [
    "ModelShape", "StepFlops", "encoder_forward_flops", "joint_step_flops", "mfu", "mlm_head_forward_flops", "objective_flops",
    "peak_bf16_flops", "product_rate", "run_peak_flops", "step_data_flops", "throughput_metrics", "trained_flops",
]  # fmt: skip


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
    query, key = contrast_flops(xlco_query_lengths, xlco_key_lengths, shape, contrast_layer, queue_size, pooling)
    return StepFlops(
        mmlm=masked_lm_flops(mmlm_lengths, mmlm_masked, shape), tlm=masked_lm_flops(tlm_lengths, tlm_masked, shape),
        xlco_query=query, xlco_key=key,
    )  # fmt: skip


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

    return joint_step_flops(
        shape,
        mmlm_lengths=row_sums(b.attention_mask for b in data.mmlm),
        mmlm_masked=row_sums(b.masked_positions for b in data.mmlm),
        tlm_lengths=row_sums(b.attention_mask for b in data.tlm),
        tlm_masked=row_sums(b.masked_positions for b in data.tlm),
        xlco_query_lengths=row_sums(b.query.attention_mask for b in data.xlco),
        xlco_key_lengths=row_sums(b.key.attention_mask for b in data.xlco),
        contrast_layer=contrast_layer,
        queue_size=queue_size,
        pooling=pooling,
    )


def objective_flops(data, shape: ModelShape, objectives) -> float:
    """Useful FLOPs of ``objectives`` trained on ``data`` (a ``StepData``): the sum of what each
    counts on its stream's batches."""
    return float(sum(o.flops(data.batches(o.stream), shape) for o in objectives))


def trained_flops(data, shape: ModelShape, objectives, step: int) -> float:
    """Useful FLOPs of the step a run trains on ``data``: those of the objectives active at ``step``."""
    return objective_flops(data, shape, [o for o in objectives if o.active_at(step)])


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
