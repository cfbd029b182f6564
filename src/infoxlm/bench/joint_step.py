"""``run_benchmark``: time infoxlm's joint step against the Hugging Face baseline.

The run, in order (each message on stderr):

1. build infoxlm's model for the size (``EngineStep``) and copy its fresh weights, projections
   and queue into the baseline (``HFBaseline``), dropout 0 on both;
2. equal-loss check: the MMLM, TLM and XLCO losses of the first step's batches, in fp32 on
   both sides, must agree within ``rtol``; otherwise ``LossMismatchError`` and nothing is timed;
3. warm-up steps, then the timed steps, the two sides alternating (which goes first
   alternates too), so that a machine whose load changes slows both alike; every step of
   both sides gets identical batches (``synthetic_step(spec, step)``);
4. phases: on a CPU from the timed steps; on a GPU from a separate pass that synchronises
   the device at every phase boundary;
5. memory: one more step per side, its peak growth measured (see timing.py).

Figures are medians over the timed steps. tokens/s counts real (non-padding) input tokens of
all three objectives, both XLCO views included; MFU divides the useful FLOPs of flops.py by
the step time and the GPU's dense bf16 peak.
"""

from __future__ import annotations

import dataclasses
import math
import platform
import statistics
import sys
import time
import types
from typing import Callable

import torch

from ..data.pipeline import DEFAULT_MAX_TOKENS, PipelineConfig, StepData
from ..model.config import EncoderConfig
from ..train.config import TrainConfig, changed
from ..train.distributed import World
from ..train.flops import ModelShape, StepFlops, mfu, peak_bf16_flops, step_data_flops
from ..train.presets import preset
from ..train.token_budget import resolve_max_tokens
from .engine_step import EngineStep
from .matmul_rate import step_product_rates
from .sizes import Batches, BenchError, BenchSize, bench_size
from .synthetic_batches import SyntheticSpec, synthetic_step
from .timing import PHASES, PhaseTimer, device_sync, peak_growth, process_peak_rss_bytes

MB = 1024 * 1024


class LossMismatchError(BenchError):
    """infoxlm and the baseline disagree on a loss: the comparison would be meaningless."""


def resolve_device(name: str | None) -> torch.device:
    """A torch device that exists here, or a BenchError naming what was asked."""
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise BenchError(f"--device {name!r}: expected cpu, cuda or cuda:N") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise BenchError(f"--device {name}: CUDA is not available on this machine (torch {torch.__version__}); use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise BenchError(f"--device {name}: only {torch.cuda.device_count()} CUDA device(s) here")
    elif device.type != "cpu":
        raise BenchError(f"--device {name}: expected cpu, cuda or cuda:N")
    return device


def train_config(size: BenchSize, device: torch.device, bf16: bool) -> TrainConfig:
    """The trainer's config for this size: the paper's optimizer (the ``base`` preset's), the
    size's encoder and contrast, dropout 0 (the losses must agree exactly; the authors use 0 when
    continuing XLM-R), each field validated as the trainer validates it."""
    return changed(
        preset("base"), model={"size": size.encoder, "dropout": 0.0}, contrast=size.contrast,
        run={"device": str(device), "bf16": bf16},
    )  # fmt: skip


def auto_max_tokens(engine: EngineStep, spec: SyntheticSpec, config: TrainConfig, bf16: bool, log) -> int:
    """The budget ``resolve_max_tokens`` picks for the benchmark's batches on its device (on a
    GPU, from the memory free beside infoxlm's model; a baseline built later is not counted)."""
    config.data = PipelineConfig(
        mmlm_batch_size=spec.mmlm_batch_size, tlm_batch_size=spec.tlm_batch_size, xlco_batch_size=spec.xlco_batch_size,
        block_size=spec.block_size, tlm_max_length=spec.tlm_max_length, xlco_max_length=spec.xlco_max_length,
        mask_prob=spec.mask_prob,
    )  # fmt: skip
    steps = types.SimpleNamespace(step=lambda step, rank, world_size: synthetic_step(spec, step))  # a world of one
    tokens, message = resolve_max_tokens(config, World(device=engine.device), engine.model, steps, 0, bf16=bf16, sharded=False)
    log(f"[bench] {message or f'micro-batch token budget: {tokens:,} tokens per objective, as on any CPU'}")
    return tokens


def check_losses(engine: dict[str, float], baseline: dict[str, float], rtol: float) -> dict[str, list[float]]:
    """Raise LossMismatchError unless every objective's loss agrees within rtol."""
    if set(engine) != set(baseline):
        raise LossMismatchError(f"objectives differ: infoxlm computed {sorted(engine)}, the baseline {sorted(baseline)}")
    for name in engine:
        a, b = engine[name], baseline[name]
        if not (math.isfinite(a) and math.isfinite(b)) or abs(a - b) > rtol * max(abs(a), abs(b)) + 1e-7:
            raise LossMismatchError(
                f"first-step {name} loss: infoxlm {a:.7g}, Hugging Face baseline {b:.7g} "
                f"(relative difference {abs(a - b) / max(abs(a), abs(b), 1e-30):.2e} > rtol {rtol:g}); "
                "the two sides do not compute the same step, so no timing is reported"
            )
    return {name: [engine[name], baseline[name]] for name in engine}


def data_flops(data: StepData, shape: ModelShape, size: BenchSize) -> StepFlops:
    """Useful FLOPs of a step's batches (real lengths and masked tokens read off their masks)
    under the size's contrast settings."""

    return step_data_flops(data, shape, size.contrast_layer, size.queue_size, size.pooling)


@torch.no_grad()
def fill_queue(engine: EngineStep, spec: SyntheticSpec, seed: int) -> None:
    """Fill the queue with key-like vectors, as the trainer's pre-fill does before XLCO starts.

    Encoding K real keys (131,072 for base) would take longer than the benchmark, so the keys
    of one synthetic XLCO batch are drawn K times with replacement, plus noise of their own
    spread: the logits then have the scale of a full queue of real keys (XLCO loss ≈ log K at
    the start, not ≈ 0 against the initial random queue), which makes the loss check bite.
    """
    contrast = engine.contrast
    if not spec.xlco_batch_size:
        return
    data = synthetic_step(spec, 10**9)  # a step index never timed
    keys = torch.cat([contrast.encode_keys(b.key.input_ids.to(engine.device), b.key.attention_mask.to(engine.device))
                      for b in data.xlco]).float()  # (n, d)
    generator = torch.Generator().manual_seed(seed)
    rows = torch.randint(0, keys.shape[0], (contrast.queue_size,), generator=generator)
    noise = torch.randn(contrast.queue_size, keys.shape[1], generator=generator).to(keys.device) * keys.std(dim=0)
    contrast.enqueue(keys[rows.to(keys.device)] + noise)  # (K, d): the whole queue, pointer back at 0


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def run_benchmark(
    size: str = "demo",
    device: str | None = None,
    *,
    steps: int | None = None,
    warmup: int | None = None,
    batches: Batches | None = None,
    baseline: bool = True,
    bf16: bool = True,
    compile_layers: bool | None = None,
    peak_flops: float | str | None = None,
    rtol: float = 1e-4,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
    _perturb_baseline: Callable | None = None,
) -> dict:
    """Run the benchmark and return its result as a JSON-ready dict (see bench_cli.py for the keys).

    ``peak_flops``: the MFU denominator in FLOP/s; None for a known GPU's datasheet bf16 peak
    (no MFU on a CPU); "measure" for the best rate of the size's matrix products on this
    device (``matmul_rate.py``), timed before the warm-up and after the timed steps.

    ``compile_layers``: infoxlm's encoder layers through ``torch.compile`` (``run.compile``);
    default: on a GPU.

    ``_perturb_baseline`` (tests only) is called on the baseline before the loss check."""
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    spec_size = bench_size(size)
    dev = resolve_device(device)
    if baseline:
        from .hf_baseline import HFBaseline, require_transformers

        require_transformers()
    batches = batches or spec_size.batches(dev.type)
    steps = spec_size.steps[dev.type] if steps is None else steps
    warmup = spec_size.warmup[dev.type] if warmup is None else warmup
    if steps < 1 or warmup < 0:
        raise BenchError(f"--steps {steps} --warmup {warmup}: expected steps >= 1 and warmup >= 0")
    measure_peak = peak_flops == "measure"
    if peak_flops is not None and not measure_peak and not peak_flops > 0:
        raise BenchError(f"--peak-flops {peak_flops:g}: expected a positive FLOP/s rate such as 1.5e11, or 'measure'")
    measured_peaks: list[float] = []
    use_bf16 = bf16 and dev.type == "cuda"
    spec = SyntheticSpec(
        spec_size.vocab_size, spec_size.block_size, spec_size.tlm_max_length, spec_size.xlco_max_length,
        batches.mmlm, batches.tlm, batches.xlco, batches.max_tokens or DEFAULT_MAX_TOKENS, seed=seed,
    )
    encoder_config = EncoderConfig.preset(spec_size.encoder, vocab_size=spec_size.vocab_size)
    config = train_config(spec_size, dev, use_bf16)
    config = changed(config, run={"compile": dev.type == "cuda" if compile_layers is None else compile_layers})
    shape = ModelShape.of(encoder_config)
    sync = device_sync(dev)
    cache: dict[int, StepData] = {}

    def data_for(side_name: str) -> Callable[[int], StepData]:
        def data_for_step(index: int) -> StepData:
            # Built afresh for each side (the data phase is real work), identical for both.
            data = synthetic_step(specs[side_name], index)
            cache.setdefault(index, data)
            return data

        return data_for_step

    log(f"[bench] {size}: building infoxlm's model on {dev} …")
    sides = [EngineStep(config, dev, vocab_size=spec_size.vocab_size, seed=seed)]
    if batches.max_tokens is None:  # --max-tokens auto: as a training run picks it, the model in place
        batches = dataclasses.replace(batches, max_tokens=auto_max_tokens(sides[0], spec, config, use_bf16, log))
        spec = dataclasses.replace(spec, max_tokens=batches.max_tokens)
    # The same examples and masks, cut into the baseline's own micro-batches (see sizes.py).
    specs = {"infoxlm": spec, "hf": dataclasses.replace(spec, max_tokens=batches.baseline_tokens)}
    fill_queue(sides[0], spec, seed)
    if baseline:
        log("[bench] copying its weights into the Hugging Face baseline …")
        sides.append(HFBaseline(sides[0]))
        if _perturb_baseline is not None:
            _perturb_baseline(sides[1])

    loss_check = None
    if baseline:
        log("[bench] checking that both compute the same first-step losses (fp32) …")
        loss_check = check_losses(
            sides[0].losses(synthetic_step(spec, 0)), sides[1].losses(synthetic_step(specs["hf"], 0)), rtol
        )
        log("[bench] losses agree: " + ", ".join(f"{k} {v[0]:.5f}" for k, v in loss_check.items()))

    def one_step(side, index: int, timer: PhaseTimer) -> tuple[float, int]:
        sync()
        started = time.perf_counter()
        outcome = side.step(data_for(side.name), index, timer)
        sync()
        return time.perf_counter() - started, outcome.tokens

    def measure_product_rate() -> None:
        log(f"[bench] timing this {dev.type}'s matrix products (--peak-flops measure) …")
        measured_peaks.append(max(step_product_rates(size, dev).values()))

    if measure_peak:
        measure_product_rate()
    for i in range(warmup):
        log(f"[bench] warm-up step {i + 1}/{warmup}")
        for side in sides:
            one_step(side, i, PhaseTimer())

    timed = {side.name: {"seconds": [], "tokens": [], "flops": [], "phases": []} for side in sides}
    for j in range(steps):
        index = warmup + j
        order = sides if j % 2 == 0 else sides[::-1]
        for side in order:
            timer = PhaseTimer()
            seconds, tokens = one_step(side, index, timer)
            record = timed[side.name]
            record["seconds"].append(seconds)
            record["tokens"].append(tokens)
            record["flops"].append(data_flops(cache[index], shape, spec_size).total)
            record["phases"].append(dict(timer.seconds))
        cache.pop(index, None)
        log(f"[bench] step {j + 1}/{steps}: " + ", ".join(f"{n} {timed[n]['seconds'][-1]:.3f} s" for n in timed))

    if dev.type == "cuda":  # phases need a synchronised pass of their own
        for name in timed:
            timed[name]["phases"] = []
        for j in range(min(steps, 3)):
            index = warmup + steps + j
            for side in sides:
                timer = PhaseTimer(sync=sync)
                one_step(side, index, timer)
                timed[side.name]["phases"].append(dict(timer.seconds))
        log("[bench] phases timed in a synchronised pass")

    if measure_peak:
        measure_product_rate()

    memory = {}
    for side in sides:
        state = side.state_bytes()
        with peak_growth(dev) as growth:
            one_step(side, warmup + steps + 3, PhaseTimer())
        memory[side.name] = None if growth["bytes"] is None else (state + max(0, growth["bytes"])) / MB

    if measure_peak:
        peak, peak_source = max(measured_peaks), "measured: best matrix-product rate before and after the timed steps"
    elif peak_flops is not None:
        peak, peak_source = float(peak_flops), "given"
    elif dev.type == "cuda":
        peak, peak_source = peak_bf16_flops(torch.cuda.get_device_name(dev)), "datasheet dense bf16 peak"
    else:
        peak, peak_source = None, None
    summary = {name: _summarise(record, peak) for name, record in timed.items()}
    engine = summary["infoxlm"]
    base = summary.get("hf")
    result = {
        "size": size,
        "device": str(dev),
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else _cpu_name(),
        "dtype": "bf16 autocast" if use_bf16 else "fp32",
        "compiled_layers": config.run.compile,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": _transformers_version() if baseline else None,
        "batches": {"mmlm": batches.mmlm, "tlm": batches.tlm, "xlco": batches.xlco, "max_tokens": batches.max_tokens,
                    "baseline_max_tokens": batches.baseline_tokens},
        "shape": {"layers": shape.num_layers, "hidden": shape.hidden_size, "vocab": shape.vocab_size,
                  "contrast_layer": spec_size.contrast_layer, "queue": spec_size.queue_size,
                  "block_size": spec_size.block_size},
        "steps": steps,
        "warmup": warmup,
        "tokens_per_step": _median(timed["infoxlm"]["tokens"]),
        "flops_per_step": _median(timed["infoxlm"]["flops"]),
        "tokens_per_s": engine["tokens_per_s"],
        "baseline_tokens_per_s": base["tokens_per_s"] if base else None,
        "speedup": engine["tokens_per_s"] / base["tokens_per_s"] if base else None,
        # On a shared machine: the median of the per-round ratios (both sides ran back to back
        # under the same load) and the ratio of the best steps.
        "speedup_paired": _median([b / a for a, b in zip(timed["infoxlm"]["seconds"], timed["hf"]["seconds"])]) if base else None,
        "speedup_best": min(timed["hf"]["seconds"]) / min(timed["infoxlm"]["seconds"]) if base else None,
        "step_seconds": engine["step_seconds"],
        "baseline_step_seconds": base["step_seconds"] if base else None,
        "step_seconds_all": timed["infoxlm"]["seconds"],
        "baseline_step_seconds_all": timed["hf"]["seconds"] if base else None,
        "phases": engine["phases"],
        "baseline_phases": base["phases"] if base else None,
        "peak_memory_mb": memory["infoxlm"],
        "baseline_peak_memory_mb": memory.get("hf"),
        "process_peak_rss_mb": process_peak_rss_bytes() / MB if dev.type == "cpu" else None,
        "achieved_tflops": engine["achieved_tflops"],
        "baseline_achieved_tflops": base["achieved_tflops"] if base else None,
        "peak_flops": peak,
        "peak_flops_source": peak_source if peak else None,
        "measured_product_flops": measured_peaks or None,
        "mfu": engine["mfu"],
        "baseline_mfu": base["mfu"] if base else None,
        "loss_check": {"rtol": rtol, "losses": loss_check} if loss_check else None,
        "platform": platform.platform(),
    }
    return result


def _summarise(record: dict, peak: float | None) -> dict:
    seconds = record["seconds"]
    rates = [t / s for t, s in zip(record["tokens"], seconds)]
    flop_rates = [f / s for f, s in zip(record["flops"], seconds)]
    utilisation = _median([mfu(f, s, peak) for f, s in zip(record["flops"], seconds)]) if peak else None
    phases = {p: _median([ph.get(p, 0.0) for ph in record["phases"]]) for p in PHASES} if record["phases"] else None
    return {
        "tokens_per_s": _median(rates),
        "step_seconds": _median(seconds),
        "phases": phases,
        "achieved_tflops": _median(flop_rates) / 1e12,
        "mfu": utilisation,
    }


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _transformers_version() -> str | None:
    try:
        import transformers

        return transformers.__version__
    except ImportError:
        return None


__all__ = ["run_benchmark", "check_losses", "LossMismatchError", "resolve_device", "data_flops"]
