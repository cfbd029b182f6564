"""``infoxlm demo``: the embedded experiment (see ``demo/run.py``)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_demo_command(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "demo",
        help="pre-train InfoXLM and its −XLCO ablation on the shipped corpus and compare them",
        description=(
            "Run the whole method on the corpus shipped with the package (software documentation and "
            "UI text, English + 14 languages): learn a vocabulary, tokenize, pre-train a small encoder "
            "from scratch with MMLM + TLM + XLCO and the same model without XLCO (same data, steps and "
            "seed), export both as Hugging Face directories, and evaluate both with layer-wise "
            "Tatoeba-style retrieval (test split and a held-out Firefox split never trained on) and "
            "zero-shot cross-lingual transfer of an English-trained classifier. Prints a table and "
            "writes DIR/results.json, DIR/results.md, DIR/*.png, DIR/infoxlm/ and DIR/no-xlco/. "
            "About 9 minutes on two CPU cores; --quick takes under two minutes and only checks the "
            "pipeline. Re-running into the same DIR reuses the vocabulary, store and finished runs; SIGTERM "
            "ends the demo after the pre-training step in progress (exit 0), and re-running continues it.\n\n"
            "--setting paper runs the paper's main setting instead: it continues the small pre-trained "
            "masked LM shipped with infoxlm (XLM-R's stand-in) with the paper's recipe scaled to two CPU "
            "cores (the contrast changed where the paper's does not work at this scale: see BENCHMARKS.md, "
            "\"The paper's setting\"), trains InfoXLM and its ablations (no-xlco, no-tlm, no-mixup, "
            "no-momentum, last-layer; DIR/NAME each), and writes tables shaped like the paper's ablation "
            "tables with its numbers beside, and the layer-wise retrieval figure (InfoXLM, -XLCO, the "
            "starting point). About 41 minutes on two CPU cores."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example: infoxlm demo --output out/demo    then: infoxlm eval tatoeba --model out/demo/infoxlm …",
    )
    p.add_argument("--output", type=Path, default=Path("out/demo"), help="output directory DIR (default: out/demo)")
    p.add_argument(
        "--setting",
        choices=("default", "paper"),
        default="default",
        help="default: from scratch, InfoXLM against -XLCO (the demo's own recipe); paper: continue the "
        "shipped pre-trained masked LM with the paper's recipe and train its ablations",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="tiny budget on 3 languages: a pipeline check, not a result",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the vocabulary sample, data order, weights and classifier (default: 0); the same seed gives the same table",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars while pre-training")
    p.set_defaults(func=run_demo_command)


def run_demo_command(args: argparse.Namespace) -> int:
    from ..demo.run import run_demo

    if args.seed < 0:
        from ..errors import InfoXLMError

        raise InfoXLMError(f"--seed {args.seed}: expected a non-negative integer")
    from ..outputs import check_output_dir

    # A demo directory is reused by a second run (work/demo_settings.json says with which settings).
    check_output_dir(args.output, flag=None, written_by_us=lambda d: (d / "work" / "demo_settings.json").is_file())
    from ..demo.settings import FULL, PAPER, PAPER_QUICK, QUICK

    from ..train.stopping import RunStopped

    settings = {("default", False): FULL, ("default", True): QUICK, ("paper", False): PAPER, ("paper", True): PAPER_QUICK}
    try:
        run_demo(args.output, seed=args.seed, settings=settings[args.setting, args.quick], progress=not args.no_progress)
    except RunStopped as stopped:
        # SIGTERM / SIGUSR1 during a pre-training run: that run has its checkpoint; the demo
        # ends here (no further model, no results) and the same command continues it.
        print(f"[demo] stopped ({stopped.reason}); the same command continues the demo", flush=True)
    return 0
