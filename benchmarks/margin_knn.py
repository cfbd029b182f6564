"""How close the margin-scored k-NN comes to its matrix-product lower bound.

Mines random unit vectors (n sources × n targets, width d) with ``infoxlm.eval.margin`` and
compares the time with 2·n²·d FLOPs (the two directions' similarity products each cost n²·d
multiply-adds, counted once: a search can share them) at this machine's own rate for a
product of the chunk's shape, (chunk, d) @ (d, n). Prints the phases, the ratio and the peak
resident memory, which stays near the vectors plus a chunk × n block.

    python benchmarks/margin_knn.py                 # 10^5 × 10^5 at d = 768 (minutes of CPU)
    python benchmarks/margin_knn.py --n 20000       # a quick check
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from typing import Sequence

import torch

from infoxlm.eval.margin import BACKENDS, MarginOptions, candidate_scores, neighbourhood, select_pairs, unit_rows


def product_rate(keys: torch.Tensor, chunk: int, repeat: int = 3) -> float:
    """FLOP/s of (chunk, d) @ (d, n) in float32: the shape every similarity block has, on the
    keys themselves (no second n × d matrix, so the peak memory is the search's own)."""
    n, d = keys.shape
    a = keys[: min(chunk, n)].clone()
    a @ keys.T  # warm-up: thread pool, allocator
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        a @ keys.T
        if keys.device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * len(a) * n * d / best


def timed(label: str, times: dict, work):
    start = time.perf_counter()
    result = work()
    times[label] = time.perf_counter() - start
    return result


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="sentences on each side (default: 100000)")
    parser.add_argument("--d", type=int, default=768, help="vector width (default: 768)")
    parser.add_argument("--k", type=int, default=4, help="neighbourhood size (default: 4)")
    parser.add_argument("--chunk", type=int, default=4096, help="similarity block rows (default: 4096)")
    parser.add_argument("--backend", default="torch", choices=BACKENDS, help="search backend (default: torch)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)

    device = torch.device(args.device)
    options = MarginOptions(k=args.k, chunk=args.chunk, backend=args.backend)
    generator = torch.Generator().manual_seed(0)
    src = unit_rows(torch.randn(args.n, args.d, generator=generator)).to(device)  # (n, d)
    trg = unit_rows(torch.randn(args.n, args.d, generator=generator)).to(device)  # (n, d)
    rate = product_rate(trg, args.chunk)

    times: dict[str, float] = {}
    fwd, bwd = timed("knn", times, lambda: neighbourhood(src, trg, options))
    scores = timed("margin", times, lambda: candidate_scores(fwd, bwd, options.margin))
    pairs = timed("select", times, lambda: select_pairs(fwd, bwd, *scores, options.strategy))
    total = sum(times.values())
    bound = 2 * args.n * args.n * args.d / rate
    figures = {
        "n": args.n, "d": args.d, "k": args.k, "chunk": args.chunk, "backend": args.backend, "device": args.device,
        "threads": torch.get_num_threads(), "pairs": len(pairs), "seconds": times, "total_s": total,
        "product_flops": rate, "lower_bound_s": bound, "ratio": total / bound,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # Linux: KiB
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"{args.n} × {args.n} at d = {args.d}, k = {args.k}, chunk {args.chunk}, {args.backend} on "
              f"{args.device} ({figures['threads']} threads): {len(pairs)} pairs")
        print("  " + "  ".join(f"{label} {seconds:.2f} s" for label, seconds in times.items()) + f"  total {total:.2f} s")
        print(f"  lower bound {bound:.2f} s (2·n²·d at {rate / 1e9:.1f} GFLOP/s)  ratio {figures['ratio']:.2f}")
        print(f"  peak resident memory {figures['peak_rss_mib']:.0f} MiB")
    return figures


if __name__ == "__main__":
    main()
