"""Multi-way pairs: xx–yy translation pairs drawn through a shared pivot sentence.

The paper pairs every language with English. Where parallel corpora share a pivot (the
demo's corpus is multi-parallel: every language translates the same English sentences, as
OPUS-style corpora often do), two corpora ``en-de`` and ``en-fr`` that hold the same English
sentence give a German–French pair as well. With ``data.pairs=multiway`` a share
(``data.multiway_share``) of the TLM pairs and XLCO pairs (their own pair; a mixup partner
stays as drawn) replaces the pivot sentence of the drawn pair by the other-language side of a
pair from *another* corpus with the same pivot sentence, drawn uniformly among them. A pair
whose pivot sentence no other corpus holds, or whose draw lands in its own corpus (a pivot
sentence repeated there), stays as it is. Corpora and pairs are still drawn with the α
probabilities of the stored corpora, so the languages' shares are unchanged.

Pivot sentences are matched by their token ids (the store's one tokenizer), found once when
the pipeline is built (a 64-bit digest per pair, about a second per million pairs). Every draw
comes from the step's keyed random streams (purposes ``MULTIWAY`` and ``MULTIWAY_PARTNER``),
so the data stay a pure function of (seed, step).
"""

from __future__ import annotations

import hashlib

import numpy as np

from .keyed_random import KeyedRandom
from .schedule import MULTIWAY, MULTIWAY_PARTNER, PairPlan

__all__ = ["PAIRINGS", "PivotGroups"]

PAIRINGS = ("english", "multiway")  # data.pairs: the stored pairs, or through their pivot too


class PivotGroups:
    """Every stored pair whose corpus holds ``pivot``, grouped by its pivot sentence.

    Args:
        sides: per parallel corpus, its two sides' ``(tokens, offsets)`` (side 0 = src).
        languages: per parallel corpus, its (src, tgt) languages.
    """

    def __init__(self, sides: list[tuple[tuple[np.ndarray, np.ndarray], ...]], languages: list[tuple[str, str]], pivot: str):
        # pivot_side[c]: the side of corpus c in the pivot language, -1 for a corpus without it.
        self.pivot_side = np.array([names.index(pivot) if pivot in names else -1 for names in languages], dtype=np.int64)
        sizes = np.array([len(side[0][1]) - 1 for side in sides], dtype=np.int64)
        self.first = np.concatenate([[0], np.cumsum(sizes)])  # global id of corpus c's pair 0
        keys = np.full(int(self.first[-1]), -1, dtype=np.int64)  # -1: no pivot side
        for c, side in enumerate(self.pivot_side.tolist()):
            if side >= 0:
                tokens, offsets = sides[c][side]
                keys[self.first[c] : self.first[c + 1]] = _digests(tokens, offsets)
        # Pairs sorted by pivot sentence: group g spans order[start[g] : start[g] + size[g]].
        self.order = np.argsort(keys, kind="stable")
        sorted_keys = keys[self.order]
        starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
        sizes_of = np.diff(np.r_[starts, len(sorted_keys)])
        group = np.repeat(np.arange(len(starts)), sizes_of)
        self.group_start = np.empty_like(keys)
        self.group_size = np.empty_like(keys)
        self.position = np.empty_like(keys)  # where each pair sits in its group
        self.group_start[self.order] = starts[group]
        self.group_size[self.order] = np.where(sorted_keys >= 0, sizes_of[group], 1)  # no pivot: alone
        self.position[self.order] = np.arange(len(keys)) - starts[group]
        self.corpus_of = np.repeat(np.arange(len(sizes)), sizes)

    @property
    def shared(self) -> int:
        """How many pairs have their pivot sentence in another corpus too."""
        other = np.zeros(len(self.order), dtype=bool)
        for g in np.unique(self.group_start[self.group_size > 1]):
            members = self.order[g : g + self.group_size[self.order[g]]]
            other[members] = len(np.unique(self.corpus_of[members])) > 1
        return int(other.sum())

    def apply(self, rng: KeyedRandom, plan: PairPlan, share: float) -> PairPlan:
        """``plan`` with a ``share`` of its slots turned into pairs through their pivot."""
        gid = self.first[plan.corpus] + plan.index  # (n,)
        size = self.group_size[gid]
        chosen = (rng.uniform(MULTIWAY) < share) & (size > 1) & (self.pivot_side[plan.corpus] >= 0)
        draw = rng.integers(MULTIWAY_PARTNER, np.maximum(size - 1, 1))  # among the others of the group
        draw = draw + (draw >= self.position[gid])  # skip the pair itself
        other = self.order[self.group_start[gid] + np.minimum(draw, size - 1)]
        other_corpus = self.corpus_of[other]
        chosen &= other_corpus != plan.corpus  # the same corpus again: keep the stored pair
        replace = np.where(chosen, self.pivot_side[plan.corpus], -1)
        return plan.through_pivot(replace, other_corpus, other - self.first[other_corpus], 1 - self.pivot_side[other_corpus])


def _digests(tokens: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """A 63-bit digest of each sentence's token ids (n,), the same in every process."""
    out = np.empty(len(offsets) - 1, dtype=np.int64)
    ids = np.asarray(tokens)
    for i in range(len(out)):
        digest = hashlib.blake2b(ids[offsets[i] : offsets[i + 1]].tobytes(), digest_size=8).digest()
        out[i] = int.from_bytes(digest, "little") >> 1  # ≥ 0: -1 marks "no pivot"
    return out
