"""The XTREME table: one row per model, seven tasks and their average, beside the published rows.

Columns and the score each reads from a run's ``results.json`` (``mean`` over its seeds):
XNLI and PAWS-X accuracy (``test_average``); XQuAD, MLQA and TyDiQA-GoldP F1 (``average_f1``);
WikiANN and UD-POS seqeval F1 (``test_average``), each a run's mean over the languages it
tested (the cell says how many; the published rows are over XTREME's languages of each task).
The average is over the seven, shown only when a row has all seven. Every cell names the protocol that produced it (a short label, its
words under the table) and how many seeds were averaged, since numbers of different protocols
(the checkpoint kept on English dev after each epoch, on the joint dev set, or the last one)
differ by a point or two.

Published rows (base-size models), copied by hand:

* XLM-R-base and mmBERT-base: the XTREME table of the mmBERT paper (Marone et al., 2025); its
  own average for mmBERT, 72.8, includes XCOPA, so the average here (of these seven) differs;
* InfoXLM-base: the InfoXLM paper gives XNLI (76.5, cross-lingual transfer, Table "xnli") and
  MLQA (68.1 F1, Table "mlqa") of these columns (``paper_results.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from . import paper_results as paper
from .plots import plot_bars
from .results import markdown_table

COLUMNS = ("XNLI", "PAWS-X", "XQuAD", "MLQA", "TyDiQA", "WikiANN", "UD-POS")
TASK_COLUMNS = {"xnli": "XNLI", "pawsx": "PAWS-X", "xquad": "XQuAD", "mlqa": "MLQA", "tydiqa": "TyDiQA",
                "wikiann": "WikiANN", "udpos": "UD-POS"}
# Tasks that only this table reports (XNLI and MLQA have tables of their own too).
XTREME_ONLY = ("pawsx", "xquad", "tydiqa", "wikiann", "udpos")
SCORE_KEYS = ("average_f1", "test_average")  # the first a run's mean has is its cell
PUBLISHED: dict[str, tuple[float | None, ...]] = {
    "XLM-R-base": (74.6, 85.9, 73.4, 62.1, 70.5, 61.4, 74.3),
    "mmBERT-base": (77.1, 87.7, 77.6, 66.0, 74.5, 58.2, 74.0),
    "InfoXLM-base": (paper.XNLI["cross-lingual-transfer"]["InfoXLM"][-1], None, None,
                     paper.MLQA["InfoXLM"][-1][0], None, None, None),
}


def run_score(results: dict[str, Any]) -> float | None:
    """The number a run puts in its column (see the module's docstring), or None."""
    return next((results["mean"][k] for k in SCORE_KEYS if isinstance(results["mean"].get(k), (int, float))), None)


def protocol(task: str, results: dict[str, Any]) -> str:
    """What chose the run's model and data, in words: a run's own ``protocol``, else read from
    its setting and selection."""
    if isinstance(results.get("protocol"), str):
        return results["protocol"]
    selection = results.get("config", {}).get("selection")
    if task == "xnli":
        return f"InfoXLM paper: {results.get('setting', 'cross-lingual-transfer')}, joint dev (#M=1)"
    if task == "mlqa":
        return "InfoXLM paper: final model" if selection == "last" else "best mean dev F1"
    return f"selection {selection}"


def _rows(runs: Sequence[tuple[str, str, dict]]) -> tuple[dict[str, dict[str, str | float]], list[str]]:
    """{row name: {column: cell}} (plus each column's score under "score:COLUMN") and the protocols
    in order of first use."""
    rows: dict[str, dict[str, Any]] = {}
    protocols: list[str] = []
    for name, task, results in runs:
        column, score = TASK_COLUMNS[task], run_score(results)
        words = protocol(task, results)
        if words not in protocols:
            protocols.append(words)
        model = str(results.get("model") or name)
        key = model if column not in rows.get(model, {}) else f"{model} ({name})"  # a second run: its own row
        n = len(results.get("seeds") or [0])
        test = results["mean"].get("test")
        languages = f", {len(test)} lang{'s' if len(test) != 1 else ''}" if isinstance(test, dict) and test else ""
        rows.setdefault(key, {})[column] = (f"{score:.1f} (p{protocols.index(words) + 1}, {n} seed{'s' if n != 1 else ''}"
                                            f"{languages})")
        rows[key][f"score:{column}"] = score
    return rows, protocols


def _average(values: Sequence[float | None]) -> float | None:
    return sum(values) / len(values) if all(v is not None for v in values) else None  # type: ignore[arg-type]


def xtreme_markdown(runs: Sequence[tuple[str, str, dict]]) -> str:
    """The table (published rows first, in italics) and the protocols' legend; ``runs`` are
    (name, task, results.json) of every XTREME task's runs."""
    rows, protocols = _rows(runs)
    table = [[f"*{model} (published)*", *values, _average(values)] for model, values in PUBLISHED.items()]
    for model, cells in rows.items():
        scores = [cells.get(f"score:{c}") for c in COLUMNS]
        table.append([model, *(cells.get(c) for c in COLUMNS), _average(scores)])
    lines = [markdown_table(["Model", *COLUMNS, "Avg"], table), "",
             "XNLI and PAWS-X: accuracy; XQuAD, MLQA, TyDiQA: F1; WikiANN, UD-POS: seqeval F1 (XTREME's "
             "evaluate.py); all test, mean over languages (%): the published rows over each task's XTREME "
             "languages, a run's over its own. Avg only over all seven. Each cell: score (protocol, seeds "
             "averaged, languages averaged)."]
    lines += [f"- p{i}: {words}" for i, words in enumerate(protocols, 1)]
    return "\n".join(lines) + "\n"


def plot_xtreme(runs: Sequence[tuple[str, str, dict]], png: Path) -> Path:
    """Bars per column (and Avg), one series per row, the published rows included."""
    rows, _ = _rows(runs)
    series = {f"{m} (published)": [*v, _average(v)] for m, v in PUBLISHED.items()}
    for model, cells in rows.items():
        scores = [cells.get(f"score:{c}") for c in COLUMNS]
        series[model] = [*scores, _average(scores)]
    return plot_bars([*COLUMNS, "Avg"], {"XTREME, base-size models": series}, png, "score (%)")
