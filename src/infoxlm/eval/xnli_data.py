"""XNLI in its official formats → (premise, hypothesis, label id) triples.

* ``XNLI-1.0/xnli.{dev,test}.tsv``: one header row, then one pair per line for all 15 languages
  (2490 dev / 5010 test each); the columns read are ``language``, ``gold_label``, ``sentence1``
  (index 6) and ``sentence2`` (index 7), found by their header names.
* ``XNLI-MT-1.0/multinli/multinli.train.{lang}.tsv``: header ``premise hypo label``; the
  label "contradictory" means contradiction.
* The Hugging Face ``xnli`` dataset (per-language configs; premise, hypothesis, label 0/1/2),
  when ``datasets`` and its data are available.

The TSV files are split on tabs only, with no quote handling: sentences contain unbalanced ``"``
that a CSV reader would swallow lines with. Labels: entailment 0, neutral 1, contradiction 2 (the
Hugging Face order). Example, on the downloaded data sets (``dev`` maps each language to its
examples, ``{"ar": [NLIExample, …], …}``)::

    >>> dev = read_xnli_tsv("XNLI-1.0/xnli.dev.tsv")  # doctest: +SKIP
    >>> train = read_xnli_mt_train(xnli_mt_train_path("XNLI-MT-1.0", "de"))  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Iterable, Iterator, NamedTuple, Sequence

from ..corpus.inputs import HubDataset
from ..corpus.record_files import load_hub_dataset
from ..errors import EvalDataError, file_error

XNLI_LANGUAGES = ("ar", "bg", "de", "el", "en", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh")
LABELS = ("entailment", "neutral", "contradiction")
# "contradictory" is the spelling of the XNLI-MT training files.
LABEL_IDS = {"entailment": 0, "neutral": 1, "contradiction": 2, "contradictory": 2}


class XNLIDataError(EvalDataError):
    """An XNLI file that is missing or malformed, or a language XNLI does not have."""


class NLIExample(NamedTuple):
    premise: str
    hypothesis: str
    label: int  # 0 entailment, 1 neutral, 2 contradiction


def check_languages(languages: Iterable[str] | None) -> list[str]:
    """The requested languages (default: all 15), each checked against XNLI's."""
    chosen = list(XNLI_LANGUAGES if languages is None else languages)
    for lang in chosen:
        if lang not in XNLI_LANGUAGES:
            raise XNLIDataError(f"XNLI language {lang!r}: expected one of {' '.join(XNLI_LANGUAGES)}")
    return chosen


def _tsv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) for every non-empty line; tabs split, quotes are plain text."""
    try:
        # newline="\n": only "\n" ends a line, a stray "\r" inside a sentence stays in it.
        with open(path, encoding="utf-8-sig", newline="\n") as f:
            for number, line in enumerate(f, start=1):
                line = line.rstrip("\n").rstrip("\r")
                if line:
                    yield number, line.split("\t")
    except (OSError, UnicodeDecodeError) as err:
        raise file_error(path, err, "an XNLI .tsv file", XNLIDataError) from None


def _label(path: Path, number: int, value: str) -> int:
    label = LABEL_IDS.get(value.strip())
    if label is None:
        raise XNLIDataError(f"{path}:{number}: label {value!r}: expected entailment, neutral or contradiction")
    return label


def _check_width(path: Path, number: int, fields: list[str], header: Sequence[str], strict: bool) -> bool:
    if len(fields) == len(header):
        return True
    if strict:
        raise XNLIDataError(
            f"{path}:{number}: {len(fields)} tab-separated fields, expected {len(header)} like the header"
        )
    return False


def read_xnli_tsv(
    path: str | Path, languages: Iterable[str] | None = None, *, strict: bool = True
) -> dict[str, list[NLIExample]]:
    """``xnli.dev.tsv`` / ``xnli.test.tsv`` → {language: examples in file order}.

    ``languages`` keeps only those (default: every XNLI language found). A line whose field count
    differs from the header's is an error (``strict``) or skipped with one warning."""
    path = Path(path)
    chosen = None if languages is None else check_languages(languages)
    rows = _tsv_rows(path)
    header = _header(path, rows, ("language", "gold_label", "sentence1", "sentence2"))
    lang_at, label_at, premise_at, hypothesis_at = map(header.index, ("language", "gold_label", "sentence1", "sentence2"))
    by_language: dict[str, list[NLIExample]] = {lang: [] for lang in (chosen or [])}
    skipped, seen = 0, set()
    for number, fields in rows:
        if not _check_width(path, number, fields, header, strict):
            skipped += 1
            continue
        lang = fields[lang_at]
        if lang not in XNLI_LANGUAGES:
            raise XNLIDataError(f"{path}:{number}: language {lang!r}: expected one of {' '.join(XNLI_LANGUAGES)}")
        seen.add(lang)
        if chosen is not None and lang not in by_language:
            continue
        label = _label(path, number, fields[label_at])
        by_language.setdefault(lang, []).append(NLIExample(fields[premise_at], fields[hypothesis_at], label))
    _warn_skipped(path, skipped)
    present = " ".join(sorted(seen))
    for lang, examples in by_language.items():
        if not examples:
            # The default is all 15 languages: a set of a few needs them named.
            hint = f"; it has {present}: name those with --languages {present}" if seen else ""
            raise XNLIDataError(f"{path}: no {lang} examples{hint}")
    return by_language


def xnli_mt_train_path(root: str | Path, lang: str) -> Path:
    """``root/multinli/multinli.train.{lang}.tsv`` (``root`` is XNLI-MT-1.0 or its multinli/)."""
    check_languages([lang])
    root = Path(root)
    name = f"multinli.train.{lang}.tsv"
    return root / name if (root / name).is_file() else root / "multinli" / name


def read_xnli_mt_train(path: str | Path, *, strict: bool = True) -> list[NLIExample]:
    """One ``multinli.train.{lang}.tsv`` (header premise, hypo, label) → examples in file order."""
    path = Path(path)
    rows = _tsv_rows(path)
    header = _header(path, rows, ("premise", "hypo", "label"))
    premise_at, hypothesis_at, label_at = map(header.index, ("premise", "hypo", "label"))
    examples, skipped = [], 0
    for number, fields in rows:
        if not _check_width(path, number, fields, header, strict):
            skipped += 1
            continue
        examples.append(NLIExample(fields[premise_at], fields[hypothesis_at], _label(path, number, fields[label_at])))
    _warn_skipped(path, skipped)
    if not examples:
        raise XNLIDataError(f"{path}: no examples after the header")
    return examples


def read_xnli_translate_train_all(root: str | Path, languages: Iterable[str] | None = None) -> dict[str, list[NLIExample]]:
    """Translate-train-all: every language's MT training file (default all 15, English included)."""
    return {lang: read_xnli_mt_train(xnli_mt_train_path(root, lang)) for lang in check_languages(languages)}


def load_xnli_split(root: str | Path, split: str, languages: Iterable[str] | None = None) -> dict[str, list[NLIExample]]:
    """``split`` dev or test from the XNLI-1.0 directory ``root``."""
    if split not in ("dev", "test"):
        raise XNLIDataError(f"XNLI split {split!r}: expected dev or test")
    return read_xnli_tsv(Path(root) / f"xnli.{split}.tsv", languages)


def load_xnli_hf(split: str, languages: Iterable[str] | None = None, name: str = "xnli") -> dict[str, list[NLIExample]]:
    """The Hugging Face ``xnli`` dataset, one config per language; ``split`` train, dev
    (= validation) or test. Needs ``datasets`` and the data (cached or downloadable; see
    ``load_hub_dataset`` for what offline means)."""
    split = {"dev": "validation"}.get(split, split)
    if split not in ("train", "validation", "test"):
        raise XNLIDataError(f"XNLI split {split!r}: expected train, dev (validation) or test")
    out = {}
    for lang in check_languages(languages):
        # Loaded (and refused, offline and not cached) as prepare loads its hf: inputs.
        dataset = HubDataset(name, lang, split, spec=f"hf:{name}")
        rows = load_hub_dataset(dataset, streaming=False, error=XNLIDataError)
        examples = []
        for i, row in enumerate(rows):
            if row["label"] not in (0, 1, 2):
                raise XNLIDataError(f"hf:{name} {lang} {split} row {i}: label {row['label']!r}, expected 0, 1 or 2")
            examples.append(NLIExample(row["premise"], row["hypothesis"], int(row["label"])))
        out[lang] = examples
    return out


def _header(path: Path, rows: Iterator[tuple[int, list[str]]], needed: Sequence[str]) -> list[str]:
    first = next(rows, None)
    if first is None:
        raise XNLIDataError(f"{path}: empty file, expected a header row with {', '.join(needed)}")
    number, header = first
    missing = [name for name in needed if name not in header]
    if missing:
        raise XNLIDataError(
            f"{path}:{number}: header {header[:8]} lacks {', '.join(missing)} (is this the right XNLI file?)"
        )
    return header


def _warn_skipped(path: Path, skipped: int) -> None:
    if skipped:
        warnings.warn(f"{path}: skipped {skipped} lines whose field count differs from the header's", stacklevel=3)
