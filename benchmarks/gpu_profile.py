"""Where a GPU joint step spends its time: timed steps and a torch.profiler breakdown.

Builds the benchmark's infoxlm side (``EngineStep``, the trainer's own step) for a size,
runs warm-up steps, then

1. with ``--timed N``: times N steps with the device synchronised around each (no
   profiler), and prints the median step, tokens/s, MFU and peak memory on one line
   starting with ``TIMED`` — the line to compare between variants;
2. unless ``--no-profile``: profiles ``--steps`` more steps and prints the step's wall time
   against the device's busy time (a step whose wall time is far above its busy time is
   bound by the host: Python, kernel launches, per-shape set-up), device time grouped into
   matrix products, attention, copies and casts, the optimizer, … and, without
   ``--summary``, the top kernels and the top host events by their own CPU time.

Variants: ``--batch`` / ``--max-tokens`` (global batch and micro-batch budget), ``--fp32``
(no autocast), ``--compile`` (``torch.compile`` of every encoder layer, dynamic shapes),
``--fp32-residual`` (LayerNorm outputs in fp32 under autocast, as plain autocast leaves
them), ``--padded-attention`` (SDPA over the padded layout instead of ``varlen_attn`` over
packed tokens), ``--unpadded-vocab`` (the head's product over V = 250,002 columns as they
are, not padded to a multiple of 64).

    python benchmarks/gpu_profile.py --size base                        # profile, bf16 autocast
    python benchmarks/gpu_profile.py --size base --timed 6 --no-profile
    python benchmarks/gpu_profile.py --size base --timed 6 --compile --no-profile
    python benchmarks/gpu_profile.py --size test --device cpu --timed 2 # smoke test without a GPU
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from infoxlm.commands.bench import parse_batches
from infoxlm.bench.engine_step import EngineStep
from infoxlm.train.flops import ModelShape, peak_bf16_flops
from infoxlm.bench.step_benchmark import data_flops, fill_queue, train_config
from infoxlm.bench.sizes import Batches, bench_size
from infoxlm.data.synthetic_batches import SyntheticSpec, step_tokens, synthetic_step
from infoxlm.bench.timing import PhaseTimer, device_sync
from infoxlm.data.pipeline import StepData
from infoxlm.model.config import EncoderConfig
from infoxlm.model.fast_paths import FastPaths

# Kernel-name fragments → group, first match wins.
GROUPS = (
    ("attention", ("flash", "fmha", "attention", "efficient")),
    ("matmul", ("gemm", "cutlass", "sm90_xmma", "nvjet", "cublas", "matmul", "wgmma")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    # Before copies: the fused cross-entropy's Triton kernels are named after every op they
    # fused, "_to_copy" among them.
    ("softmax / loss", ("softmax", "nll", "log_softmax", "cross_entropy")),
    ("copy / cast", ("copy", "cast", "memcpy", "fill")),
    ("index / scatter", ("index", "scatter", "gather", "nonzero")),
    ("norm", ("layer_norm", "layernorm")),
)


def group_of(kernel_name: str) -> str:
    lowered = kernel_name.lower()
    for group, fragments in GROUPS:
        if any(f in lowered for f in fragments):
            return group
    return "other elementwise / reduce"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="base", help="a bench size: test, demo, base, large (default: base)")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu (a smoke test: no MFU, no device memory)")
    parser.add_argument("--batch", default=None, metavar="MMLM,TLM,XLCO", help="examples per step (default: the size's)")
    parser.add_argument("--max-tokens", type=int, default=None, help="padded tokens per micro-batch (default: the size's)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default: 3)")
    parser.add_argument("--timed", type=int, default=0, help="steps timed without the profiler (default: 0)")
    parser.add_argument("--steps", type=int, default=3, help="profiled steps (default: 3)")
    parser.add_argument("--rows", type=int, default=30, help="rows of the kernel and host tables (default: 30)")
    parser.add_argument("--fp32", action="store_true", help="no bf16 autocast")
    parser.add_argument("--compile", action="store_true", help="torch.compile every encoder layer (dynamic shapes)")
    parser.add_argument("--fp32-residual", action="store_true", help="LayerNorm outputs in fp32 under autocast")
    parser.add_argument("--padded-attention", action="store_true", help="no varlen_attn: SDPA over the padded layout")
    parser.add_argument("--cudnn-attention", action="store_true", help="cuDNN's SDPA kernel first for passes without padding")
    parser.add_argument("--unpadded-vocab", action="store_true", help="the head's product over V as it is, not padded")
    parser.add_argument("--no-profile", action="store_true", help="only the timed steps")
    parser.add_argument("--summary", action="store_true", help="of the profile, only the wall / busy line and the groups")
    return parser.parse_args(argv)


def build(args: argparse.Namespace, device: torch.device) -> tuple[EngineStep, list[StepData], ModelShape, Batches]:
    """The engine (queue pre-filled, layers compiled if asked) and every step's batches."""
    size = bench_size(args.size)
    batches = parse_batches(args.batch, args.max_tokens, size.batches(device.type))
    spec = SyntheticSpec(size.vocab_size, size.block_size, size.tlm_max_length, size.xlco_max_length,
                         batches.mmlm, batches.tlm, batches.xlco, batches.max_tokens)
    shape = ModelShape.of(EncoderConfig.of_size(size.encoder, vocab_size=size.vocab_size))
    config = train_config(size, device, not args.fp32)
    config.run.compile = args.compile
    fast_paths = dataclasses.replace(
        FastPaths.training(single_process=True),
        low_precision_residual=not args.fp32_residual,
        varlen_attention=not args.padded_attention,
        cudnn_attention=args.cudnn_attention,
        padded_vocabulary=not args.unpadded_vocab,
    )
    engine = EngineStep(config, device, vocab_size=size.vocab_size, fast_paths=fast_paths)
    fill_queue(engine, spec, 0)
    data = [synthetic_step(spec, i) for i in range(args.warmup + args.timed + args.steps)]
    return engine, data, shape, batches


def variant_label(args: argparse.Namespace) -> str:
    """The TIMED line's note of the variants asked for ('' for the default step)."""
    names = ("compile", "fp32_residual", "padded_attention", "cudnn_attention", "unpadded_vocab")
    return "".join(f" {name.replace('_', '-')}" for name in names if getattr(args, name))


def run_steps(engine: EngineStep, data: list[StepData], indices: range, sync) -> list[float]:
    """Run the steps, each timed with the device synchronised before and after: seconds each."""
    seconds = []
    for i in indices:
        sync()
        started = time.perf_counter()
        engine.step(lambda j: data[j], i, PhaseTimer())
        sync()
        seconds.append(time.perf_counter() - started)
    return seconds


def report_timed(args, engine: EngineStep, data: list[StepData], seconds: list[float], shape: ModelShape, batches: Batches) -> None:
    timed = data[args.warmup : args.warmup + args.timed]
    step = statistics.median(seconds)
    flops = statistics.median(data_flops(d, shape, engine) for d in timed)
    tokens = statistics.median(step_tokens(d) for d in timed)
    line = (f"TIMED size {args.size} batches {batches.mmlm},{batches.tlm},{batches.xlco} max_tokens {batches.max_tokens}"
            f"{variant_label(args)}: step {step * 1e3:.1f} ms (min {min(seconds) * 1e3:.1f}), "
            f"{tokens / step:,.0f} tokens/s")
    if engine.device.type == "cuda":
        peak = peak_bf16_flops(torch.cuda.get_device_name(engine.device))
        line += f", MFU {flops / step / peak:.1%}" if peak else ""
        line += f", peak {torch.cuda.max_memory_allocated(engine.device) / 2**30:.1f} GiB"
    print(line, flush=True)


def report_profile(args, prof, wall: float) -> None:
    """Device time by group and kernel, host time by event, per step."""
    n = args.steps
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy: dict[str, float] = defaultdict(float)  # µs per group
    by_kernel: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])  # µs, launches
    for e in kernels:
        us = e.device_time if hasattr(e, "device_time") else e.cuda_time
        busy[group_of(e.name)] += us
        by_kernel[e.name][0] += us
        by_kernel[e.name][1] += 1
    total = sum(busy.values()) or 1.0
    dtype = "bf16 autocast" if args.device.startswith("cuda") and not args.fp32 else "fp32"
    print(f"size {args.size}, {dtype}: wall per step {wall * 1e3:.1f} ms "
          f"(profiler on); device busy per step {sum(busy.values()) / n / 1e3:.1f} ms; kernels per step {len(kernels) / n:.0f}")
    print("\nby group (ms per step, share):")
    for group, us in sorted(busy.items(), key=lambda kv: -kv[1]):
        print(f"  {group:28s} {us / n / 1e3:8.2f}  {us / total:6.1%}")
    if args.summary:
        return
    print(f"\ntop {args.rows} kernels (ms per step, launches per step):")
    for name, (us, count) in sorted(by_kernel.items(), key=lambda kv: -kv[1][0])[: args.rows]:
        print(f"  {us / n / 1e3:8.2f} {count / n:6.0f}  {name[:150]}")
    # Where the Python process spends a step: slow operators, and runtime calls such as
    # cudaStreamSynchronize or cudaMalloc.
    host: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CPU:
            host[e.name][0] += e.self_cpu_time_total
            host[e.name][1] += 1
    print(f"\ntop {args.rows} host events by self CPU time (ms per step, calls per step):")
    for name, (us, count) in sorted(host.items(), key=lambda kv: -kv[1][0])[: args.rows]:
        print(f"  {us / n / 1e3:8.2f} {count / n:6.0f}  {name[:120]}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"gpu_profile.py: --device {args.device}, but CUDA is not available here (torch {torch.__version__}); "
              "use --device cpu for a smoke test", file=sys.stderr)
        return 1
    sync = device_sync(device)
    engine, data, shape, batches = build(args, device)

    started = time.perf_counter()
    run_steps(engine, data, range(args.warmup), sync)
    print(f"warm-up: {time.perf_counter() - started:.1f} s for {args.warmup} steps", flush=True)
    if args.timed:
        seconds = run_steps(engine, data, range(args.warmup, args.warmup + args.timed), sync)
        report_timed(args, engine, data, seconds, shape, batches)
    if args.no_profile:
        return 0
    first = args.warmup + args.timed
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        wall = statistics.mean(run_steps(engine, data, range(first, first + args.steps), sync))
    report_profile(args, prof, wall)
    return 0


if __name__ == "__main__":
    sys.exit(main())
