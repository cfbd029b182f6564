#!/usr/bin/env python3
"""Build the small pre-trained encoder shipped in ``src/infoxlm/demo/checkpoint``.

``infoxlm demo --setting paper`` runs the paper's main setting: it *continues* a pre-trained
multilingual masked LM, as InfoXLM continues XLM-R. This script makes that starting point with
infoxlm itself, in XLM-R's role: a masked LM trained on monolingual text only (MMLM, no TLM,
no XLCO), from scratch, on the demo corpus's training text:

* the monolingual text of English and the 14 languages, and
* each side of the training pairs as monolingual text of its language (one sentence a line;
  no pair is ever put together, so nothing tells the model which sentences translate which).

The vocabulary is the full demo's (8,000 SentencePiece pieces, learned on one thread with the
seed, so the same file on any machine). Dev, test and the held-out Firefox split are never
read. The weights are stored as float16 (half the size; they load into float32); the
directory gets a model card naming the data and its licences.

    python scripts/build_demo_checkpoint.py                       # into src/infoxlm/demo/checkpoint
    python scripts/build_demo_checkpoint.py --steps 200 --output /tmp/ckpt   # a quick look

The result is a function of the seed and the corpus (on a CPU, where the training is
bit-for-bit repeatable); the card records how long the build took.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from safetensors.torch import load_file, save_file

from infoxlm.corpus.prepare import prepare_monolingual
from infoxlm.demo import corpus
from infoxlm.demo.checkpoint import CARD_NAME, UNIVERSAL_LAYER
from infoxlm.demo.run import FULL, learn_vocabulary, training_text
from infoxlm.model.hub import WEIGHTS_NAME, record_contrast_layer
from infoxlm.train.config import apply_overrides
from infoxlm.train.export import export
from infoxlm.train.loop import pretrain
from infoxlm.train.presets import preset
from infoxlm.train.stopping import RunStopped

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", type=Path, default=REPO / "src/infoxlm/demo/checkpoint", help="model directory to (re)write")
    parser.add_argument("--work", type=Path, default=Path("out/demo-checkpoint"), help="vocabulary, store and run (reused)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the shipped recipe's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="a change to the recipe (repeatable), for trying one out; the shipped checkpoint uses none")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    text = training_text(args.work, FULL)
    tokenizer = learn_vocabulary(text, args.work / "tokenizer", FULL, args.seed, print)
    store = args.work / "store"
    for lang in text["mono"].keys() | text["sides"].keys():
        inputs = [p for p in (text["mono"].get(lang), text["sides"].get(lang)) if p is not None]
        prepare_monolingual(lang, inputs, tokenizer, store, show_progress=False)

    config = preset("demo-checkpoint")  # the recipe (train/presets.py)
    overrides = [f"run.seed={args.seed}", *args.overrides]
    if args.steps is not None:
        overrides += [f"optim.max_steps={args.steps}", f"run.save_every={args.steps}"]
    apply_overrides(config, overrides)
    name = "-".join([f"seed{args.seed}", f"steps{config.optim.max_steps}", *args.overrides]).replace("/", "_")
    try:
        run = pretrain(config, store, args.work / f"run-{name}")  # returns at once when the run is finished
    except RunStopped as stopped:  # SIGTERM / SIGUSR1: its checkpoint is written; nothing is exported
        print(f"{stopped}; the same command continues it", file=sys.stderr)
        return 0

    if args.output.exists():
        shutil.rmtree(args.output)
    export(run, args.output)
    _to_float16(args.output / WEIGHTS_NAME)
    record_contrast_layer(args.output, UNIVERSAL_LAYER)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line]
    last = [r["loss/mmlm"] for r in rows if "loss/mmlm" in r][-5:]
    # Training time from the run's own log (a rerun reuses a finished run): the span between
    # the first and last logged steps, extended to the steps before the first at the same rate.
    span = rows[-1]["time"] - rows[0]["time"]
    seconds = span * rows[-1]["step"] / (rows[-1]["step"] - rows[0]["step"])
    _write_card(args.output, config, overrides, seconds, sum(last) / len(last))
    print(f"{args.output}: trained in {seconds:.0f} s, last MMLM loss {sum(last) / len(last):.2f} ({time.perf_counter() - started:.0f} s here)")
    return 0


def _to_float16(path: Path) -> None:
    tensors = {name: t.half() if t.is_floating_point() else t for name, t in load_file(path).items()}
    save_file(tensors, path, metadata={"format": "pt"})


def _write_card(directory: Path, config, overrides: list[str], seconds: float, mmlm_loss: float) -> None:
    """README.md (the model card) and the licence files of the data it was trained on."""
    source = corpus.corpus_dir()
    licences = sorted(source.glob("LICENSE.*.txt"))  # the corpus's LICENSES.md lists its own files: not copied
    for licence in licences:
        shutil.copy(licence, directory / licence.name)
    (directory / "README.md").unlink(missing_ok=True)  # export's generic card; this one replaces it
    model = config.model
    card = f"""# infoxlm demo starting point: a small multilingual masked LM

The encoder `infoxlm demo --setting paper` continues, standing in for XLM-R: an XLM-R-shaped
encoder ({model.size}: 4 layers × 256, 4 heads, vocabulary 8,000) pre-trained from scratch
with **multilingual masked language modelling only** by `scripts/build_demo_checkpoint.py`
(`infoxlm pretrain --preset demo-checkpoint` with `{' '.join(overrides)}`).

- Training text: the demo corpus's monolingual text in English and 14 languages (ar bg de el
  es fr hi ru sw th tr ur vi zh) and each side of its training pairs as monolingual text of its
  language, never as pairs. The corpus's dev, test and held-out (Firefox) splits were not used.
- Result: MMLM loss {mmlm_loss:.2f} (mean of the last five logged values) after
  {config.optim.max_steps} steps; {seconds / 60:.0f} minutes of training on a 2-core CPU.
- Weights in float16 (`{WEIGHTS_NAME}`); they load into float32. `config.json` records
  layer {UNIVERSAL_LAYER} as the universal layer (`infoxlm_contrast_layer`): the layer at which this
  masked LM retrieves translations best on the demo's dev split, the paper's principle for
  choosing where XLCO contrasts.
- Data licences: the corpus is built from LibreOffice (MPL-2.0) and Django (BSD-3-Clause)
  translations, and the weights are made from that text; see {' and '.join(p.name for p in licences)}
  here, and the corpus's README and LICENSES.md (`src/infoxlm/demo/corpus/`) for which text
  comes from which source under which terms.

It is a demonstration model trained on a few megabytes of software text, not a general-purpose
encoder.
"""
    (directory / CARD_NAME).write_text(card, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
