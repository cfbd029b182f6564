"""Tests for infoxlm.corpus.text_files: plain and compressed files, blocks, line numbers, bad bytes."""

from __future__ import annotations

import bz2
import doctest
import gzip
import lzma

import pytest
import zstandard

import infoxlm.corpus.text_files
from infoxlm.corpus.text_files import (
    COMPRESSION_SUFFIXES,
    count_all_lines,
    count_text_lines,
    iter_line_blocks,
    iter_lines,
    read_text_lines,
)
from infoxlm.errors import DataError

TEXT = "Hallo Welt.\n\nСъешь же ещё.\n  \n猫睡在沙发上。\r\nlast line without newline"
LINES = ["Hallo Welt.", "", "Съешь же ещё.", "  ", "猫睡在沙发上。", "last line without newline"]

COMPRESSORS = {
    "": lambda data: data,
    ".gz": gzip.compress,
    ".xz": lzma.compress,
    ".bz2": bz2.compress,
    ".zst": lambda data: zstandard.ZstdCompressor().compress(data),
}


def write(path, data: bytes):
    path.write_bytes(COMPRESSORS[path.suffix if path.suffix in COMPRESSORS else ""](data))
    return path


def test_every_compression_suffix_is_supported():
    assert set(COMPRESSION_SUFFIXES) == {".gz", ".xz", ".lzma", ".bz2", ".zst"}


@pytest.mark.parametrize("suffix", list(COMPRESSORS))
def test_lines_are_the_same_for_every_format(tmp_path, suffix):
    path = write(tmp_path / f"de.txt{suffix}", TEXT.encode())
    assert list(iter_lines(path)) == list(enumerate(LINES, start=1))
    # bytes_read adds up to the size on disk (compressed bytes for compressed files).
    blocks = list(iter_line_blocks(path, block_bytes=16))
    assert sum(block.bytes_read for block in blocks) == path.stat().st_size


def test_zstd_file_of_several_frames(tmp_path):
    path = tmp_path / "x.txt.zst"
    compressor = zstandard.ZstdCompressor()
    path.write_bytes(compressor.compress(b"one\ntwo\n") + compressor.compress(b"three\n"))
    assert [text for _, text in iter_lines(path)] == ["one", "two", "three"]


@pytest.mark.parametrize("block_bytes", [1, 2, 3, 5, 7, 64, 1 << 20])
def test_block_size_never_changes_the_lines(tmp_path, block_bytes):
    path = write(tmp_path / "de.txt", ("\ufeff" + TEXT).encode())
    blocks = list(iter_line_blocks(path, block_bytes=block_bytes))
    lines = [line for block in blocks for line in block.lines]
    assert lines == LINES  # the byte-order mark is gone, \r\n is a line break
    # Line numbers continue from block to block.
    expected_first = 1
    for block in blocks:
        assert block.first_line == expected_first and block.lines
        expected_first += len(block.lines)


def test_line_breaks_and_empty_files(tmp_path):
    assert list(iter_lines(write(tmp_path / "empty.txt", b""))) == []
    assert list(iter_lines(write(tmp_path / "nl.txt", b"\n"))) == [(1, "")]
    assert list(iter_lines(write(tmp_path / "two.txt", b"a\n\n"))) == [(1, "a"), (2, "")]
    # Only "\n" ends a line: form feed and Unicode separators stay inside it.
    assert list(iter_lines(write(tmp_path / "ff.txt", "a\fb\u2028c\x85d\n".encode()))) == [(1, "a\fb\u2028c\x85d")]
    assert list(iter_lines(write(tmp_path / "cr.txt", b"a\r\nb\r"))) == [(1, "a"), (2, "b")]


def test_invalid_utf8_names_file_line_and_byte(tmp_path):
    path = write(tmp_path / "bad.txt", "erste\nzweite\n".encode() + b"caf\xe9 au lait\nok\n")
    with pytest.raises(DataError, match=r"bad\.txt:3: invalid UTF-8 at byte 4 \(0xe9\); expected UTF-8 text"):
        list(iter_lines(path))
    # The same line number whatever the blocks, and in a compressed file.
    gz = write(tmp_path / "bad.txt.gz", b"a\nb\n\xffc\n")
    with pytest.raises(DataError, match=r"bad\.txt\.gz:3: invalid UTF-8 at byte 1 \(0xff\)"):
        list(iter_line_blocks(gz, block_bytes=2))
    # The byte-order mark counts as the first line's first three bytes.
    bom = write(tmp_path / "bom.txt", b"\xef\xbb\xbfab\xc3\n")
    with pytest.raises(DataError, match=r"bom\.txt:1: invalid UTF-8 at byte 6"):
        list(iter_lines(bom))


def test_skip_invalid_hands_over_none(tmp_path):
    path = write(tmp_path / "bad.txt", b"good\n\xff\xfe\nalso good\n")
    lines = [line for block in iter_line_blocks(path, skip_invalid=True) for line in block.lines]
    assert lines == ["good", None, "also good"]


def test_unreadable_inputs(tmp_path):
    with pytest.raises(DataError, match=r"nope\.txt: no such file"):
        list(iter_lines(tmp_path / "nope.txt"))
    with pytest.raises(DataError, match="is a directory"):
        list(iter_lines(tmp_path))
    truncated = tmp_path / "cut.txt.gz"
    text = "".join(f"line {i * 7919 % 10007}\n" for i in range(5000)).encode()
    truncated.write_bytes(gzip.compress(text)[:2000])
    with pytest.raises(DataError, match=r"cut\.txt\.gz: truncated: .*expected a complete \.gz file"):
        list(iter_lines(truncated))
    damaged = tmp_path / "bad.txt.gz"
    damaged.write_bytes(b"this is not gzip data\n")
    with pytest.raises(DataError, match=r"bad\.txt\.gz:1: cannot read .*expected an intact file"):
        list(iter_lines(damaged))


def test_counting_helpers(tmp_path):
    path = write(tmp_path / "de.txt.xz", TEXT.encode())
    assert count_all_lines(path) == 6
    assert count_all_lines(write(tmp_path / "e.txt", b"")) == 0
    assert count_all_lines(write(tmp_path / "f.txt", b"x\n\xff\n")) == 2  # no decoding: never an error
    assert count_text_lines(path) == 4
    nfd = write(tmp_path / "nfd.txt", "Cafe\u0301\n\n".encode())
    assert list(read_text_lines(nfd)) == [(1, "Café")]


def test_docstring_example():
    assert doctest.testmod(infoxlm.corpus.text_files).failed == 0
