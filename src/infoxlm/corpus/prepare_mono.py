"""Monolingual text into a corpus: read + clean (thread) → tokenize (thread) → write (caller).

Blocks of ~2 MiB of text are read (:mod:`~infoxlm.corpus.text_files`, or records through
:mod:`~infoxlm.corpus.record_files`), cleaned (:mod:`~infoxlm.corpus.cleaning`), tokenized in
one ``encode_batch`` call (which the ``tokenizers`` library spreads over all cores) and
appended to ``tokens.u32``, ``lines.i64`` and ``docs.i64``, so memory does not grow with the
input. A blank line, an input's start and a record's new ``doc_field`` value begin a document;
a document's last line gets a second ``</s>`` (:func:`~infoxlm.corpus.store_writer.mono_stream`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from infoxlm.corpus.cleaning import clean_lines
from infoxlm.corpus.inputs import InputSource
from infoxlm.corpus.long_lines import cut_long_line
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


def _mono_line_blocks(job: PrepareJob) -> Iterator[tuple[Path | str, Iterator[LineBlock], FilePart | None]]:
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
    job: PrepareJob, inputs: Iterable[tuple[Path | str, Iterator[LineBlock], FilePart | None]]
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
