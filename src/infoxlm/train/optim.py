"""AdamW and the learning-rate schedules: the paper's linear warm-up then linear decay to 0
(``linear``), or warm-up, a stable stretch at the peak, and a linear decay to 0 over the last
``decay_fraction`` of the steps (``wsd``, as MiniCPM, ModernBERT and mmBERT train)."""

from __future__ import annotations

from typing import Iterable

import torch


def build_optimizer(
    params: Iterable[torch.nn.Parameter],
    *,
    lr: float,
    betas: tuple[float, float] = (0.9, 0.98),
    eps: float = 1e-6,
    weight_decay: float = 0.01,
) -> torch.optim.AdamW:
    """AdamW over every trainable parameter (weight decay on all of them, as fairseq does).

    The fused implementation (one kernel for all parameters) is used where the device
    supports it; it computes the same update as the plain loop.
    """
    params = [p for p in params if p.requires_grad]
    try:
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=True)
    except (RuntimeError, TypeError):  # a device or dtype without the fused kernel
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=True)


def linear_warmup_decay(step: int, warmup_steps: int, total_steps: int) -> float:
    """Multiplier of the peak learning rate at optimizer step ``step`` (0-based).

    Rises linearly from 1/warmup to 1 over ``warmup_steps`` steps, then falls linearly to 0 at
    ``total_steps``.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    remaining = total_steps - step
    return max(0.0, remaining / max(1, total_steps - warmup_steps))


LR_SCHEDULES = ("linear", "wsd")


def learning_rate_multiplier(step: int, warmup_steps: int, total_steps: int, schedule: str = "linear", decay_fraction: float = 0.1) -> float:
    """Multiplier of the peak learning rate at optimizer step ``step`` (0-based) under
    ``schedule``; the warm-up is the same linear rise in both.

    >>> [round(learning_rate_multiplier(t, 2, 10, "wsd", 0.2), 2) for t in range(10)]
    [0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5]
    """
    if schedule == "linear" or step < warmup_steps:
        return linear_warmup_decay(step, warmup_steps, total_steps)
    decay_steps = max(1, round(decay_fraction * total_steps))
    return min(1.0, max(0.0, (total_steps - step) / decay_steps))


def warmup_unreached(warmup_steps: int, total_steps: int) -> str | None:
    """What a schedule whose warm-up lasts the whole run means, for a warning; None otherwise.

    >>> warmup_unreached(40, 20)
    'warm-up of 40 steps ≥ all 20 steps: the peak learning rate is never reached'
    >>> warmup_unreached(40, 400) is None
    True
    """
    if warmup_steps < total_steps:
        return None
    return f"warm-up of {warmup_steps} steps ≥ all {total_steps} steps: the peak learning rate is never reached"


def build_scheduler(
    optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int, schedule: str = "linear", decay_fraction: float = 0.1
) -> torch.optim.lr_scheduler.LambdaLR:
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: learning_rate_multiplier(step, warmup_steps, total_steps, schedule, decay_fraction)
    )
