"""What `infoxlm pretrain` prints: a short summary of the resolved config (the whole of it in
RUN/config.json and --print-config), a line per logged step without the bar, and at the end
what the run wrote and the next command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from infoxlm.cli import main
from infoxlm.train.console import config_summary, finished_lines, step_line
from infoxlm.train.config import apply_overrides
from infoxlm.train.presets import preset

from training_stores import random_documents, random_pairs, write_mono, write_parallel, write_store


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("console") / "store"
    rng = np.random.default_rng(0)
    write_store(root)
    for language in ("de", "en"):
        write_mono(root, language, random_documents(rng, 30))
    write_parallel(root, "en-de", random_pairs(rng, 40))
    return root


def test_pretrain_prints_a_summary_a_line_per_logged_step_and_what_to_do_next(store, tmp_path, capsys):
    run = tmp_path / "run"
    args = ["pretrain", "--preset", "test", "--data", str(store), "--output", str(run), "--max-steps", "4",
            "--set", "run.log_every=2", "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out.splitlines()
    first_step = next(i for i, line in enumerate(out) if line.startswith("step "))
    summary = "\n".join(out[:first_step])
    assert first_step <= 10 and "{" not in summary, summary  # no JSON dump before the first step
    assert out[0] == f"pretrain {run} (new run), preset test"
    for expected in ("tiny: 2 layers", "parameters; from scratch", "2 languages (de, en), 1 pair (en-de)",
                     "n in lines and pairs", "MMLM 4 × 32 tokens", "steps     4 (warm-up 2",
                     "device    cpu; fp32; compile off; micro-batch budget 256 tokens per objective",
                     f"full config: {run / 'config.json'}"):
        assert expected in summary, expected
    # --no-progress: a line every run.log_every steps (and at the last)
    assert [line.split(":")[0] for line in out if line.startswith("step ")] == ["step 2/4", "step 4/4"]
    assert out[-2].startswith(f"finished {run} at step 4: wrote checkpoint {run / 'checkpoints'}")
    assert out[-1].startswith(f"next: infoxlm export {run} {tmp_path / 'run-model'}")
    # the full config is where the summary says
    assert json.loads((run / "config.json").read_text())["optim"]["max_steps"] == 4

    # resumed: the summary says from which step; with the bar on, no step lines on stdout
    assert main(args[:8] + ["6", "--set", "run.log_every=2", "--allow-config-change"]) == 0
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    # Two more steps re-stretch the finished schedule: the rate jumps back up, and a note says so.
    lr = preset("test").optim.lr
    assert f"note: optim.max_steps 4 → 6: the learning rate at step 4 moves from 0.00e+00 to {lr / 2:.2e}" in captured.err
    assert f"pretrain {run} (resumed at step 4), preset test" in out
    assert not [line for line in out if line.startswith("step ")]

    # the same command once more: nothing to do, and it says so rather than "wrote checkpoint"
    assert main(args[:8] + ["6", "--set", "run.log_every=2", "--allow-config-change"]) == 0
    out = capsys.readouterr().out
    assert f"{run}: finished at step 6 already; nothing written" in out and "wrote checkpoint" not in out


def test_print_config_still_prints_the_whole_config_as_json(capsys):
    assert main(["pretrain", "--preset", "test", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["run"]["log_every"] == preset("test").run.log_every


class _Encoder:
    """What the summary reads of an encoder."""

    class config:  # noqa: N801
        num_hidden_layers, hidden_size, num_attention_heads, vocab_size = 12, 768, 12, 250_002

    def parameters(self):
        return [torch.empty(278_000_000, device="meta")]


class _Store:
    root = "store"
    mono = {code: None for code in ("ar", "bg", "de", "el", "en", "es", "fr", "hi")}
    parallel = {"en-de": None}


def test_summary_of_a_base_run_on_eight_gpus():
    config = apply_overrides(preset("base"), ["model.init=xlm-roberta-base", "data.sampling_unit=tokens",
                                              "run.compile=true", "data.max_tokens=16384", "run.token_bucket=2048"])
    lines = config_summary(config, run_dir=Path("runs/base"), preset="base", encoder=_Encoder(),
                           store=_Store(), device="cuda", processes=8, bf16=True, start_step=0)
    text = "\n".join(lines)
    # The shape is the continued model's, which the base preset's size does not name.
    assert "model     12 layers, hidden 768, 12 heads, vocabulary 250,002; 278.0M parameters; continues xlm-roberta-base" in text
    assert "8 languages (ar, bg, de, el, en, es, …), 1 pair (en-de)" in text and "n in tokens" in text
    assert "device    cuda × 8 processes (ddp); bf16; compile on; micro-batch budget 16,384 tokens" in text
    assert "per objective, packed passes rounded up to a multiple of 2,048" in text
    assert len(lines) <= 8


def test_summary_names_the_schedules_and_multiway_pairs():
    config = apply_overrides(preset("base"), ["data.mask_schedule=0:0.3,2000:0.15", "data.alpha_schedule=0:0.7,2000:0.3",
                                              "data.language_starts=sw:1000", "data.pairs=multiway", "optim.schedule=wsd",
                                              "data.max_tokens=16384"])  # fmt: skip
    text = "\n".join(config_summary(config, run_dir=Path("r"), preset="base", encoder=_Encoder(), store=_Store(),
                                    device="cpu", processes=1, bf16=False, start_step=0))  # fmt: skip
    assert "sampled p ∝ (n/N)^0:0.7,2000:0.3 (step:α), n in lines and pairs; mask rate 0:0.3,2000:0.15 (step:rate); " in text
    assert "languages from steps sw:1000; 50% of pairs xx–yy through en" in text
    assert "lr 0.0002, warm-up–stable–decay over the last 10%)" in text


def test_step_line_and_the_next_command():
    line = step_line(20, 100, {"loss/mmlm": 2.0, "loss/xlco": 1.5, "xlco/accuracy": 0.25, "tokens_per_s": 99.6, "lr": 1e-4})
    assert line == "step 20/100: mmlm 2.000, xlco 1.500, acc 0.25, 100 tok/s, lr 1.0e-04"
    assert finished_lines(Path("r"), 0, None)[0] == "finished r at step 0: wrote r/metrics.jsonl, r/config.json"
