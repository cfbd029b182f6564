"""Prepare raw text for pre-training: clean, tokenize and write it into a token store.

Two entry points, one per kind of corpus (the command line calls them):

* :func:`prepare_monolingual` -- files of one language, one sentence or paragraph per line,
  a blank line ending a document, become ``STORE/mono/<lang>``;
* :func:`prepare_parallel` -- two line-aligned files (or one two-column TSV file) of an
  English-xx pair become ``STORE/parallel/<src>-<tgt>``.

Records (JSON Lines, Parquet, datasets; :mod:`~infoxlm.corpus.record_files`) and TMX files
(:mod:`~infoxlm.corpus.tmx`) are read into the same line and pair blocks as text files, so the
same text gives the same corpus whatever its format.

The pipeline streams (:mod:`~infoxlm.corpus.prepare_mono`, :mod:`~infoxlm.corpus.prepare_pairs`):
blocks of ~2 MiB of text are read, cleaned, tokenized and appended to the corpus files, so
memory does not grow with the input; a line too long to tokenize whole is cut first
(:mod:`~infoxlm.corpus.long_lines`). A call writes its corpus whole or not at all, takes back
whatever it created if it fails, and does nothing when its inputs, options and tokenizer are
those the corpus was prepared from (:mod:`~infoxlm.corpus.prepare_job`).

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

from collections.abc import Callable, Sequence
from pathlib import Path

from infoxlm.corpus.inputs import InputSource, input_source, record_fields, refuse_url
from infoxlm.corpus.languages import canonical_language, language_name, parse_language_pair
from infoxlm.corpus.prepare_job import PrepareJob, PrepareResult
from infoxlm.corpus.prepare_mono import write_monolingual
from infoxlm.corpus.prepare_pairs import write_records, write_tmx, write_tsv, write_two_files
from infoxlm.corpus.shards import plan_aligned_shard, plan_shard
from infoxlm.corpus.text_files import DEFAULT_BLOCK_BYTES
from infoxlm.errors import DataError
from infoxlm.tokenizer import Tokenizer

__all__ = ["DEFAULT_MAX_LINE_TOKENS", "monolingual_job", "parallel_job", "prepare_monolingual", "prepare_parallel"]

PathLike = str | Path

DEFAULT_MAX_LINE_TOKENS = 512


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
    line of more than ``long_lines.LONG_LINE_CHARS_PER_TOKEN * max_line_tokens`` characters is first
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
    job = monolingual_job(
        language, inputs, tokenizer, output, max_line_tokens=max_line_tokens, skip_invalid=skip_invalid,
        dedup=dedup, block_bytes=block_bytes, field=field, doc_field=doc_field, shard=shard,
    )  # fmt: skip
    return job.run(force, show_progress, write_monolingual)


def monolingual_job(
    language: str,
    inputs: Sequence[PathLike],
    tokenizer: Tokenizer | PathLike,
    output: PathLike,
    *,
    max_line_tokens: int = DEFAULT_MAX_LINE_TOKENS,
    skip_invalid: bool = False,
    dedup: bool = False,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    field: str | None = None,
    doc_field: str | None = None,
    shard: tuple[int, int] | None = None,
) -> PrepareJob:
    """The job :func:`prepare_monolingual` runs, its arguments checked (nothing is written)."""
    language = canonical_language(language)
    sources = _input_sources(inputs)
    plan = None
    if shard is not None:
        plan = plan_shard([source.path for source in _text_only(sources, shard, dedup)], shard)
    job = PrepareJob("mono", language, sources, tokenizer, output, max_line_tokens, skip_invalid, block_bytes, dedup, plan)
    job.fields = record_fields(sources, field, doc_field)
    job.extra_meta = {"language": language, "language_name": language_name(language)}
    return job


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
    of more than ``long_lines.LONG_LINE_CHARS_PER_TOKEN * max_line_tokens`` characters is first cut to
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
    job, write = parallel_job(
        pair, tokenizer, output, src=src, tgt=tgt, tsv=tsv, input=input, tmx=tmx, src_field=src_field,
        tgt_field=tgt_field, allow_non_english=allow_non_english, max_line_tokens=max_line_tokens,
        skip_invalid=skip_invalid, dedup=dedup, block_bytes=block_bytes, shard=shard,
    )  # fmt: skip
    return job.run(force, show_progress, write)


def parallel_job(
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
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    shard: tuple[int, int] | None = None,
) -> tuple[PrepareJob, Callable[..., None]]:
    """The job :func:`prepare_parallel` runs and the writer of its input form, its arguments
    checked (nothing is written)."""
    src_language, tgt_language = parse_language_pair(pair, allow_non_english)
    name = f"{src_language}-{tgt_language}"
    given = [flag for flag, value in (("--src/--tgt", src if src is not None else tgt), ("--tsv", tsv),
                                      ("--input", input), ("--tmx", tmx)) if value is not None]  # fmt: skip
    if len(given) > 1:
        raise DataError(f"give either --tsv or --src with --tgt (or --input, or --tmx), not {' and '.join(given)}")
    if (src_field is not None or tgt_field is not None) and input is None:
        raise DataError("--src-field and --tgt-field name fields of --input records; expected --input")
    if tsv is not None:
        sources, form, write = _text_sources([tsv], "--tsv"), "tsv", write_tsv
    elif src is not None and tgt is not None:
        sources, form, write = _text_sources([src, tgt], "--src/--tgt"), "two files", write_two_files
    elif tmx is not None:
        sources, form, write = [InputSource("tmx", _text_sources([tmx], "--tmx")[0].path)], "tmx", write_tmx
    elif input is not None:
        sources = [_parallel_input(input)]
        form, write = sources[0].kind, write_tmx if sources[0].kind == "tmx" else write_records
    else:
        raise DataError(f"parallel corpus {name} needs --src and --tgt files, one --tsv or --tmx file, or --input")
    plan = None
    if shard is not None:
        paths = [source.path for source in _text_only(sources, shard, dedup)]
        plan = plan_shard(paths, shard) if tsv is not None else plan_aligned_shard(*paths, shard)
    job = PrepareJob("parallel", name, sources, tokenizer, output, max_line_tokens, skip_invalid, block_bytes, dedup, plan)
    if sources[0].has_records:
        job.fields = {"src_field": src_field or src_language, "tgt_field": tgt_field or tgt_language}
    job.extra_meta = {"languages": {"src": src_language, "tgt": tgt_language}, "format": form}
    return job, write


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
    for spec in inputs:
        refuse_url(spec, flag)
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
