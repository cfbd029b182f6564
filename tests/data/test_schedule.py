"""Tests for infoxlm.data.schedule: the slot → example choice of every step."""

from __future__ import annotations

import numpy as np
import pytest

from infoxlm.data.keyed_random import KeyedRandom
from infoxlm.data.sampling import language_probabilities
from infoxlm.data.schedule import (
    choose_corpus,
    choose_other_corpus,
    plan_blocks,
    plan_mixup,
    plan_pairs,
    rank_slots,
)


def _chi2(counts: np.ndarray, probabilities: np.ndarray) -> float:
    expected = counts.sum() * probabilities
    keep = expected > 0
    assert counts[~keep].sum() == 0  # nothing drawn where the probability is 0
    return float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum())


@pytest.mark.parametrize("global_batch,world", [(10, 1), (10, 3), (2048, 8), (3, 4), (0, 2)])
def test_rank_slots_partition_the_global_batch(global_batch, world):
    shares = [rank_slots(global_batch, r, world) for r in range(world)]
    assert np.concatenate(shares).tolist() == list(range(global_batch))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_rank_slots_bad_arguments():
    with pytest.raises(ValueError, match="rank"):
        rank_slots(8, 2, 2)
    with pytest.raises(ValueError, match="world_size"):
        rank_slots(8, 0, 0)


def test_language_frequencies_follow_the_alpha_formula():
    tokens = {"en": 9_000_000, "de": 900_000, "sw": 20_000, "xx": 0}
    p = np.array(list(language_probabilities(tokens, 0.7).values()))
    rng = KeyedRandom(seed=5, objective=1, step=0, slots=np.arange(200_000))
    plan = plan_blocks(rng, p, num_blocks=np.array([1000, 100, 3, 0]))
    counts = np.bincount(plan.language, minlength=4)
    assert counts[3] == 0
    assert _chi2(counts, p) < 21  # df = 2: p ≈ 3e-5 at 21
    # Blocks are uniform inside a language and in range.
    sw = plan.block[plan.language == 2]
    assert set(np.unique(sw)) == {0, 1, 2}
    assert _chi2(np.bincount(sw, minlength=3), np.full(3, 1 / 3)) < 21


def test_pair_frequencies_and_directions():
    p = np.array(list(language_probabilities({"en-de": 500, "en-sw": 50}, 0.7).values()))
    plan = plan_pairs(KeyedRandom(1, 2, 3, np.arange(100_000)), p, num_pairs=np.array([7, 2]))
    assert _chi2(np.bincount(plan.corpus, minlength=2), p) < 17  # df = 1
    assert abs(plan.swap.mean() - 0.5) < 0.01
    assert (plan.index < np.array([7, 2])[plan.corpus]).all()


def test_choose_corpus_edges():
    p = np.array([0.0, 0.5, 0.0, 0.5, 0.0])
    u = np.array([0.0, 0.4999999, 0.5, 0.9999999999])
    assert choose_corpus(u, p).tolist() == [1, 1, 3, 3]


def test_other_corpus_is_never_the_excluded_one_and_renormalised():
    p = np.array([0.5, 0.3, 0.2])
    n = 120_000
    rng = KeyedRandom(2, 3, 4, np.arange(n))
    exclude = rng.integers(1, 3)
    other = choose_other_corpus(rng.uniform(2), p, exclude)
    assert not np.any(other == exclude)
    for c in range(3):
        rest = np.where(np.arange(3) == c, 0.0, p)
        counts = np.bincount(other[exclude == c], minlength=3)
        assert _chi2(counts, rest / rest.sum()) < 17


def test_mixup_partner_from_another_corpus():
    p = np.array([0.6, 0.4])
    plan = plan_mixup(KeyedRandom(0, 3, 0, np.arange(5000)), p, np.array([10, 10]), mixup=True)
    assert not np.any(plan.partner.corpus == plan.pair.corpus)
    for coin in (plan.partner.swap, plan.partner_first_in_query, plan.partner_first_in_key):
        assert 0.45 < coin.mean() < 0.55


def test_mixup_single_corpus_takes_a_different_pair():
    plan = plan_mixup(KeyedRandom(0, 3, 0, np.arange(5000)), np.array([0.0, 1.0]), np.array([0, 3]), mixup=True)
    assert (plan.partner.corpus == 1).all() and (plan.pair.corpus == 1).all()
    assert not np.any(plan.partner.index == plan.pair.index)
    assert set(np.unique(plan.partner.index)) == {0, 1, 2}


def test_mixup_off_has_no_partner():
    plan = plan_mixup(KeyedRandom(0, 3, 0, np.arange(10)), np.array([1.0]), np.array([5]), mixup=False)
    assert plan.partner is None and plan.partner_first_in_query is None


def test_mixup_single_pair_is_rejected():
    with pytest.raises(ValueError, match="at least 2 pairs"):
        plan_mixup(KeyedRandom(0, 3, 0, np.arange(4)), np.array([1.0]), np.array([1]), mixup=True)
