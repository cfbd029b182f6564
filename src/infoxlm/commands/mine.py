"""``infoxlm mine``: translation pairs mined from two monolingual corpora with a model."""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from pathlib import Path

from ..cli_args import add_model_arguments, positive_int

# Written out here because eval/margin.py and eval/mining.py import torch, which `--help` must
# not wait for (tests/commands/test_mine.py checks these against them).
MARGIN_NAMES = ("ratio", "distance", "absolute")
STRATEGY_NAMES = ("max", "fwd", "bwd", "intersect")
BACKEND_NAMES = ("auto", "torch", "faiss")
DEFAULT_THRESHOLD = 1.06

_DESCRIPTION = """\
Mine translation pairs from two monolingual corpora, as LASER's mine_bitexts.py --mode mine does:
each side's distinct sentences are embedded once, every sentence's k nearest neighbours are found
both ways by cosine, a candidate pair scores cos(x, y) / ((mean_k(x) + mean_k(y)) / 2) (the ratio
margin), each sentence's best candidate in either direction is taken best score first, each
sentence used once (--retrieval max), and the pairs scoring above --threshold are written as
score<TAB>source<TAB>target, best first. For the same vectors these are the lines of LASER's
mine_bitexts.py --mode mine --retrieval max --margin ratio -k 4 --unify --threshold T.

Inputs: text files, one sentence a line (.txt, or compressed: .gz .xz .bz2 .zst), JSON Lines
(.jsonl, compressed too) with the sentence in --field (default: text), Parquet files or a saved
dataset. Blank lines are skipped; a line that repeats an earlier one is mined once.

--threshold: 1.06 (the default) is where NLLB-style pipelines start; 0 keeps every candidate with
a positive margin (LASER's default). Layer and pooling follow the rule every command shares.

Vectors are written to --embeddings (default: OUTPUT.embeddings/) as they are made, float16 unless
--dtype float32; a run stopped (Ctrl-C, a lost machine) resumes from them when run again with the
same inputs, model and layer, and writes the same file. They are removed once the TSV is written,
unless --keep-embeddings (a later run with another --threshold or --k then embeds nothing).

examples:
  infoxlm mine --model my-model --src de.txt --tgt en.txt --output mined.tsv
  infoxlm mine --model runs/base --src cc.de.jsonl.zst --tgt cc.en.jsonl.zst --field text --threshold 1.1 --output de-en.tsv
"""


def finite_float(text: str) -> float:
    """A finite number (a margin threshold may be 0 or negative)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def add_mine_command(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("mine", help="mine translation pairs from two monolingual corpora (LASER's margin mining)",
                            description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(p)
    p.add_argument("--src", required=True, help="source-language corpus (text, .gz/.zst, JSON Lines, Parquet)")
    p.add_argument("--tgt", required=True, help="target-language corpus (the same formats)")
    p.add_argument("--field", default=None, help="the text field of JSON Lines / Parquet / dataset records (default: text)")
    p.add_argument("--output", required=True, type=Path, help="TSV to write: score<TAB>source<TAB>target, best first")
    p.add_argument("--threshold", type=finite_float, default=DEFAULT_THRESHOLD,
                   help=f"keep pairs scoring above this (default: {DEFAULT_THRESHOLD}; 0: every candidate, LASER's default)")
    p.add_argument("-k", "--neighbourhood", dest="k", type=positive_int, default=4, help="neighbours each way (default: 4)")
    p.add_argument("--margin", choices=MARGIN_NAMES, default="ratio", help="candidate score (default: ratio)")
    p.add_argument("--retrieval", choices=STRATEGY_NAMES, default="max",
                   help="which candidates: max (better direction, one-to-one; default), fwd, bwd, intersect")
    p.add_argument("--layer", type=int, default=None, help="hidden_states index (default: the rule every command shares)")
    p.add_argument("--pooling", choices=["mean", "cls"], default=None,
                   help="default: what a sentence-transformers export records, else mean")
    p.add_argument("--batch-size", type=positive_int, default=64, help="sentences per batch (default: 64)")
    p.add_argument("--max-length", type=positive_int, default=512, help="tokens per sentence, specials included (default: 512)")
    p.add_argument("--device", default=None, help="cpu, cuda … for embedding and search (default: cuda if available)")
    p.add_argument("--backend", choices=BACKEND_NAMES, default="auto",
                   help="k-NN search: faiss on the CPU when installed (auto, the default), torch, faiss")
    p.add_argument("--embeddings", type=Path, default=None, help="directory for the vectors (default: OUTPUT.embeddings)")
    p.add_argument("--keep-embeddings", action="store_true", help="keep the vectors after the TSV is written, for reuse")
    p.add_argument("--dtype", choices=["float16", "float32"], default="float16", help="of the vectors on disk (default: float16)")
    p.add_argument("--save-every", type=positive_int, default=10_000,
                   help="sentences embedded between two saves (default: 10000); a resumed run needs the same")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run_mine)


def run_mine(args: argparse.Namespace) -> int:
    from ..outputs import check_output_file
    from ..train.model_source import open_model
    from ..eval.mining_text import mining_inputs, read_side
    from ..eval.saved_embeddings import check_embeddings_dir

    # Everything that can be checked is checked before a sentence is read or a weight loaded.
    check_output_file(args.output)
    embeddings = args.embeddings or args.output.with_name(args.output.name + ".embeddings")
    check_embeddings_dir(embeddings)
    src, tgt, fields = mining_inputs(args.src, args.tgt, args.field)

    with open_model(args.model, args.step) as model:
        layer, rule = model.layer(args.layer)
        pooling = model.pooling(args.pooling)
        progress = not args.no_progress
        sides = [read_side(src, fields, "--src", args.max_length, progress),
                 read_side(tgt, fields, "--tgt", args.max_length, progress)]
        vectors = _embedded(args, model, sides, layer, pooling, embeddings)
    return _mine(args, sides, vectors, embeddings, model.says(layer, rule, pooling))


def _options(args: argparse.Namespace):
    from ..eval.margin import MarginOptions
    from ..eval.mining import MineOptions

    margin = MarginOptions(k=args.k, margin=args.margin, strategy=args.retrieval, backend=args.backend)
    return MineOptions(threshold=args.threshold, margin=margin, batch_size=args.batch_size, max_length=args.max_length,
                       piece=args.save_every, dtype=args.dtype)


def _embedded(args, model, sides, layer: int, pooling: str, directory: Path) -> list:
    """Each side's vectors, made (or found) in ``directory``."""
    from ..embedding import load_for_inference
    from ..eval.mining import embed_side, model_identity
    from ..eval.saved_embeddings import SavedEmbeddings

    options = _options(args)
    identity = {"model": model_identity(model), "layer": layer, "pooling": pooling, "max_length": args.max_length}
    encoder = tokenizer = None
    saved = []
    for name, side in zip(("src", "tgt"), sides):
        found = SavedEmbeddings.open(directory, name, {**identity, "digest": side.digest}, rows=len(side.texts),
                                     dim=model.config.hidden_size, piece=options.piece, dtype=options.dtype)
        _say_found(found, side.label, directory)
        if not found.complete:
            if encoder is None:
                encoder, tokenizer = load_for_inference(model, args.device)
            try:
                embed_side(encoder, tokenizer, side.texts, found, layer, pooling, options,
                           progress=not args.no_progress, desc=f"embedding {side.label}")
            except KeyboardInterrupt:
                print(f"infoxlm mine: stopped with {found.done:,} of {found.rows:,} sentences of {side.label} embedded "
                      f"in {directory}; the same command resumes there", file=sys.stderr)
                raise
        saved.append(found)
    return saved


def _say_found(found, label: str, directory: Path) -> None:
    if found.fresh_reason:
        print(f"embedding {label} afresh: the vectors in {directory} are not its ({found.fresh_reason})", file=sys.stderr)
    elif found.complete:
        print(f"{label}: all {found.rows:,} sentences' vectors found in {directory}", file=sys.stderr)
    elif found.done:
        print(f"{label}: resuming after {found.done:,} of {found.rows:,} sentences embedded in {directory}", file=sys.stderr)


def _mine(args, sides, saved, embeddings: Path, says: str) -> int:
    import torch

    from ..embedding import default_device
    from ..eval.mining import mine_vectors, write_pairs

    device = torch.device(args.device) if args.device is not None else default_device()
    src, tgt = (s.load(device) for s in saved)
    pairs = mine_vectors(src, tgt, _options(args), progress=not args.no_progress)
    write_pairs(args.output, pairs, sides[0].texts, sides[1].texts)
    if not args.keep_embeddings:
        shutil.rmtree(embeddings, ignore_errors=True)
    shape = f"{len(sides[0].texts):,} × {len(sides[1].texts):,} distinct sentences"
    print(f"mined {len(pairs):,} pairs scoring above {args.threshold:g} from {shape} → {args.output} ({says})")
    for side in sides:
        counts = ((side.blank, "blank {} skipped"), (side.repeated, "repeated {} mined once"),
                  (side.cut, f"{{}} cut to what {args.max_length} tokens reach"))
        notes = [f"{n:,} " + what.format("line" if n == 1 else "lines") for n, what in counts if n]
        if notes:
            print(f"  {side.label}: {', '.join(notes)}")
    if args.keep_embeddings:
        print(f"  vectors kept in {embeddings}")
    return 0
