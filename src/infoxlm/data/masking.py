"""BERT-style token masking for MMLM, TLM and (optionally) the XLCO views.

Rule, per token of a sequence:

* only *eligible* tokens are ever selected: ordinary vocabulary pieces, i.e. not ``<s>``,
  ``<pad>``, ``</s>``, ``<mask>`` and not ``<unk>`` either: ``<unk>`` carries no text to
  reconstruct, and training the model to predict it only rewards emitting ``<unk>``;
* each eligible token is selected independently with probability ``mask_prob`` (15%);
* a selected token becomes ``<mask>`` with probability ``mask_token_prob`` (80%), a random
  piece drawn uniformly from the non-special vocabulary (ids 4 … vocab_size - 2) with
  probability ``random_token_prob`` (10%), and stays unchanged otherwise (10%);
* with ``at_least_one`` (used for MMLM and TLM) and ``mask_prob > 0``, a sequence that
  has eligible tokens but drew none gets its eligible token with the smallest draw
  selected, so that no example is wasted in the loss. This raises the rate of very short
  sequences a little (a 3-token sentence is masked at 1/3 instead of 15%); for 512-token
  blocks it is invisible (0.85^510 ≈ 1e-36).

The draws come from each sequence's SplitMix64 stream (``streams``, one uint64 key per
sequence, see keyed_random.py), so the masks of a slot never depend on the other slots.
The engine computes vocabulary logits at ``masked`` positions only and compares them with
``targets`` (the original ids there).

Example:
    >>> from infoxlm.data.ragged import Ragged
    >>> seqs = Ragged.from_list([[0, 5, 6, 7, 8, 2]])
    >>> out = mask_tokens(seqs, np.array([7], dtype=np.uint64), vocab_size=20, mask_prob=0.5)
    >>> int(out.masked[[0, 5]].sum())          # <s> and </s> are never masked
    0
    >>> bool((out.original == seqs.values).all())
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..special_tokens import FIRST_ORDINARY_ID
from .keyed_random import mix, stream_bits, to_integers
from .ragged import Ragged, _offsets, flat_ranges, gather_runs, long_runs

__all__ = ["MaskedSequences", "mask_tokens", "check_mask_rates", "FIRST_ORDINARY_ID"]

_LOW24 = np.uint64(0xFFFFFF)
# Decorrelates the random-replacement draw from the select/action draw of the same token.
_RANDOM_TOKEN_SALT = np.uint64(0xD1B54A32D192ED03)


@dataclass
class MaskedSequences:
    """Masked inputs, same layout as the unmasked ``Ragged`` they came from.

    inputs: the ids to feed the encoder; masked (total,) bool: positions to predict;
    original (total,) int64: the unmasked ids (targets = original[masked]).
    """

    inputs: Ragged
    masked: np.ndarray
    original: np.ndarray

    def __len__(self) -> int:
        return len(self.inputs)

    @property
    def lengths(self) -> np.ndarray:
        return self.inputs.lengths

    def take(self, rows: np.ndarray) -> "MaskedSequences":
        """The sequences ``rows`` in that order."""
        starts, lengths = self.inputs.offsets[rows], self.inputs.lengths[rows]
        if long_runs(lengths):
            arrays = [gather_runs(a, starts, lengths) for a in (self.inputs.values, self.masked, self.original)]
        else:  # short runs: one index for the three arrays
            index = flat_ranges(starts, lengths)
            arrays = [self.inputs.values[index], self.masked[index], self.original[index]]
        return MaskedSequences(Ragged(arrays[0], _offsets(lengths)), arrays[1], arrays[2])


def check_mask_rates(mask_prob: float, mask_token_prob: float, random_token_prob: float) -> None:
    """Raise ValueError unless the three rates are probabilities and the last two sum to ≤ 1."""
    for name, value in (
        ("mask_prob", mask_prob),
        ("mask_token_prob", mask_token_prob),
        ("random_token_prob", random_token_prob),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    if mask_token_prob + random_token_prob > 1.0 + 1e-12:
        raise ValueError(
            f"mask_token_prob + random_token_prob must be <= 1 (the rest stays unchanged), "
            f"got {mask_token_prob} + {random_token_prob}"
        )


def mask_tokens(
    sequences: Ragged,
    streams: np.ndarray,
    vocab_size: int,
    mask_prob: float = 0.15,
    mask_token_prob: float = 0.8,
    random_token_prob: float = 0.1,
    at_least_one: bool = True,
) -> MaskedSequences:
    """Mask ``sequences`` (n sequences) with one random stream per sequence (``streams`` (n,) uint64).

    Returns the masked inputs, the (total,) bool mask of positions to predict and the
    original ids. ``vocab_size`` includes the specials; ``<mask>`` is ``vocab_size - 1``.
    """
    check_mask_rates(mask_prob, mask_token_prob, random_token_prob)
    if vocab_size < FIRST_ORDINARY_ID + 2:
        raise ValueError(f"vocab_size must be >= {FIRST_ORDINARY_ID + 2} (4 specials, a piece, <mask>), got {vocab_size}")
    streams = np.asarray(streams, dtype=np.uint64)
    if streams.shape != (len(sequences),):
        raise ValueError(f"streams must have shape ({len(sequences)},), one per sequence, got {streams.shape}")
    mask_id = vocab_size - 1
    original = np.asarray(sequences.values, dtype=np.int64)  # (total,)
    bits = stream_bits(streams, sequences.offsets)  # (total,) uint64, one draw per token

    # Eligible ⇔ 4 <= id < mask_id, as one unsigned comparison.
    eligible = (original - FIRST_ORDINARY_ID).view(np.uint64) < np.uint64(mask_id - FIRST_ORDINARY_ID)
    # Selection: the draw's top 24 bits against mask_prob·2^24 (integer compare, no floats).
    masked = eligible & ((bits >> np.uint64(40)) < np.uint64(round(mask_prob * (1 << 24))))
    if at_least_one and mask_prob > 0 and len(original):
        _force_one(sequences, bits, eligible, masked)

    inputs = original.copy()
    chosen = np.flatnonzero(masked)  # (N,) flat positions to predict
    # Action: 24 more bits of the same draw, independent of the selection bits.
    action = (bits[chosen] >> np.uint64(16)) & _LOW24
    to_mask = action < np.uint64(round(mask_token_prob * (1 << 24)))
    to_random = ~to_mask & (action < np.uint64(round((mask_token_prob + random_token_prob) * (1 << 24))))
    inputs[chosen[to_mask]] = mask_id
    if to_random.any():
        salted = mix(bits[chosen[to_random]] ^ _RANDOM_TOKEN_SALT)
        inputs[chosen[to_random]] = FIRST_ORDINARY_ID + to_integers(salted, mask_id - FIRST_ORDINARY_ID)
    return MaskedSequences(Ragged(inputs, sequences.offsets), masked, original)


def _force_one(sequences: Ragged, bits: np.ndarray, eligible: np.ndarray, masked: np.ndarray) -> None:
    """In place: a sequence with eligible tokens but none selected gets its eligible token with
    the smallest draw selected (a uniformly random eligible token)."""
    lengths = sequences.lengths
    nonempty = np.flatnonzero(lengths > 0)
    any_masked = np.logical_or.reduceat(masked, sequences.offsets[nonempty])  # (n',) bool
    candidates = nonempty[~any_masked]  # usually very few: only these are examined further
    if len(candidates) == 0:
        return
    starts, sizes = sequences.offsets[candidates], lengths[candidates]
    index = flat_ranges(starts, sizes)  # flat positions of the candidates' tokens
    score = np.where(eligible[index], bits[index], np.uint64(np.iinfo(np.uint64).max))
    local_starts = np.cumsum(sizes) - sizes
    smallest = np.minimum.reduceat(score, local_starts)  # (c,) per candidate
    has_eligible = np.logical_or.reduceat(eligible[index], local_starts)
    owner = np.repeat(np.arange(len(candidates)), sizes)
    # A 64-bit tie inside one sequence is practically impossible; it would select both tokens.
    pick = has_eligible[owner] & eligible[index] & (score == smallest[owner])
    masked[index[pick]] = True
