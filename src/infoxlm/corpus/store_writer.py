"""The token store's writer: a new store, and each corpus written whole or not at all.

The layout it writes, and the reader training uses, is :mod:`infoxlm.data.store`. A corpus
is written into a hidden ``.partial-*`` directory by :class:`CorpusWriter` and renamed into
place only once it is complete (``meta.json`` included), so an interrupted prepare never
leaves a corpus that looks whole; its writer holds the corpus's lock meanwhile
(:mod:`infoxlm.data.corpus_lock`). :func:`ensure_store` gives a new store its ``tokenizer/``
copy before ``store.json``, and records what it creates so that a failing command takes it
back (:class:`~infoxlm.created_paths.CreatedPaths`).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..created_paths import CreatedPaths, naming
from ..data.corpus_lock import LOCKS_DIR, PARTIAL_PREFIX
from ..data.store import MAX_TOKEN_ID, STORE_FORMAT, STORE_VERSION, TOKEN_DTYPE, TOKENIZER_DIR, StoreError, TokenStore
from ..outputs import check_output_dir
from ..special_tokens import EOS_ID

__all__ = [
    "CorpusWriter", "check_store_output", "create_or_open_store", "ensure_store", "mono_stream",
    "remove_store_if_unused", "write_json_atomic",
]


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as ``path`` whole or not at all (a temporary file renamed over it)."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with naming(tmp):
            tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def mono_stream(lines: list[list[int]], ends_document: list[bool]) -> tuple[np.ndarray, np.ndarray]:
    """A monolingual corpus's stream layout: (stream, line ends).

    Each line's ids followed by ``</s>``, and by one more where ``ends_document``; line ends
    (k,) int64 are offsets into the stream, one past each line's last ``</s>``.

    >>> stream, ends = mono_stream([[7, 8], [9]], [False, True])
    >>> stream.tolist(), ends.tolist()
    ([7, 8, 2, 9, 2, 2], [3, 6])
    """
    lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))  # (k,) ids per line
    units = lengths + 1 + np.asarray(ends_document, dtype=np.int64)  # (k,) with the separators
    line_ends = np.cumsum(units)  # (k,)
    stream = np.full(int(line_ends[-1]) if len(lines) else 0, EOS_ID, dtype=TOKEN_DTYPE)
    # Where each id goes: its line's start in the stream, plus its place in the line.
    total = int(lengths.sum())
    place = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    ids = np.fromiter(itertools.chain.from_iterable(lines), dtype=TOKEN_DTYPE, count=total)
    stream[np.repeat(line_ends - units, lengths) + place] = ids
    return stream, line_ends


def ensure_store(
    root: str | Path,
    tokenizer_identity: dict[str, Any],
    write_tokenizer: Callable[[Path], Any] | None = None,
    created: CreatedPaths | None = None,
) -> bool:
    """Make ``root`` a store for this tokenizer without opening its corpora.

    ``write_tokenizer(directory)`` saves the tokenizer; given, the store gets its
    ``tokenizer/`` copy before ``store.json`` (a store missing it gets it now). What is
    created is recorded in ``created`` so that a failing command can take it back.

    Returns True if the store was created now. Raises StoreError if it exists and was
    written with a different tokenizer. Unlike :func:`create_or_open_store` a damaged corpus
    in the store does not get in the way (prepare replaces it).
    """
    root = Path(root)
    created = created if created is not None else CreatedPaths(root)  # kept by no one: nothing undone
    check_store_output(root)
    if (root / "store.json").is_file():
        theirs = TokenStore.read_info(root).get("tokenizer", {}).get("fingerprint")
        if theirs != tokenizer_identity["fingerprint"]:
            raise StoreError(
                f"{root}: written with tokenizer {theirs[:12] if theirs else None}…, but this tokenizer is "
                f"{tokenizer_identity['fingerprint'][:12]}…; use the store's tokenizer or a new --output"
            )
        if write_tokenizer is not None:  # a store of an older version may lack it: complete it
            with CreatedPaths(root) as files:
                _install_tokenizer(root, write_tokenizer, files)
        return False
    created.mkdir(root)
    with CreatedPaths(root) as files:  # undone at once if the store cannot be completed
        if write_tokenizer is not None:
            _install_tokenizer(root, write_tokenizer, files)
        files.tree(root / "store.json")
        write_json_atomic(
            root / "store.json",
            {"format": STORE_FORMAT, "version": STORE_VERSION, "tokenizer": tokenizer_identity},
        )
    # Later, other processes may add corpora to this store: take it back only while unused.
    created.on_failure(lambda: remove_store_if_unused(root))
    return True


def create_or_open_store(root: str | Path, tokenizer_identity: dict[str, Any]) -> TokenStore:
    """Open the store at ``root``, creating it for this tokenizer if it does not exist yet.

    Raises StoreError if the store was written with a different tokenizer.
    """
    ensure_store(root, tokenizer_identity)
    return TokenStore.open(root)


def check_store_output(root: str | Path) -> Path:
    """Refuse, before any work, a store path that a command must not write a store into: a
    file or a path under one, a path inside another token store or a run directory (it would
    break that store or run), a non-empty directory that is not a store (its files would end
    up beside the store's). A new or empty directory, or a store, is fine; returns ``root``."""
    return check_output_dir(root, written_by_us=_written_as_a_store, flag=None)


def _written_as_a_store(root: Path) -> bool:
    """A store, or what a store's creation left before its store.json (tokenizer/, …)."""
    entries = {"store.json", TOKENIZER_DIR, "mono", "parallel", LOCKS_DIR}
    return (root / "store.json").is_file() or all(
        p.name in entries or p.name.startswith(f".{TOKENIZER_DIR}-") for p in root.iterdir()
    )


def _install_tokenizer(root: Path, write_tokenizer: Callable[[Path], Any], created: CreatedPaths) -> None:
    """Write ``root/tokenizer`` unless it is there: into a temporary directory, then renamed."""
    target = root / TOKENIZER_DIR
    if target.is_dir():
        return
    tmp = root / f".{TOKENIZER_DIR}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    created.tree(tmp)
    with naming(tmp):
        write_tokenizer(tmp)
    try:
        os.replace(tmp, target)
    except OSError:
        if not target.is_dir():
            raise
        shutil.rmtree(tmp, ignore_errors=True)  # another prepare of this store was faster
    created.tree(target)


def remove_store_if_unused(root: Path) -> None:
    """Undo the creation of a store that holds no corpus (complete or being written)."""
    for kind in ("mono", "parallel"):
        folder = root / kind
        if folder.is_dir() and any(folder.iterdir()):
            return  # another corpus (or another process's partial) is there: keep the store
    for kind in ("mono", "parallel"):
        if (root / kind).is_dir():
            (root / kind).rmdir()
    (root / "store.json").unlink(missing_ok=True)
    shutil.rmtree(root / TOKENIZER_DIR, ignore_errors=True)
    shutil.rmtree(root / LOCKS_DIR, ignore_errors=True)
    try:
        root.rmdir()
    except OSError:
        pass  # the user's own files are in it


class CorpusWriter:
    """Writes one corpus into a temporary directory and renames it into place on ``commit``.

    Use as a context manager: leaving the block with an exception removes the temporary
    directory, and an existing complete corpus of the same name stays untouched until the
    new one is complete. The largest id appended to each token file goes into meta.json
    (``max_token_id``), so that training checks the ids against the vocabulary without
    reading them.
    """

    def __init__(self, store_root: Path, kind: str, name: str):
        self.final = store_root / kind / name
        self.tmp = store_root / kind / f"{PARTIAL_PREFIX}{name}-{os.getpid()}"
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir(parents=True)
        self._files: dict[str, Any] = {}
        self._max_ids: dict[str, int] = {}  # per token file: the largest id appended (-1: none yet)

    def append(self, file_name: str, array: np.ndarray, dtype: np.dtype) -> None:
        """Append values to one of the corpus's binary files (created on first use)."""
        values = np.ascontiguousarray(array, dtype=dtype)  # as the file will hold them
        if np.dtype(dtype) == TOKEN_DTYPE:
            largest = int(values.max()) if values.size else -1
            self._max_ids[file_name] = max(self._max_ids.get(file_name, -1), largest)
        with naming(self.tmp / file_name):  # a failed write (ENOSPC) names the file
            if file_name not in self._files:
                self._files[file_name] = open(self.tmp / file_name, "wb")
            self._files[file_name].write(values.tobytes())

    def commit(self, meta: dict[str, Any]) -> Path:
        """Write meta.json (``meta``, to which the largest id of each token file is added as
        ``max_token_id``) and put the corpus in place."""
        meta[MAX_TOKEN_ID] = {name: (m if m >= 0 else None) for name, m in sorted(self._max_ids.items())}
        for name, f in list(self._files.items()):
            with naming(self.tmp / name):
                f.flush()
                os.fsync(f.fileno())
                f.close()
        self._files.clear()
        write_json_atomic(self.tmp / "meta.json", meta)
        # Swap in the complete corpus; the old one (if any) is removed only after.
        old = None
        if self.final.exists():
            old = self.final.with_name(f"{PARTIAL_PREFIX}old-{self.final.name}-{os.getpid()}")
            os.replace(self.final, old)
        os.replace(self.tmp, self.final)
        if old is not None:
            shutil.rmtree(old)
        return self.final

    def abort(self) -> None:
        for f in self._files.values():
            try:
                f.close()
            except OSError:  # closing flushes, which fails again on a full disk
                pass
        self._files.clear()
        shutil.rmtree(self.tmp, ignore_errors=True)
        try:  # the mono/ or parallel/ folder too, if this corpus would have been its first
            self.tmp.parent.rmdir()
        except OSError:
            pass

    def __enter__(self) -> "CorpusWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
