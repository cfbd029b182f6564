"""``infoxlm eval tatoeba``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..cli_args import add_model_arguments, positive_int
from ..corpus.long_lines import LongLines
from ..errors import InfoXLMError
from ..outputs import atomic_file, check_output_file
from .mlqa_cli import add_mlqa_score_command
from .xtreme_score_cli import add_xtreme_score_command

if TYPE_CHECKING:  # the parsers import no torch (cli.py)
    from ..train.model_source import OpenedModel


def add_eval_commands(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("eval", help="evaluate a model (Tatoeba retrieval) or score MLQA predictions")
    sub = p.add_subparsers(metavar="TASK", required=True)
    add_mlqa_score_command(sub)
    add_xtreme_score_command(sub)
    t = sub.add_parser(
        "tatoeba",
        help="bitext retrieval top-1 accuracy, both directions, at one layer or all",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Tatoeba retrieval as XTREME scores it: mean-pooled hidden states (non-padding tokens,\n"
            "<s> and </s> included), cosine nearest neighbour, top-1 accuracy xx→en and en→xx.\n"
            "--layer is a Hugging Face hidden_states index (0 = embeddings); XTREME's layer n is n+1\n"
            "(its default 7 is --layer 8). Without --layer, the rule every command uses: the contrast layer\n"
            "the model records (infoxlm_contrast_layer in config.json, a run's contrast.layer; the layer a\n"
            "sentence-transformers export pools), else the paper's protocol (\"following XTREME, the seventh\n"
            "Transformer layer\"): hidden_states 8 of a 12-layer model and 14 of a 24-layer one (the layers\n"
            "XTREME's run_tatoeba.sh uses), else the middle layer. The JSON states \"layer\" and\n"
            "\"layer_rule\". With --layer all, every layer is scored, the table shows that default layer\n"
            "(never the one best on the test data), and a PNG of the layer-wise curve is written beside\n"
            "OUT.json. --model is a Hugging Face directory, a sentence-transformers export or a run\n"
            "directory of `infoxlm pretrain` (its latest checkpoint, or --step N).\n\n"
            "examples:\n"
            "  infoxlm eval tatoeba --model my-model --data tatoeba/ --langs paper14 --layer 8 --output t.json\n"
            "  infoxlm eval tatoeba --model my-model --data hf:xtreme --langs xtreme36 --layer all --output t.json"
        ),
    )
    add_model_arguments(t)
    t.add_argument("--data", required=True, help="directory of LASER files tatoeba.xxx-eng.{xxx,eng}, or hf:xtreme")
    t.add_argument("--langs", nargs="+", default=None, help="codes (de or deu) or presets paper14, xtreme36 (default: all in --data)")
    t.add_argument("--layer", default=None, help="hidden_states index, or 'all' (default: XTREME's layer, see above)")
    t.add_argument("--pooling", choices=["mean", "cls"], default=None,
                   help="default: what a sentence-transformers export records, else mean (XTREME's)")
    t.add_argument("--batch-size", type=positive_int, default=64, help="sentences per batch (default: 64)")
    t.add_argument("--device", default=None, help="cpu, cuda … (default: cuda if available)")
    t.add_argument("--output", required=True, type=Path, help="JSON file to write")
    t.add_argument("--no-progress", action="store_true")
    t.set_defaults(func=run_eval_tatoeba)


def run_eval_tatoeba(args: argparse.Namespace) -> int:
    from ..train.model_source import open_model
    from .tatoeba import resolve_languages

    # The outputs, --layer and the data are checked before the model is opened (a run's
    # checkpoint is read then), the layer against the model's depth before any weight is loaded.
    check_output_file(args.output)
    if args.layer == "all":
        check_output_file(args.output.with_suffix(".png"))
        requested = "all"
    else:
        try:
            requested = None if args.layer is None else int(args.layer)
        except ValueError:
            raise InfoXLMError(f"--layer {args.layer!r}: expected a hidden_states index (an integer) or 'all'") from None
    languages = resolve_languages(args.langs, args.data)
    with open_model(args.model, args.step) as model:
        return _eval_tatoeba(args, model, languages, requested)


def _eval_tatoeba(args: argparse.Namespace, model: OpenedModel, languages: list[str], requested: int | str | None) -> int:
    from ..embedding import load_for_inference
    from .tatoeba import evaluate_tatoeba

    pooling = model.pooling(args.pooling)
    if requested == "all":
        rule_layer, rule = model.default_layer()
        layers = list(range(model.num_layers + 1))
    else:
        rule_layer, rule = model.layer(requested)
        layers = [rule_layer]
    encoder, tokenizer = load_for_inference(model, args.device)
    result = evaluate_tatoeba(
        encoder, tokenizer, args.data, languages, layers,
        pooling=pooling, batch_size=args.batch_size, progress=not args.no_progress,
    )
    if args.layer == "all":
        png = args.output.with_suffix(".png")
        out = {"pooling": pooling, "layer": rule_layer, "layer_rule": rule,
               "layers": {str(k): v for k, v in result["layers"].items()}}
        shown = {**result["layers"][rule_layer], "layer_rule": rule}  # never the layer best on test
    else:
        out = shown = {**result["layers"][layers[0]], "layer_rule": rule}
        png = None
    with atomic_file(args.output) as tmp:  # the JSON and its plot in place together, or neither
        tmp.write_text(json.dumps(out, indent=2) + "\n")
        if png:
            with atomic_file(png) as tmp_png:
                _plot_layers(result["layers"], tmp_png, f"Tatoeba, {len(languages)} languages, {pooling} pooling")
    _print_table(shown)  # its first line says the layer and why
    if args.layer == "all":
        _print_layer_table(result["layers"], rule_layer)
    print(f"wrote {args.output}" + (f" and {png}" if png else "") + f" ({model.source.describe()})")
    _print_cut_lines(result["cut_lines"])
    return 0


def _print_cut_lines(cut_lines: dict[str, int]) -> None:
    """Lines too long to embed whole, cut before they were tokenized (what was cut lies past
    the 512 tokens an encoder keeps)."""
    chars = LongLines.for_tokens(512).max_chars
    for path, count in cut_lines.items():
        lines = "1 line" if count == 1 else f"{count:,} lines"
        print(f"{path}: {lines} longer than {chars:,} characters cut to that many before tokenizing")


def _plot_layers(layers: dict[int, dict], png: Path, title: str) -> None:
    from .plots import plot_layerwise

    plot_layerwise({"": {k: v["average"] for k, v in layers.items()}}, png, title)


def _print_table(block: dict) -> None:
    print(f"layer {block['layer']} ({block['layer_rule']}; {block['pooling']} pooling)   xx→en   en→xx      n")
    for code, s in block["languages"].items():
        print(f"  {code:<24}{s['xx2en']:>8.1f}{s['en2xx']:>8.1f}{s['n']:>7}")
    print(f"  {'average':<24}{block['average']['xx2en']:>8.1f}{block['average']['en2xx']:>8.1f}")


def _print_layer_table(layers: dict[int, dict], shown: int) -> None:
    """--layer all: every layer's average accuracy, the layer of the table above marked."""
    print(f"{'by layer, average top-1 (%)':<26}{'xx→en':>8}{'en→xx':>8}")
    for k, block in sorted(layers.items()):
        mark = "   (the table above)" if k == shown else ""
        label = f"layer {k}" + (" (embeddings)" if k == 0 else "")
        print(f"  {label:<24}{block['average']['xx2en']:>8.1f}{block['average']['en2xx']:>8.1f}{mark}")
