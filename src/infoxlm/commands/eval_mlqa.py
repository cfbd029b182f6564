"""``infoxlm eval mlqa-score``: the official MLQA metric on a prediction file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_mlqa_score_command(eval_subparsers: argparse._SubParsersAction) -> None:
    """Register ``mlqa-score`` under the ``infoxlm eval`` group (its ``add_subparsers`` object)."""
    m = eval_subparsers.add_parser(
        "mlqa-score",
        help="exact match and F1 of MLQA predictions, as mlqa_evaluation_v1.py computes them",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Scores {question id: answer text} predictions against an MLQA (SQuAD v1.1-format) file\n"
            "with the official metric: lowercase, strip punctuation and the language's articles,\n"
            "tokenise (zh: one token per CJK character), then EM and bag-of-tokens F1, best over the\n"
            "gold answers; unanswered questions score 0. Prints one JSON line on stdout; warnings\n"
            "(version, unanswered count) go to stderr.\n\n"
            "example:\n"
            "  infoxlm eval mlqa-score --data MLQA_V1/test/test-context-de-question-de.json \\\n"
            "      --predictions predictions.json --lang de"
        ),
    )
    m.add_argument("--data", required=True, type=Path, metavar="FILE", help="SQuAD v1.1-format JSON (an MLQA dev/test file)")
    m.add_argument("--predictions", required=True, type=Path, metavar="PRED.json", help='JSON object {"question id": "answer text"}')
    m.add_argument("--lang", required=True, metavar="xx", help="answer (context) language: en es de ar hi vi zh")
    m.set_defaults(func=run_mlqa_score)


def run_mlqa_score(args: argparse.Namespace) -> int:
    from ..eval.mlqa_data import read_json
    from ..eval.mlqa_metric import check_language, score_mlqa

    check_language(args.lang)  # before reading files, so a typo fails fast
    dataset = read_json(args.data, "an MLQA data file")
    predictions = read_json(args.predictions, "a prediction file")
    score = score_mlqa(
        dataset, predictions, args.lang, data_name=str(args.data), predictions_name=str(args.predictions)
    )
    if score.version_warning:
        print(score.version_warning, file=sys.stderr)
    if score.unanswered:
        print(
            f"{len(score.unanswered)} of {score.total} questions have no prediction and score 0 "
            f"(first: {score.unanswered[0]})",
            file=sys.stderr,
        )
    print(json.dumps(score.as_dict()))
    return 0
