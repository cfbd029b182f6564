"""The GPU's caching allocator: how a run sets it up, and what it reports per step.

A training step's micro-batches are packed real tokens whose count changes with every step's
sentences, so the tensors of one step are never quite the sizes of the last. torch's caching
allocator keeps fixed-size reserved segments; when no cached block fits, it frees its cache
(``cudaFree``) and reserves anew (``cudaMalloc``), each of which waits for the device: on one
H100 a base step spent 57 ms of 364 so. With ``expandable_segments`` a segment grows in place
and a freed block can be reused at any size, so a run settles at its peak and stops asking.

``allocator_counts`` reads the allocator's own counters (host-side, no synchronisation), which
the trainer writes to ``metrics.jsonl`` at each log step on a GPU.
"""

from __future__ import annotations

import os

import torch

__all__ = ["ALLOC_CONF_VARIABLE", "allocator_counts", "configure_allocator"]

ALLOC_CONF_VARIABLE = "PYTORCH_CUDA_ALLOC_CONF"


def configure_allocator(device: torch.device, expandable_segments: bool) -> str | None:
    """Set ``expandable_segments`` on the CUDA allocator before the run's tensors are placed;
    returns what was set (for the run's summary), or None where nothing was: not a GPU, the
    option off, or the user's own ``PYTORCH_CUDA_ALLOC_CONF`` in the environment (theirs wins).

    Segments already reserved keep their kind; the run calls this before moving its model."""
    if device.type != "cuda" or not expandable_segments or os.environ.get(ALLOC_CONF_VARIABLE):
        return None
    settings = "expandable_segments:True"
    # torch ≥ 2.9 names the setter per accelerator; earlier versions only the CUDA one.
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None) or torch.cuda.memory._set_allocator_settings
    setter(settings)
    return settings


def allocator_counts(device: torch.device) -> dict[str, float]:
    """The allocator's cumulative device reservations and releases (``cudaMalloc`` /
    ``cudaFree``, or segment maps and unmaps with expandable segments) and its peaks so far,
    in MB; empty off a GPU. Reading them never waits for the device."""
    if device.type != "cuda" or not torch.cuda.is_initialized():
        return {}
    stats = torch.cuda.memory_stats(device)
    return {
        "memory/device_allocs": float(stats.get("num_device_alloc", 0)),
        "memory/device_frees": float(stats.get("num_device_free", 0)),
        "memory/alloc_retries": float(stats.get("num_alloc_retries", 0)),
        "memory/peak_allocated_mb": stats.get("allocated_bytes.all.peak", 0) / 2**20,
        "memory/peak_reserved_mb": stats.get("reserved_bytes.all.peak", 0) / 2**20,
    }
