"""Cleaning raw lines before tokenization: NFC, no control characters, no invisible formatting.

What happens to every line, in this order:

1. NFC normalisation. Some sources ship decomposed text (NFD); the tokenizer's normaliser
   does not compose stacked marks, so uncomposed text would become ``<unk>`` pieces.
2. Control characters (Unicode category Cc) go: the whitespace ones -- tab, vertical tab,
   form feed, carriage return, the information separators U+001C-U+001F and NEL U+0085 --
   and the line/paragraph separators U+2028/U+2029 become a space (they separate words),
   every other one is removed.
3. Invisible format characters (category Cf) that only steer rendering are removed: soft
   hyphen, zero-width space, word joiner, invisible operators, bidirectional marks,
   embeddings, overrides and isolates, the Arabic letter mark, the Mongolian vowel
   separator, interlinear annotation marks, U+FEFF and the language tag U+E0001. They are
   kept where text needs them: ZWNJ U+200C and ZWJ U+200D (Persian, Indic conjuncts, emoji
   sequences), the emoji tag characters U+E0020-U+E007F (subdivision flags) and the format
   characters that are drawn (Arabic number signs U+0600-U+0605, U+06DD …).
4. Leading and trailing whitespace is dropped, so a line of only whitespace becomes empty.

Whole blocks of lines are checked at once (``unicodedata.is_normalized`` and one regex
search), so clean text costs no per-character Python work; only lines that need a change
are rewritten, and :class:`CleaningCounts` says how many did.

>>> counts = CleaningCounts()
>>> clean_lines(["Cafe\\u0301", "a\\tb\\u200bc", "  ", None], counts)
['Café', 'a bc', '', None]
>>> counts
CleaningCounts(nfc=1, control_characters=1)
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["CleaningCounts", "clean_lines", "clean_text"]

# Control and separator characters that stand between words: replaced by a space.
_SPACE_LIKE = "\t\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\u2028\u2029"
# Every other C0/C1 control character, and the invisible Cf characters listed above.
_REMOVED_RANGES = [
    (0x00, 0x1F),
    (0x7F, 0x9F),
    (0xAD, 0xAD),  # soft hyphen
    (0x061C, 0x061C),  # Arabic letter mark
    (0x180E, 0x180E),  # Mongolian vowel separator
    (0x200B, 0x200B),  # zero-width space (U+200C ZWNJ and U+200D ZWJ are kept)
    (0x200E, 0x200F),  # left-to-right / right-to-left mark
    (0x202A, 0x202E),  # bidirectional embeddings and overrides
    (0x2060, 0x2064),  # word joiner, invisible operators
    (0x2066, 0x206F),  # bidirectional isolates, deprecated format characters
    (0xFEFF, 0xFEFF),  # zero-width no-break space (byte-order mark)
    (0xFFF9, 0xFFFB),  # interlinear annotation
    (0xE0001, 0xE0001),  # language tag
]
def _character_class(codes: set[int]) -> re.Pattern[str]:
    return re.compile("[" + "".join(re.escape(chr(code)) for code in sorted(codes)) + "]+")


_SPACE_CODES = {ord(c) for c in _SPACE_LIKE}
# "\n" is excluded: lines never contain one, and the blocks joined for cleaning do.
_REMOVED_CODES = {code for start, end in _REMOVED_RANGES for code in range(start, end + 1)}
_REMOVED_CODES -= _SPACE_CODES | {ord("\n")}
_TO_SPACE = _character_class(_SPACE_CODES)
_TO_REMOVE = _character_class(_REMOVED_CODES)
_UNWANTED = _character_class(_SPACE_CODES | _REMOVED_CODES)


@dataclass
class CleaningCounts:
    """Lines changed by cleaning (they are kept; only empty lines are dropped later)."""

    nfc: int = 0  # lines that were not in NFC
    control_characters: int = 0  # lines that lost or had replaced a control/format character


def _changed(before: list[str], after: list[str]) -> int:
    return sum(map(str.__ne__, before, after))


def _clean_block(lines: list[str], counts: CleaningCounts) -> list[str]:
    """Clean lines that hold no "\n" by working on them joined into one string.

    Whole-block calls (normalize, regex) run in C; clean blocks cost two passes over the
    text and no per-line work beyond the final strip.
    """
    block = "\n".join(lines)
    composed = unicodedata.normalize("NFC", block)
    if composed != block:  # NFC never adds or removes a "\n", so lines stay aligned
        composed_lines = composed.split("\n")
        counts.nfc += _changed(lines, composed_lines)
        block, lines = composed, composed_lines
    if _UNWANTED.search(block):
        block = _TO_REMOVE.sub("", _TO_SPACE.sub(" ", block))
        cleaned_lines = block.split("\n")
        counts.control_characters += _changed(lines, cleaned_lines)
        lines = cleaned_lines
    return [line.strip() for line in lines]


def clean_text(text: str) -> str:
    """One line, cleaned as described in the module docstring."""
    return _clean_block([text.replace("\n", " ")], CleaningCounts())[0]


def clean_lines(lines: list[str | None], counts: CleaningCounts) -> list[str | None]:
    """Clean a block of lines; ``None`` (a line to be skipped) stays ``None``.

    Lines must not contain ``"\n"``. Returns a new list of the same length; ``counts`` is
    updated in place.
    """
    if None not in lines:
        return _clean_block(lines, counts)  # type: ignore[arg-type]
    present = iter(_clean_block([line for line in lines if line is not None], counts))
    return [None if line is None else next(present) for line in lines]
