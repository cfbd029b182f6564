"""``infoxlm prepare show``: decode the examples a run's step would train on.

The data a step sees depends on the run's config (preset, ``--config``, ``--set data.…``,
the seed), so it is resolved here exactly as ``infoxlm pretrain`` resolves it
(:mod:`infoxlm.train.config`); the decoding itself is :mod:`infoxlm.corpus.show`.

Examples::

    infoxlm prepare show store --objective mmlm --step 0 --examples 2
    infoxlm prepare show store --objective xlco --preset demo --set data.mixup=false
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from ..cli_args import OBJECTIVE_NAMES, PRESET_NAMES, non_negative_int, positive_int

__all__ = ["add_show_command"]


def add_show_command(prepare_commands: argparse._SubParsersAction) -> None:
    """Register ``show`` beside ``prepare mono``, ``parallel`` and ``inspect``."""
    p = prepare_commands.add_parser(
        "show",
        help="decode the examples a training step would see",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Build the examples of one optimizer step exactly as `infoxlm pretrain` would (same\n"
            "preset, --config, --set and seed) and print the first K of one objective as text:\n"
            "special tokens visible, each masked position as [INPUT→ORIGINAL] ([<mask>→▁Welt],\n"
            "a random piece, or the token kept). XLCO examples show their query and key views.\n\n"
            "examples:\n"
            "  infoxlm prepare show store --objective mmlm --step 0 --examples 2\n"
            "  infoxlm prepare show store --objective tlm --preset demo --step 100\n"
            "  infoxlm prepare show store --objective xlco --set data.mixup=false"
        ),
    )
    p.add_argument("store", type=Path, metavar="STORE", help="token store directory")
    p.add_argument("--objective", required=True, choices=OBJECTIVE_NAMES, help="which objective's examples")
    p.add_argument("--step", type=non_negative_int, default=0, help="optimizer step, 0 = the first (default: 0)")
    p.add_argument("--examples", type=positive_int, default=2, metavar="K", help="how many examples (default: 2)")
    p.add_argument(
        "--preset", default=None, choices=PRESET_NAMES,
        help="the run's preset (default: base, said on stderr; --config RUN/config.json gives a run's own settings)",
    )  # fmt: skip
    p.add_argument("--config", type=Path, default=None, help="the run's JSON config file, applied over the preset")
    p.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
        help="the run's overrides (repeatable): data.… fields and run.seed decide the examples",
    )  # fmt: skip
    p.set_defaults(func=run_show)


def run_show(args: argparse.Namespace) -> int:
    from ..data.pipeline import OBJECTIVES, DataPipeline
    from ..corpus.show import render_step
    from ..data.store import TOKENIZER_DIR, StoreError, TokenStore
    from ..tokenizer import Tokenizer
    from ..train.config import apply_overrides, load_config_file, resolve_config
    from ..train.presets import preset

    overrides = (load_config_file(args.config) if args.config else []) + args.overrides
    config = resolve_config(apply_overrides(preset(args.preset or "base"), overrides))
    store = TokenStore.open(args.store)
    if not (store.root / TOKENIZER_DIR).is_dir():
        raise StoreError(f"{store.root}: no {TOKENIZER_DIR}/ copy of the store's tokenizer; run any prepare into it again")
    tokenizer = Tokenizer.from_pretrained(store.root / TOKENIZER_DIR)
    # Only the objective shown needs its data: a store of monolingual text shows MMLM.
    others = {f"{o}_batch_size": 0 for o in OBJECTIVES if o != args.objective}
    pipeline = DataPipeline(store, dataclasses.replace(config.data, **others))
    print(render_step(pipeline, tokenizer, args.objective, args.step, args.examples))
    if args.preset is None and args.config is None:  # said last, so that an error stays one line
        print("prepare show: the base preset's data settings (no --preset or --config given)", file=sys.stderr)
    return 0
