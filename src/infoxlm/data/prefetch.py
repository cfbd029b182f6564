"""Run an iterator in a background thread, a few items ahead of its consumer.

``infoxlm prepare`` chains three stages -- read and clean text, tokenize, write -- and runs
the first two in threads of their own. This pays off because the tokenizers library
releases the GIL while it encodes: Python can decode, normalise and write the neighbouring
blocks meanwhile instead of leaving the cores to wait for it.

>>> list(prefetch(x * x for x in range(5)))
[0, 1, 4, 9, 16]
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["prefetch"]

T = TypeVar("T")

_END = object()  # the producer finished normally
_POLL_SECONDS = 0.1  # how often a blocked producer checks whether the consumer has gone


class _Failure:
    """An exception raised by the producer, handed to the consumer to raise there."""

    def __init__(self, error: BaseException):
        self.error = error


def prefetch(items: Iterable[T], depth: int = 2, name: str = "prefetch") -> Iterator[T]:
    """Yield the items of ``items``, produced by a daemon thread up to ``depth`` items ahead.

    An exception in the producer is raised in the consumer at the same position in the
    sequence (the items before it are still delivered). When the consumer stops early
    (``break``, an exception, ``close()``), the producer stops after its current item and
    ``items`` is closed in the producer's thread, so files it holds are closed too.
    """
    slots: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def offer(item: object) -> bool:
        """Put ``item`` into the queue unless the consumer has stopped; True if it went in."""
        while not stop.is_set():
            try:
                slots.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        iterator = iter(items)
        try:
            for item in iterator:
                if not offer(item):
                    return
            offer(_END)
        except BaseException as error:  # noqa: BLE001 -- every failure belongs to the consumer
            offer(_Failure(error))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name=name, daemon=True)
    thread.start()
    try:
        while True:
            item = slots.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item
    finally:
        stop.set()
        thread.join()
