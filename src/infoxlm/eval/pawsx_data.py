"""PAWS-X in its official layout (``x-final.tar.gz``) → sentence pairs with a 0/1 label.

``DIR/{lang}/`` for de en es fr ja ko zh holds ``dev_2k.tsv`` and ``test_2k.tsv`` (about 2,000 pairs
each), English ``train.tsv`` (49,401 pairs) and, for the six others, ``translated_train.tsv`` (XTREME's
translate-train). Every file is tab-separated with the header ``id sentence1 sentence2 label``;
label 1 means the two sentences paraphrase each other, 0 that they do not. Fields are split on
tabs only, quotes are plain text. Example (``dev`` maps each language to its pairs)::

    >>> dev = read_pawsx_split("x-final", "dev", ["de", "en"])  # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..errors import EvalDataError, file_error
from .xnli_data import NLIExample

PAWSX_LANGUAGES = ("de", "en", "es", "fr", "ja", "ko", "zh")
LABELS = ("0", "1")  # not a paraphrase, a paraphrase
HEADER = ("id", "sentence1", "sentence2", "label")
# The file of each split in DIR/{lang}/; English trains on the original, the rest on translations.
SPLIT_FILES = {"dev": "dev_2k.tsv", "test": "test_2k.tsv", "train": "train.tsv", "translated_train": "translated_train.tsv"}


class PAWSXDataError(EvalDataError):
    """A PAWS-X file that is missing or malformed, or a language PAWS-X does not have."""


def check_pawsx_languages(languages: Iterable[str] | None) -> list[str]:
    """The requested languages (default: all 7), each checked against PAWS-X's."""
    chosen = list(PAWSX_LANGUAGES if not languages else languages)
    for lang in chosen:
        if lang not in PAWSX_LANGUAGES:
            raise PAWSXDataError(f"PAWS-X language {lang!r}: expected one of {' '.join(PAWSX_LANGUAGES)}")
    return chosen


def pawsx_path(root: str | Path, lang: str, split: str) -> Path:
    """``root/{lang}/{file}``: the split's file (training: ``train.tsv`` for en, else the translation)."""
    if split == "train" and lang != "en":
        split = "translated_train"
    return Path(root) / lang / SPLIT_FILES[split]


def read_pawsx_tsv(path: str | Path) -> list[NLIExample]:
    """One PAWS-X file → (sentence1, sentence2, label 0/1) pairs in file order. A wrong header,
    a line without exactly 4 tab-separated fields, a label other than 0 or 1, or a file without
    pairs is an error naming the file and line."""
    path = Path(path)
    try:
        # newline="\n": only "\n" ends a line; a stray "\r" inside a sentence stays in it.
        with open(path, encoding="utf-8-sig", newline="\n") as f:
            lines = [line.rstrip("\n").rstrip("\r") for line in f]
    except (OSError, UnicodeDecodeError) as err:
        raise file_error(path, err, f"a PAWS-X .tsv file with the header {' '.join(HEADER)}", PAWSXDataError) from None
    if not lines or tuple(lines[0].split("\t")) != HEADER:
        found = lines[0].split("\t")[:6] if lines else "an empty file"
        raise PAWSXDataError(f"{path}:1: header {found}; expected the tab-separated header {' '.join(HEADER)}")
    pairs = []
    for number, line in enumerate(lines[1:], start=2):
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != len(HEADER):
            raise PAWSXDataError(f"{path}:{number}: {len(fields)} tab-separated fields, expected 4 (id sentence1 sentence2 label)")
        label = fields[3].strip()
        if label not in LABELS:
            raise PAWSXDataError(f"{path}:{number}: label {fields[3]!r}: expected 0 or 1")
        pairs.append(NLIExample(fields[1], fields[2], int(label)))
    if not pairs:
        raise PAWSXDataError(f"{path}: no sentence pairs after the header")
    return pairs


def read_pawsx_split(root: str | Path, split: str, languages: Iterable[str] | None = None) -> dict[str, list[NLIExample]]:
    """{language: pairs} of ``split`` (dev, test or train) for ``languages`` (default: all 7)."""
    if split not in ("dev", "test", "train"):
        raise PAWSXDataError(f"PAWS-X split {split!r}: expected dev, test or train")
    out = {}
    for lang in check_pawsx_languages(languages):
        path = pawsx_path(root, lang, split)
        if not path.is_file():
            raise PAWSXDataError(f"{path}: missing PAWS-X {split} file for {lang} (expected DIR/{lang}/{path.name})")
        out[lang] = read_pawsx_tsv(path)
    return out
