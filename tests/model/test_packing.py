"""Tests for infoxlm.model.packing: the real tokens of a right-padded batch."""

from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

from infoxlm.model.packing import Packing, select_rows


def _mask(lengths: list[int], width: int) -> torch.Tensor:
    return (torch.arange(width) < torch.tensor(lengths)[:, None]).long()


def test_rows_and_sequence_starts_of_a_mask():
    lengths, width = [4, 1, 3], 5
    packing = Packing.of(_mask(lengths, width))
    assert packing.rows.tolist() == [0, 1, 2, 3, 5, 10, 11, 12]
    assert packing.cu_seqlens.tolist() == [0, 4, 5, 8]
    assert packing.cu_seqlens.dtype == torch.int32
    assert packing.first_rows.tolist() == [0, 4, 5]  # each sequence's first token among the 8
    assert (packing.batch, packing.length, packing.num_tokens) == (3, 5, 8)
    assert packing.has_padding
    assert torch.equal(packing.attention_mask(), _mask(lengths, width).bool())
    full = Packing.of(torch.ones(2, 3, dtype=torch.bool))
    assert not full.has_padding and full.rows.tolist() == list(range(6))


def test_pack_then_pad_restores_real_tokens_and_zeroes_the_padding():
    lengths, width = [3, 5, 2], 5
    packing = Packing.of(_mask(lengths, width))
    x = torch.randn(3, width, 4)
    packed = packing.pack(x)  # (n, 4)
    assert packed.shape == (10, 4)
    real = _mask(lengths, width).bool()
    assert torch.equal(packed, x[real])  # row-major order
    padded = packing.pad(packed)
    assert torch.equal(padded[real], x[real]) and padded[~real].abs().sum() == 0


def test_pad_writes_its_zeros_once_and_hands_the_gradient_back_to_the_real_tokens():
    # pad fills a fresh (B·T, d) buffer and copies the real rows in: no clone of the zeros
    # (the out-of-place index_copy made one, a third write of the padded layout per call).
    lengths, width = [3, 5, 2], 5
    packing = Packing.of(_mask(lengths, width))
    packed = torch.randn(10, 4, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        padded = packing.pad(packed)
    ops = {event.name for event in prof.events()}
    assert "aten::clone" not in ops and "aten::copy_" not in ops, sorted(ops)
    weights = torch.randn(3, width, 4)
    (padded * weights).sum().backward()
    assert torch.equal(packed.grad, weights[_mask(lengths, width).bool()])


def test_select_rows_gradient_lands_on_the_selected_rows_only():
    x = torch.randn(6, 3, requires_grad=True)
    rows = torch.tensor([4, 0, 2])
    weights = torch.randn(3, 3)
    (select_rows(x, rows) * weights).sum().backward()
    expected = torch.zeros(6, 3)
    expected[rows] = weights
    assert torch.equal(x.grad, expected)


def test_to_keeps_the_host_counts():
    packing = Packing.of(_mask([2, 1], 2))
    moved = packing.to("cpu", non_blocking=True)
    assert (moved.batch, moved.length, moved.num_tokens) == (2, 2, 3)
    assert torch.equal(moved.rows, packing.rows) and torch.equal(moved.cu_seqlens, packing.cu_seqlens)


def test_sequence_means_average_each_rows_real_tokens():
    lengths, width = [3, 1, 4], 4
    mask = _mask(lengths, width)
    packing = Packing.of(mask)
    x = torch.randn(3, width, 5)
    expected = torch.stack([x[i, :n].mean(dim=0) for i, n in enumerate(lengths)])
    assert torch.allclose(packing.sequence_means(packing.pack(x)), expected, atol=1e-6)
    low = packing.sequence_means(packing.pack(x).bfloat16())  # summed in fp32, handed back in bf16
    assert low.dtype == torch.bfloat16 and torch.allclose(low.float(), expected, atol=2e-2)


def test_a_bucketed_packing_rounds_its_rows_up_with_a_sequence_of_spare_rows():
    lengths, width = [3, 1, 4], 4  # 8 real tokens
    base = Packing.of(_mask(lengths, width))
    packing = base.bucketed(6)
    assert (packing.num_tokens, packing.spare_rows, packing.num_rows) == (8, 4, 12)
    cu, longest = packing.attention_layout()
    assert cu.tolist() == [0, 3, 4, 8, 12] and longest == 4  # the spare rows: one more sequence
    assert base.bucketed(4).spare_rows == 0 and base.bucketed(4).attention_layout()[0].tolist() == [0, 3, 4, 8]  # 8 is a multiple
    assert base.bucketed(13).attention_layout()[1] == 5  # the spare sequence is longer than any row
    x = torch.randn(3, width, 2)
    packed = packing.pack(x)
    assert packed.shape == (12, 2) and packed[8:].abs().sum() == 0  # real tokens first, then zeros
    assert torch.equal(packing.pad(packed), base.pad(packed[:8]))  # spare rows dropped
    moved = packing.to("cpu")
    assert moved.spare_rows == 4 and torch.equal(moved.attention_layout()[0], cu)
