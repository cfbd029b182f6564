"""Where a CPU joint step spends its time, by kind of work: a torch.profiler breakdown.

Builds the benchmark's infoxlm side (``EngineStep``, the trainer's own step) for a size on
the CPU, runs warm-up steps, then profiles ``--steps`` steps and charges every operator's own
CPU time to one group:

- the step's phase (data, forward, backward, optimizer, ema, queue: the step's phase hook,
  each phase a ``record_function`` range), and
- the kind of work, read off the operator and what called it: in the backward pass the
  autograd node that ran it (``evaluate_function: NativeLayerNormBackward0`` → LayerNorm),
  in the forward pass the outermost operator of the call (``aten::linear`` → matrix products,
  ``aten::layer_norm`` → LayerNorm).

It prints the groups (ms per step and share), then, without ``--summary``, the top operators
by (kind, operator, input shapes). Shapes tell where a copy or fill comes from.

``--timed N`` first times N steps without the profiler, each followed by a 2048² product
timed on the same threads, and prints one ``TIMED`` line: the step's useful FLOP/s against
that product's rate, step by step (a shared machine's rate moves within minutes, so the
product is timed beside every step, not once). Environment variables that set how threads
wait (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``) are read when torch loads, so variants of them
run as separate processes, alternated (see benchmarks/results/2026-11-26-cpu-step.md).

    python benchmarks/cpu_step_profile.py --size demo --warmup 2 --steps 3
    python benchmarks/cpu_step_profile.py --size demo --steps 2 --rows 40 --threads 1
    OMP_WAIT_POLICY=PASSIVE python benchmarks/cpu_step_profile.py --timed 3 --no-profile
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from infoxlm.bench.engine_step import EngineStep
from infoxlm.bench.matmul_rate import SQUARE
from infoxlm.bench.step_benchmark import data_flops, fill_queue, train_config
from infoxlm.bench.sizes import bench_size
from infoxlm.data.synthetic_batches import SyntheticSpec, synthetic_step
from infoxlm.model.fast_paths import FastPaths
from infoxlm.train.flops import ModelShape, product_rate

PRODUCTS = "matrix products"
# (kind, caller fragments, operator names): the operators a product brings along, first.
ALONG_PRODUCTS = (
    # CPU addmm copies the bias into the output before the product adds into it; the bias
    # gradient is a column sum of the output gradient.
    ("bias (copied into products, summed for gradients)", ("linear", "addmm"), ("aten::copy_", "aten::sum")),
    # A weight used by several objectives in one graph gets a gradient per use, then summed.
    ("gradient accumulation", ("tbackward", "accumulategrad", "viewbackward"), ("aten::add", "aten::add_")),
)
GEMMS = ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm", "aten::matmul")
# (kind, name fragments), first match wins; matched against the autograd node (backward) or
# the outermost operator (forward), then the operator itself.
KINDS = (
    ("EMA", ("lerp",)),
    ("AdamW", ("adam",)),
    ("LayerNorm", ("layer_norm", "layernorm")),
    ("gradient clipping", ("foreach_norm", "vector_norm", "clip", "foreach_mul")),
    ("losses (vocabulary, contrast)", ("cross_entropy", "nll", "log_softmax", "logsumexp")),
    ("attention", ("scaled_dot_product", "attention")),
    ("GELU", ("gelu",)),
    ("embeddings (lookups, gradients)", ("embedding", "lookupinplacegrad", "scatter_add")),
    ("packing and pooling (select / pad rows, sequence means)",
     ("selectrows", "index_select", "index_copy", "index_add", "indexbackward", "index_put", "nonzero", "index")),
    (PRODUCTS, ("linear", "addmm", "mm", "matmul", "tbackward", "addmmbackward", "mmbackward")),
    ("copies / casts", ("copy", "to", "clone", "cat", "contiguous")),
    ("fills / zeros", ("fill", "zero", "zeros", "empty")),
)
PHASE_PREFIX = "phase:"


def kind_of(caller: str, name: str) -> str:
    """The kind of work of operator ``name`` run for ``caller`` (an autograd node or the
    outermost forward operator)."""
    lowered = caller.lower()
    for kind, callers, names in ALONG_PRODUCTS:
        if name in names and any(c in lowered for c in callers):
            return kind
    if name in GEMMS and "attention" not in lowered:
        return PRODUCTS
    for candidate in (caller, name):
        lowered = candidate.lower()
        for kind, fragments in KINDS:
            if any(f in lowered for f in fragments):
                return kind
    return "other"


class ProfiledPhases:
    """The step's phase hook: each phase a profiler range named ``phase:<name>``, and timed."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)

    @contextlib.contextmanager
    def __call__(self, phase: str):
        started = time.perf_counter()
        with record_function(PHASE_PREFIX + phase):
            yield
        self.seconds[phase] += time.perf_counter() - started


def build(
    size_name: str, fast_paths: FastPaths | None = None, compile_layers: bool = False
) -> tuple[EngineStep, SyntheticSpec]:
    """The trainer's step for the size on the CPU (layers compiled if asked), its queue
    filled, and its batches' spec."""
    size = bench_size(size_name)
    batches = size.batches("cpu")
    spec = SyntheticSpec(size.vocab_size, size.block_size, size.tlm_max_length, size.xlco_max_length,
                         batches.mmlm, batches.tlm, batches.xlco, batches.max_tokens)
    config = train_config(size, torch.device("cpu"), bf16=False)
    config.run.compile = compile_layers
    engine = EngineStep(config, torch.device("cpu"), vocab_size=size.vocab_size, fast_paths=fast_paths)
    fill_queue(engine, spec, 0)
    return engine, spec


def attribute(event) -> tuple[str, str, str]:
    """(phase, kind, caller) of an operator event, from its chain of parents."""
    chain = []
    parent = event.cpu_parent
    while parent is not None:
        chain.append(parent.name)
        parent = parent.cpu_parent
    phase = next((n[len(PHASE_PREFIX):] for n in chain if n.startswith(PHASE_PREFIX)), "outside")
    node = next((n.split(": ", 1)[1] for n in chain if n.startswith("autograd::engine::evaluate_function")), None)
    if node is None:  # forward: the outermost aten operator below the phase range
        ops = [n for n in chain if n.startswith("aten::")]
        caller = ops[-1] if ops else event.name
    else:
        caller = node
    return phase, kind_of(caller, event.name), caller


def report(prof, steps: int, rows: int, summary: bool, wall: float) -> None:
    by_kind: dict[str, float] = defaultdict(float)  # µs
    by_phase: dict[str, float] = defaultdict(float)
    by_op: dict[tuple, list] = defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.name.startswith(PHASE_PREFIX) or e.name.startswith("autograd::engine") or e.self_cpu_time_total <= 0:
            continue
        phase, kind, caller = attribute(e)
        us = e.self_cpu_time_total
        by_kind[kind] += us
        by_phase[phase] += us
        shapes = str([list(s) for s in e.input_shapes if s])[:70] if e.input_shapes else ""
        entry = by_op[(kind, caller, e.name, shapes)]
        entry[0] += us
        entry[1] += 1
    total = sum(by_kind.values()) or 1.0
    print(f"wall per step {wall * 1e3:.0f} ms (profiler on), operator self time per step {total / steps / 1e3:.0f} ms")
    print("\nby phase (ms per step, share):")
    for phase, us in sorted(by_phase.items(), key=lambda kv: -kv[1]):
        print(f"  {phase:56s} {us / steps / 1e3:8.1f}  {us / total:6.1%}")
    print("\nby kind of work (ms per step, share):")
    for kind, us in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {kind:56s} {us / steps / 1e3:8.1f}  {us / total:6.1%}")
    if summary:
        return
    by_name: dict[tuple, list] = defaultdict(lambda: [0.0, 0])
    for (kind, caller, name, _), (us, count) in by_op.items():
        by_name[(kind, caller, name)][0] += us
        by_name[(kind, caller, name)][1] += count
    print(f"\ntop {rows} operators, all shapes (ms per step, calls per step, kind, caller, operator):")
    for (kind, caller, name), (us, count) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:rows]:
        print(f"  {us / steps / 1e3:7.1f} {count / steps:5.0f}  {kind[:18]:18s} {caller[:34]:34s} {name[:30]}")
    print(f"\ntop {rows} operators (ms per step, calls per step, kind, caller, operator, input shapes):")
    for (kind, caller, name, shapes), (us, count) in sorted(by_op.items(), key=lambda kv: -kv[1][0])[:rows]:
        print(f"  {us / steps / 1e3:7.1f} {count / steps:5.0f}  {kind[:18]:18s} {caller[:30]:30s} {name[:24]:24s} {shapes}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="demo", help="a bench size: test, demo, base (default: demo)")
    parser.add_argument("--warmup", type=int, default=2, help="unprofiled steps first (default: 2)")
    parser.add_argument("--steps", type=int, default=3, help="profiled steps (default: 3)")
    parser.add_argument("--rows", type=int, default=30, help="rows of the operator table (default: 30)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, one per core)")
    parser.add_argument("--timed", type=int, default=0,
                        help="steps timed without the profiler, each beside a 2048² product (default: 0)")
    parser.add_argument("--no-profile", action="store_true", help="only the timed steps")
    parser.add_argument("--summary", action="store_true", help="only the phase and kind tables")
    return parser.parse_args(argv)


def step_flops(engine: EngineStep, data) -> float:
    """Useful FLOPs of a step's batches (``train/flops.py``), as ``infoxlm bench`` counts them."""
    c = engine.encoder.config
    shape = ModelShape(c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size)
    return data_flops(data, shape, engine)


def timed_steps(engine: EngineStep, size_name: str, data: list, indices: range) -> str:
    """Run the steps, a 2048² product timed after each: the TIMED line."""
    seconds, ratios = [], []
    for i in indices:
        started = time.perf_counter()
        engine.step(lambda j: data[j], i, ProfiledPhases())
        seconds.append(time.perf_counter() - started)
        rate = product_rate(SQUARE, SQUARE, SQUARE, device=torch.device("cpu"), dtype=torch.float32, repeat=3)
        ratios.append(step_flops(engine, data[i]) / seconds[-1] / rate)
    return (f"TIMED size {size_name} threads {torch.get_num_threads()}: step {statistics.median(seconds):.2f} s "
            f"(min {min(seconds):.2f}); useful FLOP/s against the 2048² product beside each step: "
            f"median {statistics.median(ratios):.1%} ({', '.join(f'{r:.0%}' for r in ratios)})")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    engine, spec = build(args.size)
    data = [synthetic_step(spec, i) for i in range(args.warmup + args.timed + args.steps)]
    for i in range(args.warmup):
        engine.step(lambda j: data[j], i, ProfiledPhases())
    if args.timed:
        print(timed_steps(engine, args.size, data, range(args.warmup, args.warmup + args.timed)), flush=True)
    if args.no_profile:
        return 0
    first, seconds = args.warmup + args.timed, []
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for i in range(first, first + args.steps):
            started = time.perf_counter()
            engine.step(lambda j: data[j], i, ProfiledPhases())
            seconds.append(time.perf_counter() - started)
    report(prof, args.steps, args.rows, args.summary, statistics.mean(seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
