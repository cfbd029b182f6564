"""Which fast paths run: one frozen object, chosen when an encoder is built.

Every fast path computes what the plain path computes (each has a test against it); they
differ in time and memory only. An encoder is built with its ``FastPaths`` and keeps them:
nothing switches a path later, so reading ``Encoder`` top to bottom tells what a run does.
The losses over its outputs read them there too (``encoder.fast_paths``).

- ``skip_padding``: position-wise parts (embeddings, projections, feed-forward, LayerNorms)
  on the real tokens of a padded batch only (see packing.py); outputs at padding positions
  are then 0, not what a padded run leaves there. For training and sentence embeddings,
  which never read padding positions.
- ``top_rows_only``: ``Encoder.states_at`` runs the top layer's row-wise part on the rows
  asked for only (the masked tokens of MLM, one per sentence for ``<s>`` pooling).
- ``word_grad_in_place``: the tied word-embedding gradient goes straight into ``.grad`` from
  the lookup and the MLM head (see mlm_head.py), not through autograd's dense V × d
  tensors. A single process only: DDP hooks autograd's accumulation.
- ``varlen_attention``: on a GPU, attention over packed real tokens with ``varlen_attn``
  where it applies; off, SDPA over the padded layout.
- ``cudnn_attention``: on a GPU, a pass without padding (MMLM's full blocks) runs SDPA with
  cuDNN's attention kernel first, faster than flash attention's on Hopper; cuDNN sets up each
  new (batch, length) shape on the host, which only such passes, whose shapes repeat from
  step to step, pay once (see attention.py).
- ``low_precision_residual``: under autocast, LayerNorm outputs (the residual stream) stay
  in the autocast dtype; off, fp32 as plain autocast keeps them (see layer_norm.py).
- ``padded_vocabulary``: on a GPU, the MLM head's product pads the vocabulary to a multiple
  of 64 (see mlm_head.py); the loss gives the padding probability 0.
- ``fused_vocab_loss``: on a GPU, the masked-LM loss's cross-entropy over the vocabulary in
  two one-pass Triton kernels, where they run (objectives/vocab_loss.py); off, the plain
  ``F.cross_entropy`` in fp32.
- ``token_bucket``: with ``skip_padding``, a packed pass's row count rounded up to a
  multiple of this many tokens (0: not rounded) by spare rows that form a sequence of their
  own and that nothing reads (see packing.py): its tensors' sizes then repeat from step to
  step, which a GPU's caching allocator needs to reuse its blocks. Not a flag: a size.

>>> FastPaths.training(single_process=True).word_grad_in_place
True
>>> any(vars(FastPaths.plain()).values())
False
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["FastPaths"]


@dataclass(frozen=True)
class FastPaths:
    skip_padding: bool = False
    top_rows_only: bool = True
    word_grad_in_place: bool = False
    varlen_attention: bool = True
    cudnn_attention: bool = False
    low_precision_residual: bool = True
    padded_vocabulary: bool = True
    fused_vocab_loss: bool = True
    token_bucket: int = 0

    @classmethod
    def plain(cls) -> "FastPaths":
        """The reference computation: no fast path at all (``run.fast_paths=false``)."""
        return cls(**{field.name: type(field.default)() for field in fields(cls)})  # False, 0

    @classmethod
    def training(cls, single_process: bool, token_bucket: int = 0) -> "FastPaths":
        """Pre-training's: every path, the in-place word gradient only without DDP."""
        return cls(skip_padding=True, word_grad_in_place=single_process, token_bucket=token_bucket)

    @classmethod
    def inference(cls) -> "FastPaths":
        """Sentence embeddings and retrieval: padding positions are never read."""
        return cls(skip_padding=True)
