"""Phase timers and memory probes for the benchmark's step loops.

A step is split into phases (data, forward, backward, optimizer, ema, queue). On a GPU the
work is asynchronous, so a phase's wall time means something only if the device is
synchronised at each boundary; those synchronisations change the fast path, so the timed
steps use ``PhaseTimer(sync=None)`` and phases come from a separate instrumented pass. On a
CPU every operation has finished when it returns: one pass gives both.

Memory of one side = the bytes its tensors hold between steps (weights, optimizer state,
key encoder, queue) + the peak growth during a step (activations, gradients, logits). On a
GPU the growth is ``torch.cuda.max_memory_allocated`` against the allocation before the step;
on a CPU it is the process's resident set, sampled every millisecond by a thread while the
step runs (psutil if installed, else /proc/self/statm), against the resident set before.
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys
import threading
import time
from collections import defaultdict
from typing import Callable, Iterable, Iterator

import torch

PHASES = ("data", "forward", "backward", "optimizer", "ema", "queue")


def device_sync(device: torch.device) -> Callable[[], None]:
    """A function that waits for ``device``'s queued work: the GPU's synchronize, a no-op on a CPU."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


class PhaseTimer:
    """Accumulates wall seconds per phase; ``sync`` (e.g. torch.cuda.synchronize) at each boundary."""

    def __init__(self, sync: Callable[[], None] | None = None):
        self.sync = sync
        self.seconds: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        if self.sync is not None:
            self.sync()
        started = time.perf_counter()
        try:
            yield
        finally:
            if self.sync is not None:
                self.sync()
            self.seconds[phase] += time.perf_counter() - started


def tensor_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (tied weights count once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        if t is None or not isinstance(t, torch.Tensor):
            continue
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def optimizer_state_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]


def _rss_reader() -> Callable[[], int] | None:
    try:
        import psutil

        process = psutil.Process()
        return lambda: process.memory_info().rss
    except ImportError:
        pass
    if os.path.exists("/proc/self/statm"):
        page = os.sysconf("SC_PAGE_SIZE")

        def read() -> int:
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * page

        return read
    return None


def process_peak_rss_bytes() -> int:
    """The whole process's peak resident set so far (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


@contextlib.contextmanager
def peak_growth(device: torch.device) -> Iterator[dict[str, int | None]]:
    """Measure the peak memory growth (bytes) of the block: ``result["bytes"]`` after it exits.

    None where nothing can measure it (a CPU without psutil or /proc)."""
    result: dict[str, int | None] = {"bytes": None}
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        yield result
        torch.cuda.synchronize(device)
        result["bytes"] = torch.cuda.max_memory_allocated(device) - before
        return
    read = _rss_reader()
    if read is None:
        yield result
        return
    before = read()
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.001):
            peak[0] = max(peak[0], read())

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield result
    finally:
        done.set()
        thread.join()
        peak[0] = max(peak[0], read())
        result["bytes"] = peak[0] - before
