"""train/step_estimate.py: a run whose step takes over a minute on its device says so, with the
time to its end, before the first step."""

from __future__ import annotations

import pytest
import torch

from infoxlm.cli import main
from infoxlm.model.config import EncoderConfig
from infoxlm.train import step_estimate
from infoxlm.train.config import apply_overrides
from infoxlm.train.flops import ModelShape
from infoxlm.train.presets import preset
from infoxlm.train.step_estimate import SLOW_STEP_S, SLOWEST_RATE, full_length_flops, slow_step_warning

from training_stores import build_store


def shape_of(size: str, vocab_size: int = 250_002) -> ModelShape:
    c = EncoderConfig.of_size(size, vocab_size=vocab_size)
    return ModelShape(c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size)


def test_base_on_a_cpu_is_hours_a_step():
    """The paper's base step (2,048 examples of each objective, 512 tokens, XLM-R base) is
    petaFLOPs: at 100 GFLOP/s, hours."""
    flops = full_length_flops(preset("base"), shape_of("base"))
    assert 1e15 < flops < 1e16
    warning = slow_step_warning(flops, 1e11, "measured", "cpu", steps_left=150_000)
    assert warning.startswith("warning: a step of this run takes at least ") and " h on this device" in warning
    assert "150,000 steps to go take at least" in warning and "years" in warning
    assert warning.endswith("on a CPU, --preset test (seconds) or --preset demo (minutes) fit")


def test_on_a_gpu_there_is_no_cpu_advice_and_a_short_step_says_nothing():
    flops = full_length_flops(preset("xxl"), shape_of("xxl"))  # XXL's step on one GPU's peak: minutes
    warning = slow_step_warning(flops, 989.4e12, "the H100's dense bf16 peak", "cuda", steps_left=200_000)
    assert warning is not None and "CPU" not in warning
    assert slow_step_warning(flops, flops / SLOW_STEP_S, "peak", "cuda", steps_left=10) is None  # a minute exactly


def test_the_queue_s_filling_counts_before_the_steps():
    warning = slow_step_warning(1e13, 1e11, "measured", "cpu", steps_left=1, prefill_flops=3.6e14)
    assert "1 steps to go take at least 62 min, 60 min of it filling the XLCO queue" in warning


def test_the_test_preset_is_passed_over_without_measuring():
    """The test preset's step is short even at the slowest rate: no product is timed for its
    runs (the tests make hundreds); the demo's is timed (0.3 s of a run of minutes)."""
    assert full_length_flops(preset("test"), shape_of("tiny", vocab_size=8000)) / SLOWEST_RATE < SLOW_STEP_S
    assert full_length_flops(preset("demo"), shape_of("small", vocab_size=8000)) / SLOWEST_RATE > SLOW_STEP_S


def test_the_bound_is_shared_out_over_processes():
    config, shape = preset("base"), shape_of("base")
    assert full_length_flops(config, shape, world_size=8) == pytest.approx(full_length_flops(config, shape) / 8)
    no_xlco = apply_overrides(preset("base"), ["data.xlco_batch_size=0"])
    assert full_length_flops(no_xlco, shape) < full_length_flops(config, shape)


@pytest.mark.slow  # a short training run
def test_a_run_says_its_step_time_before_the_first_step(tmp_path, capsys, monkeypatch):
    """On a device as slow as 1 MFLOP/s the test preset's step takes minutes: the run says
    so, from its real first step's batches."""
    store = tmp_path / "store"
    build_store(store)
    monkeypatch.setattr(step_estimate, "SLOWEST_RATE", 1e6)
    monkeypatch.setattr(step_estimate, "matmul_rate", lambda device, bf16: (1e6, "a stand-in rate"))
    argv = ["pretrain", "--preset", "test", "--data", str(store), "--output", str(tmp_path / "run"), "--max-steps", "3",
            "--no-progress", "--device", "cpu"]  # fmt: skip
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "warning: a step of this run takes at least " in err and "at 1 MFLOP/s, a stand-in rate" in err
    assert "its 3 steps to go" in err and "of it filling the XLCO queue" in err and "--preset demo (minutes)" in err


def test_matmul_rate_measures_a_cpu():
    rate, source = step_estimate.matmul_rate(torch.device("cpu"), bf16=False)
    assert rate > SLOWEST_RATE and source == "a 1024² product measured on this CPU"
