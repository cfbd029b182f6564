"""torch.distributed, kept apart from the model and the step.

Started by ``torchrun`` (which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR …) the run uses
NCCL on GPUs and gloo on CPUs; started plainly it is a world of one and nothing here does any
communication.
"""

from __future__ import annotations

import os
import sys
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
        shown = os.environ.get("CUDA_VISIBLE_DEVICES")
        index = local_cuda_index(local_rank, torch.cuda.device_count(), shown) if size > 1 else (torch_device.index or 0)
        torch_device = torch.device("cuda", index)
        torch.cuda.set_device(torch_device)
    warning = restart_store_warning(os.environ)
    if warning is not None and local_rank == 0:
        print(warning, file=sys.stderr, flush=True)
    if size > 1 and not dist.is_initialized():
        dist.init_process_group(
            backend="nccl" if torch_device.type == "cuda" else "gloo", timeout=timedelta(seconds=collective_timeout_s)
        )
    rank = dist.get_rank() if size > 1 else 0
    return World(rank=rank, size=size, local_rank=local_rank, device=torch_device)


def local_cuda_index(local_rank: int, visible: int, cuda_visible_devices: str | None) -> int:
    """The GPU of the process with this local rank among the ``visible`` devices: its own when
    each process of the node sees them all (torchrun's way), the only one when a scheduler
    shows each process one (``CUDA_VISIBLE_DEVICES`` naming a single device)."""
    if local_rank < visible:
        return local_rank
    if visible == 1 and cuda_visible_devices is not None and "," not in cuda_visible_devices:
        return 0
    raise ConfigError(
        f"LOCAL_RANK={local_rank}, but this process sees {visible} CUDA devices: start at most {visible} "
        "processes per node (torchrun --nproc_per_node), or show each process one GPU"
    )


def restart_store_warning(environ) -> str | None:
    """What to tell workers that torchrun restarted while sharing its rendezvous store with
    them (its default), or None. The store still holds the keys of the workers that died, and
    a new worker may read one and wait on a port nobody listens on (process group creation
    then fails or hangs: pytorch/pytorch#167288); TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 gives
    each restart a store of its own."""
    restarted = environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0"
    if restarted and environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return (
            "infoxlm: warning: torchrun restarted the workers with the rendezvous store of the ones that died; "
            "if joining the process group fails or hangs, launch torchrun with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"
        )
    return None


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


def sum_over_ranks(values: list[float], world: World) -> list[float]:
    """Host numbers added up over all ranks (float64). A world of one returns them as they
    are: a round trip through the device would wait for every kernel queued before it."""
    if not world.distributed:
        return list(values)
    return all_reduce_sum(torch.tensor(values, dtype=torch.float64, device=world.device), world).tolist()


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


# Wrappers that hold a process group (DDP's reducer, FSDP's modules), kept until the process
# ends. Freeing one frees its gloo group, whose destructor joins gloo's threads while this
# thread holds the interpreter lock; a gloo thread still freeing an earlier collective's
# tensors waits for that lock, and the rank hangs for good, deaf to SIGTERM (about 1 in 10
# two-process runs under load). `infoxlm pretrain` workers end with os._exit, so a kept
# wrapper is never freed.
_KEPT_UNTIL_EXIT: list[object] = []


def keep_until_exit(wrapper: object) -> None:
    """Keep ``wrapper`` (and the process group it holds) from being freed before the process ends."""
    _KEPT_UNTIL_EXIT.append(wrapper)


def shutdown(world: World) -> None:
    if world.distributed and dist.is_initialized():
        dist.destroy_process_group()
