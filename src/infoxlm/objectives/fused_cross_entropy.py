"""Per-token cross-entropy over a large vocabulary in two Triton kernels, one pass each.

The masked-LM head's logits are the largest tensor of a step: (N, V) with V = 250,048 (XLM-R's
250,002 padded to a multiple of 64) and N ≈ 10,000 masked tokens per micro-batch at base,
5 GB in bf16. Cross-entropy only has to read them once forward and once backward, and write
the gradient once:

- forward, one program per row: a running maximum m and sum s of exp(x − m) over blocks of
  the row (the "online" log-sum-exp), so each logit is read once; it keeps the row's
  log-sum-exp (N,) fp32 for the backward and returns loss = lse − x[target].
- backward, one program per row: reads each logit once more and writes
  g · (exp(x − lse) − onehot(target)) in the logits' dtype into a new buffer. (Writing it
  over the logits themselves would save that 5 GB, but runs slower; see BENCHMARKS.md,
  "Vocabulary loss kernels".)

Columns holding −inf (the padded vocabulary) get probability 0 and gradient 0 exactly.
Arithmetic is fp32 throughout; the loss agrees with ``F.cross_entropy`` on the fp32 logits to
fp32 rounding (tests/gpu/test_fast_path_cuda.py). Targets must lie in [0, V): there is no
``ignore_index``. Needs CUDA and Triton; ``FastPaths.fused_vocab_loss`` chooses it and
``vocab_loss.token_cross_entropy`` runs it where it works.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# Columns per block and warps per row program: the fastest pair in benchmarks/vocab_loss.py
# (N = 10,000, V = 250,048, bf16); see BENCHMARKS.md, "Vocabulary loss kernels".
BLOCK = 4096
NUM_WARPS = 8


@triton.jit
def _cross_entropy_forward_kernel(logits_ptr, row_stride, targets_ptr, loss_ptr, lse_ptr, V, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * row_stride
    # Starts below any real logit but finite, so a block holding only −inf (padding) leaves
    # the running sum at 0 instead of computing exp(−inf − (−inf)) = NaN.
    running_max = tl.full((), -1.0e30, tl.float32)
    running_sum = tl.zeros((), tl.float32)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(base + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        new_max = tl.maximum(running_max, tl.max(x, 0))
        running_sum = running_sum * tl.exp(running_max - new_max) + tl.sum(tl.exp(x - new_max), 0)
        running_max = new_max
    lse = running_max + tl.log(running_sum)
    target = tl.load(targets_ptr + row)
    target_logit = tl.load(base + target).to(tl.float32)
    tl.store(lse_ptr + row, lse)
    tl.store(loss_ptr + row, lse - target_logit)


@triton.jit
def _cross_entropy_backward_kernel(
    logits_ptr, row_stride, grad_ptr, grad_row_stride, targets_ptr, lse_ptr, grad_loss_ptr, V, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    base = logits_ptr + row * row_stride
    out = grad_ptr + row * grad_row_stride
    lse = tl.load(lse_ptr + row)
    scale = tl.load(grad_loss_ptr + row).to(tl.float32)
    target = tl.load(targets_ptr + row)
    for start in range(0, V, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = cols < V
        x = tl.load(base + cols, mask=inside, other=float("-inf")).to(tl.float32)
        p = tl.exp(x - lse)
        g = tl.where(cols == target, p - 1.0, p) * scale
        tl.store(out + cols, g.to(grad_ptr.dtype.element_ty), mask=inside)


def _rows(logits: torch.Tensor) -> torch.Tensor:
    # Rows may be strided (a view); each row itself must be contiguous for the block loads.
    return logits if logits.stride(-1) == 1 else logits.contiguous()


class FusedTokenCrossEntropy(torch.autograd.Function):
    """logits (N, V), targets (N,) long → loss (N,) fp32; see the module docstring."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        logits, targets = _rows(logits), targets.contiguous()
        n, vocab = logits.shape
        loss = torch.empty(n, dtype=torch.float32, device=logits.device)
        lse = torch.empty_like(loss)
        if n:
            _cross_entropy_forward_kernel[(n,)](logits, logits.stride(0), targets, loss, lse, vocab, BLOCK=BLOCK, num_warps=NUM_WARPS)
        ctx.save_for_backward(logits, targets, lse)
        return loss

    @staticmethod
    def backward(ctx, grad_loss: torch.Tensor):
        logits, targets, lse = ctx.saved_tensors
        n, vocab = logits.shape
        grad = torch.empty_like(logits)
        if n:
            _cross_entropy_backward_kernel[(n,)](
                logits, logits.stride(0), grad, grad.stride(0), targets, lse, grad_loss.contiguous(), vocab,
                BLOCK=BLOCK, num_warps=NUM_WARPS,
            )
        return grad, None


def fused_token_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each row of CUDA ``logits`` (N, V) against ``targets`` (N,): (N,) fp32."""
    return FusedTokenCrossEntropy.apply(logits, targets)
