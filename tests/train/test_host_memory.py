"""What a CPU run's budget is checked against: the machine's available memory, a container's
cgroup limit where that is lower, and nothing (None) where neither can be read."""

from __future__ import annotations

import os

from infoxlm.train import host_memory as module
from infoxlm.train.host_memory import host_memory

GIB = 1024**3


def _machine(root, available_kb: int, total_kb: int) -> None:
    (root / "proc").mkdir(parents=True, exist_ok=True)
    (root / "proc/meminfo").write_text(f"MemTotal:       {total_kb} kB\nMemFree:        1 kB\nMemAvailable:   {available_kb} kB\n")


def test_the_kernels_available_memory_on_this_machine():
    available, total = host_memory()
    assert 0 < available <= total


def test_meminfo_s_available_and_total(tmp_path):
    _machine(tmp_path, 12 * 1024**2, 32 * 1024**2)
    assert host_memory(tmp_path) == (12 * GIB, 32 * GIB)


def test_a_cgroup_limit_below_the_machine_wins_in_v2_and_v1(tmp_path):
    _machine(tmp_path, 12 * 1024**2, 32 * 1024**2)
    v2 = tmp_path / "sys/fs/cgroup"
    v2.mkdir(parents=True)
    (v2 / "memory.max").write_text("max\n")  # no limit: the machine's counts
    (v2 / "memory.current").write_text(f"{GIB}\n")
    assert host_memory(tmp_path) == (12 * GIB, 32 * GIB)
    (v2 / "memory.max").write_text(f"{8 * GIB}\n")  # a container of 8 GiB, 1 in use
    assert host_memory(tmp_path) == (7 * GIB, 8 * GIB)
    (v2 / "memory.max").unlink()
    v1 = tmp_path / "sys/fs/cgroup/memory"
    v1.mkdir()
    (v1 / "memory.limit_in_bytes").write_text(f"{4 * GIB}\n")
    (v1 / "memory.usage_in_bytes").write_text(f"{5 * GIB}\n")  # over its limit: nothing left
    assert host_memory(tmp_path) == (0, 4 * GIB)


def test_without_meminfo_sysconf_and_without_either_none(tmp_path, monkeypatch):
    if hasattr(os, "sysconf"):
        page, free = os.sysconf("SC_PAGE_SIZE"), host_memory(tmp_path)  # no proc/ under tmp_path
        assert free is not None and free[1] == os.sysconf("SC_PHYS_PAGES") * page
    monkeypatch.setattr(module.os, "sysconf", lambda name: (_ for _ in ()).throw(ValueError(name)))
    assert host_memory(tmp_path) is None
