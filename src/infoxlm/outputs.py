"""Where commands write: checks made before any work, and writes that never leave half a result.

Every command that writes checks its output path first, so a mistake costs one line and no
computation:

- ``check_output_file``: an output file may not be a directory, nor lie under a file;
- ``check_output_dir``: an output directory may not be a file, lie under a file, be or hold or
  lie inside a directory the command reads (a run being exported), lie inside any token store
  or run directory (writing there breaks it: ``STORE/mono/x`` would be read as a corpus), nor be
  a non-empty directory the command did not write itself (unless ``overwrite``).

and then writes through one of three context managers, which put the result in place only when it
is complete and remove their temporary on any failure (an exception, Ctrl-C). A process killed
outright leaves its temporary behind; each temporary's name carries its writer's host and
process id, and the next write of the same target removes those whose writer is gone (a
temporary of a live process, or of another host, is left alone)::

    >>> with atomic_file("out/vectors.npy") as tmp:  # doctest: +SKIP
    ...     numpy.save(tmp, vectors)
    >>> with atomic_dir("out/hf", replace=True) as tmp:  # doctest: +SKIP
    ...     encoder.save_pretrained(tmp, tokenizer)
    >>> with atomic_files("out/tokenizer") as tmp:  # doctest: +SKIP
    ...     tokenizer.save_pretrained(tmp)  # its files replace those of the same names

A full disk (or quota) met while writing becomes one ``NoSpaceLeft`` naming the output, raised
once the temporary is gone: ``full_disk_named`` does it, and the three writers use it, as does
every other writer that cannot go through them (checkpoints, metrics.jsonl).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import itertools
import os
import re
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .created_paths import CreatedPaths
from .errors import InfoXLMError
from .json_files import CONFIG_BYTES, read_json


# store.json's "format" (infoxlm.data.store writes it; named here, below the data layer).
TOKEN_STORE_FORMAT = "infoxlm-token-store"
# What pretrain writes into a run directory: no other command writes into these.
RUN_ENTRIES = frozenset({"checkpoints", "exports", "tokenizer", "tensorboard", "wandb"})
# RUN/.lock (train/run_lock.py): the first thing pretrain makes in a run directory.
RUN_LOCK_FILE = ".lock"


class OutputError(InfoXLMError):
    """An output path that cannot or must not be written."""


class NoSpaceLeft(OutputError):
    """A write that found its file system, or the user's quota, full."""


# Writers that turn the failed system call into their own error, errno lost, and what they say:
# safetensors and tokenizers (Rust's "(os error 28)"; 122 is EDQUOT), numpy's np.save ("Not
# enough free space to write …" before writing, "N requested and M written" for a short write)
# and torch's zip writer on a file it opened itself (releases before 2.x: "file write failed";
# on a stream, as DCP gives it, torch raises over the stream's OSError, found as its context).
_NO_SPACE_WORDS = re.compile(
    r"No space left on device|Disk quota exceeded|\(os error (?:28|122)\)|Not enough free space to write"
    r"|\d+ requested and \d+ written|file write failed"
)


def no_space_left(err: BaseException) -> bool:
    """Whether ``err``, or an error it was raised from or while handling, or one a
    torch.distributed.checkpoint rank failed with (``failures``), says the disk is full.

    >>> no_space_left(RuntimeError("[enforce fail at inline_container.cc:672] . file write failed"))
    True
    >>> no_space_left(OSError(errno.EACCES, "Permission denied"))
    False
    """
    pending, seen = [err], set()
    while pending:
        e = pending.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, NoSpaceLeft) or (isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)):
            return True
        if _NO_SPACE_WORDS.search(str(e)):
            return True
        failures = getattr(e, "failures", None)  # CheckpointException: {rank: (error, stack)}
        ranks = failures.values() if isinstance(failures, dict) else ()
        pending += [e.__cause__, e.__context__, *(f[0] if isinstance(f, tuple) else f for f in ranks)]
    return False


@contextlib.contextmanager
def full_disk_named(path: str | Path, then: str = "") -> Iterator[None]:
    """Re-raise a full disk met inside the block as one ``NoSpaceLeft``: "no space left on device
    while writing PATH" (then ``; THEN``, what is left to the user). One raised by a writer
    nested inside, naming its own output, passes unchanged."""
    try:
        yield
    except BaseException as err:
        if isinstance(err, NoSpaceLeft) or not no_space_left(err):
            raise
        raise NoSpaceLeft(f"no space left on device while writing {path}" + (f"; {then}" if then else "")) from None


def _file_above(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` that is not a directory, if any."""
    for parent in path.absolute().parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def check_output_file(path: str | Path, flag: str = "--output") -> Path:
    """Refuse an output file path that is a directory or lies under a file; returns it."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"{path}: is a directory; {flag} names a file to write")
    blocker = _file_above(path)
    if blocker is not None:
        raise OutputError(f"{path}: cannot be written: {blocker} is a file, not a directory")
    return path


def check_output_dir(
    path: str | Path,
    *,
    written_by_us: Callable[[Path], bool] | None = None,
    overwrite: bool = False,
    sources: Iterable[tuple[str, str | Path]] = (),
    flag: str | None = "--overwrite",
    results_of_a_run: bool = False,
) -> Path:
    """Refuse an output directory that must not be written; returns it.

    ``written_by_us(path)`` tells whether an existing non-empty directory is one this command
    wrote (and may write again); any other non-empty directory is refused unless ``overwrite``
    (``None``: every existing directory is accepted). ``flag`` is the option that asks for
    ``overwrite``, named in the message (None: the command has none). ``sources`` are (description, directory)
    pairs the command reads, e.g. ("run directory", RUN): the output may not be one of them,
    lie inside one or hold one, whatever ``overwrite`` says. Nor may it lie inside a token store
    or a run directory (:func:`enclosing_store_or_run`), except, with ``results_of_a_run``,
    inside a run's own directory (but outside the entries pretrain writes): evaluation results
    kept there are listed by the model cards of the run's exports.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path}: is a file; expected a directory to write into")
    blocker = _file_above(path)
    if blocker is not None:
        raise OutputError(f"{path}: cannot be created: {blocker} is a file, not a directory")
    target = path.resolve()
    for what, source in sources:
        source = Path(source).resolve()
        if target == source:
            raise OutputError(f"{path}: is the {what}; write into another directory")
        if source in target.parents:
            raise OutputError(f"{path}: is inside the {what} {source}; write outside it")
        if target in source.parents:
            raise OutputError(f"{path}: holds the {what} {source}; write into another directory")
    container = enclosing_store_or_run(target)
    if container is not None:
        what, where = container
        kept_with_the_run = results_of_a_run and what == "run directory"
        if not kept_with_the_run or target.relative_to(where).parts[0] in RUN_ENTRIES:
            raise OutputError(f"{path}: is inside the {what} {where}; write outside it (it would no longer be usable)")
    if path.is_dir() and written_by_us is not None and any(path.iterdir()) and not written_by_us(path):
        if not overwrite:
            remedy = f"choose another directory, or pass {flag} to replace it" if flag else "choose another directory"
            raise OutputError(f"{path}: exists and is not empty, and infoxlm did not write it; {remedy}")
    return path


def is_token_store(directory: Path) -> bool:
    """Whether ``directory`` is a token store: its store.json names the store format."""
    return _json_fields(directory / "store.json").get("format") == TOKEN_STORE_FORMAT


def is_run_directory(directory: Path) -> bool:
    """Whether ``directory`` is a directory `infoxlm pretrain` wrote: its config.json holds the
    training sections, or its one entry is a run's lock file (a pretrain starting in it now, or
    one killed before it wrote anything else; the lock tells which, and refuses a file at
    RUN/.lock that is not a lock file)."""
    return {"optim", "run"} <= _json_fields(directory / "config.json").keys() or _holds_only(directory, RUN_LOCK_FILE)


def _holds_only(directory: Path, name: str) -> bool:
    """Whether ``name`` is the one entry of ``directory`` (read no further than two entries)."""
    if not os.path.lexists(directory / name):  # most directories: no listing
        return False
    try:
        with os.scandir(directory) as entries:
            return [entry.name for entry in itertools.islice(entries, 2)] == [name]
    except OSError:
        return False


def enclosing_store_or_run(path: str | Path) -> tuple[str, Path] | None:
    """("token store" or "run directory", the directory) for the nearest proper ancestor of
    ``path`` that is one, found by its marker file (store.json, a run's config.json); else None."""
    for parent in Path(path).absolute().parents:
        if is_token_store(parent):
            return "token store", parent
        if is_run_directory(parent):
            return "run directory", parent
    return None


def _json_fields(path: Path) -> dict:
    """The object in a small JSON file, or {} if there is none (missing, unreadable, not JSON,
    not a regular file: a named pipe there does not hang the check)."""
    try:
        fields = read_json(path, what="a JSON file", max_bytes=CONFIG_BYTES)
    except InfoXLMError:
        return {}
    return fields if isinstance(fields, dict) else {}


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` (an empty file); on success it is renamed to
    ``path``, on any failure removed, with the parent directories it made."""
    path = check_output_file(path)
    with full_disk_named(path), CreatedPaths(path) as created:
        created.mkdir(path.parent)
        _remove_stale_temporaries(path)
        # The suffix is kept (.tmp.png), for writers that pick the format by it.
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.{_writer()}.", suffix=f".tmp{path.suffix}", dir=path.parent)
        os.close(fd)
        tmp = Path(name)
        created.tree(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 → what open() would have made
        yield tmp
        os.replace(tmp, path)


def write_text_atomically(path: str | Path, text: str) -> Path:
    """``text`` (UTF-8, "\n" line ends) at ``path``, whole or not at all."""
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")
    return Path(path)


@contextlib.contextmanager
def atomic_dir(path: str | Path, *, replace: bool = False) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; on success it becomes ``path``, on any
    failure it is removed, with the parent directories it made. An existing ``path`` is replaced
    only if ``replace`` (it is moved aside first and deleted after the new one is in place);
    otherwise it is an error."""
    path = Path(path)
    with full_disk_named(path), CreatedPaths(path) as created:
        created.mkdir(path.parent)
        _remove_stale_temporaries(path)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.partial-{_writer()}.", dir=path.parent))
        created.tree(tmp)
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp's 0700 → what mkdir would have made
        yield tmp
        _put_dir_in_place(tmp, path, replace)


def _put_dir_in_place(tmp: Path, path: Path, replace: bool) -> None:
    if not path.exists():
        os.replace(tmp, path)
        _remove_stale_temporaries(path)  # a directory moved aside by a killed writer, now that path is back
        return
    if not replace:
        raise OutputError(f"{path}: exists; it is not replaced")
    old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-{_writer()}.", dir=path.parent))
    os.replace(path, old / "d")  # the old directory moves aside in one rename
    try:
        os.replace(tmp, path)
    except BaseException:
        os.replace(old / "d", path)  # put it back (if this fails too, it stays in `old`)
        os.rmdir(old)
        raise
    shutil.rmtree(old, ignore_errors=True)  # only once the new directory is in place


@contextlib.contextmanager
def atomic_files(directory: str | Path) -> Iterator[Path]:
    """Yield a temporary directory; on success the files written into it replace those of the
    same names in ``directory`` and the others there stay (a missing ``directory`` is made in one
    rename, as by ``atomic_dir``); on any failure it is removed and ``directory`` is left as it
    was. For outputs that share a directory with other files."""
    directory = Path(directory)
    if not directory.is_dir():
        with atomic_dir(directory) as tmp:
            yield tmp
        return
    with full_disk_named(directory):
        # Inside the directory, so that each file moves by a rename even onto a mount point.
        tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=directory))
        try:
            yield tmp
            for entry in sorted(tmp.iterdir()):
                os.replace(entry, directory / entry.name)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


# This host in temporary names: a short digest, so that any host name fits in a file name.
_HOST = hashlib.blake2b(socket.gethostname().encode(), digest_size=4).hexdigest()


def _writer() -> str:
    """``HOST.PID`` of this process, for the temporaries it makes."""
    return f"{_HOST}.{os.getpid()}"


def _remove_stale_temporaries(path: Path) -> None:
    """Remove the temporaries of ``path`` (``atomic_file``'s, ``atomic_dir``'s ``.partial-``
    and ``.old-``) that a process on this host left when it was killed: its id names no running
    process. A directory moved aside (``.old-``) is removed only once ``path`` exists again:
    a writer killed between its two renames leaves the earlier result there alone."""
    name = re.escape(path.name)
    pattern = re.compile(rf"\.{name}\.(?:(?P<kind>partial|old)-)?(?P<host>[0-9a-f]{{8}})\.(?P<pid>\d+)\.[a-z0-9_]+(?:\.tmp.*)?")
    try:
        with os.scandir(path.parent) as entries:
            names = [entry.name for entry in entries if entry.name.startswith(f".{path.name}.")]
    except OSError:
        return
    for entry in names:
        found = pattern.fullmatch(entry)
        if found is None or found["host"] != _HOST or _runs_here(int(found["pid"])):
            continue
        if found["kind"] == "old" and not path.exists():
            continue
        stale = path.parent / entry
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                stale.unlink()


def _runs_here(pid: int) -> bool:
    """Whether process ``pid`` runs on this host (in this PID namespace); True where it cannot
    be told (Windows, whose os.kill ends the process it names) or the process is ours."""
    if pid == os.getpid() or os.name == "nt":
        return True
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, owned by someone else
        return True
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
