"""``infoxlm eval``: tatoeba here; bucc, xsim and mlqa-score from their own modules."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..cli_args import add_model_arguments
from ..errors import InfoXLMError
from .eval_bucc import add_bucc_command
from ..eval.embedding_eval import LayerChoice, add_layer_arguments, print_cut_lines, print_layer_table, requested_layer
from .eval_mlqa import add_mlqa_score_command
from .eval_xsim import add_xsim_command
from .eval_xtreme_score import add_xtreme_score_command

if TYPE_CHECKING:  # the parsers import no torch (cli.py)
    from ..train.model_source import OpenedModel


def add_eval_commands(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("eval", help="evaluate a model (Tatoeba retrieval, BUCC and Flores mining) or score predictions (MLQA, XTREME)")
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
            "  infoxlm eval tatoeba --model my-model --data hf:xtreme --langs xtreme36 --layer all --output t.json\n"
            "  infoxlm eval tatoeba --model my-model --data pairs.tsv --langs de --output t.json\n"
            "  infoxlm eval tatoeba --model my-model --data pairs.jsonl --src-field de --tgt-field en --output t.json\n"
            "  infoxlm eval tatoeba --model my-model --src de.txt --tgt en.txt --output t.json"
        ),
    )
    add_model_arguments(t)
    t.add_argument("--data", default=None,
                   help="directory of LASER files tatoeba.xxx-eng.{xxx,eng}, hf:xtreme, a TSV file of xx<TAB>en lines, "
                        "or records (JSON Lines, Parquet) with the two sides in --src-field and --tgt-field")
    t.add_argument("--src", type=Path, default=None, help="with --tgt: your own pairs, line i of SRC translating line i of TGT (English)")
    t.add_argument("--tgt", type=Path, default=None, help="the English side of --src")
    t.add_argument("--src-field", metavar="NAME", default=None,
                   help="records in --data: the field of the xx side (default: the --langs code as given, else the file's name, e.g. de)")
    t.add_argument("--tgt-field", metavar="NAME", default="en", help="records in --data: the field of the English side (default: en)")
    t.add_argument("--langs", nargs="+", default=None,
                   help="codes (de or deu) or the language sets paper14, xtreme36 (default: all in --data; for a TSV or --src, "
                        "the language of its file name)")
    add_layer_arguments(t, "hidden_states index, or 'all' (default: XTREME's layer, see above)")
    t.set_defaults(func=run_eval_tatoeba)
    add_bucc_command(sub)
    add_xsim_command(sub)


def run_eval_tatoeba(args: argparse.Namespace) -> int:
    from ..train.model_source import open_model
    from ..eval.tatoeba import resolve_languages

    # The outputs, --layer and the data are checked before the model is opened (a run's
    # checkpoint is read then), the layer against the model's depth before any weight is loaded.
    requested = requested_layer(args)
    if (args.src is None) != (args.tgt is None) or (args.src is not None) == (args.data is not None):
        raise InfoXLMError("eval tatoeba: give --data, or --src and --tgt (two line-aligned files)")
    if args.src is not None:
        args.data = (args.src, args.tgt)
    args.data = _records(args)
    languages = resolve_languages(args.langs, args.data)
    with open_model(args.model, args.step) as model:
        return _eval_tatoeba(args, model, languages, LayerChoice.of(model, requested, args.pooling))


def _records(args: argparse.Namespace):
    """--data as ``RecordPairs`` where it names a JSON Lines or Parquet file; as it is otherwise."""
    from ..corpus.inputs import input_source
    from ..eval.tatoeba import RecordPairs

    if not isinstance(args.data, str) or args.data.startswith("hf:") or not Path(args.data).is_file():
        return args.data
    if not input_source(args.data, "--data").has_records:
        return args.data
    src_field = args.src_field or (args.langs[0] if args.langs else Path(args.data).name.split(".")[0])
    return RecordPairs(Path(args.data), src_field, args.tgt_field)


def _eval_tatoeba(args: argparse.Namespace, model: OpenedModel, languages: list[str], choice: LayerChoice) -> int:
    from ..embedding import load_for_inference
    from ..eval.tatoeba import evaluate_tatoeba

    encoder, tokenizer = load_for_inference(model, args.device)
    result = evaluate_tatoeba(
        encoder, tokenizer, args.data, languages, choice.layers,
        pooling=choice.pooling, batch_size=args.batch_size, progress=not args.no_progress,
    )
    layers = result["layers"]
    title = f"Tatoeba, {len(languages)} languages, {choice.pooling} pooling"
    png = choice.write(args.output, choice.result(layers),
                       choice.plot({"": {k: v["average"] for k, v in layers.items()}}, title, args.model))
    _print_table({**layers[choice.shown], "layer_rule": choice.rule})  # never the layer best on test
    if choice.every:
        print_layer_table(layers, choice.shown, "by layer, average top-1 (%)",
                          {arrow: lambda block, d=d: block["average"][d] for arrow, d in (("xx→en", "xx2en"), ("en→xx", "en2xx"))})
    print(f"wrote {args.output}" + (f" and {png}" if png else "") + f" ({model.source.describe()})")
    print_cut_lines(result["cut_lines"])
    return 0


def _print_table(block: dict) -> None:
    print(f"layer {block['layer']} ({block['layer_rule']}; {block['pooling']} pooling)   xx→en   en→xx      n")
    for code, s in block["languages"].items():
        print(f"  {code:<24}{s['xx2en']:>8.1f}{s['en2xx']:>8.1f}{s['n']:>7}")
    print(f"  {'average':<24}{block['average']['xx2en']:>8.1f}{block['average']['en2xx']:>8.1f}")
