"""Tests for infoxlm.data.batching: micro-batches by token budget and their padding."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from infoxlm.data.batching import (
    contrast_micro_batches,
    filler_contrast_batch,
    filler_mlm_batch,
    group_by_token_budget,
    mlm_micro_batches,
    padding_fraction,
)
from infoxlm.data.masking import mask_tokens
from infoxlm.data.ragged import Ragged

VOCAB = 500


def _masked(lengths, seed=0):
    rng = np.random.default_rng(seed)
    sequences = Ragged.from_list([[0] + rng.integers(4, VOCAB - 1, n - 2).tolist() + [2] for n in lengths])
    return mask_tokens(sequences, np.arange(len(lengths), dtype=np.uint64) + np.uint64(seed), VOCAB)


def test_padding_fraction_by_hand():
    masked = _masked([6, 4, 3, 3])
    batches = mlm_micro_batches(masked, np.arange(4), max_tokens=12)
    # Longest first: [6, 4] → 2×6 (2 pads), then [3, 3] → 2×3 (0 pads).
    assert [tuple(b.input_ids.shape) for b in batches] == [(2, 6), (2, 3)]
    assert [b.num_padding for b in batches] == [2, 0]
    assert padding_fraction(batches) == pytest.approx(2 / 18)
    assert sum(b.num_tokens for b in batches) == 16
    assert padding_fraction([]) == 0.0


def test_rows_targets_and_padding_are_consistent():
    lengths = np.random.default_rng(1).integers(3, 40, 300)
    masked = _masked(lengths)
    slots = np.arange(1000, 1300)
    batches = mlm_micro_batches(masked, slots, max_tokens=200)
    seen = []
    for b in batches:
        assert b.num_positions <= 200
        real = b.attention_mask.bool()
        assert torch.equal(b.input_ids[~real], torch.ones_like(b.input_ids[~real]))  # <pad> = 1
        assert not b.masked_positions[~real].any()
        assert b.num_masked == len(b.targets) == int(b.masked_positions.sum())
        for r, slot in enumerate(b.slots.tolist()):
            i = slot - 1000
            n = int(lengths[i])
            assert int(real[r].sum()) == n and bool(real[r, :n].all())
            assert b.input_ids[r, :n].tolist() == masked.inputs[i].tolist()
            assert b.masked_positions[r, :n].tolist() == masked.masked[masked.inputs.offsets[i] : masked.inputs.offsets[i + 1]].tolist()
            seen.append(slot)
        # Targets: the original ids at the masked positions, row-major.
        original = torch.ones_like(b.input_ids)
        for r, slot in enumerate(b.slots.tolist()):
            i = slot - 1000
            original[r, : lengths[i]] = torch.from_numpy(masked.original[masked.inputs.offsets[i] : masked.inputs.offsets[i + 1]])
        assert torch.equal(b.targets, original[b.masked_positions])
    assert sorted(seen) == slots.tolist()
    widths = [b.input_ids.shape[1] for b in batches]
    assert widths == sorted(widths, reverse=True)  # longest first


def test_batches_carry_their_packing_and_masked_rows():
    """Made on the CPU with the batch, so that an encoder on a GPU never reads them back."""
    lengths = np.random.default_rng(2).integers(3, 30, 50)
    for b in mlm_micro_batches(_masked(lengths), np.arange(50), max_tokens=120):
        real = b.attention_mask.bool()
        assert torch.equal(b.packing.rows, real.reshape(-1).nonzero().squeeze(1))
        assert b.packing.num_tokens == b.num_tokens and (b.packing.batch, b.packing.length) == tuple(real.shape)
        assert b.packing.cu_seqlens.tolist() == [0, *real.sum(1).cumsum(0).tolist()]
        # masked_rows pick, among the real tokens, exactly the masked positions, in row-major order
        expected = b.masked_positions[real].nonzero().squeeze(1)
        assert torch.equal(b.masked_rows, expected) and len(b.masked_rows) == b.num_masked
        moved = b.to("cpu")
        assert torch.equal(moved.masked_rows, b.masked_rows) and moved.packing.num_tokens == b.num_tokens


def test_full_rows_take_the_fast_path_with_the_same_result():
    masked = _masked([8] * 10)
    batches = mlm_micro_batches(masked, np.arange(10), max_tokens=32)
    assert [b.num_examples for b in batches] == [4, 4, 2]
    assert all(b.num_padding == 0 for b in batches)
    assert torch.equal(torch.cat([b.input_ids for b in batches]).reshape(-1), torch.from_numpy(masked.inputs.values))


def test_group_by_token_budget_cuts_greedily():
    groups = group_by_token_budget([np.array([5, 9, 2, 9, 1])], np.arange(5), max_tokens=18)
    assert [g.tolist() for g in groups] == [[1, 3], [0, 2, 4]]  # 2×9 = 18, then 3×5 = 15
    assert group_by_token_budget([np.zeros(0, dtype=np.int64)], np.zeros(0, dtype=np.int64), 8) == []


def test_contrast_batches_align_views_and_count_both():
    query, key = _masked([10, 3, 7, 5], seed=1), _masked([4, 9, 6, 5], seed=2)
    batches = contrast_micro_batches(query, key, np.array([7, 8, 9, 10]), max_tokens=30)
    for b in batches:
        assert torch.equal(b.query.slots, b.key.slots)
        assert b.num_examples * (b.query.input_ids.shape[1] + b.key.input_ids.shape[1]) <= 30
        assert b.num_positions == b.query.num_positions + b.key.num_positions
        assert b.num_padding == b.query.num_padding + b.key.num_padding
        for r, slot in enumerate(b.slots.tolist()):
            i = slot - 7
            assert b.query.input_ids[r, : query.lengths[i]].tolist() == query.inputs[i].tolist()
            assert b.key.input_ids[r, : key.lengths[i]].tolist() == key.inputs[i].tolist()
    assert sorted(s for b in batches for s in b.slots.tolist()) == [7, 8, 9, 10]


def test_to_keeps_counts():
    b = mlm_micro_batches(_masked([5, 4]), np.arange(2), max_tokens=10)[0]
    moved = b.to("cpu")
    assert torch.equal(moved.input_ids, b.input_ids) and moved.num_tokens == b.num_tokens
    assert moved.input_ids.dtype == torch.long and moved.masked_positions.dtype == torch.bool


def test_a_filler_is_one_short_row_with_one_target_and_says_so_wherever_it_goes():
    b = filler_mlm_batch()
    assert b.input_ids.tolist() == [[0, 2]] and b.attention_mask.tolist() == [[1, 1]]
    assert b.targets.tolist() == [2] and b.masked_rows.tolist() == [1] and (b.num_tokens, b.num_masked) == (2, 1)
    assert b.filler and b.to("cpu").filler
    assert not mlm_micro_batches(_masked([5, 4]), np.arange(2), max_tokens=64)[0].to("cpu").filler
    pair = filler_contrast_batch()
    assert pair.filler and pair.to("cpu").filler and pair.num_examples == 1


def test_bad_budgets():
    with pytest.raises(ValueError, match="cannot hold a single example of 6 tokens"):
        mlm_micro_batches(_masked([6, 4]), np.arange(2), max_tokens=5)
    with pytest.raises(ValueError, match="max_tokens must be a positive integer"):
        mlm_micro_batches(_masked([6]), np.arange(1), max_tokens=0)
    with pytest.raises(ValueError, match="same number"):
        contrast_micro_batches(_masked([6]), _masked([6, 6]), np.arange(1), max_tokens=50)
