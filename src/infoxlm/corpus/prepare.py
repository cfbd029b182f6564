"""Prepare raw text for pre-training: clean, tokenize and write it into a token store.

Two entry points, one per kind of corpus (the command line calls them):

* :func:`prepare_monolingual` -- files of one language, one sentence or paragraph per line,
  a blank line ending a document, become ``STORE/mono/<lang>``;
* :func:`prepare_parallel` -- two line-aligned files (or one two-column TSV file) of an
  English-xx pair become ``STORE/parallel/<src>-<tgt>``.

Records (JSON Lines, Parquet, datasets; :mod:`~infoxlm.corpus.record_files`) and TMX files
(:mod:`~infoxlm.corpus.tmx`) are read into the same line and pair blocks as text files, so the
same text gives the same corpus whatever its format.

The pipeline streams: blocks of ~2 MiB of text are read (:mod:`~infoxlm.corpus.text_files`),
cleaned (:mod:`~infoxlm.corpus.cleaning`), tokenized in one ``encode_batch`` call (which the
``tokenizers`` library spreads over all cores) and appended to the corpus files, so memory
does not grow with the input. A line longer than ``LONG_LINE_CHARS_PER_TOKEN`` characters per
allowed token (8,192 characters at the default 512) is cut at spaces into pieces of at most
that many characters before it is tokenized, so one huge line costs no more memory than the
same text as many lines; shorter lines are tokenized whole.

A corpus is written by :class:`~infoxlm.corpus.store_writer.CorpusWriter` into a ``.partial-*``
directory that becomes the corpus only when complete. Everything a call creates on disk (the
store, its parents, ``store.json``, the ``tokenizer/`` copy, the partial corpus) is recorded
in one :class:`~infoxlm.created_paths.CreatedPaths`, which takes it all back if the call
fails for any reason (bad input found half-way, a full disk, no permission, Ctrl-C); a store
that other corpora have joined meanwhile is kept.

Re-running is cheap: meta.json records a fingerprint of the inputs (resolved paths, sizes,
modification times), the options and the tokenizer; when it matches, nothing is done.

With ``shard=(i, n)`` a call prepares only the i-th of n parts of the input (planned by
:mod:`~infoxlm.corpus.shards`) into a store of its own; meta.json's ``shard`` records which
part, the whole input's fingerprint, and whether the part's first line begins a document of
the whole input and its last document ends there, so that :mod:`~infoxlm.corpus.merge` can join
the parts into exactly the corpus one call over the whole input writes. ``dedup`` is refused
with a shard (a shard cannot see the lines of the others).

Example::

    >>> result = prepare_monolingual("de", ["de.txt"], "tok/", "store/")   # doctest: +SKIP
    >>> print(result.summary())                                           # doctest: +SKIP
    de: 1,000 lines in 12 documents, 23,456 tokens, <unk> 0.00 % -> store/mono/de
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import time
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from infoxlm.version import __version__
from infoxlm.corpus.cleaning import CleaningCounts, clean_lines
from infoxlm.data.corpus_lock import corpus_lock, remove_stale_partials
from infoxlm.created_paths import CreatedPaths
from infoxlm.corpus.inputs import InputSource, input_source, record_fields
from infoxlm.corpus.languages import canonical_language, language_name, parse_language_pair
from infoxlm.corpus.parallel_text import PairBlock, read_aligned_pairs, read_tsv_pairs
from infoxlm.data.prefetch import prefetch
from infoxlm.corpus.shards import FilePart, ShardPlan, plan_aligned_shard, plan_shard
from infoxlm.corpus.store_writer import CorpusWriter, ensure_store, mono_stream
from infoxlm.data.store import OFFSET_DTYPE, TOKEN_DTYPE, MonoCorpus, ParallelCorpus, StoreError, TokenStore, read_store_json
from infoxlm.corpus.record_files import input_line_blocks, record_pair_blocks
from infoxlm.corpus.text_files import DEFAULT_BLOCK_BYTES, LineBlock
from infoxlm.corpus.tmx import read_tmx_pairs
from infoxlm.corpus.unknown_tokens import count_unk, format_unk_rates, unk_rates, unk_warnings
from infoxlm.errors import DataError
from infoxlm.tokenizer import Tokenizer

__all__ = [
    "DEFAULT_MAX_LINE_TOKENS",
    "LONG_LINE_CHARS_PER_TOKEN",
    "PrepareResult",
    "prepare_monolingual",
    "prepare_parallel",
]

PathLike = str | Path

DEFAULT_MAX_LINE_TOKENS = 512
# A line of more than this many characters per allowed token is cut into pieces of at most
# that many characters before tokenizing. No piece of an XLM-R vocabulary is longer than 16
# characters, so such a line has more tokens than allowed and would be split anyway.
LONG_LINE_CHARS_PER_TOKEN = 16
# Part of every input fingerprint: bump it when cleaning or tokenizing changes, so that
# stores prepared by an older version are no longer "up to date".
PREPARE_VERSION = 2  # 2: monolingual lines end with </s>


@dataclass
class PrepareResult:
    """What a prepare call did: the corpus, its meta.json, and whether it was already there."""

    kind: str  # "mono" or "parallel"
    name: str  # "de" or "en-de"
    path: Path
    meta: dict[str, Any]
    up_to_date: bool = False

    def summary(self) -> str:
        """One line for the terminal."""
        if self.up_to_date:
            return f"{self.name}: up to date"
        counts = self.meta["counts"]
        if self.kind == "mono":
            text = f"{self.name}: {counts['lines']:,} lines in {counts['documents']:,} documents, "
        else:
            text = f"{self.name}: {counts['pairs']:,} pairs, "
        rates = {rate.language: rate.rate for rate in unk_rates(self.meta)}
        text += f"{counts['tokens']:,} tokens, <unk> {format_unk_rates(rates)}"
        skipped = {reason: n for reason, n in self.meta["skipped"].items() if n}
        if skipped:
            text += " (skipped " + ", ".join(f"{reason} {n:,}" for reason, n in skipped.items()) + ")"
        shard = self.meta.get("shard")
        return text + f" -> {self.path}" + (f" (shard {shard['index']}/{shard['count']})" if shard else "")

    def warnings(self) -> list[str]:
        """One line for each language of the corpus whose ``<unk>`` rate is above 1 %: text the
        tokenizer does not cover (:mod:`~infoxlm.corpus.unknown_tokens`)."""
        return unk_warnings(self.name, unk_rates(self.meta))


# --------------------------------------------------------------------------------------
# Public entry points
# --------------------------------------------------------------------------------------


def prepare_monolingual(
    language: str,
    inputs: Sequence[PathLike],
    tokenizer: Tokenizer | PathLike,
    output: PathLike,
    *,
    max_line_tokens: int = DEFAULT_MAX_LINE_TOKENS,
    skip_invalid: bool = False,
    dedup: bool = False,
    force: bool = False,
    show_progress: bool = True,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    field: str | None = None,
    doc_field: str | None = None,
    shard: tuple[int, int] | None = None,
) -> PrepareResult:
    """Tokenize monolingual text into ``output/mono/<language>``.

    Each text file holds one sentence or paragraph per line; a blank line (after cleaning)
    ends a document, and so does the end of a file. An input may also hold records (JSON
    Lines, Parquet, a ``save_to_disk`` directory, ``hf:NAME[:CONFIG][:SPLIT]``; see
    :mod:`~infoxlm.corpus.inputs`): the value of each record's ``field`` (default ``text``) is
    read as lines of text, and with ``doc_field`` a change of that field's value ends a
    document too (:mod:`~infoxlm.corpus.record_files`). Lines with more than ``max_line_tokens``
    tokens are split into consecutive lines of at most that many, in the same document (a
    line of more than ``LONG_LINE_CHARS_PER_TOKEN * max_line_tokens`` characters is first
    cut at spaces into pieces of at most that many characters, tokenized one by one).

    Raises:
        DataError: unknown language code, missing or empty file, invalid UTF-8 (unless
            ``skip_invalid``: such lines are then skipped and counted), a record without
            ``field``, a value that is neither a string nor null, invalid JSON.

    ``dedup`` drops every line (after cleaning) that appeared before in these inputs,
    counted as ``skipped["duplicate"]``. ``shard=(i, n)`` prepares only the i-th of n parts
    of the inputs (see the module's docstring).
        StoreError: ``output`` was written with another tokenizer.
    """
    language = canonical_language(language)
    sources = _input_sources(inputs)
    plan = None
    if shard is not None:
        plan = plan_shard([source.path for source in _text_only(sources, shard, dedup)], shard)
    job = _Job("mono", language, sources, tokenizer, output, max_line_tokens, skip_invalid, block_bytes, dedup, plan)
    job.fields = record_fields(sources, field, doc_field)
    job.extra_meta = {"language": language, "language_name": language_name(language)}
    return job.run(force, show_progress, _write_monolingual)


def prepare_parallel(
    pair: str,
    tokenizer: Tokenizer | PathLike,
    output: PathLike,
    *,
    src: PathLike | None = None,
    tgt: PathLike | None = None,
    tsv: PathLike | None = None,
    input: PathLike | None = None,
    tmx: PathLike | None = None,
    src_field: str | None = None,
    tgt_field: str | None = None,
    allow_non_english: bool = False,
    max_line_tokens: int = DEFAULT_MAX_LINE_TOKENS,
    skip_invalid: bool = False,
    dedup: bool = False,
    force: bool = False,
    show_progress: bool = True,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    shard: tuple[int, int] | None = None,
) -> PrepareResult:
    """Tokenize translation pairs into ``output/parallel/<src>-<tgt>``.

    Give one of: ``src`` and ``tgt`` (line i of one translates line i of the other), ``tsv``
    (``source<TAB>target`` per line), ``tmx`` (a TMX file, :mod:`~infoxlm.corpus.tmx`), or
    ``input``: records (JSON Lines, Parquet, a ``save_to_disk`` directory, ``hf:…``) whose
    ``src_field`` and ``tgt_field`` (default: the pair's language codes) hold the two sides,
    or a TMX file. A pair is skipped (and counted) when either
    side is empty after cleaning; sides longer than ``max_line_tokens`` are truncated (a side
    of more than ``LONG_LINE_CHARS_PER_TOKEN * max_line_tokens`` characters is first cut to
    that many at a space, so a huge side is never tokenized whole).

    Raises:
        DataError: bad pair (unknown code, no English side unless ``allow_non_english``),
            missing or empty file, line counts that differ, a TSV line without exactly two
            columns, invalid UTF-8 (unless ``skip_invalid``), bad records (as for
            :func:`prepare_monolingual`), malformed TMX.

    ``dedup`` drops every pair (both sides, after cleaning) that appeared before, counted as
    ``skipped["duplicate"]``. ``shard=(i, n)`` prepares only the i-th of n parts of the pairs
    (a TSV file split as monolingual input is; two files by the same line ranges).
        StoreError: ``output`` was written with another tokenizer.
    """
    src_language, tgt_language = parse_language_pair(pair, allow_non_english)
    name = f"{src_language}-{tgt_language}"
    given = [flag for flag, value in (("--src/--tgt", src if src is not None else tgt), ("--tsv", tsv),
                                      ("--input", input), ("--tmx", tmx)) if value is not None]  # fmt: skip
    if len(given) > 1:
        raise DataError(f"give either --tsv or --src with --tgt (or --input, or --tmx), not {' and '.join(given)}")
    if (src_field is not None or tgt_field is not None) and input is None:
        raise DataError("--src-field and --tgt-field name fields of --input records; expected --input")
    if tsv is not None:
        sources, form, write = _text_sources([tsv], "--tsv"), "tsv", _write_tsv
    elif src is not None and tgt is not None:
        sources, form, write = _text_sources([src, tgt], "--src/--tgt"), "two files", _write_two_files
    elif tmx is not None:
        sources, form, write = [InputSource("tmx", _text_sources([tmx], "--tmx")[0].path)], "tmx", _write_tmx
    elif input is not None:
        sources = [_parallel_input(input)]
        form, write = sources[0].kind, _write_tmx if sources[0].kind == "tmx" else _write_records
    else:
        raise DataError(f"parallel corpus {name} needs --src and --tgt files, one --tsv or --tmx file, or --input")
    plan = None
    if shard is not None:
        paths = [source.path for source in _text_only(sources, shard, dedup)]
        plan = plan_shard(paths, shard) if tsv is not None else plan_aligned_shard(*paths, shard)
    job = _Job("parallel", name, sources, tokenizer, output, max_line_tokens, skip_invalid, block_bytes, dedup, plan)
    if sources[0].has_records:
        job.fields = {"src_field": src_field or src_language, "tgt_field": tgt_field or tgt_language}
    job.extra_meta = {"languages": {"src": src_language, "tgt": tgt_language}, "format": form}
    return job.run(force, show_progress, write)


# --------------------------------------------------------------------------------------
# The job: validation, up-to-date check, store handling and meta.json around one writer
# --------------------------------------------------------------------------------------


def _text_only(sources: list[InputSource], shard: tuple[int, int], dedup: bool) -> list[InputSource]:
    """The inputs of a shard: text files (a record or TMX input has no line ranges), no --dedup."""
    if dedup:
        raise DataError(
            "--dedup cannot be combined with --shard: a shard sees only its own lines, so lines repeated "
            "in other shards would stay; expected one of the two (prepare without --shard to drop duplicates)"
        )
    for source in sources:
        if source.kind != "text":
            raise DataError(
                f"{source.label}: a {source.kind} input cannot be prepared in shards; expected text files "
                "with --shard (or prepare this input without it)"
            )
    return sources


def _text_sources(inputs: Sequence[PathLike], flag: str) -> list[InputSource]:
    """Text files, whatever their names (--src, --tgt, --tsv, --tmx)."""
    paths = [Path(p) for p in inputs]
    for path in paths:
        if not path.exists():
            raise DataError(f"{path}: no such file; expected a UTF-8 text file")
        if not path.is_file():
            raise DataError(f"{path}: not a file; expected a UTF-8 text file")
    return [InputSource("text", path) for path in paths]


def _input_sources(inputs: Sequence[PathLike] | PathLike) -> list[InputSource]:
    """Monolingual --input: text files and record inputs, in the order given."""
    if isinstance(inputs, (str, Path)):
        inputs = [inputs]
    if not inputs:
        raise DataError("no input files given; expected --input FILE")
    sources = [input_source(spec, "--input") for spec in inputs]
    kinds = {source.kind == "hf" for source in sources}
    if len(kinds) > 1:  # progress counts records for hf: and bytes for files: one or the other
        raise DataError("hf: datasets and files cannot be read by one prepare; expected one kind of --input")
    return sources


def _parallel_input(spec: PathLike) -> InputSource:
    source = input_source(spec, "--input", allow_tmx=True)
    if source.kind == "text":
        raise DataError(
            f"{source.label}: not a JSONL, Parquet, TMX or dataset input; expected --tsv for "
            "source<TAB>target lines or --src with --tgt for line-aligned files"
        )
    return source


@dataclass
class _Stats:
    """Everything counted while writing one corpus; becomes part of meta.json."""

    input_lines: int = 0
    blank_lines: int = 0  # mono: blank input lines, which end documents (no text is lost there)
    skipped: dict[str, int] = field(
        default_factory=lambda: {"empty": 0, "invalid_utf8": 0, "no_tokens": 0}
    )
    cleaning: CleaningCounts = field(default_factory=CleaningCounts)
    long_lines: int = 0  # split (mono) or truncated (parallel) for exceeding max_line_tokens
    cut_lines: int = 0  # of those, lines cut into pieces before tokenizing (counted by the reader)
    lines_per_file: dict[Path, int] = field(default_factory=dict)  # kept lines (or pairs) per file
    text_lines_per_file: dict[Path, int] = field(default_factory=dict)  # mono: non-empty, duplicates too
    counts: dict[str, int] = field(default_factory=dict)
    # Mono shards: a document boundary of the whole input before the first line, after the last.
    opens_document: bool | None = None
    closes_document: bool = False


class _Job:
    """One prepare call: inputs, tokenizer, options and the store they go to."""

    def __init__(
        self,
        kind: str,
        name: str,
        inputs: list[InputSource],
        tokenizer: Tokenizer | PathLike,
        output: PathLike,
        max_line_tokens: int,
        skip_invalid: bool,
        block_bytes: int,
        dedup: bool = False,
        plan: ShardPlan | None = None,
    ):
        if isinstance(max_line_tokens, bool) or not isinstance(max_line_tokens, int) or max_line_tokens < 1:
            raise DataError(f"max_line_tokens={max_line_tokens!r} is invalid; expected an integer >= 1")
        self.kind, self.name, self.inputs = kind, name, inputs
        self.paths = [source.label for source in inputs]  # how messages and meta.json name them
        self.fields: dict[str, str] = {}  # record fields read: field/doc_field or src_field/tgt_field
        self.tokenizer = tokenizer if isinstance(tokenizer, Tokenizer) else Tokenizer.from_pretrained(tokenizer)
        self.root = Path(output)
        self.max_line_tokens = max_line_tokens
        self.max_line_chars = LONG_LINE_CHARS_PER_TOKEN * max_line_tokens
        self.skip_invalid = skip_invalid
        # 16-byte digests of the lines (pairs) kept so far: about 100 bytes of memory each.
        self.seen: set[bytes] | None = set() if dedup else None
        self.block_bytes = block_bytes
        self.plan = plan
        self.extra_meta: dict[str, Any] = {}
        self.stats = _Stats()
        if dedup:
            self.stats.skipped["duplicate"] = 0
        self._sources: list[dict[str, Any]] | None = None

    @property
    def corpus_path(self) -> Path:
        return self.root / self.kind / self.name

    def reads_whole(self, path: Path | str) -> bool:
        """Whether this job reads all of input ``path`` (a shard may read a part of it)."""
        return self.plan is None or any(part.path == path and part.whole for part in self.plan.parts)

    def options(self) -> dict[str, Any]:
        options = {"max_line_tokens": self.max_line_tokens, "skip_invalid": self.skip_invalid}
        if self.seen is not None:  # named only when on: stores prepared without it stay up to date
            options["dedup"] = True
        return {**options, **self.fields}

    def is_duplicate(self, text: str) -> bool:
        """With ``dedup``: whether ``text`` was kept before (and remember it); else False."""
        if self.seen is None:
            return False
        key = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
        if key in self.seen:
            self.stats.skipped["duplicate"] += 1
            return True
        self.seen.add(key)
        return False

    def sources(self) -> list[dict[str, Any]]:
        """Resolved path, size and modification time of each input (each file of a
        directory; name, config and split of an hf: dataset), taken once per job."""
        if self._sources is None:
            self._sources = [source.fingerprint_record() for source in self.inputs]
        return self._sources

    def progress_total(self) -> tuple[int | None, str]:
        """(total, unit) of the progress bar: input bytes, or records when a size is unknown."""
        if self.plan is not None:  # a shard: the bytes of its parts
            parts = self.plan.parts
            return sum(p.byte_range[1] - p.byte_range[0] if p.byte_range else p.path.stat().st_size for p in parts), "B"
        sizes = [source["bytes"] for source in self.sources()]
        return (None, " records") if None in sizes else (sum(sizes), "B")

    def input_fingerprint(self) -> str:
        """SHA-256 over everything the corpus depends on; equal means nothing to redo."""
        record = {
            "prepare_version": PREPARE_VERSION,
            "kind": self.kind,
            "name": self.name,
            "sources": self.sources(),
            "options": self.options(),
            "tokenizer": self.tokenizer.fingerprint,
            **self.extra_meta,
        }
        return hashlib.sha256(json.dumps(record, sort_keys=True).encode("utf-8")).hexdigest()

    def corpus_fingerprint(self) -> str:
        """The input fingerprint, and for a shard which part of the input it holds."""
        if self.plan is None:
            return self.input_fingerprint()
        record = {"input": self.input_fingerprint(), "shard": [self.plan.index, self.plan.count]}
        return hashlib.sha256(json.dumps(record).encode("utf-8")).hexdigest()

    def existing_corpus_matches(self, fingerprint: str) -> dict[str, Any] | None:
        """meta.json of an intact corpus prepared from exactly these inputs, else None."""
        meta_path = self.corpus_path / "meta.json"
        if not meta_path.is_file():
            return None
        try:
            if read_store_json(meta_path).get("input_fingerprint") != fingerprint:
                return None
            corpus = (MonoCorpus if self.kind == "mono" else ParallelCorpus).open(self.corpus_path)
            corpus.verify()
        except StoreError:
            return None  # damaged: prepare it again
        return corpus.meta

    def check_no_other_shard(self) -> None:
        """A shard must not replace another shard of the same input (each goes to its own store)."""
        try:
            theirs = read_store_json(self.corpus_path / "meta.json").get("shard")
        except StoreError:
            return
        if self.plan is None or not isinstance(theirs, dict):
            return
        same_input = theirs.get("input_fingerprint") == self.input_fingerprint()
        if same_input and (theirs.get("index"), theirs.get("count")) != (self.plan.index, self.plan.count):
            raise DataError(
                f"{self.corpus_path}: holds shard {theirs.get('index')}/{theirs.get('count')} of this input; "
                f"expected shard {self.plan.index}/{self.plan.count} in a store of its own (another --output)"
            )

    def run(self, force: bool, show_progress: bool, write) -> PrepareResult:
        # The tokenizers library runs encode_batch on all cores unless this says "false";
        # "true" also keeps it on in a forked child, where it would otherwise switch off.
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
        fingerprint = self.corpus_fingerprint()
        # Everything made below is taken back if anything fails before the corpus is in place.
        with CreatedPaths(self.root) as created:
            ensure_store(self.root, self.tokenizer.identity(), self.tokenizer.save_pretrained, created)
            with corpus_lock(self.root, self.kind, self.name):
                remove_stale_partials(self.root, holding=(self.kind, self.name))
                self.check_no_other_shard()
                if not force:
                    meta = self.existing_corpus_matches(fingerprint)
                    if meta is not None:
                        return PrepareResult(self.kind, self.name, self.corpus_path, meta, up_to_date=True)
                started = time.monotonic()
                total, unit = self.progress_total()
                created.mkdir(self.root / self.kind)
                with tqdm(
                    total=total,
                    unit=unit,
                    unit_scale=unit == "B",
                    unit_divisor=1024,
                    desc=self.name,
                    file=sys.stderr,
                    disable=not show_progress,
                    mininterval=0.5,
                    dynamic_ncols=True,
                ) as progress, CorpusWriter(self.root, self.kind, self.name) as writer:
                    created.tree(writer.tmp)
                    write(self, writer, progress)
                    meta = self.meta(fingerprint, time.monotonic() - started)
                    path = writer.commit(meta)
                return PrepareResult(self.kind, self.name, path, meta)

    def meta(self, fingerprint: str, seconds: float) -> dict[str, Any]:
        stats = self.stats
        changed = {"nfc": stats.cleaning.nfc, "control_characters": stats.cleaning.control_characters}
        changed["split_long" if self.kind == "mono" else "truncated_long"] = stats.long_lines + stats.cut_lines
        return {
            "kind": self.kind,
            "name": self.name,
            **self.extra_meta,
            "tokenizer": self.tokenizer.identity(),
            "counts": {**stats.counts, "input_lines": stats.input_lines},
            "skipped": stats.skipped,
            "changed": changed,
            "sources": [
                {**source, "kept": stats.lines_per_file.get(path, 0)}
                for path, source in zip(self.paths, self.sources())
            ],
            "options": self.options(),
            **({"shard": self.shard_meta()} if self.plan is not None else {}),
            "input_fingerprint": fingerprint,
            "prepared_with": {"infoxlm": __version__, "prepare_version": PREPARE_VERSION},
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(seconds, 3),
        }

    def shard_meta(self) -> dict[str, Any]:
        """meta.json's ``shard``: which part, of which input, and how its ends meet the others."""
        shard = {**self.plan.meta(), "input_fingerprint": self.input_fingerprint()}
        if self.kind == "mono":
            closes = self.stats.closes_document
            opens = closes if self.stats.opens_document is None else self.stats.opens_document  # None: no line
            shard.update(opens_document=opens, closes_document=closes)
        return shard

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        return self.tokenizer.encode_batch(texts, add_special_tokens=False) if texts else []

    def check_not_empty(self, path: Path) -> None:
        """A file that gave no line of text is a mistake worth stopping for."""
        if self.stats.text_lines_per_file.get(path, self.stats.lines_per_file.get(path, 0)) == 0:
            why = " (lines that are not valid UTF-8 were skipped)" if self.skip_invalid else ""
            raise DataError(f"{path}: no non-empty line{why}; expected UTF-8 text, one sentence per line")


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


def _flatten(pieces: list[list[int]], total: int) -> np.ndarray:
    """Concatenate token lists into one uint32 array of length ``total`` without a Python loop."""
    return np.fromiter(itertools.chain.from_iterable(pieces), dtype=TOKEN_DTYPE, count=total)


# --------------------------------------------------------------------------------------
# Monolingual: read + clean (thread) -> tokenize (thread) -> write (caller)
# --------------------------------------------------------------------------------------


@dataclass
class _MonoBlock:
    """Cleaned, non-empty lines of one block; ``opens[i]``: ``texts[i]`` follows a boundary;
    ``whole[i]``: ``texts[i]`` is a whole line, not a piece of a line cut for its length."""

    texts: list[str]
    opens: list[bool]
    whole: list[bool]
    bytes_read: int


def _mono_line_blocks(job: _Job) -> Iterator[tuple[Path | str, Iterator[LineBlock], FilePart | None]]:
    """(label, its line blocks, the part read or None for all of it) for each input, text
    files and records alike; a shard's file parts only."""
    if job.plan is not None:
        for part in job.plan.parts:
            source = InputSource("text", part.path)
            yield part.path, input_line_blocks(source, {}, job.block_bytes, job.skip_invalid, **part.read_options()), part
        return
    for source in job.inputs:
        yield source.label, input_line_blocks(source, job.fields, job.block_bytes, job.skip_invalid), None


def _read_monolingual(
    job: _Job, inputs: Iterable[tuple[Path | str, Iterator[LineBlock], FilePart | None]]
) -> Iterator[_MonoBlock]:
    """Clean every input's lines, drop empty ones and mark where documents begin."""
    stats = job.stats
    starts_document = False  # an input begins a document, and so does a blank line
    ends_input = False  # the last input was read to its end (a shard of an empty part reads none)
    for path, blocks, part in inputs:
        stats.lines_per_file[path] = 0
        starts_document |= part is None or part.starts_file
        ends_input = part is None or part.ends_file
        for block in blocks:
            stats.input_lines += len(block.lines)
            texts: list[str] = []
            opens: list[bool] = []
            whole: list[bool] = []
            lines = clean_lines(block.lines, stats.cleaning)
            raw_lines, block.lines = block.lines, []  # the cleaned lines replace them
            kept = chars = duplicates = 0  # chars: counted only once a line is cut (then blocks are bounded)
            for raw, line in zip(raw_lines, lines):
                if line is None:
                    stats.skipped["invalid_utf8"] += 1
                elif not line:
                    # A blank line separates documents; a line whose text cleaning removed
                    # (only controls or invisible marks) is skipped text. Both end a document.
                    if raw.strip():  # type: ignore[union-attr]
                        stats.skipped["empty"] += 1
                    else:
                        stats.blank_lines += 1
                    starts_document = True
                elif job.is_duplicate(line):
                    duplicates += 1  # dropped; a document boundary before it stays pending
                elif len(line) <= job.max_line_chars:
                    texts.append(line)
                    opens.append(starts_document)
                    whole.append(True)
                    starts_document, kept = False, kept + 1
                else:  # tokenized piece by piece: memory stays that of ordinary lines
                    stats.cut_lines += 1
                    kept += 1
                    for piece in cut_long_line(line, job.max_line_chars):
                        if chars >= job.block_bytes:  # a block's worth of text: hand it on
                            yield _MonoBlock(texts, opens, whole, 0)
                            texts, opens, whole, chars = [], [], [], 0
                        texts.append(piece)
                        opens.append(starts_document)
                        whole.append(False)
                        starts_document, chars = False, chars + len(piece)
                    line = None
            del lines, raw_lines
            stats.lines_per_file[path] += kept
            stats.text_lines_per_file[path] = stats.text_lines_per_file.get(path, 0) + kept + duplicates
            yield _MonoBlock(texts, opens, whole, block.bytes_read)
        if part is None or part.whole:
            job.check_not_empty(path)
    # A blank line or an input's end after the last line: the last document ends here.
    stats.closes_document = starts_document or ends_input


def _write_monolingual(job: _Job, writer: CorpusWriter, progress: tqdm) -> None:
    """Stream every input file into tokens.u32, lines.i64 (N+1) and docs.i64 (D+1)."""
    blocks = prefetch(_read_monolingual(job, _mono_line_blocks(job)), name="prepare-read")
    encoded = prefetch(((block, job.tokenize(block.texts)) for block in blocks), depth=1, name="prepare-encode")
    # Closed explicitly (encoded first) so that on an error both threads stop right here.
    with closing(blocks), closing(encoded):
        _write_monolingual_blocks(job, writer, progress, encoded)


def _write_monolingual_blocks(
    job: _Job, writer: CorpusWriter, progress: tqdm, encoded: Iterator[tuple[_MonoBlock, list[list[int]]]]
) -> None:
    stats, limit = job.stats, job.max_line_tokens
    num_lines = num_tokens = num_documents = stream_length = num_unk = 0
    pending_start = False  # a document boundary not yet given to a line with tokens
    # A block's lines wait until the next line with tokens says whether the last of them
    # ends a document (and so gets a second </s>): (ids per line, ends-a-document per line).
    held: tuple[list[list[int]], list[bool]] = ([], [])
    writer.append("lines.i64", np.zeros(1), OFFSET_DTYPE)
    writer.append("tokens.u32", np.zeros(0), TOKEN_DTYPE)  # exists also for an empty shard

    def write_held() -> None:
        nonlocal stream_length, num_unk
        stream, line_ends = mono_stream(*held)
        num_unk += count_unk(stream)
        writer.append("tokens.u32", stream, TOKEN_DTYPE)
        writer.append("lines.i64", stream_length + line_ends, OFFSET_DTYPE)
        stream_length += len(stream)

    for block, token_lists in encoded:
        pieces: list[list[int]] = []
        doc_ends: list[bool] = []
        doc_starts: list[int] = []  # indices of lines that begin a document
        for ids, opens_document, whole in zip(token_lists, block.opens, block.whole):
            pending_start |= opens_document
            if not ids:  # e.g. only characters the tokenizer's normaliser drops
                stats.skipped["no_tokens"] += 1
                continue
            if not num_lines and not pieces:  # the first line begins a document, also in a shard
                stats.opens_document, pending_start = pending_start, True  # that starts inside one
            if pending_start:
                previous = doc_ends or held[1]  # the line before this one ends a document
                if previous:
                    previous[-1] = True
                doc_starts.append(num_lines + len(pieces))
                pending_start = False
            if len(ids) <= limit:
                pieces.append(ids)
            else:  # too long for one training sequence: consecutive pieces, same document
                stats.long_lines += whole  # a piece of a cut line was counted when it was cut
                pieces.extend(ids[start : start + limit] for start in range(0, len(ids), limit))
            doc_ends.extend([False] * (len(pieces) - len(doc_ends)))
        if pieces:
            if held[0]:
                write_held()
            held = (pieces, doc_ends)
        writer.append("docs.i64", np.asarray(doc_starts, dtype=np.int64), OFFSET_DTYPE)
        num_documents += len(doc_starts)
        num_lines += len(pieces)
        num_tokens += sum(map(len, pieces))
        progress.update(block.bytes_read)
        progress.set_postfix_str(f"{num_tokens:,} tokens", refresh=False)
    stats.closes_document |= pending_start
    if num_lines == 0 and job.plan is None:
        raise DataError(f"{', '.join(map(str, job.paths))}: no line produced any token; expected text")
    if num_lines:  # (a shard may hold no line: merge skips it)
        held[1][-1] = True  # the input's end ends the last document
        write_held()
    writer.append("docs.i64", np.asarray([num_lines]), OFFSET_DTYPE)
    stats.counts = {"lines": num_lines, "documents": num_documents, "tokens": num_tokens, "unk_tokens": num_unk,
                    "blank_lines": stats.blank_lines}  # fmt: skip


# --------------------------------------------------------------------------------------
# Parallel: the same three stages over pairs
# --------------------------------------------------------------------------------------


def _read_pairs(job: _Job, blocks: Iterator[PairBlock]) -> Iterator[tuple[list[str], list[str], int]]:
    """Clean both sides and keep the pairs whose sides are both non-empty."""
    stats = job.stats
    two_files = len(job.paths) == 2
    for path in job.paths:
        stats.lines_per_file[path] = 0  # non-empty lines (two files) or kept pairs (TSV)
    for block in blocks:
        stats.input_lines += len(block.src)
        kept_src: list[str] = []
        kept_tgt: list[str] = []
        src_lines = clean_lines(block.src, stats.cleaning)
        tgt_lines = clean_lines(block.tgt, stats.cleaning)
        for src, tgt in zip(src_lines, tgt_lines):
            if src is None or tgt is None:
                stats.skipped["invalid_utf8"] += 1
            elif not src or not tgt:
                stats.skipped["empty"] += 1
            elif job.is_duplicate(src + "\t" + tgt):
                pass
            else:
                if len(src) > job.max_line_chars or len(tgt) > job.max_line_chars:
                    # Truncated to max_line_tokens anyway: only the start is tokenized.
                    src, tgt = (_first_chars(side, job.max_line_chars) for side in (src, tgt))
                kept_src.append(src)
                kept_tgt.append(tgt)
        if two_files:
            stats.lines_per_file[job.paths[0]] += sum(1 for line in src_lines if line)
            stats.lines_per_file[job.paths[1]] += sum(1 for line in tgt_lines if line)
        else:
            stats.lines_per_file[job.paths[0]] += len(kept_src)
        yield kept_src, kept_tgt, block.bytes_read
    for path in job.paths:
        if job.reads_whole(path):
            job.check_not_empty(path)


def _first_chars(text: str, max_chars: int) -> str:
    """The first piece :func:`cut_long_line` would make of ``text`` (all of it if short)."""
    if len(text) <= max_chars:
        return text
    pieces = cut_long_line(text[: 2 * max_chars], max_chars)
    return pieces[0] if pieces else text[:max_chars]


def _write_pairs(job: _Job, writer: CorpusWriter, progress: tqdm, blocks: Iterator[PairBlock]) -> None:
    """Write both sides: {src,tgt}.tokens.u32 and {src,tgt}.lines.i64 (N+1 each)."""
    cleaned = prefetch(_read_pairs(job, blocks), name="prepare-read")
    # One encode call for both sides keeps every core busy on the larger batch.
    encoded = prefetch(
        ((len(src), job.tokenize(src + tgt), bytes_read) for src, tgt, bytes_read in cleaned),
        depth=1,
        name="prepare-encode",
    )
    with closing(cleaned), closing(encoded):
        _write_pair_blocks(job, writer, progress, encoded)


def _write_pair_blocks(
    job: _Job, writer: CorpusWriter, progress: tqdm, encoded: Iterator[tuple[int, list[list[int]], int]]
) -> None:
    stats, limit = job.stats, job.max_line_tokens
    num_pairs = 0
    num_tokens = {"src": 0, "tgt": 0}
    num_unk = {"src": 0, "tgt": 0}
    for side in ("src", "tgt"):
        writer.append(f"{side}.lines.i64", np.zeros(1), OFFSET_DTYPE)
        writer.append(f"{side}.tokens.u32", np.zeros(0), TOKEN_DTYPE)  # exists also for an empty shard
    for num_src, token_lists, bytes_read in encoded:
        pieces: dict[str, list[list[int]]] = {"src": [], "tgt": []}
        for src_ids, tgt_ids in zip(token_lists[:num_src], token_lists[num_src:]):
            if not src_ids or not tgt_ids:
                stats.skipped["no_tokens"] += 1
                continue
            if len(src_ids) > limit or len(tgt_ids) > limit:
                stats.long_lines += 1
            pieces["src"].append(src_ids[:limit])
            pieces["tgt"].append(tgt_ids[:limit])
        for side, side_pieces in pieces.items():
            lengths = np.fromiter(map(len, side_pieces), dtype=np.int64, count=len(side_pieces))
            total = int(lengths.sum())
            tokens = _flatten(side_pieces, total)
            num_unk[side] += count_unk(tokens)
            writer.append(f"{side}.tokens.u32", tokens, TOKEN_DTYPE)
            writer.append(f"{side}.lines.i64", num_tokens[side] + np.cumsum(lengths), OFFSET_DTYPE)
            num_tokens[side] += total
        num_pairs += len(pieces["src"])
        progress.update(bytes_read)
        progress.set_postfix_str(f"{num_pairs:,} pairs", refresh=False)
    if num_pairs == 0 and job.plan is None:
        raise DataError(f"{', '.join(map(str, job.paths))}: no pair has text on both sides; expected translations")
    stats.counts = {
        "pairs": num_pairs,
        "src_tokens": num_tokens["src"],
        "tgt_tokens": num_tokens["tgt"],
        "tokens": num_tokens["src"] + num_tokens["tgt"],
        "src_unk_tokens": num_unk["src"],
        "tgt_unk_tokens": num_unk["tgt"],
    }


def _write_two_files(job: _Job, writer: CorpusWriter, progress: tqdm) -> None:
    src_path, tgt_path = job.paths
    line_range = job.plan.parts[0].line_range if job.plan is not None else None
    blocks = read_aligned_pairs(src_path, tgt_path, job.block_bytes, job.skip_invalid, line_range)
    _write_pairs(job, writer, progress, blocks)


def _write_tsv(job: _Job, writer: CorpusWriter, progress: tqdm) -> None:
    if job.plan is None:
        blocks = read_tsv_pairs(job.paths[0], job.block_bytes, job.skip_invalid)
    elif job.plan.parts:
        part = job.plan.parts[0]
        blocks = read_tsv_pairs(part.path, job.block_bytes, job.skip_invalid, **part.read_options())
    else:  # a shard whose part of the file is empty
        blocks = iter(())
    _write_pairs(job, writer, progress, blocks)


def _write_records(job: _Job, writer: CorpusWriter, progress: tqdm) -> None:
    src_field, tgt_field = job.fields["src_field"], job.fields["tgt_field"]
    blocks = record_pair_blocks(job.inputs[0], src_field, tgt_field, job.block_bytes, job.skip_invalid)
    _write_pairs(job, writer, progress, blocks)


def _write_tmx(job: _Job, writer: CorpusWriter, progress: tqdm) -> None:
    languages = job.extra_meta["languages"]
    blocks = read_tmx_pairs(job.paths[0], languages["src"], languages["tgt"], job.block_bytes)
    _write_pairs(job, writer, progress, blocks)
