"""``infoxlm finetune xnli`` and ``infoxlm finetune mlqa``; XTREME's other tasks register from
their own modules (``finetune_xtreme.py``) with this module's run driver."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..cli_args import add_model_arguments, positive_float, positive_int
from ..created_paths import CreatedPaths
from ..outputs import check_output_dir
from ..finetune import defaults
from ..finetune.defaults import DOC_STRIDE, MAX_LENGTH, MAX_QUERY_LENGTH
from .finetune_tagging import add_tagging_commands
from .finetune_xtreme import SELECTION_HELP, add_xtreme_tasks
from ..finetune.xtreme_defaults import SELECTIONS, dev_languages


XNLI_DESCRIPTION = (
    "Fine-tune a classification head on <s> (XLMRobertaForSequenceClassification layout) and test\n"
    "it on the 15 XNLI languages. One model for all languages (#M=1), selected on the average dev\n"
    "accuracy of all languages, evaluated every --eval-every steps and at each epoch end. Reports\n"
    "accuracy per language, the average and the transfer gap (en − mean of the others), per seed\n"
    "and averaged over --seeds runs.\n\n"
    "Defaults are the paper's appendix, by the model's size in its config.json (large: 24 layers or\n"
    "hidden size 1024 and up; small: below; else base): batch 32, 10 epochs, evaluation every 5,000 steps; base:\n"
    "12,500 warm-up steps, weight decay 0, lr 7e-6 (middle of the searched {5e-6, 7e-6, 1e-5});\n"
    "large: 5,000 warm-up steps, weight decay 0 (of {0, 0.01}), lr 5e-6 (of {4e-6, 5e-6, 6e-6}).\n"
    "small (not the paper's): lr 3e-4, warm-up 10%, where base's stays at chance. The run prints the\n"
    "size and settings it took; results.json records them (settings_chosen).\n"
    "The paper averages 5 seeds. Max length 128 is XTREME's (the paper is silent).\n"
    "--search runs the paper's grid for the size (base: 3 learning rates; large: 3 × 2 weight\n"
    "decays), every setting × --seeds, each in RUN/grid/NN-…/, and keeps the setting with the best\n"
    "average dev accuracy over all languages; RUN/results.json and results.md list every setting\n"
    "with the chosen one marked. --lr, --batch-size, --epochs, --warmup, --weight-decay given with\n"
    "--search fix that value and search the rest.\n\n"
    "data layouts: DIR/XNLI-1.0/xnli.{dev,test}.tsv + DIR/XNLI-MT-1.0/multinli/multinli.train.xx.tsv\n"
    "(or --data XNLI-1.0 --train-data XNLI-MT-1.0), or hf:xnli (Hugging Face datasets, if cached).\n\n"
    "example:\n"
    "  infoxlm finetune xnli --model microsoft/infoxlm-base-dir --data data/ \\\n"
    "      --setting cross-lingual-transfer --seeds 5 --output runs/xnli-xlt\n"
    "writes RUN/results.json, RUN/results.md and RUN/seed-S/model/ (loads in transformers)."
)

MLQA_DESCRIPTION = (
    "Fine-tune a span head (XLMRobertaForQuestionAnswering layout) on SQuAD v1.1 and answer the MLQA\n"
    "test sets test-context-xx-question-xx.json (en es de ar hi vi zh); scores with the official MLQA\n"
    "metric: F1 / EM per language, average and transfer gap, per seed and averaged over --seeds.\n"
    "Windows of 384 tokens, stride 128, questions ≤ 64 tokens; 20-best spans of ≤ 30 tokens.\n\n"
    "Defaults are the paper's appendix (the same for base and large models; small models, below\n"
    "12 layers × 768, take lr 3e-4, unmeasured here): warm-up 10%, linear\n"
    "decay, weight decay 0, the final model (--selection last); batch 32, lr 3e-5 and 3 epochs from\n"
    "the searched batch {16, 32} (large: 32), lr {2e-5, 3e-5, 5e-5}, epochs {2, 3, 4}. --selection\n"
    "all-dev picks the evaluation with the best mean dev F1 instead, en-dev the best English dev F1.\n"
    "--search runs that grid for the model's size (base 18 settings, large 9), every setting ×\n"
    "--seeds, each in RUN/grid/NN-…/, and keeps the setting whose model has the best mean F1 over\n"
    "the MLQA dev files (dev-context-xx-question-xx.json, in DIR or DIR/dev; required, test is\n"
    "never used to select); RUN/results.json and results.md list every setting, the chosen one\n"
    "marked. --lr, --batch-size, --epochs, --warmup, --weight-decay given with --search fix that\n"
    "value and search the rest.\n\n"
    "example:\n"
    "  infoxlm finetune mlqa --model my-model --train squad/train-v1.1.json --data MLQA_V1 \\\n"
    "      --seeds 5 --output runs/mlqa\n"
    "writes RUN/results.json, RUN/results.md, RUN/seed-S/predictions/*.json and RUN/seed-S/model/."
)


def add_finetune_commands(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("finetune", help="fine-tune and evaluate on XNLI, MLQA (the paper's protocols) or XTREME's tasks")
    sub = p.add_subparsers(metavar="TASK", required=True)
    d = defaults.XNLI
    x = sub.add_parser("xnli",
        help="XNLI: cross-lingual transfer or translate-train-all, one model for 15 languages",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=XNLI_DESCRIPTION,
    )
    _common(x, "xnli", default_eval_every=d["eval_every"])
    x.add_argument("--data", required=True, help="directory with XNLI-1.0/ and XNLI-MT-1.0/, or hf:xnli")
    x.add_argument("--train-data", type=Path, default=None, help="XNLI-MT-1.0 directory, if not inside --data")
    x.add_argument("--setting", required=True, help="cross-lingual-transfer (English training data) or translate-train-all (all 15)")
    x.add_argument("--languages", nargs="+", default=None, metavar="xx", help="XNLI languages to test (default: all 15)")
    x.add_argument("--max-length", type=positive_int, default=defaults.XNLI_MAX_LENGTH, help="tokens per pair (default: 128)")
    x.add_argument("--max-dev-examples", type=positive_int, default=None, metavar="N", help="first N dev pairs per language (smoke runs)")
    x.add_argument("--selection", choices=SELECTIONS, default="all-dev", help=f"{SELECTION_HELP} (default: all-dev, the paper's)")
    x.set_defaults(func=run_finetune_xnli)

    d = defaults.MLQA
    m = sub.add_parser("mlqa",
        help="MLQA: extractive QA trained on SQuAD v1.1 English, tested in 7 languages",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=MLQA_DESCRIPTION,
    )
    _common(m, "mlqa", default_eval_every=None)
    m.add_argument("--train", required=True, type=Path, help="SQuAD v1.1 training JSON (train-v1.1.json)")
    m.add_argument("--data", required=True, type=Path, help="MLQA directory (MLQA_V1, with dev/ and test/)")
    m.add_argument("--languages", nargs="+", default=None, metavar="xx", help="MLQA languages (default: all 7)")
    m.add_argument("--cross-language", action="store_true", help="also every context × question language pair")
    m.add_argument("--selection", choices=SELECTIONS, default="last", help=f"{SELECTION_HELP} (default: last, the paper's)")
    m.add_argument("--max-length", type=positive_int, default=MAX_LENGTH, help=f"tokens per window (default: {MAX_LENGTH})")
    m.add_argument("--doc-stride", type=positive_int, default=DOC_STRIDE, help=f"tokens between window starts (default: {DOC_STRIDE})")
    m.add_argument("--max-query-length", type=positive_int, default=MAX_QUERY_LENGTH, help=f"question tokens kept (default: {MAX_QUERY_LENGTH})")
    m.set_defaults(func=run_finetune_mlqa)
    add_xtreme_tasks(sub, run=_run, is_run=is_finetune_run, device=_device)
    add_tagging_commands(sub)


def _common(p: argparse.ArgumentParser, task: str, default_eval_every: int | None) -> None:
    def by_size(key: str, fmt: str = "{}") -> str:
        # argparse %-formats help
        shown = {size: fmt.format(defaults.DEFAULTS[task, size][key]).replace("%", "%%") for size in defaults.SIZES}
        if len(set(shown.values())) == 1:
            return f"default: {shown['base']}"
        return "default by model size: " + ", ".join(f"{size} {value}" for size, value in shown.items())

    add_model_arguments(p)
    p.add_argument("--output", required=True, type=Path, help="run directory RUN")
    p.add_argument("--seeds", type=positive_int, default=1, metavar="N", help="fine-tune N times (seeds S … S+N−1) and average (paper: 5; default: 1)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="first seed (default: 0)")
    p.add_argument("--epochs", type=positive_float, default=None, help=by_size("epochs", "{:g}"))
    p.add_argument("--lr", type=positive_float, default=None, help="peak learning rate; " + by_size("lr", "{:g}"))
    p.add_argument("--batch-size", type=positive_int, default=None, help=by_size("batch_size"))
    p.add_argument("--warmup", default=None, help="warm-up steps or percentage of all steps; " + by_size("warmup"))
    p.add_argument("--weight-decay", type=float, default=None, help=by_size("weight_decay", "{:g}"))
    p.add_argument("--search", action="store_true", help="run the paper's grid for the model's size and keep the best joint-dev setting")
    p.add_argument("--eval-every", type=positive_int, default=default_eval_every, metavar="K",
                   help=f"evaluate on dev every K steps, besides each epoch end (default: {default_eval_every})")
    p.add_argument("--max-train-examples", type=positive_int, default=None, metavar="N", help="first N examples of each training file (smoke runs)")
    p.add_argument("--max-steps", type=positive_int, default=None, help="stop after this many steps (smoke runs; schedule unchanged)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 … (default: cuda if available)")
    p.add_argument("--no-save-model", action="store_true", help="do not write RUN/seed-S/model/")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")


def _config(args: argparse.Namespace, selection: str, setting: dict):
    from ..finetune.training import FinetuneConfig

    return FinetuneConfig(**setting, eval_every=args.eval_every, selection=selection, seed=args.seed, max_steps=args.max_steps)


def _run(args: argparse.Namespace, task: str, run_setting) -> None:
    """Open --model (a run's checkpoint is written out for as long as fine-tuning lasts) and run
    the planned settings: ``run_setting(setting, output, model_dir, model_name, settings_chosen)``. On failure,
    what the run added to --output is removed."""
    from ..train.model_source import open_model
    from ..finetune.search import plan, run_search

    # A run that fails (a full disk, Ctrl-C) takes back what it added to --output: seeds
    # without results beside them would pass for a finished run's.
    with CreatedPaths(args.output) as created, open_model(args.model, args.step) as model:
        created.new_entries(args.output)
        model.tokenizer(f"finetune {task}")  # refused here, naming the model, not a temporary copy
        name = model.source.describe()
        print(f"[{task}] {name}: fine-tuning all {model.num_layers} layers")
        explicit = {key: getattr(args, key) for key in defaults.GRID_KEYS}
        size, settings = plan(model.directory, task, explicit, search=args.search)
        for setting in settings:  # a bad value stops the command before any training
            _config(args, "last", setting)
        # Recorded in results.json; XTREME's other tasks take its one table (xtreme_defaults.py).
        chosen = defaults.choice(task, size, explicit, search=args.search) if task in defaults.TASKS else None

        def run(setting: dict, output: Path) -> dict:
            return run_setting(setting, output, model.directory, name, chosen)

        if args.search:
            run_search(task, settings, run, args.output, size=size)
        else:
            run(settings[0], args.output)


def _device(name: str | None):
    import torch

    from ..embedding import default_device

    return torch.device(name) if name else default_device()


def is_finetune_run(path: Path) -> bool:
    """A directory holding only what `infoxlm finetune` writes: results.json, results.md, seed-S/,
    predictions/, and with --search grid/."""
    return all(p.name in ("results.json", "results.md", "grid", "predictions") or p.name.startswith("seed-") for p in path.iterdir())


def run_finetune_xnli(args: argparse.Namespace) -> int:
    from ..finetune import classification

    from ..eval.xnli_data import check_languages

    check_output_dir(args.output, written_by_us=is_finetune_run, flag=None, results_of_a_run=True)
    selection = "last" if args.selection == "last" else "best"
    devs = dev_languages(args.selection, check_languages(args.languages))
    _run(args, "xnli", lambda setting, output, model_dir, model_name, chosen: classification.run_xnli(
        model_dir, args.data, args.setting, output, _config(args, selection, setting), dev_languages=devs,
        seeds=args.seeds, languages=args.languages, train_data=args.train_data, max_length=args.max_length,
        max_train_examples=args.max_train_examples, max_dev_examples=args.max_dev_examples,
        device=_device(args.device), progress=not args.no_progress, save_models=not args.no_save_model,
        model_name=model_name, settings_chosen=chosen,
    ))
    print(f"wrote {args.output / 'results.json'} and {args.output / 'results.md'}")
    return 0


def run_finetune_mlqa(args: argparse.Namespace) -> int:
    from ..finetune import qa

    check_output_dir(args.output, written_by_us=is_finetune_run, flag=None, results_of_a_run=True)
    selection = "last" if args.selection == "last" else "best"
    devs = dev_languages(args.selection, qa.check_mlqa_languages(args.languages)) if selection == "best" else None
    _run(args, "mlqa", lambda setting, output, model_dir, model_name, chosen: qa.run_mlqa(
        model_dir, args.train, args.data, output, _config(args, selection, setting), dev_languages=devs,
        seeds=args.seeds, languages=args.languages, cross_language=args.cross_language,
        max_length=args.max_length, doc_stride=args.doc_stride, max_query_length=args.max_query_length,
        max_train_examples=args.max_train_examples, device=_device(args.device),
        progress=not args.no_progress, save_models=not args.no_save_model, score_dev=args.search,
        model_name=model_name, settings_chosen=chosen,
    ))
    print(f"wrote {args.output / 'results.json'} and {args.output / 'results.md'}")
    return 0
