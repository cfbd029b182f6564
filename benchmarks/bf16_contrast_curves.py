"""Does bf16 autocast change how training goes, and does the fast path behave as the plain one?

Runs the golden-curve training of ``tests/train/test_loop.py`` (the ``test`` preset, 60 steps,
lr 5e-3, on the test's small learnable corpus) four ways for each seed — fp32 or bf16
autocast, the trainer's fast path or the plain one — and prints one line per run: MMLM over
the first and last five steps, XLCO over steps 10–59 and the last five, and how many of
those steps have an XLCO loss above 1.

    .venv/bin/python benchmarks/bf16_contrast_curves.py --seeds 1 2 3 4 5 6

bf16 runs on whatever device the trainer picks; on a CPU, CPU autocast stands in for the
GPU's (``run.cpu_bf16=true``). "Plain" is ``run.fast_paths=false``, the straightforward
computation: padded passes (no packing), the whole top layer for every token, autograd's own
word-embedding gradients, the vocabulary unpadded, fp32 LayerNorm outputs, padded attention.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "train")]

from test_loop import GOLDEN_OVERRIDES, losses, structured_store  # noqa: E402

from infoxlm.train.config import apply_overrides  # noqa: E402
from infoxlm.train.loop import pretrain  # noqa: E402
from infoxlm.train.presets import preset  # noqa: E402


def run(store: Path, out: Path, seed: int, bf16: bool, plain: bool) -> str:
    variant = [f"run.cpu_bf16={str(bf16).lower()}", f"run.bf16={str(bf16).lower()}", f"run.fast_paths={str(not plain).lower()}"]
    cfg = apply_overrides(preset("test"), [*GOLDEN_OVERRIDES, f"run.seed={seed}", *variant])
    with contextlib.redirect_stdout(io.StringIO()):
        rows = losses(pretrain(cfg, store, out, progress=False))
    mmlm = np.array([r["loss/mmlm"] for r in rows])
    xlco = np.array([r["loss/xlco"] for r in rows])
    return (
        f"seed {seed} {'bf16' if bf16 else 'fp32'} {'plain' if plain else 'fast '}: "
        f"MMLM {mmlm[:5].mean():.3f} → {mmlm[-5:].mean():.3f}; XLCO steps 10–59 {xlco[10:].mean():.3f}, "
        f"last 5 {xlco[-5:].mean():.3f}, steps above 1: {int((xlco[10:] > 1).sum())}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3], help="run.seed values (default 1 2 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = structured_store(Path(tmp) / "store")
        for seed in args.seeds:
            for bf16 in (False, True):
                for plain in (False, True):
                    name = f"{seed}-{bf16}-{plain}"
                    print(run(store, Path(tmp) / name, seed, bf16, plain), flush=True)


if __name__ == "__main__":
    main()
