"""PAN-X (WikiANN) and UD-POS files as XTREME ships them: sentences of (word, label).

Two formats:

* XTREME's processed files: one word per line, ``word<TAB>label``, a blank line between
  sentences (``-DOCSTART-`` lines are skipped, as XTREME's ``utils_tag.py`` skips them). A word
  that starts with its language's prefix (``en:Paris`` in the raw PAN-X download) loses it.
* CoNLL-U (UD-POS, straight from a treebank): ten tab-separated columns, FORM and UPOS read;
  comment lines, multi-word token ranges (``3-4``) and empty nodes (``5.1``) are skipped, and
  zero-width non-joiners and spaces inside a form are removed, as XTREME's preprocessing does.

Where a split's file is, for ``--data DIR``, language ``xx``, split ``s`` (train, dev, test):
``DIR/xx/s``, the one file ``DIR/xx/s.*`` (XTREME's ``s.xlm-roberta-base``), ``DIR/s-xx.tsv``
(XTREME's download layout), and for UD-POS ``DIR/xx/s.conllu`` or ``DIR/xx/*-ud-s.conllu``.

    >>> import tempfile, pathlib
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "dev"
    >>> _ = f.write_text("Angela\\tB-PER\\nMerkel\\tI-PER\\n\\nin\\tO\\nBerlin\\tB-LOC\\n")
    >>> [s.labels for s in read_tagged(f, PANX_LABELS)]
    [('B-PER', 'I-PER'), ('O', 'B-LOC')]
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from ..errors import EvalDataError, file_error

# PAN-X's tag set (XTREME's labels.txt) and the 17 universal POS tags of UD v2.
PANX_LABELS = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC")
UDPOS_LABELS = ("ADJ", "ADP", "ADV", "AUX", "CCONJ", "DET", "INTJ", "NOUN", "NUM", "PART", "PRON",
                "PROPN", "PUNCT", "SCONJ", "SYM", "VERB", "X")
# The task names XTREME's evaluate.py and prediction folders use.
LABELS = {"panx": PANX_LABELS, "udpos": UDPOS_LABELS}
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class TaggedSentence:
    """One sentence: its words, their labels, and where it starts (``file:line``)."""

    words: tuple[str, ...]
    labels: tuple[str, ...]
    where: str


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            for number, line in enumerate(f, 1):
                yield number, line.rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise file_error(path, exc, "a UTF-8 file of word<TAB>label lines", EvalDataError) from None


def _check_label(path: Path, number: int, label: str, labels: Sequence[str]) -> str:
    if label not in labels:
        raise EvalDataError(f"{path}:{number}: label {label!r} is not in the task's label set; "
                            f"expected one of {' '.join(labels)}")
    return label


def read_tagged(path: str | Path, labels: Sequence[str], *, lang: str | None = None) -> list[TaggedSentence]:
    """The sentences of a ``word<TAB>label`` file; a line of another shape, or a label outside
    ``labels``, is an error naming the file, the line and the value."""
    path = Path(path)
    prefix = f"{lang}:" if lang else None
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0
    for number, line in _lines(path):
        if not line.strip() or line.startswith("-DOCSTART-"):
            if words:
                sentences.append(TaggedSentence(tuple(words), tuple(tags), f"{path}:{start}"))
            words, tags = [], []
            continue
        fields = line.split("\t")
        if len(fields) != 2 or not fields[0]:
            raise EvalDataError(f"{path}:{number}: {len(fields)} tab-separated field(s) in {line[:60]!r}; "
                                "expected 2: word<TAB>label")
        word = fields[0][len(prefix):] if prefix and fields[0].startswith(prefix) and len(fields[0]) > len(prefix) else fields[0]
        if not words:
            start = number
        words.append(word)
        tags.append(_check_label(path, number, fields[1].strip(), labels))
    if words:
        sentences.append(TaggedSentence(tuple(words), tuple(tags), f"{path}:{start}"))
    if not sentences:
        raise EvalDataError(f"{path}: no sentences; expected word<TAB>label lines, a blank line between sentences")
    return sentences


def read_conllu(path: str | Path, labels: Sequence[str] = UDPOS_LABELS) -> list[TaggedSentence]:
    """The (FORM, UPOS) sentences of a CoNLL-U file (see the module's docstring)."""
    path = Path(path)
    sentences: list[TaggedSentence] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0
    for number, line in _lines(path):
        if not line.strip():
            if words:
                sentences.append(TaggedSentence(tuple(words), tuple(tags), f"{path}:{start}"))
            words, tags = [], []
            continue
        if line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 10:
            raise EvalDataError(f"{path}:{number}: {len(fields)} tab-separated field(s); expected CoNLL-U's 10")
        if "-" in fields[0] or "." in fields[0]:  # a multi-word token's range or an empty node: no UPOS of its own
            continue
        form = "".join(fields[1].replace("\u200c", "").split(" "))
        if not words:
            start = number
        words.append(form or "_")
        tags.append(_check_label(path, number, fields[3], labels))
    if words:
        sentences.append(TaggedSentence(tuple(words), tuple(tags), f"{path}:{start}"))
    if not sentences:
        raise EvalDataError(f"{path}: no sentences; expected CoNLL-U lines")
    return sentences


def find_split(root: str | Path, lang: str, split: str, *, conllu: bool = False) -> Path | None:
    """The file of ``split`` for ``lang`` under ``root`` (the layouts in the module's docstring), or None."""
    root = Path(root)
    folder = root / lang
    candidates = [folder / split]
    if folder.is_dir():
        suffixed = sorted(p for p in folder.glob(f"{split}.*") if p.suffix != ".conllu" and p.is_file())
        if len(suffixed) == 1:
            candidates.append(suffixed[0])
    candidates.append(root / f"{split}-{lang}.tsv")
    if conllu:
        candidates += [folder / f"{split}.conllu", *sorted(folder.glob(f"*-ud-{split}.conllu"))]
    return next((p for p in candidates if p.is_file()), None)


def read_split(path: Path, task: str, lang: str) -> list[TaggedSentence]:
    """A split's sentences, in the format its name says (``.conllu``: CoNLL-U)."""
    if path.suffix == ".conllu":
        return read_conllu(path, LABELS[task])
    return read_tagged(path, LABELS[task], lang=lang)
