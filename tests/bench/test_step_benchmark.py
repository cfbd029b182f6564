import dataclasses

import pytest
import torch

from infoxlm.bench.engine_step import EngineStep
from infoxlm.bench.step_benchmark import LossMismatchError, check_losses, fill_queue, resolve_device, run_benchmark, train_config
from infoxlm.bench.sizes import SIZES, BenchError
from infoxlm.data.synthetic_batches import SyntheticSpec, synthetic_step
from infoxlm.bench.timing import PhaseTimer

pytest.importorskip("transformers")


def _sides(**contrast):
    from infoxlm.bench.hf_baseline import HFBaseline

    size, cpu = SIZES["test"], torch.device("cpu")
    size = dataclasses.replace(size, contrast={**size.contrast, **contrast})
    b = size.cpu
    spec = SyntheticSpec(size.vocab_size, size.block_size, size.tlm_max_length, size.xlco_max_length,
                         b.mmlm, b.tlm, b.xlco, b.max_tokens)
    engine = EngineStep(train_config(size, cpu, False), cpu, vocab_size=size.vocab_size)
    fill_queue(engine, spec, seed=0)  # as the benchmark does before its steps: both sides start from it
    return engine, HFBaseline(engine), spec


# The paper's XLCO (<s> state, raw vectors, queue only) and the demo's (mean of the token
# states, normalised vectors, in-batch negatives beside the queue).
@pytest.mark.parametrize(
    "contrast",
    [{}, {"pooling": "mean", "normalize": True, "temperature": 0.05, "in_batch_negatives": True}],
    ids=["paper", "demo"],
)
def test_both_sides_stay_equal_over_steps(contrast):
    """Same losses at the first step, and still after optimizer, EMA and enqueue have run."""
    engine, baseline, spec = _sides(**contrast)
    first = synthetic_step(spec, 0)
    check_losses(engine.losses(first), baseline.losses(first), rtol=1e-5)
    for i in range(3):
        ours = engine.step(lambda k: synthetic_step(spec, k), i, PhaseTimer())
        theirs = baseline.step(lambda k: synthetic_step(spec, k), i, PhaseTimer())
        assert ours.tokens == theirs.tokens
        check_losses(ours.losses, theirs.losses, rtol=1e-4)
    torch.testing.assert_close(engine.contrast.queue, baseline.queue, rtol=1e-4, atol=1e-6)


def test_a_deliberate_mismatch_stops_the_run():
    def perturb(baseline):
        with torch.no_grad():
            baseline.model.lm_head.bias.add_(0.2 * torch.randn_like(baseline.model.lm_head.bias))

    with pytest.raises(LossMismatchError, match="first-step mmlm loss"):
        run_benchmark("test", "cpu", steps=1, warmup=0, log=lambda m: None, _perturb_baseline=perturb)


def test_check_losses_tolerance():
    assert check_losses({"mmlm": 2.0}, {"mmlm": 2.0001}, rtol=1e-4) == {"mmlm": [2.0, 2.0001]}
    with pytest.raises(LossMismatchError, match="xlco"):
        check_losses({"xlco": 1.0}, {"xlco": 1.01}, rtol=1e-4)
    with pytest.raises(LossMismatchError, match="objectives differ"):
        check_losses({"mmlm": 1.0}, {"tlm": 1.0}, rtol=1e-4)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(BenchError, match="CUDA is not available"):
        resolve_device("cuda")


def test_the_baseline_may_cut_the_same_global_batch_into_smaller_micro_batches():
    """--baseline-max-tokens: same examples and global batch, more micro-batches on the
    baseline's side; the losses still agree and the report says how each side cut it."""
    from infoxlm.bench.sizes import Batches

    batches = Batches(4, 4, 4, 256, baseline_max_tokens=96)
    result = run_benchmark("test", "cpu", steps=1, warmup=0, batches=batches, log=lambda m: None)
    assert result["batches"]["max_tokens"] == 256 and result["batches"]["baseline_max_tokens"] == 96
    ours, theirs = zip(*result["loss_check"]["losses"].values())
    assert ours == pytest.approx(theirs, rel=1e-4)
    size = SIZES["test"]
    spec = SyntheticSpec(size.vocab_size, size.block_size, size.tlm_max_length, size.xlco_max_length, 4, 4, 4, 256)
    coarse, fine = synthetic_step(spec, 0), synthetic_step(dataclasses.replace(spec, max_tokens=96), 0)
    assert len(fine.mmlm) > len(coarse.mmlm)
    assert fine.stats["mmlm"].num_masked == coarse.stats["mmlm"].num_masked


def test_on_a_gpu_the_automatic_budget_comes_from_the_synthetic_steps_and_free_memory(monkeypatch):
    import types

    from infoxlm.bench.step_benchmark import auto_max_tokens
    from infoxlm.train.token_budget import GIB, LADDER

    size = SIZES["test"]
    engine = EngineStep(train_config(size, torch.device("cpu"), False), torch.device("cpu"), vocab_size=size.vocab_size)
    spec = SyntheticSpec(size.vocab_size, size.block_size, size.tlm_max_length, size.xlco_max_length, 4, 4, 4, 256)
    on_gpu = types.SimpleNamespace(device=torch.device("cuda"), model=engine.model)  # the memory is handed in below
    said = []
    for free, expected in ((40 * GIB, LADDER[-1]), (1 * GIB, LADDER[0])):
        monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device, free=free: (free, 80 * GIB))
        config = train_config(size, torch.device("cuda"), True)
        assert auto_max_tokens(on_gpu, spec, config, True, said.append) == expected
        assert config.data.mmlm_batch_size == 4 and config.data.block_size == size.block_size
    assert "98,304 tokens per objective" in said[0] and "expect running out of memory" in said[1]


def test_with_in_batch_negatives_the_baseline_may_cut_the_step_into_smaller_micro_batches():
    """In-batch negatives are the whole step's keys on both sides, however each cuts it."""
    engine, baseline, spec = _sides(pooling="mean", normalize=True, temperature=0.05, in_batch_negatives=True)
    spec = dataclasses.replace(spec, xlco_batch_size=8, max_tokens=1024)
    finer = dataclasses.replace(spec, max_tokens=64)
    assert len(synthetic_step(spec, 0).xlco) == 1 < len(synthetic_step(finer, 0).xlco)
    check_losses(engine.losses(synthetic_step(spec, 0)), baseline.losses(synthetic_step(finer, 0)), rtol=1e-5)
    check_losses(engine.losses(synthetic_step(finer, 0)), baseline.losses(synthetic_step(spec, 0)), rtol=1e-5)
    for i in range(2):
        ours = engine.step(lambda k: synthetic_step(spec, k), i, PhaseTimer())
        theirs = baseline.step(lambda k: synthetic_step(finer, k), i, PhaseTimer())
        check_losses(ours.losses, theirs.losses, rtol=1e-4)
    torch.testing.assert_close(engine.contrast.queue, baseline.queue, rtol=1e-4, atol=1e-6)


def test_the_baseline_computes_in_the_engine_s_precision_on_a_cpu_too():
    """run.cpu_bf16: the trainer's step runs under CPU bf16 autocast, and so does the baseline
    it is compared with (both take the step's ``step_autocast``)."""
    from infoxlm.train.config import changed

    size, cpu = SIZES["test"], torch.device("cpu")
    config = changed(train_config(size, cpu, True), run={"cpu_bf16": True})
    engine = EngineStep(config, cpu, vocab_size=size.vocab_size)
    from infoxlm.bench.hf_baseline import HFBaseline

    baseline = HFBaseline(engine)
    seen = []
    baseline.model.register_forward_hook(lambda *_: seen.append(torch.is_autocast_cpu_enabled()))
    b = size.cpu
    spec = SyntheticSpec(size.vocab_size, size.block_size, size.tlm_max_length, size.xlco_max_length, b.mmlm, b.tlm, b.xlco, b.max_tokens)
    baseline.step(lambda k: synthetic_step(spec, k), 0, PhaseTimer())
    assert seen and all(seen)
