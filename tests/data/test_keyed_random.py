"""Tests for infoxlm.data.keyed_random: stateless draws keyed by (seed, objective, step, slot)."""

from __future__ import annotations

import numpy as np
import pytest

from infoxlm.data.keyed_random import KeyedRandom, mix, stream_bits, to_integers, to_uniform


def test_draws_of_a_slot_do_not_depend_on_the_other_slots():
    everything = KeyedRandom(3, 1, 7, np.arange(100))
    part = KeyedRandom(3, 1, 7, np.array([97, 5, 42]))
    for purpose in (1, 2, 9):
        assert np.array_equal(part.bits(purpose), everything.bits(purpose)[[97, 5, 42]])


@pytest.mark.parametrize("change", [dict(seed=4), dict(objective=2), dict(step=8)])
def test_every_key_component_changes_the_draws(change):
    keys = dict(seed=3, objective=1, step=7)
    base = KeyedRandom(**keys, slots=np.arange(64)).bits(1)
    other = KeyedRandom(**{**keys, **change}, slots=np.arange(64)).bits(1)
    assert not np.any(base == other)


def test_purposes_are_independent_streams():
    rng = KeyedRandom(0, 1, 0, np.arange(50_000))
    a, b = rng.uniform(1), rng.uniform(2)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.02


def test_uniform_is_uniform():
    u = KeyedRandom(1, 1, 1, np.arange(200_000)).uniform(3)
    assert u.min() >= 0 and u.max() < 1
    counts = np.bincount((u * 20).astype(int), minlength=20)
    expected = len(u) / 20
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 50  # df = 19: p ≈ 1e-4 at 50


def test_integers_and_coin():
    rng = KeyedRandom(1, 2, 3, np.arange(100_000))
    high = np.where(np.arange(100_000) % 2, 3, 1000)
    x = rng.integers(4, high)
    assert (x >= 0).all() and (x < high).all()
    assert set(np.unique(x[1::2])) == {0, 1, 2}
    assert abs(rng.coin(5).mean() - 0.5) < 0.01
    assert to_integers(np.array([np.iinfo(np.uint64).max], dtype=np.uint64), 7)[0] == 6
    assert to_uniform(np.array([np.iinfo(np.uint64).max], dtype=np.uint64))[0] < 1.0


def test_stream_bits_follow_each_sequence_stream():
    streams = np.array([11, 22, 33], dtype=np.uint64)
    offsets = np.array([0, 3, 3, 7])  # the middle sequence is empty
    bits = stream_bits(streams, offsets)
    assert bits.shape == (7,)
    # Token t of a sequence depends only on its stream and t, not on where it sits.
    alone = stream_bits(streams[2:], np.array([0, 4]))
    assert np.array_equal(bits[3:], alone)
    assert np.array_equal(stream_bits(streams[:1], np.array([0, 3])), bits[:3])


def test_mix_is_a_bijection_on_a_sample():
    x = np.arange(100_000, dtype=np.uint64)
    assert len(np.unique(mix(x))) == len(x)


@pytest.mark.parametrize(
    "kwargs",
    [dict(seed=-1), dict(seed=1.5), dict(step=-2), dict(objective=True), dict(seed=2**64)],
)
def test_bad_keys(kwargs):
    args = dict(seed=0, objective=1, step=0, slots=np.arange(3))
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        KeyedRandom(**{**args, **kwargs})


def test_bad_slots():
    with pytest.raises(ValueError, match="slots"):
        KeyedRandom(0, 1, 0, np.array([[1, 2]]))
    with pytest.raises(ValueError, match="slots"):
        KeyedRandom(0, 1, 0, np.array([-1]))
