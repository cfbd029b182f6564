"""``infoxlm eval tatoeba``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..cli_args import positive_int
from ..errors import InfoXLMError
from ..outputs import atomic_file, check_output_file
from .mlqa_cli import add_mlqa_score_command


def add_eval_commands(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("eval", help="evaluate a model (Tatoeba retrieval) or score MLQA predictions")
    sub = p.add_subparsers(metavar="TASK", required=True)
    add_mlqa_score_command(sub)
    t = sub.add_parser(
        "tatoeba",
        help="bitext retrieval top-1 accuracy, both directions, at one layer or all",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Tatoeba retrieval as XTREME scores it: mean-pooled hidden states (non-padding tokens,\n"
            "<s> and </s> included), cosine nearest neighbour, top-1 accuracy xx→en and en→xx.\n"
            "--layer is a Hugging Face hidden_states index (0 = embeddings); XTREME's layer n is n+1\n"
            "(its default 7 is --layer 8). Without --layer, the paper's protocol (\"following XTREME, the\n"
            "seventh Transformer layer\"): hidden_states 8 of a 12-layer model and 14 of a 24-layer one (the\n"
            "layers XTREME's run_tatoeba.sh uses); for other depths the contrast layer `infoxlm export`\n"
            "recorded in config.json (infoxlm_contrast_layer), else the middle layer. The JSON states\n"
            "\"layer\" and \"layer_rule\". With --layer all, every layer is scored, the table shows that\n"
            "default layer (never the one best on the test data), and a PNG of the layer-wise curve is\n"
            "written beside OUT.json.\n\n"
            "examples:\n"
            "  infoxlm eval tatoeba --model my-model --data tatoeba/ --langs paper14 --layer 8 --output t.json\n"
            "  infoxlm eval tatoeba --model my-model --data hf:xtreme --langs xtreme36 --layer all --output t.json"
        ),
    )
    t.add_argument("--model", required=True, type=Path, help="Hugging Face XLM-R directory (weights + tokenizer)")
    t.add_argument("--data", required=True, help="directory of LASER files tatoeba.xxx-eng.{xxx,eng}, or hf:xtreme")
    t.add_argument("--langs", nargs="+", default=None, help="codes (de or deu) or presets paper14, xtreme36 (default: all in --data)")
    t.add_argument("--layer", default=None, help="hidden_states index, or 'all' (default: XTREME's layer, see above)")
    t.add_argument("--pooling", choices=["mean", "cls"], default="mean", help="default: mean")
    t.add_argument("--batch-size", type=positive_int, default=64, help="sentences per batch (default: 64)")
    t.add_argument("--device", default=None, help="cpu, cuda … (default: cuda if available)")
    t.add_argument("--output", required=True, type=Path, help="JSON file to write")
    t.add_argument("--no-progress", action="store_true")
    t.set_defaults(func=run_eval_tatoeba)


def run_eval_tatoeba(args: argparse.Namespace) -> int:
    import torch

    from ..embedding import default_device, resolve_layer
    from ..model.encoder import Encoder
    from ..model.fast_paths import FastPaths
    from ..model.hub import read_contrast_layer
    from ..tokenizer import Tokenizer
    from .tatoeba import default_layer, evaluate_tatoeba, resolve_languages

    # The outputs, the layer (against config.json) and the data are checked before any weight is read.
    check_output_file(args.output)
    png_path = args.output.with_suffix(".png")
    num_layers = resolve_layer(args.model, None)
    rule_layer, rule = default_layer(num_layers, read_contrast_layer(args.model))
    if args.layer is None:
        layers = [rule_layer]
    elif args.layer == "all":
        check_output_file(png_path)
        layers = list(range(num_layers + 1))
    else:
        try:
            layer = int(args.layer)
        except ValueError:
            raise InfoXLMError(f"--layer {args.layer!r}: expected an integer 0 … {num_layers} or 'all'") from None
        layers = [resolve_layer(args.model, layer, name="--layer")]
        rule_layer, rule = layers[0], "--layer"
    languages = resolve_languages(args.langs, args.data)
    encoder = Encoder.from_pretrained(args.model, fast_paths=FastPaths.inference())
    tokenizer = Tokenizer.from_pretrained(args.model)
    encoder.to(torch.device(args.device) if args.device else default_device())
    result = evaluate_tatoeba(
        encoder, tokenizer, args.data, languages, layers,
        pooling=args.pooling, batch_size=args.batch_size, progress=not args.no_progress,
    )
    if args.layer == "all":
        from .plots import plot_layerwise

        out = {"pooling": args.pooling, "layer": rule_layer, "layer_rule": rule,
               "layers": {str(k): v for k, v in result["layers"].items()}}
        curves = {"": {k: v["average"] for k, v in result["layers"].items()}}
        title = f"Tatoeba, {len(languages)} languages, {args.pooling} pooling"
        with atomic_file(png_path) as tmp:
            plot_layerwise(curves, tmp, title)
        png = png_path
        shown = {**result["layers"][rule_layer], "layer_rule": rule}  # never the layer best on test
    else:
        out = shown = {**result["layers"][layers[0]], "layer_rule": rule}
        png = None
    with atomic_file(args.output) as tmp:
        tmp.write_text(json.dumps(out, indent=2) + "\n")
    _print_table(shown)
    if args.layer == "all":
        _print_layer_table(result["layers"], rule_layer)
    print(f"wrote {args.output}" + (f" and {png}" if png else ""))
    return 0


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
