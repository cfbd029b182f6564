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
    assert "| Model | en | fr | de | Avg (3) | paper Avg (15) | gap (3) |" in lines  # the run's languages only
    # The paper's rows on the run's 3 languages, beside the 15-language average it published.
    assert "| *InfoXLM (paper)* | 86.4 | 80.3 | 79.3 | 82.0 | 76.5 | 6.6 |" in lines
    assert "| xnli-run (2 seeds) | 80.0 | 72.0 | 70.0 | 74.0 | – | 9.0 |" in lines
    assert "| Model | en | de | Avg (2) | paper Avg (7) | gap (2) |" in lines
    assert "| *InfoXLM (paper)* | 81.6 / 68.3 | 64.3 / 49.4 | 72.9 / 58.8 | 68.1 / 49.6 | 17.3 / 18.9 |" in lines
    assert "| mlqa-run (1 seed) | 70.0 / 50.0 | 60.0 / 40.0 | 65.0 / 45.0 | – | 10.0 / 10.0 |" in lines
    assert "| Model | Direction | zh | de | Avg (2) | paper Avg (14) |" in lines
    assert "| *InfoXLM (paper)* | xx→en | 86.3 | 93.9 | 90.1 | 77.8 |" in lines
    assert "| tatoeba (layer 8) | en→xx | 70.0 | 91.0 | 80.5 | – |" in lines
    assert "| *XLM-R (paper)* | 17.6 | 10.4 | 14.0 |" in lines
    assert "| xnli-run | – | 9.0 (3) | – |" in lines and "| mlqa-run | 10.0 (2) | – | – |" in lines
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


PAPER14 = ["ara", "bul", "cmn", "deu", "ell", "fra", "hin", "rus", "spa", "swh", "tha", "tur", "urd", "vie"]


def _tatoeba(codes: list[str], layer: int = 8) -> dict:
    """A one-layer `eval tatoeba` block: xx→en 80, 81, … and en→xx 70, 71, … in ``codes`` order."""
    languages = {c: {"xx2en": 80.0 + i, "en2xx": 70.0 + i, "n": 10} for i, c in enumerate(codes)}
    average = {d: sum(s[d] for s in languages.values()) / len(codes) for d in ("xx2en", "en2xx")}
    return {"layer": layer, "pooling": "mean", "languages": languages, "average": average}


def _png_width(path) -> int:
    return int.from_bytes(path.read_bytes()[16:20], "big")  # the IHDR chunk's width


def test_a_three_language_result_is_averaged_over_its_three_and_the_paper_over_the_same(tmp_path):
    """A 3-language mean sat in the column of the paper's 14-language one, with 12 empty slots."""
    (tmp_path / "t3.json").write_text(json.dumps(_tatoeba(["deu", "fra", "jpn"])))  # jpn: not among the paper's 14
    assert main(["report", str(tmp_path / "t3.json"), "--output", str(tmp_path / "r.md")]) == 0
    lines = (tmp_path / "r.md").read_text().splitlines()
    assert "| Model | Direction | de | fr | ja | Avg (3) | paper Avg (14) |" in lines
    # The paper's row: its de and fr, their mean saying it is over 2, and its own 14-language Avg.
    assert f"| *InfoXLM (paper)* | xx→en | 93.9 | 79.4 | – | {(93.9 + 79.4) / 2:.1f} (2) | 77.8 |" in lines
    assert "| t3 (layer 8) | xx→en | 80.0 | 81.0 | 82.0 | 81.0 | – |" in lines
    assert "| t3 (layer 8) | en→xx | 70.0 | 71.0 | 72.0 | 71.0 | – |" in lines
    assert "Avg (n): each row's mean over the table's n languages" in (tmp_path / "r.md").read_text()


def test_a_result_with_all_the_papers_languages_has_one_avg_the_papers_as_published(tmp_path):
    langs = ["en", "fr", "es", "de", "el", "bg", "ru", "tr", "ar", "vi", "th", "zh", "hi", "sw", "ur"]
    run = {"task": "xnli", "seeds": [0], "mean": {"test": {l: 70.0 for l in langs}, "test_average": 70.0}}
    (tmp_path / "xnli").mkdir()
    (tmp_path / "xnli" / "results.json").write_text(json.dumps(run))
    assert main(["report", str(tmp_path / "xnli"), "--output", str(tmp_path / "r")]) == 0
    lines = (tmp_path / "r" / "report.md").read_text().splitlines()
    assert f"| Model | {' | '.join(langs)} | Avg (15) | gap (15) |" in lines
    assert ("| *InfoXLM (paper)* | 86.4 | 80.3 | 80.9 | 79.3 | 77.8 | 79.3 | 77.6 | 75.6 | 74.2 | 77.1 | 74.6 | 77.0 "
            "| 72.2 | 67.5 | 67.3 | 76.5 | 10.6 |") in lines
    assert f"| xnli (1 seed) | {' | '.join(['70.0'] * 15)} | 70.0 | 0.0 |" in lines


def test_a_three_language_plot_is_about_three_languages_wide_and_fourteen_stay_under_the_maximum(tmp_path):
    from infoxlm.eval.plots import MAX_BARS_PX

    widths = {}
    for name, codes in (("three", ["deu", "fra", "jpn"]), ("fourteen", PAPER14)):
        (tmp_path / f"{name}.json").write_text(json.dumps(_tatoeba(codes)))
        assert main(["report", str(tmp_path / f"{name}.json"), "--output", str(tmp_path / name)]) == 0
        widths[name] = _png_width(tmp_path / name / "tatoeba.png")
    assert widths["three"] <= 800 and widths["fourteen"] == MAX_BARS_PX == 1600, widths  # was 2,664 px


def _layers(codes: list[str], layer: int, rule: str, depth: int = 4) -> dict:
    """An `eval tatoeba --layer all` output: every layer's block, the default layer and its rule."""
    blocks = {}
    for k in range(depth + 1):
        block = _tatoeba(codes, layer=k)
        block["average"] = {"xx2en": 10.0 * k + len(codes), "en2xx": 9.0 * k}
        blocks[str(k)] = block
    return {"pooling": "mean", "layer": layer, "layer_rule": rule, "layers": blocks}


def test_two_layer_all_results_are_overlaid_each_with_its_contrast_layer_marked(tmp_path, monkeypatch):
    import infoxlm.eval.layer_overlay

    drawn, real = {}, infoxlm.eval.layer_overlay.plot_layerwise
    monkeypatch.setattr(infoxlm.eval.layer_overlay, "plot_layerwise",
                        lambda curves, path, title, **kw: drawn.update(curves=curves, title=title, **kw) or real(curves, path, title, **kw))
    (tmp_path / "infoxlm.json").write_text(json.dumps(_layers(["deu", "fra"], 3, "the contrast layer the model records")))
    (tmp_path / "xlmr.json").write_text(json.dumps(_layers(["deu", "fra", "jpn"], 2, "the middle layer of 4")))
    args = [str(tmp_path / "infoxlm.json"), str(tmp_path / "xlmr.json"), "--output", str(tmp_path / "r.md")]
    assert main(["report", *args]) == 0
    md = (tmp_path / "r.md").read_text()
    assert "![Tatoeba by layer](tatoeba-layers.png)" in md and (tmp_path / "tatoeba-layers.png").stat().st_size > 1000
    assert "| infoxlm | 3 | the contrast layer the model records | 2 | 32.0 | 27.0 |" in md.splitlines()
    assert drawn["marks"] == {"infoxlm (2 languages)": (3, "the contrast layer the model records"),
                              "xlmr (3 languages)": (2, "the middle layer of 4")}
    assert drawn["curves"]["xlmr (3 languages)"][4] == {"xx2en": 43.0, "en2xx": 36.0}
    assert sorted(drawn["curves"]["infoxlm (2 languages)"]) == [0, 1, 2, 3, 4]
    # The tables read each file at its marked layer.
    assert "| infoxlm (layer 3, the contrast layer the model records) | xx→en | 80.0 | 81.0 | – | 80.5 (2) | – |" in md.splitlines()


def test_a_layer_all_result_with_a_malformed_layer_is_one_line_naming_it(tmp_path, capsys):
    obj = _layers(["deu"], 3, "the contrast layer the model records")
    obj["layers"]["1"]["average"]["en2xx"] = "high"
    (tmp_path / "t.json").write_text(json.dumps(obj))
    assert main(["report", str(tmp_path / "t.json"), "--output", str(tmp_path / "r.md")]) == 1
    assert capsys.readouterr().err.strip() == f'infoxlm: error: {tmp_path / "t.json"}: layers.1.average.en2xx is "high"; expected a number'


def _bucc_layers(layer: int, splits=("sample", "training")) -> dict:
    """An `eval bucc --layer all` output: per layer each pair's splits and their average P / R / F1."""
    def block(k):
        average = {s: {"precision": 50.0, "recall": 40.0, "f1": 10.0 * k + i} for i, s in enumerate(splits)}
        return {"layer": k, "pooling": "mean", "tune_on": "training", "pairs": {"de-en": {}, "fr-en": {}}, "average": average}
    return {"margin": {"margin": "ratio", "k": 4, "strategy": "max"}, "pooling": "mean", "layer": layer,
            "layer_rule": "the contrast layer the model records", "layers": {str(k): block(k) for k in range(4)}}


def _xsim_layers(layer: int) -> dict:
    """An `eval xsim --layer all` output: per layer the error rates both ways, per language and on average."""
    def block(k):
        rates = {"xx2tgt": 50.0 - 10 * k, "tgt2xx": 45.0 - 10 * k}
        return {"layer": k, "pooling": "mean", "target": "eng_Latn", "languages": {"deu_Latn": {**rates, "n": 3}},
                "average": {**rates, "both": 47.5 - 10 * k}}
    return {"data": "own pairs", "margin": {"margin": "ratio", "k": 4}, "pooling": "mean", "layer": layer,
            "layer_rule": "XTREME: layer 7 of 12 above the embeddings", "layers": {str(k): block(k) for k in range(4)}}


def test_bucc_and_xsim_layer_all_files_get_a_figure_each_and_the_layer_each_reports_at(tmp_path):
    files = {"b-mine": _bucc_layers(3), "b-xlmr": _bucc_layers(2, splits=("training",)), "x": _xsim_layers(1)}
    for name, obj in files.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(obj))
    assert main(["report", *(str(tmp_path / f"{n}.json") for n in files), "--output", str(tmp_path / "r.md")]) == 0
    lines = (tmp_path / "r.md").read_text().splitlines()
    assert "## BUCC 2018 by layer" in lines and "## xsim by layer (lower is better)" in lines
    assert "| b-mine | 3 | the contrast layer the model records | 2 | 30.0 | 31.0 |" in lines
    assert "| b-xlmr | 2 | the contrast layer the model records | 2 | – | 20.0 |" in lines  # no sample split
    assert "| x | 1 | XTREME: layer 7 of 12 above the embeddings | 1 | 40.0 | 35.0 |" in lines
    for png in ("bucc-layers.png", "xsim-layers.png"):
        assert f"![{'BUCC 2018 by layer' if 'bucc' in png else 'xsim by layer (lower is better)'}]({png})" in lines
        assert (tmp_path / png).stat().st_size > 1000


def test_a_one_layer_bucc_file_is_refused_saying_what_the_report_reads(tmp_path, capsys):
    one = _bucc_layers(3)["layers"]["3"]
    (tmp_path / "b.json").write_text(json.dumps({**one, "layer_rule": "fixed"}))
    assert main(["report", str(tmp_path / "b.json"), "--output", str(tmp_path / "r.md")]) == 1
    assert "eval bucc or xsim --layer all" in capsys.readouterr().err
