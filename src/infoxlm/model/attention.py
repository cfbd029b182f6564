"""Self-attention of one encoder layer: over the padded layout with SDPA, or over packed real
tokens with flash attention's variable-length kernel.

``SelfAttention`` is Hugging Face's ``attention.self`` (the query, key and value projections,
under those key names) and the attention over them; the output projection and its LayerNorm
belong to the layer (encoder.py). Both layouts compute the same context at the real tokens
(tests/model/test_attention.py); which one runs is ``FastPaths.varlen_attention`` and, on the
device, ``varlen_attention_applies``.
"""

from __future__ import annotations

import importlib.util
from contextlib import nullcontext

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from .autocast import autocast_dtype
from .config import EncoderConfig
from .fast_paths import FastPaths
from .packing import Packing

# Flash attention over packed sequences of different lengths (torch ≥ 2.9; older torch: the
# padded SDPA path only). Its module imports torch._dynamo (seconds), so it is looked up here
# and imported at the first call, by a run that uses it.
HAS_VARLEN_ATTN = importlib.util.find_spec("torch.nn.attention.varlen") is not None

# The attention backends SDPA may pick, best first. cuDNN's is left out: it builds a new
# graph on the host for every new (batch, length) shape, and batches of sentences bring
# new shapes at every step, so the host, not the device, would bound the step (see
# BENCHMARKS.md, "GPU: one H100, base and large"). Flash (no padding) and memory-efficient
# (padding mask) kernels need no per-shape set-up.
ATTENTION_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
# A pass without padding (MMLM's blocks of one length) has shapes that repeat from step to
# step, so cuDNN's set-up is paid once per shape, and its kernel beats flash's on Hopper.
UNPADDED_BACKENDS = [SDPBackend.CUDNN_ATTENTION, *ATTENTION_BACKENDS]


def varlen_attn(q, k, v, cu_q, cu_k, max_q, max_k):
    """torch's ``varlen_attn``: q, k, v (n, h, d/h) packed, ``cu_*`` (B + 1,) int32 starts."""
    from torch.nn.attention.varlen import varlen_attn as kernel

    return kernel(q, k, v, cu_q, cu_k, max_q, max_k)


def varlen_attention_applies(x: torch.Tensor, dropout_p: float) -> bool:
    """Whether packed tokens x (n, d) can go through ``varlen_attn`` (flash attention over
    sequences of different lengths): a CUDA GPU of compute capability ≥ 8.0, projections in
    bf16 or fp16 (autocast or low-precision weights), and no attention dropout (the kernel has
    none)."""
    if not HAS_VARLEN_ATTN or x.device.type != "cuda" or dropout_p > 0:
        return False
    low = (torch.bfloat16, torch.float16)
    in_low_precision = x.dtype in low or autocast_dtype("cuda") in low
    return in_low_precision and torch.cuda.get_device_capability(x.device)[0] >= 8


class SelfAttention(nn.Module):
    """Multi-head self-attention's context, before the layer's output projection.

    With a packing (real tokens only), attention runs on the packed tokens themselves where
    ``varlen_attention_applies`` (no padding anywhere); elsewhere the projections are
    scattered back into the padded (B, h, T, d/h) layout for SDPA with a mask.
    """

    def __init__(self, config: EncoderConfig, fast_paths: FastPaths = FastPaths()):
        super().__init__()
        d = config.hidden_size
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.num_heads = config.num_attention_heads
        self.dropout_p = config.attention_probs_dropout_prob  # on attention probabilities, in training
        self.varlen_attention = fast_paths.varlen_attention  # see the class docstring
        self.unpadded_backends = UNPADDED_BACKENDS if fast_paths.cudnn_attention else ATTENTION_BACKENDS

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None, packing: Packing | None = None) -> torch.Tensor:
        # x (B, T, d), or (n, d) the real tokens only when packing is given; attn_mask
        # (B, 1, 1, T) bool, True = may attend, or None for no padding → context, x's shape.
        dropout_p = self.dropout_p if self.training else 0.0
        if packing is not None and self.varlen_attention and varlen_attention_applies(x, dropout_p):
            return self._packed(x, packing)
        return self._padded(x, attn_mask, packing, dropout_p)

    def _packed(self, x: torch.Tensor, packing: Packing) -> torch.Tensor:
        """Attention within each sequence of the packed tokens x (n, d) → context (n, d)."""
        n, d = x.shape
        q, k, v = (proj(x).view(n, self.num_heads, d // self.num_heads) for proj in (self.query, self.key, self.value))
        # The padded length bounds every sequence's length; as the kernel's maximum it only
        # sizes its launch grid, and reading it needs no device synchronisation.
        cu, longest = packing.attention_layout()
        return varlen_attn(q, k, v, cu, cu, longest, longest).reshape(n, d)

    def _padded(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None, packing: Packing | None, dropout_p: float
    ) -> torch.Tensor:
        """SDPA over the padded (B, h, T, d/h) layout → context (B, T, d), or (n, d) packed again."""
        B, T, d = (packing.batch, packing.length, x.shape[-1]) if packing is not None else x.shape
        h = self.num_heads

        def heads(proj: nn.Linear) -> torch.Tensor:  # (B, T, d) → (B, h, T, d/h)
            y = proj(x) if packing is None else packing.pad(proj(x[: packing.num_tokens]))  # spare rows left out
            return y.view(B, T, h, d // h).transpose(1, 2)

        q, k, v = heads(self.query), heads(self.key), heads(self.value)
        # On a CPU, torch's bf16 attention kernel is slower than its fp32 one (2.6× at the demo's
        # shapes, while bf16 products run 2× faster: benchmarks/results/2026-11-26-cpu-step.md),
        # so under CPU bf16 autocast attention alone runs in fp32.
        in_fp32 = x.device.type == "cpu" and q.dtype == torch.bfloat16
        if in_fp32:
            q, k, v = q.float(), k.float(), v.float()
        backends = self.unpadded_backends if attn_mask is None and packing is None else ATTENTION_BACKENDS
        with sdpa_kernel(backends), torch.autocast("cpu", enabled=False) if in_fp32 else nullcontext():
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p)  # (B, h, T, d/h)
        if in_fp32:
            context = context.to(torch.bfloat16)
        context = context.transpose(1, 2).reshape(B, T, d)
        return context if packing is None else packing.pack(context)  # (n, d)
