"""How the trainable model is spread over the processes (``run.parallelism``).

- ``ddp``: every process holds the whole model, optimizer state included; DDP all-reduces the
  gradients. The default wherever a replica fits.
- ``fsdp``: FSDP2 (``torch.distributed.fsdp.fully_shard``) shards parameters, gradients and
  AdamW's state over the processes: each encoder layer is one unit (gathered for its forward
  and backward, then freed), the rest (embeddings, tied MLM head, projections) the root
  unit. The key encoder's layers are sharded the same way, so that its EMA
  (k ← m·k + (1 − m)·q) runs on the local shards with no communication; keys are gathered
  for the queue as under DDP. Mixed precision: bf16 compute where the run computes in bf16,
  fp32 master weights and fp32 gradient reduction.

In one process neither applies: the model runs as it is.
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from .distributed import World
from .joint_model import JointModel



def distribute(model: JointModel, world: World, parallelism: str, bf16: bool) -> nn.Module:
    """The module the step calls: ``model`` itself in one process, its DDP wrapper, or
    ``model`` sharded in place by FSDP2 (its class then is an FSDP subclass of JointModel)."""
    if not world.distributed:
        return model
    if parallelism == "ddp":
        device_ids = [world.device.index] if world.device.type == "cuda" else None
        # Buffers are not broadcast: the queue is identical on every rank by construction.
        return nn.parallel.DistributedDataParallel(model, device_ids=device_ids, broadcast_buffers=False)
    shard(model, world, bf16)
    return model


def shard(model: JointModel, world: World, bf16: bool) -> None:
    """FSDP2 over all processes: one unit per encoder layer (the query encoder and the objectives' own: XLCO's key encoder), the root last."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(world.device.type, (world.size,))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if bf16 else None, reduce_dtype=torch.float32)
    encoders = [model.encoder, *(e for o in model.objectives for e in o.extra_encoders())]  # XLCO's key encoder
    for encoder in encoders:
        for layer in encoder.encoder.layer:
            fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)


def is_sharded(module: nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(module, FSDPModule)


def no_gradient_sync(module: nn.Module, last_micro_step: bool) -> contextlib.AbstractContextManager:
    """Around a micro-step's backward: DDP all-reduces on the last micro-step only. FSDP
    reduce-scatters every micro-step (sharded gradients accumulate; holding whole ones until
    the last would give back the memory sharding saves)."""
    if last_micro_step or not isinstance(module, nn.parallel.DistributedDataParallel):
        return contextlib.nullcontext()
    return module.no_sync()


def clip_gradients_with_norm(parameters: list[nn.Parameter], max_norm: float) -> torch.Tensor:
    """Scale the gradients to a total 2-norm of at most ``max_norm``; returns the norm before,
    a () tensor on the device (reading it is the caller's choice: it waits for the backward).
    Sharded gradients (DTensors) give a partial norm per rank; ``full_tensor`` adds them up."""
    grads = [p.grad for p in parameters if p.grad is not None]
    total = torch.nn.utils.get_total_norm(grads)
    if isinstance(total, DTensor):
        total = total.full_tensor()
    torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, total)
    return total


def fill_missing_gradients(parameters: list[nn.Parameter]) -> None:
    """Under FSDP a parameter that no objective reached this step has no gradient; give it a
    zero one (as the touch gives it under DDP and in one process), so that AdamW decays and
    moves it as in every other world size."""
    for p in parameters:
        if p.grad is None:
            p.grad = torch.zeros_like(p)


def whole_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """``module``'s state dict with whole tensors on the host (a collective when sharded: every
    rank calls it)."""
    if not is_sharded(module):
        return module.state_dict()
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(module, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
