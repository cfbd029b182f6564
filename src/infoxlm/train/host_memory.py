"""How much memory this machine (or the container it runs in) can still give a process.

A CPU run's automatic micro-batch budget (token_budget.py) is checked against it. Linux's
``MemAvailable`` counts what can be had without swapping; a cgroup's limit (a container, a
batch scheduler's job) can be lower, and its out-of-memory killer is the one that fires, so
the smaller of the two is taken. Elsewhere ``os.sysconf``'s free pages, or, where even that
is missing, None: the run then keeps its default budget unchecked.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["host_memory"]

# cgroup v2's files, then v1's: the limit and what the group already uses.
CGROUP_FILES = (
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
    ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
)


def host_memory(root: str | Path = "/") -> tuple[int, int] | None:
    """(available, total) bytes, or None where neither the kernel's counts nor ``os.sysconf``
    can be read. ``root``: where /proc and /sys are (tests give a folder of their own)."""
    root = Path(root)
    machine = _meminfo(root / "proc/meminfo") or _sysconf()
    if machine is None:
        return None
    available, total = machine
    for limit_file, usage_file in CGROUP_FILES:
        limit, usage = _number(root / limit_file.lstrip("/")), _number(root / usage_file.lstrip("/"))
        if limit is not None and usage is not None and limit < total:  # "max" or a huge v1 value: no limit
            return min(available, max(limit - usage, 0)), limit
    return available, total


def _meminfo(path: Path) -> tuple[int, int] | None:
    try:
        fields = {}
        for line in path.read_text().splitlines():
            name, _, value = line.partition(":")
            fields[name] = int(value.split()[0]) * 1024  # kB
        return fields["MemAvailable"], fields["MemTotal"]
    except (OSError, KeyError, ValueError, IndexError):
        return None


def _sysconf() -> tuple[int, int] | None:
    try:
        page = os.sysconf("SC_PAGE_SIZE")  # free pages: fewer than what could be had
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows), or no such name (macOS)
        return None


def _number(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):  # absent, or "max"
        return None
