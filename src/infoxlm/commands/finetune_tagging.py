"""``infoxlm finetune wikiann`` and ``infoxlm finetune udpos``: XTREME's token-classification tasks."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..cli_args import add_model_arguments, positive_float, positive_int
from ..created_paths import CreatedPaths
from ..outputs import check_output_dir

from ..finetune.tagging_defaults import MAX_LENGTH, SELECTIONS, SETTINGS, XTREME_NAMES

DESCRIPTIONS = {
    "wikiann": ("WikiANN (PAN-X) named entities: trained on English, F1 in every language",
                "PAN-X", "B-PER I-PER B-ORG I-ORG B-LOC I-LOC O", "panx/",
                "DIR/xx/{train,dev,test} (or DIR/xx/split.*, or DIR/split-xx.tsv)"),
    "udpos": ("UD-POS part-of-speech tags: trained on English, F1 in every language",
              "UD-POS", "the 17 universal POS tags of UD v2", "udpos/",
              "DIR/xx/{train,dev,test} (or DIR/xx/split.*, DIR/split-xx.tsv), or CoNLL-U:\n"
              "DIR/xx/split.conllu or DIR/xx/*-ud-split.conllu (FORM and UPOS read)"),
}


def add_tagging_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``wikiann`` and ``udpos`` under the ``infoxlm finetune`` group."""
    for task, (help_text, name, labels, data, layouts) in DESCRIPTIONS.items():
        p = sub.add_parser(
            task, help=help_text, formatter_class=argparse.RawDescriptionHelpFormatter,
            description=(
                f"XTREME's {name} protocol: a linear head on every token (XLMRobertaForTokenClassification),\n"
                "labels on each word's first sub-token, trained on English; the model with the best English\n"
                "dev F1 after each epoch is kept (--selection all-dev: the average dev F1 of every --languages;\n"
                "last: the final model). Test F1 / precision / recall per language with seqeval, exactly as\n"
                "XTREME's evaluate.py" + (" (token accuracy beside it)" if task == "udpos" else "") + "; Avg and gap.\n\n"
                "Defaults are XTREME's scripts/train_panx.sh and train_udpos.sh: lr 2e-5, batch 32 (8 x 4\n"
                "accumulated there), 10 epochs, no warm-up, weight decay 0, 128 tokens (a longer sentence is\n"
                "cut into pieces of whole words, as XTREME's preprocessing cuts it).\n\n"
                f"data layout: word<TAB>label lines, a blank line between sentences, labels {labels}:\n"
                f"  {layouts}\n"
                "English needs train (and dev for en-dev); every --languages a test file.\n\n"
                "example:\n"
                f"  infoxlm finetune {task} --model my-model --data {data} --languages en de fr --output runs/{task}\n"
                "writes RUN/results.json, RUN/results.md, RUN/predictions/"
                f"{XTREME_NAMES[task]}/test-xx.tsv (XTREME's layout; the first\n"
                "seed's), RUN/seed-S/predictions/ and RUN/seed-S/model/."
            ),
        )
        _arguments(p)
        p.set_defaults(func=run_finetune_tagging, task=task)


def _arguments(p: argparse.ArgumentParser) -> None:
    s = SETTINGS
    add_model_arguments(p)
    p.add_argument("--data", required=True, type=Path, help="directory of the task's files (layout above)")
    p.add_argument("--languages", nargs="+", required=True, metavar="xx", help="languages to test (en among them for the gap)")
    p.add_argument("--output", required=True, type=Path, help="run directory RUN")
    p.add_argument("--selection", choices=SELECTIONS, default="en-dev", help="which model is kept (default: en-dev, XTREME's)")
    p.add_argument("--seeds", type=positive_int, default=1, metavar="N", help="fine-tune N times (seeds S … S+N−1) and average (default: 1)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="first seed (default: 0)")
    p.add_argument("--epochs", type=positive_float, default=s["epochs"], help=f"default: {s['epochs']:g} (XTREME)")
    p.add_argument("--lr", type=positive_float, default=s["lr"], help=f"peak learning rate (default: {s['lr']:g}, XTREME)")
    p.add_argument("--batch-size", type=positive_int, default=s["batch_size"], help=f"default: {s['batch_size']} (XTREME)")
    p.add_argument("--warmup", default=s["warmup"], help="warm-up steps or percentage of all steps (default: 0, XTREME)")
    p.add_argument("--weight-decay", type=float, default=s["weight_decay"], help="default: 0 (XTREME)")
    p.add_argument("--max-length", type=positive_int, default=MAX_LENGTH, help=f"tokens per piece of a sentence (default: {MAX_LENGTH})")
    p.add_argument("--max-train-examples", type=positive_int, default=None, metavar="N", help="first N training sentences (smoke runs)")
    p.add_argument("--max-steps", type=positive_int, default=None, help="stop after this many steps (smoke runs; schedule unchanged)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 … (default: cuda if available)")
    p.add_argument("--no-save-model", action="store_true", help="do not write RUN/seed-S/model/")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def is_tagging_run(path: Path) -> bool:
    """A directory holding only what a tagging run writes."""
    return all(p.name in ("results.json", "results.md", "predictions") or p.name.startswith("seed-") for p in path.iterdir())


def run_finetune_tagging(args: argparse.Namespace) -> int:
    import torch

    from ..embedding import default_device
    from ..eval.xtreme_score import require_seqeval
    from ..train.model_source import open_model
    from ..finetune.tagging import run_tagging
    from ..finetune.training import FinetuneConfig

    require_seqeval()  # before any training, not at the first epoch's scores
    check_output_dir(args.output, written_by_us=is_tagging_run, flag=None, results_of_a_run=True)
    config = FinetuneConfig(lr=args.lr, batch_size=args.batch_size, epochs=args.epochs, warmup=args.warmup,
                            weight_decay=args.weight_decay, selection="last" if args.selection == "last" else "best",
                            seed=args.seed, max_steps=args.max_steps)
    device = torch.device(args.device) if args.device else default_device()
    # As every finetune command: a failed run takes back what it added to --output.
    with CreatedPaths(args.output) as created, open_model(args.model, args.step) as model:
        created.new_entries(args.output)
        model.tokenizer(f"finetune {args.task}")
        name = model.source.describe()
        print(f"[{args.task}] {name}: fine-tuning all {model.num_layers} layers")
        run_tagging(args.task, model.directory, args.data, args.output, config, languages=args.languages,
                    selection=args.selection, seeds=args.seeds, max_length=args.max_length,
                    max_train_examples=args.max_train_examples, device=device, progress=not args.no_progress,
                    save_models=not args.no_save_model, model_name=name)
    print(f"wrote {args.output / 'results.json'}, {args.output / 'results.md'} and {args.output / 'predictions'}/")
    return 0
