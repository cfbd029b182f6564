"""Which part of a corpus's input one shard of ``infoxlm prepare --shard I/N`` reads.

N machines (or the tasks of a SLURM array) each prepare one part of the same input into a
store of their own; ``infoxlm prepare merge`` (:mod:`~infoxlm.corpus.merge`) joins the parts
into the corpus one prepare of the whole input gives. The input is the concatenation of the
input files in the order given, and shard I reads the I-th of N consecutive parts of it:

* ``files`` -- at least N files: each part is a run of whole files, the runs balanced by
  bytes (every part gets at least one file);
* ``bytes`` -- fewer files than parts, none compressed: part I covers the bytes
  [I·S/N, (I+1)·S/N) of the concatenation (S bytes in all), each end moved forward to the
  next line start, so every line belongs to exactly one part; a shard seeks to its part and
  reads only its own bytes;
* ``lines`` -- fewer files than parts, some compressed (a compressed stream cannot be
  entered in the middle): part I covers the lines [I·L/N, (I+1)·L/N) of the concatenation
  (L lines in all); every shard decompresses its files up to its part's end, counting the
  lines before it without decoding them.

Two line-aligned files (``prepare parallel --src/--tgt``) are split by line ranges, the same
on both sides (:func:`plan_aligned_shard`).

A part may end up empty (a line longer than S/N bytes spans several boundaries); its shard
then holds an empty corpus, which the merge skips.

Example::

    >>> parse_shard("3/8")
    (3, 8)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infoxlm.corpus.text_files import COMPRESSION_SUFFIXES, count_all_lines
from infoxlm.errors import DataError

__all__ = ["FilePart", "ShardPlan", "check_shard", "parse_shard", "plan_aligned_shard", "plan_shard"]

SPLITS = ("files", "bytes", "lines")


@dataclass(frozen=True)
class FilePart:
    """The part of one input file a shard reads: all of it, a byte range or a line range."""

    path: Path
    byte_range: tuple[int, int] | None = None  # [start, stop) of an uncompressed file, at line starts
    line_range: tuple[int, int | None] | None = None  # [start, stop) 0-based lines; None: to the end
    starts_file: bool = True  # the part begins where the file begins (a document boundary)
    ends_file: bool = True  # the part reaches the file's end (a document boundary)

    @property
    def whole(self) -> bool:
        return self.starts_file and self.ends_file

    def read_options(self) -> dict[str, Any]:
        """Keyword arguments of :func:`~infoxlm.corpus.text_files.iter_line_blocks` for this part."""
        if self.byte_range is not None:
            return {"byte_range": self.byte_range}
        if self.line_range is not None:
            return {"line_range": self.line_range}
        return {}

    def describe(self) -> dict[str, Any]:
        """This part for meta.json."""
        described: dict[str, Any] = {"path": str(self.path.resolve())}
        if self.byte_range is not None:
            described["bytes"] = list(self.byte_range)
        if self.line_range is not None:
            described["lines"] = list(self.line_range)
        return described


@dataclass(frozen=True)
class ShardPlan:
    """Shard ``index`` of ``count``: the file parts it reads, in input order."""

    index: int
    count: int
    split: str  # one of SPLITS
    parts: tuple[FilePart, ...]

    def meta(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "count": self.count,
            "split": self.split,
            "parts": [part.describe() for part in self.parts],
        }


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` as ``(I, N)``, checked by :func:`check_shard`.

    Raises:
        DataError: not two integers separated by ``/``, or out of range.
    """
    index, slash, count = str(text).strip().partition("/")
    if not slash or not index.strip().isdigit() or not count.strip().isdigit():
        raise DataError(f"--shard {text}: expected I/N, two integers with 0 <= I < N (e.g. 0/4)")
    return check_shard((int(index), int(count)))


def check_shard(shard: tuple[int, int]) -> tuple[int, int]:
    """``shard`` as ``(index, count)`` if 0 <= index < count, else a DataError."""
    try:
        index, count = shard
    except (TypeError, ValueError):
        raise DataError(f"shard={shard!r} is invalid; expected (index, count) with 0 <= index < count") from None
    if any(isinstance(v, bool) or not isinstance(v, int) for v in (index, count)) or not 0 <= index < count:
        raise DataError(
            f"--shard {index}/{count} is out of range; expected I/N with 0 <= I < N (e.g. 0/{max(count, 2)})"
        )
    return index, count


def plan_shard(paths: Sequence[Path], shard: tuple[int, int]) -> ShardPlan:
    """The parts of ``paths`` (concatenated in order) that shard ``(index, count)`` reads."""
    index, count = check_shard(shard)
    paths = [Path(p) for p in paths]
    if count <= len(paths):
        return _plan_files(paths, index, count)
    if not any(path.suffix.lower() in COMPRESSION_SUFFIXES for path in paths):
        sizes = [path.stat().st_size for path in paths]
        bounds = [_next_line_start(paths, sizes, k * sum(sizes) // count) for k in range(count + 1)]
        return ShardPlan(index, count, "bytes", _parts(paths, sizes, bounds, index, "byte_range"))
    sizes = [count_all_lines(path) for path in paths]
    bounds = [k * sum(sizes) // count for k in range(count + 1)]
    return ShardPlan(index, count, "lines", _parts(paths, sizes, bounds, index, "line_range"))


def plan_aligned_shard(src: Path, tgt: Path, shard: tuple[int, int]) -> ShardPlan:
    """The line range of two line-aligned files that shard ``(index, count)`` reads: the
    same on both sides, from the source file's line count; the last shard reads to the end
    (where a difference in line counts is found)."""
    index, count = check_shard(shard)
    total = count_all_lines(src) if count > 1 else 0
    start = index * total // count
    stop = None if index == count - 1 else (index + 1) * total // count
    if count == 1:
        return ShardPlan(index, count, "lines", (FilePart(src), FilePart(tgt)))
    parts = tuple(
        FilePart(path, line_range=(start, stop), starts_file=start == 0, ends_file=stop is None) for path in (src, tgt)
    )
    return ShardPlan(index, count, "lines", parts)


def _plan_files(paths: list[Path], index: int, count: int) -> ShardPlan:
    """Runs of whole files: boundary k falls before the first file whose middle lies past
    k/count of all bytes, kept so that every run has at least one file."""
    sizes = [path.stat().st_size for path in paths]
    total = sum(sizes)
    middles, before = [], 0
    for size in sizes:
        middles.append(before + size / 2)
        before += size
    bounds = [0]
    for k in range(1, count):
        bound = sum(1 for middle in middles if middle < k * total / count)
        bounds.append(min(max(bound, bounds[-1] + 1), len(paths) - (count - k)))
    bounds.append(len(paths))
    return ShardPlan(index, count, "files", tuple(FilePart(p) for p in paths[bounds[index] : bounds[index + 1]]))


def _next_line_start(paths: list[Path], sizes: list[int], position: int) -> int:
    """``position`` in the concatenation of ``paths``, moved forward to the next line start
    (a file's start, a byte after ``\\n``, or the file's end)."""
    before = 0
    for path, size in zip(paths, sizes):
        if position < before + size:
            offset = position - before
            if offset == 0:
                return position
            with open(path, "rb") as file:
                file.seek(offset - 1)
                while chunk := file.read(1 << 16):
                    found = chunk.find(b"\n")
                    if found >= 0:
                        return before + offset + found
                    offset += len(chunk)
            return before + size
        before += size
    return before


def _parts(
    paths: list[Path], sizes: list[int], bounds: list[int], index: int, kind: str
) -> tuple[FilePart, ...]:
    """The file parts of [bounds[index], bounds[index + 1]) of the concatenation, where file
    f spans [sum(sizes[:f]), sum(sizes[:f + 1])) in bytes or lines (as ``kind`` says)."""
    low, high = bounds[index], bounds[index + 1]
    last = index == len(bounds) - 2
    parts, before = [], 0
    for path, size in zip(paths, sizes):
        start, stop = max(low, before), min(high, before + size)
        # An empty file belongs to the part its position falls in (the last part: the end).
        empty_here = size == 0 and (low <= before < high or (last and before == high))
        if start < stop or empty_here:
            starts_file, ends_file = start == before, stop == before + size or empty_here
            if starts_file and ends_file:
                parts.append(FilePart(path))
            else:
                span = {kind: (start - before, stop - before)}
                parts.append(FilePart(path, **span, starts_file=starts_file, ends_file=ends_file))
        before += size
    return tuple(parts)
