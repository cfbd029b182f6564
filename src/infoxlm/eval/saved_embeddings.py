"""Sentence vectors written to disk as they are made, so that a stopped run resumes where it stopped.

``infoxlm mine`` embeds each side's distinct sentences in pieces of ``piece`` rows and appends
each piece to ``DIR/{side}.vectors`` (raw rows, float16 or float32, row i the vector of the
side's sentence i) beside ``DIR/{side}.json``, which records what the vectors are of: the
model, layer, pooling, length bound, the digest of the sentences, the width, the precision and
the piece size. A run that finds both with the same record starts after the last whole piece
(a piece cut short by Ctrl-C is dropped and embedded again); a run with another record (other
sentences, another model or layer) starts the side afresh.

Pieces are cut at fixed rows and each is embedded alone (its sentences sorted by length inside
it), so the batches, and so the vectors, are the same bytes whether a run went through at once
or was stopped and resumed.

Example::

    >>> import numpy as np, pathlib, tempfile
    >>> saved = SavedEmbeddings.open(pathlib.Path(tempfile.mkdtemp()), "src", {"model": "m"}, rows=3, dim=2, piece=2)
    >>> saved.done
    0
    >>> saved.append(np.ones((2, 2), dtype=np.float32))
    >>> saved.done, saved.complete
    (2, False)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import interrupt
from ..errors import InfoXLMError
from ..outputs import full_disk_named, write_text_atomically

__all__ = ["DTYPES", "FORMAT", "SavedEmbeddings", "check_embeddings_dir"]

FORMAT = "infoxlm-mining-embeddings"
DTYPES = ("float16", "float32")
_SUFFIXES = (".json", ".vectors")


def check_embeddings_dir(directory: Path, flag: str = "--embeddings") -> None:
    """Refuse a path that is a file, or a directory holding anything but saved vectors (a
    directory of the user's own is never written into, nor removed afterwards)."""
    if directory.exists() and not directory.is_dir():
        raise InfoXLMError(f"{flag} {directory}: is a file; expected a directory for the vectors being made")
    if directory.is_dir():
        foreign = sorted(p.name for p in directory.iterdir() if not p.name.endswith(_SUFFIXES) and not p.name.startswith("."))
        if foreign:
            raise InfoXLMError(
                f"{flag} {directory}: holds {', '.join(foreign[:3])}{' …' if len(foreign) > 3 else ''}, "
                "not vectors of infoxlm mine; expected a new directory or one a run of infoxlm mine made"
            )


@dataclass
class SavedEmbeddings:
    """One side's vectors on disk: ``done`` rows of ``rows`` written so far."""

    path: Path  # DIR/{side}.vectors
    record: dict[str, Any]  # what DIR/{side}.json holds
    done: int
    fresh_reason: str | None  # why saved vectors were not reused (None: none were there, or they were)

    @classmethod
    def open(cls, directory: Path, side: str, identity: dict[str, Any], *, rows: int, dim: int,
             piece: int, dtype: str = "float16") -> SavedEmbeddings:
        """The saved vectors of ``side`` if they were made of the same (``identity``, rows, dim,
        piece, dtype); otherwise an empty file for them, and the record written first."""
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        record = {"format": FORMAT, "version": 1, **identity, "rows": rows, "dim": dim, "piece": piece, "dtype": dtype}
        record = json.loads(json.dumps(record))  # tuples → lists, as read back
        meta, path = directory / f"{side}.json", directory / f"{side}.vectors"
        found = _read_record(meta)
        if found == record and path.is_file():
            row_bytes = dim * np.dtype(dtype).itemsize
            whole = min(rows, path.stat().st_size // row_bytes)
            done = whole if whole == rows else whole - whole % piece  # a piece cut short is made again
            with full_disk_named(path):
                os.truncate(path, done * row_bytes)
            return cls(path, record, done, None)
        reason = None if found is None else _difference(found, record)
        directory.mkdir(parents=True, exist_ok=True)
        # The record first: vectors never lie beside another's record.
        write_text_atomically(meta, json.dumps(record, indent=2) + "\n")
        with full_disk_named(path):
            path.write_bytes(b"")
        return cls(path, record, 0, reason)

    @property
    def rows(self) -> int:
        return self.record["rows"]

    @property
    def complete(self) -> bool:
        return self.done == self.rows

    def append(self, vectors: np.ndarray) -> None:
        """Add the next piece's vectors (n, dim); a Ctrl-C waits until they are on disk."""
        if vectors.shape[1:] != (self.record["dim"],) or self.done + len(vectors) > self.rows:
            raise ValueError(f"{self.path}: rows of width {self.record['dim']} expected, up to {self.rows - self.done}; "
                             f"got shape {vectors.shape}")
        data = np.ascontiguousarray(vectors, dtype=self.record["dtype"]).tobytes()
        with interrupt.deferred(), full_disk_named(self.path), open(self.path, "ab") as f:
            f.write(data)
            self.done += len(vectors)

    def load(self, device: torch.device | str = "cpu", chunk: int = 65536) -> torch.Tensor:
        """All rows as L2-normalised float32 on ``device``: (rows, dim), converted a chunk at a
        time, so the only copy in full is the result."""
        if not self.complete:
            raise ValueError(f"{self.path}: {self.done} of {self.rows} rows written")
        stored = np.memmap(self.path, dtype=self.record["dtype"], mode="r", shape=(self.rows, self.record["dim"]))
        out = torch.empty(self.rows, self.record["dim"], dtype=torch.float32, device=device)
        for start in range(0, self.rows, chunk):
            block = torch.from_numpy(np.asarray(stored[start : start + chunk], dtype=np.float32)).to(device)
            out[start : start + len(block)] = block / block.norm(dim=1, keepdim=True).clamp_min(1e-12)
        del stored
        return out


def _read_record(meta: Path) -> dict[str, Any] | None:
    try:
        found = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # missing or damaged: made afresh
    return found if isinstance(found, dict) else None


# How a recorded value that differs is named in the message (the rest: "layer 3, not 4").
_WHAT = {"digest": "other sentences", "model": "another model", "rows": "another number of sentences"}


def _difference(found: dict[str, Any], wanted: dict[str, Any]) -> str:
    """Which recorded values differ, in words: ``they were made with layer 3, not 4``."""
    parts = [_WHAT.get(k) or f"{k} {found.get(k)!r}, not {wanted[k]!r}" for k in wanted if found.get(k) != wanted[k]]
    return "they were made with " + ", ".join(dict.fromkeys(parts[:3]))
