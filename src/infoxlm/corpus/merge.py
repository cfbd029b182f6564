"""Join the stores of ``infoxlm prepare --shard I/N`` into one store, without tokenizing again.

Every corpus found in the given stores is written to the output store once:

* the shards of one sharded prepare (same corpus, same whole-input fingerprint: the same
  files, options and tokenizer) are concatenated in shard order; all N must be there, each
  once. Where a document of the input goes on across a shard boundary, the earlier shard
  closed it with a second ``</s>`` and the later one opened a new document; the merge takes
  both back, so the result is exactly the corpus one prepare of the whole input writes (the
  same ``inspect --json`` checksum), and its meta.json carries that prepare's fingerprint
  (preparing the whole input into the merged store finds it up to date);
* a corpus that is not a shard and is in one store only is copied as it is.

Refused, before anything is written: an output inside a token store or run directory, or a
non-empty directory that is not a store; a store with a corpus still being written (by a
process on any host: its corpus lock is held); stores of different tokenizers, a missing or
repeated shard, shards of different inputs or shard counts, a corpus that is in two stores
without being shards of one prepare, a corpus the output store already holds.

Token ids and offsets are copied in chunks of memory-mapped arrays, offsets shifted by what
precedes them. Each corpus is written by :class:`~infoxlm.corpus.store_writer.CorpusWriter` (renamed
into place only when complete); everything the merge creates is taken back if it fails.

Example::

    >>> results = merge_stores("store", ["part0", "part1"])    # doctest: +SKIP
    >>> print(results[0].summary())                           # doctest: +SKIP
    ru: 1,000 lines in 12 documents, 23,456 tokens -> store/mono/ru
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from infoxlm.data.corpus_lock import corpus_lock, remove_stale_partials
from infoxlm.created_paths import CreatedPaths
from infoxlm.corpus.prepare_job import PrepareResult
from infoxlm.corpus.store_writer import CorpusWriter, check_store_output, ensure_store
from infoxlm.data.store import OFFSET_DTYPE, TOKEN_DTYPE, TOKENIZER_DIR, MonoCorpus, ParallelCorpus, StoreError, TokenStore
from infoxlm.errors import DataError
from infoxlm.special_tokens import EOS_ID

__all__ = ["merge_stores"]

PathLike = str | Path
_CHUNK = 1 << 24  # values copied per step: 64 MiB of token ids, 128 MiB of offsets


@dataclass
class _Piece:
    """One store's part of a corpus: the whole corpus, or one shard of it."""

    store: Path
    corpus: MonoCorpus | ParallelCorpus
    shard: dict[str, Any] | None  # meta.json's "shard" of a shard

    @property
    def files(self) -> list[Path]:
        return [p for p in self.corpus.path.iterdir() if p.suffix in (".u32", ".i64")]


def merge_stores(
    output: PathLike, stores: Sequence[PathLike], *, show_progress: bool = True, replace: bool = False
) -> list[PrepareResult]:
    """Write every corpus of ``stores`` into the store ``output``, shards joined.

    ``replace``: a corpus ``output`` holds already is replaced (swapped in whole once the
    merged one is complete, as a prepare replaces it) instead of refused.

    Raises:
        StoreError: a store that is missing, damaged or incomplete, or of another tokenizer
            than the others (or than ``output``).
        DataError: shards that do not make one whole input (missing, repeated, of other
            inputs), a corpus in two stores, a corpus ``output`` holds already.
    """
    output = check_store_output(output)
    roots = [Path(store) for store in stores]
    if not roots:
        raise DataError("no stores to merge; expected STORE...")
    opened = _open_stores(output, roots)
    groups: dict[tuple[str, str], list[_Piece]] = {}
    for root, store in zip(roots, opened):
        for kind, corpora in (("mono", store.mono), ("parallel", store.parallel)):
            for name, corpus in corpora.items():
                groups.setdefault((kind, name), []).append(_Piece(root, corpus, corpus.meta.get("shard")))
    ordered = {key: _in_shard_order(f"{key[0]}/{key[1]}", pieces) for key, pieces in groups.items()}
    for kind, name in ordered:
        if not replace and (output / kind / name).exists():
            raise DataError(f"{output / kind / name}: exists; expected a store without the merged corpora (a new OUT)")

    total_bytes = sum(path.stat().st_size for pieces in ordered.values() for piece in pieces for path in piece.files)
    tokenizer_copy = roots[0] / TOKENIZER_DIR
    results = []
    with CreatedPaths(output) as created:
        ensure_store(output, opened[0].info["tokenizer"], lambda d: shutil.copytree(tokenizer_copy, d), created)
        with tqdm(
            total=total_bytes,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc="merge",
            file=sys.stderr,
            disable=not show_progress,
            mininterval=0.5,
            dynamic_ncols=True,
        ) as progress:
            for (kind, name), pieces in ordered.items():
                results.append(_write_corpus(output, kind, name, pieces, progress, created))
    return results


def _write_corpus(
    output: Path, kind: str, name: str, pieces: list[_Piece], progress: tqdm, created: CreatedPaths
) -> PrepareResult:
    """Write one corpus of the merge into ``output``, under its corpus lock."""
    created.mkdir(output / kind)
    with corpus_lock(output, kind, name):
        remove_stale_partials(output, holding=(kind, name))  # what a killed merge left of it
        with CorpusWriter(output, kind, name) as writer:
            created.tree(writer.tmp)
            if kind == "mono":
                joins = _copy_mono(writer, pieces, progress)
            else:
                joins = 0
                _copy_parallel(writer, pieces, progress)
            path = writer.commit(_merged_meta(pieces, joins))
    created.tree(path)
    corpus = (MonoCorpus if kind == "mono" else ParallelCorpus).open(path)
    corpus.verify()  # the counts in meta.json against the files written
    return PrepareResult(kind, name, path, corpus.meta)


def _open_stores(output: Path, roots: list[Path]) -> list[TokenStore]:
    """The stores, each checked whole, all of one tokenizer, none of them ``output``."""
    resolved = [root.resolve() for root in roots]
    for i, root in enumerate(resolved):
        if root == output.resolve():
            raise DataError(f"{roots[i]}: is the output store; expected OUT apart from the stores merged into it")
        if root in resolved[:i]:
            raise DataError(f"{roots[i]}: given twice; expected each store once")
    opened = []
    for root in roots:
        store = TokenStore.open(root)
        store.verify()
        if not (root / TOKENIZER_DIR).is_dir():
            raise StoreError(
                f"{root}: incomplete: no {TOKENIZER_DIR}/ copy of the store's tokenizer; run any "
                "`infoxlm prepare` into this store again to complete it"
            )
        opened.append(store)
    first = opened[0].info["tokenizer"].get("fingerprint")
    for root, store in zip(roots[1:], opened[1:]):
        theirs = store.info["tokenizer"].get("fingerprint")
        if theirs != first:
            raise StoreError(
                f"{root}: written with tokenizer {str(theirs)[:12]}…, but {roots[0]} with {str(first)[:12]}…; "
                "expected stores of one tokenizer"
            )
    return opened


def _in_shard_order(corpus: str, pieces: list[_Piece]) -> list[_Piece]:
    """The pieces of one corpus in shard order, checked to make one whole input."""
    shards = [piece for piece in pieces if piece.shard is not None]
    if not shards:
        if len(pieces) > 1:
            raise DataError(
                f"{corpus}: in both {pieces[0].store} and {pieces[1].store}, not as shards of one prepare; "
                "expected each corpus in one store, or the shards of one `prepare --shard`"
            )
        return pieces
    if len(shards) < len(pieces):
        whole = next(piece for piece in pieces if piece.shard is None)
        raise DataError(
            f"{corpus}: {whole.store} holds the whole corpus and {shards[0].store} a shard of it; "
            "expected the shards of one prepare only"
        )
    first = shards[0]
    for piece in shards[1:]:
        if piece.shard["input_fingerprint"] != first.shard["input_fingerprint"]:
            raise DataError(
                f"{corpus}: {first.store} holds a shard of input {first.shard['input_fingerprint'][:12]}… but "
                f"{piece.store} of input {piece.shard['input_fingerprint'][:12]}… (other files, options or "
                "tokenizer); expected the shards of one prepare"
            )
        if piece.shard["count"] != first.shard["count"]:
            raise DataError(
                f"{corpus}: {first.store} holds shard {first.shard['index']}/{first.shard['count']} but "
                f"{piece.store} shard {piece.shard['index']}/{piece.shard['count']}; expected one count N"
            )
    count = first.shard["count"]
    by_index: dict[int, _Piece] = {}
    for piece in shards:
        index = piece.shard["index"]
        if index in by_index:
            raise DataError(
                f"{corpus}: shard {index}/{count} is in both {by_index[index].store} and {piece.store}; "
                "expected each shard once"
            )
        by_index[index] = piece
    missing = [index for index in range(count) if index not in by_index]
    if missing:
        given = ", ".join(f"{index} in {by_index[index].store}" for index in sorted(by_index))
        raise DataError(
            f"{corpus}: shard{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} of {count} "
            f"missing (given: {given}); expected all {count} shards of the prepare"
        )
    return [by_index[index] for index in range(count)]


def _joins(pieces: list[_Piece]) -> list[bool]:
    """Per piece: whether its first line goes on with the document the previous non-empty
    piece ended with, i.e. no blank line or file end lies between them in the input."""
    joined = []
    boundary = True  # the corpus's start
    for piece in pieces:
        shard = piece.shard or {"opens_document": True, "closes_document": True}
        if piece.corpus.num_lines == 0:  # an empty shard: only its boundaries count
            joined.append(False)
            boundary |= shard["opens_document"] or shard["closes_document"]
            continue
        joined.append(not (boundary or shard["opens_document"]))
        boundary = shard["closes_document"]
    return joined


def _copy(writer: CorpusWriter, file_name: str, array: np.ndarray, dtype: np.dtype, shift: int, progress: tqdm) -> None:
    """Append ``array + shift`` in chunks (memory stays at one chunk)."""
    for start in range(0, len(array), _CHUNK):
        chunk = np.asarray(array[start : start + _CHUNK])
        writer.append(file_name, chunk + shift if shift else chunk, dtype)
        progress.update(chunk.nbytes)


def _copy_mono(writer: CorpusWriter, pieces: list[_Piece], progress: tqdm) -> int:
    """Concatenate the pieces' streams; returns how many documents were joined across pieces."""
    joined = _joins(pieces)
    # Whether a piece's last document goes on in the next non-empty piece (then its second
    # </s> is taken back).
    trimmed = [False] * len(pieces)
    last = None
    for i, piece in enumerate(pieces):
        if piece.corpus.num_lines:
            if joined[i]:
                trimmed[last] = True
            last = i
    writer.append("tokens.u32", np.zeros(0), TOKEN_DTYPE)
    writer.append("lines.i64", np.zeros(1), OFFSET_DTYPE)
    num_tokens = num_lines = 0
    for piece, joins, trims in zip(pieces, joined, trimmed):
        corpus = piece.corpus
        tokens, offsets = corpus.lines.tokens, corpus.lines.offsets  # (T,) uint32, (N + 1,) int64
        if trims and not (len(tokens) >= 2 and tokens[-1] == EOS_ID and tokens[-2] == EOS_ID):
            raise StoreError(f"{corpus.path}/tokens.u32: does not end with </s></s>; the shard is damaged")
        kept = len(tokens) - trims
        _copy(writer, "tokens.u32", tokens[:kept], TOKEN_DTYPE, 0, progress)
        line_ends = offsets[1:]  # (N,)
        _copy(writer, "lines.i64", line_ends[: len(line_ends) - trims], OFFSET_DTYPE, num_tokens, progress)
        if trims:
            writer.append("lines.i64", np.asarray([num_tokens + kept]), OFFSET_DTYPE)
        starts = corpus.doc_offsets[:-1][int(joins) :]  # (D,) or (D - 1,) documents begun here
        writer.append("docs.i64", starts + num_lines, OFFSET_DTYPE)
        progress.update(corpus.doc_offsets.nbytes)
        num_tokens += kept
        num_lines += corpus.num_lines
    writer.append("docs.i64", np.asarray([num_lines]), OFFSET_DTYPE)
    return sum(joined)


def _copy_parallel(writer: CorpusWriter, pieces: list[_Piece], progress: tqdm) -> None:
    for side in ("src", "tgt"):
        writer.append(f"{side}.tokens.u32", np.zeros(0), TOKEN_DTYPE)
        writer.append(f"{side}.lines.i64", np.zeros(1), OFFSET_DTYPE)
        num_tokens = 0
        for piece in pieces:
            sequences = getattr(piece.corpus, side)
            _copy(writer, f"{side}.tokens.u32", sequences.tokens, TOKEN_DTYPE, 0, progress)
            _copy(writer, f"{side}.lines.i64", sequences.offsets[1:], OFFSET_DTYPE, num_tokens, progress)
            num_tokens += sequences.num_tokens


def _summed(dicts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for d in dicts:
        for key, value in d.items():
            total[key] = total.get(key, 0) + value
    return total


def _merged_meta(pieces: list[_Piece], joins: int) -> dict[str, Any]:
    """meta.json of the merged corpus: a copy for a whole corpus; for shards, that of one
    prepare of the whole input, counts summed, with where it came from. (The writer adds the
    largest token id of each file, as it does for a prepare: the max over the pieces.)"""
    base = pieces[0].corpus.meta
    if pieces[0].shard is None:
        return dict(base)
    metas = [piece.corpus.meta for piece in pieces]
    counts = _summed([meta["counts"] for meta in metas])
    if "documents" in counts:
        counts["documents"] -= joins
    sources = [
        {**source, "kept": sum(meta["sources"][i]["kept"] for meta in metas)}
        for i, source in enumerate(base["sources"])
    ]
    for source in sources:  # what one prepare checks file by file, a shard only for its whole files
        if source["kept"] == 0:
            raise DataError(f"{source['path']}: no non-empty line; expected UTF-8 text, one sentence per line")
    meta = {key: value for key, value in base.items() if key != "shard"}
    meta.update(
        counts=counts,
        skipped=_summed([meta["skipped"] for meta in metas]),
        changed=_summed([meta["changed"] for meta in metas]),
        sources=sources,
        input_fingerprint=base["shard"]["input_fingerprint"],
        merged_from={"shards": len(pieces), "stores": [str(piece.store.resolve()) for piece in pieces]},
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        seconds=round(sum(meta.get("seconds", 0) for meta in metas), 3),
    )
    return meta
