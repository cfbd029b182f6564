"""Where a GPU joint step spends its time: a torch.profiler table of infoxlm's step.

Builds the benchmark's infoxlm side (``EngineStep``) for a size, runs warm-up steps, then
profiles a few steps and prints (1) device time by kernel, (2) device time grouped into
matrix products, attention, the optimizer, copies and the rest, and (3) the wall time of a
step against the device's busy time (a step whose wall time is far above its device time is
bound by the host: Python and kernel launches).

    python benchmarks/gpu_profile.py --size base            # bf16 autocast on cuda
    python benchmarks/gpu_profile.py --size base --rows 40 --batch 256,256,256
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from infoxlm.bench.bench_cli import parse_batches
from infoxlm.bench.engine_step import EngineStep
from infoxlm.bench.flops import ModelShape, peak_bf16_flops
from infoxlm.bench.joint_step import data_flops, fill_queue, train_config
from infoxlm.bench.sizes import bench_size
from infoxlm.bench.synthetic_batches import SyntheticSpec, step_tokens, synthetic_step
from infoxlm.bench.timing import PhaseTimer
from infoxlm.model.config import EncoderConfig

# Kernel-name fragments → group, first match wins.
GROUPS = (
    ("attention", ("flash", "fmha", "attention", "efficient")),
    ("matmul", ("gemm", "cutlass", "sm90_xmma", "nvjet", "cublas", "matmul", "wgmma")),
    ("optimizer", ("adam", "multi_tensor", "foreach")),
    ("copy / cast", ("copy", "cast", "memcpy", "fill")),
    ("index / scatter", ("index", "scatter", "gather", "nonzero")),
    ("softmax / loss", ("softmax", "nll", "log_softmax", "cross_entropy")),
    ("norm", ("layer_norm", "layernorm")),
)


def group_of(name: str) -> str:
    lowered = name.lower()
    for group, fragments in GROUPS:
        if any(f in lowered for f in fragments):
            return group
    return "other elementwise / reduce"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="base")
    parser.add_argument("--batch", default=None, metavar="MMLM,TLM,XLCO")
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rows", type=int, default=30)
    parser.add_argument("--fp32", action="store_true")
    parser.add_argument("--compile", action="store_true", help="torch.compile each encoder layer (dynamic shapes)")
    parser.add_argument("--timed", type=int, default=0, help="first time this many steps without the profiler")
    parser.add_argument("--no-profile", action="store_true", help="only the timed steps")
    parser.add_argument("--summary", action="store_true", help="print the wall / busy line and the groups only")
    args = parser.parse_args()

    device = torch.device("cuda")
    size = bench_size(args.size)
    batches = parse_batches(args.batch, args.max_tokens, size.batches("cuda"))
    spec = SyntheticSpec(size.vocab_size, size.block_size, size.tlm_max_length, size.xlco_max_length,
                         batches.mmlm, batches.tlm, batches.xlco, batches.max_tokens)
    encoder_config = EncoderConfig.preset(size.encoder, vocab_size=size.vocab_size)
    shape = ModelShape(encoder_config.hidden_size, encoder_config.intermediate_size,
                       encoder_config.num_hidden_layers, encoder_config.vocab_size)
    engine = EngineStep(encoder_config, train_config(size, device, not args.fp32), device)
    fill_queue(engine, spec, 0)
    if args.compile:
        for encoder in (engine.encoder, engine.contrast.key_encoder):
            for layer in encoder.encoder.layer:
                layer.compile(dynamic=True)
    n = args.warmup + args.timed + args.steps
    data = [synthetic_step(spec, i) for i in range(n)]

    started = time.perf_counter()
    for i in range(args.warmup):
        engine.step(lambda j: data[j], i, PhaseTimer())
    torch.cuda.synchronize()
    print(f"warm-up: {time.perf_counter() - started:.1f} s for {args.warmup} steps")
    if args.timed:
        seconds = []
        for i in range(args.warmup, args.warmup + args.timed):
            started = time.perf_counter()
            engine.step(lambda j: data[j], i, PhaseTimer())
            torch.cuda.synchronize()
            seconds.append(time.perf_counter() - started)
        flops = statistics.median(data_flops(d, shape, size.contrast_layer, size.queue_size).total for d in data)
        step = statistics.median(seconds)
        tokens = statistics.median(step_tokens(d) for d in data)
        print(f"TIMED size {args.size} batches {batches.mmlm},{batches.tlm},{batches.xlco} max_tokens {batches.max_tokens}"
              f"{' compiled' if args.compile else ''}: step {step * 1e3:.1f} ms (min {min(seconds) * 1e3:.1f}), "
              f"{tokens / step:,.0f} tokens/s, MFU {flops / step / peak_bf16_flops(torch.cuda.get_device_name()):.1%}, "
              f"peak {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")
    if args.no_profile:
        return
    first = args.warmup + args.timed

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        started = time.perf_counter()
        for i in range(first, first + args.steps):
            engine.step(lambda j: data[j], i, PhaseTimer())
        torch.cuda.synchronize()
        wall = (time.perf_counter() - started) / args.steps

    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy = defaultdict(float)
    by_name = defaultdict(lambda: [0.0, 0])
    for e in kernels:
        us = e.device_time if hasattr(e, "device_time") else e.cuda_time
        busy[group_of(e.name)] += us
        by_name[e.name][0] += us
        by_name[e.name][1] += 1
    total = sum(busy.values())
    print(f"size {args.size}, batches {batches}, {'fp32' if args.fp32 else 'bf16 autocast'}")
    print(f"wall per step {wall * 1e3:.1f} ms (profiler on); device busy per step {total / args.steps / 1e3:.1f} ms; "
          f"kernels per step {len(kernels) / args.steps:.0f}")
    print("\nby group (ms per step, share):")
    for group, us in sorted(busy.items(), key=lambda kv: -kv[1]):
        print(f"  {group:28s} {us / args.steps / 1e3:8.2f}  {us / total:6.1%}")
    if args.summary:
        return
    print(f"\ntop {args.rows} kernels (ms per step, launches per step):")
    for name, (us, n) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[: args.rows]:
        print(f"  {us / args.steps / 1e3:8.2f} {n / args.steps:6.0f}  {name[:150]}")
    # The host side: where the Python process spends a step (runtime calls such as
    # cudaMalloc / cudaStreamSynchronize show here, as do slow operators).
    host = defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CPU:
            host[e.name][0] += e.self_cpu_time_total
            host[e.name][1] += 1
    print(f"\ntop {args.rows} host events by self CPU time (ms per step, calls per step):")
    for name, (us, n) in sorted(host.items(), key=lambda kv: -kv[1][0])[: args.rows]:
        print(f"  {us / args.steps / 1e3:8.2f} {n / args.steps:6.0f}  {name[:120]}")


if __name__ == "__main__":
    main()
