"""An XLM-R encoder: post-LayerNorm RoBERTa, exactly as Hugging Face's XLM-R computes it.

Sub-module names spell the keys of a Hugging Face XLM-R checkpoint (``embeddings.LayerNorm``,
``encoder.layer.3.attention.self.query`` …), so weights move between the two with no
converter: only the ``roberta.`` prefix of the masked-LM checkpoint is added or removed
(see ``hub.py``). Attention runs through ``torch.nn.functional.scaled_dot_product_attention``
so a GPU gets the fused kernels (on real tokens only, flash attention's variable-length kernel
over the packed sequences), and the stack can stop after any layer (XLCO contrasts a middle
layer and needs nothing above it).

Example::

    >>> import torch
    >>> from infoxlm import Encoder, EncoderConfig
    >>> enc = Encoder(EncoderConfig.preset("tiny", vocab_size=100)).eval()
    >>> ids = torch.tensor([[0, 5, 6, 2], [0, 7, 2, 1]])
    >>> out = enc(ids, ids.ne(1))
    >>> len(out.hidden_states), tuple(out.last_hidden_state.shape)
    (3, (2, 4, 64))
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from .autocast import autocast_dtype
from .config import EncoderConfig
from .layer_norm import LayerNorm
from .mlm_head import MLMHead, add_into_grad

try:  # flash attention over packed sequences of different lengths (torch ≥ 2.9)
    from torch.nn.attention.varlen import varlen_attn
except ImportError:  # pragma: no cover - older torch: the padded SDPA path only
    varlen_attn = None

if TYPE_CHECKING:
    from ..tokenizer import Tokenizer


@dataclass
class EncoderOutput:
    """What the encoder returns.

    ``hidden_states[0]`` is the embedding output and ``hidden_states[k]`` the output of layer
    k, as in Hugging Face; the tuple has ``num_layers + 1`` entries, each (B, T, d).
    """

    last_hidden_state: torch.Tensor
    hidden_states: tuple[torch.Tensor, ...]


class _SelectRows(torch.autograd.Function):
    """x.index_select(0, rows) for distinct rows, whose backward copies (index_copy_) rather
    than accumulates (index_add_, a slow scatter-add on CPU)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(rows)
        ctx.num_rows = x.shape[0]
        return x.index_select(0, rows)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (rows,) = ctx.saved_tensors
        return grad.new_zeros(ctx.num_rows, *grad.shape[1:]).index_copy_(0, rows, grad), None


@dataclass
class Packing:
    """Where the real tokens of a right-padded (B, T) batch sit among its B·T positions.

    Position-wise parts of a layer (projections, feed-forward, LayerNorm, embeddings) run on
    the n real tokens only — (n, d) instead of (B, T, d) — and only attention, which needs
    the (B, h, T, d/h) layout, sees the padding (masked).
    """

    rows: torch.Tensor  # (n,) long, ascending: flat indices of the real tokens
    batch: int
    length: int
    # (B + 1,) int32: where each sequence starts among the n packed tokens, then n; the
    # layout of variable-length attention kernels (sequence b is rows cu[b] … cu[b+1] − 1).
    cu_seqlens: torch.Tensor

    @classmethod
    def of(cls, attention_mask: torch.Tensor) -> "Packing":
        B, T = attention_mask.shape
        lengths = attention_mask.sum(1, dtype=torch.int32)  # (B,)
        cu_seqlens = F.pad(lengths.cumsum(0, dtype=torch.int32), (1, 0))
        return cls(attention_mask.reshape(-1).nonzero().squeeze(1), B, T, cu_seqlens)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) → (n, ...): the real tokens, in row-major order."""
        return _SelectRows.apply(x.reshape(self.batch * self.length, *x.shape[2:]), self.rows)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """(n, ...) → (B, T, ...), zeros at the padding."""
        flat = x.new_zeros(self.batch * self.length, *x.shape[1:]).index_copy(0, self.rows, x)
        return flat.view(self.batch, self.length, *x.shape[1:])


def xlmr_position_ids(input_ids: torch.Tensor, pad_token_id: int) -> torch.Tensor:
    """XLM-R positions: pad_token_id + 1, + 2, … over non-padding tokens; padding keeps pad_token_id.

    input_ids (B, T) → position ids (B, T). Positions follow the token ids, not the attention
    mask, as in Hugging Face, so a sentence gets the same positions whatever its batch.
    """
    not_pad = input_ids.ne(pad_token_id).int()
    return (torch.cumsum(not_pad, dim=1) * not_pad + pad_token_id).long()


class _LookupInPlaceGrad(torch.autograd.Function):
    """weight[ids], whose gradient is index-added into weight.grad over the rows used only.

    Autograd's embedding backward makes a zero-filled V × d gradient per lookup; this touches
    the looked-up rows of the (one) accumulated gradient instead. ``padding_idx`` rows get no
    gradient, as in ``F.embedding``.
    """

    @staticmethod
    def forward(ctx, ids: torch.Tensor, weight: torch.Tensor, padding_idx: int) -> torch.Tensor:
        ctx.save_for_backward(ids)
        ctx.weight, ctx.padding_idx = weight, padding_idx
        return F.embedding(ids, weight, padding_idx)  # (..., d)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (ids,) = ctx.saved_tensors
        weight = ctx.weight
        ids = ids.reshape(-1)
        rows = ids.ne(ctx.padding_idx).nonzero().squeeze(1)  # positions that are not <pad>
        ids, grad = ids[rows], grad.reshape(-1, grad.shape[-1])[rows]  # (n,), (n, d)
        add_into_grad(weight, lambda: torch.zeros_like(weight).index_add_(0, ids, grad), lambda g: g.index_add_(0, ids, grad))
        return None, None, None


class Embeddings(nn.Module):
    """Word + position + token-type (always type 0) embeddings, then LayerNorm and dropout."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        d = config.hidden_size
        self.pad_token_id = config.pad_token_id
        self.word_embeddings = nn.Embedding(config.vocab_size, d, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(
            config.max_position_embeddings, d, padding_idx=config.pad_token_id
        )
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, d)
        self.LayerNorm = LayerNorm(d, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.grad_in_place = False  # see mlm_head.py; set by Encoder.set_word_grad_in_place

    def forward(self, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None) -> torch.Tensor:
        # input_ids (B, T) → (B, T, d)
        if position_ids is None:
            position_ids = xlmr_position_ids(input_ids, self.pad_token_id)
        weight = self.word_embeddings.weight
        # Unlike the head's product, a lookup runs in the weight's own dtype under autocast too
        # (embedding is not an autocast op), so its fp32 gradient can go straight into .grad.
        if self.grad_in_place and torch.is_grad_enabled() and weight.requires_grad:
            words = _LookupInPlaceGrad.apply(input_ids, weight, self.pad_token_id)
        else:
            words = self.word_embeddings(input_ids)
        x = (
            words
            + self.position_embeddings(position_ids)
            + self.token_type_embeddings.weight[0]  # XLM-R uses a single token type
        )
        return self.dropout(self.LayerNorm(x))


# The attention backends SDPA may pick, best first. cuDNN's is left out: it builds a new
# graph on the host for every new (batch, length) shape, and batches of sentences bring
# new shapes at every step. Measured on an H100 (benchmarks/gpu_profile.py, XLM-R base
# joint step, 2026-11-23): 660 ms of host time per step in cuDNN attention against 106 ms
# of device work for the whole step; without it the step's wall time fell from 986 to
# 390 ms (profiler on). Flash (no padding) and memory-efficient (padding mask) kernels need
# no per-shape set-up.
ATTENTION_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def varlen_attention_applies(x: torch.Tensor, dropout_p: float) -> bool:
    """Whether packed tokens x (n, d) can go through ``varlen_attn`` (flash attention over
    sequences of different lengths): a CUDA GPU of compute capability ≥ 8.0, projections in
    bf16 or fp16 (autocast or low-precision weights), and no attention dropout (the kernel has
    none)."""
    if varlen_attn is None or x.device.type != "cuda" or dropout_p > 0:
        return False
    low = (torch.bfloat16, torch.float16)
    in_low_precision = x.dtype in low or autocast_dtype("cuda") in low
    return in_low_precision and torch.cuda.get_device_capability(x.device)[0] >= 8


class TransformerLayer(nn.Module):
    """One post-LayerNorm block: x = LN(x + Attn(x)); x = LN(x + FFN(x)).

    With a packing (real tokens only), attention runs on the packed tokens themselves where
    ``varlen_attention_applies`` (no padding anywhere in the layer); elsewhere the
    projections are scattered back into the padded (B, h, T, d/h) layout for SDPA with a mask.
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        d, ff, eps = config.hidden_size, config.intermediate_size, config.layer_norm_eps
        self.num_heads = config.num_attention_heads
        self.attention_dropout = config.attention_probs_dropout_prob
        # ModuleDicts only to give the parameters Hugging Face's key names.
        self.attention = nn.ModuleDict(
            {
                "self": nn.ModuleDict({"query": nn.Linear(d, d), "key": nn.Linear(d, d), "value": nn.Linear(d, d)}),
                "output": nn.ModuleDict({"dense": nn.Linear(d, d), "LayerNorm": LayerNorm(d, eps=eps)}),
            }
        )
        self.intermediate = nn.ModuleDict({"dense": nn.Linear(d, ff)})
        self.output = nn.ModuleDict({"dense": nn.Linear(ff, d), "LayerNorm": LayerNorm(d, eps=eps)})
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.varlen_attention = True  # see the class docstring; Encoder.set_varlen_attention

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None, packing: Packing | None = None) -> torch.Tensor:
        # x (B, T, d), or (n, d) the real tokens only when packing is given; attn_mask
        # (B, 1, 1, T) bool, True = may attend, or None for no padding.
        dropout_p = self.attention_dropout if self.training else 0.0
        if packing is not None and self.varlen_attention and varlen_attention_applies(x, dropout_p):
            context = self._packed_attention(x, packing)
        else:
            context = self._padded_attention(x, attn_mask, packing, dropout_p)
        out = self.attention.output
        x = out.LayerNorm(x + self.dropout(out.dense(context)))
        ffn = self.output.dense(F.gelu(self.intermediate.dense(x)))
        return self.output.LayerNorm(x + self.dropout(ffn))

    def _packed_attention(self, x: torch.Tensor, packing: Packing) -> torch.Tensor:
        """Attention within each sequence of the packed tokens x (n, d) → context (n, d)."""
        n, d = x.shape
        qkv = self.attention.self
        q, k, v = (proj(x).view(n, self.num_heads, d // self.num_heads) for proj in (qkv.query, qkv.key, qkv.value))
        # The padded length bounds every sequence's length; as the kernel's maximum it only
        # sizes its launch grid, and reading it needs no device synchronisation.
        cu, longest = packing.cu_seqlens, packing.length
        return varlen_attn(q, k, v, cu, cu, longest, longest).reshape(n, d)

    def _padded_attention(
        self, x: torch.Tensor, attn_mask: torch.Tensor | None, packing: Packing | None, dropout_p: float
    ) -> torch.Tensor:
        """SDPA over the padded (B, h, T, d/h) layout → context (B, T, d), or (n, d) packed again."""
        B, T, d = (packing.batch, packing.length, x.shape[-1]) if packing is not None else x.shape
        h = self.num_heads
        qkv = self.attention.self

        def heads(proj: nn.Linear) -> torch.Tensor:  # (B, T, d) → (B, h, T, d/h)
            y = proj(x) if packing is None else packing.pad(proj(x))
            return y.view(B, T, h, d // h).transpose(1, 2)

        with sdpa_kernel(ATTENTION_BACKENDS):
            context = F.scaled_dot_product_attention(
                heads(qkv.query), heads(qkv.key), heads(qkv.value), attn_mask=attn_mask, dropout_p=dropout_p
            )  # (B, h, T, d/h)
        context = context.transpose(1, 2).reshape(B, T, d)
        return context if packing is None else packing.pack(context)  # (n, d)


class LayerStack(nn.Module):
    """The ``encoder.layer.{i}`` list of a Hugging Face checkpoint."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.layer = nn.ModuleList(TransformerLayer(config) for _ in range(config.num_hidden_layers))


class Encoder(nn.Module):
    """XLM-R body + pooler + tied masked-LM head, loadable from and savable to Hugging Face.

    ``encoder(input_ids, attention_mask)`` runs the body; ``encoder.lm_head(hidden, masked)``
    turns hidden states into vocabulary logits at the masked positions only.
    """

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.encoder = LayerStack(config)
        # Carried only so that checkpoints round-trip and AutoModel finds every weight it
        # expects; infoxlm's objectives do not use it.
        self.pooler = nn.ModuleDict({"dense": nn.Linear(config.hidden_size, config.hidden_size)})
        self.lm_head = MLMHead(config, self.embeddings.word_embeddings)
        # Optional parts ("lm_head", "pooler") whose weights came from a checkpoint, not from
        # reset_parameters(); set by from_pretrained, read by save_pretrained.
        self.loaded_parts: set[str] = set()
        # Run position-wise parts on real tokens only (see Packing) for batches with padding.
        # Outputs at padding positions are then 0, not what a padded run leaves there.
        self.skip_padding = False
        self.reset_parameters()

    @property
    def num_layers(self) -> int:
        return self.config.num_hidden_layers

    @torch.no_grad()
    def reset_parameters(self, scheme: str = "normal") -> None:
        """Fresh weights: zero biases, unit LayerNorms, and matrices drawn from

        - ``normal``: N(0, initializer_range²), Hugging Face XLM-R's initialisation;
        - ``uniform``: U[−initializer_range, initializer_range], the paper's from-scratch recipe.
        """
        if scheme not in ("normal", "uniform"):
            raise ValueError(f"initialisation scheme {scheme!r}: expected 'normal' or 'uniform'")
        r = self.config.initializer_range

        def draw(weight: torch.Tensor) -> None:
            weight.normal_(0.0, r) if scheme == "normal" else weight.uniform_(-r, r)

        for module in self.modules():
            if module is self.lm_head.decoder:
                continue  # its weight is the word-embedding matrix, drawn (with a zero <pad> row) below
            if isinstance(module, nn.Linear):
                draw(module.weight)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.Embedding):
                draw(module.weight)
                if module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
            elif isinstance(module, nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
        self.lm_head.bias.zero_()

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        *,
        position_ids: torch.Tensor | None = None,
        num_layers: int | None = None,
    ) -> EncoderOutput:
        """Encode a padded batch.

        input_ids (B, T); attention_mask (B, T), 1 = token, 0 = padding (default: tokens that
        are not ``<pad>``); position_ids (B, T), default XLM-R's (see ``xlmr_position_ids``);
        num_layers: stop after this many layers (0 … L, default L) without computing the rest.
        """
        L = self.config.num_hidden_layers
        num_layers = L if num_layers is None else num_layers
        if not 0 <= num_layers <= L:
            raise ValueError(f"num_layers={num_layers}: expected 0 … {L}")
        if attention_mask is None:
            attention_mask = input_ids.ne(self.config.pad_token_id)
        attention_mask = attention_mask.bool()
        # With no padding, no mask at all lets SDPA pick its fastest kernel.
        attn_mask = None if bool(attention_mask.all()) else attention_mask[:, None, None, :]

        if self.skip_padding and attn_mask is not None:
            packing = Packing.of(attention_mask)
            if position_ids is None:
                position_ids = xlmr_position_ids(input_ids, self.config.pad_token_id)
            x = self.embeddings(packing.pack(input_ids), packing.pack(position_ids))  # (n, d)
            states = [x]
            for layer in self.encoder.layer[:num_layers]:
                x = layer(x, attn_mask, packing)
                states.append(x)
            hidden_states = [packing.pad(x) for x in states]  # each (B, T, d)
            return EncoderOutput(last_hidden_state=hidden_states[-1], hidden_states=tuple(hidden_states))

        x = self.embeddings(input_ids, position_ids)
        hidden_states = [x]
        for layer in self.encoder.layer[:num_layers]:
            x = layer(x, attn_mask)
            hidden_states.append(x)
        return EncoderOutput(last_hidden_state=x, hidden_states=tuple(hidden_states))

    def set_word_grad_in_place(self, enabled: bool) -> None:
        """Add the tied word-embedding gradient straight into ``.grad`` (embedding lookup and MLM
        head) instead of through autograd's per-use dense V × d tensors (see mlm_head.py).

        For a plain single-process backward only: not under DDP, which hooks autograd's
        accumulation. Under autocast the lookup keeps the in-place path (it runs in fp32) and the
        head, whose product runs in bf16, falls back to the ordinary one by itself.
        """
        self.embeddings.grad_in_place = self.lm_head.grad_in_place = enabled

    def set_low_precision_residual(self, enabled: bool) -> None:
        """Under autocast, keep LayerNorm outputs — the residual stream — in the autocast dtype
        (default) or, with False, in fp32 as plain autocast does (see layer_norm.py)."""
        for module in self.modules():
            if isinstance(module, LayerNorm):
                module.keep_autocast_dtype = enabled

    def set_varlen_attention(self, enabled: bool) -> None:
        """Run attention over packed real tokens with ``varlen_attn`` where it applies (default),
        or always over the padded layout with SDPA (see TransformerLayer)."""
        for layer in self.encoder.layer:
            layer.varlen_attention = enabled

    def set_dropout(self, p: float) -> None:
        """Set hidden and attention dropout everywhere (e.g. 0 for continued pre-training)."""
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout={p}: expected 0 <= p < 1")
        self.config.hidden_dropout_prob = self.config.attention_probs_dropout_prob = p
        for module in self.modules():
            if isinstance(module, nn.Dropout):
                module.p = p
            elif isinstance(module, TransformerLayer):
                module.attention_dropout = p

    def pooled_output(self, last_hidden_state: torch.Tensor) -> torch.Tensor:
        """Hugging Face's pooler: tanh(W · h_<s>). (B, T, d) → (B, d)."""
        return torch.tanh(self.pooler.dense(last_hidden_state[:, 0]))

    # --- Hugging Face checkpoint directories ------------------------------------------

    @classmethod
    def from_pretrained(cls, path: str | Path, *, map_location: str | torch.device = "cpu") -> "Encoder":
        """Load a Hugging Face XLM-R checkpoint directory (``config.json`` + weights).

        Reads ``model.safetensors`` (or its sharded index), else ``pytorch_model.bin`` with
        ``weights_only=True``; the MLM head (``lm_head.*``) when present, else a freshly
        initialised one. Raises ``CheckpointError`` for anything that is not XLM-R-shaped.
        """
        from .hub import load_encoder

        return load_encoder(path, map_location=map_location)

    def save_pretrained(
        self,
        path: str | Path,
        tokenizer: "Tokenizer | None" = None,
        *,
        include_mlm_head: bool = True,
    ) -> Path:
        """Write ``config.json`` + ``model.safetensors`` (+ tokenizer files) that transformers loads as XLM-R."""
        from .hub import save_encoder

        return save_encoder(self, path, tokenizer=tokenizer, include_mlm_head=include_mlm_head)
