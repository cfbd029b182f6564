"""How much of a corpus its tokenizer could not read: the share of ``<unk>`` ids.

A tokenizer that never saw a script turns its text into ``<unk>`` (id ``UNK_ID``), and
pre-training on such a corpus learns nothing from it. ``prepare`` counts the ``<unk>`` ids
while it writes a corpus and records them beside the token counts in meta.json (``counts``:
``unk_tokens`` of a monolingual corpus, ``src_unk_tokens`` and ``tgt_unk_tokens`` of a
parallel one; ``merge`` sums them as it sums the others); ``prepare`` and ``prepare inspect``
print the rate, ``<unk>`` ids over text tokens, and warn above :data:`UNK_WARNING_RATE`.
A corpus prepared before the count was recorded has no rate (``None``, printed ``n/a``).

>>> meta = {"kind": "parallel", "name": "en-zh", "languages": {"src": "en", "tgt": "zh"},
...         "counts": {"src_tokens": 90, "src_unk_tokens": 0, "tgt_tokens": 60, "tgt_unk_tokens": 30}}
>>> rates = unk_rates(meta)
>>> format_unk_rates({rate.language: rate.rate for rate in rates})
'en 0.00 %, zh 50.00 %'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from infoxlm.special_tokens import UNK, UNK_ID

__all__ = ["UNK_WARNING_RATE", "UnkRate", "count_unk", "format_unk_rates", "unk_rates", "unk_warnings"]

# Above this share of <unk> ids, the tokenizer does not cover the corpus's text.
UNK_WARNING_RATE = 0.01


def count_unk(tokens: np.ndarray) -> int:
    """Number of ``<unk>`` ids in ``tokens`` (any shape)."""
    return int(np.count_nonzero(np.asarray(tokens) == UNK_ID))


@dataclass(frozen=True)
class UnkRate:
    """The ``<unk>`` ids of one language of a corpus (one side of a parallel corpus)."""

    language: str
    unk: int | None  # None: meta.json has no count (prepared before it was recorded)
    tokens: int

    @property
    def rate(self) -> float | None:
        if self.unk is None:
            return None
        return self.unk / self.tokens if self.tokens else 0.0


def unk_rates(meta: dict[str, Any]) -> list[UnkRate]:
    """One :class:`UnkRate` per language of the corpus whose meta.json is ``meta``: its
    language, or the source and target sides of a pair."""
    counts = meta.get("counts", {})
    if meta.get("kind") == "parallel":
        languages = meta.get("languages", {})
        return [
            UnkRate(languages.get(side, side), counts.get(f"{side}_unk_tokens"), counts.get(f"{side}_tokens", 0))
            for side in ("src", "tgt")
        ]
    return [UnkRate(meta.get("language", meta.get("name", "?")), counts.get("unk_tokens"), counts.get("tokens", 0))]


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{100 * rate:.2f} %"


def format_unk_rates(rates: dict[str, float | None]) -> str:
    """``{language: rate}`` as ``0.12 %`` for one language, ``en 0.00 %, zh 45.20 %`` for the
    sides of a pair; ``n/a`` where the rate is None."""
    if len(rates) == 1:
        return _percent(next(iter(rates.values())))
    return ", ".join(f"{language} {_percent(rate)}" for language, rate in rates.items())


def unk_warnings(name: str, rates: list[UnkRate]) -> list[str]:
    """One line per language of corpus ``name`` whose ``<unk>`` rate is above the threshold."""
    lines = []
    for entry in rates:
        if entry.rate is None or entry.rate <= UNK_WARNING_RATE:
            continue
        side = f" of its {entry.language} side" if len(rates) > 1 else ""
        lines.append(
            f"warning: {name}: {_percent(entry.rate)} of the tokens{side} are {UNK} ({entry.unk:,} of "
            f"{entry.tokens:,}), above {100 * UNK_WARNING_RATE:g} %: the tokenizer does not cover this "
            f"text; expected a tokenizer that covers {entry.language} (XLM-R's, or one from "
            f"`infoxlm tokenizer train` with {entry.language} text)"
        )
    return lines
