"""One command at a time in a run directory: ``RUN/.lock``.

``infoxlm pretrain`` locks ``RUN/.lock`` (file_lock.py: an OS lock, released with its process
however that ends, so never stale) before it reads the run's checkpoint or writes anything,
and holds it until it ends. A second command on the same RUN finds it held and stops with one
line naming the holder, having changed nothing in RUN (without the lock it would rewrite
``config.json`` and add its steps to ``metrics.jsonl`` beside the first run's, then crash on
the first run's checkpoint). RUN/.lock is the first thing a pretrain makes in RUN, so a directory
holding nothing else counts as a run directory (``outputs.is_run_directory``): one killed at
start-up leaves just that, and the same command goes on in it; one starting at the same moment
is named as the holder.

In a run of several processes global rank 0 alone takes the lock: the run directory is one
directory on a file system shared by every node (a lock per node would make the nodes refuse
each other), and the other ranks write only their checkpoint shards into it. Rank 0
broadcasts the outcome, so every rank stops with the same line, or none does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from pathlib import Path

import torch.distributed as dist

from ..created_paths import CreatedPaths
from ..file_lock import LockHeld, NotALockFile, exclusive_lock
from ..outputs import RUN_LOCK_FILE as LOCK_FILE
from .distributed import World
from .errors import TrainingError

__all__ = ["LOCK_FILE", "RunLock"]

# What a file system that keeps no locks answers (Lustre mounted without -o flock, NFS without a lock manager).
LOCKS_UNSUPPORTED = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})


class RunLock:
    """The hold of one command (its global rank 0) on a run directory, until ``release``."""

    def __init__(self, run_dir: Path, held: contextlib.ExitStack, created: CreatedPaths):
        self.run_dir, self._held, self._created = run_dir, held, created

    @classmethod
    def acquire(cls, run_dir: str | Path, world: World) -> "RunLock":
        """Lock ``run_dir`` (made if missing) on rank 0; on every rank, raise TrainingError in
        one line if another process holds it."""
        run_dir = Path(run_dir)
        created, held, refusal = CreatedPaths(run_dir), contextlib.ExitStack(), None
        if world.is_main:
            try:
                made = not run_dir.exists()
                created.mkdir(run_dir)
                refusal = _lock(run_dir, held, created)
                if made and refusal is None:  # locked: what is written in it now is this command's alone
                    created.tree(run_dir)
            except OSError as err:  # no permission, no space: the other ranks must hear of it too
                created.undo()
                if not world.distributed:
                    raise
                refusal = f"{err.filename or run_dir}: cannot lock the run directory ({err.strerror or err})"
            except BaseException:  # Ctrl-C
                created.undo()
                raise
        if world.distributed:  # every rank learns rank 0's outcome: None, or its one line
            carried = [refusal]
            dist.broadcast_object_list(carried, src=0)
            refusal = carried[0]
        if refusal is not None:
            created.undo()
            raise TrainingError(refusal)
        return cls(run_dir, held, created)

    def release(self, started: bool = True) -> None:
        """Give the directory up. ``started=False`` (the command could not start): also remove
        the lock file and the directories made for it, if it made them, and a run directory it
        made with all that the start wrote in it (config.json of a start that filled the disk),
        so that it leaves nothing behind."""
        if not started:
            self._created.undo()  # while still held
        self._held.close()


def _lock(run_dir: Path, held: contextlib.ExitStack, created: CreatedPaths) -> str | None:
    """Take RUN/.lock into ``held``: None, or why not in one line."""
    path = run_dir / LOCK_FILE
    try:
        if held.enter_context(exclusive_lock(path, wait=False)):
            created.tree(path)  # made by this command, and held: a start that fails removes it
    except LockHeld as err:
        return (
            f"{run_dir}: another infoxlm pretrain is running in it ({err.holder.describe()}, holding {path}); "
            "wait for it to end, or use another --output"
        )
    except NotALockFile as err:  # a symbolic link to someone's file, …: said on every rank
        return str(err)
    except OSError as err:
        if err.errno not in LOCKS_UNSUPPORTED:
            raise
        print(
            f"infoxlm: warning: {path}: this file system keeps no locks ({os.strerror(err.errno)}); "
            f"nothing keeps a second pretrain out of {run_dir} while this one runs",
            file=sys.stderr,
            flush=True,
        )
    return None
