"""Synthetic but realistic training batches, in the engine's own types (``StepData``).

The benchmark and the trainer's tests must not depend on a prepared corpus, yet the step they
run should see what training sees, so the batches are built by the project's own masking and
micro-batching code (``mask_tokens``, ``mlm_micro_batches``, ``contrast_micro_batches``) from
random token ids with realistic shapes:

- MMLM: ``<s> w … </s>`` blocks of exactly ``block_size`` tokens (as packed streams are);
- TLM: ``<s> a </s> b </s>``, cut to ``tlm_max_length``;
- XLCO (mixup views, paper §3.3): query ``<s> c1 </s> d1 </s>``, key ``<s> c2 </s> d2 </s>``,
  each cut to ``xlco_max_length``;
- sentence lengths log-normal with a median of 24 pieces (σ = 0.5, 4 … 200): parallel-corpus
  sentences in XLM-R pieces; a translation's length is its source's × log-normal(0, 0.2);
- ids uniform over the ordinary vocabulary (4 … V − 2); 15 % of the eligible tokens masked,
  80 / 10 / 10 (``<mask>`` / random piece / unchanged); XLCO views masked too, as the engine
  does (``mask_xlco``).

``synthetic_step(spec, step)`` is a pure function of (spec.seed, step), so the engine and the
baseline get identical batches when both ask for the same step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from ..special_tokens import BOS_ID, EOS_ID, FIRST_ORDINARY_ID
from .batching import contrast_micro_batches, mlm_micro_batches
from .masking import mask_tokens
from .pipeline import ObjectiveStats, StepData
from .ragged import Ragged

MEDIAN_SENTENCE = 24  # pieces
SENTENCE_SIGMA = 0.5
TRANSLATION_SIGMA = 0.2
SHORTEST, LONGEST = 4, 200


@dataclass(frozen=True)
class SyntheticSpec:
    """What one step's batches look like."""

    vocab_size: int
    block_size: int
    tlm_max_length: int
    xlco_max_length: int
    mmlm_batch_size: int
    tlm_batch_size: int
    xlco_batch_size: int
    max_tokens: int
    seed: int = 0
    mask_prob: float = 0.15

    def __post_init__(self) -> None:
        for name in ("mmlm_batch_size", "tlm_batch_size", "xlco_batch_size"):
            if getattr(self, name) < 0:
                raise DataError(f"{name}={getattr(self, name)}: expected a number of examples >= 0")
        if not (self.mmlm_batch_size or self.tlm_batch_size or self.xlco_batch_size):
            raise DataError("every batch size is 0: expected at least one objective with examples")
        needs = {"block_size": self.block_size, "tlm_max_length": self.tlm_max_length, "2 × xlco_max_length": 2 * self.xlco_max_length}
        for what, size in needs.items():
            if size > self.max_tokens:
                raise DataError(f"--max-tokens {self.max_tokens} cannot hold one example ({what} = {size}); raise it to {size}")


def _sentence_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n,) sentence lengths in pieces (log-normal, median 24)."""
    lengths = np.exp(rng.normal(np.log(MEDIAN_SENTENCE), SENTENCE_SIGMA, n))
    return np.clip(np.rint(lengths), SHORTEST, LONGEST).astype(np.int64)


def _translations(rng: np.random.Generator, lengths: np.ndarray) -> np.ndarray:
    """(n,) lengths of translations of sentences with these lengths."""
    ratio = np.exp(rng.normal(0.0, TRANSLATION_SIGMA, len(lengths)))
    return np.clip(np.rint(lengths * ratio), SHORTEST, LONGEST).astype(np.int64)


def _framed(rng: np.random.Generator, first: np.ndarray, second: np.ndarray | None, max_length: int, vocab: int) -> Ragged:
    """``<s> a </s>`` (or ``<s> a </s> b </s>``) sequences of random pieces, cut to max_length.

    The longer part is cut first, as the engine's fair truncation does."""
    specials = 2 if second is None else 3
    a = first.copy()
    b = np.zeros_like(a) if second is None else second.copy()
    budget = max_length - specials
    while True:  # shorten the longer part until each sequence fits (a few rounds at most)
        over = a + b - budget
        if not (over > 0).any():
            break
        longer_a = a >= b
        cut = np.maximum(over, 0)
        a = np.where(longer_a, np.maximum(a - cut, np.minimum(a, budget // 2)), a)
        b = np.where(~longer_a, np.maximum(b - cut, np.minimum(b, budget // 2)), b)
    lengths = a + b + specials
    seqs = Ragged.from_lengths(lengths)
    seqs.values[:] = rng.integers(FIRST_ORDINARY_ID, vocab - 1, int(lengths.sum()))
    starts = seqs.offsets[:-1]
    seqs.values[starts] = BOS_ID
    seqs.values[starts + a + 1] = EOS_ID
    if second is not None:
        seqs.values[seqs.offsets[1:] - 1] = EOS_ID
    return seqs


def _mask(rng: np.random.Generator, seqs: Ragged, spec: SyntheticSpec, at_least_one: bool):
    streams = rng.integers(0, np.iinfo(np.uint64).max, len(seqs), dtype=np.uint64, endpoint=True)
    return mask_tokens(seqs, streams, spec.vocab_size, spec.mask_prob, 0.8, 0.1, at_least_one)


def _stats(batches: list, n: int) -> ObjectiveStats:
    return ObjectiveStats(
        num_examples=n,
        num_micro_batches=len(batches),
        num_tokens=sum(b.num_tokens for b in batches),
        num_positions=sum(b.num_positions for b in batches),
        num_masked=sum(b.num_masked for b in batches),
    )


def synthetic_step(spec: SyntheticSpec, step: int) -> StepData:
    """One step's micro-batches (a world of one), as ``DataPipeline.step`` would return them."""
    started = time.perf_counter()
    rng = np.random.default_rng([spec.seed, step])
    V = spec.vocab_size
    mmlm, tlm, xlco = [], [], []
    if spec.mmlm_batch_size:
        n = spec.mmlm_batch_size
        blocks = _framed(rng, np.full(n, spec.block_size - 2, dtype=np.int64), None, spec.block_size, V)
        mmlm = mlm_micro_batches(_mask(rng, blocks, spec, True), np.arange(n), spec.max_tokens)
    if spec.tlm_batch_size:
        n = spec.tlm_batch_size
        src = _sentence_lengths(rng, n)
        pairs = _framed(rng, src, _translations(rng, src), spec.tlm_max_length, V)
        tlm = mlm_micro_batches(_mask(rng, pairs, spec, True), np.arange(n), spec.max_tokens)
    if spec.xlco_batch_size:
        n = spec.xlco_batch_size
        c1, d1 = _sentence_lengths(rng, n), _sentence_lengths(rng, n)
        c2, d2 = _translations(rng, c1), _translations(rng, d1)
        query = _framed(rng, c1, d1, spec.xlco_max_length, V)
        key = _framed(rng, c2, d2, spec.xlco_max_length, V)
        xlco = contrast_micro_batches(
            _mask(rng, query, spec, False), _mask(rng, key, spec, False), np.arange(n), spec.max_tokens
        )
    stats = {
        "mmlm": _stats(mmlm, spec.mmlm_batch_size),
        "tlm": _stats(tlm, spec.tlm_batch_size),
        "xlco": _stats(xlco, spec.xlco_batch_size),
    }
    return StepData(step, 0, 1, mmlm, tlm, xlco, stats, time.perf_counter() - started)


def step_tokens(data: StepData) -> int:
    """Real (non-padding) input tokens of a step: MMLM + TLM + both XLCO views."""
    return sum(s.num_tokens for s in data.stats.values())
