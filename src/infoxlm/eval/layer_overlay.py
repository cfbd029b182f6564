"""Several models' scores by layer in one figure: one colour per model, a line per direction (or
BUCC split), each model's own layer (its contrast layer, or the rule's) marked by a dotted line
in its colour.

``infoxlm report A.json B.json`` draws the ``--layer all`` outputs of ``eval tatoeba``, ``eval
bucc`` and ``eval xsim`` it is given this way (``tatoeba-layers.png``, ``bucc-layers.png``,
``xsim-layers.png``), and ``infoxlm demo`` its models (``retrieval_test.png``): one function, so
the figures read alike. Each curve is a model's average over its languages (BUCC: its pairs);
when the models were scored on different numbers of them, each label says how many.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import EvalDataError
from .plots import plot_layerwise
from .result_shape import check_shape, shown_layer


@dataclass(frozen=True)
class LayerCurve:
    """One model's average score (%) by layer, per line, and the layer it reports at."""

    name: str
    by_layer: Mapping[int, Mapping[str, float]]  # {hidden_states index: {"xx2en": %, "en2xx": %}}
    layer: int  # the layer its scores are reported at (marked)
    rule: str  # why that layer, in words ("the contrast layer the model records")
    languages: int  # how many languages (BUCC: pairs) the averages are over


@dataclass(frozen=True)
class LayerKind:
    """What one eval command's ``--layer all`` output holds, and how its figure is drawn."""

    command: str  # "eval tatoeba"
    title: str
    png: str
    ylabel: str
    unit: str  # what a curve averages over: "languages", "pairs"


KINDS = {
    "tatoeba": LayerKind("eval tatoeba", "Tatoeba by layer", "tatoeba-layers.png", "top-1 accuracy (%)", "languages"),
    "bucc": LayerKind("eval bucc", "BUCC 2018 by layer", "bucc-layers.png", "F1 (%)", "pairs"),
    "xsim": LayerKind("eval xsim", "xsim by layer (lower is better)", "xsim-layers.png", "xsim error rate (%)", "languages"),
}


def kind_of(obj: Any) -> str | None:
    """The key in ``KINDS`` of the command that wrote this ``--layer all`` output, or None for
    any other file (a one-layer output among them)."""
    layers = obj.get("layers") if isinstance(obj, dict) else None
    first = next(iter(layers.values()), None) if isinstance(layers, dict) else None
    average = first.get("average") if isinstance(first, dict) else None
    if not isinstance(average, dict):
        return None
    if "xx2en" in average:
        return "tatoeba"
    if "xx2tgt" in average:
        return "xsim"
    return "bucc" if "pairs" in first else None


def _scores(kind: str, block: Any, file: Path, key: str) -> tuple[dict[str, float], int]:
    """One layer's lines ({"xx2en": %, …}; BUCC {"training F1": %, …}) and how many languages
    (pairs) they average, after checking the block has them."""
    where = ("layers", key)
    if kind == "bucc":
        check_shape(block, {"pairs": {}, "average": {"*": {"f1": "number"}}}, file, "bucc", where)
        return {f"{split} F1": s["f1"] for split, s in block["average"].items()}, len(block["pairs"])
    lines = ("xx2en", "en2xx") if kind == "tatoeba" else ("xx2tgt", "tgt2xx")
    check_shape(block, {"languages": {}, "average": {line: "number" for line in lines}}, file, kind, where)
    return {line: block["average"][line] for line in lines}, len(block["languages"])


def read_curve(name: str, obj: dict, file: Path, kind: str) -> LayerCurve:
    """The curve of a ``--layer all`` output of ``kind`` (every layer checked), named ``name``."""
    layer, rule = shown_layer(obj, file, kind)
    by_layer, counts = {}, {}
    for key, block in obj["layers"].items():
        if not key.isdigit():
            raise EvalDataError(f"{file}: layers has the key {key!r}; expected hidden_states indices (0, 1, …)")
        by_layer[int(key)], counts[int(key)] = _scores(kind, block, file, key)
    return LayerCurve(name, by_layer, layer, rule, counts[layer])


def _count(n: int, unit: str) -> str:
    return f"{n} {unit if n != 1 else unit.removesuffix('s')}"


def plot_layer_overlay(curves: Sequence[LayerCurve], path: Path, title: str, *, ylabel: str = "top-1 accuracy (%)",
                       unit: str = "languages") -> Path:
    """Write the figure of ``curves`` to ``path`` (a PNG); ``title`` gets the number of
    languages (``unit``) when every curve has the same. The lines are those every curve has at
    every layer (BUCC files may score different splits)."""
    counts = {c.languages for c in curves}
    same = len(counts) == 1
    labels: list[str] = []
    for c in curves:  # two files of one name (runs/a/t.json, runs/b/t.json) keep a curve each
        label = c.name if same else f"{c.name} ({_count(c.languages, unit)})"
        labels.append(label if label not in labels else f"{label} [{len(labels) + 1}]")
    every = [line for c in curves for scores in c.by_layer.values() for line in scores]
    lines = [line for line in dict.fromkeys(every)
             if all(line in scores for c in curves for scores in c.by_layer.values())]
    data = {label: {k: dict(v) for k, v in c.by_layer.items()} for label, c in zip(labels, curves)}
    marks = {label: (c.layer, c.rule) for label, c in zip(labels, curves)}
    title += f", average over {_count(counts.pop(), unit)}" if same else ""
    return plot_layerwise(data, path, title, marks=marks, lines=lines, ylabel=ylabel)
