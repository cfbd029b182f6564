"""Several models' retrieval by layer in one figure: one colour per model, a line per direction,
each model's own layer (its contrast layer, or the rule's) marked by a dotted line in its colour.

``infoxlm report A.json B.json`` draws the ``eval tatoeba --layer all`` files it is given this
way (``tatoeba-layers.png``), and ``infoxlm demo`` its models (``retrieval_test.png``): one
function, so the two figures read alike. Each curve is a model's average over its languages;
when the models were scored on different numbers of languages, each label says how many.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from .plots import plot_layerwise


@dataclass(frozen=True)
class LayerCurve:
    """One model's average top-1 (%) by layer, both directions, and the layer it reports at."""

    name: str
    by_layer: Mapping[int, Mapping[str, float]]  # {hidden_states index: {"xx2en": %, "en2xx": %}}
    layer: int  # the layer its scores are reported at (marked)
    rule: str  # why that layer, in words ("the contrast layer the model records")
    languages: int  # how many languages the averages are over


def plot_layer_overlay(curves: Sequence[LayerCurve], path: Path, title: str) -> Path:
    """Write the figure of ``curves`` to ``path`` (a PNG); ``title`` gets the number of
    languages when every curve has the same."""
    counts = {c.languages for c in curves}
    same = len(counts) == 1

    labels: list[str] = []
    for c in curves:  # two files of one name (runs/a/t.json, runs/b/t.json) keep a curve each
        label = c.name if same else f"{c.name} ({c.languages} languages)"
        labels.append(label if label not in labels else f"{label} [{len(labels) + 1}]")
    lines = {label: {k: dict(v) for k, v in c.by_layer.items()} for label, c in zip(labels, curves)}
    marks = {label: (c.layer, c.rule) for label, c in zip(labels, curves)}
    languages = f", average over {counts.pop()} languages" if same else ""
    return plot_layerwise(lines, path, title + languages, marks=marks)
