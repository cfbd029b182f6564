"""One prepare call between its inputs and the store: options, fingerprints, meta.json.

:class:`PrepareJob` holds what :func:`~infoxlm.corpus.prepare.prepare_monolingual` and
:func:`~infoxlm.corpus.prepare.prepare_parallel` were given, counts what the readers and
writers of :mod:`~infoxlm.corpus.prepare_mono` and :mod:`~infoxlm.corpus.prepare_pairs` see
(:class:`PrepareStats`), and runs one of those writers around the store.

A corpus is written by :class:`~infoxlm.corpus.store_writer.CorpusWriter` into a ``.partial-*``
directory that becomes the corpus only when complete. Everything a call creates on disk (the
store, its parents, ``store.json``, the ``tokenizer/`` copy, the partial corpus) is recorded
in one :class:`~infoxlm.created_paths.CreatedPaths`, which takes it all back if the call
fails for any reason (bad input found half-way, a full disk, no permission, Ctrl-C); a store
that other corpora have joined meanwhile is kept.

Re-running is cheap: meta.json records a fingerprint of the inputs (resolved paths, sizes,
modification times), the options and the tokenizer; when it matches, nothing is done. A shard
records which part of the input it holds (``shard`` in meta.json, :meth:`PrepareJob.shard_meta`).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from tqdm import tqdm

from infoxlm.corpus.cleaning import CleaningCounts
from infoxlm.corpus.inputs import InputSource
from infoxlm.corpus.long_lines import LONG_LINE_CHARS_PER_TOKEN
from infoxlm.corpus.shards import ShardPlan
from infoxlm.corpus.store_writer import CorpusWriter, ensure_store
from infoxlm.corpus.unknown_tokens import format_unk_rates, unk_rates, unk_warnings
from infoxlm.created_paths import CreatedPaths
from infoxlm.data.corpus_lock import corpus_lock, remove_stale_partials
from infoxlm.data.store import MonoCorpus, ParallelCorpus, StoreError, read_store_json
from infoxlm.errors import DataError
from infoxlm.tokenizer import Tokenizer
from infoxlm.version import __version__

__all__ = ["PREPARE_VERSION", "PrepareJob", "PrepareResult", "PrepareStats"]

PathLike = str | Path

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
        changed = self.meta.get("changed", {})
        if changed.get("split_long"):  # lines of more than max_line_tokens tokens: nothing lost
            text += f" ({_count(changed['split_long'], 'long line')} split)"
        if changed.get("truncated_long"):  # what lay past max_line_tokens is not in the corpus
            text += f" ({_count(changed['truncated_long'], 'long pair')} truncated)"
        shard = self.meta.get("shard")
        return text + f" -> {self.path}" + (f" (shard {shard['index']}/{shard['count']})" if shard else "")

    def warnings(self) -> list[str]:
        """One line for each language of the corpus whose ``<unk>`` rate is above 1 %: text the
        tokenizer does not cover (:mod:`~infoxlm.corpus.unknown_tokens`)."""
        return unk_warnings(self.name, unk_rates(self.meta))


def _count(n: int, what: str) -> str:
    return f"1 {what}" if n == 1 else f"{n:,} {what}s"


@dataclass
class PrepareStats:
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


class PrepareJob:
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
        self.stats = PrepareStats()
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

    def run(self, force: bool, show_progress: bool, write: Callable[[PrepareJob, CorpusWriter, tqdm], None]) -> PrepareResult:
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
