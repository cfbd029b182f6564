"""Variable-length token sequences as one flat array plus offsets, built without Python loops.

A step's examples (thousands of blocks, pairs and views) are held as a :class:`Ragged`:
``values`` is every sequence concatenated and sequence i is
``values[offsets[i]:offsets[i + 1]]``. The helpers gather slices of a memory-mapped token
array into it and frame parts as ``<s> p1 </s> p2 </s>`` with a handful of vectorised
numpy operations, whatever the number of sequences.

Example:
    >>> r = Ragged.from_lengths(np.array([2, 3]))
    >>> r.fill(np.arange(10, 20), rows=np.array([0, 1]), starts=np.array([0, 5]))
    >>> [r[i].tolist() for i in range(len(r))]
    [[10, 11], [15, 16, 17]]
    >>> [s.tolist() for s in frame(r, num_parts=1, bos=0, eos=2)]
    [[0, 10, 11, 2], [0, 15, 16, 17, 2]]
    >>> [s.tolist() for s in frame(r, num_parts=2, bos=0, eos=2)]    # one sequence of two parts
    [[0, 10, 11, 2, 15, 16, 17, 2]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Ragged", "frame", "flat_ranges", "gather_runs", "scatter_runs"]


def flat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``range(starts[i], starts[i] + lengths[i])`` for all i, as int64."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    # Each element is its range's start plus its rank inside the range:
    # arange(total) minus the flat index where its range begins.
    begins = np.cumsum(lengths) - lengths  # (n,) flat index of each range's first element
    shift = np.repeat(np.asarray(starts, dtype=np.int64) - begins, lengths)  # (total,)
    return np.arange(total, dtype=np.int64) + shift


# Above this mean run length, copying run by run (a Python loop over slices) beats building
# a per-element index: a slice costs ~1 µs, an index ~6 ns per element (measured).
_SLICE_RUN_LENGTH = 256


def long_runs(lengths: np.ndarray) -> bool:
    """Whether runs of these lengths are faster copied slice by slice than by an index."""
    return len(lengths) > 0 and int(np.sum(lengths)) >= _SLICE_RUN_LENGTH * len(lengths)


def gather_runs(source: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``source[starts[i] : starts[i] + lengths[i]]`` for all i (integers as int64)."""
    dtype = np.int64 if source.dtype.kind in "iu" else source.dtype
    if long_runs(lengths):
        runs = [source[a : a + n] for a, n in zip(starts.tolist(), lengths.tolist())]
        return np.concatenate(runs).astype(dtype, copy=False)
    return source[flat_ranges(starts, lengths)].astype(dtype, copy=False)


def scatter_runs(dest: np.ndarray, starts: np.ndarray, values: np.ndarray, lengths: np.ndarray) -> None:
    """Write consecutive runs of ``values`` to ``dest[starts[i] : starts[i] + lengths[i]]``."""
    if long_runs(lengths):
        taken = 0
        for a, n in zip(starts.tolist(), lengths.tolist()):
            dest[a : a + n] = values[taken : taken + n]
            taken += n
    else:
        dest[flat_ranges(starts, lengths)] = values


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """(n + 1,) int64 offsets of sequences with the given lengths."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


@dataclass
class Ragged:
    """n sequences of int64 token ids: values (total,), offsets (n + 1,)."""

    values: np.ndarray
    offsets: np.ndarray

    @classmethod
    def from_lengths(cls, lengths: np.ndarray) -> "Ragged":
        """Uninitialised storage for sequences of the given lengths (fill it before use)."""
        offsets = _offsets(lengths)
        return cls(np.empty(int(offsets[-1]), dtype=np.int64), offsets)

    @classmethod
    def from_list(cls, sequences) -> "Ragged":
        """From a list of 1-D integer sequences (convenient in tests)."""
        arrays = [np.asarray(s, dtype=np.int64) for s in sequences]
        out = cls.from_lengths(np.array([len(a) for a in arrays], dtype=np.int64))
        if out.values.size:
            out.values[:] = np.concatenate(arrays)
        return out

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def segments(self) -> np.ndarray:
        """(total,) index of the sequence each value belongs to."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.lengths)

    def positions(self) -> np.ndarray:
        """(total,) index of each value inside its sequence."""
        return np.arange(len(self.values), dtype=np.int64) - np.repeat(self.offsets[:-1], self.lengths)

    def fill(self, tokens: np.ndarray, rows: np.ndarray, starts: np.ndarray) -> None:
        """Copy ``tokens[starts[k] : starts[k] + len(row)]`` into each sequence ``rows[k]``."""
        lengths = self.lengths[rows]
        scatter_runs(self.values, self.offsets[rows], gather_runs(tokens, starts, lengths), lengths)

    def slice(self, first: int, stop: int) -> "Ragged":
        """Sequences first … stop - 1 (a view of the values, no copy)."""
        lo, hi = self.offsets[first], self.offsets[stop]
        return Ragged(self.values[lo:hi], self.offsets[first : stop + 1] - lo)

    def take(self, rows: np.ndarray) -> "Ragged":
        """The sequences ``rows`` (in that order) as a new Ragged."""
        lengths = self.lengths[rows]
        return Ragged(gather_runs(self.values, self.offsets[rows], lengths), _offsets(lengths))


def frame(parts: Ragged, num_parts: int, bos: int, eos: int) -> Ragged:
    """``<s> p1 </s> p2 </s> …`` for every sequence: n·k parts (part-major) → n sequences.

    ``parts`` holds part j of sequence s at index j·n + s. Each output is
    1 + Σ_j (len(p_j) + 1) long: a ``</s>`` follows every part.
    """
    if num_parts < 1 or len(parts) % num_parts:
        raise ValueError(f"{len(parts)} parts cannot be split into sequences of {num_parts} parts each")
    n = len(parts) // num_parts
    part_lengths = parts.lengths.reshape(num_parts, n)  # (k, n)
    out = Ragged.from_lengths(1 + (part_lengths + 1).sum(axis=0))
    # Where each part starts in the output: after <s> and the previous parts with their </s>.
    before = np.cumsum(part_lengths + 1, axis=0) - (part_lengths + 1)  # (k, n)
    cursor = (out.offsets[:-1] + 1 + before).reshape(-1)  # (k·n,) part-major like `parts`
    out.values[flat_ranges(cursor, parts.lengths)] = parts.values
    out.values[cursor + parts.lengths] = eos
    out.values[out.offsets[:-1]] = bos
    return out
