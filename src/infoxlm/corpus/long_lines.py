"""Lines too long to tokenize whole: cut at spaces into pieces of a bounded length first.

A line longer than ``LONG_LINE_CHARS_PER_TOKEN`` characters per allowed token (8,192
characters at the default 512) is cut into pieces of at most that many characters before it
is tokenized, so one huge line costs no more memory than the same text as many lines;
shorter lines are tokenized whole. A monolingual line's pieces become consecutive lines of
its document; a parallel side keeps its first piece only (it is truncated anyway).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["LONG_LINE_CHARS_PER_TOKEN", "cut_long_line", "first_piece", "split_by_bytes"]

# A line of more than this many characters per allowed token is cut into pieces of at most
# that many characters before tokenizing. No piece of an XLM-R vocabulary is longer than 16
# characters, so such a line has more tokens than allowed and would be split anyway.
LONG_LINE_CHARS_PER_TOKEN = 16


def cut_long_line(text: str, max_chars: int) -> list[str]:
    """``text`` in pieces of at most ``max_chars`` characters, cut at a space where one is in
    the second half of a piece (the space is dropped), else before a character that is not a
    combining mark. Pieces that hold only spaces are left out.

    >>> cut_long_line("aaaa bbbb cc", 6)
    ['aaaa', 'bbbb', 'cc']
    """
    pieces: list[str] = []
    start = 0
    while len(text) - start > max_chars:
        end = start + max_chars
        space = text.rfind(" ", start + max_chars // 2, end + 1)
        if space > start:
            pieces.append(text[start:space])
            start = space + 1
            continue
        while end > start + 1 and unicodedata.combining(text[end]):
            end -= 1  # keep a base character with its marks
        pieces.append(text[start:end])
        start = end
    pieces.append(text[start:])
    return [piece for piece in pieces if piece.strip()]


def first_piece(text: str, max_chars: int) -> str:
    """The first piece :func:`cut_long_line` would make of ``text`` (all of it if short)."""
    if len(text) <= max_chars:
        return text
    pieces = cut_long_line(text[: 2 * max_chars], max_chars)
    return pieces[0] if pieces else text[:max_chars]


# Where a sentence ends: after . ! ? … (and the Greek question mark ";", Arabic "؟", Devanagari
# "।") followed by spaces, or right after a CJK full stop, question or exclamation mark.
_SENTENCE_END = re.compile(r"(?<=[.!?;…؟।])\s+|(?<=[。！？])")


def split_by_bytes(text: str, max_bytes: int) -> list[str]:
    """``text`` in pieces of at most ``max_bytes`` UTF-8 bytes: whole sentences, as many to a
    piece as fit (joined by a space); a longer sentence cut between words, a longer word between
    characters (never before a combining mark). Text that fits is returned whole.

    >>> split_by_bytes("Ένα. Δύο τρία. Τέσσερα!", 20)
    ['Ένα.', 'Δύο τρία.', 'Τέσσερα!']
    """
    if len(text.encode("utf-8")) <= max_bytes:
        return [text]
    words = lambda sentence: _pack(sentence.split(), max_bytes, lambda word: _cut_word(word, max_bytes))  # noqa: E731
    return _pack(_SENTENCE_END.split(text), max_bytes, words)


def _pack(units: list[str], max_bytes: int, split_unit) -> list[str]:
    """Consecutive ``units`` joined by spaces into pieces of at most ``max_bytes`` bytes; a unit
    longer than that is cut by ``split_unit`` and its parts stand alone."""
    pieces: list[str] = []
    current: list[str] = []
    size = -1  # bytes of " ".join(current)
    for unit in filter(None, (unit.strip() for unit in units)):
        length = len(unit.encode("utf-8"))
        if current and (length > max_bytes or size + 1 + length > max_bytes):
            pieces.append(" ".join(current))
            current, size = [], -1
        if length > max_bytes:
            pieces.extend(split_unit(unit))
            continue
        current.append(unit)
        size += 1 + length
    if current:
        pieces.append(" ".join(current))
    return pieces


def _cut_word(word: str, max_bytes: int) -> list[str]:
    """A word longer than ``max_bytes`` bytes, cut between characters into pieces under it: a
    combining mark stays with its base character unless the two alone overflow a piece."""
    pieces: list[str] = []
    start = base = size = 0  # base: where the latest character that is not a combining mark is
    for i, char in enumerate(word):
        length = len(char.encode("utf-8"))
        if size + length > max_bytes:
            cluster = len(word[base:i].encode("utf-8")) + length
            cut = base if start < base and unicodedata.combining(char) and cluster <= max_bytes else i
            pieces.append(word[start:cut])
            start, size = cut, len(word[cut:i].encode("utf-8"))
        if not unicodedata.combining(char):
            base = i
        size += length
    pieces.append(word[start:])
    return pieces
