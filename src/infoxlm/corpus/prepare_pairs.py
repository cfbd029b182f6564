"""Translation pairs into a corpus: the monolingual pipeline's three stages over pairs.

Both sides are cleaned, a pair kept when both have text, and both tokenized in one
``encode_batch`` call; each side is truncated to ``max_line_tokens`` and written to
``{src,tgt}.tokens.u32`` and ``{src,tgt}.lines.i64``. One writer per input form: two
line-aligned files, a TSV file, records (JSON Lines, Parquet, datasets) or a TMX file.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import closing

import numpy as np
from tqdm import tqdm

from infoxlm.corpus.cleaning import clean_lines
from infoxlm.corpus.long_lines import LongLines, first_piece
from infoxlm.corpus.parallel_text import PairBlock, read_aligned_pairs, read_tsv_pairs
from infoxlm.corpus.prepare_job import PrepareJob
from infoxlm.corpus.record_files import record_pair_blocks
from infoxlm.corpus.store_writer import CorpusWriter
from infoxlm.corpus.tmx import read_tmx_pairs
from infoxlm.corpus.unknown_tokens import count_unk
from infoxlm.data.prefetch import prefetch
from infoxlm.data.store import OFFSET_DTYPE, TOKEN_DTYPE
from infoxlm.errors import DataError

__all__ = ["write_records", "write_tmx", "write_tsv", "write_two_files"]


def _read_pairs(job: PrepareJob, blocks: Iterator[PairBlock]) -> Iterator[tuple[list[str], list[str], int]]:
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
                    src, tgt = (first_piece(side, job.max_line_chars) for side in (src, tgt))
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


def _write_pairs(job: PrepareJob, writer: CorpusWriter, progress: tqdm, blocks: Iterator[PairBlock]) -> None:
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
    job: PrepareJob, writer: CorpusWriter, progress: tqdm, encoded: Iterator[tuple[int, list[list[int]], int]]
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


def write_two_files(job: PrepareJob, writer: CorpusWriter, progress: tqdm) -> None:
    src_path, tgt_path = job.paths
    line_range = job.plan.parts[0].line_range if job.plan is not None else None
    # A side longer than can be kept is read only as far as it is kept (truncated anyway).
    bound = LongLines.for_tokens(job.max_line_tokens)
    blocks = read_aligned_pairs(src_path, tgt_path, job.block_bytes, job.skip_invalid, line_range, bound)
    _write_pairs(job, writer, progress, blocks)


def write_tsv(job: PrepareJob, writer: CorpusWriter, progress: tqdm) -> None:
    languages = tuple(job.name.split("-"))  # a first line naming them is a header
    if job.plan is None:
        blocks = read_tsv_pairs(job.paths[0], job.block_bytes, job.skip_invalid, languages)
    elif job.plan.parts:
        part = job.plan.parts[0]
        # A part read from the middle numbers its lines from 1: its first line is no header.
        headed = languages if part.starts_file else ()
        blocks = read_tsv_pairs(part.path, job.block_bytes, job.skip_invalid, headed, **part.read_options())
    else:  # a shard whose part of the file is empty
        blocks = iter(())
    _write_pairs(job, writer, progress, blocks)


def write_records(job: PrepareJob, writer: CorpusWriter, progress: tqdm) -> None:
    src_field, tgt_field = job.fields["src_field"], job.fields["tgt_field"]
    blocks = record_pair_blocks(job.inputs[0], src_field, tgt_field, job.block_bytes, job.skip_invalid)
    _write_pairs(job, writer, progress, blocks)


def write_tmx(job: PrepareJob, writer: CorpusWriter, progress: tqdm) -> None:
    languages = job.extra_meta["languages"]
    blocks = read_tmx_pairs(job.paths[0], languages["src"], languages["tgt"], job.block_bytes)
    _write_pairs(job, writer, progress, blocks)


def _flatten(pieces: list[list[int]], total: int) -> np.ndarray:
    """Concatenate token lists into one uint32 array of length ``total`` without a Python loop."""
    return np.fromiter(itertools.chain.from_iterable(pieces), dtype=TOKEN_DTYPE, count=total)
