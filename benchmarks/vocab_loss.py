"""How fast per-token cross-entropy runs over the masked-LM head's logits, four ways, on a GPU.

The logits of one base micro-batch's masked tokens: N masked tokens × V = 250,048 columns (XLM-R's 250,002
padded to a multiple of 64, −inf in the padding), bf16. For each way it times the forward
alone and the backward alone (median of ``--repeat`` runs after a warm-up), gives the memory
traffic as a rate — the forward must read N·V·2 bytes, the backward read them again and
write the gradient, 2·N·V·2 — and checks loss and gradient against float64:

- ``plain``: ``F.cross_entropy`` on the logits cast to fp32 (what autocast does);
- ``compiled``: the same function through ``torch.compile`` (dynamic shapes);
- ``triton``: ``fused_cross_entropy.py`` (two one-pass kernels), what the trainer runs.

``--sweep`` also times the Triton kernels for a few block sizes and warp counts.

    python benchmarks/vocab_loss.py                  # N = 10,000
    python benchmarks/vocab_loss.py --rows 20000 --sweep
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F


def _time(fn, repeat: int) -> float:
    """Median seconds of fn() over ``repeat`` runs, after one untimed run."""
    fn()
    torch.cuda.synchronize()
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def _time_backward(way, logits: torch.Tensor, targets: torch.Tensor, scale: torch.Tensor, repeat: int) -> float:
    """Median seconds of the backward alone (CUDA events around it), a fresh graph each run."""
    seconds = []
    for i in range(repeat + 1):
        x = logits.clone().requires_grad_()
        loss = (way(x, targets) * scale).sum()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        loss.backward()
        end.record()
        torch.cuda.synchronize()
        if i:  # the first run compiles
            seconds.append(start.elapsed_time(end) / 1e3)
        del x, loss
    return statistics.median(seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000, help="masked tokens N (default: 10,000)")
    parser.add_argument("--vocab", type=int, default=250_002, help="vocabulary V before padding (default: 250,002)")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per way (default: 10)")
    parser.add_argument("--sweep", action="store_true", help="also time other block sizes and warp counts")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("vocab_loss.py needs a CUDA GPU", file=sys.stderr)
        return 1
    from infoxlm.objectives import fused_cross_entropy as fused

    torch.manual_seed(0)
    padded = args.vocab + (-args.vocab % 64)
    logits = (2 * torch.randn(args.rows, padded, device="cuda")).to(torch.bfloat16)
    logits[:, args.vocab :] = float("-inf")
    targets = torch.randint(0, args.vocab, (args.rows,), device="cuda")
    scale = torch.rand(args.rows, device="cuda")  # per-token loss weights, as the objectives' normalisers give
    gigabytes = logits.numel() * logits.element_size() / 1e9

    # float64 reference on a slice of rows (the whole would need 20 GB more)
    check = slice(0, min(args.rows, 512))
    exact = logits[check].double().requires_grad_()
    exact_loss = F.cross_entropy(exact, targets[check], reduction="none")
    (exact_grad,) = torch.autograd.grad((exact_loss * scale[check]).sum(), exact)

    def plain(x, t):
        return F.cross_entropy(x.float(), t, reduction="none")

    compiled = torch.compile(plain, dynamic=True)
    ways = {
        "plain": plain,
        "compiled": compiled,
        "triton": fused.fused_token_cross_entropy,
    }
    print(f"N {args.rows:,} × V {padded:,} bf16 ({gigabytes:.2f} GB of logits), {torch.cuda.get_device_name()}")
    for name, way in ways.items():
        def forward():
            with torch.no_grad():
                way(logits, targets)

        forward_s = _time(forward, args.repeat)
        backward_s = _time_backward(way, logits, targets, scale, args.repeat)
        x = logits[check].clone().requires_grad_()
        loss = way(x, targets[check])
        (grad,) = torch.autograd.grad((loss * scale[check]).sum(), x)
        loss_error = float((loss.detach().double() - exact_loss.detach()).norm() / exact_loss.detach().norm())
        grad_error = float((grad.double() - exact_grad).norm() / exact_grad.norm())
        both = forward_s + backward_s
        print(f"  {name:16s} forward {forward_s * 1e3:6.2f} ms ({gigabytes / forward_s:5.0f} GB/s)  "
              f"backward {backward_s * 1e3:6.2f} ms ({2 * gigabytes / backward_s:5.0f} GB/s)  "
              f"both {both * 1e3:6.2f} ms  vs float64: loss {loss_error:.1e}, gradient {grad_error:.1e}", flush=True)

    if args.sweep:
        defaults = fused.BLOCK, fused.NUM_WARPS
        for block in (2048, 4096, 8192, 16384):
            for warps in (4, 8, 16):
                fused.BLOCK, fused.NUM_WARPS = block, warps

                forward_s = _time(lambda: fused.fused_token_cross_entropy(logits, targets), args.repeat)
                backward_s = _time_backward(fused.fused_token_cross_entropy, logits, targets, scale, args.repeat)
                print(f"  sweep BLOCK {block:6d} warps {warps:2d}: forward {forward_s * 1e3:6.2f} ms, "
                      f"backward {backward_s * 1e3:6.2f} ms", flush=True)
        fused.BLOCK, fused.NUM_WARPS = defaults
    return 0


if __name__ == "__main__":
    sys.exit(main())
