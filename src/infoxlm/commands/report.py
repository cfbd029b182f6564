"""``infoxlm report``: fine-tuning and evaluation results as the paper's tables."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_report_command(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "report",
        help="Markdown tables and plots of finetune / eval / demo results beside the paper's, and of pretrain runs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Gathers results.json of `infoxlm finetune xnli|mlqa` runs, JSON outputs of `infoxlm eval\n"
            "tatoeba` and `infoxlm demo` directories into tables shaped like the paper's (per-language\n"
            "columns, Avg, transfer gap) with the paper's published rows alongside, plus PNG bar plots.\n"
            "An `infoxlm pretrain` run directory: its losses and --validation results by step, table and plot.\n"
            "Writes DIR/report.md and DIR/*.png and prints the Markdown.\n\n"
            "Runs of XTREME's tasks add the XTREME table: one row per model, XNLI, PAWS-X, XQuAD, MLQA,\n"
            "TyDiQA, WikiANN, UD-POS and their average, the published rows of XLM-R-base, mmBERT-base and\n"
            "InfoXLM-base beside it, each cell naming its protocol and seeds (xtreme.png).\n"
            "With --output FILE.md the report is FILE.md, its PNGs beside it.\n\n"
            "Columns are the languages the runs have; Avg (n) is every row's mean over those n, the paper's\n"
            "rows included, and paper Avg (N) the paper's own average over all N of its languages.\n"
            "Files of `eval tatoeba --layer all` are also overlaid in tatoeba-layers.png, one colour per\n"
            "file, each one's layer (its contrast layer, or its rule's) dotted; those of `eval bucc` and\n"
            "`eval xsim --layer all` in bucc-layers.png and xsim-layers.png.\n\n"
            "examples:\n"
            "  infoxlm report runs/xnli-xlt runs/mlqa runs/tatoeba.json --output runs/report\n"
            "  infoxlm report runs/*/results.json --output xtreme.md\n"
            "  infoxlm report mine.json xlmr.json --output layers.md   # two --layer all files overlaid"
        ),
    )
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="run directories or result JSON files")
    p.add_argument("--output", required=True, type=Path, help="directory DIR for report.md and the PNGs, or FILE.md (the PNGs beside it)")
    p.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from ..outputs import check_output_dir, check_output_file
    from ..eval.report import write_report

    if args.output.suffix == ".md":
        check_output_file(args.output)  # its PNGs (xtreme.png, mlqa.png, …) replace any of those names beside it
        where = args.output
    else:  # a report directory holds report.md and its PNGs only
        check_output_dir(
            args.output, flag=None,
            written_by_us=lambda d: all(p.name == "report.md" or p.suffix == ".png" for p in d.iterdir()),
        )  # fmt: skip
        where = args.output / "report.md"
    markdown, pngs = write_report(args.runs, args.output)
    print(markdown)
    print(f"wrote {where}" + "".join(f", {p.name}" for p in pngs))
    return 0
