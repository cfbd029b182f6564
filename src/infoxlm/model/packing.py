"""Where the real tokens of a right-padded (B, T) batch sit: the layout of packed encoder passes.

Position-wise parts of a layer (projections, feed-forward, LayerNorm, embeddings) can run on
the n real tokens only — (n, d) instead of (B, T, d) — and attention either on the packed
tokens themselves (a variable-length kernel, given ``cu_seqlens``) or on the padded layout
with a mask.

A packing built from a batch's attention mask on the GPU (``Packing.of``) has to read n back
from the device, which stalls the host until every queued kernel has run. The data pipeline
therefore builds each batch's packing on the CPU, where the mask is made, and moves it
with the batch: an encoder given a packing never waits on the device.

Example::

    >>> import torch
    >>> p = Packing.of(torch.tensor([[1, 1, 1], [1, 0, 0]]))
    >>> p.rows.tolist(), p.cu_seqlens.tolist(), p.num_tokens, p.has_padding
    ([0, 1, 2, 3], [0, 3, 4], 4, True)
    >>> p.pad(p.pack(torch.arange(6.0).view(2, 3))).tolist()
    [[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]]
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F


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


def select_rows(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """x (m, ...) → x[rows] (k, ...) for k distinct row indices, differentiable."""
    return _SelectRows.apply(x, rows)


@dataclass
class Packing:
    """The real tokens of a right-padded (B, T) batch among its B·T positions."""

    rows: torch.Tensor  # (n,) long, ascending: flat indices of the real tokens
    # (B + 1,) int32: where each sequence starts among the n packed tokens, then n; the
    # layout of variable-length attention kernels (sequence b is rows cu[b] … cu[b+1] − 1).
    cu_seqlens: torch.Tensor
    batch: int  # B
    length: int  # T
    num_tokens: int  # n, a host int: reading it never synchronises with a device
    # Rows after the n real ones in a packed pass's states, rounding their count up to a
    # bucket (``bucketed``): one more sequence that attends to itself only and that nothing
    # reads, so every loss and gradient is what the n rows alone give.
    spare_rows: int = 0
    # With spare rows: the variable-length kernel's layout, (B + 2,) cu_seqlens with the spare
    # rows as the last sequence and the longest sequence; made once per pass, where the pass
    # starts, so that compiled layers only read it.
    spare_layout: tuple[torch.Tensor, int] | None = None

    @property
    def has_padding(self) -> bool:
        return self.num_tokens < self.batch * self.length

    @property
    def num_rows(self) -> int:
        """Rows of a packed pass's states: n real tokens, then the spare rows."""
        return self.num_tokens + self.spare_rows

    def bucketed(self, multiple: int) -> "Packing":
        """This packing with its packed row count rounded up to a multiple of ``multiple``.

        Packed passes of a training run have a new token count at every step; rounded up,
        the sizes of their tensors repeat, so the GPU's caching allocator reuses its blocks
        (model/fast_paths.py, ``token_bucket``). No device value is read."""
        spare = -self.num_tokens % multiple
        # A count that is a multiple already keeps the layout's form (compiled layers see one).
        cu_seqlens = F.pad(self.cu_seqlens, (0, 1), value=self.num_tokens + spare) if spare else self.cu_seqlens
        return dataclasses.replace(self, spare_rows=spare, spare_layout=(cu_seqlens, max(self.length, spare)))

    def attention_layout(self) -> tuple[torch.Tensor, int]:
        """(cu_seqlens, longest sequence) of the packed rows for a variable-length attention
        kernel: the spare rows, if any, are a sequence of their own, which no real token sees."""
        return self.spare_layout or (self.cu_seqlens, self.length)

    @classmethod
    def of(cls, attention_mask: torch.Tensor) -> "Packing":
        """From a (B, T) mask, 1 = token, computed where the mask lies: on the CPU with the
        batch (the data pipeline), or on a GPU, where it waits for the device (to learn n).

        ``rows`` follow the mask exactly; ``cu_seqlens`` (the varlen kernel's layout) assume
        right padding, as XLM-R's batches have."""
        mask = attention_mask.bool()
        rows = mask.reshape(-1).nonzero().squeeze(1)
        cu_seqlens = F.pad(mask.sum(1, dtype=torch.int32).cumsum(0, dtype=torch.int32), (1, 0))
        return cls(rows, cu_seqlens, mask.shape[0], mask.shape[1], int(rows.shape[0]))

    @property
    def first_rows(self) -> torch.Tensor:
        """(B,) long: each sequence's first real token (its ``<s>``) among the n packed tokens;
        every sequence must hold at least one token."""
        return self.cu_seqlens[:-1].long()

    def to(self, device, non_blocking: bool = False) -> "Packing":
        return self.map_tensors(lambda t: t.to(device, non_blocking=non_blocking))

    def map_tensors(self, move: Callable[[torch.Tensor], torch.Tensor]) -> "Packing":
        """This packing with ``move`` applied to its tensors (a copy to a device, pinning)."""
        spare_layout = None if self.spare_layout is None else (move(self.spare_layout[0]), self.spare_layout[1])
        return dataclasses.replace(self, rows=move(self.rows), cu_seqlens=move(self.cu_seqlens), spare_layout=spare_layout)

    def attention_mask(self) -> torch.Tensor:
        """(B, T) bool, True on real tokens."""
        flat = torch.zeros(self.batch * self.length, dtype=torch.bool, device=self.rows.device)
        return flat.index_fill_(0, self.rows, True).view(self.batch, self.length)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, ...) → (n + spare rows, ...): the real tokens in row-major order, then zeros."""
        packed = select_rows(x.reshape(self.batch * self.length, *x.shape[2:]), self.rows)
        if not self.spare_rows:
            return packed
        return torch.cat([packed, packed.new_zeros(self.spare_rows, *packed.shape[1:])])

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """(n + spare rows, ...) → (B, T, ...), zeros at the padding; the spare rows are dropped."""
        x = x[: self.num_tokens]
        # In place into the fresh zeros: the out-of-place index_copy would first clone them
        # (one more write of B·T rows); autograd differentiates both alike (IndexCopyBackward).
        flat = x.new_zeros(self.batch * self.length, *x.shape[1:]).index_copy_(0, self.rows, x)
        return flat.view(self.batch, self.length, *x.shape[1:])

    def sequence_means(self, x: torch.Tensor) -> torch.Tensor:
        """(n, d) packed → (B, d): each sequence's mean over its real tokens (0 for an empty
        one), summed in fp32 and returned in x's dtype; no padded (B, T, d) state is made."""
        sequence = torch.div(self.rows, self.length, rounding_mode="floor")  # (n,) each token's row
        sums = torch.zeros(self.batch, x.shape[1], dtype=torch.float32, device=x.device).index_add(0, sequence, x.float())
        counts = (self.cu_seqlens[1:] - self.cu_seqlens[:-1]).clamp(min=1)  # (B,) real tokens per row
        return (sums / counts.unsqueeze(1)).to(x.dtype)
