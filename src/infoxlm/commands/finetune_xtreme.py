"""``infoxlm finetune pawsx``, ``finetune xquad`` and ``finetune tydiqa``: XTREME's settings.

Registered by ``finetune.add_finetune_commands``, which hands over its run driver (open the
model, plan the settings, clean up on failure), so both modules share one and neither imports
the other's commands.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable

from ..cli_args import add_model_arguments, positive_float, positive_int
from ..outputs import check_output_dir
from ..finetune.xtreme_defaults import SELECTIONS, XTREME, dev_languages

Runner = Callable[[argparse.Namespace, str, Callable], None]
IsRun = Callable[[Path], bool]

SELECTION_HELP = ("en-dev: the best English dev score after each epoch (XTREME); all-dev: the best mean dev score "
                   "over every language (the paper's XNLI rule); last: the final model")


def _defaults_text(task: str) -> str:
    row = XTREME[task]
    return (f"Defaults are XTREME's (base-size XLM-R): lr {row['lr']:g}, batch {row['batch_size']}, "
            f"{row['epochs']:g} epochs, warm-up {row['warmup']} steps, weight decay {row['weight_decay']:g}, "
            f"max length {row['max_length']}, selection {row['selection']}.\nSource: google-research/xtreme "
            f"{row['source']}.")


def _common(p: argparse.ArgumentParser, task: str) -> None:
    row = XTREME[task]
    add_model_arguments(p)
    p.add_argument("--output", required=True, type=Path, help="run directory RUN")
    p.add_argument("--languages", nargs="+", default=None, metavar="xx", help="languages to test (default: all)")
    p.add_argument("--selection", choices=SELECTIONS, default=row["selection"], help=f"{SELECTION_HELP} (default: {row['selection']})")
    p.add_argument("--seeds", type=positive_int, default=1, metavar="N", help="fine-tune N times (seeds S … S+N−1); mean and std (default: 1)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="first seed (default: 0)")
    p.add_argument("--epochs", type=positive_float, default=None, help=f"default: {row['epochs']:g} (XTREME)")
    p.add_argument("--lr", type=positive_float, default=None, help=f"peak learning rate; default: {row['lr']:g} (XTREME)")
    p.add_argument("--batch-size", type=positive_int, default=None, help=f"default: {row['batch_size']} (XTREME)")
    p.add_argument("--warmup", default=None, help=f"warm-up steps or percentage of all steps; default: {row['warmup']} (XTREME)")
    p.add_argument("--weight-decay", type=float, default=None, help=f"default: {row['weight_decay']:g} (XTREME)")
    p.add_argument("--max-length", type=positive_int, default=row["max_length"], help=f"tokens per input (default: {row['max_length']})")
    p.add_argument("--eval-every", type=positive_int, default=None, metavar="K",
                   help="also evaluate on dev every K steps (default: after each epoch only; XTREME's script: "
                        f"{row['xtreme_eval_every'] or 'never'})")
    p.add_argument("--max-train-examples", type=positive_int, default=None, metavar="N", help="first N training examples of each file (smoke runs)")
    p.add_argument("--max-steps", type=positive_int, default=None, help="stop after this many steps (smoke runs; schedule unchanged)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 … (default: cuda if available)")
    p.add_argument("--no-save-model", action="store_true", help="do not write RUN/seed-S/model/")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(search=False)


def add_xtreme_tasks(sub: argparse._SubParsersAction, run: Runner, is_run: IsRun, device: Callable) -> None:
    """Add pawsx, xquad and tydiqa to ``infoxlm finetune``; ``run(args, task, run_setting)`` is
    finetune.py's driver, ``is_run`` tells a finished run directory, ``device(--device)`` the torch device."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser("pawsx", help="PAWS-X: paraphrase classification (2 labels), trained on English, tested in 7 languages",
                       formatter_class=fmt, description=(
        "Fine-tune a classification head on <s> on PAWS-X English training pairs and test on de en es fr ja\n"
        "ko zh: accuracy per language, average, transfer gap, per seed and averaged over --seeds.\n"
        f"{_defaults_text('pawsx')}\n\n"
        "data layout (PAWS-X's x-final.tar.gz): DIR/{lang}/dev_2k.tsv, test_2k.tsv, en/train.tsv and, for\n"
        "translate-train-all, {lang}/translated_train.tsv; header id sentence1 sentence2 label (0/1).\n\n"
        "example:\n  infoxlm finetune pawsx --model my-model --data x-final/ --seeds 5 --output runs/pawsx\n"
        "writes RUN/results.json, results.md, RUN/predictions/pawsx/test-{lang}.tsv, RUN/seed-S/."))
    _common(p, "pawsx")
    p.add_argument("--data", required=True, type=Path, help="PAWS-X directory (x-final/ or the folder holding it)")
    p.add_argument("--setting", choices=("cross-lingual-transfer", "translate-train-all"), default="cross-lingual-transfer",
                   help="train on English (default) or also on every language's translated_train.tsv")
    p.set_defaults(func=lambda args: _run_pawsx(args, run, is_run, device))

    for task, what, layout in (
        ("xquad", "XQuAD: extractive QA trained on SQuAD v1.1 English, tested in 11 languages",
         "--train squad/train-v1.1.json; --data DIR with xquad.{lang}.json (ar de el en es hi ru th tr vi zh);\n"
         "en-dev reads --dev or squad/dev-v1.1.json beside --train"),
        ("tydiqa", "TyDiQA-GoldP: extractive QA trained on its English questions, tested in 9 languages",
         "--data DIR with tydiqa-goldp-v1.1-train.json (English questions: ids english-…) and\n"
         "tydiqa-goldp-v1.1-dev/tydiqa-goldp-dev-{arabic,…}.json (XTREME's test set), or XTREME's renamed files"),
    ):
        q = sub.add_parser(task, help=what, formatter_class=fmt, description=(
            f"{what}; the MLQA span head and windows (384 tokens, stride 128), scored with the SQuAD v1.1\n"
            f"metric as XTREME's evaluate.py: EM / F1 per language, average and transfer gap.\n{_defaults_text(task)}\n\n"
            f"data layout: {layout}.\n\nwrites RUN/results.json, results.md, RUN/predictions/{task}/test-{{lang}}.json "
            "({id: answer}) and RUN/seed-S/."))
        _common(q, task)
        q.add_argument("--data", required=True, type=Path, help=f"{task} directory")
        q.add_argument("--train", required=task == "xquad", type=Path, default=None,
                       help="SQuAD v1.1 training JSON" if task == "xquad" else "training JSON (default: English questions of --data)")
        q.add_argument("--dev", type=Path, default=None, help="English dev file (SQuAD format) for --selection en-dev")
        q.add_argument("--doc-stride", type=positive_int, default=128, help="tokens between window starts (default: 128)")
        q.add_argument("--max-query-length", type=positive_int, default=64, help="question tokens kept (default: 64)")
        q.set_defaults(func=lambda args, task=task: _run_qa(args, task, run, is_run, device))


def _config(args: argparse.Namespace, setting: dict):
    from ..finetune.training import FinetuneConfig

    return FinetuneConfig(**setting, eval_every=args.eval_every, selection="last" if args.selection == "last" else "best",
                          seed=args.seed, max_steps=args.max_steps)


def _run_pawsx(args: argparse.Namespace, run: Runner, is_run: IsRun, device: Callable) -> int:
    from ..finetune import pawsx
    from ..eval.pawsx_data import check_pawsx_languages

    check_output_dir(args.output, written_by_us=is_run, flag=None, results_of_a_run=True)
    languages = check_pawsx_languages(args.languages)
    run(args, "pawsx", lambda setting, output, model_dir, model_name, _chosen: pawsx.run_pawsx(
        model_dir, args.data, output, _config(args, setting), setting=args.setting, seeds=args.seeds,
        languages=languages, dev_languages=dev_languages(args.selection, languages), max_length=args.max_length,
        max_train_examples=args.max_train_examples, device=device(args.device), progress=not args.no_progress,
        save_models=not args.no_save_model, model_name=model_name,
    ))
    print(f"wrote {args.output / 'results.json'}, {args.output / 'results.md'} and {args.output / 'predictions'}")
    return 0


def _run_qa(args: argparse.Namespace, task: str, run: Runner, is_run: IsRun, device: Callable) -> int:
    from ..finetune import xtreme_qa
    from ..finetune.training import FinetuneError

    check_output_dir(args.output, written_by_us=is_run, flag=None, results_of_a_run=True)
    if args.selection == "all-dev":
        raise FinetuneError(f"--selection all-dev: {task} has no dev file per language (only an English one); "
                            "use en-dev or last")
    run(args, task, lambda setting, output, model_dir, model_name, _chosen: xtreme_qa.run_xtreme_qa(
        task, model_dir, args.data, output, _config(args, setting), train_file=args.train, dev_file=args.dev,
        seeds=args.seeds, languages=args.languages, max_length=args.max_length, doc_stride=args.doc_stride,
        max_query_length=args.max_query_length, max_train_examples=args.max_train_examples,
        device=device(args.device), progress=not args.no_progress, save_models=not args.no_save_model,
        model_name=model_name,
    ))
    print(f"wrote {args.output / 'results.json'}, {args.output / 'results.md'} and {args.output / 'predictions'}")
    return 0
