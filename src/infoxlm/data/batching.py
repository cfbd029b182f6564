"""Micro-batches by token budget: sort by length, cut greedily, right-pad.

A rank's share of a step's examples is more than fits on the accelerator at once, so it is
split into micro-batches for gradient accumulation. Examples are sorted by length (longest
first, ties by slot) and cut greedily so that each micro-batch's padded size — rows ×
longest row, summed over the views for XLCO — stays within ``max_tokens``. Neighbours in
length order differ little, so padding stays small; the first micro-batch is the largest
(an out-of-memory shows up at once). MMLM blocks are all ``block_size`` long except a
stream's tail, so they need almost no padding.

Tensors are right-padded with ``<pad>`` = 1 and attention 0, as XLM-R expects (its position
ids count non-pad tokens, so right padding leaves every real token's position unchanged).
Masked inputs never contain ``<pad>``: random replacements are ordinary pieces only.

Example:
    >>> from infoxlm.data.masking import mask_tokens
    >>> from infoxlm.data.ragged import Ragged
    >>> seqs = Ragged.from_list([[0, 5, 6, 2], [0, 7, 2], [0, 8, 9, 10, 11, 2]])
    >>> masked = mask_tokens(seqs, np.arange(3, dtype=np.uint64), vocab_size=20)
    >>> batches = mlm_micro_batches(masked, slots=np.arange(3), max_tokens=12)
    >>> [tuple(b.input_ids.shape) for b in batches]
    [(2, 6), (1, 3)]
    >>> sum(b.num_padding for b in batches), sum(b.num_positions for b in batches)
    (2, 15)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from ..model.packing import Packing
from ..special_tokens import BOS_ID, EOS_ID, PAD_ID
from .masking import MaskedSequences
from .ragged import Ragged

__all__ = [
    "MLMBatch",
    "ContrastBatch",
    "mlm_micro_batches",
    "contrast_micro_batches",
    "filler_mlm_batch",
    "filler_contrast_batch",
    "group_by_token_budget",
    "padding_fraction",
]



@dataclass
class MLMBatch:
    """Masked sequences, right-padded: the input of a masked-LM loss (MMLM, TLM) or of one XLCO view.

    Counts are plain ints computed on the CPU when the batch is built, so reading them
    after ``.to("cuda")`` never synchronises with the device.
    """

    input_ids: torch.Tensor  # (B, T) long, <pad> = 1 after each row's end
    attention_mask: torch.Tensor  # (B, T) long, 1 on real tokens
    masked_positions: torch.Tensor  # (B, T) bool, positions to predict
    targets: torch.Tensor  # (N,) long, original ids at masked_positions in row-major order
    slots: torch.Tensor  # (B,) long, each row's slot in the step's global batch
    num_tokens: int  # real (non-pad) tokens
    num_masked: int  # N
    # Where the real tokens are (rows, cu_seqlens), made here on the CPU, so that an encoder
    # on a GPU never reads it back from the device (see model/packing.py).
    packing: Packing
    # (N,) long: the masked positions' indices among the real tokens, row-major: the rows
    # of a packed pass's (n, d) states to predict, with no padded (B, T, d) state made.
    masked_rows: torch.Tensor
    # A stand-in that only keeps ranks in step (``filler_mlm_batch``): its losses count 0.
    filler: bool = False

    @property
    def num_examples(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def num_positions(self) -> int:
        """B · T: every position of the padded tensors."""
        return int(self.input_ids.numel())

    @property
    def num_padding(self) -> int:
        return self.num_positions - self.num_tokens

    def to(self, device, non_blocking: bool = False) -> "MLMBatch":
        return self.map_tensors(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> "MLMBatch":
        """A copy in page-locked host memory, whose copy to a GPU can run without the host waiting."""
        return self.map_tensors(torch.Tensor.pin_memory)

    def map_tensors(self, move: Callable[[torch.Tensor], torch.Tensor]) -> "MLMBatch":
        """This batch with ``move`` applied to each of its tensors (its packing's too)."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        moved = {name: move(v) for name, v in values.items() if isinstance(v, torch.Tensor)}
        return dataclasses.replace(self, **moved, packing=self.packing.map_tensors(move))


@dataclass
class ContrastBatch:
    """XLCO: query views and key views; row i of both comes from the same slot."""

    query: MLMBatch  # (B, Tq)
    key: MLMBatch  # (B, Tk)

    @property
    def slots(self) -> torch.Tensor:
        return self.query.slots

    @property
    def filler(self) -> bool:
        return self.query.filler

    @property
    def num_examples(self) -> int:
        return self.query.num_examples

    @property
    def num_tokens(self) -> int:
        return self.query.num_tokens + self.key.num_tokens

    @property
    def num_positions(self) -> int:
        return self.query.num_positions + self.key.num_positions

    @property
    def num_padding(self) -> int:
        return self.query.num_padding + self.key.num_padding

    @property
    def num_masked(self) -> int:
        return self.query.num_masked + self.key.num_masked

    def to(self, device, non_blocking: bool = False) -> "ContrastBatch":
        return ContrastBatch(self.query.to(device, non_blocking), self.key.to(device, non_blocking))

    def pin_memory(self) -> "ContrastBatch":
        return ContrastBatch(self.query.pin_memory(), self.key.pin_memory())


def padding_fraction(batches) -> float:
    """Pad positions / all positions over a list of batches (0.0 for an empty list)."""
    positions = sum(b.num_positions for b in batches)
    return sum(b.num_padding for b in batches) / positions if positions else 0.0


def group_by_token_budget(lengths: list[np.ndarray], slots: np.ndarray, max_tokens: int) -> list[np.ndarray]:
    """Split n examples into groups whose padded size fits ``max_tokens``.

    lengths: one (n,) array per view (one for MLM, two for XLCO: a group costs
    rows × Σ_views longest row). Returns arrays of example indices, longest examples first;
    their concatenation is the sort order.
    """
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    table = np.stack([np.asarray(x, dtype=np.int64) for x in lengths])  # (V, n)
    size = table.sum(axis=0)  # (n,) one example's padded cost if alone
    if size.size and int(size.max()) > max_tokens:
        raise ValueError(f"max_tokens={max_tokens} cannot hold a single example of {int(size.max())} tokens; raise max_tokens")
    # Longest first by each example's longest view (for two views this pads less than the
    # sum: ~8% vs ~11% on length-correlated translation pairs), ties by slot: deterministic.
    order = np.lexsort((slots, -table.max(axis=0, initial=0)))
    table = table[:, order]
    groups, begin, n = [], 0, len(order)
    while begin < n:
        # Cost of growing the group row by row: rows × Σ_views running maximum, which never
        # decreases, so the group ends before the first row that exceeds the budget.
        window = table[:, begin : begin + max_tokens]  # a group never has more rows than tokens
        cost = np.maximum.accumulate(window, axis=1).sum(axis=0) * np.arange(1, window.shape[1] + 1)
        rows = max(1, int(np.searchsorted(cost, max_tokens, side="right")))
        groups.append(order[begin : begin + rows])
        begin += rows
    return groups


def _pad(sequences: MaskedSequences, lengths: np.ndarray, first: int, stop: int, slots: np.ndarray) -> MLMBatch:
    """Right-pad sequences first … stop - 1 (consecutive in ``sequences``, whose lengths are
    ``lengths``) into one MLMBatch."""
    lengths = lengths[first:stop]  # (B,)
    lo, hi = sequences.inputs.offsets[first], sequences.inputs.offsets[stop]
    rows, width = len(lengths), int(lengths.max())
    if int(lengths.min()) == width:
        # All rows full (the common MMLM case): the flat range *is* the (B, T) tensor, no copy.
        input_ids = sequences.inputs.values[lo:hi].reshape(rows, width)
        masked = sequences.masked[lo:hi].reshape(rows, width)
        real = np.ones((rows, width), dtype=bool)
    else:
        # Row-major boolean placement: the flat values of consecutive sequences fill exactly
        # the True cells of `real`, in order, so no index arithmetic is needed.
        real = np.arange(width) < lengths[:, None]  # (B, T) bool
        input_ids = np.full((rows, width), PAD_ID, dtype=np.int64)
        input_ids[real] = sequences.inputs.values[lo:hi]
        masked = np.zeros((rows, width), dtype=bool)
        masked[real] = sequences.masked[lo:hi]
    # Row by row, positions ascending: the row-major order of masked_positions.
    targets = sequences.original[lo:hi][sequences.masked[lo:hi]]
    # The flat values are the real tokens in row-major order, so their masked flags give the
    # masked rows among the packed tokens directly.
    masked_rows = np.flatnonzero(sequences.masked[lo:hi])
    return MLMBatch(
        torch.from_numpy(input_ids),
        torch.from_numpy(real.astype(np.int64)),
        torch.from_numpy(masked),
        torch.from_numpy(np.ascontiguousarray(targets, dtype=np.int64)),
        torch.from_numpy(np.asarray(slots, dtype=np.int64)),
        num_tokens=int(lengths.sum()),
        num_masked=int(len(targets)),
        packing=Packing.of(torch.from_numpy(real)),
        masked_rows=torch.from_numpy(masked_rows.astype(np.int64)),
    )


def _bounds(groups: list[np.ndarray]) -> list[tuple[int, int]]:
    """(first, stop) of each group inside the concatenated order."""
    stops = np.cumsum([len(g) for g in groups]).tolist()
    return list(zip([0] + stops[:-1], stops))


def mlm_micro_batches(sequences: MaskedSequences, slots: np.ndarray, max_tokens: int) -> list[MLMBatch]:
    """MMLM / TLM micro-batches; ``slots`` (n,) the global slot of each sequence."""
    slots = np.asarray(slots, dtype=np.int64)
    groups = group_by_token_budget([sequences.lengths], slots, max_tokens)
    if not groups:
        return []
    order = np.concatenate(groups)
    # One gather (none if already in order, as for full MMLM blocks); every micro-batch is
    # then a contiguous range of `ordered`.
    ordered = sequences if np.array_equal(order, np.arange(len(order))) else sequences.take(order)
    lengths = ordered.lengths
    return [_pad(ordered, lengths, a, b, slots[order[a:b]]) for a, b in _bounds(groups)]


def contrast_micro_batches(
    query: MaskedSequences, key: MaskedSequences, slots: np.ndarray, max_tokens: int
) -> list[ContrastBatch]:
    """XLCO micro-batches: query and key rows aligned; both views together within ``max_tokens``."""
    if len(query) != len(key):
        raise ValueError(f"query and key must hold the same number of views, got {len(query)} and {len(key)}")
    slots = np.asarray(slots, dtype=np.int64)
    groups = group_by_token_budget([query.lengths, key.lengths], slots, max_tokens)
    if not groups:
        return []
    order = np.concatenate(groups)
    q, k = query.take(order), key.take(order)
    q_lengths, k_lengths = q.lengths, k.lengths
    return [
        ContrastBatch(_pad(q, q_lengths, a, b, slots[order[a:b]]), _pad(k, k_lengths, a, b, slots[order[a:b]]))
        for a, b in _bounds(groups)
    ]


def filler_mlm_batch() -> MLMBatch:
    """One row, ``<s> </s>`` with ``</s>`` to predict, marked ``filler``: what a rank runs when
    another rank has more micro-batches of an objective in a step, so that every rank calls
    the same modules in the same order (``train.joint_step.even_out``); its losses count 0."""
    ids = Ragged.from_list([[BOS_ID, EOS_ID]])
    sequence = MaskedSequences(ids, masked=np.array([False, True]), original=ids.values)
    return dataclasses.replace(_pad(sequence, sequence.lengths, 0, 1, np.zeros(1, dtype=np.int64)), filler=True)


def filler_contrast_batch() -> ContrastBatch:
    """``filler_mlm_batch`` as both views of one pair: its loss counts 0, its key is not queued."""
    return ContrastBatch(filler_mlm_batch(), filler_mlm_batch())
