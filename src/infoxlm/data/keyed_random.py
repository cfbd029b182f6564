"""Stateless random numbers keyed by (seed, objective, step, slot, purpose[, position]).

Every random choice of the training data (which language, which block, which direction,
which tokens to mask ...) must be a pure function of the run's seed, the optimizer step,
the objective and the example's slot in the *global* batch, so that a resumed run, or the
same run on a different number of processes, sees exactly the same examples. Seeding one
``np.random.Generator`` per slot has that property but costs ~20 µs per slot (tens of ms
for a global batch of 2048 per objective), so this module hashes the keys instead:

    absorb(s, v) = mix(s + (v + 1)·γ)
    key   = absorb(absorb(absorb(mix(seed), objective), step), slot)    one uint64 per slot
    draw  = absorb(key, purpose)                                        one uint64 per choice
    token = mix(stream + (position + 1)·γ), stream = a draw             one uint64 per token

``mix`` is the SplitMix64 finaliser (a bijection on 64 bits with full avalanche) and γ the
golden-ratio Weyl increment, i.e. each key starts a SplitMix64 stream. All arithmetic is
numpy uint64 (wrapping), vectorised over slots or tokens, identical on every platform and
independent of Python's hash seed.

Example:
    >>> rng = KeyedRandom(seed=1, objective=2, step=10, slots=np.arange(4))
    >>> u = rng.uniform(purpose=3)                      # (4,) floats in [0, 1)
    >>> bool(((0 <= u) & (u < 1)).all())
    True
    >>> np.array_equal(KeyedRandom(1, 2, 10, np.array([3])).uniform(3), u[3:])   # slot 3 alone
    True
"""

from __future__ import annotations

import numpy as np

__all__ = ["KeyedRandom", "mix", "stream_bits", "to_uniform", "to_integers"]

# SplitMix64 constants (Steele, Lea & Flood 2014; finaliser variant of Stafford's "Mix13").
GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_UINT64_MAX = (1 << 64) - 1


def mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser, element-wise on a uint64 array (wrapping arithmetic)."""
    return _mix_inplace(np.array(x, dtype=np.uint64))  # a private copy


def _mix_inplace(x: np.ndarray) -> np.ndarray:
    # In place: for a million tokens every temporary is another 8 MB to page in.
    with np.errstate(over="ignore"):
        x ^= x >> _S30
        x *= _M1
        x ^= x >> _S27
        x *= _M2
        x ^= x >> _S31
    return x


def _absorb(state: np.ndarray, value) -> np.ndarray:
    """Fold one more key component into a uint64 state: mix(state + (value + 1)·γ)."""
    with np.errstate(over="ignore"):
        value = np.asarray(value).astype(np.uint64) + np.uint64(1)
        return mix(state + value * GOLDEN_GAMMA)


def to_uniform(bits: np.ndarray) -> np.ndarray:
    """Floats in [0, 1) from the top 53 bits of uint64 draws."""
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def to_integers(bits: np.ndarray, high) -> np.ndarray:
    """Integers in [0, high) (high ≥ 1, scalar or per element) from uint64 draws.

    floor(u · high) with a 53-bit u: the bias is below high / 2^53, far below anything a
    sampling test can see for corpora of fewer than 2^40 items.
    """
    high = np.asarray(high, dtype=np.int64)
    out = np.floor(to_uniform(bits) * high).astype(np.int64)
    return np.minimum(out, high - 1)  # guards the (impossible in exact arithmetic) u·high == high


def stream_bits(streams: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """One uint64 per token of n sequences: token t of sequence s is draw t of stream ``streams[s]``.

    streams (n,) uint64, one key per sequence; offsets (n + 1,) the sequences' bounds in
    the flat token array → (total,) uint64 with element ``offsets[s] + t`` equal to
    mix(streams[s] + (t + 1)·γ).
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    total = int(offsets[-1] - offsets[0])
    with np.errstate(over="ignore"):
        # streams[s] + (t + 1)·γ  =  (streams[s] - (offsets[s] - offsets[0])·γ) + (flat index + 1)·γ:
        # one repeat of a per-sequence base instead of per-token positions and gathers.
        base = np.asarray(streams, dtype=np.uint64) - (offsets[:-1] - offsets[0]).astype(np.uint64) * GOLDEN_GAMMA
        x = np.arange(1, total + 1, dtype=np.uint64)
        x *= GOLDEN_GAMMA
        x += np.repeat(base, lengths)
        return _mix_inplace(x)


class KeyedRandom:
    """Random draws for a set of example slots of one (seed, objective, step).

    Args:
        seed: the run's seed, an integer in [0, 2^64).
        objective: a small integer naming the objective (fixed per objective, see schedule.py).
        step: the optimizer step, ≥ 0.
        slots: (n,) indices of the examples in the step's global batch.

    Draws for a slot never depend on which other slots are present: a rank that holds
    slots 1024…2047 gets exactly the numbers a single process gets for those slots.
    """

    def __init__(self, seed: int, objective: int, step: int, slots: np.ndarray):
        for name, value in (("seed", seed), ("objective", objective), ("step", step)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= _UINT64_MAX:
                raise ValueError(f"{name} must be an integer in [0, 2**64), got {value!r}")
        slots = np.asarray(slots)
        if slots.ndim != 1 or (slots.size and (slots.dtype.kind not in "iu" or slots.min() < 0)):
            raise ValueError(f"slots must be a 1-D array of non-negative integers, got {slots!r}")
        self.slots = slots.astype(np.int64)
        state = mix(np.asarray(int(seed), dtype=np.uint64))
        state = _absorb(_absorb(state, int(objective)), int(step))  # () uint64, shared by all slots
        self.keys = _absorb(state, self.slots)  # (n,) uint64, one per slot

    def __len__(self) -> int:
        return len(self.slots)

    def bits(self, purpose: int) -> np.ndarray:
        """(n,) uint64: the draw for ``purpose`` of every slot (independent across purposes)."""
        return _absorb(self.keys, int(purpose))

    def uniform(self, purpose: int) -> np.ndarray:
        """(n,) floats in [0, 1)."""
        return to_uniform(self.bits(purpose))

    def integers(self, purpose: int, high) -> np.ndarray:
        """(n,) integers in [0, high); ``high`` a scalar or (n,) array of values ≥ 1."""
        return to_integers(self.bits(purpose), high)

    def coin(self, purpose: int) -> np.ndarray:
        """(n,) bools, each True with probability 1/2."""
        return (self.bits(purpose) >> np.uint64(63)).astype(bool)
