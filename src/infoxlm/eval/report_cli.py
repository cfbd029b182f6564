"""``infoxlm report``: fine-tuning and evaluation results as the paper's tables."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_report_command(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "report",
        help="Markdown tables and bar plots of finetune / eval tatoeba / demo results, beside the paper's",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Gathers results.json of `infoxlm finetune xnli|mlqa` runs, JSON outputs of `infoxlm eval\n"
            "tatoeba` and `infoxlm demo` directories into tables shaped like the paper's (per-language\n"
            "columns, Avg, transfer gap) with the paper's published rows alongside, plus PNG bar plots.\n"
            "Writes DIR/report.md and DIR/*.png and prints the Markdown.\n\n"
            "With --output FILE.md, only the XTREME table: one row per model, XNLI, PAWS-X, XQuAD, MLQA,\n"
            "TyDiQA, WikiANN, UD-POS and their average, the published rows of XLM-R-base, mmBERT-base and\n"
            "InfoXLM-base beside it, each cell naming its protocol and seeds; FILE.md and FILE.png.\n\n"
            "examples:\n"
            "  infoxlm report runs/xnli-xlt runs/mlqa runs/tatoeba.json --output runs/report\n"
            "  infoxlm report runs/*/results.json --output xtreme.md"
        ),
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run directories or result JSON files")
    p.add_argument("--output", required=True, type=Path, help="directory DIR for report.md and the PNGs, or FILE.md for the XTREME table alone")
    p.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from ..outputs import check_output_dir, check_output_file
    from .report import write_report, write_xtreme_report

    if args.output.suffix == ".md":
        png = args.output.with_suffix(".png")
        check_output_file(args.output)
        check_output_file(png)
        markdown, png = write_xtreme_report(args.runs, args.output)
        print(markdown)
        print(f"wrote {args.output} and {png}")
        return 0

    # A report directory holds report.md and its PNGs only.
    check_output_dir(
        args.output, flag=None, written_by_us=lambda d: all(p.name == "report.md" or p.suffix == ".png" for p in d.iterdir())
    )
    markdown, pngs = write_report(args.runs, args.output)
    print(markdown)
    print(f"wrote {args.output / 'report.md'}" + "".join(f", {p.name}" for p in pngs))
    return 0
