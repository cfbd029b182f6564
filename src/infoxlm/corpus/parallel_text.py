"""Reading translation pairs: two line-aligned files, or one two-column TSV file.

Both readers yield :class:`PairBlock` s -- runs of pairs with ``src[i]`` translating
``tgt[i]`` -- built on :func:`~infoxlm.corpus.text_files.iter_line_blocks`, so they stream
compressed files and report bad input by file and line. A side is ``None`` when its line
is not valid UTF-8 and the reader was asked to skip such lines.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from infoxlm.corpus.long_lines import LongLines
from infoxlm.corpus.text_files import DEFAULT_BLOCK_BYTES, count_all_lines, iter_line_blocks
from infoxlm.errors import DataError

__all__ = ["PairBlock", "read_aligned_pairs", "read_tsv_pairs"]


@dataclass
class PairBlock:
    """Consecutive pairs: ``src[i]`` translates ``tgt[i]``; ``bytes_read`` is for progress."""

    src: list[str | None]
    tgt: list[str | None]
    bytes_read: int


def read_aligned_pairs(
    src_path: Path,
    tgt_path: Path,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    skip_invalid: bool = False,
    line_range: tuple[int, int | None] | None = None,
    long_lines: LongLines | None = None,
) -> Iterator[PairBlock]:
    """Read two files in lockstep: line i of one pairs with line i of the other.

    ``line_range=(start, stop)`` reads only lines ``[start, stop)`` of both (0-based;
    ``stop`` None: to the end, where the line counts are compared). ``long_lines`` cuts a
    side longer than it to its start, the rest never held.

    The files' blocks end at different lines, so lines wait in a buffer until the other
    side has them too. Whether the files have equally many lines is known only when the
    first one ends; then both are counted in full for the error message.

    Raises:
        DataError: the files have different numbers of lines (naming both files and both
            counts), or any error of :func:`iter_line_blocks`.
    """
    readers = [
        iter_line_blocks(path, block_bytes, skip_invalid, line_range=line_range, long_lines=long_lines)
        for path in (src_path, tgt_path)
    ]
    buffers: list[list[str | None]] = [[], []]
    try:
        while True:
            bytes_read = 0
            for side in (0, 1):
                if not buffers[side]:
                    block = next(readers[side], None)
                    if block is not None:
                        buffers[side].extend(block.lines)
                        bytes_read += block.bytes_read
            n = min(len(buffers[0]), len(buffers[1]))
            if n:
                yield PairBlock(buffers[0][:n], buffers[1][:n], bytes_read)
                del buffers[0][:n], buffers[1][:n]
            elif not buffers[0] and not buffers[1]:  # both files ended on the same line
                return
            else:  # an empty buffer after a refill means its file has ended first
                src_count, tgt_count = count_all_lines(src_path), count_all_lines(tgt_path)
                raise DataError(
                    f"{src_path} has {src_count:,} lines but {tgt_path} has {tgt_count:,}; "
                    "expected line-aligned translations (line i of one translates line i of the other)"
                )
    finally:
        for reader in readers:
            reader.close()


# Column names a TSV's first line may hold (what pandas and most exports write), beside the
# pair's language codes: a first line of two such names is a header, never a pair.
HEADER_NAMES = frozenset({"src", "tgt", "source", "target", "text", "translation", "sentence1", "sentence2"})


def is_header(line: str, languages: tuple[str, ...]) -> bool:
    """Whether a TSV's first line names its columns (``en<TAB>de``, ``source<TAB>target``)."""
    columns = [c.strip().lower() for c in line.split("\t")]
    names = HEADER_NAMES | {language.lower() for language in languages}
    return len(columns) == 2 and all(c in names for c in columns)


def read_tsv_pairs(
    path: Path, block_bytes: int = DEFAULT_BLOCK_BYTES, skip_invalid: bool = False,
    languages: tuple[str, ...] = (), **part,
) -> Iterator[PairBlock]:
    """Read ``source<TAB>target`` lines; a blank line becomes a pair of two empty sides. A
    first line that names the columns (:func:`is_header`, ``languages`` being the pair's) is
    passed over.

    ``part`` (``byte_range`` or ``line_range``) reads a part of the file, as
    :func:`iter_line_blocks` does.

    Raises:
        DataError: a line that is not blank and does not have exactly two columns
            (``FILE:LINE: N tab-separated columns``), or any error of :func:`iter_line_blocks`.
    """
    for block in iter_line_blocks(path, block_bytes, skip_invalid, **part):
        src: list[str | None] = []
        tgt: list[str | None] = []
        for number, line in enumerate(block.lines, start=block.first_line):
            if line is None:
                src.append(None)
                tgt.append(None)
                continue
            columns = line.split("\t")
            if number == 1 and is_header(line, languages):
                continue
            if len(columns) == 2:
                src.append(columns[0])
                tgt.append(columns[1])
            elif not line.strip():
                src.append("")
                tgt.append("")
            else:
                raise DataError(
                    f"{block.where(number)}: {len(columns)} tab-separated columns; expected 2 (source<TAB>target)"
                )
        yield PairBlock(src, tgt, block.bytes_read)
