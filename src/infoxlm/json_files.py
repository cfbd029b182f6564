"""Reading the small files infoxlm finds beside models, runs, stores and checkpoints.

A ``config.json``, a corpus's ``meta.json`` or a checkpoint's ``digests.json`` lies in a
directory someone else may have written or copied, so what is found at its path is checked
before it is read, and every problem is one ``InfoXLMError`` (or the caller's subclass of it)
naming the file and what was expected:

- not a regular file: a named pipe (opened without waiting for a writer, so that it cannot hang
  the command), a device (``/dev/zero`` behind a link would be read until memory runs out), a
  directory; a symbolic link is followed unless the caller says not to (Hugging Face caches
  link every file of a model);
- larger than a file of its kind ever is (``max_bytes``): never read past that;
- not UTF-8, not JSON (line and column), or nested deeper than ``MAX_DEPTH`` levels (Python's
  parser ends in a RecursionError near 1,000, and code that walks the value could too)::

    >>> read_json("/dev/null", what="a config.json", max_bytes=CONFIG_BYTES)
    Traceback (most recent call last):
    infoxlm.errors.InfoXLMError: /dev/null: is a character device, not a regular file; expected a config.json
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from .errors import InfoXLMError, file_error

__all__ = ["CONFIG_BYTES", "DATA_BYTES", "MAX_DEPTH", "RECORD_BYTES", "TOKENIZER_BYTES", "file_kind", "parse_json",
           "read_json", "read_small_file"]

# The largest file of each kind that is read. Far above any real one, far below what would
# exhaust memory.
CONFIG_BYTES = 4 << 20  # config.json, modules.json, a --config file: a few kB
RECORD_BYTES = 64 << 20  # store.json, meta.json, digests.json, results.json: grow with inputs, files, steps
TOKENIZER_BYTES = 64 << 20  # tokenizer.json (XLM-R's: 17 MB), sentencepiece.bpe.model (5 MB)
DATA_BYTES = 1 << 30  # SQuAD / MLQA data and predictions (SQuAD's training set: 30 MB)
# The deepest file infoxlm reads nests about 6 levels (a SQuAD answer, a tokenizer's normaliser).
MAX_DEPTH = 100

# O_NONBLOCK: a named pipe opens at once instead of waiting for a writer (POSIX); O_BINARY: no
# newline translation (Windows). Each is 0 where it does not exist.
_NONBLOCK = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),  # (an lstat's mode)
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def read_json(path: str | Path, *, what: str, max_bytes: int, error: type[InfoXLMError] = InfoXLMError,
              follow_links: bool = True) -> Any:
    """The JSON value in the file ``path``; ``what`` the file should be ("a Hugging Face
    config.json"), ``max_bytes`` the most a file of its kind holds, ``error`` the error raised
    for every problem (see the module's docstring)."""
    data = read_small_file(path, what=what, max_bytes=max_bytes, error=error, follow_links=follow_links)
    return parse_json(data, str(path), what=what, error=error)


def read_small_file(path: str | Path, *, what: str, max_bytes: int, error: type[InfoXLMError] = InfoXLMError,
                    follow_links: bool = True) -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes``; ``error`` otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | (0 if follow_links else _NOFOLLOW))
    except OSError as exc:
        if not follow_links and os.path.islink(path):  # O_NOFOLLOW's ELOOP
            raise error(f"{path}: is a symbolic link (to {os.readlink(path)}), not followed; expected {what}") from None
        raise file_error(path, exc, what, error) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{path}: {_not_regular(path, info.st_mode)}; expected {what}")
        if info.st_size > max_bytes:
            raise _too_large(path, info.st_size, what, max_bytes, error)
        data = _read_at_most(fd, max_bytes + 1)
    except OSError as exc:
        raise file_error(path, exc, what, error) from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew since fstat
        raise _too_large(path, len(data), what, max_bytes, error)
    return data


def parse_json(text: str | bytes, source: str | Path, *, what: str, error: type[InfoXLMError] = InfoXLMError,
               line: int | None = None, problem: str = "invalid JSON") -> Any:
    """The JSON value of ``text`` (bytes: UTF-8) read from ``source``; ``error`` naming
    ``source``, the line and the column for text that is not UTF-8 or not JSON, or nests deeper
    than ``MAX_DEPTH``. ``line``: the text is that one line of ``source`` (JSON Lines).
    ``problem``: what such text is called ("damaged: invalid JSON" for a file cut short).

    >>> parse_json('{"a": [1, 2}', "x.jsonl", what="one JSON object per line", line=7)
    Traceback (most recent call last):
    infoxlm.errors.InfoXLMError: x.jsonl:7:12: invalid JSON (Expecting ',' delimiter); expected one JSON object per line
    >>> parse_json("[" * 10_000 + "]" * 10_000, "deep.json", what="a config.json")
    Traceback (most recent call last):
    infoxlm.errors.InfoXLMError: deep.json: invalid JSON (nested deeper than 100 levels); expected a config.json
    """
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        where = _where(source, line, *_position(exc.object, exc.start))
        raise error(f"{where}: not UTF-8 (byte 0x{exc.object[exc.start]:02x}); expected {what}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        where, reason = _where(source, line, exc.lineno, exc.colno), exc.msg
    except RecursionError:  # thousands of nested [ or {
        where, reason = _where(source, line), f"nested deeper than {MAX_DEPTH} levels"
    else:
        if not _nests_deeper(value, MAX_DEPTH):
            return value
        where, reason = _where(source, line), f"nested deeper than {MAX_DEPTH} levels"
    raise error(f"{where}: {problem} ({reason}); expected {what}")


def _where(source: str | Path, line: int | None, row: int | None = None, column: int | None = None) -> str:
    """``source``, its line and column: ``line`` is the line of a text that is one line of it."""
    place = [line if line is not None else row, column]
    return ":".join([str(source), *(str(n) for n in place if n is not None)])


def _position(data: bytes, offset: int) -> tuple[int, int]:
    """(line, column) of byte ``offset`` in ``data``, both from 1."""
    return data.count(b"\n", 0, offset) + 1, offset - (data.rfind(b"\n", 0, offset) + 1) + 1


def _nests_deeper(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels in ``value``: one level at a
    time, without recursion (a 6 MB tokenizer.json in 50 ms)."""
    level, depth = [value], 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[Any] = []
        for node in level:
            if type(node) is dict:
                node = node.values()
            elif type(node) is not list:
                continue
            below += [child for child in node if type(child) is dict or type(child) is list]
        level = below
    return False


def file_kind(mode: int) -> str:
    """What a file of ``mode`` (a stat's st_mode) is when it is not a regular file, in words."""
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _not_regular(path: str | Path, mode: int) -> str:
    """What ``path`` (of ``mode``, links followed) is instead of a regular file, in words."""
    kind = file_kind(mode)
    if os.path.islink(path):
        kind += f" (a link to {os.readlink(path)})"
    return f"is {kind}" if stat.S_ISDIR(mode) else f"is {kind}, not a regular file"


def _too_large(path: str | Path, size: int, what: str, max_bytes: int, error: type[InfoXLMError]) -> InfoXLMError:
    return error(f"{path}: holds {_size(size)}; expected {what} of at most {_size(max_bytes)}")


def _size(n: int) -> str:
    """
    >>> _size(4 << 20), _size(3_600_000_000), _size(512)
    ('4 MiB', '3.4 GiB', '512 bytes')
    """
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} bytes"


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, left = [], limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
