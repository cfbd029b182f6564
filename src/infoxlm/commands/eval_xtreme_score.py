"""``infoxlm eval xtreme-score``: one task's predictions scored as XTREME's evaluate.py scores them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..eval.xtreme_score import TASKS  # imports seqeval only when scoring


def add_xtreme_score_command(eval_subparsers: argparse._SubParsersAction) -> None:
    """Register ``xtreme-score`` under the ``infoxlm eval`` group (its ``add_subparsers`` object)."""
    x = eval_subparsers.add_parser(
        "xtreme-score",
        help="score one XTREME task's test predictions exactly as XTREME's evaluate.py does",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "The metric XTREME's evaluate.py uses for --task, on its file layouts:\n"
            "  panx, udpos    labels and predictions: one label per line, a blank line between sentences\n"
            "                 (--labels may also be the task's word<TAB>label test file); seqeval's\n"
            "                 entity-level F1, precision, recall -> {\"f1\", \"precision\", \"recall\"}\n"
            "  pawsx, xnli    one label per line -> {\"accuracy\"}\n"
            "  xquad, tydiqa  labels: SQuAD v1.1 JSON; predictions: {\"question id\": \"answer\"} JSON;\n"
            "                 the SQuAD v1.1 metric -> {\"exact_match\", \"f1\"}\n"
            "  mlqa           the same files, MLQA's metric for --lang -> {\"exact_match\", \"f1\"}\n"
            "All in %, printed as one JSON line. `infoxlm finetune` writes predictions in this layout\n"
            "(RUN/predictions/TASK/test-xx.tsv).\n\n"
            "example:\n"
            "  infoxlm eval xtreme-score --task panx --labels panx/de/test \\\n"
            "      --predictions runs/panx/predictions/panx/test-de.tsv --lang de"
        ),
    )
    x.add_argument("--task", required=True, choices=TASKS, help="XTREME's task name")
    x.add_argument("--labels", required=True, type=Path, metavar="L", help="gold labels (layout above)")
    x.add_argument("--predictions", required=True, type=Path, metavar="P", help="predictions (layout above)")
    x.add_argument("--lang", default=None, metavar="xx", help="the language: needed for mlqa (its articles); the other tasks ignore it, as evaluate.py does")
    x.set_defaults(func=run_xtreme_score)


def run_xtreme_score(args: argparse.Namespace) -> int:
    from ..eval.xtreme_score import xtreme_score

    print(json.dumps(xtreme_score(args.task, args.labels, args.predictions, args.lang)))
    return 0
