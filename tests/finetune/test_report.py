"""`infoxlm report`: exact Markdown rows for hand-made results, paper rows alongside, PNGs."""

from __future__ import annotations

import json

import pytest

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


def _without(obj: dict, *keys: str) -> dict:
    """A deep copy of ``obj`` with the key at the path ``keys`` removed."""
    obj = json.loads(json.dumps(obj))
    inner = obj
    for key in keys[:-1]:
        inner = inner[key]
    del inner[keys[-1]]
    return obj


def _with(obj: dict, value, *keys: str) -> dict:
    obj = json.loads(json.dumps(obj))
    inner = obj
    for key in keys[:-1]:
        inner = inner[key]
    inner[keys[-1]] = value
    return obj


BAD_RESULTS = [
    (_without(XNLI_RUN, "mean"), "no key mean; expected it in xnli results"),
    (_without(XNLI_RUN, "mean", "test_average"), "no key mean.test_average; expected it in xnli results"),
    (_with(XNLI_RUN, "80", "mean", "test", "de"), 'mean.test.de is "80"; expected a number'),
    (_with(XNLI_RUN, [1], "mean", "test"), "mean.test is [1]; expected an object"),
    (_with(XNLI_RUN, "../../evil", "setting"), 'setting is "../../evil"; expected a name of letters, digits, - and _'),
    (_without(MLQA_RUN, "mean", "test", "de", "f1"), "no key mean.test.de.f1; expected it in mlqa results"),
    (_with(MLQA_RUN, None, "mean", "average_f1"), "mean.average_f1 is null; expected a number"),
    (_with(MLQA_RUN, "big", "mean", "transfer_gap_f1"), 'mean.transfer_gap_f1 is "big"; expected a number or null'),
    (_without(TATOEBA, "languages", "deu", "en2xx"), "no key languages.deu.en2xx; expected it in tatoeba results"),
    (_with(TATOEBA, "8", "layer"), 'layer is "8"; expected an integer'),
    ({"layer": 5, "layers": {"8": TATOEBA}}, "layers has no key 5 (the layer that layer names); its keys are 8"),
    ({"layer": 8, "layers": {"8": _with(TATOEBA, None, "languages", "cmn", "xx2en")}},
     "layers.8.languages.cmn.xx2en is null; expected a number"),
]


@pytest.mark.parametrize(("obj", "expected"), BAD_RESULTS)
def test_report_names_the_file_and_key_of_a_malformed_result(tmp_path, capsys, obj, expected):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(obj))
    assert main(["report", str(run), "--output", str(tmp_path / "r")]) == 1
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err == f"infoxlm: error: {run / 'results.json'}: {expected}", err
    assert not (tmp_path / "r").exists()


def test_an_included_demo_report_is_nested_under_its_section(tmp_path):
    """The demo's results.md starts with its own H1, which sat beside the report's title."""
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / "results.json").write_text(json.dumps({"models": {}, "summary": {}}))
    (demo / "results.md").write_text("# infoxlm demo\n\n`infoxlm demo`\n\n## Retrieval\n\n```\n# a shell comment\n```\n")
    assert main(["report", str(demo), "--output", str(tmp_path / "report")]) == 0
    lines = (tmp_path / "report" / "report.md").read_text().splitlines()
    assert [line for line in lines if line.startswith("# ")] == ["# InfoXLM evaluation report", "# a shell comment"]
    section = lines.index("## Demo: demo")
    assert lines[section + 2] == "### infoxlm demo" and "#### Retrieval" in lines[section:]
