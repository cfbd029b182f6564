"""The token store: tokenized corpora on disk, memory-mapped for training (the reader).

One store holds any number of monolingual corpora (one per language) and parallel corpora
(one per language pair), all tokenized with the same tokenizer::

    STORE/
      store.json                  format version + the tokenizer's identity (fingerprint, vocab size)
      tokenizer/                  a copy of that tokenizer (pre-training hands it on to exports)
      mono/de/                    a monolingual corpus
        tokens.u32                the MMLM text stream: every kept line's token ids followed by
                                  </s>, and one more </s> after a document's last line
        lines.i64                 (N + 1) offsets into tokens: line i = tokens[lines[i]:lines[i+1]],
                                  its </s> (and a document's closing </s>) included
        docs.i64                  (D + 1) offsets into lines: document j = lines docs[j] … docs[j+1]
        meta.json                 counts, the largest id in tokens.u32, skipped lines and why,
                                  sources; written last
      parallel/en-de/
        src.tokens.u32  src.lines.i64   the first language's side (en), no special tokens
        tgt.tokens.u32  tgt.lines.i64   the second language's side (de); line i ↔ line i
        meta.json

The monolingual stream is laid out as XLM-R's fairseq data is (every sentence ends with
``</s>``; the blank line between documents is one more ``</s>``), so MMLM blocks cut from it
(:mod:`~infoxlm.data.examples`) are plain slices and a model continued from XLM-R sees the
sentence boundaries it was trained with. Format version 1 stored lines without ``</s>``; such
a store is refused with the command that rebuilds it.

Stores are written by :mod:`infoxlm.corpus.store_writer`: a corpus goes into a hidden
temporary directory and is renamed into place only once it is complete (``meta.json``
included), so an interrupted prepare never leaves a corpus that looks whole; a process killed
outright leaves a ``.partial-*`` directory that ``TokenStore.partial_corpora()`` lists and the
next prepare removes (one whose corpus lock is held belongs to a live writer, maybe on another
host, and is left alone: :mod:`~infoxlm.data.corpus_lock`). A new store gets its
``tokenizer/`` copy before ``store.json``, so a directory with ``store.json`` always has it
(a store from an older version that lacks it is completed by the next prepare, and
``infoxlm prepare inspect`` calls it incomplete until then). Token ids are little-endian
uint32; offsets little-endian int64.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import InfoXLMError
from ..json_files import RECORD_BYTES, read_json
from ..outputs import TOKEN_STORE_FORMAT
from ..special_tokens import EOS_ID
from .corpus_lock import partial_corpus_dirs, partial_writer

STORE_FORMAT = TOKEN_STORE_FORMAT
STORE_VERSION = 2  # 2: monolingual lines end with </s> (1: bare lines)
TOKEN_DTYPE = np.dtype("<u4")
OFFSET_DTYPE = np.dtype("<i8")
TOKENIZER_DIR = "tokenizer"  # STORE/tokenizer: a copy of the store's tokenizer
# meta.json's {tokens file name: the largest id written to it, null for an empty file}. Optional
# in format version 2: readers that predate it ignore the key, and a corpus written before it
# has none (training then reads its ids once, see token_ids.py).
MAX_TOKEN_ID = "max_token_id"


class StoreError(InfoXLMError):
    """A token store that is missing, incomplete or written with another tokenizer."""


def read_store_json(path: Path) -> dict[str, Any]:
    """A store's ``store.json`` or a corpus's ``meta.json``; missing, not a regular file or not
    JSON is a StoreError."""
    if not os.path.lexists(path):
        raise StoreError(f"{path}: missing")
    expected = f"the {path.name} infoxlm prepare writes"
    fields = read_json(path, what=expected, max_bytes=RECORD_BYTES, error=StoreError)
    if not isinstance(fields, dict):
        raise StoreError(f"{path}: expected a JSON object ({expected}), found {type(fields).__name__}")
    return fields


def _memmap(path: Path, dtype: np.dtype) -> np.ndarray:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise StoreError(f"{path}: missing; the corpus is damaged (prepare it again)") from None
    if size % dtype.itemsize:
        raise StoreError(
            f"{path}: {size} bytes is not a whole number of {dtype.itemsize}-byte values; "
            "the file is truncated (prepare the corpus again)"
        )
    if size == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


def _check_offsets(offsets: np.ndarray, end: int, path: Path, what: str) -> None:
    """Offsets must start at 0, never decrease and end at ``end`` (the length they index)."""
    if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != end:
        raise StoreError(f"{path}: offsets do not span 0…{end} {what}; the corpus is damaged")
    # Chunked so that a corpus of billions of lines needs no second copy in memory.
    step = 1 << 24
    for start in range(0, len(offsets) - 1, step):
        window = np.asarray(offsets[start : start + step + 1])
        falls = np.flatnonzero(np.diff(window) < 0)
        if falls.size:
            i = int(falls[0])  # entry start + i + 1 is below the one before it
            raise StoreError(
                f"{path}: offsets decrease at entry {start + i + 1} ({window[i]} → {window[i + 1]}); "
                "the corpus is damaged"
            )


def outside_vocabulary(path: Path, token_id: int, position: int, vocab_size: int) -> StoreError:
    """The error for an id of ``path`` at or past ``vocab_size`` (a damaged or foreign file)."""
    return StoreError(
        f"{path}: token id {token_id} at position {position} is outside the vocabulary "
        f"(size {vocab_size}); the corpus is damaged"
    )


def scan_token_ids(tokens: np.ndarray, vocab_size: int, path: Path) -> None:
    """Every id below ``vocab_size``, else a StoreError naming the file, the id and the size."""
    step = 1 << 26
    for start in range(0, len(tokens), step):
        chunk = np.asarray(tokens[start : start + step])
        if int(chunk.max()) >= vocab_size:
            position = start + int(np.argmax(chunk >= vocab_size))  # the first id outside
            raise outside_vocabulary(path, int(tokens[position]), position, vocab_size)


def _check_count(meta: dict[str, Any], key: str, actual: int, path: Path) -> None:
    recorded = meta.get("counts", {}).get(key)
    if recorded is not None and recorded != actual:
        raise StoreError(
            f"{path}/meta.json: records {recorded} {key} but the files hold {actual}; the corpus is damaged"
        )


class TokenSequences:
    """Variable-length token sequences over one memory-mapped token file and its offsets."""

    def __init__(self, tokens_path: Path, offsets_path: Path):
        self.tokens_path, self.offsets_path = tokens_path, offsets_path
        self.tokens = _memmap(tokens_path, TOKEN_DTYPE)  # (num_tokens,)
        self.offsets = _memmap(offsets_path, OFFSET_DTYPE)  # (num_sequences + 1,)
        if len(self.offsets) == 0 or self.offsets[-1] != len(self.tokens):
            raise StoreError(f"{offsets_path}: offsets do not cover {tokens_path.name}; the corpus is damaged")

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        """Token ids of sequence i, uint32 (a view into the memory map)."""
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def verify(self, vocab_size: int | None = None) -> None:
        """Check the offsets fully (and every token id if ``vocab_size`` is given)."""
        _check_offsets(self.offsets, len(self.tokens), self.offsets_path, "tokens")
        if vocab_size is not None:
            scan_token_ids(self.tokens, vocab_size, self.tokens_path)

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)


@dataclass
class MonoCorpus:
    """One language's monolingual text: lines grouped into documents."""

    language: str
    path: Path
    lines: TokenSequences
    doc_offsets: np.ndarray  # (D + 1,) int64 offsets into lines
    meta: dict[str, Any]

    @classmethod
    def open(cls, path: Path) -> "MonoCorpus":
        meta = read_store_json(path / "meta.json")
        return cls(
            language=path.name,
            path=path,
            lines=TokenSequences(path / "tokens.u32", path / "lines.i64"),
            doc_offsets=np.asarray(_memmap(path / "docs.i64", OFFSET_DTYPE)),
            meta=meta,
        )

    @property
    def num_tokens(self) -> int:
        """Text tokens: the stream without the ``</s>`` after each line and each document."""
        documents = np.count_nonzero(np.diff(self.doc_offsets))  # an empty one has no closing </s>
        return self.lines.num_tokens - self.num_lines - int(documents)

    @property
    def num_lines(self) -> int:
        return len(self.lines)

    def text(self, i: int) -> np.ndarray:
        """Token ids of line i without its ``</s>`` (nor a document's closing one)."""
        j = np.searchsorted(self.doc_offsets, i + 1)  # i ends its document when i + 1 is a boundary
        closes_document = j < len(self.doc_offsets) and self.doc_offsets[j] == i + 1
        return self.lines[i][: -2 if closes_document else -1]

    @property
    def num_documents(self) -> int:
        return len(self.doc_offsets) - 1

    def verify(self, vocab_size: int | None = None) -> None:
        """Raise StoreError unless offsets, documents and meta.json counts are consistent."""
        self.lines.verify(vocab_size)
        _check_offsets(self.doc_offsets, self.num_lines, self.path / "docs.i64", "lines")
        self._check_line_ends()
        _check_count(self.meta, "lines", self.num_lines, self.path)
        _check_count(self.meta, "documents", self.num_documents, self.path)
        _check_count(self.meta, "tokens", self.num_tokens, self.path)


    def _check_line_ends(self) -> None:
        """Every line of the stream must be non-empty and end with ``</s>``."""
        step = 1 << 24
        for start in range(0, self.num_lines, step):
            offsets = np.asarray(self.lines.offsets[start : start + step + 1])  # (k + 1,)
            ends = offsets[1:]  # (k,) one past each line's last token
            ok = (ends > offsets[:-1]) & (self.lines.tokens[np.maximum(ends - 1, 0)] == EOS_ID)
            if not ok.all():
                raise StoreError(
                    f"{self.path}/tokens.u32: line {start + int(np.argmin(ok))} does not end with </s>; "
                    "the corpus is damaged (prepare it again)"
                )


@dataclass
class ParallelCorpus:
    """Translation pairs: line i of ``src`` translates line i of ``tgt``."""

    pair: str  # "en-de": src is en, tgt is de
    path: Path
    src: TokenSequences
    tgt: TokenSequences
    meta: dict[str, Any]

    @classmethod
    def open(cls, path: Path) -> "ParallelCorpus":
        meta = read_store_json(path / "meta.json")
        corpus = cls(
            pair=path.name,
            path=path,
            src=TokenSequences(path / "src.tokens.u32", path / "src.lines.i64"),
            tgt=TokenSequences(path / "tgt.tokens.u32", path / "tgt.lines.i64"),
            meta=meta,
        )
        if len(corpus.src) != len(corpus.tgt):
            raise StoreError(f"{path}: {len(corpus.src)} source lines but {len(corpus.tgt)} target lines")
        return corpus

    @property
    def languages(self) -> tuple[str, str]:
        # meta.json names both sides; needed when a tag has subtags of its own (pt-BR-en).
        named = self.meta.get("languages")
        if isinstance(named, dict) and "src" in named and "tgt" in named:
            return named["src"], named["tgt"]
        src, tgt = self.pair.split("-", 1)
        return src, tgt

    @property
    def num_pairs(self) -> int:
        return len(self.src)

    @property
    def num_tokens(self) -> int:
        return self.src.num_tokens + self.tgt.num_tokens

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self.src[i], self.tgt[i]

    def verify(self, vocab_size: int | None = None) -> None:
        """Raise StoreError unless both sides' offsets and meta.json counts are consistent."""
        self.src.verify(vocab_size)
        self.tgt.verify(vocab_size)
        _check_count(self.meta, "pairs", self.num_pairs, self.path)
        _check_count(self.meta, "tokens", self.num_tokens, self.path)


class TokenStore:
    """A store directory: its tokenizer identity and its complete corpora.

    >>> store = TokenStore.open("data/store")          # doctest: +SKIP
    >>> store.mono["de"].lines[0]                       # doctest: +SKIP
    memmap([ 1342,  90, ...], dtype=uint32)
    """

    def __init__(self, root: Path, info: dict[str, Any]):
        self.root = root
        self.info = info
        self.mono: dict[str, MonoCorpus] = {
            p.name: MonoCorpus.open(p) for p in self._corpus_dirs("mono")
        }
        self.parallel: dict[str, ParallelCorpus] = {
            p.name: ParallelCorpus.open(p) for p in self._corpus_dirs("parallel")
        }

    @staticmethod
    def read_info(root: str | Path) -> dict[str, Any]:
        """store.json of the store at ``root``, checked for format and version."""
        root = Path(root)
        if not os.path.lexists(root / "store.json"):
            raise StoreError(f"{root}: not a token store (no store.json); create one with `infoxlm prepare`")
        info = read_store_json(root / "store.json")
        if info.get("format") == STORE_FORMAT and info.get("version") == 1:
            raise StoreError(
                f"{root}: a token store of format version 1 (monolingual lines without </s>); this infoxlm "
                f"reads version {STORE_VERSION}. Run the same `infoxlm prepare` commands into a new --output "
                "(parallel corpora are unchanged; monolingual ones are laid out as XLM-R's data)"
            )
        if info.get("format") != STORE_FORMAT or info.get("version") != STORE_VERSION:
            raise StoreError(
                f"{root}/store.json: format {info.get('format')!r} version {info.get('version')!r}; "
                f"expected {STORE_FORMAT!r} version {STORE_VERSION}"
            )
        return info

    @classmethod
    def open(cls, root: str | Path) -> "TokenStore":
        root = Path(root)
        return cls(root, cls.read_info(root))

    def _corpus_dirs(self, kind: str) -> Iterator[Path]:
        folder = self.root / kind
        if folder.is_dir():
            yield from sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))

    def partial_corpora(self) -> list[Path]:
        """Directories left by an interrupted or failed prepare."""
        return partial_corpus_dirs(self.root)

    def verify(self, check_token_ids: bool = False) -> None:
        """Raise StoreError on leftovers of an interrupted prepare or on a damaged corpus.

        Offsets and meta.json counts are always checked; ``check_token_ids`` also reads
        every token once to check it is inside the vocabulary.
        """
        partial = self.partial_corpora()
        for path in partial:
            with partial_writer(path) as writer:
                if writer is not None:
                    raise StoreError(
                        f"{path}: being prepared by {writer.describe()}; wait for it to finish, then run this again"
                    )
        if partial:
            raise StoreError(
                f"{partial[0]}: left by an interrupted or failed prepare; run the prepare again "
                "(it removes this) or delete the directory"
            )
        vocab_size = self.vocab_size if check_token_ids else None
        for corpus in [*self.mono.values(), *self.parallel.values()]:
            corpus.verify(vocab_size)

    @property
    def vocab_size(self) -> int:
        return int(self.info["tokenizer"]["vocab_size"])

    def sampling_sizes(self, unit: str) -> tuple[dict[str, int], dict[str, int]]:
        """(per language, per pair) the n_l of p_l ∝ (n_l/n)^α: lines and pairs for
        ``unit="instances"``, tokens (both sides of a pair) for ``"tokens"``."""
        if unit == "instances":
            return {k: c.num_lines for k, c in self.mono.items()}, {k: c.num_pairs for k, c in self.parallel.items()}
        if unit == "tokens":
            return {k: c.num_tokens for k, c in self.mono.items()}, {k: c.num_tokens for k, c in self.parallel.items()}
        raise ValueError(f"sampling unit must be instances or tokens, got {unit!r}")


