"""``infoxlm prepare …``: turn raw text into a token store, and report on a store.

The main command line (``infoxlm.cli``) calls :func:`add_prepare_commands` with its
sub-parsers object; each command stores its handler as ``func`` (``args.func(args)``
returns the exit code). Bad input is raised as an :class:`~infoxlm.errors.InfoXLMError`,
which the command prints on one line.

Examples::

    infoxlm prepare mono --lang de --input de.txt news.de.txt.gz --tokenizer tok/ --output store/
    infoxlm prepare parallel --pair en-de --src en.txt --tgt de.txt --tokenizer tok/ --output store/
    infoxlm prepare parallel --pair en-sw --tsv en-sw.tsv.zst --tokenizer tok/ --output store/
    infoxlm prepare mono --lang de --input de.jsonl.gz wiki-de/ --field text --tokenizer tok/ --output store/
    infoxlm prepare parallel --pair en-de --input pairs.parquet --src-field en --tgt-field de ...
    infoxlm prepare parallel --pair en-de --tmx en-de.tmx.gz --tokenizer tok/ --output store/
    infoxlm prepare inspect store/ --alpha 0.7
    infoxlm prepare mono --lang de --input de.txt --shard 0/2 --tokenizer tok/ --output part0/
    infoxlm prepare merge store/ part0/ part1/
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from infoxlm.commands.prepare_engine import add_engine_options, run_on_engine
from infoxlm.corpus.merge import merge_stores
from infoxlm.corpus.prepare import DEFAULT_MAX_LINE_TOKENS, prepare_monolingual, prepare_parallel
from infoxlm.data.sampling import SAMPLING_UNITS
from infoxlm.corpus.shards import parse_shard
from infoxlm.corpus.store_report import DEFAULT_ALPHA, DEFAULT_BLOCK_SIZE, format_report, store_report

__all__ = ["add_prepare_commands", "path_or_url"]


def path_or_url(text: str) -> Path | str:
    """A local path, or an fsspec URL kept as typed (``Path`` would fold ``s3://b`` into ``s3:/b``)."""
    return text if "://" in text else Path(text)

_INPUT_HELP = """\
Input: UTF-8 text, one sentence or paragraph per line, plain or compressed (.gz, .xz,
.bz2, .zst); or records with named fields: JSON Lines (.jsonl, compressed too), Parquet (a
.parquet file, or a directory of them read in sorted order), a datasets.save_to_disk
directory, or hf:NAME[:CONFIG][:SPLIT] (a Hugging Face Hub dataset, streamed; offline, read
from the local cache). Parquet and save_to_disk need `pip install 'infoxlm[parquet]'`, hf:
needs `pip install 'infoxlm[hf-datasets]'`. A record's value is a line of text (newlines
split it into lines); null or "" is a blank line; any other type is an error.
Every line is NFC-normalised, control characters and invisible formatting characters are
removed (ZWJ/ZWNJ kept). A blank line ends a document; a line that cleaning leaves empty
(only control or invisible characters) is skipped and counted.
Output: STORE/{mono/LANG | parallel/SRC-TGT}/ with uint32 token ids, int64 offsets and
meta.json; STORE/store.json names the tokenizer, and every corpus of a store must use it.
Running the same command again does nothing ("LANG: up to date") unless an input, an option
or the tokenizer changed, or --force is given."""


def _add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tokenizer", required=True, type=Path, metavar="DIR",
        help="directory with tokenizer.json or sentencepiece.bpe.model (or either file)",
    )  # fmt: skip
    parser.add_argument("--output", required=True, type=Path, metavar="STORE", help="token store directory")
    parser.add_argument(
        "--max-line-tokens", type=int, default=DEFAULT_MAX_LINE_TOKENS, metavar="N",
        help=f"longest line in tokens (default: {DEFAULT_MAX_LINE_TOKENS})",
    )  # fmt: skip
    parser.add_argument(
        "--skip-invalid", action="store_true",
        help="skip (and count) lines that are not valid UTF-8 instead of stopping",
    )  # fmt: skip
    parser.add_argument(
        "--dedup", action="store_true",
        help="drop lines (pairs) that appeared before in the input, exactly, after cleaning; "
        "counted in meta.json as skipped duplicate",
    )  # fmt: skip
    parser.add_argument(
        "--shard", metavar="I/N",
        help="prepare only part I of N (0 <= I < N) of the input, into a store of its own, e.g. "
        "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT; `prepare merge` joins the N stores. N or more files are "
        "split by file; fewer by byte ranges at line starts (by line ranges when any is compressed; "
        "--src/--tgt always by line ranges). Text files only; not with --dedup",
    )  # fmt: skip
    parser.add_argument(
        "--force", action="store_true",
        help="prepare again even if the corpus is up to date (with --executor: every task again)",
    )  # fmt: skip
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_engine_options(parser)


def add_prepare_commands(subparsers: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """Register ``prepare mono``, ``prepare parallel``, ``prepare inspect`` and ``prepare merge``;
    returns the ``prepare`` group's sub-parsers, where higher layers add theirs (``prepare show``)."""
    prepare = subparsers.add_parser(
        "prepare",
        help="tokenize raw text into a token store; inspect a store",
        description="Tokenize monolingual and parallel text into a token store for pre-training.",
    )
    commands = prepare.add_subparsers(dest="prepare_command", metavar="COMMAND", required=True)

    _add_mono(commands)
    _add_parallel(commands)
    _add_inspect(commands)
    _add_merge(commands)
    return commands


def _add_mono(commands: argparse._SubParsersAction) -> None:
    """``prepare mono``: one language's text into STORE/mono/LANG."""
    mono = commands.add_parser(
        "mono",
        help="add one language's monolingual text to a store",
        description="Tokenize one language's text into STORE/mono/LANG. A blank line ends a "
        "document; lines longer than --max-line-tokens are split into consecutive lines.",
        epilog=_INPUT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    mono.add_argument("--lang", required=True, help="ISO 639 code, optionally with subtags: de, fil, zh-Hans")
    mono.add_argument(
        "--input", required=True, nargs="+", action="extend", metavar="FILE",
        help="inputs of that language, read in the order given: text files, .jsonl, .parquet, "
        "a directory of .parquet files or of datasets.save_to_disk, or hf:NAME[:CONFIG][:SPLIT]",
    )  # fmt: skip
    mono.add_argument(
        "--field", metavar="NAME",
        help="the record field that holds the text (default: text); a blank value or one with a "
        "blank line ends a document",
    )  # fmt: skip
    mono.add_argument(
        "--doc-field", metavar="NAME",
        help="a record field identifying the document (id, url): a change of its value ends a "
        "document; without it, records do not end documents by themselves",
    )  # fmt: skip
    _add_common_options(mono)
    mono.set_defaults(func=run_prepare_mono)


def _add_parallel(commands: argparse._SubParsersAction) -> None:
    """``prepare parallel``: translation pairs into STORE/parallel/SRC-TGT."""
    parallel = commands.add_parser(
        "parallel",
        help="add an English-xx translation corpus to a store",
        description="Tokenize translation pairs into STORE/parallel/SRC-TGT. A pair with an "
        "empty side is skipped; sides longer than --max-line-tokens are truncated.",
        epilog=_INPUT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parallel.add_argument("--pair", required=True, help="SRC-TGT, e.g. en-de (--src is SRC, --tgt is TGT)")
    parallel.add_argument("--src", type=path_or_url, metavar="FILE", help="source-language side, one sentence per line")
    parallel.add_argument("--tgt", type=path_or_url, metavar="FILE", help="target-language side, line-aligned with --src")
    parallel.add_argument("--tsv", type=path_or_url, metavar="FILE", help="instead of --src/--tgt: source<TAB>target lines")
    parallel.add_argument(
        "--tmx", type=Path, metavar="FILE",
        help="instead: a TMX file; each <tu>'s <seg>s in the pair's languages, matched by primary "
        "language subtag (en-US is en); a <tu> lacking one is skipped and counted as empty",
    )  # fmt: skip
    parallel.add_argument(
        "--input", metavar="FILE",
        help="instead: records (.jsonl, .parquet, a directory of .parquet files or of "
        "datasets.save_to_disk, hf:NAME[:CONFIG][:SPLIT]) with the two sides in two fields",
    )  # fmt: skip
    parallel.add_argument(
        "--src-field", metavar="NAME", help="the --input field of the source side (default: the SRC code, e.g. en)"
    )  # fmt: skip
    parallel.add_argument(
        "--tgt-field", metavar="NAME", help="the --input field of the target side (default: the TGT code, e.g. de)"
    )  # fmt: skip
    parallel.add_argument(
        "--allow-non-english-pair", action="store_true",
        help="accept a pair without English (InfoXLM pivots on English)",
    )  # fmt: skip
    _add_common_options(parallel)
    parallel.set_defaults(func=run_prepare_parallel)


def _add_inspect(commands: argparse._SubParsersAction) -> None:
    """``prepare inspect``: a store's counts and sampling probabilities."""
    inspect = commands.add_parser(
        "inspect",
        help="counts per corpus and the sampling probabilities training will use",
        description="Print per-corpus counts and the sampling probabilities p_l ∝ (n_l/n)^alpha "
        "(monolingual and parallel corpora separately; n counted in lines and pairs, as training "
        "does by default, or in tokens), and per language the MMLM blocks training cuts and the "
        "share of short ones (under half a block). Exits non-zero if the store is incomplete or damaged.",
    )
    inspect.add_argument("store", type=Path, metavar="STORE")
    inspect.add_argument(
        "--alpha", type=float, default=DEFAULT_ALPHA,
        help=f"sampling exponent in (0, 1] (default: {DEFAULT_ALPHA})",
    )  # fmt: skip
    inspect.add_argument(
        "--sampling-unit", choices=SAMPLING_UNITS, default="instances",
        help="what n_l counts: lines / pairs (instances, the paper's and training's default) or tokens; "
        "match the run's data.sampling_unit",
    )  # fmt: skip
    inspect.add_argument(
        "--block-size", type=int, default=DEFAULT_BLOCK_SIZE, metavar="N",
        help=f"MMLM block length the block counts are for (default: {DEFAULT_BLOCK_SIZE}); match the run's "
        "data.block_size",
    )  # fmt: skip
    inspect.add_argument(
        "--json", action="store_true",
        help="print the report as JSON, with each corpus's checksum (sha256 of its token ids and "
        "line and document offsets; reads the whole store)",
    )  # fmt: skip
    inspect.add_argument(
        "--check-token-ids", action="store_true",
        help="also read every token and check it is inside the vocabulary (reads the whole store)",
    )  # fmt: skip
    inspect.set_defaults(func=run_prepare_inspect)


def _add_merge(commands: argparse._SubParsersAction) -> None:
    """``prepare merge``: the stores of a sharded prepare joined into one."""
    merge = commands.add_parser(
        "merge",
        help="join the stores of `prepare --shard` (and other stores) into one",
        description="Write every corpus of the STOREs into the store OUT without tokenizing again. "
        "The shards of one `prepare --shard I/N` are joined in shard order into exactly the corpus one "
        "prepare of the whole input gives (documents that go on across a shard boundary are joined); "
        "all N shards must be given, each once. A corpus that is not a shard is copied as it is. "
        "Refused: stores of different tokenizers, a missing or repeated shard, shards of different inputs "
        "or options, a corpus in two stores or already in OUT, an OUT inside a store or run directory or a "
        "non-empty OUT that is not a store, a store still being prepared; nothing is left written then.",
    )
    merge.add_argument("output", type=Path, metavar="OUT", help="the store to write (created if missing)")
    merge.add_argument("stores", type=Path, nargs="+", metavar="STORE", help="stores to join, in any order")
    merge.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    merge.set_defaults(func=run_prepare_merge)


def run_prepare_mono(args: argparse.Namespace) -> int:
    arguments = dict(
        language=args.lang,
        inputs=args.input,
        tokenizer=args.tokenizer,
        max_line_tokens=args.max_line_tokens,
        skip_invalid=args.skip_invalid,
        dedup=args.dedup,
        field=args.field,
        doc_field=args.doc_field,
    )
    return _prepare("mono", arguments, args)


def _prepare(kind: str, arguments: dict, args: argparse.Namespace) -> int:
    """One prepare of ``arguments`` into ``--output`` (a shard of it with ``--shard``), or the
    job of ``--executor``."""
    if args.executor is not None:
        return run_on_engine(kind, arguments, args)
    prepare = prepare_monolingual if kind == "mono" else prepare_parallel
    result = prepare(
        **arguments,
        output=args.output,
        force=args.force,
        show_progress=not args.no_progress,
        shard=parse_shard(args.shard) if args.shard is not None else None,
    )
    print(result.summary())
    _warn(result.warnings())
    return 0


def _warn(lines: list[str]) -> None:
    for line in lines:  # e.g. text the tokenizer does not cover: a high <unk> rate
        print(line, file=sys.stderr)


def run_prepare_parallel(args: argparse.Namespace) -> int:
    arguments = dict(
        pair=args.pair,
        tokenizer=args.tokenizer,
        src=args.src,
        tgt=args.tgt,
        tsv=args.tsv,
        tmx=args.tmx,
        input=args.input,
        src_field=args.src_field,
        tgt_field=args.tgt_field,
        allow_non_english=args.allow_non_english_pair,
        max_line_tokens=args.max_line_tokens,
        skip_invalid=args.skip_invalid,
        dedup=args.dedup,
    )
    return _prepare("parallel", arguments, args)


def run_prepare_merge(args: argparse.Namespace) -> int:
    for result in merge_stores(args.output, args.stores, show_progress=not args.no_progress):
        shards = result.meta.get("merged_from", {}).get("shards")
        print(result.summary() + (f" (from {shards} shards)" if shards else " (copied)"))
        _warn(result.warnings())
    return 0


def run_prepare_inspect(args: argparse.Namespace) -> int:
    report = store_report(
        args.store,
        alpha=args.alpha,
        check_token_ids=args.check_token_ids,
        checksums=args.json,
        unit=args.sampling_unit,
        block_size=args.block_size,
    )
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(format_report(report))
    _warn(report["warnings"])
    return 0
