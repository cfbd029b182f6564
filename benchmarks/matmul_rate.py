"""How fast this machine multiplies matrices of the shapes a joint step uses: every product's
rate, the ceiling of any implementation of the step.

For a size of ``infoxlm bench``: a 2048² square product, the step's forward products
(projections, the feed-forward pair, the vocabulary decoder at the masked tokens) and the two
products each one's backward makes, fp32 on a CPU and bf16 on a GPU (the code and the list
are in ``infoxlm/bench/matmul_rate.py``). ``infoxlm bench --peak-flops measure`` takes the
best of these rates, measured around its timed steps, as a CPU's MFU denominator.

    python benchmarks/matmul_rate.py --size demo                # fp32 on the CPU
    python benchmarks/matmul_rate.py --size base --device cuda  # bf16 on a GPU
"""

from __future__ import annotations

import argparse
import json
from typing import Sequence

import torch

from infoxlm.bench.matmul_rate import product_dtype, step_product_rates


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="demo", help="a bench size: test, demo, base, large (default: demo)")
    parser.add_argument("--device", default="cpu", help="cpu (fp32, default) or cuda (bf16)")
    parser.add_argument("--tokens", type=int, default=4096, help="rows of the step-shaped products (default: 4096)")
    parser.add_argument("--repeat", type=int, default=5, help="timed products per shape (default: 5)")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible")
    dtype = product_dtype(device)
    rates = step_product_rates(args.size, device, tokens=args.tokens, repeat=args.repeat)
    figures = {
        "size": args.size,
        "device": args.device,
        "dtype": str(dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "rates_flops": rates,
        "best_flops": max(rates.values()),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"{args.size} shapes, {args.tokens} tokens, {figures['dtype']} on {args.device} ({figures['threads']} threads):")
        for label, rate in rates.items():
            print(f"  {rate / 1e9:9.1f} GFLOP/s  {label}")
        print(f"best: {figures['best_flops']:.3g} FLOP/s (what infoxlm bench --peak-flops measure divides by)")
    return figures


if __name__ == "__main__":
    main()
