"""Summaries of fine-tuning scores: averages, the cross-lingual transfer gap, seed means.

Transfer gap (XTREME, Hu et al. 2020; InfoXLM Table "gap"): the English score minus the mean
of the other languages' scores, on the model fine-tuned on English only; smaller means more of
the task knowledge transfers. The paper reports every score as the mean over five seeds.

    >>> transfer_gap({"en": 86.0, "de": 80.0, "zh": 76.0})
    8.0
    >>> mean_over_seeds([{"acc": {"en": 80.0}}, {"acc": {"en": 84.0}}])
    {'acc': {'en': 82.0}}
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..outputs import write_text_atomically

SOURCE_LANGUAGE = "en"


def average(scores: Mapping[str, float]) -> float:
    """Plain mean over languages (the paper's "Avg" column, English included)."""
    if not scores:
        raise ValueError("average of no scores")
    return sum(scores.values()) / len(scores)


def transfer_gap(scores: Mapping[str, float], source: str = SOURCE_LANGUAGE) -> float | None:
    """``scores[source]`` − mean of the other languages; None without the source or any other."""
    others = [v for lang, v in scores.items() if lang != source]
    if source not in scores or not others:
        return None
    return scores[source] - sum(others) / len(others)


def mean_over_seeds(runs: Sequence[Any]) -> Any:
    """Element-wise mean of equally shaped nested dicts/lists of numbers (one per seed).

    Non-numeric leaves (strings, None) are kept when all runs agree and dropped otherwise.
    """
    first = runs[0]
    if isinstance(first, Mapping):
        out = {}
        for key in first:
            if all(isinstance(r, Mapping) and key in r for r in runs):
                value = mean_over_seeds([r[key] for r in runs])
                if value is not _DROP:
                    out[key] = value
        return out
    if isinstance(first, bool) or not isinstance(first, (int, float)):
        return first if all(r == first for r in runs) else _DROP
    if any(r is None or isinstance(r, bool) or not isinstance(r, (int, float)) for r in runs):
        return _DROP
    return sum(runs) / len(runs)


def std_over_seeds(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Sample standard deviation per key of flat {name: number} dicts (0 for a single run)."""
    return {key: statistics.stdev([r[key] for r in runs]) if len(runs) > 1 else 0.0 for key in runs[0]}


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]], digits: int = 1) -> str:
    """A GitHub-flavoured Markdown table; floats with ``digits`` decimals, None as "–"."""

    def cell(value: Any) -> str:
        if value is None:
            return "–"
        if isinstance(value, float):
            return f"{value:.{digits}f}"
        return str(value)

    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


class _Drop:
    def __repr__(self) -> str:
        return "<drop>"


_DROP = _Drop()


def write_results(output: Path, results: dict[str, Any], markdown: str, log: Callable[[str], None]) -> None:
    """RUN/results.json and RUN/results.md of a fine-tuning run; the table also goes to ``log``."""
    write_text_atomically(output / "results.json", json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    write_text_atomically(output / "results.md", markdown)
    log(markdown)
