"""Advisory file locks that say who holds them, valid across hosts.

A process that writes something others must not touch (a corpus being prepared, a run
directory) holds an exclusive lock on a small lock file for as long as it writes, and records
in that file who it is (process id and host name). Another process, maybe on another node of a
shared file system or in another PID namespace, tells a live writer from a dead one by the
lock alone: the kernel (or NFS's lock manager) drops a lock when its holder exits, however it
exits, so a lock that can be taken has no live holder. A process id alone cannot tell: the same
number names another process, or none, on another host or in a container.

    >>> with exclusive_lock(tmp / "corpus.lock"):                 # doctest: +SKIP
    ...     ...                                                   # write
    >>> with lock_if_free(tmp / "corpus.lock") as holder:         # doctest: +SKIP
    ...     if holder is None:                                    # no one writes: clean up
    ...         ...

Locks belong to an open file, so a second ``exclusive_lock`` of the same path is refused even
in the same process. Where ``fcntl`` is missing (Windows) nothing is locked (``exclusive_lock``
does not wait, ``lock_if_free`` finds every lock free) and ``LOCKS_WORK`` is False, so that
callers can fall back on something weaker.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCKS_WORK", "LockHeld", "LockHolder", "exclusive_lock", "lock_if_free"]

LOCKS_WORK = fcntl is not None


@dataclass(frozen=True)
class LockHolder:
    """Who holds a lock, as it recorded itself (None where that could not be read)."""

    pid: int | None = None
    host: str | None = None

    def describe(self) -> str:
        """``process 4711 (on host node07)``, or as much of it as is known."""
        who = f"process {self.pid}" if self.pid is not None else "another process"
        return who + (f" (on host {self.host})" if self.host else "")


class LockHeld(Exception):
    """``exclusive_lock(..., wait=False)`` found the lock held; ``holder`` says by whom."""

    def __init__(self, path: Path, holder: LockHolder):
        super().__init__(f"{path}: held by {holder.describe()}")
        self.path, self.holder = path, holder


@contextlib.contextmanager
def exclusive_lock(path: str | Path, *, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created, with its folder, if missing) for the block.

    The holder's process id and host are written into the file. ``wait=False`` raises
    :class:`LockHeld` instead of waiting when another open file holds it; a file system that
    keeps no locks raises OSError (ENOLCK, EOPNOTSUPP, …). The lock goes when the block ends
    or the process dies.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a+", encoding="utf-8")
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
                except BlockingIOError:
                    raise LockHeld(path, _read_holder(path)) from None
                if not _same_file(handle.fileno(), path):
                    continue  # its last holder removed the file after we opened it: open the new one
                # Who we are, for those who find the lock held (append mode: the write lands
                # at the new end, 0).
                handle.truncate(0)
                handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n")
                handle.flush()
            yield
            return
        finally:
            handle.close()  # drops the lock


@contextlib.contextmanager
def lock_if_free(path: str | Path) -> Iterator[LockHolder | None]:
    """Yield None, holding ``path``'s lock (shared) for the block, if no one holds it
    exclusively; else yield its :class:`LockHolder` at once, without waiting.

    A missing file is free (a writer creates it before it writes). The lock is shared so that
    a read-only store can be probed; it still keeps a writer from starting until the block
    ends. A file that cannot be opened yields an unknown holder: what cannot be checked is
    taken as held.
    """
    while True:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            yield None
            return
        except OSError:
            yield LockHolder()
            return
        try:
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    yield _read_holder(Path(path))
                    return
                if not _same_file(fd, Path(path)):
                    continue  # removed by its last holder meanwhile: look again
            yield None
            return
        finally:
            os.close(fd)  # drops the shared lock


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is the one ``path`` names now."""
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _read_holder(path: Path) -> LockHolder:
    """The holder a lock file records, as far as it can be read."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        pid, host = record.get("pid"), record.get("host")
        return LockHolder(pid if isinstance(pid, int) else None, host if isinstance(host, str) else None)
    except (OSError, ValueError, AttributeError):
        return LockHolder()
