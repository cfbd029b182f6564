"""Tests for infoxlm.corpus.cleaning: NFC, control and format characters, counts."""

from __future__ import annotations

import unicodedata

from infoxlm.corpus.cleaning import CleaningCounts, clean_lines, clean_text


def test_nfc_and_counts():
    counts = CleaningCounts()
    nfd = unicodedata.normalize("NFD", "Tiếng Việt, 서울, Ärger")
    assert clean_lines([nfd, "already NFC", nfd], counts) == ["Tiếng Việt, 서울, Ärger", "already NFC"] + [
        "Tiếng Việt, 서울, Ärger"
    ]
    assert counts == CleaningCounts(nfc=2, control_characters=0)


def test_control_characters():
    counts = CleaningCounts()
    lines = ["a\tb", "c\x00d\x07e", "f\x0bg\x0ch\ri", "j\u2028k\u2029l\x85m", "\x1b[0m colour", "clean"]
    assert clean_lines(lines, counts) == ["a b", "cde", "f g h i", "j k l m", "[0m colour", "clean"]
    assert counts.control_characters == 5 and counts.nfc == 0


def test_format_characters_removed_or_kept():
    # Removed: soft hyphen, zero-width space, bidi marks/embeddings/isolates, word joiner, BOM.
    assert clean_text("Sil\u00adben\u200btrennung") == "Silbentrennung"
    assert clean_text("\u202bעברית\u202c \u200fמימין\u200e \u2067x\u2069") == "עברית מימין x"
    assert clean_text("a\u2060b\ufeffc") == "abc"
    # Kept: ZWNJ and ZWJ (Persian, Indic conjuncts, emoji), emoji tag sequences, Arabic number sign.
    persian = "می\u200cخواهم"
    assert clean_text(persian) == persian
    assert clean_text("क्\u200dष 👩\u200d💻") == "क्\u200dष 👩\u200d💻"
    scotland = "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"
    assert clean_text(scotland) == scotland
    assert clean_text("\u0600١٢") == "\u0600١٢"


def test_whitespace_only_lines_become_empty_and_none_stays_none():
    counts = CleaningCounts()
    assert clean_lines(["  ", "\t", "\u200b", None, " x "], counts) == ["", "", "", None, "x"]
    assert counts.control_characters == 2
