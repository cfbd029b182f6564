"""Tests for infoxlm.data.prefetch: order, errors in place, early stop closes the source."""

from __future__ import annotations

import threading

import pytest

from infoxlm.data.prefetch import prefetch


def test_items_arrive_in_order_from_another_thread():
    threads = set()

    def produce():
        for i in range(100):
            threads.add(threading.current_thread().name)
            yield i

    assert list(prefetch(produce(), depth=3, name="worker")) == list(range(100))
    assert threads == {"worker"}


def test_an_error_arrives_after_the_items_before_it():
    def produce():
        yield 1
        yield 2
        raise ValueError("bad line 3")

    received = []
    with pytest.raises(ValueError, match="bad line 3"):
        for item in prefetch(produce()):
            received.append(item)
    assert received == [1, 2]


def test_stopping_early_closes_the_source():
    closed = threading.Event()

    def produce():
        try:
            for i in range(10_000):
                yield i
        finally:
            closed.set()

    stream = prefetch(produce(), depth=2)
    assert next(stream) == 0
    stream.close()  # what a break or an exception in the consumer does
    assert closed.is_set()


def test_chained_stages():
    squares = prefetch(x * x for x in range(50))
    assert sum(prefetch(s + 1 for s in squares)) == sum(x * x + 1 for x in range(50))
