"""Which example fills which slot of a step's global batch: a pure function of the keys.

The engine fixes a *global* batch per objective (examples per optimizer step, independent of
the number of processes). Slot ``i`` of step ``t`` for objective ``o`` always holds the
same example: every choice below is drawn from ``KeyedRandom(seed, o, t, slots)`` and never
from the rank, so 1 process with global batch G and 2 processes with G/2 slots each compute
the very same examples, and a resumed run continues with exactly what it would have seen.
A rank takes a contiguous share of the slots (:func:`rank_slots`).

Sampling, per slot (with replacement: a block or pair may appear twice in a step or in
consecutive steps; with corpora much larger than a batch this is negligible, and it keeps
every slot independent of every other, which is what makes re-sharding exact):

* MMLM: a language with p_l ∝ (n_l / n)^α, n_l its instances (lines; the paper's unit and
  ``data.sampling_unit``'s default) or, with ``data.sampling_unit=tokens``, its tokens; then a
  block of that language uniformly.
* TLM and XLCO: a parallel corpus with p_c ∝ (n_c / n)^α, n_c its pairs (or its tokens, both
  sides, under ``tokens``); then a pair uniformly; then a fair coin for the direction.
* XLCO mixup: the partner pair comes from *another* corpus, drawn with the same α
  probabilities renormalised without the first one; if the store holds a single non-empty
  parallel corpus, it is a different pair of that corpus. A coin decides which side of the
  partner joins the query view, and two more coins the order inside each view.

The integer ids below are part of the data-order contract: changing one changes what
every existing run sees.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .keyed_random import KeyedRandom

__all__ = [
    "OBJECTIVE_IDS",
    "BlockPlan",
    "PairPlan",
    "MixupPlan",
    "rank_slots",
    "choose_corpus",
    "plan_blocks",
    "plan_pairs",
    "plan_mixup",
]

OBJECTIVE_IDS = {"mmlm": 1, "tlm": 2, "xlco": 3}

# Purposes: one independent draw per slot each.
CORPUS = 1  # language / parallel corpus
ITEM = 2  # block / pair inside it
SWAP = 3  # which side comes first (TLM) / is the query (XLCO)
PARTNER_CORPUS = 4
PARTNER_ITEM = 5
PARTNER_SWAP = 6  # which side of the partner pair joins the query view
QUERY_ORDER = 7  # partner text first in the query view
KEY_ORDER = 8  # partner text first in the key view
MASK = 9  # token streams for masking: MMLM / TLM input, XLCO query view
MASK_KEY = 10  # XLCO key view
MULTIWAY = 11  # data.pairs=multiway: whether the slot's pair goes through its pivot (data/multiway.py)
MULTIWAY_PARTNER = 12  # which pair of another corpus with the same pivot sentence


def rank_slots(global_batch: int, rank: int, world_size: int) -> np.ndarray:
    """The contiguous slots [⌊G·r/W⌋, ⌊G·(r+1)/W⌋) of rank r: shares differ by at most one."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank must be in [0, world_size) with world_size >= 1, got rank={rank}, world_size={world_size}")
    lo, hi = global_batch * rank // world_size, global_batch * (rank + 1) // world_size
    return np.arange(lo, hi, dtype=np.int64)


def choose_corpus(u: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """Inverse-CDF choice: (n,) uniforms in [0, 1) → (n,) indices into ``probabilities``.

    A corpus with probability 0 is never chosen (``side="right"`` skips empty CDF steps).
    """
    cdf = np.cumsum(probabilities)
    index = np.searchsorted(cdf, u * cdf[-1], side="right")
    # u·cdf[-1] < cdf[-1] always, so the index is in range; the clip is belt and braces.
    return np.minimum(index, int(np.flatnonzero(probabilities)[-1]))


def choose_other_corpus(u: np.ndarray, probabilities: np.ndarray, exclude: np.ndarray) -> np.ndarray:
    """Like :func:`choose_corpus` with corpus ``exclude[i]`` removed for draw i.

    The excluded corpus's CDF interval is cut out: a point drawn in the remaining mass is
    shifted past it, then looked up in the full CDF.
    """
    cdf = np.cumsum(probabilities)  # (C,)
    p_excl = probabilities[exclude]  # (n,)
    before = cdf[exclude] - p_excl  # (n,) mass of the corpora before the excluded one
    x = u * (cdf[-1] - p_excl)
    x = np.where(x >= before, x + p_excl, x)
    index = np.searchsorted(cdf, x, side="right")
    index = np.minimum(index, int(np.flatnonzero(probabilities)[-1]))
    # Rounding could in principle land on the excluded corpus itself; step to a neighbour.
    return np.where(index == exclude, _nearest_other(index, probabilities), index)


def _nearest_other(index: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    positive = np.flatnonzero(probabilities)
    pos = np.searchsorted(positive, index)
    return positive[np.where(pos + 1 < len(positive), pos + 1, pos - 1)]


@dataclass
class BlockPlan:
    """MMLM: slot i holds block ``block[i]`` of language ``language[i]`` (index into the language list)."""

    slots: np.ndarray  # (n,) int64
    language: np.ndarray  # (n,) int64
    block: np.ndarray  # (n,) int64


Part = tuple[np.ndarray, np.ndarray, np.ndarray]  # one sentence per row: (corpus, pair index, side)


@dataclass
class PairPlan:
    """Slot i holds pair ``index[i]`` of parallel corpus ``corpus[i]``; ``swap[i]``: tgt side first.

    Multi-way (data/multiway.py): where ``replace_side[i]`` ≥ 0, that side of the pair (its
    pivot sentence) is replaced by side ``with_side[i]`` of pair ``with_index[i]`` of corpus
    ``with_corpus[i]``; -1 keeps the stored pair.
    """

    slots: np.ndarray  # (n,) int64
    corpus: np.ndarray  # (n,) int64
    index: np.ndarray  # (n,) int64
    swap: np.ndarray  # (n,) bool
    replace_side: np.ndarray | None = None  # (n,) int64
    with_corpus: np.ndarray | None = None  # (n,) int64
    with_index: np.ndarray | None = None  # (n,) int64
    with_side: np.ndarray | None = None  # (n,) int64

    def through_pivot(self, replace_side: np.ndarray, corpus: np.ndarray, index: np.ndarray, side: np.ndarray) -> "PairPlan":
        """This plan with the replacements described in the class docstring."""
        return PairPlan(self.slots, self.corpus, self.index, self.swap, replace_side, corpus, index, side)

    def parts(self, first_side: np.ndarray) -> tuple[Part, Part]:
        """(the sentence on ``first_side`` (n,) of each pair, the other one), replacements applied."""
        first_side = first_side.astype(np.int64)
        parts = []
        for side in (first_side, 1 - first_side):
            part = (self.corpus, self.index, side)
            if self.replace_side is not None:
                hit = self.replace_side == side
                part = tuple(np.where(hit, w, p) for w, p in zip((self.with_corpus, self.with_index, self.with_side), part))
            parts.append(part)
        return parts[0], parts[1]


@dataclass
class MixupPlan:
    """XLCO: the pair (``pair.swap``: tgt is the query side) and, with mixup, its partner.

    The query view holds the pair's query side c1 and one side of the partner; the key
    view holds c2 and the partner's other side. ``partner.swap`` True: the partner's tgt
    side joins the query view. ``partner_first_in_query`` / ``partner_first_in_key``:
    the partner's text comes first in that view.
    """

    pair: PairPlan
    partner: PairPlan | None
    partner_first_in_query: np.ndarray | None  # (n,) bool
    partner_first_in_key: np.ndarray | None  # (n,) bool


def plan_blocks(rng: KeyedRandom, probabilities: np.ndarray, num_blocks: np.ndarray) -> BlockPlan:
    """probabilities (L,) per language; num_blocks (L,) blocks per language."""
    language = choose_corpus(rng.uniform(CORPUS), probabilities)
    return BlockPlan(rng.slots, language, rng.integers(ITEM, num_blocks[language]))


def plan_pairs(rng: KeyedRandom, probabilities: np.ndarray, num_pairs: np.ndarray) -> PairPlan:
    """probabilities (C,) per parallel corpus; num_pairs (C,) pairs per corpus."""
    corpus = choose_corpus(rng.uniform(CORPUS), probabilities)
    return PairPlan(rng.slots, corpus, rng.integers(ITEM, num_pairs[corpus]), rng.coin(SWAP))


def plan_mixup(rng: KeyedRandom, probabilities: np.ndarray, num_pairs: np.ndarray, mixup: bool) -> MixupPlan:
    """The XLCO pair of every slot and, when ``mixup``, its partner pair and view orders."""
    pair = plan_pairs(rng, probabilities, num_pairs)
    if not mixup:
        return MixupPlan(pair, None, None, None)
    if np.count_nonzero(probabilities) >= 2:
        corpus = choose_other_corpus(rng.uniform(PARTNER_CORPUS), probabilities, pair.corpus)
        index = rng.integers(PARTNER_ITEM, num_pairs[corpus])
    else:
        # One corpus: a uniformly drawn *different* pair of it (needs ≥ 2 pairs, checked by the caller).
        corpus = pair.corpus
        size = num_pairs[corpus]
        if len(size) and size.min() < 2:
            raise ValueError("mixup with a single parallel corpus needs at least 2 pairs in it")
        index = (pair.index + 1 + rng.integers(PARTNER_ITEM, size - 1)) % size
    partner = PairPlan(rng.slots, corpus, index, rng.coin(PARTNER_SWAP))
    return MixupPlan(pair, partner, rng.coin(QUERY_ORDER), rng.coin(KEY_ORDER))
