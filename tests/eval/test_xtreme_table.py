"""The XTREME table: runs of seven tasks as one row per model, beside the published rows."""

from __future__ import annotations

import json

import pytest

from infoxlm.cli import main
from infoxlm.eval.xtreme_table import PUBLISHED, xtreme_markdown


def _results(task, score, *, seeds=(0,), model="my-model", **extra):
    key = "average_f1" if task in ("mlqa", "xquad", "tydiqa") else "test_average"
    return {"task": task, "model": model, "seeds": list(seeds), "config": {"selection": "best"},
            "mean": {key: score, "test": {}}, **extra}


def test_one_row_per_model_with_protocol_and_seeds_and_the_average_only_when_complete():
    runs = [(t, t, _results(t, 50.0 + i, seeds=(0, 1, 2), protocol="XTREME: en dev each epoch"))
            for i, t in enumerate(("pawsx", "xquad", "tydiqa", "wikiann", "udpos"))]
    runs += [("x", "xnli", _results("xnli", 70.0, setting="cross-lingual-transfer")), ("m", "mlqa", _results("mlqa", 60.0))]
    md = xtreme_markdown(runs)
    row = next(line for line in md.splitlines() if line.startswith("| my-model"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "70.0 (p2, 1 seed)" and cells[2] == "50.0 (p1, 3 seeds)" and cells[6] == "53.0 (p1, 3 seeds)"
    assert cells[-1] == f"{(70 + 50 + 51 + 60 + 52 + 53 + 54) / 7:.1f}"
    assert "- p1: XTREME: en dev each epoch" in md and "- p2: InfoXLM paper: cross-lingual-transfer, joint dev (#M=1)" in md
    assert "| *XLM-R-base (published)* | 74.6 | 85.9 | 73.4 | 62.1 | 70.5 | 61.4 | 74.3 | 71.7 |" in md
    assert "| *InfoXLM-base (published)* | 76.5 | – | – | 68.1 | – | – | – | – |" in md
    assert PUBLISHED["mmBERT-base"][5] == 58.2
    partial = xtreme_markdown(runs[:1])
    assert next(line for line in partial.splitlines() if line.startswith("| my-model")).endswith("| – |")


def test_report_to_a_markdown_file_holds_the_table_and_its_png_lies_beside_it(tmp_path, capsys):
    for task, score in (("wikiann", 61.0), ("udpos", 73.0)):
        (tmp_path / task).mkdir()
        (tmp_path / task / "results.json").write_text(json.dumps(_results(task, score)), encoding="utf-8")
    out = tmp_path / "xtreme.md"
    assert main(["report", str(tmp_path / "wikiann" / "results.json"), str(tmp_path / "udpos" / "results.json"),
                 "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "| my-model | – | – | – | – | – | 61.0 (p1, 1 seed) | 73.0 (p1, 1 seed) | – |" in printed
    assert "## XTREME" in out.read_text() and out.with_suffix(".png").stat().st_size > 0  # xtreme.png, beside it
    (tmp_path / "udpos" / "results.json").write_text(json.dumps({"task": "udpos", "mean": {"test": {}}}), encoding="utf-8")
    assert main(["report", str(tmp_path / "udpos"), "--output", str(tmp_path / "again.md")]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"infoxlm: error: {tmp_path / 'udpos' / 'results.json'}: no key mean.test_average or mean.average_f1; "
        "expected one in udpos results")


@pytest.mark.slow  # two fine-tuning runs
def test_report_draws_the_table_from_real_pawsx_and_wikiann_runs(tmp_path, capsys):
    """The acceptance call on runs the finetune commands wrote, not on hand-made results."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "finetune"))  # the tagging tests' file writer
    from finetune_formats import write_pawsx
    from test_tagging import write_panx

    from infoxlm.shipped import demo_checkpoint_dir

    model = str(demo_checkpoint_dir())
    common = ["--model", model, "--max-steps", "2", "--batch-size", "4", "--max-length", "32", "--no-progress",
              "--device", "cpu", "--no-save-model"]  # fmt: skip
    write_pawsx(tmp_path / "PAWSX", languages=("en", "de"), n_train=8, n_eval=4)
    assert main(["finetune", "pawsx", "--data", str(tmp_path / "PAWSX"), "--languages", "en", "de",
                 "--output", str(tmp_path / "runs" / "pawsx"), *common]) == 0  # fmt: skip
    write_panx(tmp_path / "panx", languages=("en", "de"), n=4)
    assert main(["finetune", "wikiann", "--data", str(tmp_path / "panx"), "--languages", "en", "de",
                 "--output", str(tmp_path / "runs" / "panx"), *common]) == 0  # fmt: skip
    capsys.readouterr()
    runs = sorted(str(p) for p in (tmp_path / "runs").glob("*/results.json"))
    assert main(["report", *runs, "--output", str(tmp_path / "xtreme.md")]) == 0
    table = (tmp_path / "xtreme.md").read_text()
    row = next(line for line in table.splitlines() if line.startswith("| ") and "checkpoint" in line.split("|")[1])
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] != "–" and cells[6] != "–" and cells[1] == "–", row  # PAWS-X and WikiANN filled, XNLI not
    assert (tmp_path / "xtreme.png").is_file()


def test_a_cell_says_over_how_many_languages_a_run_averaged():
    """The published rows are over every XTREME language of a task; a run of 3 says it has 3."""
    run = _results("pawsx", 61.0)
    run["mean"]["test"] = {"en": 70.0, "de": 60.0, "fr": 53.0}
    md = xtreme_markdown([("p", "pawsx", run)])
    assert "| my-model | – | 61.0 (p1, 1 seed, 3 langs) | – | – | – | – | – | – |" in md
    assert "the published rows over each task's XTREME languages, a run's over its own" in md
