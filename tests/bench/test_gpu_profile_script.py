"""benchmarks/gpu_profile.py runs end to end (on a CPU, its smoke-test mode)."""

import importlib.util
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_profile.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_profile", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_timed_steps_and_host_table_on_cpu(capsys):
    script = _load()
    args = ["--size", "test", "--device", "cpu", "--warmup", "0", "--timed", "1", "--steps", "1", "--rows", "3"]
    assert script.main(args) == 0
    out = capsys.readouterr().out
    assert "TIMED size test batches 4,4,4 max_tokens 256" in out and "tokens/s" in out
    assert "size test, fp32: wall per step" in out
    host_rows = out.split("host events by self CPU time")[1].strip().splitlines()[1:]
    assert len(host_rows) == 3
    for row in host_rows:  # "<ms per step> <calls per step>  <event>", the slowest first
        ms, calls, name = row.split(maxsplit=2)
        assert float(ms) >= 0 and float(calls) > 0 and name
    assert [float(r.split()[0]) for r in host_rows] == sorted((float(r.split()[0]) for r in host_rows), reverse=True)


def test_kernel_groups():
    script = _load()
    assert script.group_of("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_NNT") == "matmul"
    assert script.group_of("cudnn_generated_fort_native_sdpa_sm90_flash_fprop") == "attention"
    assert script.group_of("vectorized_elementwise_kernel<bfloat16_copy_kernel_cuda>") == "copy / cast"
    assert script.group_of("cunn_SoftMaxForward<LogSoftMaxForwardEpilogue>") == "softmax / loss"
    fused_loss = "triton_red_fused__log_softmax__to_copy_nll_loss_forward_prepare_softmax_online_sub_0"
    assert script.group_of(fused_loss) == "softmax / loss"
    assert script.group_of("_cross_entropy_backward_kernel") == "softmax / loss"  # fused_cross_entropy.py
    assert script.group_of("vectorized_elementwise_kernel<CUDAFunctor_add<float>>") == "other elementwise / reduce"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_without_cuda_it_says_so(capsys):
    assert _load().main(["--size", "test"]) == 1
    assert "CUDA is not available here" in capsys.readouterr().err


@pytest.mark.slow
def test_variants_reach_both_encoders_and_the_timed_line(capsys):
    script = _load()
    argv = ["--size", "test", "--device", "cpu", "--warmup", "0", "--timed", "1", "--no-profile"]
    args = script.parse_args(argv + ["--fp32-residual", "--padded-attention", "--unpadded-vocab"])
    engine, *_ = script.build(args, torch.device("cpu"))
    for encoder in (engine.encoder, engine.contrast.key_encoder):
        assert not encoder.fast_paths.padded_vocabulary
        assert not any(getattr(m, "keep_autocast_dtype", False) for m in encoder.modules())
        assert not any(layer.attention.self.varlen_attention for layer in encoder.encoder.layer)
    engine, *_ = script.build(script.parse_args(argv + ["--compile"]), torch.device("cpu"))
    for encoder in (engine.encoder, engine.contrast.key_encoder):  # run.compile, as the trainer applies it
        assert all(layer._compiled_call_impl is not None for layer in encoder.encoder.layer)
    engine, *_ = script.build(script.parse_args(argv), torch.device("cpu"))  # the defaults: both on
    assert engine.encoder.encoder.layer[0]._compiled_call_impl is None
    assert all(layer.attention.self.varlen_attention for layer in engine.encoder.encoder.layer)
    assert engine.encoder.embeddings.LayerNorm.keep_autocast_dtype and engine.encoder.fast_paths.padded_vocabulary
    assert script.main(argv + ["--padded-attention"]) == 0
    assert "max_tokens 256 padded-attention: step" in capsys.readouterr().out
