"""A pre-training run in ``infoxlm report``: its losses and, where it ran with
``--validation``, its held-out losses and retrieval, step by step (``RUN/metrics.jsonl``).

A table lists the steps validated (or the last logged step, without validation); a figure
draws the training and held-out loss of each objective, and the held-out retrieval top-1
both ways, by step (eval/plots.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import EvalDataError
from ..json_files import DATA_BYTES, parse_json, read_small_file
from .plots import plot_losses
from .results import markdown_table

OBJECTIVE_TITLES = {"mmlm": "MMLM", "tlm": "TLM", "xlco": "XLCO"}
RETRIEVAL = "retrieval top-1 (%)"


def is_pretrain_run(path: Path) -> bool:
    """A run directory of ``infoxlm pretrain``: its config and metrics, no results.json."""
    return (path / "metrics.jsonl").is_file() and (path / "config.json").is_file() and not (path / "results.json").exists()


def read_metrics(run: Path) -> list[dict[str, Any]]:
    """The records of RUN/metrics.jsonl, each ``{"step": …, metric: value, …}``."""
    path = run / "metrics.jsonl"
    text = read_small_file(path, what="the metrics of infoxlm pretrain (JSON Lines)", max_bytes=DATA_BYTES, error=EvalDataError)
    rows = []
    for number, line in enumerate(text.decode("utf-8", errors="replace").splitlines(), start=1):
        if line.strip():
            row = parse_json(line, path, what="one JSON object per line", line=number, error=EvalDataError)
            if not isinstance(row, dict) or not isinstance(row.get("step"), int):
                raise EvalDataError(f"{path}:{number}: expected an object with an integer step")
            rows.append(row)
    if not rows:
        raise EvalDataError(f"{path}: no steps logged yet")
    return rows


def pretrain_section(name: str, rows: list[dict[str, Any]]) -> str:
    """Markdown: the validated steps' training and held-out numbers (or the last step's)."""
    validated = [r for r in rows if any(k.startswith("val/") for k in r)] or rows[-1:]
    objectives = [o for o in OBJECTIVE_TITLES if any(f"loss/{o}" in r for r in rows)]
    header = ["step", *(OBJECTIVE_TITLES[o] for o in objectives)]
    held_out = [k for k in ("val/mmlm", "val/tlm", "val/retrieval_xx2en", "val/retrieval_en2xx") if any(k in r for r in rows)]
    header += [_column(k) for k in held_out]
    table = [[r["step"], *(r.get(f"loss/{o}") for o in objectives), *(r.get(k) for k in held_out)] for r in validated]
    said = ("Training loss of the logged step and, on the held-out store (--validation), the masked-LM losses and "
            "top-1 retrieval (%) at the contrast layer." if held_out else "Training loss of the last logged step "
                                                                           "(the run has no --validation).")
    return "\n".join([f"## Pre-training: {name}", "", said, "", markdown_table(header, table, digits=3), ""])


def _column(key: str) -> str:
    return {"val/mmlm": "held-out MMLM", "val/tlm": "held-out TLM", "val/retrieval_xx2en": "held-out xx→en",
            "val/retrieval_en2xx": "held-out en→xx"}[key]


def plot_pretrain(rows: list[dict[str, Any]], path: Path) -> Path:
    """The losses by step (training and held-out, one panel per objective), and the held-out
    retrieval by step where the run has it."""
    def points(key: str) -> list[tuple[int, float]]:
        return [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]

    panels = [OBJECTIVE_TITLES[o] for o in OBJECTIVE_TITLES if points(f"loss/{o}")]
    curves = {
        "training": {OBJECTIVE_TITLES[o]: points(f"loss/{o}") for o in OBJECTIVE_TITLES},
        "held out": {OBJECTIVE_TITLES[o]: points(f"val/{o}") for o in ("mmlm", "tlm")},
    }
    if points("val/retrieval_xx2en"):
        panels.append(RETRIEVAL)
        curves["held out xx→en"] = {RETRIEVAL: points("val/retrieval_xx2en")}
        curves["held out en→xx"] = {RETRIEVAL: points("val/retrieval_en2xx")}
    return plot_losses(curves, panels, path, percent_panels=[RETRIEVAL])
