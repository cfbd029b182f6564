"""``infoxlm bench``: the joint training step against a plain Hugging Face baseline."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Callable

from ..cli_args import BENCH_SIZE_NAMES

if TYPE_CHECKING:
    from ..bench.sizes import Batches


def add_bench_command(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "bench",
        help="time the joint training step (MMLM + TLM + XLCO) against a Hugging Face baseline",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Time infoxlm's full joint training step (MMLM + TLM + XLCO with its queue, EMA update\n"
            "and optimizer step) and, on identical synthetic batches and identical initial weights,\n"
            "the same step written plainly with transformers' XLMRobertaForMaskedLM. Both sides\n"
            "must compute the same first-step losses (fp32) before anything is timed. Reports\n"
            "tokens/s, the speed-up, step time by phase, peak memory and, on a GPU, MFU (on a\n"
            "CPU too with --peak-flops measure: against the CPU's own matrix-product rate).\n\n"
            "Sizes: test (seconds), demo (the demo's 4×256 model), base (XLM-R base, 250k\n"
            "vocabulary, 512-token blocks), large (XLM-R large).\n\n"
            "examples:\n"
            "  infoxlm bench --size demo --device cpu\n"
            "  infoxlm bench --size demo --device cpu --peak-flops measure\n"
            "  infoxlm bench --size base --device cuda --json > base.json\n"
            "  infoxlm bench --size base --device cpu --batch 1,2,4 --steps 3 --warmup 1"
        ),
    )
    p.add_argument("--size", default="demo", choices=BENCH_SIZE_NAMES, help="model and sequence sizes (default: demo)")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available)")
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout instead of a table")
    p.add_argument("--steps", type=int, default=None, help="timed steps per side (default: per size and device)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps per side first (default: per size and device)")
    p.add_argument(
        "--baseline-steps", type=int, default=None, metavar="N",
        help="time the baseline over the first N of infoxlm's steps only (default: all): its steps are "
        "not compiled and take the same time each, so a few suffice beside a slow baseline",
    )  # fmt: skip
    p.add_argument(
        "--batch",
        default=None,
        metavar="MMLM,TLM,XLCO",
        help="examples per optimizer step for each objective, e.g. 1,2,4 (default: per size and device)",
    )
    p.add_argument(
        "--max-tokens",
        type=max_tokens_option,
        default=None,
        help="padded tokens per micro-batch (gradient accumulation beyond), or 'auto': the budget a training run "
        "with data.max_tokens unset picks on this device (default: per size and device)",
    )
    p.add_argument(
        "--baseline-max-tokens",
        type=int,
        default=None,
        help="the baseline's own micro-batch budget, same global batch (default: per size; on a GPU base/large 8192)",
    )
    p.add_argument("--no-baseline", action="store_true", help="time infoxlm alone (no transformers needed)")
    p.add_argument("--fp32", action="store_true", help="on a GPU: no bf16 autocast (CPU runs are always fp32)")
    p.add_argument(
        "--compile",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="torch.compile infoxlm's encoder layers, as the trainer does on a GPU (default: on a GPU only)",
    )
    p.add_argument(
        "--peak-flops",
        type=peak_flops_option,
        default=None,
        help="the MFU denominator: a FLOP/s rate, or 'measure' for the best rate of the step's matrix "
        "products on this device, timed around the steps (default: the datasheet bf16 peak of known "
        "GPUs; no MFU on a CPU)",
    )
    p.add_argument("--rtol", type=float, default=1e-4, help="tolerance of the first-step loss check (default: 1e-4)")
    p.add_argument("--seed", type=int, default=0, help="weights and batches (default: 0)")
    p.set_defaults(func=run_bench_command)


def number_or_word(word: str, number: type, what: str) -> Callable[[str], float | int | str]:
    """An option's type: ``word`` itself, or a number (checked in range where it is used)."""

    def parse(text: str) -> float | int | str:
        if text == word:
            return text
        try:
            return number(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected {what}, or {word!r}") from None

    return parse


peak_flops_option = number_or_word("measure", float, "a FLOP/s rate such as 1.5e11")  # --peak-flops
max_tokens_option = number_or_word("auto", int, "a number of tokens such as 98304")  # --max-tokens


def parse_batches(
    text: str | None, max_tokens: int | str | None, default: Batches, baseline_max_tokens: int | None = None
) -> Batches:
    """``--batch 1,2,4``, ``--max-tokens`` and ``--baseline-max-tokens`` over the size's defaults."""
    from ..bench.sizes import Batches, BenchError

    mmlm, tlm, xlco = default.mmlm, default.tlm, default.xlco
    if text is not None:
        parts = text.split(",")
        try:
            mmlm, tlm, xlco = (int(x) for x in parts)
        except ValueError:
            raise BenchError(f"--batch {text!r}: expected three integers MMLM,TLM,XLCO, e.g. 1,2,4") from None
        if min(mmlm, tlm, xlco) < 0:
            raise BenchError(f"--batch {text!r}: batch sizes must be >= 0")
    if max_tokens is None:  # not given: the size's own
        tokens = default.max_tokens
    elif max_tokens == "auto":  # chosen as a training run chooses it (None)
        tokens = None
    else:
        tokens = max_tokens
    if tokens is not None and tokens < 1:
        raise BenchError(f"--max-tokens {tokens}: expected a positive number of tokens")
    baseline = default.baseline_max_tokens if baseline_max_tokens is None else baseline_max_tokens
    if baseline is not None and baseline < 1:
        raise BenchError(f"--baseline-max-tokens {baseline}: expected a positive number of tokens")
    return Batches(mmlm, tlm, xlco, tokens, baseline_max_tokens=baseline)


def run_bench_command(args: argparse.Namespace) -> int:
    import torch

    from ..bench.step_benchmark import resolve_device, run_benchmark
    from ..bench.report import format_report
    from ..bench.sizes import BenchError, bench_size

    device = resolve_device(args.device)
    batches = parse_batches(
        args.batch, args.max_tokens, bench_size(args.size).batches(device.type), args.baseline_max_tokens
    )
    try:
        result = run_benchmark(
            args.size,
            str(device),
            steps=args.steps,
            warmup=args.warmup,
            baseline_steps=args.baseline_steps,
            batches=batches,
            baseline=not args.no_baseline,
            bf16=not args.fp32,
            compile_layers=args.compile,
            peak_flops=args.peak_flops,
            rtol=args.rtol,
            seed=args.seed,
        )
    except torch.cuda.OutOfMemoryError as error:
        what = ". ".join(str(error).split(". ")[:2]) or "out of memory"  # "CUDA out of memory. Tried to allocate …"
        raise BenchError(
            f"--size {args.size} on {device}: {what}. Both sides share the device: lower "
            f"--max-tokens (now {batches.max_tokens or 'auto'}) or --baseline-max-tokens (now "
            f"{batches.baseline_tokens or 'the same'}), "
            "or time infoxlm alone with --no-baseline"
        ) from None
    print(json.dumps(result, indent=2) if args.json else format_report(result), flush=True)
    return 0
