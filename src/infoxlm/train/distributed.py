"""torch.distributed, kept apart from the model and the step.

Started by ``torchrun`` (which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR …) the run uses
NCCL on GPUs and gloo on CPUs; started plainly it is a world of one and nothing here does any
communication.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from .config import ConfigError


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def init_world(device: str | None = None, collective_timeout_s: int = 1800) -> World:
    """Join the process group torchrun set up, or describe a single process.

    A collective that waits ``collective_timeout_s`` for another rank raises instead of
    hanging (see :func:`is_collective_timeout`).
    """
    size = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch_device = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"run.device={device!r}: expected cpu, cuda or cuda:N") from None
    if torch_device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"run.device={device!r}: CUDA is not available on this machine (torch {torch.__version__}); use --device cpu")
    if torch_device.type == "cuda" and (torch_device.index or 0) >= torch.cuda.device_count():
        raise ConfigError(f"run.device={device!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    if torch_device.type == "cuda":
        torch_device = torch.device("cuda", local_rank if size > 1 else (torch_device.index or 0))
        torch.cuda.set_device(torch_device)
    if size > 1 and not dist.is_initialized():
        dist.init_process_group(
            backend="nccl" if torch_device.type == "cuda" else "gloo", timeout=timedelta(seconds=collective_timeout_s)
        )
    rank = dist.get_rank() if size > 1 else 0
    return World(rank=rank, size=size, local_rank=local_rank, device=torch_device)


def is_collective_timeout(err: BaseException) -> bool:
    """Whether an error is a collective that gave up waiting (gloo and NCCL word it differently)."""
    text = str(err).lower()
    return isinstance(err, (RuntimeError, dist.DistError)) and ("timed out" in text or "timeout" in text)


def all_gather_rows(x: torch.Tensor, world: World) -> torch.Tensor:
    """Concatenate every rank's (n_r, …) tensor in rank order: (Σ n_r, …). Ranks may differ in n_r."""
    if not world.distributed:
        return x
    counts = [torch.zeros(1, dtype=torch.long, device=x.device) for _ in range(world.size)]
    dist.all_gather(counts, torch.tensor([x.shape[0]], device=x.device))
    longest = int(max(c.item() for c in counts))
    padded = torch.zeros((longest, *x.shape[1:]), dtype=x.dtype, device=x.device)
    padded[: x.shape[0]] = x
    gathered = [torch.empty_like(padded) for _ in range(world.size)]
    dist.all_gather(gathered, padded)
    return torch.cat([g[: int(c.item())] for g, c in zip(gathered, counts)])


def all_reduce_sum(x: torch.Tensor, world: World) -> torch.Tensor:
    if world.distributed:
        dist.all_reduce(x, op=dist.ReduceOp.SUM)
    return x


def all_reduce_max(x: torch.Tensor, world: World) -> torch.Tensor:
    if world.distributed:
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
    return x


def all_reduce_min(x: torch.Tensor, world: World) -> torch.Tensor:
    if world.distributed:
        dist.all_reduce(x, op=dist.ReduceOp.MIN)
    return x


def barrier(world: World) -> None:
    """Wait until every rank gets here (no-op in one process)."""
    if world.distributed:
        dist.barrier()


def shutdown(world: World) -> None:
    if world.distributed and dist.is_initialized():
        dist.destroy_process_group()
