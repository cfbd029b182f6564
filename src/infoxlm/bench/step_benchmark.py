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
from ..train.config import TrainConfig, changed, resolve_config
from ..train.distributed import World
from ..train.flops import ModelShape, mfu, objective_flops, peak_bf16_flops
from ..train.presets import preset
from ..train.token_budget import resolve_max_tokens
from .engine_step import EngineStep
from .hf_baseline import HFBaseline, require_transformers
from .matmul_rate import step_product_rates
from .sizes import Batches, BenchError, BenchSize, bench_size
from ..data.synthetic_batches import SyntheticSpec, synthetic_step
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
    log(f"[bench] {message or f'micro-batch token budget: {tokens:,} tokens per objective (the CPU default, which fits the memory here)'}")
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


def data_flops(data: StepData, shape: ModelShape, engine: EngineStep) -> float:
    """Useful FLOPs of a step's batches (real lengths and masked tokens read off their masks),
    as the engine's objectives count them: what a training run's MFU counts once every
    objective trains (the bench's sizes train all of theirs from the first step)."""
    return objective_flops(data, shape, engine.model.objectives)


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


@dataclasses.dataclass
class Plan:
    """What a benchmark run times, settled from its arguments before anything is built."""

    size_name: str
    size: BenchSize
    device: torch.device
    batches: Batches
    steps: int
    warmup: int
    baseline_steps: int  # the baseline's timed steps: the first of infoxlm's ``steps``
    bf16: bool  # bf16 autocast: on a GPU, when asked
    peak_flops: float | str | None  # given, "measure" or None (a known GPU's datasheet peak)
    spec: SyntheticSpec
    config: TrainConfig

    @property
    def shape(self) -> ModelShape:
        return ModelShape.of(EncoderConfig.of_size(self.size.encoder, vocab_size=self.size.vocab_size))


def plan_benchmark(
    size: str, device: str | None, *, steps: int | None, warmup: int | None, batches: Batches | None, bf16: bool,
    compile_layers: bool | None, peak_flops: float | str | None, seed: int, baseline_steps: int | None = None,
) -> Plan:
    """The size's defaults for what is not given, each value checked (a BenchError names it)."""
    spec_size = bench_size(size)
    dev = resolve_device(device)
    batches = batches or spec_size.batches(dev.type)
    steps = spec_size.steps[dev.type] if steps is None else steps
    warmup = spec_size.warmup[dev.type] if warmup is None else warmup
    if steps < 1 or warmup < 0:
        raise BenchError(f"--steps {steps} --warmup {warmup}: expected steps >= 1 and warmup >= 0")
    baseline_steps = steps if baseline_steps is None else baseline_steps
    if not 1 <= baseline_steps <= steps:
        raise BenchError(f"--baseline-steps {baseline_steps}: expected 1 … {steps} (--steps)")
    if peak_flops is not None and peak_flops != "measure" and not peak_flops > 0:
        raise BenchError(f"--peak-flops {peak_flops:g}: expected a positive FLOP/s rate such as 1.5e11, or 'measure'")
    use_bf16 = bf16 and dev.type == "cuda"
    spec = SyntheticSpec(
        spec_size.vocab_size, spec_size.block_size, spec_size.tlm_max_length, spec_size.xlco_max_length,
        batches.mmlm, batches.tlm, batches.xlco, batches.max_tokens or DEFAULT_MAX_TOKENS, seed=seed,
    )  # fmt: skip
    config = train_config(spec_size, dev, use_bf16)
    # What a run leaves to its device (compiled layers, the token bucket) chosen as the trainer chooses it.
    config = resolve_config(changed(config, run={"compile": compile_layers}), dev)
    return Plan(size, spec_size, dev, batches, steps, warmup, baseline_steps, use_bf16, peak_flops, spec, config)


class Stepper:
    """Runs one step of a side on the synthetic data both sides share, timed from an idle
    device to an idle device; keeps each step's data (the infoxlm side's cut) for its FLOPs."""

    def __init__(self, specs: dict[str, SyntheticSpec], device: torch.device):
        self.specs, self.sync = specs, device_sync(device)
        self.cache: dict[int, StepData] = {}

    def __call__(self, side, index: int, timer: PhaseTimer) -> tuple[float, int]:
        self.sync()
        started = time.perf_counter()
        outcome = side.step(lambda i: self._data(side.name, i), index, timer)
        self.sync()
        return time.perf_counter() - started, outcome.tokens

    def _data(self, side_name: str, index: int) -> StepData:
        # Built afresh for each side (the data phase is real work), identical for both.
        data = synthetic_step(self.specs[side_name], index)
        self.cache.setdefault(index, data)
        return data


def build_sides(plan: Plan, baseline: bool, seed: int, log, perturb: Callable | None) -> tuple[list, dict[str, SyntheticSpec]]:
    """infoxlm's side (``EngineStep``, the queue filled), the micro-batch budget where it is
    automatic, and the baseline copied from it; the synthetic spec of each side's cut."""
    log(f"[bench] {plan.size_name}: building infoxlm's model on {plan.device} …")
    sides = [EngineStep(plan.config, plan.device, vocab_size=plan.size.vocab_size, seed=seed)]
    if plan.batches.max_tokens is None:  # --max-tokens auto: as a training run picks it, the model in place
        plan.batches = dataclasses.replace(plan.batches, max_tokens=auto_max_tokens(sides[0], plan.spec, plan.config, plan.bf16, log))
        plan.spec = dataclasses.replace(plan.spec, max_tokens=plan.batches.max_tokens)
    # The same examples and masks, cut into the baseline's own micro-batches (see sizes.py).
    specs = {"infoxlm": plan.spec, "hf": dataclasses.replace(plan.spec, max_tokens=plan.batches.baseline_tokens)}
    fill_queue(sides[0], plan.spec, seed)
    if baseline:
        log("[bench] copying its weights into the Hugging Face baseline …")
        sides.append(HFBaseline(sides[0]))
        if perturb is not None:
            perturb(sides[1])
    return sides, specs


def check_first_losses(sides: list, specs: dict[str, SyntheticSpec], rtol: float, log) -> dict[str, list[float]]:
    """Both sides' fp32 losses of the first step, each on its own cut: equal within rtol."""
    log("[bench] checking that both compute the same first-step losses (fp32) …")
    loss_check = check_losses(sides[0].losses(synthetic_step(specs["infoxlm"], 0)), sides[1].losses(synthetic_step(specs["hf"], 0)), rtol)
    log("[bench] losses agree: " + ", ".join(f"{k} {v[0]:.5f}" for k, v in loss_check.items()))
    return loss_check


def time_steps(plan: Plan, sides: list, stepper: Stepper, log) -> dict[str, dict[str, list]]:
    """Warm-up steps, then the timed steps with the sides alternating (who goes first
    alternates too; the baseline drops out after its ``baseline_steps``); on a GPU the phases
    from a pass of their own that synchronises at each phase boundary. Per side: seconds,
    tokens, useful FLOPs and phase times of each step."""
    for i in range(plan.warmup):
        log(f"[bench] warm-up step {i + 1}/{plan.warmup}")
        for side in sides:
            stepper(side, i, PhaseTimer())
    timed = {side.name: {"seconds": [], "tokens": [], "flops": [], "phases": []} for side in sides}
    shape = plan.shape

    def stepping(j: int) -> list:
        """The sides that take timed step j: the baseline in its first ``baseline_steps`` only."""
        return sides if j < plan.baseline_steps else sides[:1]

    for j in range(plan.steps):
        index = plan.warmup + j
        for side in stepping(j) if j % 2 == 0 else stepping(j)[::-1]:
            timer = PhaseTimer()
            seconds, tokens = stepper(side, index, timer)
            record = timed[side.name]
            record["seconds"].append(seconds)
            record["tokens"].append(tokens)
            record["flops"].append(data_flops(stepper.cache[index], shape, sides[0]))
            record["phases"].append(dict(timer.seconds))
        stepper.cache.pop(index, None)
        log(f"[bench] step {j + 1}/{plan.steps}: " + ", ".join(f"{side.name} {timed[side.name]['seconds'][-1]:.3f} s" for side in stepping(j)))
    if plan.device.type == "cuda":  # phases need a synchronised pass of their own
        for name in timed:
            timed[name]["phases"] = []
        for j in range(min(plan.steps, 3)):
            for side in stepping(j):
                timer = PhaseTimer(sync=stepper.sync)
                stepper(side, plan.warmup + plan.steps + j, timer)
                timed[side.name]["phases"].append(dict(timer.seconds))
        log("[bench] phases timed in a synchronised pass")
    return timed


def peak_memory_mb(plan: Plan, sides: list, stepper: Stepper) -> dict[str, float | None]:
    """Per side: the state held between steps plus one more step's peak growth, in MiB."""
    memory = {}
    for side in sides:
        state = side.state_bytes()
        with peak_growth(plan.device) as growth:
            stepper(side, plan.warmup + plan.steps + 3, PhaseTimer())
        memory[side.name] = None if growth["bytes"] is None else (state + max(0, growth["bytes"])) / MB
    return memory


def mfu_peak(plan: Plan, measured: list[float]) -> tuple[float | None, str | None]:
    """MFU's denominator and where it comes from: measured, given, a GPU's datasheet, or none."""
    if plan.peak_flops == "measure":
        return max(measured), "measured: best matrix-product rate before and after the timed steps"
    if plan.peak_flops is not None:
        return float(plan.peak_flops), "given"
    if plan.device.type == "cuda":
        return peak_bf16_flops(torch.cuda.get_device_name(plan.device)), "datasheet dense bf16 peak"
    return None, None


def run_benchmark(
    size: str = "demo",
    device: str | None = None,
    *,
    steps: int | None = None,
    warmup: int | None = None,
    baseline_steps: int | None = None,
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
    """Run the benchmark and return its result as a JSON-ready dict (see commands/bench.py for the keys).

    ``peak_flops``: the MFU denominator in FLOP/s; None for a known GPU's datasheet bf16 peak
    (no MFU on a CPU); "measure" for the best rate of the size's matrix products on this
    device (``matmul_rate.py``), timed before the warm-up and after the timed steps.

    ``baseline_steps``: the baseline's timed steps (default: ``steps``), the first of
    infoxlm's: its steps are not compiled and take the same time each, so a few suffice.

    ``compile_layers``: infoxlm's encoder layers through ``torch.compile`` (``run.compile``);
    default: on a GPU.

    ``_perturb_baseline`` (tests only) is called on the baseline before the loss check."""
    log = log or (lambda message: print(message, file=sys.stderr, flush=True))
    plan = plan_benchmark(
        size, device, steps=steps, warmup=warmup, batches=batches, bf16=bf16, compile_layers=compile_layers,
        peak_flops=peak_flops, seed=seed, baseline_steps=baseline_steps,
    )  # fmt: skip
    if baseline:
        require_transformers()
    sides, specs = build_sides(plan, baseline, seed, log, _perturb_baseline)
    loss_check = check_first_losses(sides, specs, rtol, log) if baseline else None
    stepper = Stepper(specs, plan.device)
    measured: list[float] = []

    def measure_product_rate() -> None:
        log(f"[bench] timing this {plan.device.type}'s matrix products (--peak-flops measure) …")
        measured.append(max(step_product_rates(size, plan.device).values()))

    if plan.peak_flops == "measure":
        measure_product_rate()
    timed = time_steps(plan, sides, stepper, log)
    if plan.peak_flops == "measure":
        measure_product_rate()
    memory = peak_memory_mb(plan, sides, stepper)
    peak, peak_source = mfu_peak(plan, measured)
    summary = {name: _summarise(record, peak) for name, record in timed.items()}
    return _result(plan, summary, timed, memory, (peak, peak_source, measured), loss_check, rtol, baseline)


def _result(plan: Plan, summary: dict, timed: dict, memory: dict, peak_info: tuple, loss_check, rtol: float, baseline: bool) -> dict:
    """The JSON-ready result (keys: see commands/bench.py)."""
    peak, peak_source, measured = peak_info
    engine, base, dev, batches, size = summary["infoxlm"], summary.get("hf"), plan.device, plan.batches, plan.size
    shape = plan.shape
    return {
        "size": plan.size_name,
        "device": str(dev),
        "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else _cpu_name(),
        "dtype": "bf16 autocast" if plan.bf16 else "fp32",
        "compiled_layers": plan.config.run.compile,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "transformers": _transformers_version() if baseline else None,
        "batches": {"mmlm": batches.mmlm, "tlm": batches.tlm, "xlco": batches.xlco, "max_tokens": batches.max_tokens,
                    "baseline_max_tokens": batches.baseline_tokens},
        "shape": {"layers": shape.num_layers, "hidden": shape.hidden_size, "vocab": shape.vocab_size,
                  "contrast_layer": size.contrast_layer, "queue": size.queue_size, "block_size": size.block_size},
        "steps": plan.steps,
        "warmup": plan.warmup,
        "baseline_steps": plan.baseline_steps if base else None,
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
        "measured_product_flops": measured or None,
        "mfu": engine["mfu"],
        "baseline_mfu": base["mfu"] if base else None,
        "loss_check": {"rtol": rtol, "losses": loss_check} if loss_check else None,
        "platform": platform.platform(),
    }


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


__all__ = ["run_benchmark", "check_losses", "LossMismatchError", "resolve_device", "data_flops", "fill_queue", "train_config"]
