"""Several models' retrieval by layer in one figure (the report's tatoeba-layers.png, the demo's
retrieval_test.png): labels, marks and the title's language count."""

from __future__ import annotations

import pytest

import infoxlm.eval.layer_overlay
from infoxlm.errors import EvalDataError
from infoxlm.eval.layer_overlay import LayerCurve, kind_of, plot_layer_overlay, read_curve

pytest.importorskip("matplotlib")


def _curve(name: str, layer: int, languages: int) -> LayerCurve:
    return LayerCurve(name, {k: {"xx2en": 10.0 * k, "en2xx": 8.0 * k} for k in range(4)}, layer, "its contrast layer", languages)


def _drawn(monkeypatch) -> dict:
    drawn: dict = {}
    monkeypatch.setattr(infoxlm.eval.layer_overlay, "plot_layerwise",
                        lambda curves, path, title, **kw: drawn.update(curves=curves, title=title, **kw))
    return drawn


def test_curves_of_as_many_languages_name_the_count_once_in_the_title(monkeypatch, tmp_path):
    drawn = _drawn(monkeypatch)
    plot_layer_overlay([_curve("InfoXLM", 3, 5), _curve("−XLCO", 2, 5)], tmp_path / "o.png", "Retrieval by layer")
    assert drawn["title"] == "Retrieval by layer, average over 5 languages"
    assert drawn["marks"] == {"InfoXLM": (3, "its contrast layer"), "−XLCO": (2, "its contrast layer")}
    assert list(drawn["curves"]) == ["InfoXLM", "−XLCO"] and drawn["curves"]["InfoXLM"][2] == {"xx2en": 20.0, "en2xx": 16.0}


def test_curves_of_different_language_counts_and_of_one_name_keep_their_own_labels(monkeypatch, tmp_path):
    drawn = _drawn(monkeypatch)
    plot_layer_overlay([_curve("t", 3, 2), _curve("t", 2, 3), _curve("t", 1, 3)], tmp_path / "o.png", "Tatoeba by layer")
    assert drawn["title"] == "Tatoeba by layer"
    assert list(drawn["marks"].items()) == [("t (2 languages)", (3, "its contrast layer")),
                                            ("t (3 languages)", (2, "its contrast layer")),
                                            ("t (3 languages) [3]", (1, "its contrast layer"))]


def test_the_overlay_is_written_as_a_png(tmp_path):
    png = plot_layer_overlay([_curve("a", 3, 2), _curve("b", 1, 2)], tmp_path / "o.png", "Tatoeba by layer")
    assert png == tmp_path / "o.png" and png.read_bytes()[:4] == b"\x89PNG"


def _tatoeba_block(k):
    return {"languages": {"deu": {}}, "average": {"xx2en": 10.0 * k, "en2xx": 9.0 * k}}


def test_each_eval_commands_layer_all_output_is_told_apart_from_one_layer_files():
    assert kind_of({"layer": 1, "layers": {"0": _tatoeba_block(0), "1": _tatoeba_block(1)}}) == "tatoeba"
    assert kind_of({"layers": {"0": {"languages": {}, "average": {"xx2tgt": 1.0, "tgt2xx": 2.0, "both": 1.5}}}}) == "xsim"
    assert kind_of({"layers": {"0": {"pairs": {}, "average": {"training": {"f1": 1.0}}}}}) == "bucc"
    assert kind_of(_tatoeba_block(1)) is None and kind_of({"layers": {}}) is None and kind_of([1]) is None


def test_a_bucc_curve_is_f1_per_split_and_the_figure_draws_the_splits_every_file_has(monkeypatch, tmp_path):
    def bucc(splits):
        layers = {str(k): {"pairs": {"de-en": {}}, "average": {s: {"f1": 10.0 * k} for s in splits}} for k in range(3)}
        return {"layer": 2, "layer_rule": "the contrast layer the model records", "layers": layers}

    a = read_curve("a", bucc(["sample", "training"]), tmp_path / "a.json", "bucc")
    b = read_curve("b", bucc(["training"]), tmp_path / "b.json", "bucc")
    assert a.by_layer[1] == {"sample F1": 10.0, "training F1": 10.0} and (a.layer, a.languages) == (2, 1)
    drawn = _drawn(monkeypatch)
    plot_layer_overlay([a, b], tmp_path / "o.png", "BUCC 2018 by layer", ylabel="F1 (%)", unit="pairs")
    assert drawn["lines"] == ["training F1"] and drawn["title"] == "BUCC 2018 by layer, average over 1 pair"


def test_a_layer_key_that_is_no_index_is_one_line_naming_it(tmp_path):
    obj = {"layer": 1, "layers": {"1": _tatoeba_block(1), "last": _tatoeba_block(2)}}
    with pytest.raises(EvalDataError, match=r"t.json: layers has the key 'last'; expected hidden_states indices"):
        read_curve("t", obj, tmp_path / "t.json", "tatoeba")
