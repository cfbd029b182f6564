"""The benchmark's result as a table for people (``--json`` prints the dict itself)."""

from __future__ import annotations

from .timing import PHASES


def _num(value, fmt: str, missing: str = "–") -> str:
    return missing if value is None else format(value, fmt)


def format_report(r: dict) -> str:
    """A few aligned lines: setup, the two sides, the phases, the check."""
    b, s = r["batches"], r["shape"]
    lines = [
        f"joint training step, size {r['size']} ({s['layers']}×{s['hidden']}, vocabulary {s['vocab']:,}, "
        f"contrast layer {s['contrast_layer']}, queue {s['queue']:,})",
        f"device {r['device']} ({r['device_name']}), {r['dtype']}, {r['threads']} threads; torch {r['torch']}"
        + (f", transformers {r['transformers']}" if r["transformers"] else ""),
        f"batch per step: MMLM {b['mmlm']} × {s['block_size']}, TLM {b['tlm']}, XLCO {b['xlco']} "
        f"(micro-batches ≤ {b['max_tokens']:,} tokens); {r['tokens_per_step']:,.0f} real tokens, "
        f"{r['flops_per_step'] / 1e9:,.1f} useful GFLOP per step; median of {r['steps']} steps after {r['warmup']} warm-up"
        + (f" (the baseline's: its first {r['baseline_steps']})" if r["baseline_steps"] not in (None, r["steps"]) else ""),
        "",
        f"{'':<22}{'tokens/s':>12}{'step s':>10}{'TFLOP/s':>10}{'MFU':>8}{'peak MB':>10}",
    ]
    rows = [("infoxlm", "", "step_seconds", "peak_memory_mb")]
    if r["baseline_tokens_per_s"] is not None:
        rows.append(("Hugging Face baseline", "baseline_", "baseline_step_seconds", "baseline_peak_memory_mb"))
    for label, prefix, step_key, memory_key in rows:
        mfu = r[f"{prefix}mfu"]
        lines.append(
            f"{label:<22}{r[f'{prefix}tokens_per_s']:>12,.0f}{r[step_key]:>10.3f}"
            f"{r[f'{prefix}achieved_tflops']:>10.3f}{_num(mfu and 100 * mfu, '.1f') + ('%' if mfu else ''):>8}"
            f"{_num(r[memory_key], ',.0f'):>10}"
        )
    if r["speedup"] is not None:
        lines.append(
            f"speed-up (tokens/s): {r['speedup']:.2f}× (median per-round ratio {r['speedup_paired']:.2f}×, "
            f"best steps {r['speedup_best']:.2f}×)"
        )
    lines += ["", f"{'phase (median s)':<22}" + "".join(f"{p:>11}" for p in PHASES)]
    for label, key in (("infoxlm", "phases"), ("Hugging Face baseline", "baseline_phases")):
        if r.get(key):
            lines.append(f"{label:<22}" + "".join(f"{r[key][p]:>11.4f}" for p in PHASES))
    if r["loss_check"]:
        check = r["loss_check"]
        losses = ", ".join(f"{k} {v[0]:.5f} / {v[1]:.5f}" for k, v in check["losses"].items())
        lines.append(f"\nfirst-step losses agree (rtol {check['rtol']:g}), infoxlm / baseline: {losses}")
    if r["mfu"] is None and r["device"].startswith("cuda"):
        lines.append("MFU: unknown GPU peak; pass --peak-flops")
    elif r["peak_flops"]:
        lines.append(f"MFU against {r['peak_flops'] / 1e12:.3g} TFLOP/s ({r['peak_flops_source']})")
    return "\n".join(lines)
