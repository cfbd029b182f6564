"""Tests for infoxlm.data.sampling.language_probabilities (p_l ∝ (n_l / n) ** alpha)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infoxlm.data.sampling import language_probabilities

COUNTS = {"en": 1_000_000, "de": 250_000, "sw": 2_000, "yo": 50}


def _entropy(probabilities: dict[str, float]) -> float:
    return -sum(p * math.log(p) for p in probabilities.values() if p > 0)


@pytest.mark.parametrize("alpha", [0.01, 0.3, 0.5, 0.7, 1.0])
def test_matches_formula_and_sums_to_one(alpha):
    probabilities = language_probabilities(COUNTS, alpha)
    n = sum(COUNTS.values())
    weights = {lang: (count / n) ** alpha for lang, count in COUNTS.items()}
    total = sum(weights.values())
    for lang in COUNTS:
        assert probabilities[lang] == pytest.approx(weights[lang] / total, rel=1e-12)
    assert math.fsum(probabilities.values()) == pytest.approx(1.0, abs=1e-12)
    assert list(probabilities) == list(COUNTS)  # same keys, same order


def test_alpha_one_is_proportional():
    probabilities = language_probabilities({"a": 3, "b": 1, "c": 6}, 1.0)
    assert probabilities == pytest.approx({"a": 0.3, "b": 0.1, "c": 0.6})


def test_small_alpha_flattens():
    previous = None
    for alpha in (1.0, 0.7, 0.5, 0.3, 0.1):
        probabilities = language_probabilities(COUNTS, alpha)
        if previous is not None:
            # Lower alpha: the small languages gain, the largest loses, entropy rises.
            assert probabilities["yo"] > previous["yo"]
            assert probabilities["en"] < previous["en"]
            assert _entropy(probabilities) > _entropy(previous)
        previous = probabilities
    # Near zero the distribution approaches uniform over the languages that have data.
    nearly_uniform = language_probabilities(COUNTS, 1e-6)
    assert all(p == pytest.approx(0.25, abs=1e-4) for p in nearly_uniform.values())
    # The order by size never changes.
    assert sorted(COUNTS, key=nearly_uniform.get) == sorted(COUNTS, key=COUNTS.get)


def test_xlmr_example_values():
    # Two languages 90/10 at alpha=0.5: weights 0.9**0.5 and 0.1**0.5.
    probabilities = language_probabilities({"big": 90, "small": 10}, 0.5)
    expected_small = math.sqrt(0.1) / (math.sqrt(0.1) + math.sqrt(0.9))
    assert probabilities["small"] == pytest.approx(expected_small)
    assert probabilities["small"] == pytest.approx(0.25)


def test_zero_counts_get_zero_probability():
    probabilities = language_probabilities({"en": 10, "xx": 0, "de": 10}, 0.3)
    assert probabilities == {"en": 0.5, "xx": 0.0, "de": 0.5}


def test_single_language_and_numpy_integers():
    assert language_probabilities({"en": 7}, 0.3) == {"en": 1.0}
    probabilities = language_probabilities({"en": np.int64(300), "de": np.int32(100)}, np.float64(1.0))
    assert probabilities == pytest.approx({"en": 0.75, "de": 0.25})
    # Huge corpora do not overflow.
    huge = language_probabilities({"en": 10**18, "sw": 10**9}, 0.3)
    assert math.isfinite(huge["sw"]) and 0 < huge["sw"] < huge["en"]


@pytest.mark.parametrize("alpha", [0, 0.0, -0.5, 1.0001, 2, float("nan"), float("inf"), True, "0.3", None])
def test_invalid_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        language_probabilities({"en": 1}, alpha)


@pytest.mark.parametrize(
    "counts, message",
    [
        ({}, "counts is empty"),
        ({"en": 0, "de": 0}, "all counts are zero"),
        ({"en": -1, "de": 5}, "'en' must be non-negative, got -1"),
        ({"en": 2.5}, "'en' must be a non-negative integer, got 2.5"),
        ({"en": "10"}, "'en' must be a non-negative integer"),
        ({"en": True}, "'en' must be a non-negative integer"),
    ],
)
def test_invalid_counts(counts, message):
    with pytest.raises(ValueError, match=message):
        language_probabilities(counts, 0.3)
