"""PNG figures of evaluation results and training losses (matplotlib, drawn off-screen): the
one place infoxlm draws; the report and the demo pass it their numbers.

Every accuracy axis (accuracy, F1, top-1 retrieval, all in %) runs from 0 to 100, so that a
curve that moves a tenth of a point does not fill the figure as if it were a trend, and
figures of different models read on the same scale. Legends sit beside the axes, never over
the bars or curves. ``*_figure`` builds a figure (what the tests inspect); ``plot_*`` writes it.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..outputs import atomic_file

PERCENT = (0.0, 100.0)  # the y-range of every accuracy axis
DPI = 120
# Bar figures: the legend's room beside the axes, the narrowest axes, the widest figure (of
# every figure: a layer-wise one widens with its legend up to it too).
LEGEND_IN, MIN_AXES_IN, MAX_BARS_PX = 2.4, 3.0, 1600


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    return plt


def layerwise_figure(curves: dict[str, dict[int, dict[str, float]]], title: str, *,
                     lines: Sequence[str] = ("xx2en", "en2xx"), ylabel: str = "top-1 accuracy (%)",
                     marks: Mapping[str, tuple[int, str]] | None = None) -> Any:
    """A score (%) per layer, one line per (model, entry of ``lines``): by default Tatoeba's
    average top-1 accuracy in each direction; BUCC's F1 per split, xsim's error rates.

    curves: {model name: {layer: {line: value}}}, e.g. {"": {8: {"xx2en": 91.2, "en2xx": 90.4}}}.
    marks: {model name: (layer, why)}: a dotted line at each model's own layer (the one its
    scores are reported at, e.g. its contrast layer), named in the legend. With several
    models (an overlay), each has one colour, its lines and its mark; the entries of ``lines``
    differ by line style.
    """
    from matplotlib.ticker import MaxNLocator

    labels = [f"{name} {line}" for name in curves for line in lines]
    labels += [f"{name}: layer {layer}, {why}" for name, (layer, why) in (marks or {}).items()]
    # Axes wide enough for the title, the legend's longest label beside them (~0.056 in a character).
    width_in = max(7.6, 5.2 + 0.6 + 0.056 * max(map(len, labels), default=0))
    fig, ax = _pyplot().subplots(figsize=(min(width_in, MAX_BARS_PX / DPI), 4.0), dpi=DPI)
    overlay = len(curves) > 1
    colors = {name: f"C{i % 10}" if overlay else None for i, name in enumerate(curves)}
    for name, by_layer in curves.items():
        layers = sorted(by_layer)
        for line, style in zip(lines, itertools.cycle(("-", "--", ":", "-."))):
            label = f"{name} {line}" if name else line
            ax.plot(layers, [by_layer[k][line] for k in layers], style, marker="o", markersize=3, label=label,
                    color=colors[name])
    for (name, (layer, why)), grey in zip((marks or {}).items(), itertools.cycle(("0.45", "0.7"))):
        ax.axvline(layer, color=colors.get(name) or grey, linestyle=":", linewidth=1.2,
                   label=f"{name + ': ' if name else ''}layer {layer}, {why}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("layer (hidden_states index; 0 = embeddings)")
    _percent_axis(ax, ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    _legend_beside(ax)
    return fig


def bars_width_px(columns: int, series: int) -> int:
    """The width of a bar figure in pixels: about a bar per (column, series) and room for the
    legend, so that 3 languages make a narrow figure; never wider than ``MAX_BARS_PX``.

    >>> bars_width_px(4, 4), bars_width_px(8, 4), bars_width_px(16, 4)  # 3 languages and Avg: 672 px
    (672, 1056, 1600)
    """
    bar_in = 0.16  # one bar; a group is its bars plus a bar's width of space
    axes_in = max(MIN_AXES_IN, columns * (series + 1) * bar_in)
    return min(MAX_BARS_PX, round((axes_in + LEGEND_IN) * DPI))


def bars_figure(columns: list[str], panels: Mapping[str, Mapping[str, Sequence[float | None]]], ylabel: str) -> Any:
    """Grouped bars, one panel above the other (Tatoeba's two directions): in each, one group
    per column (a language, then Avg), one bar per series (model); a missing value is no bar.

    panels: {panel title: {series name: one value per column}}. The figure is as wide as its
    columns need (``bars_width_px``), the panels share it.
    """
    n_series = max((len(series) for series in panels.values()), default=1)
    width_in = bars_width_px(len(columns), n_series) / DPI
    fig, axes = _pyplot().subplots(len(panels), 1, figsize=(width_in, 0.4 + 3.4 * len(panels)), dpi=DPI, squeeze=False)
    for ax, (title, series) in zip(axes[:, 0], panels.items()):
        width = 0.8 / max(1, len(series))
        for i, (name, values) in enumerate(series.items()):
            xs = [c + (i - (len(series) - 1) / 2) * width for c in range(len(columns))]
            ax.bar(xs, [v if v is not None else 0.0 for v in values], width, label=name)
        ax.set_xticks(range(len(columns)))
        ax.set_xticklabels(columns)
        _percent_axis(ax, ylabel)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        _legend_beside(ax)
    return fig


def losses_figure(
    curves: dict[str, dict[str, Sequence[tuple[int, float]]]], panels: Sequence[str], percent_panels: Sequence[str] = ()
) -> Any:
    """Training loss by step: one panel per objective, one line per run.

    curves: {run label: {panel title (objective): [(step, loss), …]}}; a run without points for
    a panel has no line there. Losses are not percentages: each panel keeps its own scale;
    ``percent_panels`` (an accuracy by step) run from 0 to 100.
    """
    fig, axes = _pyplot().subplots(1, len(panels), figsize=(10.0, 3.2), dpi=DPI, squeeze=False)
    axes = axes[0]
    for label, by_panel in curves.items():
        for ax, panel in zip(axes, panels):
            points = by_panel.get(panel)
            if points:
                ax.plot(*zip(*points), label=label)
    for ax, panel in zip(axes, panels):
        ax.set_title(panel)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        if panel in percent_panels:
            ax.set_ylim(*PERCENT)
    axes[0].set_ylabel("loss")
    return fig


def plot_layerwise(curves: dict[str, dict[int, dict[str, float]]], path: Path, title: str, **lines: Any) -> Path:
    """Write ``layerwise_figure`` as a PNG at ``path`` (``lines``: its ``lines`` and ``ylabel``)."""
    return _save(layerwise_figure(curves, title, **lines), path)


def plot_bars(columns: list[str], panels: Mapping[str, Mapping[str, Sequence[float | None]]], path: Path,
              ylabel: str) -> Path:
    """Write ``bars_figure`` as a PNG at ``path``."""
    return _save(bars_figure(columns, panels, ylabel), path)


def plot_losses(
    curves: dict[str, dict[str, Sequence[tuple[int, float]]]], panels: Sequence[str], path: Path,
    percent_panels: Sequence[str] = (),
) -> Path:
    """Write ``losses_figure`` as a PNG at ``path``."""
    return _save(losses_figure(curves, panels, percent_panels), path)


def _percent_axis(ax: Any, label: str) -> None:
    ax.set_ylim(*PERCENT)
    ax.set_ylabel(label)


def _legend_beside(ax: Any) -> None:
    """The legend to the right of the axes, its top level with theirs."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)


def _save(fig: Any, path: Path) -> Path:
    """The figure written whole or not at all (a full disk leaves no half PNG, and says so)."""
    fig.tight_layout()  # makes room for the legend beside the axes
    try:
        with atomic_file(path) as tmp:
            fig.savefig(tmp)
    finally:
        _pyplot().close(fig)
    return path
