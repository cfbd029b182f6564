"""The word-embedding lookup's gradient under bf16 autocast: autograd's dense path against
infoxlm's in-place one.

Autograd's embedding backward builds a zero-filled V × d gradient for every lookup and then
adds it to ``.grad``; with XLM-R's 250,002 × 768 matrix that is a 768 MB temporary per
encoder pass, one pass per objective and micro-batch. infoxlm adds the looked-up rows'
gradient into ``.grad`` in place (``FastPaths.word_grad_in_place``, single process). The
lookup runs in fp32 under autocast too, so the in-place path holds there; this times
``Embeddings`` forward + backward (``--passes`` lookups of ``--batch`` × 512 ids accumulated
into one ``.grad``) both ways, alternating, and checks the gradients agree.

    python benchmarks/lookup_gradient.py                   # CPU bf16 autocast, XLM-R base vocabulary
    python benchmarks/lookup_gradient.py --device cuda     # the same on a GPU
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Sequence

import torch

from infoxlm.bench.timing import device_sync, peak_growth
from infoxlm.model.config import EncoderConfig
from infoxlm.model.encoder import Embeddings
from infoxlm.model.fast_paths import FastPaths


def direction(shape: torch.Size, embeddings: Embeddings, device: torch.device) -> torch.Tensor:
    """(B, T, d) fixed pseudo-random weights for the loss."""
    generator = torch.Generator(device=device).manual_seed(1)
    d = embeddings.word_embeddings.embedding_dim
    return torch.randn(*shape, d, generator=generator, device=device)


def accumulate(embeddings: Embeddings, batches: list[torch.Tensor]) -> tuple[float, int | None, torch.Tensor]:
    """Seconds and peak memory growth (bytes, the new .grad included) of the lookups' forward
    + backward from no gradient; the summed gradient."""
    device = batches[0].device
    sync = device_sync(device)
    embeddings.zero_grad(set_to_none=True)
    with peak_growth(device) as memory:
        sync()
        start = time.perf_counter()
        for ids in batches:
            with torch.autocast(device.type, dtype=torch.bfloat16):
                # A fixed random direction: any loss of the LayerNorm output's norm alone
                # would be constant, with a gradient of rounding noise.
                loss = (embeddings(ids).float() * direction(ids.shape, embeddings, device)).sum()
            loss.backward()
        sync()
        seconds = time.perf_counter() - start
    return seconds, memory["bytes"], embeddings.word_embeddings.weight.grad.clone()


def main(argv: Sequence[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--vocab", type=int, default=250_002, help="vocabulary size (default: XLM-R's 250,002)")
    parser.add_argument("--passes", type=int, default=3, help="lookups accumulated into one gradient (default: 3)")
    parser.add_argument("--batch", type=int, default=8, help="sequences of 512 ids per lookup (default: 8)")
    parser.add_argument("--repeat", type=int, default=4, help="timed rounds of each path, alternating (default: 4)")
    args = parser.parse_args(argv)
    for option in ("vocab", "passes", "batch", "repeat"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} {getattr(args, option)}: expected a positive number")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is visible")

    torch.manual_seed(0)
    # eval(): no dropout, so both paths see the same forward pass (gradients still flow).
    config = EncoderConfig.of_size("base", vocab_size=args.vocab)
    # The same weights, built once with each path.
    embeddings = {flag: Embeddings(config, FastPaths(word_grad_in_place=flag)).to(device).eval() for flag in (False, True)}
    embeddings[True].load_state_dict(embeddings[False].state_dict())
    batches = [torch.randint(3, args.vocab, (args.batch, 512), device=device) for _ in range(args.passes)]
    accumulate(embeddings[True], batches), accumulate(embeddings[False], batches)  # warm-up
    runs: dict[bool, list[tuple[float, int | None]]] = {False: [], True: []}
    grads: dict[bool, torch.Tensor] = {}
    for _ in range(args.repeat):
        for in_place in (False, True):
            seconds, grown, grads[in_place] = accumulate(embeddings[in_place], batches)
            runs[in_place].append((seconds, grown))
    # Largest difference relative to the largest gradient entry (fp32 summation order differs).
    difference = float((grads[True] - grads[False]).abs().max() / grads[False].abs().max())
    figures = {
        "device": str(device),
        "passes": args.passes,
        "ids_per_pass": args.batch * 512,
        "relative_difference": difference,
    }
    for in_place, name in ((False, "dense"), (True, "in_place")):
        seconds = [s for s, _ in runs[in_place]]
        grown = [g for _, g in runs[in_place] if g is not None]
        figures[name] = {
            "median_seconds": statistics.median(seconds),
            "seconds": seconds,
            "peak_growth_mb": max(grown) / 2**20 if grown else None,
        }
        print(
            f"{name:>8}: {statistics.median(seconds):.3f} s median ({', '.join(f'{s:.3f}' for s in seconds)}), "
            f"peak memory growth {figures[name]['peak_growth_mb'] or 0:.0f} MB (the gradient itself included)"
        )
    print(f"gradients agree to {difference:.1e} (relative); {args.passes} lookups of {args.batch} × 512 ids on {device}")
    return figures


if __name__ == "__main__":
    main()
