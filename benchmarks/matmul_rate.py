"""How fast this machine multiplies matrices of the shapes a joint step uses: the ceiling of any
implementation of the step, and the reference to read ``infoxlm bench`` figures against.

A joint step is mostly matrix products (on the 2-core CPU of BENCHMARKS.md, ~73 % of the
demo-size step's time); no implementation of the same arithmetic can run faster than these
products do. For a size of ``infoxlm bench`` this times, with the device synchronised:

- a large square product (the kernel's best case);
- the step's forward products: tokens × d by d × d (attention projections), d × f and f × d
  (feed-forward), and masked tokens × d by d × V (the tied vocabulary decoder);
- for each, the two products its backward pass makes (input and weight gradient), with the
  operand that autograd hands over transposed.

The best rate is what to pass as ``infoxlm bench --peak-flops`` to get an MFU on a CPU (the
GPU's datasheet peak is used by default there).

    python benchmarks/matmul_rate.py --size demo              # fp32 on the CPU
    python benchmarks/matmul_rate.py --size base --device cuda  # bf16 on a GPU
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Sequence

import torch

from infoxlm.bench.sizes import bench_size
from infoxlm.model.config import EncoderConfig


def product_rate(
    m: int, k: int, n: int, *, device: torch.device, dtype: torch.dtype, transposed: str = "", repeat: int
) -> float:
    """FLOP/s of (m × k) @ (k × n), the median of ``repeat`` products after two warm-ups.

    ``transposed``: "left" or "right" makes that operand a transposed view of a contiguous
    tensor, as autograd hands them to the backward products."""
    def operand(rows: int, cols: int, stored_transposed: bool) -> torch.Tensor:
        if stored_transposed:
            return torch.randn(cols, rows, device=device, dtype=dtype).t()
        return torch.randn(rows, cols, device=device, dtype=dtype)

    left, right = operand(m, k, transposed == "left"), operand(k, n, transposed == "right")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    seconds = []
    for i in range(repeat + 2):
        sync()
        start = time.perf_counter()
        torch.mm(left, right)
        sync()
        if i >= 2:
            seconds.append(time.perf_counter() - start)
    return 2.0 * m * k * n / statistics.median(seconds)


def step_products(size_name: str, tokens: int) -> dict[str, tuple[int, int, int, str]]:
    """(m, k, n, transposed operand) of a bench size's products, ``tokens`` rows at a time.

    Each forward product X (tokens × k) · W (k × n) brings two in the backward pass: the input
    gradient dY · Wᵀ (tokens × n · n × k) and the weight gradient Xᵀ · dY (k × tokens · tokens × n).
    """
    size = bench_size(size_name)
    config = EncoderConfig.preset(size.encoder, vocab_size=size.vocab_size)
    d, f, V = config.hidden_size, config.intermediate_size, config.vocab_size
    masked = max(1, tokens * 15 // 100)
    forward = {
        "projection": (tokens, d, d),
        "feed-forward in": (tokens, d, f),
        "feed-forward out": (tokens, f, d),
        "vocabulary decoder": (masked, d, V),
    }
    products = {"square 2048": (2048, 2048, 2048, "")}
    for name, (m, k, n) in forward.items():
        products[f"{name}: forward"] = (m, k, n, "")
        products[f"{name}: input gradient"] = (m, n, k, "right")
        products[f"{name}: weight gradient"] = (k, m, n, "left")
    return products


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
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    rates = {}
    for name, (m, k, n, transposed) in step_products(args.size, args.tokens).items():
        rates[f"{name} ({m} × {k} · {k} × {n})"] = product_rate(
            m, k, n, device=device, dtype=dtype, transposed=transposed, repeat=args.repeat
        )
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
        print(f"best: {figures['best_flops']:.3g} FLOP/s (pass as infoxlm bench --peak-flops for an MFU)")
    return figures


if __name__ == "__main__":
    main()
