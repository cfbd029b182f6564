"""``infoxlm pretrain`` and ``infoxlm export``."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from ..cli_args import PRESET_NAMES, positive_int, preset_list
from ..errors import InfoXLMError
from ..train.ablations import ABLATIONS

EXPORT_FORMATS = ("hf", "sentence-transformers")

_PRETRAIN_DESCRIPTION = (
    "Pre-train an XLM-R-style encoder on a token store (built by `infoxlm prepare`) with\n"
    "multilingual masked LM, translation LM and cross-lingual contrast. Running the same\n"
    "command on an existing --output resumes from its latest checkpoint.\n\n"
    "--preset is required: test (seconds on a CPU), demo (minutes on a CPU), scratch-base\n"
    "(the paper's from-scratch recipe), base, large, xl, xxl (continue a pre-trained model:\n"
    "--init is required). Any field can be changed with --set section.field=value. With\n"
    "--init, contrast.layer is the one the model records, unless set. The run starts with a\n"
    "summary of the resolved config (the whole of it is saved as RUN/config.json;\n"
    "--print-config prints it), an estimate where a step takes over a minute on the device,\n"
    "and ends with what it wrote and the command to run next. Ctrl-C stops after the step in\n"
    "progress with a checkpoint (exit 0; the same command resumes); a second Ctrl-C aborts at once,\n"
    "keeping the last checkpoint. Checkpoints: every run.save_every steps and run.save_every_minutes.\n\n"
    "--init takes a local directory; infoxlm downloads nothing (get XLM-R base once with\n"
    "huggingface-cli download xlm-roberta-base --local-dir xlmr-base).\n\n"
    "examples:\n"
    "  infoxlm pretrain --preset base --init xlmr-base --data store --output runs/base\n"
    "  infoxlm pretrain --preset test --data store --output runs/t --max-steps 50 --no-xlco\n"
    "  infoxlm pretrain --preset demo --data store --output runs/d --validation held-out-store\n"
    "  infoxlm pretrain --preset scratch-base --set optim.lr=2e-4 --print-config\n"
    "  infoxlm pretrain --preset paper-demo --print-config   # what `infoxlm demo --setting paper` trains\n"
    "  torchrun --nproc_per_node 8 -m infoxlm pretrain --preset base --init xlmr-base --data store --output runs/base"
)

_EXPORT_DESCRIPTION = (
    "Write the query encoder + MLM head (+ tokenizer) of a run's latest checkpoint (or --step N)\n"
    "as config.json + model.safetensors that transformers loads as XLM-R, with a model card\n"
    "(README.md). --format sentence-transformers writes the first --layer K layers with a pooling\n"
    "module instead: SentenceTransformer(OUT).encode gives the vectors `infoxlm embed --layer K`\n"
    "gives. Without --layer, K is the layer `infoxlm embed` and `eval tatoeba` use: the contrast\n"
    "layer the model records (a run's contrast.layer), else the paper's (8 of 12 layers, 14 of 24),\n"
    "else the middle one, said in the closing line. SRC may also be a Hugging Face XLM-R directory\n"
    "or a sentence-transformers export. OUT is written whole or not at all; it may replace an\n"
    "earlier export, never SRC nor another non-empty directory (unless --overwrite).\n\n"
    "examples:\n"
    "  infoxlm export runs/base my-model\n"
    "  infoxlm export runs/base my-model-st --format sentence-transformers --layer 8"
)


def add_pretrain_commands(commands: argparse._SubParsersAction) -> None:
    """Register ``pretrain`` and ``export`` on the main command's ``commands``."""
    _add_pretrain_command(commands)
    _add_export_command(commands)


def _add_pretrain_command(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "pretrain",
        help="pre-train with MMLM + TLM + XLCO (resumes an existing run directory)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_PRETRAIN_DESCRIPTION,
    )
    _add_source_arguments(p)
    _add_run_arguments(p)
    _add_ablation_arguments(p)
    _add_resume_arguments(p)
    p.set_defaults(func=run_pretrain)


def _add_source_arguments(p: argparse.ArgumentParser) -> None:
    """The recipe and what it reads and writes: --preset, --data, --output, --init, --config, --set."""
    p.add_argument("--preset", required=True, choices=PRESET_NAMES, help="hyperparameters to start from: " + preset_list())
    p.explain_missing("--preset", "one of " + preset_list())
    p.add_argument("--data", type=Path, default=None, help="token store directory (required unless --print-config)")
    p.add_argument("--output", type=Path, default=None, help="run directory, created or resumed (required unless --print-config)")
    p.add_argument("--init", default=None, help="model to continue from: Hugging Face XLM-R directory, sentence-transformers "
                   "export or run directory (required by base, large, xl, xxl; test, demo and scratch-base train from scratch without it)")
    p.add_argument("--validation", type=Path, default=None, metavar="STORE",
                   help="held-out token store (infoxlm prepare on other text, the same tokenizer): every run.eval_every "
                   "steps, MMLM and TLM loss and xx→en / en→xx retrieval top-1 at the contrast layer, logged as val/…")
    p.add_argument("--config", type=Path, default=None, help="JSON file of config sections to apply over the preset")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE", help="override one field (repeatable)")


def _add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Shortcuts for the run's length, checkpoints, seed and device."""
    p.add_argument("--max-steps", type=int, default=None, help="optimizer steps (optim.max_steps)")
    p.add_argument("--save-every", type=int, default=None, help="checkpoint interval in steps (run.save_every)")
    p.add_argument(
        "--stop-at", type=positive_int, default=None, metavar="STEP",
        help="end cleanly after this step with a checkpoint, the config unchanged: the same command "
        "without --stop-at continues the run (Ctrl-C, SIGTERM and SIGUSR1 do the same after the current step); "
        "a run already at STEP or past it is left as it is",
    )  # fmt: skip
    p.add_argument("--seed", type=int, default=None, help="run.seed: decides weights, data order, masking")
    p.add_argument("--device", default=None, help="cpu, cuda … (default: cuda if available)")


def _add_ablation_arguments(p: argparse.ArgumentParser) -> None:
    """The paper's ablations, each turning one part of the method off."""
    ablations = p.add_argument_group("ablations (the paper's)")
    for ablation in ABLATIONS.values():  # --no-xlco … (train/ablations.py: the demo trains the same)
        ablations.add_argument(f"--{ablation.name}", action="store_true", help=f"{ablation.label}: {ablation.says}")
    ablations.add_argument("--contrast-layer", type=int, default=None, help="contrast on this layer (contrast.layer)")


def _add_resume_arguments(p: argparse.ArgumentParser) -> None:
    """What a resumed run may differ in, the progress display and --print-config."""
    p.add_argument(
        "--allow-config-change",
        action="store_true",
        help="resume a run directory whose config differs (not its model's shape, XLCO on/off, "
        "contrast.layer/queue_size/use_momentum, nor its tokenizer)",
    )
    p.add_argument(
        "--allow-data-change",
        action="store_true",
        help="resume on a store whose corpora differ from those the run was trained on (added, "
        "removed or re-prepared; later steps then see other examples); a store with another "
        "tokenizer is always refused",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar: a line every run.log_every steps instead")
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config (preset, --config, --set and the flags above) as JSON and exit",
    )


def _add_export_command(commands: argparse._SubParsersAction) -> None:
    e = commands.add_parser(
        "export",
        help="write a run's model as a Hugging Face XLM-R or sentence-transformers directory",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_EXPORT_DESCRIPTION,
    )
    e.add_argument("run", type=Path, metavar="SRC",
                   help="run directory of `infoxlm pretrain`, Hugging Face XLM-R directory or sentence-transformers export")
    e.add_argument("out", type=Path, metavar="OUT", help="directory to write")
    e.add_argument("--step", type=positive_int, default=None, help="checkpoint step (default: the latest)")
    e.add_argument("--format", choices=EXPORT_FORMATS, default="hf",
                   help="hf: XLMRobertaForMaskedLM (default); sentence-transformers: the first --layer layers + pooling")
    e.add_argument("--layer", type=positive_int, default=None,
                   help="sentence-transformers: hidden_states index K to keep up to (default: the contrast layer the "
                   "model records, else the paper's)")
    e.add_argument("--pooling", choices=["mean", "cls"], default=None,
                   help="sentence-transformers: mean over non-padding tokens, <s> and </s> included (default, or what "
                   "a sentence-transformers SRC records), or <s>")
    e.add_argument("--license", default="unknown", help="license: field of the model card (default: unknown)")
    e.add_argument("--overwrite", action="store_true",
                   help="replace OUT even if it is a non-empty directory infoxlm did not write")
    e.set_defaults(func=run_export)


def resolved_config(args: argparse.Namespace):
    """The config the command runs: the preset, --config, --set and the flags; with --init, the
    contrast layer the model records unless one of those set it (train/continuation.py)."""
    return _resolved(args)[0]


def _resolved(args: argparse.Namespace):
    """(config, lines to say on stderr: the contrast layer --init gave and any warnings)."""
    from ..train.config import apply_overrides, load_config_file
    from ..train.presets import preset
    from ..train.continuation import adopt_recorded_layer, continuation_warnings

    config = preset(args.preset)
    overrides = load_config_file(args.config) if args.config else []
    overrides += args.overrides
    shortcuts = {
        "optim.max_steps": args.max_steps,
        "run.save_every": args.save_every,
        "run.seed": args.seed,
        "run.device": args.device,
        "model.init": args.init,
        "contrast.layer": args.contrast_layer,
    }
    overrides += [f"{name}={value}" for name, value in shortcuts.items() if value is not None]
    # The ablation flags last, as --set lines (so that user_set below names their fields too).
    overrides += [
        f"{section}.{field}={json.dumps(value)}"
        for ablation in ABLATIONS.values() if getattr(args, ablation.name.replace("-", "_"))
        for section, fields in ablation.changes.items() for field, value in fields.items()
    ]
    config = apply_overrides(config, overrides)
    user_set = {item.split("=", 1)[0].strip() for item in overrides}  # section.field names
    layer = adopt_recorded_layer(config, args.preset, user_set)
    return config, ([layer] if layer else []) + continuation_warnings(config, args.preset, user_set)


def run_pretrain(args: argparse.Namespace) -> int:
    from ..train.checkpoint import latest_checkpoint, list_checkpoints
    from ..train.config import resolve_config
    from ..train.console import finished_lines
    from ..train.continuation import refuse_without_init
    from ..train.loop import pretrain
    from ..train.stopping import RunStopped

    config, notes = _resolved(args)
    if args.print_config:
        if notes:
            print("\n".join(notes), file=sys.stderr, flush=True)
        print(resolve_config(config).to_json())
        return 0
    refuse_without_init(args.preset, config)  # before anything is read or written
    missing = [flag for flag, value in (("--data", args.data), ("--output", args.output)) if value is None]
    if missing:
        raise InfoXLMError(f"pretrain: {' and '.join(missing)} required (or --print-config to see the config)")
    before = list_checkpoints(Path(args.output)) if Path(args.output).is_dir() else []
    try:
        run_dir = pretrain(
            config,
            args.data,
            args.output,
            allow_config_change=args.allow_config_change,
            allow_data_change=args.allow_data_change,
            progress=not args.no_progress,
            stop_at=args.stop_at,
            preset=args.preset,
            notes=notes,
            validation=args.validation,
        )
        if os.environ.get("RANK", "0") == "0":  # torchrun's rank 0 speaks for the run
            found = list_checkpoints(run_dir)
            step, checkpoint = found[-1] if found else (0, None)
            if found and before and found[-1] == before[-1]:  # a finished run, given again
                print(f"{run_dir}: finished at step {step} already; nothing written (a larger --max-steps "
                      "with --allow-config-change continues it)", flush=True)
            else:
                print("\n".join(finished_lines(run_dir, step, checkpoint)), flush=True)
    except RunStopped:
        return _end_worker(0)  # stopped with its checkpoint, as asked (the run said why in one line)
    except KeyboardInterrupt:
        # The checkpoints are complete and synced, the logs closed: end now, without the
        # interpreter's teardown, where a library thread left mid-operation by the interrupt
        # can block the exit for good.
        kept = latest_checkpoint(args.output)
        resume = f"; {kept} kept: the same command resumes from it" if kept is not None else ""
        print(f"infoxlm: interrupted{resume}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(130)
    return _end_worker(0)


def _end_worker(status: int) -> int:
    """A process torchrun started ends here with ``status``, without the interpreter's teardown.

    Its run is complete (every rank passed the last barrier, checkpoints and logs are closed),
    but freeing the process group's objects at exit can deadlock: the main thread, holding
    the interpreter lock, waits for gloo's background thread, which waits for that lock to
    free an old collective's tensors. The worker then ignores SIGTERM and torchrun waits on
    it for good (seen in about 1 of 8 restarted runs). A single process returns normally.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return status
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def run_export(args: argparse.Namespace) -> int:
    from ..export.model_card import write_model_card
    from ..model.hub import written_by_infoxlm
    from ..outputs import atomic_dir, check_output_dir
    from ..train.model_source import RUN, open_model, resolve_model

    st = args.format == "sentence-transformers"
    if not st and (args.layer is not None or args.pooling is not None):
        raise InfoXLMError("--layer and --pooling are for --format sentence-transformers")
    source = resolve_model(args.run, args.step, flag="SRC")
    if st and source.kind == RUN and source.tokenizer is None:  # checked before its checkpoint is read
        raise InfoXLMError(f"{args.run}: has no tokenizer/ (its store had none); a sentence-transformers directory needs one")
    # OUT may replace an earlier export, never the source itself nor a directory of someone else's.
    check_output_dir(args.out, written_by_us=written_by_infoxlm, overwrite=args.overwrite, sources=[(source.kind, args.run)])
    is_run, said, layer, pooling = source.kind == RUN, None, None, None
    with atomic_dir(args.out, replace=True) as tmp:
        # args.step, not source.step: without --step the newest checkpoint when it is read,
        # which a run still training may have moved on from (model.source says which).
        if is_run and not st:
            with open_model(args.run, args.step, into=tmp, flag="SRC") as model:  # the run's export is the output itself
                source = model.source
        else:
            with open_model(args.run, args.step, into=tmp / ".full-model" if is_run else None, flag="SRC") as model:
                said, layer, pooling = _write_converted(model, tmp, st, args.layer, args.pooling)
                source = model.source
            if is_run:
                shutil.rmtree(tmp / ".full-model")
        write_model_card(
            tmp, kind="sentence-similarity" if st else "fill-mask", run_dir=args.run if is_run else None,
            source=None if is_run else args.run, step=source.step, layer=layer, pooling=pooling or "mean",
            license=args.license, name=args.out.name,
        )
    print(f"exported {source.describe()} → {args.out}" + (f" (sentence-transformers, {said})" if st else ""))
    return 0


def _write_converted(model, out: Path, st: bool, layer: int | None, pooling: str | None) -> tuple[str | None, int | None, str | None]:
    """Write ``model`` (an ``OpenedModel``) into ``out`` as a sentence-transformers directory cut
    at ``layer`` (default: the one rule's), or as a Hugging Face one; returns the layer and
    pooling written in words, the layer and the pooling (all None for Hugging Face)."""
    from ..export.sentence_transformers import write_sentence_transformers
    from ..model.encoder import Encoder
    from ..model.hub import record_contrast_layer

    if st:
        layer, rule = model.layer(layer)
        pooling = model.pooling(pooling)
        tokenizer = model.tokenizer("a sentence-transformers directory")
        write_sentence_transformers(Encoder.from_pretrained(model.directory), tokenizer, out, layer=layer, pooling=pooling)
        return f"layer {layer} ({rule}), {pooling} pooling", layer, pooling
    # A Hugging Face directory may go without a tokenizer.
    tokenizer = model.tokenizer("export") if model.source.tokenizer is not None else None
    Encoder.from_pretrained(model.directory).save_pretrained(out, tokenizer)
    if model.recorded_layer is not None:  # the contrast layer travels with the weights
        record_contrast_layer(out, model.recorded_layer)
    return None, None, None
