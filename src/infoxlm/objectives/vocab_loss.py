"""Per-token cross-entropy over vocabulary logits, fused into two one-pass kernels on a GPU.

With XLM-R's 250,002 pieces a micro-batch's masked-LM logits are large: 10,000 masked
tokens give (10000, 250048) logits, 5 GB in bf16. Computed plainly under autocast they are
cast to fp32 (10 GB more), log-softmaxed into another fp32 tensor, and the backward walks
the same tensors again and casts the gradient back to bf16: about 80 GB of memory traffic
per micro-batch, where reading the logits twice and writing their gradient once (15 GB)
is all the arithmetic needs.

On CUDA, where Triton runs, ``fused_cross_entropy.py`` does exactly that: a forward kernel
that reads each row once (online log-sum-exp in fp32) and a backward kernel that writes
softmax − one-hot in the logits' dtype. The arithmetic is the same fp32 log-sum-exp, so the loss agrees with the plain one to
fp32 rounding (tests/gpu/test_fast_path_cuda.py); benchmarks/vocab_loss.py compares it with
the plain function and ``torch.compile`` of it (BENCHMARKS.md, "Vocabulary loss kernels"). On a CPU, the plain function runs.
Which one a run takes is a fast path (``FastPaths.fused_vocab_loss``), chosen with the others.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F


def plain_token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """logits (N, V) any float dtype, targets (N,) long → loss per token (N,) fp32."""
    return F.cross_entropy(logits.float(), targets, reduction="none")


# (device type, dtype) → whether the fused kernels ran, forward and backward, there.
_fused_works: dict[tuple[str, torch.dtype], bool] = {}


def _triton_available() -> bool:
    try:
        from torch.utils._triton import has_triton
    except ImportError:  # an older torch without the helper
        return False
    return has_triton()


def _fused_token_cross_entropy():
    """The Triton version (imported only when a GPU asks for it: a CPU install has no Triton)."""
    from .fused_cross_entropy import fused_token_cross_entropy

    return fused_token_cross_entropy


def _fused_runs_on(logits: torch.Tensor) -> bool:
    """Whether the fused kernels work for this device and dtype, tried once per process.

    Triton compiles them on first use and needs a C compiler on the machine; a GPU box
    without one must train on the plain function, not stop at its first step. The trial runs
    a small forward and backward, because the backward kernel is compiled when it first runs.
    """
    key = (logits.device.type, logits.dtype)
    if key not in _fused_works:
        try:
            # With gradients on, whatever the caller's mode (a first call may come from an
            # evaluation under no_grad).
            with torch.inference_mode(False), torch.enable_grad():
                trial = torch.randn(4, 16, device=logits.device, dtype=logits.dtype, requires_grad=True)
                _fused_token_cross_entropy()(trial, torch.arange(4, device=logits.device)).sum().backward()
            _fused_works[key] = True
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as error:  # any failure of the compile stack: fall back, say why once
            warnings.warn(
                f"the fused vocabulary cross-entropy could not run here ({type(error).__name__}: "
                f"{str(error).splitlines()[0] if str(error) else ''}); using the plain one, which is slower on a GPU",
                RuntimeWarning,
                stacklevel=3,
            )
            _fused_works[key] = False
    return _fused_works[key]


def fused_kernels_run_on(logits: torch.Tensor) -> bool:
    """Whether the Triton kernels can take ``logits``: CUDA tensors, Triton installed, and a
    trial run on their device and dtype worked (else one warning saying why)."""
    return logits.is_cuda and _triton_available() and _fused_runs_on(logits)


def token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor, *, fused: bool = False) -> torch.Tensor:
    """Cross-entropy of each row of ``logits`` (N, V) against ``targets`` (N,) in [0, V): (N,) fp32.

    ``fused``: the Triton kernels where ``fused_kernels_run_on`` the logits, else the plain
    function; off (the default), the plain function. Training passes its
    ``FastPaths.fused_vocab_loss``, so ``run.fast_paths=false`` never runs the kernels.
    """
    if fused and fused_kernels_run_on(logits):
        return _fused_token_cross_entropy()(logits, targets)
    return plain_token_cross_entropy(logits, targets)
