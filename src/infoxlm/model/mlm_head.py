"""XLM-R's masked-LM head, computing vocabulary logits only where they are needed.

With XLM-R's 250,002-piece vocabulary the output projection costs more than the whole encoder
per predicted token, so the head selects the masked positions *before* the projection:
logits (N, V) for the N masked tokens instead of (B, T, V) for every position.

The decoder weight is the word-embedding matrix (V × d, 770 MB for XLM-R base). Autograd
gives every use of it a dense V × d gradient of its own and then sums them — a fill, a write
and an add of 770 MB per use, which dominates a small-batch CPU step. With
``grad_in_place`` the tied weight's gradient is instead added straight into ``weight.grad``
(``add_into_grad``): the head's by one ``addmm_``, the embedding lookup's by an ``index_add_``
over the rows it used. Same gradient, up to fp32 summation order. It bypasses autograd's
gradient accumulation, so it is only for a plain single-process backward: DDP (whose
reducer hooks that accumulation) and autocast use the ordinary path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .autocast import autocast_dtype
from .config import EncoderConfig
from .fast_paths import FastPaths
from .layer_norm import LayerNorm


def in_place_grad_applies(weight: torch.Tensor, x: torch.Tensor) -> bool:
    """Whether a backward that adds into ``weight.grad`` may replace autograd's accumulation here."""
    return torch.is_grad_enabled() and weight.requires_grad and not torch.is_autocast_enabled(x.device.type)


def add_into_grad(weight: torch.Tensor, make, add) -> None:
    """weight.grad ← make() if it has none yet, else add(weight.grad) in place."""
    if weight.grad is None:
        weight.grad = make()
    else:
        add(weight.grad)


class _DecoderInPlaceGrad(torch.autograd.Function):
    """x @ Wᵀ + b, whose weight gradient gᵀ·x is added into W.grad (no V × d temporary)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        return F.linear(x, weight, bias)  # (N, V)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        x, weight = ctx.saved_tensors  # (N, d), (V, d); grad (N, V)
        grad_x = grad @ weight if ctx.needs_input_grad[0] else None
        add_into_grad(weight, lambda: grad.t() @ x, lambda g: g.addmm_(grad.t(), x))
        grad_bias = grad.sum(0) if ctx.needs_input_grad[2] else None
        return grad_x, None, grad_bias


class MLMHead(nn.Module):
    """dense → GELU → LayerNorm → (tied word embeddings)ᵀ + bias.

    Parameter names match Hugging Face's ``lm_head.*``; ``decoder.weight`` *is* the word
    embedding matrix (tied, never stored twice).
    """

    def __init__(self, config: EncoderConfig, word_embeddings: nn.Embedding, fast_paths: FastPaths = FastPaths()):
        super().__init__()
        d = config.hidden_size
        self.dense = nn.Linear(d, d)
        self.layer_norm = LayerNorm(d, eps=config.layer_norm_eps, keep_autocast_dtype=fast_paths.low_precision_residual)
        self.decoder = nn.Linear(d, config.vocab_size, bias=False)
        self.decoder.weight = word_embeddings.weight  # tied, as in XLM-R
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))
        self.grad_in_place = fast_paths.word_grad_in_place  # see the module docstring

    def forward(
        self, hidden_states: torch.Tensor, masked_positions: torch.Tensor | None = None, *, vocab_multiple: int = 1
    ) -> torch.Tensor:
        """Vocabulary logits.

        hidden_states (B, T, d) or (N, d); masked_positions (B, T) bool → logits (N, V) for the
        N True positions, in row-major order (the order of ``labels[masked_positions]``).
        Without masked_positions: logits (..., V) at every position given.

        ``vocab_multiple`` > 1 pads the logits' last dimension to a multiple of it (see
        ``padded_vocab_logits``): (..., V′) with −inf in the V′ − V extra columns.
        """
        if masked_positions is not None:
            hidden_states = hidden_states[masked_positions]  # (N, d)
        x = self.layer_norm(F.gelu(self.dense(hidden_states)))
        weight = self.decoder.weight
        if self.grad_in_place and x.dim() == 2 and in_place_grad_applies(weight, x):
            return _DecoderInPlaceGrad.apply(x, weight, self.bias)
        if vocab_multiple > 1 and weight.shape[0] % vocab_multiple:
            return padded_vocab_logits(x, weight, self.bias, vocab_multiple)
        return F.linear(x, weight, self.bias)


def padded_vocab_logits(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, multiple: int) -> torch.Tensor:
    """x @ Wᵀ + b with the vocabulary padded, in this product only, to a multiple of ``multiple``.

    x (..., d), weight (V, d), bias (V,) → logits (..., V′), V′ = V rounded up: zero rows in
    the weight and −inf in the bias beyond V, so softmax and cross-entropy give those columns
    probability 0 and gradient 0 exactly, and argmax never picks one. Why: XLM-R's V = 250,002
    makes every row of the (N, V) logits and their gradient start at an address only 4-byte
    aligned, and GPU matrix-product libraries then fall back to slow kernels for all three of
    the head's products (see BENCHMARKS.md, "GPU: one H100, base and large"). The parameters, and so the
    checkpoints, keep V. Costs a padded copy of the weight in the product's dtype per call.
    """
    pad = -weight.shape[0] % multiple
    dtype = autocast_dtype(x.device.type) or weight.dtype
    padded_weight = F.pad(weight.to(dtype), (0, 0, 0, pad))  # (V′, d)
    padded_bias = torch.cat([bias.to(dtype), bias.new_full((pad,), float("-inf"), dtype=dtype)])  # (V′,)
    return F.linear(x, padded_weight, padded_bias)
