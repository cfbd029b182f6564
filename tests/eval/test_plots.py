"""The figures: accuracy axes from 0 to 100, legends beside the data, never over it."""

from __future__ import annotations

import pytest

from infoxlm.eval.plots import (DPI, MAX_BARS_PX, bars_figure, bars_width_px, layerwise_figure, losses_figure, plot_bars,
                                plot_layerwise, plot_losses)

pytest.importorskip("matplotlib")


def _legend_clear_of_the_axes(fig) -> bool:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend, plot = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
    return legend.x0 >= plot.x1  # wholly to the right of the plotting area


def test_a_flat_layerwise_curve_is_drawn_on_the_whole_percent_scale(tmp_path):
    """A curve between 11.5 and 11.7 filled the figure as if the layers differed."""
    curves = {"": {k: {"xx2en": 11.5 + 0.05 * k, "en2xx": 11.6} for k in range(5)}}
    fig = layerwise_figure(curves, "Tatoeba")
    assert fig.axes[0].get_ylim() == (0.0, 100.0)
    assert _legend_clear_of_the_axes(fig)
    assert plot_layerwise(curves, tmp_path / "l.png", "Tatoeba").stat().st_size > 1000


def test_the_bars_legend_leaves_the_average_bars_visible(tmp_path):
    """XNLI: five series of 16 bars, the last group (Avg) at the right edge, where the legend sat."""
    columns = [*"abcdefghijklmno", "Avg"]
    series = {f"model {i}": [80.0 - i] * len(columns) for i in range(5)}
    series["ours"] = [None, *[90.0] * (len(columns) - 1)]  # a missing value: no bar
    fig = bars_figure(columns, {"XNLI": series}, "accuracy (%)")
    assert fig.axes[0].get_ylim() == (0.0, 100.0)
    assert _legend_clear_of_the_axes(fig)
    assert plot_bars(columns, {"XNLI": series}, tmp_path / "b.png", "accuracy (%)").stat().st_size > 1000


def test_bars_are_as_wide_as_their_languages_need_up_to_a_maximum():
    """3 languages and Avg, four series: a narrow figure; 14 and Avg stop at the maximum, not 2,664 px."""
    three, fourteen = ([f"l{i}" for i in range(n)] + ["Avg"] for n in (3, 14))
    widths = [bars_figure(cols, {"t": {f"m{i}": [50.0] * len(cols) for i in range(4)}}, "%").get_size_inches()[0] * DPI
              for cols in (three, fourteen)]
    assert widths[0] < 700 and round(widths[1]) == MAX_BARS_PX == bars_width_px(15, 4), widths
    assert bars_width_px(4, 1) < bars_width_px(4, 4) < bars_width_px(8, 4) < MAX_BARS_PX


def test_both_directions_are_two_panels_of_the_same_width(tmp_path):
    columns = ["de", "fr", "Avg (2)"]
    panels = {"xx→en": {"ours": [90.0, 80.0, 85.0]}, "en→xx": {"ours": [70.0, None, 70.0]}}
    fig = bars_figure(columns, panels, "top-1 accuracy (%)")
    assert [ax.get_title() for ax in fig.axes] == ["xx→en", "en→xx"]
    assert [p.get_height() for p in fig.axes[1].patches] == [70.0, 0.0, 70.0]  # a missing value: no bar
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == columns


def test_the_loss_figure_has_a_panel_per_objective_and_a_line_per_run_that_has_points(tmp_path):
    """The demo's loss.png: −XLCO logs no XLCO loss, so its XLCO panel holds InfoXLM's line only."""
    curves = {
        "InfoXLM": {"MMLM": [(1, 7.0), (2, 6.5)], "TLM": [(1, 7.1), (2, 6.6)], "XLCO": [(1, 4.0), (2, 3.0)]},
        "−XLCO": {"MMLM": [(1, 7.0), (2, 6.4)], "TLM": [(1, 7.1), (2, 6.5)], "XLCO": []},
    }
    fig = losses_figure(curves, ["MMLM", "TLM", "XLCO"])
    assert [ax.get_title() for ax in fig.axes] == ["MMLM", "TLM", "XLCO"]
    assert [len(ax.get_lines()) for ax in fig.axes] == [2, 2, 1]
    assert list(fig.axes[2].get_lines()[0].get_ydata()) == [4.0, 3.0]
    assert plot_losses(curves, ["MMLM", "TLM", "XLCO"], tmp_path / "loss.png").stat().st_size > 1000



def test_a_plot_that_fills_the_disk_leaves_no_half_png_and_names_its_path(tmp_path, monkeypatch):
    import errno

    from matplotlib.figure import Figure

    from infoxlm.outputs import NoSpaceLeft

    def savefig(self, path, *args, **kwargs):  # matplotlib passes write(2)'s error on, nameless
        open(path, "wb").write(b"\x89PNG half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", savefig)
    png = tmp_path / "plots" / "losses.png"
    with pytest.raises(NoSpaceLeft, match=f"no space left on device while writing {png}$"):
        plot_losses({"run": {"mmlm": [(1, 2.0), (2, 1.5)]}}, ["mmlm"], png)
    assert not (tmp_path / "plots").exists()


def test_a_layerwise_figure_of_other_scores_has_a_line_per_score():
    """BUCC draws F1 per split, xsim its error rates: the lines and the axis are the caller's."""
    curves = {"": {k: {"sample F1": 50.0 + k, "training F1": 60.0, "test F1": 70.0} for k in range(3)}}
    fig = layerwise_figure(curves, "BUCC", lines=["sample F1", "training F1", "test F1"], ylabel="F1 (%)")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["sample F1", "training F1", "test F1"]
    assert list(ax.get_lines()[0].get_ydata()) == [50.0, 51.0, 52.0] and ax.get_ylabel() == "F1 (%)"
    assert [line.get_linestyle() for line in ax.get_lines()] == ["-", "--", ":"]


def test_the_layer_a_model_reports_at_is_marked_and_named_in_the_legend():
    curves = {"": {k: {"xx2en": 10.0 * k, "en2xx": 5.0 * k} for k in range(5)}}
    fig = layerwise_figure(curves, "m: Tatoeba", marks={"": (3, "the contrast layer the model records")})
    ax = fig.axes[0]
    marked = [line for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert len(marked) == 1 and list(marked[0].get_xdata()) == [3, 3]
    assert marked[0].get_label() == "layer 3, the contrast layer the model records" and ax.get_title() == "m: Tatoeba"


def test_an_evaluations_plot_names_its_model_and_marks_its_layer(monkeypatch, tmp_path):
    import infoxlm.eval.plots
    from infoxlm.eval.embedding_eval import LayerChoice

    drawn = {}
    monkeypatch.setattr(infoxlm.eval.plots, "plot_layerwise", lambda curves, path, title, **kw: drawn.update(title=title, **kw))
    choice = LayerChoice(layers=[0, 1, 2], shown=2, rule="XTREME's layer", pooling="mean", every=True)
    choice.plot({"": {}}, "BUCC 2018", tmp_path / "runs" / "infoxlm-model", ylabel="F1 (%)")(tmp_path / "b.png")
    assert drawn == {"title": "infoxlm-model: BUCC 2018", "marks": {"": (2, "XTREME's layer")}, "ylabel": "F1 (%)"}


def test_an_overlay_draws_each_model_in_one_colour_its_mark_included():
    curves = {name: {k: {"xx2en": 10.0 * k + i, "en2xx": 5.0 * k} for k in range(5)} for i, name in enumerate(("a", "b"))}
    fig = layerwise_figure(curves, "Tatoeba", marks={"a": (3, "its contrast layer"), "b": (2, "the middle layer")})
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    for name, layer in (("a", 3), ("b", 2)):
        mark = lines[f"{name}: layer {layer}, {'its contrast layer' if name == 'a' else 'the middle layer'}"]
        assert list(mark.get_xdata()) == [layer, layer]
        assert mark.get_color() == lines[f"{name} xx2en"].get_color() == lines[f"{name} en2xx"].get_color()
    assert lines["a xx2en"].get_color() != lines["b xx2en"].get_color()
    assert [lines[f"a {d}"].get_linestyle() for d in ("xx2en", "en2xx")] == ["-", "--"]
