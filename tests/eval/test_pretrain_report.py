"""Tests for infoxlm.eval.pretrain_report: `infoxlm report RUN` on a pre-training run draws its
losses and its validation (held-out losses and retrieval) by step."""

from __future__ import annotations

import json

import pytest

from infoxlm.cli import main

pytest.importorskip("matplotlib")


def _run(root, validated: bool):
    """A run directory as `infoxlm pretrain` leaves it: config.json and metrics.jsonl."""
    root.mkdir()
    (root / "config.json").write_text("{}\n")
    lines = []
    for step in range(1, 11):
        row = {"step": step, "time": 0.0, "loss/mmlm": 6.0 - 0.1 * step, "loss/tlm": 6.5 - 0.1 * step, "loss/xlco": 2.0}
        if validated and step % 5 == 0:
            row.update({"val/mmlm": 6.2 - 0.1 * step, "val/tlm": 6.6 - 0.1 * step,
                        "val/retrieval_xx2en": 4.0 * step, "val/retrieval_en2xx": 3.0 * step})
        lines.append(json.dumps(row))
    (root / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return root


def test_report_of_a_pretraining_run_tabulates_and_draws_its_validation(tmp_path, capsys):
    run = _run(tmp_path / "R", validated=True)
    assert main(["report", str(run), "--output", str(tmp_path / "r.md")]) == 0
    md = (tmp_path / "r.md").read_text()  # a .md --output is the report itself
    assert "## Pre-training: R" in md and "![R](pretrain-R.png)" in md
    assert "| step | MMLM | TLM | XLCO | held-out MMLM | held-out TLM | held-out xx→en | held-out en→xx |" in md
    assert "| 5 | 5.500 | 6.000 | 2.000 | 5.700 | 6.100 | 20.000 | 15.000 |" in md
    assert "| 10 | 5.000 | 5.500 | 2.000 | 5.200 | 5.600 | 40.000 | 30.000 |" in md
    assert (tmp_path / "pretrain-R.png").stat().st_size > 1000


def test_a_run_without_validation_shows_its_last_step(tmp_path):
    run = _run(tmp_path / "plain", validated=False)
    assert main(["report", str(run), "--output", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out" / "report.md").read_text()
    assert "(the run has no --validation)" in md and "| 10 | 5.000 | 5.500 | 2.000 |" in md
    assert "held-out" not in md


def test_a_damaged_metrics_line_is_named(tmp_path, capsys):
    run = _run(tmp_path / "R", validated=True)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 11, "loss/mmlm": \n')
    assert main(["report", str(run), "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{run / 'metrics.jsonl'}:11:" in err, err
