"""Reading raw UTF-8 text files, plain or compressed, line by line or block by block.

One implementation serves every reader of raw text (tokenizer training, ``infoxlm prepare``):

* compression is recognised by suffix: ``.gz``, ``.xz`` / ``.lzma``, ``.bz2`` and ``.zst``
  (Zstandard, through the ``zstandard`` package) are decompressed while streaming; a
  compressed stream that stops before its end marker (a download or copy cut short) is an
  error, ``FILE: truncated …``, never a shorter text;
* a line ends at ``\\n``; a ``\\r`` before it is dropped, and a UTF-8 byte-order mark at the
  start of the file is not text;
* invalid UTF-8 is reported as ``FILE:LINE: invalid UTF-8 at byte N (0xHH)`` with N counted
  from 1 within the line, or, when asked, the line is handed over as ``None`` so the caller
  can skip and count it.

Large corpora are read in blocks of a few megabytes (:func:`iter_line_blocks`): a block is
decoded with one ``bytes.decode`` call and split at ``\\n`` (never ``str.splitlines``, which
also splits at form feeds and Unicode line separators), so memory stays flat and Python does
no per-line work unless a block holds invalid UTF-8. :attr:`LineBlock.bytes_read` counts the
bytes taken from the file on disk (compressed bytes for compressed files), so progress over
a file's size is exact. A reader that keeps only so much of a line bounds how much of it is
ever held (:mod:`~infoxlm.corpus.long_lines`): a line of any length costs no more memory
than a block.

A part of a file can be read on its own (one shard of ``infoxlm prepare --shard``): a byte
range of an uncompressed file (seeked to, so a part costs only its own bytes; its line
numbers count from the range's start, and errors say so: ``FILE: line 3 from byte 4096``),
or a range of line numbers of any file (the lines before it are decompressed and skipped
without decoding; errors name the file's own line numbers).

Example::

    >>> import pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "de.txt"
    >>> _ = path.write_bytes("\\ufeffeins\\r\\n\\nzwei\\n".encode())
    >>> list(iter_lines(path))
    [(1, 'eins'), (2, ''), (3, 'zwei')]
    >>> list(read_text_lines(path))
    [(1, 'eins'), (3, 'zwei')]
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import unicodedata
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable

from infoxlm.corpus.byte_streams import Counted, Window, open_zstd
from infoxlm.corpus.long_lines import LineInPieces, LongLines, bound_lines, decode_line, undecodable_line, utf8_head
from infoxlm.errors import DataError, file_error

__all__ = [
    "COMPRESSION_SUFFIXES",
    "read_decompressed",
    "DEFAULT_BLOCK_BYTES",
    "LineBlock",
    "count_all_lines",
    "count_text_lines",
    "iter_line_blocks",
    "iter_lines",
    "iter_stream_blocks",
    "open_binary",
    "open_counted",
    "read_error",
    "read_errors",
    "read_text_lines",
]

PathLike = str | Path

# 2 MiB of raw text per block: large enough that per-block overheads vanish, small enough
# that the few blocks a pipeline holds (text and token ids) fit in tens of megabytes.
DEFAULT_BLOCK_BYTES = 2 * 1024 * 1024
_BOM = b"\xef\xbb\xbf"


# Decompressing readers over an already opened raw file, so the raw file's position tells
# how much of the file on disk has been consumed.
_DECOMPRESSORS: dict[str, Callable[[IO[bytes]], IO[bytes]]] = {
    ".gz": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),
    ".xz": lzma.LZMAFile,
    ".lzma": lzma.LZMAFile,
    ".bz2": bz2.BZ2File,
    ".zst": open_zstd,
}
COMPRESSION_SUFFIXES = tuple(_DECOMPRESSORS)


def _read_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean "the (compressed) file is damaged or unreadable"."""
    errors: list[type[BaseException]] = [OSError, EOFError, lzma.LZMAError, zlib.error]
    try:
        import zstandard

        errors.append(zstandard.ZstdError)
    except ImportError:
        pass
    return tuple(errors)


def _read_error(path: Path, exc: BaseException, line: int | None = None) -> DataError:
    """The one-line error for a file whose (compressed) data cannot be read to its end."""
    where = f"{path}:{line}" if line is not None else str(path)
    if isinstance(exc, EOFError):  # every decompressor's word for "the stream stops early"
        after = f" after line {line - 1}" if line is not None and line > 1 else ""
        return DataError(
            f"{path}: truncated: the compressed data ends before the end of its stream{after}; "
            f"expected a complete {path.suffix} file (was a download or copy cut short?)"
        )
    return DataError(f"{where}: cannot read ({exc}); expected an intact file")


def read_errors() -> tuple[type[BaseException], ...]:
    """What reading a (compressed) file raises when it is damaged or cut short; turn one
    into the one-line message with :func:`read_error`."""
    return _read_errors()


def read_error(path: Path, exc: BaseException, line: int | None = None) -> DataError:
    """The one-line error for ``exc`` (one of :func:`read_errors`) while reading ``path``."""
    return _read_error(path, exc, line)


def _open_raw(path: Path) -> IO[bytes]:
    try:
        return open(path, "rb")
    except OSError as exc:
        raise file_error(path, exc, "a UTF-8 text file", DataError) from None


def open_binary(path: PathLike) -> IO[bytes]:
    """The decompressed bytes of ``path`` (compression chosen by suffix), as a binary stream.

    Raises:
        DataError: the file is missing, a directory or unreadable.
    """
    return open_counted(path)[1]


def open_counted(path: PathLike) -> tuple[IO[bytes], IO[bytes]]:
    """``(raw, stream)``: the file on disk, whose ``tell()`` counts the bytes consumed, and
    its decompressed bytes (``raw`` itself for a plain file); close both.

    Raises:
        DataError: the file is missing, a directory or unreadable.
    """
    path = Path(path)
    raw = _open_raw(path)
    decompressor = _DECOMPRESSORS.get(path.suffix.lower())
    if decompressor is None:
        return raw, raw
    try:
        stream = decompressor(raw)
    except BaseException:
        raw.close()
        raise
    return raw, stream


@dataclass
class LineBlock:
    """Consecutive lines of one file: ``lines[i]`` is line ``first_line + i`` (1-based).

    A line holds its text without the line break; it is ``None`` when it is not valid UTF-8
    and the reader was asked to skip such lines. ``bytes_read`` is how many bytes of the file
    on disk were consumed since the previous block.

    A reader bounded by :class:`~infoxlm.corpus.long_lines.LongLines` cuts a line over the
    bound (``cut`` counts them); one that hands such a line over in pieces sets
    ``continued[i]`` where entry i's line goes on in the next entry, of this block or the next
    (``first_line`` is then the line of ``lines[0]``, and entries are no longer lines).
    """

    path: Path
    first_line: int
    lines: list[str | None]
    bytes_read: int
    origin: int = 0  # the byte offset line 1 is counted from (a byte range's start)
    continued: list[bool] | None = None  # None: every entry is a whole line (or its cut start)
    cut: int = 0  # lines over the bound that end in this block

    def where(self, number: int) -> str:
        """``FILE:LINE`` for line ``number`` of this block's numbering, for error messages."""
        return _where(self.path, number, self.origin)


def _where(path: Path, number: int, origin: int) -> str:
    return f"{path}:{number}" if origin == 0 else f"{path}: line {number} from byte {origin}"


def _invalid_utf8(
    path: Path, first_line: int, body: bytes, position: int, bom_length: int, origin: int = 0, offset: int = 0
) -> DataError:
    """The one-line error for invalid UTF-8 at byte ``position`` of ``body``, whose first line
    began ``offset`` bytes before it (a line read in pieces)."""
    line_index = body.count(b"\n", 0, position)
    line_start = body.rfind(b"\n", 0, position) + 1 - (offset if line_index == 0 else 0)
    column = position - line_start + 1 + (bom_length if first_line + line_index == 1 else 0)
    return DataError(
        f"{_where(path, first_line + line_index, origin)}: invalid UTF-8 at byte {column} "
        f"(0x{body[position]:02x}); expected UTF-8 text"
    )


def _skip_lines(stream: IO[bytes], count: int, block_bytes: int) -> bytes:
    """Read past the first ``count`` line breaks of ``stream`` without decoding anything;
    returns what was read after the last of them (all of the stream ends first: b"")."""
    while count:
        data = stream.read(block_bytes)
        if not data:
            return b""
        found = data.count(b"\n")
        if found < count:
            count -= found
            continue
        cut = -1
        for _ in range(count):
            cut = data.index(b"\n", cut + 1)
        return data[cut + 1 :]
    return b""


def _first_lines(body: bytes, count: int) -> bytes | None:
    """The first ``count`` lines of ``body`` (lines joined by ``\\n``, no final one), or None
    if it has no more than that."""
    cut = -1
    for _ in range(count):
        cut = body.find(b"\n", cut + 1)
        if cut < 0:
            return None
    return body[:cut]


def iter_line_blocks(
    path: PathLike,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    skip_invalid: bool = False,
    *,
    byte_range: tuple[int, int] | None = None,
    line_range: tuple[int, int | None] | None = None,
    long_lines: LongLines | None = None,
) -> Iterator[LineBlock]:
    """Stream a text file as :class:`LineBlock` s of about ``block_bytes`` decompressed bytes.

    Every line of the file appears exactly once, blank lines included; an empty file yields
    nothing. A line longer than ``block_bytes`` makes its block longer, never splits, unless
    ``long_lines`` bounds it: a line over the bound is then cut to its start, its rest read
    past and never held, or handed over in pieces, a block of pieces at a time, so memory
    stays bounded however long the line (:mod:`~infoxlm.corpus.long_lines`).

    ``byte_range=(start, stop)`` reads only bytes ``[start, stop)`` of an uncompressed file;
    both should be line starts (0, a byte after ``\\n``, or the file's size). Its lines are
    numbered from 1 at ``start`` (:attr:`LineBlock.origin` says where that is).
    ``line_range=(start, stop)`` reads only lines ``[start, stop)`` (0-based; ``stop`` None:
    to the end) of any file, numbered as in the whole file.

    Raises:
        DataError: missing or unreadable file, damaged compressed data (``FILE:LINE: cannot
            read``), or invalid UTF-8 (``FILE:LINE: invalid UTF-8 at byte N``) unless
            ``skip_invalid``, in which case such lines come back as ``None``.
        ValueError: a byte range of a compressed file, or with a line range.
    """
    path = Path(path)
    decompressor = _DECOMPRESSORS.get(path.suffix.lower())
    if byte_range is not None and (decompressor is not None or line_range is not None):
        raise ValueError(f"{path}: a byte range needs an uncompressed file and no line range")
    raw = _open_raw(path)
    origin = byte_range[0] if byte_range is not None else 0
    first_line = 1 if line_range is None else line_range[0] + 1
    # Lines to yield (None: all up to the end).
    count = None if line_range is None or line_range[1] is None else max(line_range[1] - line_range[0], 0)
    try:
        stream = decompressor(raw) if decompressor else raw
        with raw, stream:
            reported = 0  # raw bytes already attributed to earlier blocks
            if byte_range is not None:
                raw.seek(origin)
                stream, reported = Window(raw, byte_range[1] - origin), origin
            # What was read past the lines skipped, handled as the first read.
            pending = _skip_lines(stream, first_line - 1, block_bytes) if first_line > 1 else b""
            read = _Read(path, raw, stream, block_bytes, skip_invalid, origin, first_line, count, reported, long_lines)
            yield from read.blocks(pending)
    except _read_errors() as exc:  # the line reached is known inside the read; here, where it began
        raise _read_error(path, exc, first_line) from None


def iter_stream_blocks(
    stream: IO[bytes], name: str, block_bytes: int = DEFAULT_BLOCK_BYTES, *, long_lines: LongLines | None = None
) -> Iterator[LineBlock]:
    """:func:`iter_line_blocks` over an open binary stream (standard input), named ``name`` in
    messages; ``bytes_read`` counts the stream's bytes."""
    counted = Counted(stream)
    yield from _Read(Path(name), counted, counted, block_bytes, False, 0, 1, None, 0, long_lines).blocks(b"")


@dataclass
class _Read:
    """One read of :func:`iter_line_blocks` once the file is open and placed: the stream cut
    into blocks of whole lines, each decoded, numbered and counted in bytes of the file."""

    path: Path
    raw: IO[bytes]  # the file on disk: its position counts the bytes consumed
    stream: IO[bytes]  # its decompressed bytes (or a window of them)
    block_bytes: int
    skip_invalid: bool
    origin: int  # the byte line 1 is counted from
    next_line: int  # the first line not yet yielded
    left: int | None  # lines still to yield (None: all up to the end)
    reported: int  # raw bytes already attributed to earlier blocks
    bound: LongLines | None = None
    # The line being read when it outgrew the bound: cut, its bytes are read past to its end
    # (skipping); in pieces, the line and its bytes decoded so far (for an error's column).
    skipping: bool = False
    line: LineInPieces | None = None
    line_bytes: int = 0

    def blocks(self, pending: bytes) -> Iterator[LineBlock]:
        """The blocks; ``pending`` is handled as the first read. A read error names the line
        reached."""
        try:
            yield from self._blocks(pending)
        except _read_errors() as exc:
            raise _read_error(self.path, exc, self.next_line) from None

    def _blocks(self, pending: bytes) -> Iterator[LineBlock]:
        carry: list[bytes] = []  # the start of a line whose end has not been read yet
        at_start, bom_length = self.origin == 0 and self.next_line == 1, 0
        while self.left != 0:
            if self.bound is not None and carry:
                carry = yield from self._held(carry, bom_length)
            data, pending = pending or self.stream.read(self.block_bytes), b""
            if self.skipping and data:  # the rest of a line cut for its length, never held
                end = data.find(b"\n")
                if end < 0:
                    continue
                data, self.skipping = data[end:], False
            final = not data
            if not final and b"\n" not in data and not at_start:
                carry.append(data)  # no line ends here: keep the pieces, join them once
                continue
            buffer = b"".join(carry) + data if carry else data
            carry = []
            if at_start and (len(buffer) >= len(_BOM) or final or b"\n" in buffer):
                if buffer.startswith(_BOM):
                    buffer, bom_length = buffer[len(_BOM) :], len(_BOM)
                at_start = False
            if final:
                body = buffer
                if not body and self.line is None:
                    break  # (a line read in pieces ends here, its rest already decoded)
            else:
                cut = buffer.rfind(b"\n")
                if cut < 0:  # no complete line yet: keep reading
                    carry = [buffer]
                    continue
                body = buffer[:cut]
                if cut + 1 < len(buffer):
                    carry = [buffer[cut + 1 :]]
            del buffer  # ``body`` is the only copy of the block's lines from here on
            if self.left is not None and (first := _first_lines(body, self.left)) is not None:
                body, final = first, True  # the line range ends inside this block
            if body.endswith(b"\r"):  # the "\r" of the block's last "\r\n" (or of EOF)
                body = body[:-1]
            block = self._block(body, bom_length)
            del body  # the decoded lines are all that is kept while the block is used
            yield block
            if final:
                break

    def _block(self, body: bytes, bom_length: int) -> LineBlock:
        """``body`` (whole lines joined by ``\\n``) decoded as the next block."""
        lines = self._decode(body, bom_length)
        count, continued, cut = len(lines), None, 0
        if self.bound is not None:
            lines, continued, cut = bound_lines(lines, self.bound, self.line)
            self.line, self.line_bytes = None, 0
        position = self.raw.tell()
        block = LineBlock(self.path, self.next_line, lines, position - self.reported, self.origin, continued, cut)
        self.reported = position
        self.next_line += count
        if self.left is not None:
            self.left -= count
        return block

    def _held(self, carry: list[bytes], bom_length: int) -> Generator[LineBlock, None, list[bytes]]:
        """The unfinished line ``carry`` holds, once it outgrows the bound: cut to its first
        bytes (the rest is read past), or its complete pieces handed over as a block."""
        assert self.bound is not None
        if sum(map(len, carry)) <= self.bound.held_bytes:
            return carry
        held = b"".join(carry)
        if not self.bound.split:
            self.skipping = True
            return [utf8_head(held[: self.bound.held_bytes])]
        text = utf8_head(held)
        self.line = self.line or LineInPieces()
        pieces = self.line.feed(self._decode_held(text, bom_length), self.bound.max_chars)
        self.line_bytes += len(text)
        if pieces:
            position = self.raw.tell()
            yield LineBlock(self.path, self.next_line, list(pieces), position - self.reported, self.origin, [True] * len(pieces))
            self.reported = position
        return [held[len(text) :]] if len(text) < len(held) else []

    def _decode_held(self, text: bytes, bom_length: int) -> str:
        """The next part of a line read in pieces, decoded. Invalid UTF-8 raises, or (skipping
        invalid lines) is left out, the line then counted as invalid at its end."""
        try:
            return text.decode("utf-8")
        except UnicodeDecodeError as exc:
            if not self.skip_invalid:
                where = (self.path, self.next_line, text, exc.start, bom_length, self.origin, self.line_bytes)
                raise _invalid_utf8(*where) from None
            return undecodable_line(text, self.bound, whole=True)  # type: ignore[return-value]

    def _decode(self, body: bytes, bom_length: int) -> list[str | None]:
        """A block of whole lines (no final ``\\n``), decoded; a line's first part may have
        been decoded already (``line_bytes``: a line read in pieces)."""
        if b"\r" in body:
            body = body.replace(b"\r\n", b"\n")
        try:
            return body.decode("utf-8").split("\n")  # the fast path: one decode per block
        except UnicodeDecodeError as exc:
            if not self.skip_invalid and self.bound is None:
                raise _invalid_utf8(self.path, self.next_line, body, exc.start, bom_length, self.origin, self.line_bytes) from None
        # Slow path, only for blocks that hold invalid UTF-8: decode line by line (a line a
        # bound cuts only as far as it is read).
        lines: list[str | None] = []
        for index, raw_line in enumerate(body.split(b"\n")):
            try:
                lines.append(decode_line(raw_line, self.bound))
            except UnicodeDecodeError as exc:
                if not self.skip_invalid:
                    offset = self.line_bytes if index == 0 else 0
                    where = (self.path, self.next_line + index, raw_line, exc.start, bom_length, self.origin, offset)
                    raise _invalid_utf8(*where) from None
                lines.append(undecodable_line(raw_line, self.bound, whole=index == 0 and self.line is not None))
        return lines


def iter_lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """``(line_number, text)`` for every line, blank ones included; invalid UTF-8 raises."""
    for block in iter_line_blocks(path):
        yield from enumerate(block.lines, start=block.first_line)  # type: ignore[misc]


def read_text_lines(path: PathLike) -> Iterator[tuple[int, str]]:
    """``(line_number, NFC text)`` for every line that is not blank (whitespace only)."""
    for number, text in iter_lines(path):
        if text.strip():
            yield number, unicodedata.normalize("NFC", text)


def count_text_lines(path: PathLike) -> int:
    """Number of lines that are not blank (validating UTF-8 on the way)."""
    return sum(1 for number, text in iter_lines(path) if text.strip())


def count_all_lines(path: PathLike, block_bytes: int = DEFAULT_BLOCK_BYTES) -> int:
    """Number of lines, blank ones included, counted without decoding (so never an error
    for invalid UTF-8): what :func:`iter_line_blocks` would yield in all."""
    path = Path(path)
    count, last = 0, b""
    try:
        with open_binary(path) as stream:
            while data := stream.read(block_bytes):
                count += data.count(b"\n")
                last = data[-1:]
    except _read_errors() as exc:
        raise _read_error(path, exc) from None
    return count + (1 if last not in (b"", b"\n") else 0)


def read_decompressed(path: PathLike) -> bytes:
    """The whole decompressed content of a (small) file.

    Raises:
        DataError: missing, unreadable, damaged or truncated (``FILE: truncated …``).
    """
    path = Path(path)
    try:
        with open_binary(path) as stream:
            return stream.read()
    except _read_errors() as exc:
        raise _read_error(path, exc) from None
