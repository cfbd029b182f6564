"""The GPU allocator's set-up for a run (``run.expandable_segments``) and its counters."""

from __future__ import annotations

import pytest
import torch

from infoxlm.train import device_memory
from infoxlm.train.device_memory import ALLOC_CONF_VARIABLE, allocator_counts, configure_allocator


@pytest.fixture
def settings(monkeypatch):
    """What would be handed to torch's allocator setter (no GPU is touched)."""
    given: list[str] = []
    monkeypatch.setattr(torch._C, "_accelerator_setAllocatorSettings", given.append, raising=False)
    monkeypatch.delenv(ALLOC_CONF_VARIABLE, raising=False)
    return given


def test_a_gpu_run_grows_its_segments_in_place(settings):
    assert configure_allocator(torch.device("cuda", 0), expandable_segments=True) == "expandable_segments:True"
    assert settings == ["expandable_segments:True"]


def test_the_users_own_allocator_settings_win(settings, monkeypatch):
    monkeypatch.setenv(ALLOC_CONF_VARIABLE, "max_split_size_mb:128")
    assert configure_allocator(torch.device("cuda"), expandable_segments=True) is None
    assert settings == []


@pytest.mark.parametrize("device, expandable", [("cpu", True), ("cuda", False)])
def test_nothing_is_set_on_a_cpu_or_when_turned_off(settings, device, expandable):
    assert configure_allocator(torch.device(device), expandable) is None and settings == []


def test_a_cpu_has_no_allocator_counters():
    assert allocator_counts(torch.device("cpu")) == {}


def test_the_counters_come_from_the_allocators_own_statistics(monkeypatch):
    stats = {"num_device_alloc": 7, "num_device_free": 3, "num_alloc_retries": 1,
             "allocated_bytes.all.peak": 2**30, "reserved_bytes.all.peak": 2**31}  # fmt: skip
    monkeypatch.setattr(device_memory.torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(device_memory.torch.cuda, "memory_stats", lambda device: stats)
    assert allocator_counts(torch.device("cuda")) == {
        "memory/device_allocs": 7.0, "memory/device_frees": 3.0, "memory/alloc_retries": 1.0,
        "memory/peak_allocated_mb": 1024.0, "memory/peak_reserved_mb": 2048.0,
    }  # fmt: skip
