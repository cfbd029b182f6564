"""A full disk without a full disk: writers that take a few bytes, then fail as each library
fails when the file system has no space left (what a 20 MB tmpfs shows, without root).

- ``Disk(room)``: ``room`` bytes left, shared by every write that goes through it;
  ``disk.torch_save`` is torch.save writing through it (torch's zip writer then raises its
  own RuntimeError over the OSError, as on a real disk), ``disk.opener(open)`` an ``open``
  whose files opened for writing write through it;
- ``partial_then(error)``: a writer (np.save, safetensors' save_file, tokenizers' save)
  that leaves part of its file and raises the library's own error.
"""

from __future__ import annotations

import errno
import io
import os
from pathlib import Path

import torch

REAL_TORCH_SAVE = torch.save


def enospc() -> OSError:
    """What write(2) raises on a full disk: no file name."""
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


class Disk:
    """``room`` bytes left once ``full`` (a test sets it when the disk should fill)."""

    def __init__(self, room: int = 0, full: bool = True):
        self.room, self.full = room, full

    def take(self, n: int) -> int:
        """How many of ``n`` bytes still fit; all of them unless the disk is ``full``."""
        if not self.full:
            return n
        n = min(n, self.room)
        self.room -= n
        return n

    def torch_save(self, obj, f, *args, **kwargs):
        if isinstance(f, io.BytesIO):  # memory, not the disk
            return REAL_TORCH_SAVE(obj, f, *args, **kwargs)
        if isinstance(f, (str, os.PathLike)):  # a path: torch opens it itself
            with open(f, "wb") as handle:
                return REAL_TORCH_SAVE(obj, _Stream(handle, self), *args, **kwargs)
        return REAL_TORCH_SAVE(obj, _Stream(f, self), *args, **kwargs)

    def opener(self, real_open):
        disk = self

        def open_(file, mode="r", *args, **kwargs):
            handle = real_open(file, mode, *args, **kwargs)
            return handle if "r" in mode and "+" not in mode else _Stream(handle, disk)

        return open_


class _Stream:
    """A file object whose writes go through a ``Disk``: what fits is written (and flushed),
    then ENOSPC, as a buffered file's write or flush raises on a full disk."""

    def __init__(self, handle, disk: Disk):
        self._handle, self._disk = handle, disk

    def write(self, data) -> int:
        size = len(data) if isinstance(data, str) else memoryview(data).nbytes
        n = self._disk.take(size)
        self._handle.write(data[:n] if isinstance(data, str) else memoryview(data).cast("B")[:n])
        self._handle.flush()
        if n < size:
            raise enospc()
        return n

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()


def partial_then(error: BaseException, target_argument: int = 0):
    """A writer that leaves part of a file at its ``target_argument``-th argument (0-based: a
    path or a file object), then raises ``error``, as a library does when the disk fills."""

    def write(*args, **kwargs):
        target = args[target_argument]
        if hasattr(target, "write"):
            target.write(b"\0" * 4096)
        else:
            Path(target).write_bytes(b"\0" * 4096)
        raise error

    return write
