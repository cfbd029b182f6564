"""PNG figures of evaluation results (matplotlib, drawn off-screen)."""

from __future__ import annotations

from pathlib import Path


def plot_layerwise(curves: dict[str, dict[int, dict[str, float]]], path: Path, title: str) -> Path:
    """Average top-1 accuracy per layer, one line per (model, direction).

    curves: {model name: {layer: {"xx2en": acc, "en2xx": acc}}}.
    """
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    for name, by_layer in curves.items():
        layers = sorted(by_layer)
        for direction, style in (("xx2en", "-"), ("en2xx", "--")):
            label = f"{name} {direction}" if name else direction
            ax.plot(layers, [by_layer[k][direction] for k in layers], style, marker="o", markersize=3, label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("layer (hidden_states index; 0 = embeddings)")
    ax.set_ylabel("top-1 accuracy (%)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
