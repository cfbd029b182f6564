"""Monolingual text into a corpus: read + clean (thread) → tokenize (thread) → write (caller).

Blocks of ~2 MiB of text are read (:mod:`~infoxlm.corpus.text_files`, or records through
:mod:`~infoxlm.corpus.record_files`), cleaned (:mod:`~infoxlm.corpus.cleaning`), tokenized in
one ``encode_batch`` call (which the ``tokenizers`` library spreads over all cores) and
appended to ``tokens.u32``, ``lines.i64`` and ``docs.i64``, so memory does not grow with the
input, nor with its longest line: a text line too long to tokenize whole comes from the reader
in the pieces it is tokenized in (:mod:`~infoxlm.corpus.long_lines`), consecutive lines of its
document. A blank line, an input's start and a record's new ``doc_field`` value begin a
document; a document's last line gets a second ``</s>``
(:func:`~infoxlm.corpus.store_writer.mono_stream`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path

import numpy as np
from tqdm import tqdm

from infoxlm.corpus.cleaning import clean_lines
from infoxlm.corpus.inputs import InputSource
from infoxlm.corpus.long_lines import LongLines, cut_long_line
from infoxlm.corpus.prepare_job import PrepareJob
from infoxlm.corpus.record_files import input_line_blocks
from infoxlm.corpus.shards import FilePart
from infoxlm.corpus.store_writer import CorpusWriter, mono_stream
from infoxlm.corpus.text_files import LineBlock
from infoxlm.corpus.unknown_tokens import count_unk
from infoxlm.data.prefetch import prefetch
from infoxlm.data.store import OFFSET_DTYPE, TOKEN_DTYPE
from infoxlm.errors import DataError

__all__ = ["write_monolingual"]


@dataclass
class _MonoBlock:
    """Cleaned, non-empty lines of one block; ``opens[i]``: ``texts[i]`` follows a boundary;
    ``whole[i]``: ``texts[i]`` is a whole line, not a piece of a line cut for its length."""

    texts: list[str]
    opens: list[bool]
    whole: list[bool]
    bytes_read: int

    def add(self, text: str, opens: bool, whole: bool) -> None:
        self.texts.append(text)
        self.opens.append(opens)
        self.whole.append(whole)


@dataclass
class _Reading:
    """Where the reader is between entries: whether the next text begins a document; within
    a line the text reader hands over in pieces (too long to hold), whether the next entry
    goes on with it and whether that line is being dropped (a duplicate of its first piece)."""

    starts_document: bool = False
    in_line: bool = False
    dropping: bool = False


def _mono_line_blocks(job: PrepareJob) -> Iterator[tuple[Path | str, Iterator[LineBlock], FilePart | None]]:
    """(label, its line blocks, the part read or None for all of it) for each input, text
    files and records alike; a shard's file parts only. A text line longer than
    ``max_line_chars`` comes in the pieces it would be tokenized in, cut while it is read."""
    bound = {"long_lines": LongLines(job.max_line_chars, split=True)}
    if job.plan is not None:
        for part in job.plan.parts:
            source = InputSource("text", part.path)
            read = input_line_blocks(source, {}, job.block_bytes, job.skip_invalid, **part.read_options(), **bound)
            yield part.path, read, part
        return
    for source in job.inputs:
        yield source.label, input_line_blocks(source, job.fields, job.block_bytes, job.skip_invalid, **bound), None


def _read_monolingual(
    job: PrepareJob, inputs: Iterable[tuple[Path | str, Iterator[LineBlock], FilePart | None]]
) -> Iterator[_MonoBlock]:
    """Clean every input's lines, drop empty ones and mark where documents begin."""
    stats = job.stats
    reading = _Reading()  # an input begins a document, and so does a blank line
    ends_input = False  # the last input was read to its end (a shard of an empty part reads none)
    for path, blocks, part in inputs:
        stats.lines_per_file[path] = 0
        reading.starts_document |= part is None or part.starts_file
        reading.in_line = reading.dropping = False
        ends_input = part is None or part.ends_file
        for block in blocks:
            stats.input_lines += len(block.lines) - sum(block.continued or ())
            stats.cut_lines += block.cut  # lines the reader cut into pieces
            yield _clean_block(job, block, reading, path)
        if part is None or part.whole:
            job.check_not_empty(path)
    # A blank line or an input's end after the last line: the last document ends here.
    stats.closes_document = reading.starts_document or ends_input


def _clean_block(job: PrepareJob, block: LineBlock, reading: _Reading, path: Path | str) -> _MonoBlock:
    """One block's entries cleaned; a line longer than ``max_line_chars`` (or a piece of one)
    cut into pieces that are tokenized one by one, so memory stays that of ordinary lines."""
    stats = job.stats
    cleaned = _MonoBlock([], [], [], block.bytes_read)
    lines = clean_lines(block.lines, stats.cleaning)
    raw_lines, block.lines = block.lines, []  # the cleaned lines replace them
    kept = duplicates = 0
    for raw, line, goes_on in zip(raw_lines, lines, block.continued or repeat(False)):
        first, piece = not reading.in_line, reading.in_line or goes_on
        reading.in_line = goes_on
        if not first and reading.dropping:
            continue  # the rest of a duplicate line
        reading.dropping = False
        if line is None:
            stats.skipped["invalid_utf8"] += 1
        elif not line:
            if piece:
                continue  # a piece of a line whose text cleaning removed: the line goes on
            # A blank line separates documents; a line whose text cleaning removed (only
            # controls or invisible marks) is skipped text. Both end a document.
            if raw.strip():  # type: ignore[union-attr]
                stats.skipped["empty"] += 1
            else:
                stats.blank_lines += 1
            reading.starts_document = True
        elif first and job.is_duplicate(line):
            duplicates += 1  # dropped; a document boundary before it stays pending
            reading.dropping = goes_on
        else:
            kept += first
            _add_text(job, cleaned, line, reading, whole=not piece)
    stats.lines_per_file[path] += kept
    stats.text_lines_per_file[path] = stats.text_lines_per_file.get(path, 0) + kept + duplicates
    return cleaned


def _add_text(job: PrepareJob, block: _MonoBlock, text: str, reading: _Reading, whole: bool) -> None:
    """A whole line, or in pieces one that is too long to tokenize whole."""
    if whole and len(text) <= job.max_line_chars:
        block.add(text, reading.starts_document, whole=True)
    else:
        job.stats.cut_lines += whole  # a line in pieces was counted by the reader
        for piece in cut_long_line(text, job.max_line_chars):
            block.add(piece, reading.starts_document, whole=False)
            reading.starts_document = False
    reading.starts_document = False


def write_monolingual(job: PrepareJob, writer: CorpusWriter, progress: tqdm) -> None:
    """Stream every input file into tokens.u32, lines.i64 (N+1) and docs.i64 (D+1)."""
    blocks = prefetch(_read_monolingual(job, _mono_line_blocks(job)), name="prepare-read")
    encoded = prefetch(((block, job.tokenize(block.texts)) for block in blocks), depth=1, name="prepare-encode")
    # Closed explicitly (encoded first) so that on an error both threads stop right here.
    with closing(blocks), closing(encoded):
        _write_monolingual_blocks(job, writer, progress, encoded)


def _write_monolingual_blocks(
    job: PrepareJob, writer: CorpusWriter, progress: tqdm, encoded: Iterator[tuple[_MonoBlock, list[list[int]]]]
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
