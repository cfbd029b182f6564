"""Lines too long to read or tokenize whole: cut at spaces into pieces of a bounded length.

* Tokenizing: a line longer than ``LONG_LINE_CHARS_PER_TOKEN`` (16) characters per allowed
  token (8,192 characters at the default 512) has more tokens than allowed with any XLM-R
  vocabulary (no piece spans more than 16 characters); it is cut into pieces of at most that
  many characters (:func:`cut_long_line`) before it is tokenized. A monolingual line's pieces
  become consecutive lines of its document; a parallel side keeps its first piece only (it is
  truncated anyway).
* Reading (:class:`LongLines`, which :mod:`~infoxlm.corpus.text_files` applies while it reads):
  a line over a bound is never held whole. A reader that keeps only a line's start
  (``embed``, ``eval tatoeba``, a side of line-aligned pairs) gets its first
  ``READ_CHARS_PER_TOKEN`` (64) characters per token kept, the rest read past; monolingual
  ``prepare`` gets the line in the pieces above, cut as the line comes (:func:`take_pieces`),
  exactly as if it had been read whole. A sentence averages fewer than 8 characters a token,
  so unless a line is mostly spaces or characters the normaliser drops, what a reader cuts
  lies past the last token kept.

So one huge line costs no more memory than the same text as many lines.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = [
    "LONG_LINE_CHARS_PER_TOKEN",
    "READ_CHARS_PER_TOKEN",
    "InvalidText",
    "LineInPieces",
    "LongLines",
    "bound_lines",
    "cut_long_line",
    "decode_line",
    "first_piece",
    "split_by_bytes",
    "take_pieces",
    "undecodable_line",
    "utf8_head",
]

# A line of more than this many characters per allowed token is cut into pieces of at most
# that many characters before tokenizing. No piece of an XLM-R vocabulary is longer than 16
# characters, so such a line has more tokens than allowed and would be split anyway.
LONG_LINE_CHARS_PER_TOKEN = 16
# A line is read up to this many characters per token kept: four times the bound above, so a
# side of a pair, cut by that bound after cleaning, keeps what it keeps when read whole.
READ_CHARS_PER_TOKEN = 64


@dataclass(frozen=True)
class LongLines:
    """How a reader treats a line of more than ``max_chars`` characters: keeps its first
    ``max_chars`` (``split=False``), or hands it over as pieces of at most that many
    (``split=True``), each but the last marked as continued by the next."""

    max_chars: int
    split: bool = False

    @classmethod
    def for_tokens(cls, max_tokens: int, split: bool = False) -> "LongLines":
        """The bound for a reader that keeps ``max_tokens`` tokens of a line."""
        return cls(READ_CHARS_PER_TOKEN * max_tokens, split)

    @property
    def held_bytes(self) -> int:
        """Bytes of an unfinished line a reader holds before cutting it: more than ``max_chars``
        characters (UTF-8 spends at most 4 bytes on one) even without an unfinished last
        character and a ``\\r``."""
        return 4 * (self.max_chars + 2)


def take_pieces(text: str, max_chars: int) -> tuple[list[str], str]:
    """The pieces :func:`cut_long_line` cuts off the start of ``text`` while more than
    ``max_chars`` characters remain (whitespace-only ones left out), and what remains. Each cut
    looks at no more than ``max_chars + 1`` characters, so text that arrives in parts is cut
    exactly as if it had come whole.

    >>> take_pieces("aaaa bbbb cc", 6)
    (['aaaa', 'bbbb'], 'cc')
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
    return [piece for piece in pieces if piece.strip()], text[start:]


def cut_long_line(text: str, max_chars: int) -> list[str]:
    """``text`` in pieces of at most ``max_chars`` characters, cut at a space where one is in
    the second half of a piece (the space is dropped), else before a character that is not a
    combining mark. Pieces that hold only spaces are left out.

    >>> cut_long_line("aaaa bbbb cc", 6)
    ['aaaa', 'bbbb', 'cc']
    """
    pieces, rest = take_pieces(text, max_chars)
    return pieces + [rest] if rest.strip() else pieces


def first_piece(text: str, max_chars: int) -> str:
    """The first piece :func:`cut_long_line` would make of ``text`` (all of it if short)."""
    if len(text) <= max_chars:
        return text
    pieces = cut_long_line(text[: 2 * max_chars], max_chars)
    return pieces[0] if pieces else text[:max_chars]



def utf8_head(data: bytes) -> bytes:
    """``data`` without an unfinished UTF-8 character at its end, nor a final ``\\r`` (which
    may be the start of a line break): what can be decoded of a line read in parts.

    >>> utf8_head("aé".encode()[:2])
    b'a'
    """
    end = len(data)
    lead = end - 1
    while lead >= max(end - 3, 0) and data[lead] & 0xC0 == 0x80:  # continuation bytes 10xxxxxx
        lead -= 1
    if lead >= 0 and data[lead] >= 0xC0:  # a lead byte: 110xxxxx, 1110xxxx or 11110xxx
        length = 2 if data[lead] < 0xE0 else 3 if data[lead] < 0xF0 else 4
        if end - lead < length:
            end = lead
    if end and data[end - 1] == 0x0D:
        end -= 1
    return data[:end]


@dataclass
class LineInPieces:
    """A line handed over in pieces while it is read: :meth:`feed` takes its text as it comes,
    :meth:`finish` its rest. The pieces are :func:`cut_long_line`'s of the whole line; the last
    one cut is held back until more text shows it is not the line's last."""

    head: str = ""  # decoded, not cut yet: at most max_chars characters between feeds
    held: str | None = None  # the last piece cut, not handed over yet
    over: bool = False  # the line is longer than the bound
    invalid: bool = False  # it held invalid UTF-8, left out of its text

    def feed(self, text: str, max_chars: int) -> list[str]:
        """The pieces that can be handed over now that ``text`` follows what came before."""
        self.invalid |= isinstance(text, InvalidText)
        self.over |= len(self.head) + len(text) > max_chars
        pieces, self.head = take_pieces(self.head + text, max_chars)
        if self.held is not None:
            pieces.insert(0, self.held)
        self.held = pieces.pop() if pieces else None
        return pieces

    def finish(self, text: str, max_chars: int) -> list[str | None]:
        """The line's last pieces, ``text`` being its rest; a line of spaces only stays one
        blank line (at most ``max_chars`` long), and one that held invalid UTF-8 ends with None
        (its pieces are kept if it is over the bound, as :func:`undecodable_line` says)."""
        self.invalid |= isinstance(text, InvalidText)
        rest = self.head + text
        self.over |= len(rest) > max_chars
        pieces = ([] if self.held is None else [self.held]) + cut_long_line(rest, max_chars)
        if self.invalid:
            return [*pieces, None] if self.over else [None]
        return pieces or [rest[:max_chars]]


def bound_lines(
    lines: list[str | None], bound: LongLines, line: LineInPieces | None = None
) -> tuple[list[str | None], list[bool] | None, int]:
    """A block's decoded lines with every line over ``bound`` cut or in pieces: the entries,
    ``continued`` (``entries[i]``'s line goes on in the next entry; None when no line was cut
    into pieces) and how many lines over the bound end in this block. ``line``: the first
    line, read in pieces before this block (``bound.split``); the block begins with its last
    pieces.
    """
    limit = bound.max_chars
    if line is None and max(map(len, filter(None, lines)), default=0) <= limit:
        return lines, None, 0  # the fast path: no line over the bound
    if not bound.split:
        return [text[:limit] if text else text for text in lines], None, sum(len(text) > limit for text in lines if text)
    entries: list[str | None] = []
    continued: list[bool] = []
    cut = 0
    for i, text in enumerate(lines):
        if i == 0 and line is not None:
            pieces = line.finish(text, limit)  # type: ignore[arg-type]
            cut += line.over and not line.invalid
        elif text is None or len(text) <= limit:
            pieces = [text]
        else:
            pieces = LineInPieces().finish(text, limit)  # (an invalid line: its pieces, then None)
            cut += not isinstance(text, InvalidText)
        entries.extend(pieces)
        continued.extend([True] * (len(pieces) - 1) + [False])
    return entries, continued, cut


class InvalidText(str):
    """The text of a line that held invalid UTF-8, without it: a line a split bound hands
    over in pieces keeps them, the line still counted as invalid (it ends with None)."""


def decode_line(raw: bytes, bound: LongLines | None) -> str:
    """One line's text as a reader with ``bound`` decodes it: a line a cut bound cuts only as
    far as it is held (:attr:`LongLines.held_bytes`), so what lies past is never decoded.
    Raises ``UnicodeDecodeError``."""
    if bound is not None and not bound.split and len(raw) > bound.held_bytes:
        raw = utf8_head(raw[: bound.held_bytes])
    return raw.decode("utf-8")


def undecodable_line(raw: bytes, bound: LongLines | None, whole: bool = False) -> str | None:
    """What a line holding invalid UTF-8 becomes when such lines are skipped: None, or, where
    ``bound`` hands long lines over in pieces and the line is over it (or ``whole``: part of a
    line already in pieces), its text without the invalid bytes, so that the pieces of a line
    do not depend on where the reads that brought it ended."""
    if bound is None or not bound.split:
        return None
    text = InvalidText(raw.decode("utf-8", errors="ignore"))
    return text if whole or len(text) > bound.max_chars else None


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
