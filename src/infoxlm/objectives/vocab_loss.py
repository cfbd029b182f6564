"""Per-token cross-entropy over vocabulary logits, fused into two kernels on a GPU.

With XLM-R's 250,002 pieces a micro-batch's masked-LM logits are large: 20,000 masked
tokens give (20000, 250002) logits, 10 GB in bf16. Computed plainly under autocast they
are cast to fp32 (20 GB more), log-softmaxed into another fp32 tensor, and the backward
walks the same tensors again and casts the gradient back to bf16: about 160 GB of memory
traffic per micro-batch. Measured on an H100 (benchmarks/gpu_profile.py, XLM-R base joint
step, batches 256/256/256): 63 ms of 610 ms of device time in log-softmax alone, plus the
casts.

On CUDA the same function is compiled (``torch.compile``, dynamic shapes): the forward
becomes one reduction that reads the bf16 logits once and keeps a log-sum-exp per row in
fp32, the backward one element-wise kernel that writes softmax − one-hot straight in the
logits' dtype. The arithmetic is the same fp32 log-sum-exp, so the loss agrees with the
plain one to fp32 rounding (tests/objectives/test_vocab_loss.py; on a GPU,
tests/gpu/test_fast_path_cuda.py). On a CPU, where compiling costs minutes and buys
little, the plain function runs.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F


def plain_token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """logits (N, V) any float dtype, targets (N,) long → loss per token (N,) fp32."""
    return F.cross_entropy(logits.float(), targets, reduction="none")


_compiled = None
# (device type, dtype) → whether the compiled version ran, forward and backward, there.
_fused_works: dict[tuple[str, torch.dtype], bool] = {}


def _triton_available() -> bool:
    try:
        from torch.utils._triton import has_triton
    except ImportError:  # an older torch without the helper
        return False
    return has_triton()


def _compiled_token_cross_entropy():
    global _compiled
    if _compiled is None:
        _compiled = torch.compile(plain_token_cross_entropy, dynamic=True)
    return _compiled


def _fused_runs_on(logits: torch.Tensor) -> bool:
    """Whether the compiled version works for this device and dtype, tried once per process.

    Compiling needs Triton and a C compiler on the machine; a GPU box without them must
    train on the plain function, not stop at its first step. The trial runs a small
    forward and backward, because the backward is compiled only when it first runs.
    """
    key = (logits.device.type, logits.dtype)
    if key not in _fused_works:
        try:
            # With gradients on, whatever the caller's mode (a first call may come from an
            # evaluation under no_grad).
            with torch.inference_mode(False), torch.enable_grad():
                trial = torch.randn(4, 16, device=logits.device, dtype=logits.dtype, requires_grad=True)
                _compiled_token_cross_entropy()(trial, torch.arange(4, device=logits.device)).sum().backward()
            _fused_works[key] = True
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as error:  # any failure of the compile stack: fall back, say why once
            warnings.warn(
                f"the fused vocabulary cross-entropy could not be compiled here ({type(error).__name__}: "
                f"{str(error).splitlines()[0] if str(error) else ''}); using the plain one, which is slower on a GPU",
                RuntimeWarning,
                stacklevel=3,
            )
            _fused_works[key] = False
    return _fused_works[key]


def token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, *, fused: bool | None = None) -> torch.Tensor:
    """Cross-entropy of each row of ``logits`` (N, V) against ``targets`` (N,): (N,) fp32.

    ``fused``: use the compiled kernels. Default: on CUDA tensors where Triton is installed
    and a trial compile ran (else the plain function, with one warning saying why).
    """
    if fused is None:
        fused = logits.is_cuda and _triton_available() and _fused_runs_on(logits)
    if fused:
        return _compiled_token_cross_entropy()(logits, targets)
    return plain_token_cross_entropy(logits, targets)
