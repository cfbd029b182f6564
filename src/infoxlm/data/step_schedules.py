"""Data choices that change with the step: a value held piecewise over steps, and languages
that join the sampling late.

The paper keeps its mask rate (15 %) and its sampling exponent (α = 0.7) constant, and samples
every language from the first step. Later recipes anneal both (mmBERT: mask 30 → 15 → 5 %,
α 0.7 → 0.5 → 0.3) and add languages in the last phases. Each is written here as a value of
the step alone, so a step's data stays a pure function of (seed, step): a resumed run and a
run cut into other micro-batches or processes see the same examples (data/schedule.py).

A schedule is written ``STEP:VALUE,STEP:VALUE,…``: the value from each step on until the
next one's, the first step 0. Language starts are written ``LANG:STEP,…``; a language not
named is sampled from step 0, and a parallel corpus joins when both its languages have.

    >>> s = Piecewise.parse("0:0.3,1000:0.15,2000:0.05", "mask_schedule")
    >>> s.at(0), s.at(999), s.at(1000), s.at(10**6)
    (0.3, 0.3, 0.15, 0.05)
    >>> language_starts("sw:1000, yo:2000")
    {'sw': 1000, 'yo': 2000}
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

__all__ = ["Piecewise", "language_starts", "active_names"]


@dataclass(frozen=True)
class Piecewise:
    """A value held from each of ``steps`` (increasing, the first 0) until the next."""

    steps: tuple[int, ...]
    values: tuple[float, ...]

    @classmethod
    def parse(cls, text: str, name: str) -> "Piecewise":
        """``STEP:VALUE,…`` → the schedule; ValueError naming ``name`` and the piece otherwise."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{name} must be 'STEP:VALUE,STEP:VALUE,…' starting at step 0, got {text!r}")
        steps, values = [], []
        for piece in text.split(","):
            step, sep, value = piece.strip().partition(":")
            try:
                steps.append(int(step))
                values.append(float(value))
            except ValueError:
                raise ValueError(f"{name}: {piece.strip()!r} is not STEP:VALUE (e.g. 1000:0.15)") from None
            if not sep:
                raise ValueError(f"{name}: {piece.strip()!r} is not STEP:VALUE (e.g. 1000:0.15)")
        if steps[0] != 0:
            raise ValueError(f"{name} must start at step 0 (0:VALUE,…), got {text!r}")
        if any(b <= a for a, b in zip(steps, steps[1:])):
            raise ValueError(f"{name}: steps must increase, got {text!r}")
        return cls(tuple(steps), tuple(values))

    def at(self, step: int) -> float:
        """The value in force at optimizer step ``step`` (0-based)."""
        return self.values[bisect.bisect_right(self.steps, step) - 1]


def language_starts(text: str | None) -> dict[str, int]:
    """``LANG:STEP,…`` → {language: first step it is sampled}; {} for None or ""."""
    if not text:
        return {}
    starts: dict[str, int] = {}
    for piece in text.split(","):
        language, sep, step = piece.strip().partition(":")
        try:
            first = int(step)
        except ValueError:
            first = -1
        if not sep or not language or first < 0:
            raise ValueError(f"language_starts: {piece.strip()!r} is not LANG:STEP (e.g. sw:1000)")
        if language in starts:
            raise ValueError(f"language_starts: {language} is named twice")
        starts[language] = first
    return starts


def active_names(languages: list[tuple[str, ...]], starts: dict[str, int], step: int) -> tuple[bool, ...]:
    """Which corpora are sampled at ``step``, each given by its languages (``("de",)`` for a
    monolingual one, ``("en", "de")`` for a parallel one): those whose languages have all
    started."""
    return tuple(all(starts.get(language, 0) <= step for language in names) for names in languages)
