"""Two variants of the CPU joint step in one process, step by step: the ratio of their times.

A shared machine's speed moves within minutes, so variants timed in separate runs cannot be
compared. Here A (the trainer's step as it is) and B (one variant) are built with the same
weights and run alternately on the same batches, which one goes first alternating too; the
first round warms both up (and compiles B's layers for ``compiled``). Printed: each side's
median step, B/A of the medians and the median of the paired ratios.

Variants: ``none`` (B = A: the noise floor), ``no-packing`` (``FastPaths.skip_padding`` off:
position-wise parts on the padded layout), ``compiled`` (``run.compile=true``).

    python benchmarks/cpu_step_ab.py none --rounds 6 --threads 1
    python benchmarks/cpu_step_ab.py compiled --rounds 6 --threads 1
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

import torch

from cpu_step_profile import ProfiledPhases, build
from infoxlm.data.synthetic_batches import synthetic_step
from infoxlm.model.fast_paths import FastPaths

VARIANTS = ("none", "no-packing", "compiled")


def build_b(variant: str, size: str):
    if variant == "no-packing":
        return build(size, dataclasses.replace(FastPaths.training(single_process=True), skip_padding=False))[0]
    return build(size, compile_layers=variant == "compiled")[0]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("variant", choices=VARIANTS)
    parser.add_argument("--size", default="demo")
    parser.add_argument("--rounds", type=int, default=6, help="timed rounds of one A and one B step (default: 6)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    a, spec = build(args.size)
    b = build_b(args.variant, args.size)
    data = [synthetic_step(spec, i) for i in range(args.rounds + 1)]
    seconds: dict[str, list[float]] = {"A": [], "B": []}
    for i in range(args.rounds + 1):
        order = (("A", a), ("B", b)) if i % 2 == 0 else (("B", b), ("A", a))
        for name, engine in order:
            started = time.perf_counter()
            engine.step(lambda j: data[j], i, ProfiledPhases())
            if i:  # round 0 warms up
                seconds[name].append(time.perf_counter() - started)
    ta, tb = statistics.median(seconds["A"]), statistics.median(seconds["B"])
    paired = [y / x for x, y in zip(seconds["A"], seconds["B"])]
    print(f"{args.variant} ({torch.get_num_threads()} threads, {args.rounds} rounds): A {ta:.3f} s, B {tb:.3f} s, "
          f"B/A {tb / ta:.3f}, paired median {statistics.median(paired):.3f} ({', '.join(f'{r:.2f}' for r in paired)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
