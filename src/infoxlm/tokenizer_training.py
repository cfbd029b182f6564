"""Learning a new XLM-R-style vocabulary from raw multilingual text.

``train_tokenizer`` (also ``infoxlm.train_tokenizer`` and ``infoxlm tokenizer train``) draws a training
sample in which language l has probability p_l ∝ (n_l / n)^α, n_l its number of non-empty
lines, so small languages get their share, and learns a Unigram vocabulary on it with
SentencePiece's trainer (repeatable: the same sample and thread count give the same pieces),
written as a ``tokenizers`` file in XLM-R's id layout.

Inputs are read as ``infoxlm prepare`` reads them (:func:`~infoxlm.corpus.record_files.
input_line_blocks`): text files line by line, JSON Lines, Parquet and ``save_to_disk`` inputs
as records whose ``field`` holds the text, so the same text gives the same vocabulary in
any format.

SentencePiece's trainer skips, without a word, every line longer than its limit (4,192 bytes of
UTF-8), so a language given as paragraphs would vanish from the vocabulary; a longer line is
cut at sentence ends, else between words, into pieces under the limit
(:func:`~infoxlm.corpus.long_lines.split_by_bytes`), and the report counts and warns about them.
"""

from __future__ import annotations

import json
import re
import unicodedata
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from infoxlm.corpus.inputs import InputSource, input_source, record_fields
from infoxlm.corpus.long_lines import split_by_bytes
from infoxlm.corpus.record_files import input_line_blocks
from infoxlm.data.sampling import check_alpha, language_probabilities
from infoxlm.corpus.text_files import COMPRESSION_SUFFIXES
from infoxlm.errors import DataError, TokenizerError
from infoxlm.outputs import atomic_files
from infoxlm.tokenizer import PathLike, Tokenizer
from infoxlm.tokenizer_files import TOKENIZER_JSON
from infoxlm.unigram_trainer import SENTENCEPIECE_MAX_BYTES, train_unigram

__all__ = ["TrainingReport", "language_from_filename", "train_tokenizer"]

TRAINING_REPORT = "training_report.json"
# ISO 639 code (2-3 letters) with optional script/region subtags: de, fil, zh-Hans, pt_BR.
# Format suffixes dropped before the code is read: de.txt, train.de.jsonl, wiki.de.parquet.
_FORMAT_SUFFIXES = (".txt", ".jsonl", ".parquet")
_LANGUAGE_CODE = re.compile(r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$")

# --------------------------------------------------------------------------------------
# Training report
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingReport:
    """How a vocabulary was trained: the per-language data and the sample drawn from it.

    ``line_counts[l]`` is n_l (non-empty lines of language l), ``probabilities[l]`` is
    p_l ∝ (n_l / n) ** alpha and ``sample_counts[l]`` = round(p_l * total_sample) is how many
    lines of l the trainer saw (more than n_l when the language was upsampled).
    ``cut_lines[l]`` counts the lines of l longer than SentencePiece's limit
    (``SENTENCEPIECE_MAX_BYTES``), which the trainer sees as several pieces.
    """

    files: dict[str, list[str]]
    line_counts: dict[str, int]
    probabilities: dict[str, float]
    sample_counts: dict[str, int]
    total_sample: int
    alpha: float
    seed: int
    max_sentences: int
    requested_vocab_size: int
    vocab_size: int = 0
    fingerprint: str = field(default="")
    threads: int = 1  # the trainer's threads: the same sample and threads give the same vocabulary
    record_fields: dict[str, str] = field(default_factory=dict)  # {"field": F} where inputs hold records
    cut_lines: dict[str, int] = field(default_factory=dict)

    @property
    def languages(self) -> tuple[str, ...]:
        """Languages in training order (sorted by code)."""
        return tuple(self.line_counts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable copy (what ``training_report.json`` holds)."""
        return asdict(self)

    def summary(self) -> str:
        """One line: vocabulary size and, per language, sampling probability and line counts."""
        parts = [
            f"{lang} p={self.probabilities[lang]:.3f} lines={self.line_counts[lang]} "
            f"sampled={self.sample_counts[lang]}" + (f" cut={cut}" if (cut := self.cut_lines.get(lang)) else "")
            for lang in self.languages
        ]
        return (
            f"vocab_size={self.vocab_size} (asked {self.requested_vocab_size}), "
            f"sample={self.total_sample} lines, alpha={self.alpha}: " + "; ".join(parts)
        )

    def warnings(self) -> list[str]:
        """One line for each language with lines too long for SentencePiece, naming its files."""
        return [
            f"warning: {', '.join(self.files[lang])}: {cut:,} of {self.line_counts[lang]:,} {lang} lines are "
            f"longer than SentencePiece's {SENTENCEPIECE_MAX_BYTES:,}-byte limit; each was cut at sentence "
            "ends (else between words) into pieces under it"
            for lang, cut in self.cut_lines.items()
            if cut
        ]


def train_tokenizer(
    files: Mapping[str, PathLike | Sequence[PathLike]] | Sequence[PathLike],
    output_dir: PathLike,
    vocab_size: int = 250_002,
    alpha: float = 0.3,
    max_sentences: int = 10_000_000,
    seed: int = 0,
    languages: Iterable[str] | None = None,
    show_progress: bool = False,
    threads: int = 1,
    field: str | None = None,
) -> Tokenizer:
    """Learn a Unigram (SentencePiece-style) vocabulary from raw text and save it.

    Args:
        files: ``{language: [paths]}`` (a single path per language is fine too), or a
            list of paths whose language is read from the file name by
            :func:`language_from_filename` (``de.txt``, ``train.de.txt``, ``de.txt.gz``).
            Files are UTF-8 text, one sentence per line; ``.gz``, ``.xz``, ``.bz2`` and
            ``.zst`` are decompressed on the fly. JSON Lines files, Parquet files or
            directories, ``save_to_disk`` directories and ``hf:`` datasets are read as
            records, as ``infoxlm prepare`` reads them (:mod:`~infoxlm.corpus.inputs`).
        output_dir: directory that receives ``tokenizer.json``, the ``transformers``
            configs and ``training_report.json``.
        vocab_size: total number of ids, the five special tokens included. The result
            is smaller when the sample has fewer distinct candidate pieces (tiny data);
            it must be large enough to hold every distinct character of the sample.
        alpha: language smoothing exponent: language l is sampled with probability
            p_l ∝ (n_l / n) ** alpha, n_l being its number of non-empty lines.
        max_sentences: size of the training sample, ``min(max_sentences, n)`` lines in
            all. Language l contributes ``round(p_l * sample)`` lines, drawn without
            replacement when it has that many and repeated (upsampled) when not.
        seed: makes the sample, and therefore the vocabulary, reproducible.
        languages: if given, only these languages of ``files`` are used.
        show_progress: show the trainer's log.
        threads: threads of SentencePiece's trainer. The vocabulary depends on the sample
            and on this number (the work is split by thread), so a run is repeatable
            anywhere with the same value; more threads are faster on large samples.
        field: the record field that holds the text (default ``text``); only for record
            inputs.

    Returns:
        The trained tokenizer, loaded back from ``output_dir``, with
        :attr:`training_report` describing the sample.

    Raises:
        TokenizerError: unreadable or empty files, invalid UTF-8 (naming file and line),
            a file name without a recognisable language, a record without ``field`` or
            whose value is not a string, ``field`` without record inputs, or bad parameters.

    The text pipeline matches XLM-R: NFKC via SentencePiece's ``nmt_nfkc`` rule (which
    also drops control characters and maps Unicode spaces to " "), runs of spaces
    collapsed, whitespace split, "▁"-prefixed pieces. Input lines are NFC-normalised
    and blank lines skipped. Specials ``<s> <pad> </s> <unk>`` get ids 0-3 and
    ``<mask>`` the last id. Scores are rounded to 1e-6 and ties ordered by piece so the
    written file does not depend on floating-point summation order inside the trainer.
    """
    output = _check_arguments(output_dir, vocab_size, max_sentences, seed, threads, alpha)
    by_language = _group_files(files, languages)
    with _as_tokenizer_error():
        fields = record_fields([s for sources in by_language.values() for s in sources], field)
    plan = _plan_sample(
        by_language, fields, alpha=alpha, max_sentences=max_sentences, seed=seed, vocab_size=vocab_size, threads=threads
    )
    # Pass 2 streams the files again inside the trainer.
    sample = _iter_sample(by_language, fields, plan.line_counts, plan.sample_counts, seed)
    return _save_trained(train_unigram(sample, vocab_size, threads, show_progress), output, plan)


# --------------------------------------------------------------------------------------
# Training helpers
# --------------------------------------------------------------------------------------


def _check_int(name: str, value: Any, smallest: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < smallest:
        raise TokenizerError(f"{name}={value!r} is invalid; expected an integer >= {smallest}")


def _check_arguments(
    output_dir: PathLike, vocab_size: int, max_sentences: int, seed: int, threads: int, alpha: float
) -> Path:
    """The output directory as a Path, after refusing bad numbers or an output that is a file."""
    _check_int("vocab_size", vocab_size, smallest=6)
    _check_int("max_sentences", max_sentences, smallest=1)
    _check_int("seed", seed, smallest=0)
    _check_int("threads", threads, smallest=1)
    check_alpha(alpha, TokenizerError)
    output = Path(output_dir)
    if output.exists() and not output.is_dir():
        raise TokenizerError(f"{output}: exists and is not a directory; expected an output directory")
    return output


def _plan_sample(
    by_language: dict[str, list[InputSource]],
    fields: dict[str, str],
    *,
    alpha: float,
    max_sentences: int,
    seed: int,
    vocab_size: int,
    threads: int,
) -> TrainingReport:
    """Pass 1: count each language's lines (validating UTF-8 and records before any training)
    and decide how many lines of each the sample gets; the report of a vocabulary not yet trained."""
    line_counts, cut_lines = _count_language_lines(by_language, fields)
    probabilities = language_probabilities(line_counts, alpha)
    total_sample = min(max_sentences, sum(line_counts.values()))
    return TrainingReport(
        files={lang: [str(s.label) for s in sources] for lang, sources in by_language.items()},
        line_counts=line_counts,
        probabilities=probabilities,
        sample_counts={lang: round(p * total_sample) for lang, p in probabilities.items()},
        total_sample=total_sample,
        alpha=float(alpha),
        seed=seed,
        max_sentences=max_sentences,
        requested_vocab_size=vocab_size,
        threads=threads,
        record_fields=fields,
        cut_lines=cut_lines,
    )


def _save_trained(hf_tokenizer: Any, output: Path, plan: TrainingReport) -> Tokenizer:
    """Write the trained ``tokenizers`` model, the transformers configs and training_report.json
    into ``output`` (all of them, or none: other files there stay); the tokenizer loaded back,
    with its report attached."""
    with atomic_files(output) as tmp:
        hf_tokenizer.save(str(tmp / TOKENIZER_JSON), pretty=True)
        trained = Tokenizer.from_pretrained(tmp / TOKENIZER_JSON)
        trained.save_pretrained(tmp)
        report = replace(plan, vocab_size=trained.vocab_size, fingerprint=trained.fingerprint)
        report_text = json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"
        (tmp / TRAINING_REPORT).write_text(report_text, encoding="utf-8")
    trained = Tokenizer.from_pretrained(output / TOKENIZER_JSON)  # read where it now lies
    trained.training_report = report
    return trained


def language_from_filename(path: PathLike) -> str:
    """The language code in a training file's name.

    Rule: drop a compression suffix (``.gz``, ``.xz``, ``.lzma``, ``.bz2``, ``.zst``), then a
    ``.txt``, ``.jsonl`` or ``.parquet`` suffix, and take what follows the last remaining dot (or
    the whole name if there is none). It must look like an ISO 639 code with optional subtags
    (``de``, ``fil``, ``zh-Hans``, ``pt_BR``)::

        de.txt -> de    train.de.jsonl -> de    wiki.2023.zh-Hans.txt.gz -> zh-Hans

    Raises:
        TokenizerError: the name does not end in a language code.
    """
    name = Path(path).name
    stem = name
    for suffix in COMPRESSION_SUFFIXES:
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    for suffix in _FORMAT_SUFFIXES:
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    code = stem.rsplit(".", 1)[-1]
    if not _LANGUAGE_CODE.match(code):
        raise TokenizerError(
            f"{path}: cannot tell the language from the file name ({code!r} is not a language code); "
            "expected a name like de.txt or train.de.txt, or give the language explicitly (de=PATH)"
        )
    return code


def _group_files(
    files: Mapping[str, PathLike | Sequence[PathLike]] | Sequence[PathLike], languages: Iterable[str] | None
) -> dict[str, list[InputSource]]:
    """Normalise the ``files`` argument to ``{language: [input, ...]}`` sorted by language."""
    grouped: dict[str, list[PathLike]] = {}
    if isinstance(files, Mapping):
        for lang, paths in files.items():
            if not isinstance(lang, str) or not lang or any(c.isspace() or c == "=" for c in lang):
                raise TokenizerError(
                    f"language code {lang!r} is invalid; expected a code like 'de' or 'zh-Hans'"
                )
            if isinstance(paths, (str, Path)):
                paths = [paths]
            paths = list(paths)  # str kept as given: "hf:NAME" is a dataset, not a path
            if not paths:
                raise TokenizerError(f"language {lang!r} has no files; expected at least one path")
            grouped.setdefault(lang, []).extend(paths)
    elif isinstance(files, (str, Path)):
        raise TokenizerError(
            f"files={str(files)!r} is a single path; "
            "expected a list of paths or a {language: paths} mapping"
        )
    else:
        for p in files:
            grouped.setdefault(language_from_filename(p), []).append(p)
    if not grouped:
        raise TokenizerError("no training files given; expected at least one text file")
    if languages is not None:
        # A bare string would otherwise be read as a list of one-letter languages.
        wanted = [languages] if isinstance(languages, str) else list(languages)
        missing = [lang for lang in wanted if lang not in grouped]
        if missing:
            raise TokenizerError(
                f"language(s) {', '.join(missing)} requested but no file given for them; "
                f"files cover {', '.join(sorted(grouped))}"
            )
        grouped = {lang: grouped[lang] for lang in wanted}
    # What each input is (text or records), told from its name as prepare tells it.
    with _as_tokenizer_error():
        sources = {lang: [input_source(p, "--input") for p in grouped[lang]] for lang in grouped}
    # Sorted so that sampling, and thus the vocabulary, does not depend on argument order.
    return {lang: sources[lang] for lang in sorted(sources)}


@contextmanager
def _as_tokenizer_error() -> Iterator[None]:
    """Report text-file problems (shared reader, :class:`DataError`) as :class:`TokenizerError`."""
    try:
        yield
    except DataError as exc:
        raise TokenizerError(str(exc)) from None


def _text_lines(source: InputSource, fields: dict[str, str]) -> Iterator[str]:
    """Every non-blank line of one input, read as ``prepare`` reads it: a text file's lines,
    or the text field of its records (:func:`~infoxlm.corpus.record_files.input_line_blocks`)."""
    with _as_tokenizer_error():
        for block in input_line_blocks(source, fields):
            yield from (line for line in block.lines if line.strip())  # type: ignore[union-attr]


def _read_lines(source: InputSource, fields: dict[str, str]) -> Iterator[str]:
    """The NFC text of every non-blank line of one input."""
    return (unicodedata.normalize("NFC", line) for line in _text_lines(source, fields))


def _too_long(line: str) -> bool:
    """Whether SentencePiece's trainer would drop ``line``; most lines are told by length alone."""
    return len(line) * 4 > SENTENCEPIECE_MAX_BYTES and len(line.encode("utf-8")) > SENTENCEPIECE_MAX_BYTES


def _count_lines(source: InputSource, fields: dict[str, str]) -> tuple[int, int]:
    """Non-blank lines, and those of them too long for SentencePiece (validating UTF-8 and
    records on the way)."""
    lines = cut = 0
    for line in _read_lines(source, fields):
        lines += 1
        cut += _too_long(line)
    return lines, cut


def _count_language_lines(
    by_language: dict[str, list[InputSource]], fields: dict[str, str]
) -> tuple[dict[str, int], dict[str, int]]:
    """n_l, the non-blank lines of each language, and how many of them are too long for
    SentencePiece; refused when a language (or all) has none."""
    counts = {lang: [_count_lines(source, fields) for source in sources] for lang, sources in by_language.items()}
    line_counts = {lang: sum(lines for lines, _ in per_source) for lang, per_source in counts.items()}
    cut_lines = {lang: sum(cut for _, cut in per_source) for lang, per_source in counts.items()}
    empty = [lang for lang, count in line_counts.items() if count == 0]
    if len(empty) == len(line_counts):
        listed = ", ".join(str(s.label) for sources in by_language.values() for s in sources)
        raise TokenizerError(
            f"no non-empty lines in {listed}; expected UTF-8 text, one sentence per line"
        )
    if empty:
        listed = ", ".join(str(s.label) for s in by_language[empty[0]])
        raise TokenizerError(
            f"language {empty[0]!r} has no non-empty lines in {listed}; expected at least one sentence"
        )
    return line_counts, cut_lines


def _choose_lines(available: int, wanted: int, seed: int, language: str) -> np.ndarray:
    """Sorted line indices (with repeats when upsampling) to draw ``wanted`` of ``available``.

    Without replacement when ``wanted <= available``; otherwise every line is taken
    ``wanted // available`` times and the remainder drawn without replacement, which
    upsamples evenly instead of letting chance favour some lines.
    """
    if wanted == 0 or available == 0:
        return np.empty(0, dtype=np.int64)
    # Seed per language (CRC of the code, not its position) so adding a language leaves
    # the choice of the others' lines alone.
    rng = np.random.default_rng([seed, zlib.crc32(language.encode("utf-8"))])
    repeats, remainder = divmod(wanted, available)
    parts = [np.repeat(np.arange(available, dtype=np.int64), repeats)] if repeats else []
    if remainder:
        parts.append(rng.choice(available, size=remainder, replace=False).astype(np.int64))
    return np.sort(np.concatenate(parts), kind="stable")


def _iter_sample(
    by_language: dict[str, list[InputSource]],
    fields: dict[str, str],
    line_counts: dict[str, int],
    sample_counts: dict[str, int],
    seed: int,
) -> Iterator[str]:
    """Stream the training sample: each language's chosen lines, repeats included, a line too
    long for SentencePiece as its pieces.

    Only the sorted array of chosen line indices is held in memory; the files are read
    again from the start and every line whose index was chosen is emitted (as many times
    as it was chosen).
    """
    for lang, sources in by_language.items():
        chosen = _choose_lines(line_counts[lang], sample_counts[lang], seed, lang)
        position = 0  # next entry of `chosen` to serve
        index = 0  # index of the current non-empty line within the language
        for source in sources:
            if position == len(chosen):
                break
            for line in _read_lines(source, fields):
                while position < len(chosen) and chosen[position] == index:
                    yield from split_by_bytes(line, SENTENCEPIECE_MAX_BYTES) if _too_long(line) else (line,)
                    position += 1
                index += 1
                if position == len(chosen):
                    break
