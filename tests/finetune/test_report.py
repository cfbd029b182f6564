"""`infoxlm report`: exact Markdown rows for hand-made results, paper rows alongside, PNGs."""

from __future__ import annotations

import json

from infoxlm.cli import main

XNLI_RUN = {
    "task": "xnli", "setting": "cross-lingual-transfer", "seeds": [0, 1],
    "mean": {"test": {"en": 80.0, "de": 70.0, "fr": 72.0}, "test_average": 74.0, "transfer_gap": 9.0},
}
MLQA_RUN = {
    "task": "mlqa", "seeds": [0],
    "mean": {"test": {"en": {"f1": 70.0, "exact_match": 50.0}, "de": {"f1": 60.0, "exact_match": 40.0}},
             "average_f1": 65.0, "average_exact_match": 45.0, "transfer_gap_f1": 10.0, "transfer_gap_exact_match": 10.0},
}
TATOEBA = {"layer": 8, "pooling": "mean", "languages": {"deu": {"xx2en": 90.0, "en2xx": 91.0, "n": 10},
                                                       "cmn": {"xx2en": 80.0, "en2xx": 70.0, "n": 10}},
           "average": {"xx2en": 85.0, "en2xx": 80.5}}


def test_report_tables_and_plots(tmp_path, capsys):
    for name, obj in (("xnli-run", XNLI_RUN), ("mlqa-run", MLQA_RUN)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(obj))
    (tmp_path / "tatoeba.json").write_text(json.dumps(TATOEBA))
    args = [str(tmp_path / "xnli-run"), str(tmp_path / "mlqa-run"), str(tmp_path / "tatoeba.json")]
    assert main(["report", *args, "--output", str(tmp_path / "report")]) == 0
    md = (tmp_path / "report" / "report.md").read_text()
    assert md in capsys.readouterr().out
    lines = md.splitlines()
    assert "| Model | en | fr | es | de | el | bg | ru | tr | ar | vi | th | zh | hi | sw | ur | Avg | gap |" in lines
    assert ("| *InfoXLM (paper)* | 86.4 | 80.3 | 80.9 | 79.3 | 77.8 | 79.3 | 77.6 | 75.6 | 74.2 | 77.1 | 74.6 | 77.0 "
            "| 72.2 | 67.5 | 67.3 | 76.5 | 10.6 |") in lines
    assert "| xnli-run (2 seeds) | 80.0 | 72.0 | – | 70.0 | – | – | – | – | – | – | – | – | – | – | – | 74.0 | 9.0 |" in lines
    assert ("| *InfoXLM (paper)* | 81.6 / 68.3 | 69.8 / 51.6 | 64.3 / 49.4 | 60.6 / 40.9 | 65.2 / 47.1 | 70.2 / 49.0 "
            "| 64.8 / 41.3 | 68.1 / 49.6 | 15.8 / 21.7 |") in lines
    assert "| mlqa-run (1 seed) | 70.0 / 50.0 | – | 60.0 / 40.0 | – | – | – | – | 65.0 / 45.0 | 10.0 / 10.0 |" in lines
    assert ("| *InfoXLM (paper)* | xx→en | 59.0 | 78.6 | 86.3 | 93.9 | 62.1 | 79.4 | 87.1 | 83.8 | 88.2 | 39.5 "
            "| 84.9 | 83.3 | 73.0 | 89.6 | 77.8 |") in lines
    assert "| tatoeba (layer 8, 2 of 14) | en→xx | – | – | 70.0 | 91.0 | – | – | – | – | – | – | – | – | – | – | 80.5 |" in lines
    assert "| *XLM-R (paper)* | 17.6 | 10.4 | 14.0 |" in lines
    assert "| xnli-run | – | 9.0 | – |" in lines and "| mlqa-run | 10.0 | – | – |" in lines
    for png in ("xnli-cross-lingual-transfer.png", "mlqa.png", "tatoeba.png"):
        assert (tmp_path / "report" / png).stat().st_size > 1000


def test_report_rejects_unknown_inputs(tmp_path, capsys):
    (tmp_path / "other.json").write_text("{\"a\": 1}")
    assert main(["report", str(tmp_path / "other.json"), "--output", str(tmp_path / "r")]) == 1
    assert "other.json: no finetune" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "missing"), "--output", str(tmp_path / "r")]) == 1
    assert "missing: no such run directory or JSON file" in capsys.readouterr().err
