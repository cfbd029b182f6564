"""``infoxlm eval bucc``: BUCC 2018 bitext mining (eval/bucc.py) from the command line."""

from __future__ import annotations

import argparse
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

from ..cli_args import add_model_arguments
from ..outputs import atomic_files, check_output_dir
from ..eval.embedding_eval import LayerChoice, add_layer_arguments, print_cut_lines, print_layer_table, requested_layer

if TYPE_CHECKING:  # the parsers import no torch (cli.py)
    from ..train.model_source import OpenedModel
    from ..eval.bucc_data import BuccSplit

DESCRIPTION = """\
BUCC 2018 bitext mining as LASER scores it: find the translation pairs hidden in two comparable
corpora. The distinct sentences of each side are embedded (the layer and pooling of eval
tatoeba), candidates mined with the ratio margin (k = 4; each sentence's best candidate either
way, merged best first, each sentence used once) and mapped to ids by their text (a text twice
in a side is dropped). The threshold is the one that maximises F1 against the gold pairs of
--tune-on, per pair and layer, and is applied to the other splits: precision, recall and F1 for
a split with gold; for one without, XTREME's prediction file {split}-{xx}.tsv (xx-id<TAB>en-id).
LASER's published 92-96 F1 are F1 on training with the threshold tuned there (--tune-on
training); XTREME tunes on dev and submits test. MTEB's "BUCC" is plain cosine top-1, another
protocol.

--data holds the official files xx-en.SPLIT.xx and xx-en.SPLIT.en (lines id<TAB>sentence) and
xx-en.SPLIT.gold (lines xx-id<TAB>en-id), in one folder per pair as the tarballs unpack
(bucc2018/de-en/de-en.training.de) or flat (XTREME's layout: the splits dev and test).
--layer all scores every layer (thresholds tuned at each), prints the shown layer's table and
each layer's average F1, and writes the curve as a PNG beside OUT.json.

examples:
  infoxlm eval bucc --model my-model --data bucc2018/ --pairs de-en,fr-en --tune-on training --output b.json
  infoxlm eval bucc --model my-model --data bucc2018/ --tune-on training --layer all --output b.json"""


def add_bucc_command(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bucc", help="BUCC 2018 mining: margin-scored candidates, F1 at the threshold tuned on gold",
                       formatter_class=argparse.RawDescriptionHelpFormatter, description=DESCRIPTION)
    add_model_arguments(b)
    b.add_argument("--data", required=True, type=Path, help="folder of the BUCC 2018 files (see above)")
    b.add_argument("--pairs", nargs="+", default=None, help="de-en,fr-en … (commas or spaces; default: every pair in --data)")
    b.add_argument("--splits", nargs="+", default=None, help="splits to mine (default: every split of each pair)")
    b.add_argument("--tune-on", default=None,
                   help="split whose gold tunes the threshold (default: sample, or dev in XTREME's layout; LASER: training)")
    b.add_argument("--predictions", type=Path, default=None,
                   help="folder for the {split}-{xx}.tsv of splits without gold (default: OUT-predictions beside OUT.json)")
    add_layer_arguments(b, "hidden_states index, or 'all' (default: the layer eval tatoeba takes)")
    b.set_defaults(func=run_eval_bucc)


def _listed(values: list[str] | None) -> list[str] | None:
    """``["de-en,fr-en", "ru-en"]`` → ``["de-en", "fr-en", "ru-en"]``."""
    return [v for value in values for v in value.split(",") if v] if values else None


def run_eval_bucc(args: argparse.Namespace) -> int:
    from ..train.model_source import open_model
    from ..eval.bucc_data import default_tune_on, load_bucc

    # The outputs, --layer and every file are checked before the model is opened.
    requested = requested_layer(args)
    cut_lines: dict[str, int] = {}
    pairs = _listed(args.pairs)
    tune_on = args.tune_on or default_tune_on(args.data, pairs)
    splits = load_bucc(args.data, pairs, _listed(args.splits), tune_on, cut_lines)
    predictions = None
    if any(s.gold is None for s in splits):
        predictions = args.predictions or args.output.with_name(args.output.stem + "-predictions")
        check_output_dir(predictions, sources=[("BUCC data folder", args.data)])
    with open_model(args.model, args.step) as model:
        choice = LayerChoice.of(model, requested, args.pooling)
        _eval_bucc(args, model, splits, tune_on, choice, predictions)
    print_cut_lines(cut_lines)
    return 0


def _eval_bucc(args: argparse.Namespace, model: OpenedModel, splits: list[BuccSplit], tune_on: str,
               choice: LayerChoice, predictions: Path | None) -> None:
    from ..embedding import load_for_inference
    from ..eval.bucc import BUCC_MARGIN, evaluate_bucc

    encoder, tokenizer = load_for_inference(model, args.device)
    blocks, mined = evaluate_bucc(encoder, tokenizer, splits, choice.layers, tune_on, pooling=choice.pooling,
                                  batch_size=args.batch_size, progress=not args.no_progress)
    scored = list(blocks[choice.shown]["average"])
    curves = {"": {k: {f"{s} F1": b["average"][s]["f1"] for s in scored} for k, b in blocks.items()}}
    title = f"BUCC 2018, {len({s.pair for s in splits})} pairs, threshold tuned on {tune_on}, {choice.pooling} pooling"
    margin = {"margin": BUCC_MARGIN.margin, "k": BUCC_MARGIN.k, "strategy": BUCC_MARGIN.strategy}
    written = []
    with atomic_files(predictions) if predictions else contextlib.nullcontext() as folder:
        for (pair, split), pairs in mined[choice.shown].items():
            name = f"{split}-{pair.split('-')[0]}.tsv"  # XTREME's test-de.tsv
            (folder / name).write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
            blocks[choice.shown]["pairs"][pair][split]["predictions"] = str(predictions / name)
            written.append(str(predictions / name))
        png = choice.write(args.output, choice.result(blocks, margin=margin), choice.plot(
            curves, title, args.model, lines=[f"{s} F1" for s in scored], ylabel="F1 (%)"))
    _print_table(blocks[choice.shown], choice.rule, margin)
    if choice.every:
        print_layer_table(blocks, choice.shown, "by layer, average F1 (%)",
                          {s: lambda block, s=s: block["average"][s]["f1"] for s in scored}, width=10, digits=2)
    print(f"wrote {args.output}" + (f" and {png}" if png else "") + f" ({model.says(choice.shown, choice.rule)})")
    for path in written:
        print(f"wrote {path} (pairs mined at the threshold tuned on {tune_on})")


def _print_table(block: dict, rule: str, margin: dict) -> None:
    print(f"layer {block['layer']} ({rule}; {block['pooling']} pooling), {margin['margin']} margin k={margin['k']}, "
          f"threshold tuned on {block['tune_on']} (*)")
    print(f"  {'pair':<8}{'split':<12}{'threshold':>10}{'P':>8}{'R':>8}{'F1':>8}{'gold':>8}{'mined':>8}")
    for pair, by_split in block["pairs"].items():
        for split, e in by_split.items():
            name = split + (" *" if e["tuned_here"] else "")
            scores = "".join(f"{e[m]:>8.2f}" for m in ("precision", "recall", "f1")) if "f1" in e else f"{'–':>8}" * 3
            print(f"  {pair:<8}{name:<12}{e['threshold']:>10.4f}{scores}{e.get('gold', '–'):>8}{e['mined']:>8}")
    for split, a in block["average"].items():
        print(f"  {'average':<8}{split:<12}{'':>10}{a['precision']:>8.2f}{a['recall']:>8.2f}{a['f1']:>8.2f}")
