"""What the evaluations that embed sentences (`eval tatoeba`, `eval bucc`, `eval xsim`) share at
the command line: their flags, the layers they embed, their JSON (with the PNG of the layer-wise
curve) written together, and the lines cut before they were embedded.

``--layer N`` scores hidden state N; no ``--layer``, the layer of the rule every command shares
(model/sentence_layer.py); ``--layer all`` scores every layer from one pass of the encoder and
shows the rule's layer, never the layer that scores best on the test data. The JSON is then
``{"pooling", "layer", "layer_rule", "layers": {"0": block, …}}`` (plus what the command adds),
for one layer the block itself with its ``layer_rule``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from ..cli_args import positive_int
from ..corpus.long_lines import LongLines
from ..errors import InfoXLMError
from ..outputs import atomic_file, check_output_file

if TYPE_CHECKING:  # the parsers import no torch (cli.py)
    from ..train.model_source import OpenedModel


def add_layer_arguments(parser: argparse.ArgumentParser, layer_help: str) -> None:
    """--layer, --pooling, --batch-size, --device, --output and --no-progress."""
    parser.add_argument("--layer", default=None, help=layer_help)
    parser.add_argument("--pooling", choices=["mean", "cls"], default=None,
                        help="default: what a sentence-transformers export records, else mean (XTREME's)")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="sentences per batch (default: 64)")
    parser.add_argument("--device", default=None, help="cpu, cuda … (default: cuda if available)")
    parser.add_argument("--output", required=True, type=Path,
                        help="JSON file to write (with --layer all, the PNG of the curve beside it)")
    parser.add_argument("--no-progress", action="store_true")


def requested_layer(args: argparse.Namespace) -> int | str | None:
    """``--layer`` as an index, "all" or None, after the outputs are checked (before any work)."""
    check_output_file(args.output)
    if args.layer == "all":
        check_output_file(args.output.with_suffix(".png"))
        return "all"
    try:
        return None if args.layer is None else int(args.layer)
    except ValueError:
        raise InfoXLMError(f"--layer {args.layer!r}: expected a hidden_states index (an integer) or 'all'") from None


@dataclass(frozen=True)
class LayerChoice:
    """The layers to embed, the layer shown (and the rule that chose it), and the pooling."""

    layers: list[int]
    shown: int
    rule: str
    pooling: str
    every: bool  # --layer all

    @classmethod
    def of(cls, model: OpenedModel, requested: int | str | None, pooling: str | None) -> LayerChoice:
        if requested == "all":
            shown, rule = model.default_layer()
            return cls(list(range(model.num_layers + 1)), shown, rule, model.pooling(pooling), True)
        shown, rule = model.layer(requested)  # type: ignore[arg-type]
        return cls([shown], shown, rule, model.pooling(pooling), False)

    def result(self, blocks: dict[int, dict], **fields) -> dict:
        """The JSON: the shown layer's block, or with --layer all every block under "layers"."""
        if not self.every:
            return {**fields, **blocks[self.shown], "layer_rule": self.rule}
        return {**fields, "pooling": self.pooling, "layer": self.shown, "layer_rule": self.rule,
                "layers": {str(k): block for k, block in blocks.items()}}

    def plot(self, curves: dict, title: str, model: str | Path, **lines) -> Callable[[Path], object]:
        """What ``write`` draws for --layer all: ``curves`` (plots.layerwise_figure's) under a
        title that names the model, the layer the table shows marked with its rule."""
        from .plots import plot_layerwise

        named = f"{Path(model).name or model}: {title}"
        return lambda path: plot_layerwise(curves, path, named, marks={"": (self.shown, self.rule)}, **lines)

    def write(self, output: Path, result: dict, plot: Callable[[Path], object]) -> Path | None:
        """The JSON, and with --layer all the PNG ``plot(path)`` draws beside it: both in place,
        or neither. Returns the PNG's path, if one was written."""
        png = output.with_suffix(".png") if self.every else None
        with atomic_file(output) as tmp:
            tmp.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
            if png:
                with atomic_file(png) as tmp_png:
                    plot(tmp_png)
        return png


def print_cut_lines(cut_lines: dict[str, int]) -> None:
    """Lines too long to embed whole, cut before they were tokenized (what was cut lies past
    the 512 tokens an encoder keeps)."""
    chars = LongLines.for_tokens(512).max_chars
    for path, count in cut_lines.items():
        lines = "1 line" if count == 1 else f"{count:,} lines"
        print(f"{path}: {lines} longer than {chars:,} characters cut to that many before tokenizing")


def print_layer_table(blocks: dict[int, dict], shown: int, title: str, columns: Mapping[str, Callable[[dict], float]],
                      width: int = 8, digits: int = 1) -> None:
    """--layer all: a row per layer, a column per ``columns`` entry (header → the value of a
    layer's block), the layer of the table printed above it marked."""
    print(f"{title:<26}" + "".join(f"{header:>{width}}" for header in columns))
    for k, block in sorted(blocks.items()):
        mark = "   (the table above)" if k == shown else ""
        label = f"layer {k}" + (" (embeddings)" if k == 0 else "")
        print(f"  {label:<24}" + "".join(f"{value(block):>{width}.{digits}f}" for value in columns.values()) + mark)
