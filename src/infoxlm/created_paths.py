"""What one command created on disk, removed again if the command fails.

A prepare creates a store directory (and its missing parents), ``store.json``, the store's
``tokenizer/`` copy, lock files and a ``.partial-*`` corpus directory before the corpus is
complete. Whatever stops it half-way -- bad input found late, a disk that fills up, no
permission, Ctrl-C -- must not leave any of that behind: a later run would otherwise find a
store that looks usable but is not. :class:`CreatedPaths` is the one place that records
these paths, in order, and takes them back in reverse order when the ``with`` block ends with
an exception; on success it keeps everything.

It also makes every failed system call (an ``OSError`` with an errno) that leaves the block
name a path: a ``write`` that fails with ENOSPC carries no file name, and the command line's one-line message
(``no space left on device while writing PATH``) needs one.

Example::

    >>> import pathlib, tempfile
    >>> root = pathlib.Path(tempfile.mkdtemp()) / "a" / "b"
    >>> try:
    ...     with CreatedPaths(root) as created:
    ...         created.mkdir(root)
    ...         raise KeyboardInterrupt
    ... except KeyboardInterrupt:
    ...     pass
    >>> root.parent.exists()
    False
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["CreatedPaths", "naming"]


@contextmanager
def naming(path: Path | str) -> Iterator[None]:
    """Give an ``OSError`` raised inside the block ``path`` as its file name if it has none."""
    try:
        yield
    except OSError as err:
        if _unnamed_os_error(err):
            err.filename = str(path)
        raise


def _unnamed_os_error(err: BaseException) -> bool:
    """A failed system call (with an errno, such as ENOSPC) that names no file. Other
    ``OSError`` s (pyarrow's for a damaged file, with errno None) keep their own words."""
    return isinstance(err, OSError) and err.errno is not None and err.filename is None


class CreatedPaths:
    """Paths created by one command, undone in reverse order if the command fails.

    ``where`` names the place the command writes to; an ``OSError`` leaving the block
    without a file name gets it.
    """

    def __init__(self, where: Path | str):
        self.where = Path(where)
        self._undo: list[Callable[[], None]] = []

    def mkdir(self, path: Path) -> None:
        """``mkdir -p path``; each directory made now is removed again, if it is then empty."""
        missing = []
        for folder in [path, *path.parents]:
            if folder.exists():
                break
            missing.append(folder)
        for folder in reversed(missing):  # outermost first, so it is removed last
            self._undo.append(lambda folder=folder: _rmdir_if_empty(folder))
        with naming(path):  # recorded first: a parent made before a failure goes too
            path.mkdir(parents=True, exist_ok=True)

    def new_entries(self, directory: Path) -> None:
        """What this command adds to ``directory`` (made now if missing) is removed again; what
        was there before stays."""
        self.mkdir(directory)
        before = {entry.name for entry in directory.iterdir()}
        self._undo.append(lambda: [_remove(e) for e in list(directory.iterdir()) if e.name not in before])

    def tree(self, path: Path) -> None:
        """``path`` (a file or a directory this command alone writes into) is about to be made."""
        self._undo.append(lambda: _remove(path))

    def on_failure(self, action: Callable[[], None]) -> None:
        """Run ``action`` when undoing (for what is shared with other processes)."""
        self._undo.append(action)

    def undo(self) -> None:
        """Remove what was recorded, newest first; never raises (the first error counts)."""
        while self._undo:
            action = self._undo.pop()
            try:
                action()
            except Exception:  # a failure while cleaning up must not hide the cause
                pass

    def __enter__(self) -> "CreatedPaths":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self._undo.clear()
            return
        self.undo()
        if _unnamed_os_error(exc):
            exc.filename = str(self.where)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _rmdir_if_empty(folder: Path) -> None:
    try:
        os.rmdir(folder)
    except OSError:
        pass  # not empty: someone else's files are in it
