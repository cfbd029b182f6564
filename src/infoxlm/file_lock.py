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

A lock file sits in a directory others may write into (a shared store, a run directory), so
what is found at its path is not trusted: the record written into a lock would overwrite
whatever file the path leads to. A symbolic link there is never followed; it, a directory, a
named pipe, or a regular file holding anything but a lock's record (a user's file, hard-linked
there) is refused as :class:`NotALockFile`, and nothing is written to it.

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
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .created_paths import naming
from .errors import InfoXLMError
from .json_files import file_kind, parse_json

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCKS_WORK", "LockHeld", "LockHolder", "NotALockFile", "exclusive_lock", "lock_if_free"]

LOCKS_WORK = fcntl is not None
# A symbolic link at a lock's path is not followed (the open fails), and a named pipe there
# does not make the open wait for a writer (it is then refused as not a regular file).
_NOT_FOLLOWED = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_RECORD_BYTES = 4096  # a record is far shorter: what holds more is not one


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


class NotALockFile(InfoXLMError):
    """What is at a lock's path is not a lock file (``problem`` says what it is); nothing is written to it."""

    def __init__(self, path: Path, problem: str):
        super().__init__(
            f"{path}: {problem}; expected a lock file "
            "(a regular file holding its holder's process id and host, or nothing); nothing was written to it"
        )
        self.path = path


@contextlib.contextmanager
def exclusive_lock(path: str | Path, *, wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive lock on ``path`` (created, with its folder, if missing) for the block;
    yields whether this call created the file.

    The holder's process id and host are written into the file. ``wait=False`` raises
    :class:`LockHeld` instead of waiting when another open file holds it; a file system that
    keeps no locks raises OSError (ENOLCK, EOPNOTSUPP, …); what is not a lock file raises
    :class:`NotALockFile`. The lock goes when the block ends or the process dies.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd, created = _open_lock_file(path)
        try:
            if fcntl is not None and not _lock(fd, path, wait, created):
                continue  # its last holder removed the file after we opened it: open the new one
            yield created
            return
        finally:
            os.close(fd)  # drops the lock


@contextlib.contextmanager
def lock_if_free(path: str | Path) -> Iterator[LockHolder | None]:
    """Yield None, holding ``path``'s lock (shared) for the block, if no one holds it
    exclusively; else yield its :class:`LockHolder` at once, without waiting.

    A missing file is free (a writer creates it before it writes). The lock is shared so that
    a read-only store can be probed; it still keeps a writer from starting until the block
    ends. What cannot be opened as a regular file (no permission, a symbolic link, a
    directory) yields an unknown holder: what cannot be checked is taken as held.
    """
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | _NOT_FOLLOWED)
        except FileNotFoundError:
            yield None
            return
        except OSError:
            yield LockHolder()
            return
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                yield LockHolder()
                return
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    yield _read_holder(fd)
                    return
                if not _same_file(fd, Path(path)):
                    continue  # removed by its last holder meanwhile: look again
            yield None
            return
        finally:
            os.close(fd)  # drops the shared lock


def _open_lock_file(path: Path) -> tuple[int, bool]:
    """``path`` opened for writing, and whether it was created now; :class:`NotALockFile` if
    it is not a regular file."""
    while True:
        try:
            # O_EXCL: made now, by us; it never follows a symbolic link, even a dangling one.
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOT_FOLLOWED, 0o666), True
        except FileExistsError:
            pass
        try:
            fd = os.open(path, os.O_RDWR | _NOT_FOLLOWED)
        except FileNotFoundError:
            continue  # removed by its last holder meanwhile: make it
        except OSError:  # ELOOP for a symbolic link, EISDIR for a directory, or no permission
            refusal = _refusal(path, os.lstat(path).st_mode)
            if refusal is None:
                raise
            raise refusal from None
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            return fd, False
        os.close(fd)
        raise _refusal(path, mode)


def _refusal(path: Path, mode: int) -> NotALockFile | None:
    """Why a file of ``mode`` (an lstat's) at ``path`` is not a lock file; None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    target = f" (to {os.readlink(path)})" if stat.S_ISLNK(mode) else ""
    return NotALockFile(path, f"is {file_kind(mode)}{target}, not a regular file")


def _lock(fd: int, path: Path, wait: bool, created: bool) -> bool:
    """Lock the open lock file ``fd`` and write our record into it; False if ``path`` no
    longer names it (lock it again)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        raise LockHeld(path, _read_holder(fd)) from None
    except OSError:
        if created:  # made by us but not locked (a file system that keeps no locks): leave no file behind
            path.unlink(missing_ok=True)
        raise
    if not _same_file(fd, path):
        return False
    if not created and _read_record(fd) is None:
        # Not a stale record: someone's data, reached through a hard link or left at the path.
        raise NotALockFile(path, f"holds something other than a lock's record ({os.fstat(fd).st_size} bytes)")
    try:
        with naming(path):  # a full disk fails the write without a file name
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps({"pid": os.getpid(), "host": socket.gethostname()}) + "\n").encode(), 0)
    except OSError:
        if created:  # made by us, but naming no holder: leave no file behind
            path.unlink(missing_ok=True)
        raise
    return True


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open file ``fd`` is the one ``path`` names now (not a link put in its place)."""
    try:
        here, there = os.fstat(fd), os.lstat(path)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _read_record(fd: int) -> dict | None:
    """The lock file's record: {} for an empty file (its maker died before writing it), None
    for anything that is not a record."""
    text = os.pread(fd, _RECORD_BYTES + 1, 0)
    if not text.strip():
        return {}
    try:  # (JSON nested thousands deep, in a record's 4 kB, is no record either)
        record = parse_json(text, "a lock file", what="a lock's record")
    except InfoXLMError:
        return None
    # (Fields beside these two, from a later version, keep it a record.)
    return record if isinstance(record, dict) and {"pid", "host"} <= record.keys() else None


def _read_holder(fd: int) -> LockHolder:
    """The holder a lock file records, as far as it can be read."""
    try:
        record = _read_record(fd) or {}
    except OSError:
        return LockHolder()
    pid, host = record.get("pid"), record.get("host")
    return LockHolder(pid if isinstance(pid, int) else None, host if isinstance(host, str) else None)
