"""Does bf16 autocast change how training goes, and does the fast path behave as the plain one?

Runs the golden-curve training of ``tests/train/test_loop.py`` (the ``test`` preset, 60 steps,
lr 5e-3, on the test's small learnable corpus) four ways for each seed — fp32 or bf16
autocast, the trainer's fast path or the plain one — and prints one line per run: MMLM over
the first and last five steps, XLCO over steps 10–59 and the last five, and how many of
those steps have an XLCO loss above 1.

    .venv/bin/python benchmarks/bf16_contrast_curves.py --seeds 1 2 3 4 5 6

bf16 runs on whatever device the trainer picks; on a CPU, CPU autocast stands in for the
GPU's (the trainer enables autocast on CUDA only, so the script opens it around the run).
"Plain" is the straightforward computation: padded passes (no packing), the whole top layer
for every token, autograd's own word-embedding gradients, the vocabulary unpadded.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "train")]

from test_loop import GOLDEN_OVERRIDES, losses, structured_store  # noqa: E402

from infoxlm.train import joint_model  # noqa: E402
from infoxlm.train.config import apply_overrides, preset  # noqa: E402
from infoxlm.train.loop import pretrain  # noqa: E402


@contextlib.contextmanager
def plain_path():
    """The trainer's model without its speed-ups (see the module docstring)."""
    init = joint_model.JointModel.__init__

    def plain_init(self, encoder, contrast, **options):
        plain = {"grad_in_place": False, "skip_padding": False, "top_rows_only": False, "pad_vocabulary": False}
        init(self, encoder, contrast, **{**options, **plain})

    joint_model.JointModel.__init__ = plain_init
    try:
        yield
    finally:
        joint_model.JointModel.__init__ = init


@contextlib.contextmanager
def bf16_autocast(device_type: str):
    """bf16 autocast for the whole run, on the device the trainer uses."""
    real = torch.autocast
    torch.autocast = lambda *_args, **_kwargs: real(device_type, dtype=torch.bfloat16)
    try:
        yield
    finally:
        torch.autocast = real


def run(store: Path, out: Path, seed: int, bf16: bool, plain: bool) -> str:
    cfg = apply_overrides(preset("test"), [*GOLDEN_OVERRIDES, f"run.seed={seed}"])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with contextlib.ExitStack() as stack:
        if bf16:
            stack.enter_context(bf16_autocast(device))
        if plain:
            stack.enter_context(plain_path())
        stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
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
