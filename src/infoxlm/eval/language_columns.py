"""The language columns of a report table, and averages that say how many languages they are over.

A table has a column for each language its runs have (the paper's languages in the paper's
order, then a run's own), not the paper's whole set with empty slots. ``Avg (3)`` is every
row's mean over the table's 3 languages, the paper's rows included, so the paper is compared on
the run's languages; a row that lacks some of them says over how many its mean is, ``71.2 (2)``.
When the table's languages are not the paper's, the paper's own average (over all of its
languages) stands in a column of its own, ``paper Avg (15)``, so that a 3-language mean never
sits unlabelled beside a 15-language one; with exactly the paper's languages, ``Avg (15)`` is
the one column and the paper's rows show the average it published.

    >>> cols = LanguageColumns.of(("en", "fr", "de", "zh"), [["de", "en", "ja"]])
    >>> cols.languages, cols.header()
    (('en', 'de', 'ja'), ['en', 'de', 'ja', 'Avg (3)', 'paper Avg (4)'])
    >>> [cols.cell(a) for a in cols.averages({"en": 80.0, "de": 70.0, "zh": 1.0}, published=60.0)]
    ['75.0 (2)', 60.0]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, NamedTuple, Sequence

from .results import transfer_gap


class Mean(NamedTuple):
    """A mean over ``count`` languages of the ``of`` its column is over (None: none of them)."""

    value: float | None
    count: int
    of: int


@dataclass(frozen=True)
class LanguageColumns:
    languages: tuple[str, ...]  # the table's language columns
    paper: tuple[str, ...]  # the languages of the paper's table (its Avg is over all of them)

    @classmethod
    def of(cls, paper: Sequence[str], runs: Iterable[Iterable[str]]) -> LanguageColumns:
        """The columns for runs that have the languages ``runs`` (one iterable per run); the
        paper's whole set when the runs have none."""
        present = list(dict.fromkeys(lang for run in runs for lang in run))
        ordered = [lang for lang in paper if lang in present] + [lang for lang in present if lang not in paper]
        return cls(tuple(ordered or paper), tuple(paper))

    @property
    def whole(self) -> bool:
        """The table has exactly the paper's languages (the paper's Avg is the table's)."""
        return set(self.languages) == set(self.paper)

    @property
    def avg_label(self) -> str:
        return f"Avg ({len(self.languages)})"

    def header(self, gap: bool = False) -> list[str]:
        """The language columns, ``Avg (n)``, ``paper Avg (N)`` unless whole, and ``gap (n)``."""
        paper_avg = [] if self.whole else [f"paper Avg ({len(self.paper)})"]
        return [*self.languages, self.avg_label, *paper_avg, *([f"gap ({len(self.languages)})"] if gap else [])]

    def mean(self, scores: Mapping[str, float | None], over: Sequence[str] | None = None) -> Mean:
        """The mean of ``scores`` over the languages ``over`` (default: the table's) it has."""
        over = self.languages if over is None else over
        values = [scores[lang] for lang in over if scores.get(lang) is not None]
        return Mean(sum(values) / len(values) if values else None, len(values), len(over))  # type: ignore[arg-type]

    def averages(self, scores: Mapping[str, float | None], published: float | None = None) -> list[Mean]:
        """A row's Avg cells: its mean over the table's languages (the paper's ``published``
        Avg instead, for a paper row of a whole table), and unless whole, over all the paper's
        languages (``published``; a run has it only when it has every one of them)."""
        paper_mean = Mean(published, len(self.paper), len(self.paper)) if published is not None else None
        if self.whole:
            return [paper_mean or self.mean(scores)]
        over_paper = self.mean(scores, self.paper)
        return [self.mean(scores), paper_mean or (over_paper if over_paper.count == len(self.paper) else Mean(None, 0, 0))]

    def gap(self, scores: Mapping[str, float | None]) -> Mean:
        """The transfer gap (English − mean of the others) over the table's languages."""
        present = {lang: scores[lang] for lang in self.languages if scores.get(lang) is not None}
        return Mean(transfer_gap(present), len(present), len(self.languages))  # type: ignore[arg-type]

    @staticmethod
    def cell(mean: Mean, digits: int = 1) -> float | str | None:
        """A table cell: the value, with the languages it is over when fewer than its column's."""
        if mean.value is None:
            return None
        return mean.value if mean.count == mean.of else f"{mean.value:.{digits}f} ({mean.count})"

    def values(self, scores: Mapping[str, float | None]) -> list[float | None]:
        """A row's scores in the table's language order (None where it has none)."""
        return [scores.get(lang) for lang in self.languages]
