"""Token ids against the vocabulary, for training: checked when a store is opened and per batch.

An id at or past the vocabulary size would crash the embedding lookup at some later step
(``IndexError``), so training refuses it first, in one line naming the file, the id and the
size, without reading the store at open:

- at open (:func:`check_recorded_token_ids`), each tokens file's largest id, which prepare
  and merge record in its corpus's meta.json (``max_token_id``), is compared with the size:
  a store of a foreign tokenizer is refused before the run directory is made;
- per batch (:func:`gather_checked`), the ids gathered from the memory maps are checked as
  they are copied: a file changed after it was written (its record no longer holds) is
  refused at the step that reads the damaged part.

``infoxlm prepare inspect --check-token-ids`` (``TokenStore.verify``) reads every id instead.

    >>> gather_checked(np.array([5, 6, 7, 8], dtype=np.uint32), np.array([2]), np.array([2]), 9, Path("t")).tolist()
    [7, 8]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .ragged import gather_runs
from .store import MAX_TOKEN_ID, StoreError, TokenStore, outside_vocabulary, scan_token_ids

__all__ = ["check_recorded_token_ids", "gather_checked", "recorded_max_id"]


def recorded_max_id(meta: dict[str, Any], tokens_path: Path) -> int | None:
    """The largest id of ``tokens_path`` that its corpus's meta.json records (-1 for an empty
    file), or None where it records none (a corpus written before meta.json had the key)."""
    recorded = meta.get(MAX_TOKEN_ID, {})
    where = f"{tokens_path.parent}/meta.json: {MAX_TOKEN_ID}"
    if not isinstance(recorded, dict):
        raise StoreError(f"{where} is {recorded!r}; expected {{tokens file: largest id or null}}")
    if tokens_path.name not in recorded:
        return None
    value = recorded[tokens_path.name]
    if value is None:
        return -1
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StoreError(f"{where}[{tokens_path.name!r}] is {value!r}; expected a token id (an integer >= 0) or null")
    return value


def check_recorded_token_ids(store: TokenStore) -> None:
    """Raise StoreError, naming the file, the id and the vocabulary size, if a tokens file of
    ``store`` holds an id outside its vocabulary by its meta.json record (a foreign tokenizer).

    Reads no token where the largest id is recorded and inside; a file whose recorded id is
    outside is read up to the first such id, to name its position. A corpus written before
    meta.json recorded it (small stores in practice) is read whole instead: a max over each
    memory-mapped file, about 1 s per GiB from disk.
    """
    corpora = [(c, [c.lines]) for c in store.mono.values()] + [(c, [c.src, c.tgt]) for c in store.parallel.values()]
    for corpus, files in corpora:
        for sequences in files:
            recorded = recorded_max_id(corpus.meta, sequences.tokens_path)
            if recorded is not None and recorded < store.vocab_size:
                continue
            scan_token_ids(sequences.tokens, store.vocab_size, sequences.tokens_path)
            if recorded is not None:  # recorded outside, yet every id is inside: meta.json is wrong
                raise StoreError(
                    f"{corpus.path}/meta.json: records {recorded} as the largest id of "
                    f"{sequences.tokens_path.name}, which holds none >= {store.vocab_size}; the corpus is damaged"
                )


def gather_checked(
    tokens: np.ndarray, starts: np.ndarray, lengths: np.ndarray, vocab_size: int, path: Path
) -> np.ndarray:
    """:func:`~infoxlm.data.ragged.gather_runs` of ``tokens`` (the memory map of ``path``),
    refusing an id at or past ``vocab_size`` with the error that names its position in
    ``path``. starts, lengths (m,) → (Σ lengths,) int64; the check is one max over the result."""
    gathered = gather_runs(tokens, starts, lengths)
    if gathered.size and int(gathered.max()) >= vocab_size:
        first = int(np.argmax(gathered >= vocab_size))  # in the gathered ids
        ends = np.cumsum(lengths)  # (m,) one past each run in the gathered ids
        run = int(np.searchsorted(ends, first, side="right"))  # the run holding it
        position = int(starts[run]) + first - int(ends[run] - lengths[run])
        raise outside_vocabulary(path, int(gathered[first]), position, vocab_size)
    return gathered
