"""Tests for infoxlm.data.ragged: flat sequences + offsets, gathered and framed without loops."""

from __future__ import annotations

import numpy as np
import pytest

from infoxlm.data import ragged
from infoxlm.data.ragged import Ragged, flat_ranges, frame, gather_runs, scatter_runs


def test_flat_ranges():
    assert flat_ranges(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist() == [5, 6, 9, 10, 11]
    assert flat_ranges(np.array([], dtype=np.int64), np.array([], dtype=np.int64)).tolist() == []


@pytest.mark.parametrize("run_length", [3, 300])  # the index path and the slice path
def test_gather_and_scatter_runs_agree_with_slices(run_length):
    rng = np.random.default_rng(0)
    source = rng.integers(0, 1000, 10_000).astype(np.uint32)
    starts = rng.integers(0, 10_000 - run_length, 20)
    lengths = rng.integers(run_length - 2, run_length + 1, 20)
    got = gather_runs(source, starts, lengths)
    assert got.dtype == np.int64
    assert got.tolist() == [int(t) for a, n in zip(starts, lengths) for t in source[a : a + n]]
    dest = np.zeros(25 * (run_length + 1), dtype=np.int64)
    targets = np.arange(20) * (run_length + 1)
    scatter_runs(dest, targets, got, lengths)
    for i, (a, n) in enumerate(zip(starts, lengths)):
        assert dest[targets[i] : targets[i] + n].tolist() == source[a : a + n].tolist()


def test_ragged_basics():
    r = Ragged.from_list([[1, 2], [], [3, 4, 5]])
    assert len(r) == 3 and r.lengths.tolist() == [2, 0, 3]
    assert r.segments().tolist() == [0, 0, 2, 2, 2]
    assert r.positions().tolist() == [0, 1, 0, 1, 2]
    assert [s.tolist() for s in r.take(np.array([2, 0]))] == [[3, 4, 5], [1, 2]]
    assert [s.tolist() for s in r.slice(1, 3)] == [[], [3, 4, 5]]
    assert [s.tolist() for s in Ragged.from_list([])] == []


def test_fill_writes_each_row_from_its_start():
    r = Ragged.from_lengths(np.array([3, 1, 2]))
    r.fill(np.arange(100, 200), rows=np.array([2, 0, 1]), starts=np.array([50, 10, 0]))
    assert [s.tolist() for s in r] == [[110, 111, 112], [100], [150, 151]]


def test_frame_one_and_two_parts():
    a = Ragged.from_list([[5, 6], [7]])
    assert [s.tolist() for s in frame(a, 1, bos=0, eos=2)] == [[0, 5, 6, 2], [0, 7, 2]]
    parts = Ragged.from_list([[5, 6], [7], [8], []])  # part 1 of rows 0, 1 then part 2 of rows 0, 1
    assert [s.tolist() for s in frame(parts, 2, bos=0, eos=2)] == [[0, 5, 6, 2, 8, 2], [0, 7, 2, 2]]
    with pytest.raises(ValueError, match="parts"):
        frame(Ragged.from_list([[1], [2], [3]]), 2, bos=0, eos=2)


def test_slice_threshold_is_only_a_speed_choice(monkeypatch):
    source = np.arange(1000)
    starts, lengths = np.array([3, 500]), np.array([10, 20])
    fast = gather_runs(source, starts, lengths)
    monkeypatch.setattr(ragged, "_SLICE_RUN_LENGTH", 1)
    assert np.array_equal(gather_runs(source, starts, lengths), fast)
