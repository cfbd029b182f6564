"""Language sampling probabilities for multilingual corpora.

XLM-R and InfoXLM draw training text from each language ``l`` with probability

    p_l ∝ (n_l / n) ** alpha,   n = Σ_l n_l,

where ``n_l`` is the size of language ``l``'s corpus (lines, sentences or tokens -- the
unit is the caller's choice, the formula only needs it to be consistent) and ``0 < alpha
≤ 1``. ``alpha = 1`` samples in proportion to the data; smaller values flatten the
distribution so that low-resource languages are seen more often than their raw share
(XLM-R uses ``alpha = 0.3`` for its vocabulary and ``0.7`` for its training data).

The function here is deliberately free of any notion of files or tokenizers so that the
tokenizer trainer and the pre-training data sampler share exactly one implementation.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Mapping

__all__ = ["SAMPLING_UNITS", "check_alpha", "language_probabilities"]

# What n_l counts in pre-training: lines and translation pairs (the paper's "instances"), or tokens.
SAMPLING_UNITS = ("instances", "tokens")


def check_alpha(alpha: object, error: type[Exception] = ValueError) -> float:
    """``alpha`` as a float if it is a number in (0, 1]; else ``error`` naming the value.

    >>> check_alpha(0.7)
    0.7
    >>> check_alpha(float("nan"))
    Traceback (most recent call last):
    ValueError: alpha=nan is invalid; expected a number in (0, 1]
    """
    # bool is an int subclass and NaN fails every comparison: reject both explicitly so
    # that e.g. alpha=True or alpha=nan cannot slip through the range check.
    if isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or math.isnan(alpha) or not 0 < alpha <= 1:
        raise error(f"alpha={alpha!r} is invalid; expected a number in (0, 1]")
    return float(alpha)


def language_probabilities(counts: Mapping[str, int], alpha: float) -> dict[str, float]:
    """Return the exponentially smoothed sampling probability of every language.

    Args:
        counts: data size per language (e.g. number of non-empty lines). Every value must
            be a non-negative integer and at least one must be positive.
        alpha: smoothing exponent in ``(0, 1]``; ``1`` keeps the raw proportions, values
            near ``0`` approach a uniform distribution over the languages that have data.

    Returns:
        A dict with the same keys, in the same order, as ``counts``. Values sum to 1;
        languages whose count is 0 get probability 0 (they cannot be sampled at all).

    Raises:
        ValueError: if ``alpha`` is outside ``(0, 1]``, a count is negative or not an
            integer, or no language has a positive count.

    Example:
        >>> probs = language_probabilities({"en": 900, "sw": 100}, alpha=0.5)
        >>> round(probs["en"], 4), round(probs["sw"], 4)
        (0.75, 0.25)
        >>> language_probabilities({"en": 900, "sw": 100}, alpha=1.0)
        {'en': 0.9, 'sw': 0.1}
    """
    check_alpha(alpha)
    if not counts:
        raise ValueError("counts is empty: expected at least one language with a positive count")

    sizes: dict[str, int] = {}
    for language, count in counts.items():
        # operator.index accepts Python and numpy integers but not floats or strings; bool
        # is an int subclass, yet a True/False "count" is always a caller mistake.
        try:
            if isinstance(count, bool):
                raise TypeError
            size = operator.index(count)
        except TypeError:
            raise ValueError(
                f"count for language {language!r} must be a non-negative integer, got {count!r}"
            ) from None
        if size < 0:
            raise ValueError(f"count for language {language!r} must be non-negative, got {count!r}")
        sizes[language] = size

    total = sum(sizes.values())
    if total == 0:
        raise ValueError(
            f"all counts are zero ({', '.join(map(str, sizes))}): expected at least one language with data"
        )

    # Raise the shares n_l / n (all <= 1) rather than the raw counts: the common factor
    # n ** -alpha cancels on normalisation, and shares stay well-scaled for huge corpora.
    weights = {language: (size / total) ** alpha if size > 0 else 0.0 for language, size in sizes.items()}
    norm = math.fsum(weights.values())
    return {language: weight / norm for language, weight in weights.items()}
