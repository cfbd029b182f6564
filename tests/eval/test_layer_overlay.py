"""Several models' retrieval by layer in one figure (the report's tatoeba-layers.png, the demo's
retrieval_test.png): labels, marks and the title's language count."""

from __future__ import annotations

import pytest

import infoxlm.eval.layer_overlay
from infoxlm.eval.layer_overlay import LayerCurve, plot_layer_overlay

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
