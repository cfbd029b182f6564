"""What ``infoxlm pretrain`` prints on the terminal: a short summary of the resolved config at
the start, a line every ``run.log_every`` steps when there is no progress bar, and at the end
what the run wrote and the command to run next.

The whole config is not printed (about 80 lines of JSON before the first step): it is in
``RUN/config.json`` and every checkpoint, and ``--print-config`` prints it without running.

    >>> print(step_line(10, 150, {"loss/mmlm": 7.1234, "xlco/accuracy": 0.5, "tokens_per_s": 1234.5, "lr": 2e-4}))
    step 10/150: mmlm 7.123, acc 0.50, 1234 tok/s, lr 2.0e-04
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

def config_summary(
    config: Any,
    *,
    run_dir: Path,
    preset: str | None,
    encoder: Any,
    store: Any,
    device: str,
    processes: int,
    bf16: bool,
    start_step: int,
) -> list[str]:
    """The lines that say what this run will do, read from the resolved ``config`` (a
    TrainConfig), the built ``encoder`` and the opened token ``store``."""
    m, d, o, r = config.model, config.data, config.optim, config.run
    shape = encoder.config
    parameters = sum(p.numel() for p in encoder.parameters())
    start = f"resumed at step {start_step}" if start_step else "new run"
    origin = f"continues {m.init}" if m.init else f"from scratch ({m.init_scheme} init)"
    lines = [
        f"pretrain {run_dir} ({start})" + (f", preset {preset}" if preset else ""),
        # A continued model's shape is its directory's: model.size names none then.
        f"  model     {'' if m.init else m.size + ': '}{_count(shape.num_hidden_layers, 'layer')}, hidden {shape.hidden_size}, "
        f"{shape.num_attention_heads} heads, vocabulary {shape.vocab_size:,}; {_millions(parameters)} "
        f"parameters; {origin}",
        f"  data      {store.root}: {_names(store.mono, 'language')}, {_names(store.parallel, 'pair')}; "
        f"sampled p ∝ (n/N)^{d.alpha if d.alpha_schedule is None else d.alpha_schedule + ' (step:α)'}, "
        f"n in {_unit(d.sampling_unit)}" + _data_changes(d),
        f"  batch     {_batches(config)} per step",
        f"  steps     {o.max_steps:,} (warm-up {o.warmup_steps:,}, lr {o.lr:g}"
        + (f", warm-up–stable–decay over the last {o.decay_fraction:.0%}" if o.schedule == "wsd" else "")
        + f"); checkpoint every {r.save_every:,} steps"
        + (f" and {r.save_every_minutes:g} minutes" if r.save_every_minutes else "")
        + f", log every {r.log_every:,}",
        f"  device    {device}" + (f" × {processes} processes ({r.parallelism})" if processes > 1 else "")
        + f"; {'bf16' if bf16 else 'fp32'}; compile {'on' if r.compile else 'off'}; micro-batch budget "
        f"{d.max_tokens:,} tokens per objective"
        + (f", packed passes rounded up to a multiple of {r.token_bucket:,}" if r.token_bucket else ""),
        f"  full config: {run_dir / 'config.json'} (--print-config prints it without running)",
    ]
    return lines


def _data_changes(d: Any) -> str:
    """The data settings past the paper's (schedules, late languages, multi-way pairs) of ``d``, the
    run's PipelineConfig, as parts of its console line."""
    changes = [
        f"mask rate {d.mask_schedule} (step:rate)" if d.mask_schedule else "",
        f"languages from steps {d.language_starts}" if d.language_starts else "",
        f"{d.multiway_share:.0%} of pairs xx–yy through {d.pivot}" if d.pairs == "multiway" else "",
    ]
    return "".join(f"; {c}" for c in changes if c)


def step_line(step: int, max_steps: int, metrics: dict[str, float]) -> str:
    """One logged step, for a run without a progress bar (the bar's postfix, and the lr)."""
    parts = [bar_postfix(metrics)]
    if "lr" in metrics:
        parts.append(f"lr {metrics['lr']:.1e}")
    return f"step {step}/{max_steps}: " + ", ".join(parts)


def bar_postfix(metrics: dict[str, float]) -> str:
    """Each objective's loss, XLCO accuracy and tokens/s, as the progress bar shows them."""
    parts = [f"{k.split('/')[1]} {v:.3f}" for k, v in metrics.items() if k.startswith("loss/")]
    if "xlco/accuracy" in metrics:
        parts.append(f"acc {metrics['xlco/accuracy']:.2f}")
    if "tokens_per_s" in metrics:
        parts.append(f"{metrics['tokens_per_s']:.0f} tok/s")
    # A validation step (train/validation.py): the held-out losses and the average retrieval.
    parts += [f"val {k[4:]} {metrics[k]:.3f}" for k in ("val/mmlm", "val/tlm") if k in metrics]
    if "val/retrieval_xx2en" in metrics:
        parts.append(f"val xx→en {metrics['val/retrieval_xx2en']:.1f}%")
    return ", ".join(parts)


def finished_lines(run_dir: Path, step: int, checkpoint: Path | None) -> list[str]:
    """What a finished run wrote and the command to run next (export; its output may not lie
    inside the run directory, so it goes beside it).

    >>> finished_lines(Path("runs/t"), 6, Path("runs/t/checkpoints/step-6"))[1]
    'next: infoxlm export runs/t runs/t-model  (a Hugging Face XLM-R directory for eval, finetune and embed)'
    """
    wrote = f"checkpoint {checkpoint}, " if checkpoint is not None else ""
    model = run_dir.with_name(run_dir.name + "-model")
    return [
        f"finished {run_dir} at step {step}: wrote {wrote}{run_dir / 'metrics.jsonl'}, {run_dir / 'config.json'}",
        f"next: infoxlm export {run_dir} {model}  (a Hugging Face XLM-R directory for eval, finetune and embed)",
    ]


def _batches(config: Any) -> str:
    d = config.data
    sizes = {
        "mmlm": f"MMLM {d.mmlm_batch_size} × {d.block_size} tokens",
        "tlm": f"TLM {d.tlm_batch_size} pairs ≤ {d.tlm_max_length} tokens",
        "xlco": f"XLCO {d.xlco_batch_size} pairs ≤ {d.xlco_max_length} tokens"
        + (f" (queue {config.contrast.queue_size:,})" if config.contrast.queue_size else ""),
    }
    return ", ".join(sizes[o] for o in d.enabled) or "no objective"


def _names(corpora: dict[str, Any], what: str) -> str:
    names = sorted(corpora)
    shown = ", ".join(names[:6]) + (", …" if len(names) > 6 else "")
    return _count(len(names), what) + (f" ({shown})" if names else "")


def _count(n: int, what: str) -> str:
    """``n`` things, in the singular for one.

    >>> _count(1, "layer"), _count(12, "layer")
    ('1 layer', '12 layers')
    """
    return f"{n:,} {what}{'' if n == 1 else 's'}"


def _millions(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def _unit(unit: str) -> str:
    return {"instances": "lines and pairs", "tokens": "tokens"}.get(unit, unit)
