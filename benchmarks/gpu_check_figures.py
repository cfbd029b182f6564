"""The figures `benchmarks/gpu_check.py` reads off each command's output, and its Markdown report.

Pure functions of text and JSON (no torch), so the tests check them on canned outputs too.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

BENCH_KEYS = (
    "compiled_layers", "dtype", "tokens_per_step", "tokens_per_s", "baseline_tokens_per_s", "speedup",
    "step_seconds", "baseline_step_seconds", "mfu", "baseline_mfu", "peak_flops_source", "peak_memory_mb",
    "baseline_peak_memory_mb", "process_peak_rss_mb", "phases", "steps", "warmup", "baseline_steps",
)  # fmt: skip


def bench_figures(result: dict[str, Any]) -> dict[str, Any]:
    """What the report keeps of ``infoxlm bench --json``: throughput, speed-up, MFU, memory,
    and the micro-batch budgets each side ran with."""
    figures = {key: result[key] for key in BENCH_KEYS if result.get(key) is not None}
    figures["max_tokens"] = result["batches"]["max_tokens"]
    if result.get("baseline_tokens_per_s") is not None:
        figures["baseline_max_tokens"] = result["batches"]["baseline_max_tokens"]
    figures["batches"] = [result["batches"][o] for o in ("mmlm", "tlm", "xlco")]
    return figures


def pytest_figures(output: str) -> dict[str, Any]:
    """pytest's closing counts ("5 passed, 1 skipped in 12.3s") and the tests that failed."""
    # The closing line, bare under -q ("6 skipped in 2.73s") or framed ("=== 5 passed in 9s ===").
    closing = re.findall(r"^=* ?(\d+ (?:passed|failed|skipped|errors?|deselected)\b.* in [\d.]+s)\b.*$", output, flags=re.M)
    summary = closing[-1] if closing else ""
    figures: dict[str, Any] = {"summary": summary or None}
    figures.update({word: int(n) for n, word in re.findall(r"(\d+) (\w+)", summary) if word != "in"})
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+(?: - .*)?)$", output, flags=re.M)
    if failed:
        figures["failed_tests"] = failed
    return figures


def token_budget(stdout: str, config: dict[str, Any]) -> dict[str, Any]:
    """The micro-batch budget a run took: the line it printed when it chose one (data.max_tokens
    unset, on a GPU), else the value in its config."""
    chosen = re.search(r"micro-batch token budget: ([\d,]+) tokens per objective.*", stdout)
    if chosen:
        return {"tokens": int(chosen.group(1).replace(",", "")), "chosen": chosen.group(0)}
    return {"tokens": config["data"]["max_tokens"], "chosen": "data.max_tokens of the config (not chosen by the run)"}


def steady(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The steps after the first third (at least the first two): compiling, the queue and the
    allocator's warm-up are behind them."""
    skip = max(2, len(metrics) // 3)
    return metrics[skip:] or metrics[-1:]


def step_figures(metrics: list[dict[str, Any]]) -> dict[str, Any]:
    """Median step time, tokens/s, TFLOP/s and MFU of the steady steps (RUN/metrics.jsonl, one
    line per step), and the time the first steps took beyond that median (mostly compiling)."""
    later = steady(metrics)
    median = lambda key: statistics.median(m[key] for m in later) if all(key in m for m in later) else None  # noqa: E731
    step_s = median("seconds")
    first = metrics[: len(metrics) - len(later)]
    figures = {
        "step_seconds": step_s,
        "first_step_seconds": metrics[0]["seconds"],
        "warmup_excess_seconds": sum(max(0.0, m["seconds"] - step_s) for m in first),
        "tokens_per_s": median("tokens_per_s"),
        "tflops_per_s": median("tflops_per_s_per_device"),
        "mfu": median("mfu"),
        "padding_fraction": median("padding_fraction"),
        **allocator_figures(metrics, len(first)),
        "final_losses": {k: v for k, v in metrics[-1].items() if k.startswith("loss/")},
    }
    return {k: v for k, v in figures.items() if v is not None}


def allocator_figures(metrics: list[dict[str, Any]], settled_from: int) -> dict[str, float]:
    """Device reservations and releases (cudaMalloc / cudaFree, or segment maps and unmaps)
    per step from step index ``settled_from`` on, from the cumulative counters a GPU run logs
    (none on a CPU)."""
    figures = {}
    for key, name in (("memory/device_allocs", "device_allocs_per_step"), ("memory/device_frees", "device_frees_per_step")):
        if settled_from > 0 and all(key in m for m in metrics):
            figures[name] = (metrics[-1][key] - metrics[settled_from - 1][key]) / (len(metrics) - settled_from)
    return figures


def checkpoint_figures(metrics: list[dict[str, Any]], save_at: int, folder: Path) -> dict[str, Any]:
    """The background save after step ``save_at`` into ``folder``: what it held up between the
    two steps (the gap between step ``save_at`` being logged and step ``save_at + 1`` starting,
    beyond the median gap), what the next steps took beyond the median step while it wrote, and
    its size."""
    by_step = {m["step"]: m for m in metrics}
    gaps = {
        s: by_step[s]["time"] - by_step[s - 1]["time"] - by_step[s]["seconds"]
        for s in by_step if s - 1 in by_step
    }  # fmt: skip
    if save_at + 1 not in gaps:
        raise ValueError(f"metrics.jsonl has no steps {save_at} and {save_at + 1}: the save was not timed")
    usual_gap = statistics.median(g for s, g in gaps.items() if s != save_at + 1)
    step_s = statistics.median(m["seconds"] for m in steady(metrics))
    after = [by_step[s]["seconds"] for s in range(save_at + 1, save_at + 4) if s in by_step]
    return {
        "step": save_at,
        "blocking_seconds": gaps[save_at + 1] - usual_gap,
        "next_steps_extra_seconds": sum(s - step_s for s in after),
        "written": folder.is_dir(),
        "size_mb": sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 2**20,
    }


def recompile_figures(stderr: str, compiled: bool) -> dict[str, Any]:
    """``TORCH_LOGS=recompiles`` of a run that compiled its layers or not: graphs per compiled
    function (1 + its recompiles, for the functions that recompiled) and whether dynamo hit a
    recompile limit (and ran a form uncompiled)."""
    if not compiled:
        return {"compiled_layers": False}
    recompiled = Counter(re.findall(r"Recompiling function (\S+ in \S+)", stderr))
    limits = re.findall(r"torch\._dynamo hit config\.(\w+)", stderr)
    return {
        "compiled_layers": True,
        "recompiles": sum(recompiled.values()),
        "graphs_by_function": {name: 1 + n for name, n in recompiled.items()},
        "most_graphs_of_one_function": 1 + max(recompiled.values(), default=0),
        "recompile_limit_hit": sorted(set(limits)),
    }


# --- the Markdown report -----------------------------------------------------------------------


def render_markdown(report: dict[str, Any]) -> str:
    sections = report["sections"]
    title = "infoxlm GPU check" + (" (dry run: CPU, test sizes)" if report["dry"] else "")
    lines = [f"# {title}", "", f"Started {report['started']}" + (f", {report['seconds']} s in all." if "seconds" in report else " (running)."), ""]
    env = next((s for s in sections if s["name"] == "environment" and s["ok"]), None)
    if env:
        lines += ["| | |", "|---|---|"] + [f"| {k} | {_value(v)} |" for k, v in env["figures"].items()] + [""]
    lines += ["| section | status | seconds |", "|---|---|---:|"]
    lines += [f"| {s['name']} | {'ok' if s['ok'] else '**FAILED**'} | {s['seconds']} |" for s in sections]
    for s in sections:
        if s["name"] == "environment" and s["ok"]:
            continue
        lines += ["", f"## {s['name']}", ""]
        if not s["ok"]:
            lines += ["**FAILED**:", "", "```", s["error"], "```"]
            continue
        lines += _bullets(s["figures"])
    lines += lever_table(sections)
    return "\n".join(lines) + "\n"


LEVER_COLUMNS = (
    ("step_seconds", "step (s)"), ("tokens_per_s", "tokens/s"), ("mfu", "MFU"),
    ("device_allocs_per_step", "allocs / step"), ("device_frees_per_step", "frees / step"),
    ("peak_allocated_mb", "peak allocated (MB)"), ("peak_reserved_mb", "peak reserved (MB)"),
)  # fmt: skip


def lever_table(sections: list[dict[str, Any]]) -> list[str]:
    """The real runs (at the defaults, with a lever changed, with activation checkpointing)
    side by side, their settled steps, each step time against the run at the defaults;
    nothing before two such runs are done."""
    runs = [s for s in sections if s["ok"] and s["name"].startswith("pretrain")]
    if len(runs) < 2:
        return []
    lines = ["", "## The real runs side by side", "", "| run | " + " | ".join(h for _, h in LEVER_COLUMNS) + " | graphs | step against the defaults' |"]
    lines.append("|---" * (len(LEVER_COLUMNS) + 3) + "|")
    reference = next((r["figures"].get("step_seconds") for r in runs if r["name"] == "pretrain"), None)
    for run in runs:
        f = run["figures"]
        cells = [_value(f[key]) if key in f else "–" for key, _ in LEVER_COLUMNS]
        cells.append(_value(f.get("compile", {}).get("most_graphs_of_one_function", "–")))
        step = f.get("step_seconds")
        cells.append(f"{step / reference:.3f}×" if step and reference else "–")
        lines.append(f"| {run['name']} | " + " | ".join(cells) + " |")
    return lines


def _bullets(figures: dict[str, Any], indent: str = "") -> list[str]:
    lines = []
    for key, value in figures.items():
        if isinstance(value, dict) and value:
            lines.append(f"{indent}- {key}:")
            lines += _bullets(value, indent + "  ")
        else:
            lines.append(f"{indent}- {key}: {_value(value)}")
    return lines


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value).replace("|", "\\|")
