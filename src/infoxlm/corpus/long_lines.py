"""Lines too long to tokenize whole: cut at spaces into pieces of a bounded length first.

A line longer than ``LONG_LINE_CHARS_PER_TOKEN`` characters per allowed token (8,192
characters at the default 512) is cut into pieces of at most that many characters before it
is tokenized, so one huge line costs no more memory than the same text as many lines;
shorter lines are tokenized whole. A monolingual line's pieces become consecutive lines of
its document; a parallel side keeps its first piece only (it is truncated anyway).
"""

from __future__ import annotations

import unicodedata

__all__ = ["LONG_LINE_CHARS_PER_TOKEN", "cut_long_line", "first_piece"]

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
