"""Small synthetic token stores for the training-pipeline tests, written with CorpusWriter.

Token ids are drawn from the ordinary vocabulary [4, VOCAB - 1); each corpus is returned
alongside the Python lists it was written from, so tests can rebuild streams by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from infoxlm.corpus.store_writer import CorpusWriter, mono_stream, write_json_atomic
from infoxlm.data.store import OFFSET_DTYPE, STORE_FORMAT, STORE_VERSION, TOKEN_DTYPE

VOCAB = 1000


def write_store(root: Path, vocab_size: int = VOCAB) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    identity = {"fingerprint": "0" * 64, "file": "tokenizer.json", "backend": "tokenizers", "vocab_size": vocab_size}
    write_json_atomic(root / "store.json", {"format": STORE_FORMAT, "version": STORE_VERSION, "tokenizer": identity})
    return root


def _offsets(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def write_mono(root: Path, language: str, documents: list[list[list[int]]]) -> None:
    """documents: a list of documents, each a list of lines, each a list of token ids."""
    lines = [line for doc in documents for line in doc]
    ends_document = [i == len(doc) - 1 for doc in documents for i in range(len(doc))]
    stream, line_ends = mono_stream(lines, ends_document)
    with CorpusWriter(root, "mono", language) as writer:
        writer.append("tokens.u32", stream, TOKEN_DTYPE)
        writer.append("lines.i64", np.concatenate([[0], line_ends]), OFFSET_DTYPE)
        writer.append("docs.i64", _offsets([len(doc) for doc in documents]), OFFSET_DTYPE)
        writer.commit({"language": language, "lines": len(lines), "documents": len(documents)})


def write_parallel(root: Path, pair: str, pairs: list[tuple[list[int], list[int]]]) -> None:
    with CorpusWriter(root, "parallel", pair) as writer:
        for side, name in ((0, "src"), (1, "tgt")):
            sentences = [p[side] for p in pairs]
            writer.append(f"{name}.tokens.u32", np.array([t for s in sentences for t in s], dtype=np.int64), TOKEN_DTYPE)
            writer.append(f"{name}.lines.i64", _offsets([len(s) for s in sentences]), OFFSET_DTYPE)
        writer.commit({"pair": pair, "pairs": len(pairs)})


def random_documents(rng: np.random.Generator, num_docs: int, max_lines: int = 4, max_len: int = 30, vocab: int = VOCAB):
    return [
        [rng.integers(4, vocab - 1, rng.integers(1, max_len + 1)).tolist() for _ in range(rng.integers(1, max_lines + 1))]
        for _ in range(num_docs)
    ]


def random_pairs(rng: np.random.Generator, num_pairs: int, max_len: int = 40, vocab: int = VOCAB):
    return [
        (
            rng.integers(4, vocab - 1, rng.integers(1, max_len + 1)).tolist(),
            rng.integers(4, vocab - 1, rng.integers(1, max_len + 1)).tolist(),
        )
        for _ in range(num_pairs)
    ]


def build_store(root: Path, seed: int = 0, mono=("de", "en", "sw"), pairs=("en-de", "en-sw"), docs=(60, 200, 10), npairs=(300, 40)):
    """A store with a few languages of different sizes and a few parallel corpora."""
    rng = np.random.default_rng(seed)
    write_store(root)
    content = {"mono": {}, "parallel": {}}
    for language, n in zip(mono, docs):
        content["mono"][language] = random_documents(rng, n)
        write_mono(root, language, content["mono"][language])
    for pair, n in zip(pairs, npairs):
        content["parallel"][pair] = random_pairs(rng, n)
        write_parallel(root, pair, content["parallel"][pair])
    return content
