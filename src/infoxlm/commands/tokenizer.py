"""``infoxlm tokenizer …`` sub-commands.

The main command line (``infoxlm.cli``) owns the top-level parser and calls
:func:`add_tokenizer_commands` with its sub-parsers object; every command registered here
stores its handler as ``func`` (``args.func(args)`` returns the exit code). Bad input is
raised as :class:`~infoxlm.errors.TokenizerError`, which the main CLI prints on one line.

Example::

    infoxlm tokenizer train --input data/en.txt data/de.txt --lang-input sw=extra/swahili.txt.gz \\
        --output tok/ --vocab-size 64000 --alpha 0.3
"""

from __future__ import annotations

import argparse
import sys

from infoxlm.errors import TokenizerError

__all__ = ["add_tokenizer_commands", "run_tokenizer_train"]

_TRAIN_DESCRIPTION = """\
Learn a new XLM-R-style Unigram vocabulary from raw UTF-8 text (one sentence per line;
.gz/.xz/.bz2/.zst files are read directly) and write tokenizer.json plus transformers configs to
--output. JSON Lines (.jsonl), Parquet and datasets save_to_disk inputs are read as records, as
`infoxlm prepare` reads them: the text is each record's --field. Language l is sampled with probability p_l ∝ (n_l/n)^alpha, n_l being its number
of non-empty lines; the sample has min(--max-sentences, n) lines, of which language l gets
round(p_l * sample), repeating lines of languages that have fewer."""

_TRAIN_EPILOG = """\
examples:
  infoxlm tokenizer train --input en.txt de.txt sw.txt --output tok/ --vocab-size 32000
  infoxlm tokenizer train --lang-input en=wiki.en.gz en=news.en.gz fr=corpus/fr.txt \\
      --output tok/ --alpha 0.5 --max-sentences 2000000
  infoxlm tokenizer train --lang-input ru=mono.ru.jsonl sw=sw_parquet/ --field text --output tok/

The language of an --input file is read from its name: drop .gz/.xz/.bz2/.zst, then .txt,
.jsonl or .parquet, and take the part after the last dot (de.txt, train.de.jsonl,
wiki.zh-Hans.txt.gz).
Use --lang-input LANG=FILE for files named otherwise."""


def add_tokenizer_commands(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``tokenizer train`` on ``subparsers``; returns the ``tokenizer`` parser."""
    tokenizer = subparsers.add_parser(
        "tokenizer",
        help="train XLM-R-compatible tokenizers",
        description="Work with XLM-R-compatible tokenizers.",
    )
    commands = tokenizer.add_subparsers(dest="tokenizer_command", metavar="COMMAND", required=True)

    train = commands.add_parser(
        "train",
        help="learn a Unigram vocabulary from multilingual text",
        description=_TRAIN_DESCRIPTION,
        epilog=_TRAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_input_arguments(train)
    _add_vocabulary_arguments(train)
    train.add_argument("--no-progress", action="store_true", help="hide the trainer's log")
    # The main CLI dispatches with args.func(args) and turns the return value into the exit code.
    train.set_defaults(func=run_tokenizer_train)
    return tokenizer


def _add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the text comes from: --input, --lang-input, --field and --output."""
    # action="extend" lets both flags be repeated and mixed: --input a.txt --input b.txt.
    parser.add_argument(
        "--input",
        nargs="+",
        action="extend",
        default=[],
        metavar="FILE",
        help="text files whose name gives the language (de.txt, train.de.txt, de.txt.gz)",
    )
    parser.add_argument(
        "--lang-input",
        nargs="+",
        action="extend",
        default=[],
        metavar="LANG=FILE",
        help="text files with their language given explicitly, e.g. sw=extra/swahili.txt",
    )
    parser.add_argument(
        "--field",
        default=None,
        metavar="NAME",
        help="the field of JSON Lines, Parquet and save_to_disk records that holds the text (default: text)",
    )
    parser.add_argument("--output", required=True, metavar="DIR", help="directory to write the tokenizer to")


def _add_vocabulary_arguments(parser: argparse.ArgumentParser) -> None:
    """What is learnt from it: the size, the language sample and the trainer's threads."""
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=250_002,
        metavar="N",
        help="total number of ids incl. <s> <pad> </s> <unk> <mask> (default: 250002, XLM-R's; "
        "tiny corpora yield fewer)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.3,
        help="language sampling exponent in (0, 1]; smaller favours small languages (default: 0.3)",
    )
    parser.add_argument(
        "--max-sentences",
        type=int,
        default=10_000_000,
        metavar="N",
        help="lines in the training sample, across all languages (default: 10000000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed for the sample (default: 0)")
    parser.add_argument(
        "--languages",
        nargs="+",
        default=None,
        metavar="LANG",
        help="use only these languages of the inputs (default: all)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        metavar="N",
        help="trainer threads (default: 1; use more for samples of millions of lines). The "
        "vocabulary depends on the sample and on N: the same inputs, seed and N give the same "
        "file on any machine",
    )


def _collect_inputs(inputs: list[str], lang_inputs: list[str]) -> dict[str, list[str]]:
    """Merge ``--input`` and ``--lang-input`` into ``{language: [paths]}``."""
    from infoxlm.tokenizer_training import language_from_filename

    files: dict[str, list[str]] = {}  # as typed: "hf:NAME" is a dataset, not a path
    # Both flags may name the same language; its files are then simply pooled.
    for name in inputs:
        files.setdefault(language_from_filename(name), []).append(name)
    for item in lang_inputs:
        lang, sep, name = item.partition("=")
        if not sep or not lang.strip() or not name:
            raise TokenizerError(f"--lang-input {item!r} is invalid; expected LANG=FILE, e.g. sw=swahili.txt")
        files.setdefault(lang.strip(), []).append(name)
    if not files:
        raise TokenizerError(
            "no training text given; expected --input FILE ... or --lang-input LANG=FILE ..."
        )
    return files


def run_tokenizer_train(args: argparse.Namespace) -> int:
    """Handler of ``tokenizer train``: train, save, print a one-line summary, return 0."""
    from ..outputs import check_output_dir
    from ..tokenizer_training import train_tokenizer

    # The output may be a new or empty directory, or one holding a tokenizer to replace.
    check_output_dir(args.output, flag=None, written_by_us=lambda d: any(
        (d / name).is_file() for name in ("tokenizer.json", "sentencepiece.bpe.model")))
    files = _collect_inputs(args.input, args.lang_input)
    # Validation (files, alpha, sizes) lives in train_tokenizer so API and CLI agree.
    tokenizer = train_tokenizer(
        files,
        args.output,
        vocab_size=args.vocab_size,
        alpha=args.alpha,
        max_sentences=args.max_sentences,
        seed=args.seed,
        languages=args.languages,
        show_progress=not args.no_progress,
        threads=args.threads,
        field=args.field,
    )
    report = tokenizer.training_report
    assert report is not None  # train() always attaches one
    print(f"wrote {args.output}: {report.summary()}")
    for line in report.warnings():  # lines SentencePiece could not take whole
        print(line, file=sys.stderr)
    return 0
