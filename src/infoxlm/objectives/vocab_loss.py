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
tests/train/test_gpu_fast_path.py). On a CPU, where compiling costs minutes and buys
little, the plain function runs.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def plain_token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """logits (N, V) any float dtype, targets (N,) long → loss per token (N,) fp32."""
    return F.cross_entropy(logits.float(), targets, reduction="none")


_compiled = None


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


def token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, *, fused: bool | None = None) -> torch.Tensor:
    """Cross-entropy of each row of ``logits`` (N, V) against ``targets`` (N,): (N,) fp32.

    ``fused``: use the compiled kernels (default: on CUDA tensors, where Triton is installed
    to compile them).
    """
    if fused is None:
        fused = logits.is_cuda and _triton_available()
    if fused:
        return _compiled_token_cross_entropy()(logits, targets)
    return plain_token_cross_entropy(logits, targets)
