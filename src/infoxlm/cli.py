"""The ``infoxlm`` command.

Each subcommand lives beside the code it drives and registers itself here; only commands that
work are listed. Errors caused by the user's input (``InfoXLMError``) and failures of the file
system (``OSError``: a missing file, no permission, no space left) are printed on one line and
exit with status 1, never as a traceback; this function is the one place that does it for every
command. A reader that closes the pipe early (``infoxlm prepare inspect --json | head``) ends
the command quietly with status 141, as Unix tools end.

Building the parsers imports no torch (nor anything that does): each command's handler imports
its implementation when it runs. torch takes seconds to import, torch._dynamo seconds more, and
``--version``, every ``--help`` and a mistyped argument should answer at once.
tests/test_cli.py checks which modules they import.
"""

from __future__ import annotations

import argparse
import errno
import os
import select
import sys
from pathlib import Path

from .version import __version__
from .bench.bench_cli import add_bench_command
from .cli_args import OneLineParser, add_model_arguments, positive_int
from .corpus.prepare_cli import add_prepare_commands
from .demo.demo_cli import add_demo_command
from .errors import InfoXLMError
from .eval.eval_cli import add_eval_commands
from .eval.mine_cli import add_mine_command
from .eval.report_cli import add_report_command
from .finetune.finetune_cli import add_finetune_commands
from .outputs import atomic_file, check_output_file, full_disk_named
from .tokenizer_cli import add_tokenizer_commands
from .train.pretrain_cli import add_pretrain_commands
from .corpus.show_cli import add_show_command


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="infoxlm",
        description="Cross-lingual language-model pre-training (InfoXLM) on an XLM-R-compatible encoder.",
    )
    parser.add_argument("--version", action="version", version=f"infoxlm {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    add_tokenizer_commands(commands)
    add_show_command(add_prepare_commands(commands))
    add_pretrain_commands(commands)
    add_eval_commands(commands)
    add_mine_command(commands)
    add_finetune_commands(commands)
    add_report_command(commands)
    add_embed_command(commands)
    add_bench_command(commands)
    add_demo_command(commands)
    return parser


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

    from .corpus.long_lines import LongLines
    from .embedding import embed_layers, load_for_inference, read_sentences
    from .train.model_source import open_model

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


def describe_os_error(err: OSError) -> str:
    """One line for a failed file-system call: what failed, and on which path.

    >>> describe_os_error(OSError(errno.ENOSPC, "No space left on device", "store/mono/de"))
    'no space left on device while writing store/mono/de'
    >>> describe_os_error(FileNotFoundError(errno.ENOENT, "No such file or directory", "x.txt"))
    'x.txt: no such file or directory'
    """
    paths = [p for p in (err.filename, err.filename2) if p is not None]
    where = " → ".join(os.fsdecode(p) for p in paths)
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return f"no space left on device while writing {where}" if where else "no space left on device"
    reason = (err.strerror or str(err) or type(err).__name__).rstrip(".")
    reason = reason[:1].lower() + reason[1:]
    return f"{where}: {reason}" if where else reason


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        status = args.func(args)
        sys.stdout.flush()  # a reader that left shows here, not in the interpreter's exit
        return status
    except BrokenPipeError as err:
        if not stdout_reader_left():
            print(f"infoxlm: error: {describe_os_error(err)}", file=sys.stderr)
            return 1
        return end_quietly_on_closed_pipe()
    except InfoXLMError as err:
        print(f"infoxlm: error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        print(f"infoxlm: error: {describe_os_error(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("infoxlm: interrupted", file=sys.stderr)
        return 130


SIGPIPE_STATUS = 128 + 13  # what a shell reports for a tool killed by SIGPIPE (`yes | head`)


def stdout_reader_left() -> bool:
    """Whether standard output is a pipe whose reading end is closed (``infoxlm … | head``
    after head has exited): poll reports POLLERR on the writing end of such a pipe."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)  # POLLERR is reported whatever the mask
        return any(event & select.POLLERR for _, event in poller.poll(0))
    except (AttributeError, ValueError, OSError):  # no poll (Windows), stdout closed or replaced
        return True


def end_quietly_on_closed_pipe() -> int:
    """End as Unix tools do when their reader has gone: no message, status 141. Standard
    output is pointed at /dev/null first, so that the interpreter's own flush at exit does not
    fail again and print "Exception ignored … BrokenPipeError" (as the Python docs advise)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, ValueError, OSError):
        pass
    return SIGPIPE_STATUS


if __name__ == "__main__":
    sys.exit(main())
