"""``infoxlm eval xsim``: the xsim error rate (eval/xsim.py) from the command line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..cli_args import add_model_arguments, positive_int
from ..errors import InfoXLMError
from ..eval.embedding_eval import LayerChoice, add_layer_arguments, print_cut_lines, print_layer_table, requested_layer

if TYPE_CHECKING:  # the parsers import no torch (cli.py)
    from ..train.model_source import OpenedModel
    from ..eval.xsim import AlignedText

DESCRIPTION = """\
xsim, the similarity-search error rate of LASER's source/xsim.py that LASER3, SONAR and MEXMA
report on Flores-200: for line-aligned files, the share (%) of sentences whose best neighbour
in the other file by margin (cosine k-NN both ways, ratio margin, k = 4) is not their
translation (a line of the same text counts as found, as LASER's eval.py compares texts).
Lower is better. Both directions are scored: xx→tgt (what LASER prints) and tgt→xx.

On Flores-200 as shipped (--data flores200_dataset/, files {dev,devtest}/{lang}.{split}, codes
such as deu_Latn) each language of --langs (default: all of the split) is scored against
--target (default eng_Latn) and the rates are averaged; on two files of one's own, --src and
--tgt. The layer and pooling are those of eval tatoeba; --layer all scores every layer and
writes the curve as a PNG beside OUT.json.

examples:
  infoxlm eval xsim --model my-model --data flores200_dataset/ --split devtest --langs deu_Latn,fra_Latn --output x.json
  infoxlm eval xsim --model my-model --src de.txt --tgt en.txt --output x.json"""


def add_xsim_command(sub: argparse._SubParsersAction) -> None:
    x = sub.add_parser("xsim", help="xsim error rate on Flores-200 or two aligned files, both directions",
                       formatter_class=argparse.RawDescriptionHelpFormatter, description=DESCRIPTION)
    add_model_arguments(x)
    x.add_argument("--data", type=Path, default=None, help="the Flores-200 folder (flores200_dataset/)")
    x.add_argument("--split", default="devtest", help="dev or devtest (default: devtest)")
    x.add_argument("--langs", nargs="+", default=None, help="deu_Latn,fra_Latn … (commas or spaces; default: every language)")
    x.add_argument("--target", default=None, help="the language they are scored against (default: eng_Latn)")
    x.add_argument("--src", type=Path, default=None, help="instead of --data: a file of one sentence a line …")
    x.add_argument("--tgt", type=Path, default=None, help="… and its translation, line by line")
    x.add_argument("--margin", choices=["ratio", "distance", "absolute"], default="ratio", help="default: ratio (LASER's)")
    x.add_argument("-k", type=positive_int, default=4, help="neighbours that set a sentence's margin (default: 4)")
    add_layer_arguments(x, "hidden_states index, or 'all' (default: the layer eval tatoeba takes)")
    x.set_defaults(func=run_eval_xsim)


def _inputs(args: argparse.Namespace, cut_lines: dict[str, int]) -> tuple[AlignedText, list[AlignedText], str]:
    """(target, sources, what they are) from --data or from --src/--tgt."""
    from ..eval.xsim import ENGLISH, check_aligned, load_flores, read_aligned

    files = args.src is not None or args.tgt is not None
    if files == (args.data is not None):
        raise InfoXLMError("expected either --data (Flores-200) or --src and --tgt (two line-aligned files)")
    if files:
        if args.src is None or args.tgt is None:
            raise InfoXLMError(f"--{'tgt' if args.tgt is None else 'src'} missing; --src and --tgt name the two files")
        if args.langs or args.target:
            raise InfoXLMError("--langs and --target choose Flores-200 languages; with --src and --tgt leave them out")
        src, tgt = read_aligned(args.src, cut_lines=cut_lines), read_aligned(args.tgt, cut_lines=cut_lines)
        check_aligned([src, tgt])
        return tgt, [src], f"{args.src} and {args.tgt}"
    langs = [v for value in args.langs for v in value.split(",") if v] if args.langs else None
    target, sources = load_flores(args.data, args.split, langs, args.target or ENGLISH, cut_lines)
    return target, sources, f"Flores-200 {args.split}"


def run_eval_xsim(args: argparse.Namespace) -> int:
    from ..train.model_source import open_model

    # The outputs, --layer and every file are checked before the model is opened.
    requested = requested_layer(args)
    cut_lines: dict[str, int] = {}
    target, sources, what = _inputs(args, cut_lines)
    with open_model(args.model, args.step) as model:
        _eval_xsim(args, model, target, sources, what, LayerChoice.of(model, requested, args.pooling))
    print_cut_lines(cut_lines)
    return 0


def _eval_xsim(args: argparse.Namespace, model: OpenedModel, target: AlignedText, sources: list[AlignedText],
               what: str, choice: LayerChoice) -> None:
    from ..embedding import load_for_inference
    from ..eval.margin import MarginOptions
    from ..eval.xsim import evaluate_xsim

    options = MarginOptions(k=args.k, margin=args.margin)
    encoder, tokenizer = load_for_inference(model, args.device)
    blocks = evaluate_xsim(encoder, tokenizer, target, sources, choice.layers, options=options,
                           pooling=choice.pooling, batch_size=args.batch_size, progress=not args.no_progress)
    curves = {"": {k: b["average"] for k, b in blocks.items()}}
    title = f"xsim, {what}, {len(sources)} vs {target.name}, {choice.pooling} pooling (lower is better)"
    result = choice.result(blocks, data=what, margin={"margin": options.margin, "k": options.k})
    png = choice.write(args.output, result, choice.plot(
        curves, title, args.model, lines=["xx2tgt", "tgt2xx"], ylabel="xsim error rate (%)"))
    _print_table(blocks[choice.shown], choice.rule, what, options)
    if choice.every:
        print_layer_table(blocks, choice.shown, "by layer, average xsim (%)",
                          {arrow: lambda block, d=d: block["average"][d] for arrow, d in (("xx→tgt", "xx2tgt"), ("tgt→xx", "tgt2xx"))},
                          width=10, digits=2)
    print(f"wrote {args.output}" + (f" and {png}" if png else "") + f" ({model.says(choice.shown, choice.rule)})")


def _print_table(block: dict, rule: str, what: str, options) -> None:
    print(f"xsim error rate (%), {what}, layer {block['layer']} ({rule}; {block['pooling']} pooling), "
          f"{options.margin} margin k={options.k}; lower is better")
    target = block["target"][:12]
    print(f"  {'source':<24}{'→ ' + target:>16}{target + ' →':>16}{'n':>8}")
    for source, s in block["languages"].items():
        print(f"  {source[-24:]:<24}{s['xx2tgt']:>16.2f}{s['tgt2xx']:>16.2f}{s['n']:>8}")
    a = block["average"]
    print(f"  {'average':<24}{a['xx2tgt']:>16.2f}{a['tgt2xx']:>16.2f}   (both: {a['both']:.2f})")
