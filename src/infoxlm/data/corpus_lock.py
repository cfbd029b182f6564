"""Who is writing a corpus of a token store: its lock, and the ``.partial-*`` directories it guards.

A corpus is written into ``STORE/KIND/.partial-NAME-PID`` and renamed into place when complete
(:class:`~infoxlm.corpus.store_writer.CorpusWriter`); a corpus it replaces is moved aside as
``.partial-old-NAME-PID`` for that moment. The writer holds the corpus's lock,
``STORE/.locks/KIND-NAME`` (:func:`corpus_lock`, an OS lock that names its holder's process
and host, :mod:`infoxlm.file_lock`), for as long as it writes. So:

* two jobs preparing the same corpus of a shared store take turns;
* a partial directory whose lock no one holds is a leftover of a killed job, and goes
  (:func:`remove_stale_partials`); one whose lock is held belongs to a live writer, on this
  host or another sharing the file system, and is left alone (:func:`partial_writer` says who).

The PID in a directory's name is never used to decide: on another host or in another PID
namespace the same number names another process, or none.
"""

from __future__ import annotations

import os
import shutil
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

from ..file_lock import LOCKS_WORK, LockHolder, exclusive_lock, lock_if_free

__all__ = ["LOCKS_DIR", "PARTIAL_PREFIX", "corpus_lock", "partial_corpus_dirs", "partial_writer", "remove_stale_partials"]

PARTIAL_PREFIX = ".partial-"
LOCKS_DIR = ".locks"  # STORE/.locks/KIND-NAME: one lock file per corpus ever prepared (its holder's pid, host)


def partial_corpus_dirs(root: str | Path) -> list[Path]:
    """``.partial-*`` directories under ``root/mono`` and ``root/parallel``."""
    found = []
    for kind in ("mono", "parallel"):
        folder = Path(root) / kind
        if folder.is_dir():
            found += sorted(p for p in folder.iterdir() if p.name.startswith(PARTIAL_PREFIX))
    return found


def remove_stale_partials(root: str | Path, holding: tuple[str, str] | None = None) -> list[Path]:
    """Delete what interrupted prepares left in the store at ``root``; returns what was removed.

    Works without opening the store's corpora. A partial directory is stale when no process
    holds its corpus's lock (:func:`corpus_lock`): a live writer, on this host or any other
    sharing the file system, holds it for as long as it writes, and its directory is left
    alone. ``holding=(kind, name)``: the caller holds that corpus's lock, so every partial
    directory of that corpus is stale.
    """
    removed = []
    for path in partial_corpus_dirs(root):
        with partial_writer(path, holding) as writer:
            if writer is None:  # (the probe keeps a new writer of that corpus out meanwhile)
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


@contextmanager
def partial_writer(partial: Path, holding: tuple[str, str] | None = None) -> Iterator[LockHolder | None]:
    """Yield the process writing the ``.partial-NAME-PID`` directory ``partial``, or None if
    no process does (it is stale; no writer of its corpus can start until the block ends).

    Decided by the corpus's lock, never by the PID in the name, which may belong to another
    host or PID namespace. The name of a corpus moved aside by a commit (``.partial-old-NAME-PID``)
    is read both ways: the directory is live if either lock is held. Without OS locks
    (Windows) a PID on this host is all there is to go by.
    """
    root, kind = partial.parent.parent, partial.parent.name
    stem, _, pid_text = partial.name[len(PARTIAL_PREFIX) :].rpartition("-")
    names = [stem, stem[len("old-") :]] if stem.startswith("old-") else [stem]
    named_pid = int(pid_text) if pid_text.isdigit() else None
    if holding is not None and holding[0] == kind and holding[1] in names:
        yield None  # our lock: its last writer is gone
        return
    if not LOCKS_WORK:
        yield LockHolder(named_pid) if named_pid is not None and _process_exists(named_pid) else None
        return
    with ExitStack() as probes:
        for name in names:
            writer = probes.enter_context(lock_if_free(_lock_path(root, kind, name)))
            if writer is not None:
                yield writer if writer.pid is not None else LockHolder(named_pid, writer.host)
                return
        yield None


def _process_exists(pid: int) -> bool:
    """Whether a process ``pid`` runs on this host (in this PID namespace)."""
    if pid == os.getpid():
        return False  # our own leftovers (from an earlier failed call) are stale
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def _lock_path(root: str | Path, kind: str, name: str) -> Path:
    return Path(root) / LOCKS_DIR / f"{kind}-{name}"


@contextmanager
def corpus_lock(root: str | Path, kind: str, name: str) -> Iterator[None]:
    """Hold an exclusive lock on one corpus of the store at ``root`` for the ``with`` block.

    A prepare checks and rewrites its corpus under this lock, so two jobs preparing the same
    corpus of a shared store at once do not swap directories under each other: the second
    waits, then finds the corpus up to date. Other corpora of the store are not held up. The
    lock also tells other jobs that the corpus's ``.partial-*`` directory is being written
    (:func:`partial_writer`), and by which process on which host.
    """
    with exclusive_lock(_lock_path(root, kind, name)):
        yield
