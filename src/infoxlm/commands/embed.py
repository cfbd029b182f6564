"""``infoxlm embed``: sentences, one per line, to a .npy matrix of their embeddings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cli_args import add_model_arguments, positive_int
from ..errors import InfoXLMError
from ..outputs import atomic_file, check_output_file, full_disk_named


def add_embed_command(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "embed",
        help="embed sentences (one per line) into a .npy matrix",
        description=(
            "Read sentences, one per line, and write their embeddings as a float32 NumPy array "
            "(N, d) in .npy format, row i for line i. Mean pooling averages every non-padding "
            "token, <s> and </s> included. --model is a Hugging Face directory, a sentence-transformers "
            "export or a run directory; the closing line on stderr says the layer used and why. "
            "Example: infoxlm embed --model runs/m --layer 8 < sentences.txt > vectors.npy"
        ),
    )
    add_model_arguments(p)
    p.add_argument(
        "--layer",
        type=int,
        default=None,
        help="hidden_states index: 0 = embedding output, L = last layer (default: the contrast layer "
        "the model records, else the paper's: 8 of 12, 14 of 24, else the middle layer)",
    )
    p.add_argument("--pooling", choices=["mean", "cls"], default=None,
                   help="default: what a sentence-transformers export records, else mean")
    p.add_argument("--batch-size", type=positive_int, default=32, help="sentences per batch (default: 32)")
    p.add_argument("--max-length", type=positive_int, default=512, help="tokens per sentence, specials included (default: 512)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 … (default: cuda if available)")
    p.add_argument("--input", type=Path, default=None, help="sentences file (default: standard input)")
    p.add_argument("--output", type=Path, default=None, help=".npy file to write (default: standard output)")
    p.set_defaults(func=run_embed)


def run_embed(args: argparse.Namespace) -> int:
    import numpy as np

    from ..corpus.long_lines import LongLines
    from ..embedding import embed_layers, load_for_inference, read_sentences
    from ..train.model_source import open_model

    # Everything that can be checked is checked before the weights are loaded.
    if args.output is not None:
        check_output_file(args.output)
    elif sys.stdout.isatty():
        raise InfoXLMError("refusing to write binary .npy data to a terminal; redirect stdout or use --output")
    with open_model(args.model, args.step) as model:
        layer, rule = model.layer(args.layer)
        pooling = model.pooling(args.pooling)
        sentences, cut = read_sentences(args.input, args.max_length)
        encoder, tokenizer = load_for_inference(model, args.device)
    vectors = embed_layers(
        encoder,
        tokenizer,
        sentences,
        [layer],
        pooling=pooling,
        batch_size=args.batch_size,
        max_length=args.max_length,
        progress=True,
    )[layer]
    if args.output is None:
        with full_disk_named("standard output"):  # redirected to a file on a full disk
            np.save(sys.stdout.buffer, vectors)
            sys.stdout.buffer.flush()
    else:
        with atomic_file(args.output) as tmp, open(tmp, "wb") as f:
            np.save(f, vectors)
    chars = LongLines.for_tokens(args.max_length).max_chars
    lines = "1 line" if cut == 1 else f"{cut:,} lines"
    cut_note = f"; {lines} longer than {chars:,} characters cut to that many before tokenizing" if cut else ""
    print(f"embedded {vectors.shape[0]} sentences → {vectors.shape[1]} dimensions: {model.says(layer, rule, pooling)}"
          + cut_note, file=sys.stderr)
    return 0
