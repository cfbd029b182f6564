"""How long a run's steps will take, said before the first one where a step takes over a minute.

A preset made for GPUs started on a laptop (``base`` on a CPU: hours a step) said nothing
until its first step ended, after the XLCO queue had filled, which takes as long again. The
estimate is the step's useful FLOPs (flops.py: this process's share of the step's batches)
over the fastest the device multiplies matrices: a GPU's dense bf16 peak where it is known
(the MFU denominator), else a measured square product (fp32 on a CPU). A real step runs below
that rate (its MFU is below 1), so the figures are lower bounds and are said as such.

    >>> print(slow_step_warning(3e15, 1e11, "a 1024² product measured on this CPU", "cpu", steps_left=150_000))
    warning: a step of this run takes at least 8.3 h on this device (3 PFLOP at 100 GFLOP/s, a 1024² product measured on this CPU), so its 150,000 steps to go take at least 143 years; on a CPU, --preset test (seconds) or --preset demo (minutes) fit
"""

from __future__ import annotations

import math

import torch

from ..data.pipeline import DataPipeline
from ..objectives.objective import Objective
from .config import TrainConfig
from .distributed import World
from .flops import ModelShape, joint_step_flops, peak_bf16_flops, product_rate, trained_flops
from .joint_step import computes_in_bf16

SLOW_STEP_S = 60.0  # a step longer than this is announced
# No device that trains is slower than this: a step whose FLOPs take under a minute even at
# this rate is passed over without measuring the device (a CPU's measurement costs ~0.3 s;
# the test preset's runs, hundreds in the tests, are passed over).
SLOWEST_RATE = 1e9
MEASURED_SIZE = 1024  # the square product measured where no peak is known


def full_length_flops(config: TrainConfig, shape: ModelShape, world_size: int = 1) -> float:
    """Useful FLOPs of one process's share of a step whose examples all have their longest
    length: an upper bound on any step's, from the config alone."""
    d, c = config.data, config.contrast

    def rows(batch_size: int, length: int) -> tuple[list[int], list[int]]:
        n = math.ceil(batch_size / world_size)
        return [length] * n, [max(1, round(length * d.highest_mask_rate))] * n

    mmlm, mmlm_masked = rows(d.mmlm_batch_size, d.block_size)
    tlm, tlm_masked = rows(d.tlm_batch_size, d.tlm_max_length)
    views, _ = rows(d.xlco_batch_size, d.xlco_max_length)
    layer = min(c.layer, shape.num_layers)  # a layer past the depth is refused when the contrast is built
    return joint_step_flops(
        shape, mmlm_lengths=mmlm, mmlm_masked=mmlm_masked, tlm_lengths=tlm, tlm_masked=tlm_masked,
        xlco_query_lengths=views, xlco_key_lengths=views, contrast_layer=layer, queue_size=c.queue_size, pooling=c.pooling,
    ).total  # fmt: skip


def matmul_rate(device: torch.device, bf16: bool) -> tuple[float, str]:
    """(FLOP/s, where the figure comes from): the GPU's dense bf16 peak where it is known and
    the step computes in bf16, else a ``MEASURED_SIZE``² product timed on the device."""
    if device.type == "cuda" and bf16:
        name = torch.cuda.get_device_name(device)
        peak = peak_bf16_flops(name)
        if peak is not None:
            return peak, f"the {name}'s dense bf16 peak"
    n = MEASURED_SIZE
    rate = product_rate(n, n, n, device=device, dtype=torch.bfloat16 if bf16 else torch.float32, repeat=3)
    return rate, f"a {n}² product measured on this {'GPU' if device.type == 'cuda' else 'CPU'}"


def estimate_step(config: TrainConfig, shape: ModelShape, world: World, pipeline: DataPipeline, step: int,
                  objectives: list[Objective]) -> str | None:
    """The warning for a run about to take ``step`` (its first), or None where a step takes
    under a minute. ``pipeline``, ``objectives``: the run's own; read, not changed."""
    if full_length_flops(config, shape, world.size) / SLOWEST_RATE <= SLOW_STEP_S:
        return None
    rate, source = matmul_rate(world.device, bf16=computes_in_bf16(config, world))
    data = pipeline.step(step, world.rank, world.size)  # as the run will draw it
    flops = trained_flops(data, shape, objectives, step)
    pending = sum(o.pending_flops(data.batches(o.stream), shape, config.data.batch_size(o.stream)) for o in objectives)
    return slow_step_warning(
        flops, rate, source, world.device.type, steps_left=config.optim.max_steps - step, prefill_flops=pending,
    )  # fmt: skip


def slow_step_warning(
    step_flops: float, rate: float, source: str, device_type: str, *, steps_left: int, prefill_flops: float = 0.0
) -> str | None:
    """One line: the time a step and the rest of the run take at least (and the XLCO queue's
    filling, which comes first), with the presets that fit a CPU; None under ``SLOW_STEP_S``."""
    step_s = step_flops / rate
    if step_s <= SLOW_STEP_S:
        return None
    total_s = step_s * steps_left + prefill_flops / rate
    queue = f", {_duration(prefill_flops / rate)} of it filling the XLCO queue" if prefill_flops else ""
    line = (
        f"warning: a step of this run takes at least {_duration(step_s)} on this device ({_amount(step_flops, 'FLOP')} at "
        f"{_amount(rate, 'FLOP/s')}, {source}), so its {steps_left:,} steps to go take at least {_duration(total_s)}{queue}"
    )
    if device_type == "cpu":
        line += "; on a CPU, --preset test (seconds) or --preset demo (minutes) fit"
    return line


def _duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``3.9 h``, ``41 days``, ``67 years``.

    >>> _duration(59), _duration(600), _duration(14_000), _duration(3e6), _duration(2.1e9)
    ('59 s', '10 min', '3.9 h', '35 days', '67 years')
    """
    for limit, unit, size, digits in ((120, "s", 1, 0), (7200, "min", 60, 0), (172_800, "h", 3600, 1), (63_072_000, "days", 86_400, 0)):
        if seconds < limit:
            return f"{seconds / size:.{digits}f} {unit}"
    return f"{seconds / 31_536_000:,.0f} years"


def _amount(value: float, unit: str) -> str:
    """``3 PFLOP``, ``98 GFLOP/s``: three significant digits at most, SI prefix."""
    for prefix, size in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if value >= size:
            return f"{value / size:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"
