"""What a hostile directory holds where infoxlm expects a small JSON file, for the tests: JSON
nested 100,000 deep, a link to /dev/zero, a named pipe; and a guard that turns a hang into a
failure."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import Callable, Iterator

DEEP_JSON = "[" * 100_000 + "]" * 100_000  # Python's parser gives up near 1,000


def nested(path: Path) -> None:
    path.unlink(missing_ok=True)
    path.write_text(DEEP_JSON, encoding="utf-8")


def zero_link(path: Path) -> None:
    """A link to /dev/zero: read whole, 3.6 GB and a MemoryError."""
    path.unlink(missing_ok=True)
    path.symlink_to("/dev/zero")


def fifo(path: Path) -> None:
    """A named pipe no one writes to: a plain open() waits for a writer for ever."""
    path.unlink(missing_ok=True)
    os.mkfifo(path)


HOSTILE: dict[str, Callable[[Path], None]] = {"nested": nested, "/dev/zero": zero_link, "fifo": fifo}


class Hung(BaseException):
    """Raised in a block that ran too long: no reader's ``except OSError`` or ``except
    Exception`` can take it for a failure it handles and go on."""


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Raise Hung if the block takes longer: a blocking open() or read() is interrupted by the
    alarm (PEP 475: a handler that raises ends the call), and again each second after."""

    def expire(signum, frame):
        raise Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
