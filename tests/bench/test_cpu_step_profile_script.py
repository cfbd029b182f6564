"""benchmarks/cpu_step_profile.py and cpu_step_ab.py: the CPU step's profile by kind of work."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    sys.path.insert(0, str(BENCHMARKS))  # cpu_step_ab imports cpu_step_profile, as when run as a script
    try:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(autouse=True)
def _threads_restored():
    """The scripts set torch's thread count for their process (--threads); give it back, or every
    later test in this process multiplies on one thread and rounds differently (the golden loss
    curve in tests/train/test_loop.py then drifts past its tolerance)."""
    import torch

    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_operators_are_charged_to_the_work_that_called_them():
    kind_of = _load("cpu_step_profile").kind_of
    assert kind_of("aten::linear", "aten::addmm") == "matrix products"
    assert kind_of("AddmmBackward0", "aten::mm") == "matrix products"
    assert kind_of("_DecoderInPlaceGradBackward", "aten::addmm_") == "matrix products"  # the tied head's weight gradient
    # What a product brings along: CPU addmm copies the bias in first; its gradient is a sum.
    bias = "bias (copied into products, summed for gradients)"
    assert kind_of("aten::linear", "aten::copy_") == kind_of("AddmmBackward0", "aten::sum") == bias
    assert kind_of("TBackward0", "aten::add") == "gradient accumulation"
    assert kind_of("NativeLayerNormBackward0", "aten::native_layer_norm_backward") == "LayerNorm"
    assert kind_of("ScaledDotProductFlashAttentionForCpuBackward0", "aten::fill_") == "attention"
    assert kind_of("GeluBackward0", "aten::gelu_backward") == "GELU"
    assert kind_of("_LookupInPlaceGradBackward", "aten::scatter_add_") == "embeddings (lookups, gradients)"
    packing = "packing and pooling (select / pad rows, sequence means)"
    assert kind_of("aten::index_copy_", "aten::index_copy_") == kind_of("aten::index_add", "aten::scatter_add_") == packing
    assert kind_of("LogSoftmaxBackward0", "aten::_log_softmax_backward_data") == "losses (vocabulary, contrast)"
    assert kind_of("aten::_fused_adamw_", "aten::_fused_adamw_") == "AdamW"
    assert kind_of("aten::_foreach_lerp_", "aten::lerp_") == "EMA"
    assert kind_of("aten::_foreach_norm", "aten::linalg_vector_norm") == "gradient clipping"


@pytest.mark.slow
def test_profile_tables_and_timed_line(capsys):
    script = _load("cpu_step_profile")
    argv = ["--size", "test", "--warmup", "1", "--timed", "1", "--steps", "1", "--rows", "3", "--threads", "1"]
    assert script.main(argv) == 0
    out = capsys.readouterr().out
    assert "TIMED size test threads 1: step" in out and "against the 2048² product" in out
    kinds = out.split("by kind of work (ms per step, share):")[1].split("\n\n")[0].strip().splitlines()
    shares = {line.rsplit(maxsplit=2)[0].strip(): float(line.rsplit(maxsplit=1)[1].rstrip("%")) for line in kinds}
    assert shares["matrix products"] > 0 and "attention" in shares and "AdamW" in shares
    assert sum(shares.values()) == pytest.approx(100, abs=0.5)
    phases = out.split("by phase (ms per step, share):")[1].split("\n\n")[0]
    assert all(phase in phases for phase in ("forward", "backward", "optimizer", "ema"))


@pytest.mark.slow
def test_ab_runs_both_sides_on_the_same_batches(capsys):
    script = _load("cpu_step_ab")
    assert script.main(["no-packing", "--size", "test", "--rounds", "1", "--threads", "1"]) == 0
    assert "no-packing (1 threads, 1 rounds): A " in capsys.readouterr().out
    b = script.build_b("no-packing", "test")
    assert not b.encoder.fast_paths.skip_padding and not b.contrast.key_encoder.fast_paths.skip_padding
