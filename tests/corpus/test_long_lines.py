"""Tests for infoxlm.corpus.long_lines and the bound it puts on every text reader: a line over
the bound is cut to its start or handed over in pieces while it is read, the same whatever the
block size, and never held whole."""

from __future__ import annotations

import io
import random
import tracemalloc

import pytest

from infoxlm.corpus.long_lines import LongLines, cut_long_line, take_pieces, utf8_head
from infoxlm.corpus.text_files import iter_line_blocks, iter_stream_blocks
from infoxlm.errors import DataError

CHARACTERS = ["a", "b", " ", " ", "é", "\u0301", "ω", "猫", "😀", "\t", "\r"]


def random_lines(rng: random.Random, count: int) -> list[str]:
    """Lines of 0 to 5,000 characters of 1 to 4 bytes, combining marks, tabs and lone \\r."""
    lengths = [rng.choice([0, 1, 5, 30, 200, 1000, 5000]) for _ in range(count)]
    return ["".join(rng.choices(CHARACTERS, k=n)).rstrip("\r") for n in lengths]


def read(path, bound: LongLines, block_bytes: int, skip_invalid: bool = False) -> tuple[list, list[bool], int]:
    """(entries, continued flags, lines cut) of the whole file."""
    blocks = list(iter_line_blocks(path, block_bytes, skip_invalid, long_lines=bound))
    entries = [entry for block in blocks for entry in block.lines]
    continued = [flag for block in blocks for flag in (block.continued or [False] * len(block.lines))]
    return entries, continued, sum(block.cut for block in blocks)


def expected(lines: list[str], bound: LongLines) -> tuple[list[str], list[bool], int]:
    """What reading each line whole and then cutting it gives."""
    limit, entries, continued = bound.max_chars, [], []
    for line in lines:
        if not bound.split or len(line) <= limit:
            pieces = [line[:limit]]
        else:
            pieces = cut_long_line(line, limit) or [line[:limit]]
        entries += pieces
        continued += [True] * (len(pieces) - 1) + [False]
    return entries, continued, sum(len(line) > limit for line in lines)


def test_take_pieces_cuts_text_that_comes_in_parts_as_if_it_came_whole():
    rng = random.Random(0)
    for _ in range(200):
        text = random_lines(rng, 1)[0] + "x"
        limit = rng.choice([2, 7, 40])
        pieces, rest, head = [], "", 0
        while head < len(text):
            step = rng.randint(1, 300)
            more, rest = take_pieces(rest + text[head : head + step], limit)
            pieces += more
            head += step
        assert pieces + ([rest] if rest.strip() else []) == cut_long_line(text, limit)


def test_utf8_head_keeps_whole_characters_only():
    data = "aé猫😀".encode()
    assert [utf8_head(data[:n]) for n in range(len(data) + 1)] == [
        b"", b"a", b"a", b"a\xc3\xa9", b"a\xc3\xa9", b"a\xc3\xa9", "aé猫".encode(), "aé猫".encode(),
        "aé猫".encode(), "aé猫".encode(), data,
    ]  # fmt: skip
    assert utf8_head(b"ab\r") == b"ab" and utf8_head(b"\x80\x80\x80\x80") == b"\x80\x80\x80\x80"


@pytest.mark.parametrize("split", [False, True], ids=["cut", "pieces"])
def test_long_lines_read_in_any_block_size_are_cut_as_when_read_whole(tmp_path, split):
    rng = random.Random(int(split))
    for trial in range(60):
        lines = random_lines(rng, rng.randint(1, 6))
        newline = rng.choice(["\n", "\r\n"])
        text = ("\ufeff" if trial % 5 == 0 else "") + newline.join(lines) + newline
        path = tmp_path / "lines.txt"
        path.write_bytes(text.encode())
        bound = LongLines(rng.choice([3, 10, 50, 300]), split)
        for block_bytes in (1, 7, 64, 1 << 16):
            entries, continued, cut = read(path, bound, block_bytes)
            want_entries, want_continued, want_cut = expected(lines, bound)
            assert entries == want_entries and cut == want_cut, (trial, block_bytes)
            assert continued == want_continued or not split


def test_lines_keep_their_numbers_and_pieces_name_their_line(tmp_path):
    path = tmp_path / "de.txt"
    path.write_text("kurz\n" + "wort " * 100 + "\nnoch eine Zeile\n" + "x" * 30 + "\n", encoding="utf-8")
    cut = list(iter_line_blocks(path, 8, long_lines=LongLines(20)))
    numbered = [(block.first_line + i, line) for block in cut for i, line in enumerate(block.lines)]
    assert numbered == [(1, "kurz"), (2, "wort " * 4), (3, "noch eine Zeile"), (4, "x" * 20)]
    assert sum(block.cut for block in cut) == 2
    pieces = [(block.first_line, block.lines) for block in iter_line_blocks(path, 8, long_lines=LongLines(20, True))]
    firsts = [first for first, lines in pieces if "wort" in " ".join(lines)]
    assert len(firsts) > 1 and set(firsts) == {2}  # one line, read in several blocks


def test_invalid_utf8_past_a_cut_is_never_read_and_before_it_is_named(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\n" + b"a" * 200 + b"\xff" + b"b" * 50 + b"\n" + b"ab\xffc" + b"d" * 300 + b"\n")
    for block_bytes in (1, 16, 4096):
        lines = [line for block in iter_line_blocks(path, block_bytes, True, long_lines=LongLines(10)) for line in block.lines]
        assert lines == ["ok", "a" * 10, None]
        with pytest.raises(DataError, match=r"bad\.txt:3: invalid UTF-8 at byte 3 \(0xff\)"):
            list(iter_line_blocks(path, block_bytes, long_lines=LongLines(10)))
        with pytest.raises(DataError, match=r"bad\.txt:2: invalid UTF-8 at byte 201 \(0xff\)"):
            list(iter_line_blocks(path, block_bytes, long_lines=LongLines(10, split=True)))


def test_a_line_in_pieces_that_holds_invalid_utf8_keeps_its_pieces_and_ends_invalid(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"word " * 40 + b"\xff" + b" more" * 40 + b"\nab\xffcd\n")
    for block_bytes in (1, 16, 4096):
        entries, continued, cut = read(path, LongLines(30, split=True), block_bytes, skip_invalid=True)
        assert entries[-2:] == [None, None] and continued[-3:] == [True, False, False] and cut == 0
        assert " ".join(entries[:-2]).split() == (b"word " * 40 + b" more" * 40).decode().split()


def test_standard_input_reads_as_a_file_does(tmp_path):
    text = ("eins\n" + "zwei " * 3000 + "\r\ndrei").encode()
    (tmp_path / "in.txt").write_bytes(text)
    bound = LongLines(100)
    blocks = list(iter_stream_blocks(io.BytesIO(text), "<stdin>", 512, long_lines=bound))
    assert [b.lines for b in blocks] == [b.lines for b in iter_line_blocks(tmp_path / "in.txt", 512, long_lines=bound)]
    assert sum(b.bytes_read for b in blocks) == len(text) and blocks[0].path.name == "<stdin>"


@pytest.mark.parametrize("split", [False, True], ids=["cut", "pieces"])
def test_a_20_mb_line_is_never_held_whole(tmp_path, split):
    path = tmp_path / "one-line.txt"
    path.write_bytes(b"short\n" + b"ein Wort " * 2_300_000 + b"\nlast\n")
    bound = LongLines.for_tokens(512, split)  # 32,768 characters
    tracemalloc.start()
    try:
        entries = cut = 0
        for block in iter_line_blocks(path, 1 << 20, long_lines=bound):
            entries, cut = entries + len(block.lines), cut + block.cut
            assert max(map(len, block.lines)) <= bound.max_chars
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert cut == 1 and (entries > 20_700_000 // bound.max_chars if split else entries == 3)
    assert peak < 8 * (1 << 20), peak  # a few blocks of 1 MiB, never the 20 MB line
