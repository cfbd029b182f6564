"""How fast a device multiplies matrices of the shapes a joint step uses.

A joint step is mostly matrix products; no implementation of the same arithmetic runs faster
than the device multiplies these matrices. On a GPU the datasheet's dense bf16 peak is the
MFU denominator (``flops.py``); a CPU has no such figure worth quoting, so the benchmark can
measure one: the best rate of

- a 2048² square product (the kernel's best case);
- the step's forward products: tokens × d by d × d (attention projections), d × f and f × d
  (feed-forward), and masked tokens × d by d × V (the tied vocabulary decoder);
- for each, the two products its backward pass makes (input and weight gradient), with the
  operand autograd hands over transposed.

fp32 on a CPU, bf16 on a GPU, timed with the device synchronised (``product_rate``, in
``train/flops.py`` beside the GPUs' peaks: training estimates its step time with it too).
"""

from __future__ import annotations

import torch

from ..model.config import EncoderConfig
from ..train.flops import product_rate
from .sizes import bench_size

__all__ = ["product_dtype", "product_rate", "step_product_rates", "step_products"]

SQUARE = 2048


def step_products(size_name: str, tokens: int) -> dict[str, tuple[int, int, int, str]]:
    """(m, k, n, transposed operand) of a bench size's products, ``tokens`` rows at a time.

    Each forward product X (tokens × k) · W (k × n) brings two in the backward pass: the input
    gradient dY · Wᵀ (tokens × n · n × k) and the weight gradient Xᵀ · dY (k × tokens · tokens × n).
    """
    size = bench_size(size_name)
    config = EncoderConfig.of_size(size.encoder, vocab_size=size.vocab_size)
    d, f, V = config.hidden_size, config.intermediate_size, config.vocab_size
    masked = max(1, tokens * 15 // 100)
    forward = {
        "projection": (tokens, d, d),
        "feed-forward in": (tokens, d, f),
        "feed-forward out": (tokens, f, d),
        "vocabulary decoder": (masked, d, V),
    }
    products = {f"square {SQUARE}": (SQUARE, SQUARE, SQUARE, "")}
    for name, (m, k, n) in forward.items():
        products[f"{name}: forward"] = (m, k, n, "")
        products[f"{name}: input gradient"] = (m, n, k, "right")
        products[f"{name}: weight gradient"] = (k, m, n, "left")
    return products


def product_dtype(device: torch.device) -> torch.dtype:
    """What the step multiplies in: bf16 under a GPU's autocast, fp32 on a CPU."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def step_product_rates(size_name: str, device: torch.device, *, tokens: int = 4096, repeat: int = 5) -> dict[str, float]:
    """FLOP/s of each of the size's products (``step_products``) on ``device``, by name with shape."""
    dtype = product_dtype(device)
    return {
        f"{name} ({m} × {k} · {k} × {n})": product_rate(m, k, n, device=device, dtype=dtype, transposed=t, repeat=repeat)
        for name, (m, k, n, t) in step_products(size_name, tokens).items()
    }
