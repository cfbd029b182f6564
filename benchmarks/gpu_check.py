"""`make gpu-check`: everything infoxlm should show on a GPU, in one command, into one report.

On whatever GPU it finds (one process; the aim is ten minutes on one H100), in turn:

- ``tests``: ``pytest tests/gpu`` (the bf16 fast path against the plain fp32 one, the Triton
  loss, varlen attention, a micro-step without device synchronisation);
- ``bench base`` (``bench large`` runs last, the longest): ``infoxlm bench --json`` at the
  defaults (compiled layers, ``--max-tokens auto``: the budget a training run would pick,
  infoxlm alone because that budget is sized to the memory beside infoxlm's model only) and at
  the hand-tuned budgets (98,304 / 16,384 tokens) beside the transformers baseline (timed over
  3 of infoxlm's steps, ``--baseline-steps 3``: its 3-4 s steps were a third of the check): tokens/s,
  speed-up, MFU, peak memory;
- ``pretrain``: a real ``infoxlm pretrain --preset base --init DIR`` of a few dozen steps, DIR an
  XLM-R-shaped encoder with XLM-R's 250,002-piece vocabulary (random weights, written by
  infoxlm's own hub writer), on a store prepared from the demo corpus with that tokenizer: step
  time, tokens/s and MFU from RUN/metrics.jsonl, the budget the run picked, compile time and
  recompiles (``TORCH_LOGS=recompiles``: the layers may take 12 forms, no more), peak memory,
  one background checkpoint save and what it cost the steps around it, device allocations per
  settled step (the allocator's counters in metrics.jsonl);
- ``pretrain, without any lever`` / ``without expandable segments`` / ``without prefetching`` /
  ``with a 2,048-token bucket``: the same run with the speed levers beside the step changed
  (``run.expandable_segments``, ``run.prefetch_data``, ``run.token_bucket``), on the same data
  step by step; the report's last table puts every real run side by side;
- ``pretrain, activation checkpointing``: the same with ``run.activation_checkpointing=true``.

Each real run's checkpoints are removed once measured (6 GB each at base).

It writes OUT/report.json and OUT/report.md (device, torch and CUDA versions, commit, every
figure, every failure with its message) after each section, so a run cut short leaves what it
had; a failing section is recorded and the next one runs. OUT/logs holds each command's output.

``--dry`` runs the same sections on a CPU at test size (bench ``--size test``, ``--preset
test`` with a tiny encoder of XLM-R's vocabulary, a store of a few corpora, a few steps):
the test suite runs it, so the script cannot rot while no GPU is at hand.

    python benchmarks/gpu_check.py                    # make gpu-check
    python benchmarks/gpu_check.py --dry              # make gpu-check DRY=1
    python benchmarks/gpu_check.py --only tests "bench base" pretrain   # some sections
    python benchmarks/gpu_check.py --ablate           # make gpu-check ABLATE=1: the bench at
                                                      # the defaults and the real runs only

On one H200 the sections before the lever runs took 696 s, the lever runs about 100 s each
(benchmarks/results/2026-11-26-gpu-check.md, 2026-11-27-gpu-levers.md); ``--ablate``'s
sections together 618 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from gpu_check_figures import (
    bench_figures,
    checkpoint_figures,
    pytest_figures,
    recompile_figures,
    render_markdown,
    step_figures,
    token_budget,
)

ROOT = Path(__file__).resolve().parents[1]
MAX_LAYER_GRAPHS = 12  # the forms training calls the layers in (Encoder.compile_layers)

# `infoxlm pretrain` as the console script runs it (infoxlm.cli.main), plus what only the
# process itself can tell at its end: peak memory, time spent compiling, graphs compiled.
PROBED_COMMAND = """
import atexit, json, os, resource, sys

def _probe():
    import torch
    out = {"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if torch.cuda.is_initialized():
        out["peak_allocated_mb"] = torch.cuda.max_memory_allocated() / 2**20
        out["peak_reserved_mb"] = torch.cuda.max_memory_reserved() / 2**20
    if "torch._dynamo" in sys.modules:
        from torch._dynamo.utils import compile_times, counters
        names, values = compile_times(repr="csv")
        times = dict(zip(names, values))
        out["dynamo_compile_s"] = sum(float(v) for v in times.get("_compile.compile_inner", "0").split(","))
        out["unique_graphs"] = counters["stats"]["unique_graphs"]
    with open(os.environ["GPU_CHECK_PROBE"], "w") as f:
        json.dump(out, f)

atexit.register(_probe)
from infoxlm.cli import main
sys.exit(main(sys.argv[1:]))
"""


@dataclass(frozen=True)
class Plan:
    """What the check runs: the GPU's sizes, or the CPU test sizes of ``--dry``."""

    bench: list[tuple[str, list[str]]]  # (section name, infoxlm bench arguments)
    encoder_size: str  # the --init directory's shape (an encoder size, EncoderConfig.of_size)
    tokenizer: str  # the --init directory's and the store's: "xlmr" (250,002 pieces) or "demo"
    preset: str
    steps: int
    save_at: int  # the step after which the one background checkpoint save starts
    pretrain_sets: list[str] = field(default_factory=list)  # --set overrides beyond the check's own
    mono: tuple[str, ...] | None = None  # demo-corpus languages in the store (None: all)
    parallel: tuple[str, ...] | None = None
    timeout_s: int = 600  # per command
    # Real runs at budgets past the automatic ladder's top (98,304): (section name, --set values).
    budget_runs: list[tuple[str, list[str]]] = field(default_factory=list)


def gpu_plan() -> Plan:
    auto = ["--max-tokens", "auto", "--no-baseline"]
    # infoxlm's side keeps the size's warm-up and steps (its compiled layers take new forms in
    # the first steps); the baseline, 3-4 s a step and uncompiled, is timed over 3 of them.
    few_baseline = ["--baseline-steps", "3"]
    return Plan(
        bench=[
            ("bench base, defaults", ["--size", "base", *auto]),
            ("bench base, 98,304 tokens", ["--size", "base", "--max-tokens", "98304", *few_baseline]),
            ("bench large, defaults", ["--size", "large", *auto]),
            ("bench large, 16,384 tokens", ["--size", "large", "--max-tokens", "16384", *few_baseline]),
        ],
        encoder_size="base",
        tokenizer="xlmr",
        preset="base",
        steps=30,
        save_at=15,
        # An eighth of the paper's 2,048 examples per objective (as infoxlm bench): a few dozen
        # steps in a minute or two; the rest of the base preset as it is.
        pretrain_sets=[f"data.{o}_batch_size=256" for o in ("mmlm", "tlm", "xlco")],
        timeout_s=300,
        # 131,072 holds a step's 256 MMLM blocks of 512 tokens in one micro-batch.
        budget_runs=[(f"pretrain, {n:,}-token budget", [f"data.max_tokens={n}"]) for n in (131_072, 163_840)],
    )


def dry_plan() -> Plan:
    quick = ["--size", "test", "--device", "cpu", "--steps", "2", "--warmup", "1"]
    return Plan(
        bench=[
            ("bench test, defaults", [*quick, "--max-tokens", "auto", "--no-baseline"]),
            ("bench test, 256 tokens", [*quick, "--max-tokens", "256", "--baseline-steps", "1"]),
        ],
        encoder_size="tiny",
        # The demo's own vocabulary (a few thousand pieces): XLM-R's 250,002 would make a CPU
        # step of even the tiny encoder seconds long (its embedding, AdamW, the saves).
        tokenizer="demo",
        preset="test",
        steps=5,
        save_at=2,
        mono=("en", "de"),
        parallel=("en-de",),
        timeout_s=300,
    )


class CheckFailed(Exception):
    """A command of the check failed; the message says which and how."""


class Report:
    """The sections run so far, written to OUT/report.json and OUT/report.md after each."""

    def __init__(self, out: Path, dry: bool):
        self.out = out
        self.data: dict[str, Any] = {"dry": dry, "started": datetime.now(timezone.utc).isoformat(), "sections": []}

    def run(self, name: str, body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        print(f"[gpu-check] {name} …", flush=True)
        started = time.perf_counter()
        entry: dict[str, Any] = {"name": name}
        try:
            entry.update(ok=True, figures=body())
        except (Exception, SystemExit) as err:  # recorded; the next section runs
            entry.update(ok=False, error=f"{type(err).__name__}: {err}")
        entry["seconds"] = round(time.perf_counter() - started, 1)
        status = "ok" if entry["ok"] else f"FAILED: {entry['error']}"
        print(f"[gpu-check] {name}: {status} ({entry['seconds']} s)", flush=True)
        self.data["sections"].append(entry)
        self.write()
        return entry

    def write(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "report.json").write_text(json.dumps(self.data, indent=2) + "\n", encoding="utf-8")
        (self.out / "report.md").write_text(render_markdown(self.data), encoding="utf-8")


def run_command(argv: list[str], log: Path, timeout_s: int, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``argv`` from the repository root, its output kept in ``log``; a non-zero exit or a
    timeout raises ``CheckFailed`` with the command's last error line."""
    log.parent.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    try:
        done = subprocess.run(argv, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as err:  # its output may come as bytes even with text=True
        text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else b or ""  # noqa: E731
        log.write_text(f"{text(err.stdout)}\n--- stderr ---\n{text(err.stderr)}", encoding="utf-8")
        raise CheckFailed(f"{' '.join(argv[:4])} … ran past {timeout_s} s (log: {log})") from None
    log.write_text(f"$ {' '.join(argv)}\n{done.stdout}\n--- stderr ---\n{done.stderr}", encoding="utf-8")
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()] or ["(no error output)"]
        raise CheckFailed(f"exit status {done.returncode}: {lines[-1].strip()} (log: {log})")
    return done


def environment() -> dict[str, Any]:
    """Device, versions and commit. Read in a child process: a CUDA context made here would
    hold memory the children's budgets then could not use."""
    probe = (
        "import json, platform, torch\n"
        "cuda = torch.cuda.is_available()\n"
        "p = torch.cuda.get_device_properties(0) if cuda else None\n"
        "print(json.dumps({'device': p.name if cuda else platform.processor() or platform.machine(),\n"
        "  'device_memory_gib': round(p.total_memory / 2**30, 1) if cuda else None,\n"
        "  'torch': torch.__version__, 'cuda': torch.version.cuda, 'cudnn': torch.backends.cudnn.version(),\n"
        "  'python': platform.python_version(), 'cuda_available': cuda}))\n"
    )
    found = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)
    git = lambda *a: subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    found["commit"] = git("rev-parse", "HEAD") or "unknown"
    found["uncommitted_changes"] = bool(git("status", "--porcelain", "--untracked-files=no"))
    smi = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
    found["driver"] = subprocess.run(smi, capture_output=True, text=True).stdout.strip() if shutil.which(smi[0]) else None
    return found


def check_tests(out: Path, plan: Plan) -> dict[str, Any]:
    argv = [sys.executable, "-m", "pytest", "tests/gpu", "-rA", "-p", "no:cacheprovider"]
    try:
        done = run_command(argv, out / "logs" / "tests.log", plan.timeout_s)
    except CheckFailed as err:
        text = (out / "logs" / "tests.log").read_text(encoding="utf-8")
        raise CheckFailed(f"{pytest_figures(text).get('failed_tests') or err}") from None
    return pytest_figures(done.stdout)


def check_bench(out: Path, plan: Plan, name: str, args: list[str]) -> dict[str, Any]:
    log = out / "logs" / f"{name.replace(' ', '_').replace(',', '')}.log"
    done = run_command([sys.executable, "-m", "infoxlm", "bench", "--json", *args], log, plan.timeout_s)
    return bench_figures(json.loads(done.stdout))


def prepare_assets(work: Path, plan: Plan) -> dict[str, Any]:
    """The --init directory (an XLM-R-shaped encoder, random weights, XLM-R's tokenizer) and
    a token store of the demo corpus tokenized with that tokenizer."""
    import torch

    from infoxlm.corpus.prepare import prepare_monolingual, prepare_parallel
    from infoxlm.demo import corpus
    from infoxlm.demo.checkpoint import checkpoint_dir
    from infoxlm.model import Encoder, EncoderConfig
    from infoxlm.tokenizer import Tokenizer
    from xlmr_assets import xlmr_tokenizer_dir

    tokenizer = Tokenizer.from_pretrained(xlmr_tokenizer_dir() if plan.tokenizer == "xlmr" else checkpoint_dir())
    torch.manual_seed(0)
    encoder = Encoder(EncoderConfig.of_size(plan.encoder_size, vocab_size=tokenizer.vocab_size))
    init = encoder.save_pretrained(work / f"init-{plan.encoder_size}", tokenizer)
    parameters = sum(p.numel() for p in encoder.parameters())
    del encoder
    text = corpus.export_training_text(work / "text")
    store = work / "store"
    for lang, path in text["mono"].items():
        if plan.mono is None or lang in plan.mono:
            prepare_monolingual(lang, [path], tokenizer, store, show_progress=False)
    for pair, path in text["parallel"].items():
        if plan.parallel is None or pair in plan.parallel:
            prepare_parallel(pair, tokenizer, store, tsv=path, show_progress=False)
    corpora = sorted(p.name for p in store.glob("*/*") if p.is_dir() and p.parent.name in ("mono", "parallel"))
    return {"init": str(init), "init_parameters": parameters, "vocab_size": tokenizer.vocab_size,
            "store": str(store), "store_corpora": len(corpora)}  # fmt: skip


def check_pretrain(out: Path, plan: Plan, assets: dict[str, Any], name: str, extra_sets: list[str]) -> dict[str, Any]:
    from infoxlm.train.checkpoint import checkpoint_path

    if "init" not in assets:
        raise CheckFailed("no init directory or store: the section 'init directory and store' did not finish")
    slug = name.replace(" ", "_").replace(",", "")
    run_dir, probe = out / "work" / slug, out / "work" / f"{slug}.probe.json"
    sets = [
        "run.log_every=1", f"run.save_every={plan.save_at}", "run.async_checkpoint=true", "run.keep_checkpoints=0",
        *plan.pretrain_sets, *extra_sets,
    ]  # fmt: skip
    argv = [
        sys.executable, "-c", PROBED_COMMAND, "pretrain", "--preset", plan.preset,
        "--init", assets["init"], "--data", assets["store"], "--output", str(run_dir),
        "--max-steps", str(plan.steps), "--no-progress", *(a for s in sets for a in ("--set", s)),
    ]  # fmt: skip
    env = {"TORCH_LOGS": "recompiles", "GPU_CHECK_PROBE": str(probe)}
    done = run_command(argv, out / "logs" / f"{slug}.log", plan.timeout_s, env)
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    config = json.loads((run_dir / "config.json").read_text(encoding="utf-8"))
    figures: dict[str, Any] = {"steps": len(metrics), "max_tokens": token_budget(done.stdout, config)}
    figures.update(step_figures(metrics))
    figures["checkpoint"] = checkpoint_figures(metrics, plan.save_at, checkpoint_path(run_dir, plan.save_at))
    figures["compile"] = recompile_figures(done.stderr, compiled=bool(config["run"]["compile"]))
    figures.update(json.loads(probe.read_text(encoding="utf-8")) if probe.is_file() else {})
    # Its checkpoints measured, a run's gigabytes go: the check makes several such runs on one disk.
    shutil.rmtree(checkpoint_path(run_dir, plan.save_at).parent, ignore_errors=True)
    worst = figures["compile"].get("most_graphs_of_one_function", 0)
    if worst > MAX_LAYER_GRAPHS or figures["compile"].get("recompile_limit_hit"):
        raise CheckFailed(f"a compiled function took {worst} graphs (at most {MAX_LAYER_GRAPHS} expected): {figures['compile']}")
    return figures


def sections(out: Path, plan: Plan) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """The check's sections in the order they run: the tests, the base bench, the real
    pre-training runs, then the large bench (the longest, so a run cut short keeps the rest)."""
    assets: dict[str, Any] = {}  # filled by the store's section, read by the pre-training runs

    def prepare() -> dict[str, Any]:
        assets.update(prepare_assets(out / "work", plan))
        return dict(assets)

    base = [(n, a) for n, a in plan.bench if not n.startswith("bench large")]
    large = [(n, a) for n, a in plan.bench if n.startswith("bench large")]
    bench = lambda n, a: (n, lambda: check_bench(out, plan, n, a))  # noqa: E731
    pretrain = lambda n, sets: (n, lambda: check_pretrain(out, plan, assets, n, sets))  # noqa: E731
    return [
        ("tests", lambda: check_tests(out, plan)),
        *(bench(n, a) for n, a in base),
        ("init directory and store", prepare),
        pretrain("pretrain", []),
        *(pretrain(n, sets) for n, sets in plan.budget_runs),
        *(pretrain(n, sets) for n, sets in LEVER_RUNS),
        pretrain("pretrain, activation checkpointing", ["run.activation_checkpointing=true"]),
        *(bench(n, a) for n, a in large),
    ]


# What makes the real run's step fast beside the step itself, each changed alone and the two
# that are on by default both off: the same run, the same data step by step, so the steps
# compare pairwise. The token bucket is off by default (it cost 6 % a step on one H200).
LEVER_RUNS = [
    ("pretrain, without any lever", ["run.expandable_segments=false", "run.prefetch_data=false"]),
    ("pretrain, without expandable segments", ["run.expandable_segments=false"]),
    ("pretrain, without prefetching", ["run.prefetch_data=false"]),
    ("pretrain, with a 2,048-token bucket", ["run.token_bucket=2048"]),
]


def ablation(names: list[str]) -> list[str]:
    """``--ablate``: the bench at the defaults, the real run at the defaults and with each lever
    changed (the store they need too)."""
    wanted = {"init directory and store", "pretrain", *(n for n, _ in LEVER_RUNS)}
    first_bench = next(n for n in names if n.startswith("bench"))  # at the defaults
    return [n for n in names if n in wanted or n == first_bench]


def chosen(names: list[str], only: list[str] | None) -> list[str]:
    """The section names ``--only`` picks (a section's whole name picks it alone, anything else
    every name it begins), the store added where a pre-training run needs it; every name when
    ``only`` is None."""
    if not only:
        return names
    unknown = [o for o in only if not any(n.startswith(o) for n in names)]
    if unknown:
        raise SystemExit(f"gpu_check.py: --only {unknown[0]!r} names no section; the sections: {', '.join(names)}")
    picked = {n for n in names if any(n == o or (o not in names and n.startswith(o)) for o in only)}
    if any(n.startswith("pretrain") for n in picked):
        picked.add("init directory and store")
    return [n for n in names if n in picked]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=ROOT / "gpu-check", help="report directory (default: gpu-check/)")
    parser.add_argument("--dry", action="store_true", help="the same sections on a CPU at test size")
    parser.add_argument(
        "--only", nargs="+", metavar="SECTION",
        help="run only the sections whose names start so (e.g. tests 'bench base' pretrain); the environment always",
    )  # fmt: skip
    parser.add_argument(
        "--ablate", action="store_true",
        help="only the bench at the defaults and the real run at the defaults and with each lever changed (make gpu-check ABLATE=1)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    plan = dry_plan() if args.dry else gpu_plan()
    out = args.output.resolve()
    steps = sections(out, plan)
    names = chosen([n for n, _ in steps], args.only)
    if args.ablate:
        names = [n for n in ablation([n for n, _ in steps]) if n in names]
    report = Report(out, args.dry)
    started = time.perf_counter()
    env = report.run("environment", environment)
    if not args.dry and not env.get("figures", {}).get("cuda_available"):
        print("[gpu-check] no CUDA device here: each GPU section will record its failure (use --dry on a CPU)", flush=True)
    for name, body in steps:
        if name in names:
            report.run(name, body)
    report.data["seconds"] = round(time.perf_counter() - started, 1)
    report.write()
    failed = [s["name"] for s in report.data["sections"] if not s["ok"]]
    print(f"[gpu-check] {out / 'report.md'}: {len(report.data['sections']) - len(failed)} sections ok, "
          f"{len(failed)} failed{': ' + ', '.join(failed) if failed else ''} ({report.data['seconds']} s)", flush=True)  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
