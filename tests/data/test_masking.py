"""Tests for infoxlm.data.masking: 15% of ordinary tokens, 80/10/10, never a special token."""

from __future__ import annotations

import numpy as np
import pytest

from infoxlm.data.masking import mask_tokens
from infoxlm.data.ragged import Ragged

VOCAB = 50_000
MASK_ID = VOCAB - 1


@pytest.fixture(scope="module")
def sample():
    """4000 sequences of 200 tokens framed by <s> … </s>, ~5% <unk> inside."""
    rng = np.random.default_rng(0)
    ids = rng.integers(4, MASK_ID, (4000, 200))
    ids[rng.random(ids.shape) < 0.05] = 3
    ids[:, 0], ids[:, -1] = 0, 2
    sequences = Ragged(ids.reshape(-1).copy(), np.arange(4001) * 200)
    streams = np.arange(4000, dtype=np.uint64) * np.uint64(7919)
    return sequences, streams, mask_tokens(sequences, streams, VOCAB)


def test_rates(sample):
    sequences, _, out = sample
    eligible = sequences.values >= 4
    selected = out.masked.sum() / eligible.sum()
    assert abs(selected - 0.15) < 0.002  # sd ≈ 0.0004 on 760k eligible tokens
    inputs = out.inputs.values[out.masked]
    originals = out.original[out.masked]
    to_mask = np.mean(inputs == MASK_ID)
    unchanged = np.mean(inputs == originals)
    assert abs(to_mask - 0.8) < 0.006 and abs(unchanged - 0.1) < 0.005
    assert abs(1 - to_mask - unchanged - 0.1) < 0.005  # random replacements


def test_random_replacements_are_ordinary_pieces(sample):
    _, _, out = sample
    replaced = out.inputs.values[out.masked]
    random = replaced[(replaced != MASK_ID) & (replaced != out.original[out.masked])]
    assert random.min() >= 4 and random.max() <= VOCAB - 2
    # Roughly uniform over the ordinary vocabulary: both halves used alike.
    assert abs(np.mean(random < VOCAB // 2) - 0.5) < 0.03


def test_specials_and_unk_are_never_touched(sample):
    sequences, _, out = sample
    special = sequences.values < 4
    assert not out.masked[special].any()
    assert np.array_equal(out.inputs.values[~out.masked], sequences.values[~out.masked])
    assert np.array_equal(out.original, sequences.values)  # targets = original ids


def test_a_sequence_depends_only_on_its_stream(sample):
    sequences, streams, out = sample
    rows = np.array([17, 3, 3999])
    again = mask_tokens(sequences.take(rows), streams[rows], VOCAB)
    expected = out.take(rows)
    assert np.array_equal(again.inputs.values, expected.inputs.values)
    assert np.array_equal(again.masked, expected.masked)


def test_at_least_one_token_per_sequence():
    sequences = Ragged.from_list([[0, 5, 2]] * 500 + [[0, 3, 2], [0, 2]])  # the last two: nothing eligible
    out = mask_tokens(sequences, np.arange(502, dtype=np.uint64), VOCAB)
    per_row = np.add.reduceat(out.masked, sequences.offsets[:-1])
    assert (per_row[:500] == 1).all() and (per_row[500:] == 0).all()
    lazy = mask_tokens(sequences, np.arange(502, dtype=np.uint64), VOCAB, at_least_one=False)
    assert 40 < lazy.masked.sum() < 110  # ~15% of 500


def test_forced_choice_is_spread_over_the_eligible_tokens():
    sequences = Ragged.from_list([[0, 5, 6, 7, 2]] * 3000)
    out = mask_tokens(sequences, np.arange(3000, dtype=np.uint64), VOCAB, mask_prob=1e-6)
    position = out.masked.reshape(3000, 5).argmax(axis=1)
    counts = np.bincount(position, minlength=5)
    assert counts[0] == counts[4] == 0 and counts[1:4].min() > 900


def test_zero_rate_masks_nothing():
    sequences = Ragged.from_list([[0, 5, 6, 2]] * 10)
    out = mask_tokens(sequences, np.arange(10, dtype=np.uint64), VOCAB, mask_prob=0.0)
    assert not out.masked.any() and np.array_equal(out.inputs.values, sequences.values)


def test_empty_input():
    out = mask_tokens(Ragged.from_list([]), np.zeros(0, dtype=np.uint64), VOCAB)
    assert len(out) == 0 and out.masked.size == 0


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(mask_prob=1.5), "mask_prob"),
        (dict(mask_token_prob=-0.1), "mask_token_prob"),
        (dict(mask_token_prob=0.8, random_token_prob=0.3), "must be <= 1"),
        (dict(vocab_size=5), "vocab_size"),
        (dict(streams=np.zeros(3, dtype=np.uint64)), "streams"),
    ],
)
def test_bad_arguments(kwargs, message):
    args = dict(sequences=Ragged.from_list([[0, 5, 2]]), streams=np.zeros(1, dtype=np.uint64), vocab_size=VOCAB)
    with pytest.raises(ValueError, match=message):
        mask_tokens(**{**args, **kwargs})
