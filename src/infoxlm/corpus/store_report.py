"""What a token store holds, and how training will sample from it (``infoxlm prepare inspect``).

Training draws monolingual text (MMLM) and parallel text (TLM, XLCO) from separate pools,
so probabilities are computed per pool with XLM-R's smoothing:

    p_l ∝ (n_l / n) ** alpha        (alpha = 0.7 by default, as for XLM-R's training data)

where n_l counts the instances of corpus l (lines of a language, translation pairs of a
pair: the paper's unit and training's default) or, with ``unit="tokens"``, its tokens (of
both sides, for a pair). For each language it also counts the MMLM blocks training cuts
(:func:`~infoxlm.data.examples.pack_whole_lines`, for a ``block_size``) and the short ones, under
half a block: a block is drawn as often as any other, so a corpus with many is trained on many
near-empty examples. Each corpus's ``<unk>`` rate comes from its meta.json
(:mod:`~infoxlm.corpus.unknown_tokens`; None for a corpus prepared before it was counted), and
``warnings`` holds a line for each language above 1 %. The report is
produced only for a complete store: a missing ``store.json``, no corpus at all, no
``tokenizer/`` copy, a ``.partial-*`` leftover of an interrupted prepare or a damaged corpus
raise :class:`~infoxlm.data.store.StoreError` instead.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from infoxlm.data.examples import pack_whole_lines
from infoxlm.data.sampling import SAMPLING_UNITS, check_alpha, language_probabilities
from infoxlm.data.store import TOKENIZER_DIR, MonoCorpus, ParallelCorpus, StoreError, TokenStore
from infoxlm.corpus.unknown_tokens import format_unk_rates, unk_rates, unk_warnings
from infoxlm.errors import DataError

__all__ = ["DEFAULT_ALPHA", "DEFAULT_BLOCK_SIZE", "block_counts", "content_checksum", "format_report", "store_report"]

DEFAULT_ALPHA = 0.7
DEFAULT_BLOCK_SIZE = 512  # data.block_size's default


def block_counts(corpus: MonoCorpus, block_size: int) -> dict[str, int]:
    """``{"blocks": B, "short_blocks": S}``: the MMLM blocks of ``block_size`` tokens training
    cuts from ``corpus``, and how many of them hold fewer than ``block_size // 2`` tokens with
    their ``<s>``. One pass over the line offsets (a few million lines a second)."""
    starts = pack_whole_lines(corpus.lines.offsets, block_size - 1)  # (B + 1,); <s> takes a position
    sizes = np.diff(starts) + 1  # (B,) with the <s>
    return {"blocks": len(sizes), "short_blocks": int(np.count_nonzero(sizes < block_size // 2))}


def content_checksum(corpus: MonoCorpus | ParallelCorpus) -> str:
    """``sha256:HEX`` over a corpus's token ids and its line (and document) offsets.

    Equal for two corpora exactly when they hold the same tokens in the same lines and
    documents, however they were prepared (input format, compression, block size). Reads
    every token once.
    """
    digest = hashlib.sha256()
    if isinstance(corpus, MonoCorpus):
        arrays = [corpus.lines.tokens, corpus.lines.offsets, corpus.doc_offsets]
    else:
        arrays = [corpus.src.tokens, corpus.src.offsets, corpus.tgt.tokens, corpus.tgt.offsets]
    for array in arrays:
        digest.update(len(array).to_bytes(8, "little"))  # where one array ends and the next begins
        step = 1 << 24
        for start in range(0, len(array), step):
            digest.update(memoryview(np.ascontiguousarray(array[start : start + step])).cast("B"))
    return "sha256:" + digest.hexdigest()


def store_report(
    root: str | Path,
    alpha: float = DEFAULT_ALPHA,
    check_token_ids: bool = False,
    checksums: bool = False,
    unit: str = "instances",
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> dict[str, Any]:
    """Counts per corpus and the sampling probabilities, as a JSON-serialisable dict.

    ``checksums`` adds each corpus's :func:`content_checksum` (reads the whole store). Each
    language's :func:`block_counts` are for blocks of ``block_size`` tokens.

    Raises:
        StoreError: not a store, no corpora, no tokenizer copy, leftovers of an interrupted prepare, or a
            damaged corpus (offsets that do not match the token file, counts that disagree
            with meta.json, token ids outside the vocabulary if ``check_token_ids``).
        DataError: ``alpha`` outside (0, 1], ``unit`` not one of SAMPLING_UNITS, or
            ``block_size`` under 3.
    """
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 3:
        raise DataError(f"block size {block_size!r} is invalid; expected an integer >= 3 (<s>, a token, </s>)")
    if unit not in SAMPLING_UNITS:
        raise DataError(f"sampling unit {unit!r} is invalid; expected one of {', '.join(SAMPLING_UNITS)}")
    check_alpha(alpha, DataError)
    store = TokenStore.open(root)
    store.verify(check_token_ids=check_token_ids)
    if not store.mono and not store.parallel:
        raise StoreError(f"{store.root}: holds no corpus yet; add one with `infoxlm prepare mono` or `parallel`")
    if not (store.root / TOKENIZER_DIR).is_dir():
        raise StoreError(
            f"{store.root}: incomplete: no {TOKENIZER_DIR}/ copy of the store's tokenizer (a prepare stopped "
            "before writing it); run any `infoxlm prepare` into this store again to complete it"
        )

    mono = {
        language: {
            "lines": corpus.num_lines,
            "documents": corpus.num_documents,
            "tokens": corpus.num_tokens,
            "unk_tokens": corpus.meta.get("counts", {}).get("unk_tokens"),
            "unk_rate": unk_rates(corpus.meta)[0].rate,
            "skipped": corpus.meta.get("skipped", {}),
            **block_counts(corpus, block_size),
            **({"checksum": content_checksum(corpus)} if checksums else {}),
        }
        for language, corpus in store.mono.items()
    }
    parallel = {
        pair: {
            "pairs": corpus.num_pairs,
            "src_tokens": corpus.src.num_tokens,
            "tgt_tokens": corpus.tgt.num_tokens,
            "tokens": corpus.num_tokens,
            "unk_tokens": {rate.language: rate.unk for rate in unk_rates(corpus.meta)},
            "unk_rate": {rate.language: rate.rate for rate in unk_rates(corpus.meta)},
            "skipped": corpus.meta.get("skipped", {}),
            **({"checksum": content_checksum(corpus)} if checksums else {}),
        }
        for pair, corpus in store.parallel.items()
    }
    corpora = {**store.mono, **store.parallel}
    warnings = [line for name, corpus in corpora.items() for line in unk_warnings(name, unk_rates(corpus.meta))]
    for pool, sizes in zip((mono, parallel), store.sampling_sizes(unit)):
        if any(sizes.values()):
            probabilities = language_probabilities(sizes, alpha)
            for name, entry in pool.items():
                entry["probability"] = probabilities[name]
    return {
        "store": str(store.root),
        "tokenizer": store.info.get("tokenizer", {}),
        "alpha": float(alpha),
        "sampling_unit": unit,
        "block_size": block_size,
        "sampling": "p_l ∝ (n_l/n)^alpha per pool, n_l = "
        + ("lines (mono) / pairs (parallel) of l" if unit == "instances" else "tokens of l"),
        "mono": mono,
        "parallel": parallel,
        "warnings": warnings,
    }


def format_report(report: dict[str, Any]) -> str:
    """The report as aligned text tables (what ``infoxlm prepare inspect`` prints)."""
    tokenizer = report["tokenizer"]
    alpha = report["alpha"]
    by_tokens = report.get("sampling_unit") == "tokens"
    block_size = report.get("block_size", DEFAULT_BLOCK_SIZE)
    mono_title = (
        f"Monolingual corpora: sampling p_l ∝ (n_l/n)^{alpha:g}, n counted in {'tokens' if by_tokens else 'lines'}; "
        f"MMLM blocks of {block_size} tokens, short: under {block_size // 2}"
    )
    unit = "tokens (both sides)" if by_tokens else "pairs"
    parallel_title = f"Parallel corpora: sampling p_l ∝ (n_l/n)^{alpha:g}, n counted in {unit}"
    return "\n".join([
        f"store {report['store']}: tokenizer {tokenizer.get('file', '?')} "
        f"(sha256 {str(tokenizer.get('fingerprint', '?'))[:12]}…, vocab {tokenizer.get('vocab_size', 0):,})",
        "",
        *_pool_table(mono_title, report["mono"], MONO_COLUMNS),
        "",
        *_pool_table(parallel_title, report["parallel"], PARALLEL_COLUMNS),
    ])  # fmt: skip


# A pool's table: (column header, the cell of one corpus from its name and report entry).
Column = tuple[str, Callable[[str, dict[str, Any]], str]]


def _count(key: str) -> Callable[[str, dict[str, Any]], str]:
    return lambda name, entry: f"{entry[key]:,}"


def _probability(name: str, entry: dict[str, Any]) -> str:
    return f"{entry.get('probability', 0.0):.4f}"


def _short_share(name: str, entry: dict[str, Any]) -> str:
    blocks = entry["blocks"]
    return f"{100 * entry['short_blocks'] / blocks:.1f} %" if blocks else "-"


def _skipped(name: str, entry: dict[str, Any]) -> str:
    parts = [f"{reason} {count:,}" for reason, count in entry["skipped"].items() if count]
    return ", ".join(parts) or "-"


MONO_COLUMNS: tuple[Column, ...] = (
    ("lang", lambda name, entry: name), ("lines", _count("lines")), ("documents", _count("documents")),
    ("tokens", _count("tokens")), ("p", _probability), ("blocks", _count("blocks")), ("short", _short_share),
    ("<unk>", lambda name, entry: format_unk_rates({name: entry["unk_rate"]})), ("skipped", _skipped),
)  # fmt: skip
PARALLEL_COLUMNS: tuple[Column, ...] = (
    ("pair", lambda name, entry: name), ("pairs", _count("pairs")), ("tokens", _count("tokens")),
    ("p", _probability), ("<unk>", lambda name, entry: format_unk_rates(entry["unk_rate"])), ("skipped", _skipped),
)  # fmt: skip


def _pool_table(title: str, pool: dict[str, dict[str, Any]], columns: tuple[Column, ...]) -> list[str]:
    """The pool's title, then one row per corpus under the column headers (or "none")."""
    if not pool:
        return [title, "  none"]
    rows = [tuple(header for header, _ in columns)]
    rows += [tuple(cell(name, entry) for _, cell in columns) for name, entry in pool.items()]
    return [title, *_table(rows)]


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    """Left-align the first and last column, right-align the numbers between them."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:-1], widths[1:-1])]
        cells.append(row[-1])
        out.append("  " + "  ".join(cells))
    return out
