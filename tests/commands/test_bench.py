import json

import pytest
import torch

from infoxlm.cli import main

REQUIRED = ("tokens_per_s", "baseline_tokens_per_s", "speedup", "peak_memory_mb", "phases", "baseline_phases")


@pytest.mark.slow
def test_bench_json_end_to_end(capsys):
    pytest.importorskip("transformers")
    assert main(["bench", "--size", "test", "--device", "cpu", "--json", "--steps", "2", "--warmup", "1"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)  # exactly one JSON object on stdout
    for key in REQUIRED:
        assert key in result
    for key in ("tokens_per_s", "baseline_tokens_per_s", "speedup", "peak_memory_mb", "flops_per_step", "tokens_per_step"):
        assert result[key] > 0, key
    assert result["mfu"] is None  # CPU: no peak to compare with
    assert set(result["phases"]) == {"data", "forward", "backward", "optimizer", "ema", "queue"}
    assert set(result["loss_check"]["losses"]) == {"mmlm", "tlm", "xlco"}
    assert "[bench]" in captured.err and "[bench]" not in captured.out


def test_bench_table_without_baseline(capsys):
    assert main(["bench", "--size", "test", "--device", "cpu", "--steps", "1", "--warmup", "0", "--no-baseline", "--batch", "2,2,2"]) == 0
    out = capsys.readouterr().out
    assert "infoxlm" in out and "Hugging Face baseline" not in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_cuda_exits_1_with_one_line(capsys):
    assert main(["bench", "--size", "test", "--device", "cuda", "--json"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "CUDA is not available" in captured.err


def test_bad_batch_flag(capsys):
    assert main(["bench", "--size", "test", "--device", "cpu", "--batch", "1,2"]) == 1
    assert "MMLM,TLM,XLCO" in capsys.readouterr().err


def test_missing_transformers_is_one_line(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # import transformers → ImportError
    assert main(["bench", "--size", "test", "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "infoxlm[hf]" in err and "--no-baseline" in err and err.count("\n") == 1


@pytest.mark.slow
def test_baseline_steps_times_the_baseline_over_the_first_steps_only(capsys):
    pytest.importorskip("transformers")
    argv = ["bench", "--size", "test", "--device", "cpu", "--steps", "3", "--warmup", "1", "--baseline-steps", "1"]
    assert main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["steps"] == 3 and result["baseline_steps"] == 1
    assert len(result["step_seconds_all"]) == 3 and len(result["baseline_step_seconds_all"]) == 1
    assert result["speedup"] > 0
    assert main(argv) == 0
    assert "median of 3 steps after 1 warm-up (the baseline's: its first 1)" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0", "4"])
def test_bad_baseline_steps_flag(capsys, value):
    assert main(["bench", "--size", "test", "--device", "cpu", "--steps", "3", "--baseline-steps", value]) == 1
    assert f"--baseline-steps {value}: expected 1 … 3 (--steps)" in capsys.readouterr().err


def test_bad_baseline_max_tokens_flag(capsys):
    assert main(["bench", "--size", "test", "--device", "cpu", "--baseline-max-tokens", "0"]) == 1
    assert "--baseline-max-tokens 0: expected a positive number of tokens" in capsys.readouterr().err


@pytest.mark.parametrize("peak", ["0", "-5"])
def test_bad_peak_flops_flag_before_anything_runs(capsys, peak):
    assert main(["bench", "--size", "test", "--device", "cpu", "--peak-flops", peak]) == 1
    err = capsys.readouterr().err
    assert f"--peak-flops {peak}: expected a positive FLOP/s rate" in err and "[bench]" not in err


@pytest.mark.slow
def test_peak_flops_measure_gives_a_cpu_its_mfu(capsys):
    args = ["bench", "--size", "test", "--device", "cpu", "--steps", "1", "--warmup", "0", "--no-baseline"]
    assert main([*args, "--json", "--peak-flops", "measure"]) == 0
    r = json.loads(capsys.readouterr().out)
    before, after = r["measured_product_flops"]
    assert r["peak_flops"] == max(before, after) > 0 and r["peak_flops_source"].startswith("measured")
    assert r["mfu"] == pytest.approx(r["achieved_tflops"] * 1e12 / r["peak_flops"], rel=1e-9)  # one step: the median is that step
    assert main([*args, "--peak-flops", "2e11"]) == 0
    assert "MFU against 0.2 TFLOP/s (given)" in capsys.readouterr().out


def test_peak_flops_that_is_neither_a_number_nor_measure(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--size", "test", "--peak-flops", "fast"])
    assert exit_info.value.code == 2
    assert "'fast': expected a FLOP/s rate such as 1.5e11, or 'measure'" in capsys.readouterr().err


def test_max_tokens_auto_picks_what_a_training_run_would(capsys):
    args = ["bench", "--size", "test", "--device", "cpu", "--steps", "1", "--warmup", "0", "--no-baseline", "--json"]
    assert main([*args, "--max-tokens", "auto"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["batches"]["max_tokens"] == 16_384  # a CPU run's
    assert "micro-batch token budget: 16,384 tokens per objective (the CPU default, which fits the memory here)" in captured.err
    with pytest.raises(SystemExit):
        main([*args, "--max-tokens", "lots"])
    assert "'lots': expected a number of tokens such as 98304, or 'auto'" in capsys.readouterr().err
