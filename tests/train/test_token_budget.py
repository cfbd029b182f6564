"""The micro-batch token budget a run picks when data.max_tokens is unset: the memory
estimate against the peaks measured on an H100, the choice, and the trainer's use of it."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json

import pytest
import torch

from infoxlm.data.synthetic_batches import SyntheticSpec, synthetic_step
from infoxlm.data.pipeline import DataPipeline, PipelineConfig
from infoxlm.data.store import TokenStore
from infoxlm.model.config import EncoderConfig
from infoxlm.model.encoder import Encoder
from infoxlm.objectives.masked_lm import MaskedLM
from infoxlm.objectives.objective import EncoderPass
from infoxlm.objectives.xlco import MomentumContrast
from infoxlm.train.config import ContrastConfig, apply_overrides
from infoxlm.train.distributed import World
from infoxlm.train.joint_model import JointModel
from infoxlm.train.joint_step import aligned_micro_batch
from infoxlm.train.loop import pretrain
from infoxlm.train.presets import preset
from infoxlm.train.stopping import RunStopped
from infoxlm.train.errors import TrainingError
from infoxlm.train.token_budget import (
    CPU_LADDER,
    CPU_MAX_TOKENS,
    GIB,
    LADDER,
    ActivationCost,
    MicroStep,
    PeakEstimate,
    choose_max_tokens,
    first_step_bytes,
    longest_example,
    fullest_micro_step,
    peak_estimate,
    resolve_max_tokens,
    share_bounds,
)


# BENCHMARKS.md, "GPU: one H100, base and large": infoxlm's peak (its tensors between steps +
# the peak growth of one step, torch.cuda.max_memory_allocated) with the bench's GPU batches
# (`infoxlm bench --size base|large`: the preset's shapes, XLM-R's vocabulary, XLCO cut to 256
# tokens, 256 examples per objective in micro-batches of at most MEASURED_MAX_TOKENS tokens).
MEASURED_PEAK_MIB = {"base": 47_286, "large": 35_147}
MEASURED_MAX_TOKENS = {"base": 98_304, "large": 16_384}
MEMORY_STEP = {"base": 2 + 10 + 3, "large": 2 + 5 + 3}  # warm-up + timed + 3: the step whose peak was taken


def joint_model(size: str, vocab_size: int, contrast_layer: int, queue_size: int) -> JointModel:
    encoder = Encoder(EncoderConfig.of_size(size, vocab_size=vocab_size))
    contrast = MomentumContrast(encoder, ContrastConfig(layer=contrast_layer, queue_size=queue_size, key_dropout=False))
    return JointModel(encoder, [MaskedLM("mmlm"), MaskedLM("tlm"), contrast])


# The built-in objectives' passes at base's universal layer 8: MMLM, TLM, XLCO's two views.
BUILT_IN = (("mmlm", (EncoderPass(scored=True),)), ("tlm", (EncoderPass(scored=True),)),
            ("xlco", (EncoderPass(0.5, 8), EncoderPass(0.5, 8, gradients=False))))  # fmt: skip


def tensor_bytes(module: torch.nn.Module) -> int:
    return sum(t.numel() * t.element_size() for t in [*module.parameters(), *module.buffers()])


@pytest.mark.parametrize("name", ["base", "large"])
def test_the_estimate_covers_the_peaks_measured_on_an_h100_within_eight_percent(name):
    recipe, vocab_size = preset(name), 250_002
    with torch.device("meta"):  # counted, not allocated
        model = joint_model(recipe.model.size, vocab_size, recipe.contrast.layer, recipe.contrast.queue_size)
    shape = model.encoder.config
    cost = ActivationCost(shape.hidden_size, shape.intermediate_size, shape.num_hidden_layers, vocab_size)
    query_pass, key_pass = model.objectives[2].encoder_passes()
    spec = SyntheticSpec(vocab_size, recipe.data.block_size, recipe.data.tlm_max_length, 256,
                         256, 256, 256, MEASURED_MAX_TOKENS[name])  # fmt: skip
    data = synthetic_step(spec, MEMORY_STEP[name])
    micro_steps = max(len(data.mmlm), len(data.tlm), len(data.xlco))
    fullest = 0.0
    for i in range(micro_steps):
        mlm = [aligned_micro_batch(data.mmlm, i, micro_steps), aligned_micro_batch(data.tlm, i, micro_steps)]
        mlm = [x for x in mlm if x is not None]
        xlco = aligned_micro_batch(data.xlco, i, micro_steps)
        passes = [(int(x.attention_mask.sum()), EncoderPass(scored=True)) for x in mlm]
        if xlco:
            passes += [(int(xlco.query.attention_mask.sum()), query_pass), (int(xlco.key.attention_mask.sum()), key_pass)]
        masked = sum(x.targets.numel() for x in mlm)
        fullest = max(fullest, cost.micro_step_bytes(MicroStep(tuple(passes), masked)))
    # What the device held before the first step (weights, key encoder, queue) + what the
    # first step adds + the fullest micro-step.
    estimate = tensor_bytes(model) + first_step_bytes(model, bf16=True, sharded=False) + fullest
    ratio = estimate / (MEASURED_PEAK_MIB[name] * 2**20)
    assert 1.0 <= ratio <= 1.08, ratio


def test_a_layer_keeps_34_bytes_per_hidden_unit_and_token_in_bf16_and_66_in_fp32():
    cost = ActivationCost(768, 3072, 12, 250_002)
    assert cost.layer_bytes_per_token == 34 * 768
    assert dataclasses.replace(cost, bytes_per_value=4).layer_bytes_per_token == (2 * 32 + 2) * 768
    checkpointed = dataclasses.replace(cost, activation_checkpointing=True)
    assert checkpointed.through(12, 1000) == 1000 * (12 * 2 * 768 + 34 * 768) < cost.through(12, 1000) / 5


def test_the_first_step_adds_gradients_and_adamw_and_weight_copies_or_fsdps_gathered_units():
    with torch.device("meta"):
        model = joint_model("base", 250_002, 8, 1024)
    trainable = sum(p.numel() for p in model.trainable_parameters())
    layers = model.encoder.encoder.layer
    layer = sum(p.numel() for p in layers[0].parameters())
    root = trainable - len(layers) * layer  # embeddings, tied head, pooler, query projection
    assert first_step_bytes(model, bf16=True, sharded=False) == (4 + 8 + 2) * trainable
    assert first_step_bytes(model, bf16=False, sharded=False) == (4 + 8) * trainable
    # Parameters that are not DTensors count whole: the sharded terms on top of them.
    assert first_step_bytes(model, bf16=True, sharded=True) == (4 + 8) * trainable + (root + 2 * layer) * (2 + 2 + 4)


def test_without_the_fast_paths_padded_positions_count_at_four_bytes(built_store):
    batches = [f"data.{o}_batch_size=64" for o in ("mmlm", "tlm", "xlco")]  # shares bound by what is seen
    config = apply_overrides(preset("test"), ["data.max_tokens=auto", *batches])
    model = joint_model("tiny", 200, config.contrast.layer, config.contrast.queue_size)
    pipeline = DataPipeline(TokenStore.open(built_store), config.data)
    gpu = World(device=torch.device("cuda"))
    fast = peak_estimate(config, gpu, model, pipeline, 0, bf16=True, sharded=False)
    plain = peak_estimate(apply_overrides(config, ["run.fast_paths=false"]), gpu, model, pipeline, 0, bf16=True, sharded=False)
    assert plain.cost.bytes_per_value == 4 and fast.cost.bytes_per_value == 2
    assert all(plain.shares[o] >= fast.shares[o] for o in fast.shares) and plain.shares["mmlm"] > fast.shares["mmlm"]
    assert plain(4096) > fast(4096)


def test_share_bounds_take_the_smaller_of_the_hard_bound_and_what_was_seen():
    data = PipelineConfig(mmlm_batch_size=64, tlm_batch_size=64, xlco_batch_size=64, block_size=512,
                          tlm_max_length=256, xlco_max_length=128)  # fmt: skip
    assert share_bounds(data, world_size=4) == {"mmlm": 16 * 512, "tlm": 16 * 256, "xlco": 16 * 256}
    seen = share_bounds(data, world_size=4, observed={"mmlm": 8192, "tlm": 800, "xlco": 1000})
    assert seen == {"mmlm": 16 * 512, "tlm": 1000.0, "xlco": 1250.0}
    off = dataclasses.replace(data, tlm_batch_size=0)
    assert set(share_bounds(off, 1)) == {"mmlm", "xlco"}


def test_every_objective_fills_its_micro_batch_at_once_up_to_its_share_through_its_own_passes():
    model = joint_model("tiny", 200, contrast_layer=1, queue_size=8)
    objectives = tuple((o.stream, o.encoder_passes()) for o in model.objectives)
    micro = fullest_micro_step({"mmlm": 10_000, "tlm": 3_000, "xlco": 40_000}, objectives, 8192, 0.15)
    assert [(tokens, p.layers, p.gradients, p.scored) for tokens, p in micro.passes] == [
        (8192, None, True, True), (3000, None, True, True),  # MMLM, TLM: every layer, scored
        (4096, 1, True, False), (4096, 1, False, False),  # XLCO's query and key views to its layer
    ]
    assert micro.masked_tokens == pytest.approx(0.15 * 11_192)
    # A fourth objective's passes are counted as its own say: one more stream's tokens.
    more = fullest_micro_step({"mmlm": 10_000, "extra": 1000}, (*objectives[:1], ("extra", (EncoderPass(layers=2),))), 8192, 0.15)
    cost = ActivationCost(64, 128, 2, 200)
    assert cost.micro_step_bytes(more) == pytest.approx(
        cost.micro_step_bytes(MicroStep(more.passes[:1], more.masked_tokens)) + cost.through(2, 1000)
    )


def test_the_choice_is_the_largest_rung_that_fits_with_the_margin_left():
    cost = ActivationCost(768, 3072, 12, 250_002)
    peak = PeakEstimate({"mmlm": 1e9, "tlm": 1e9, "xlco": 1e9}, BUILT_IN, cost, first_step_bytes=4 * GIB, mask_prob=0.15)
    total = 80 * GIB
    choice = choose_max_tokens(peak, 1024, free_bytes=78 * GIB, total_bytes=total)
    available = 78 * GIB - 0.05 * total
    assert choice.fits and choice.max_tokens in LADDER and choice.available_bytes == available
    assert peak(choice.max_tokens) <= available
    if choice.max_tokens != LADDER[-1]:
        assert peak(choice.max_tokens + 8192) > available
    # Less memory, a smaller budget; no memory at all, the smallest rung, flagged.
    smaller = choose_max_tokens(peak, 1024, free_bytes=40 * GIB, total_bytes=total)
    assert smaller.max_tokens < choice.max_tokens
    none = choose_max_tokens(peak, 1024, free_bytes=1 * GIB, total_bytes=total)
    assert (none.max_tokens, none.fits) == (LADDER[0], False)
    assert "run.parallelism=fsdp" in none.describe("cuda:0")
    # Small shares: every rung costs the same, so the largest is taken.
    small = PeakEstimate({"mmlm": 2048, "tlm": 500, "xlco": 900}, BUILT_IN, cost, first_step_bytes=4 * GIB, mask_prob=0.15)
    assert choose_max_tokens(small, 1024, 78 * GIB, total).max_tokens == LADDER[-1]


def test_base_with_the_papers_batches_on_an_80_gb_card_takes_65536():
    # Shares far beyond any rung (2,048 examples per objective on one GPU): the budget is set
    # by memory alone. The bench's 98,304 fits its smaller batches only.
    cost = ActivationCost(768, 3072, 12, 250_002)
    with torch.device("meta"):
        model = joint_model("base", 250_002, 8, 131_072)
    objectives = tuple((o.stream, o.encoder_passes()) for o in model.objectives)
    peak = PeakEstimate(share_bounds(preset("base").data, 1), objectives, cost,
                        first_step_bytes(model, bf16=True, sharded=False), 0.15)  # fmt: skip
    free = 79.1 * GIB - tensor_bytes(model)  # an H100 80GB with the model in place
    assert choose_max_tokens(peak, 1024, free, 79.1 * GIB).max_tokens == 65_536


def test_a_gpu_run_left_unset_chooses_from_the_memory_it_is_given(built_store):
    config = apply_overrides(preset("test"), ["data.max_tokens=auto"])
    assert config.data.max_tokens is None
    model = joint_model("tiny", 200, config.contrast.layer, config.contrast.queue_size)
    pipeline = DataPipeline(TokenStore.open(built_store), config.data)
    gpu = World(device=torch.device("cuda"))  # never touched: the memory is handed in
    tokens, message = resolve_max_tokens(config, gpu, model, pipeline, 0, bf16=True, sharded=False,
                                     memory=(70 * GIB, 80 * GIB))  # fmt: skip
    assert tokens == LADDER[-1] and "98,304 tokens per objective" in message and "cuda" in message
    tight, message = resolve_max_tokens(config, gpu, model, pipeline, 0, bf16=True, sharded=False,
                                    memory=(2 * GIB + 1024, 80 * GIB))  # fmt: skip
    assert tight == LADDER[0] and "expect running out of memory" in message
    # A CPU keeps 16,384 where it fits, and a value that was set stays, with nothing to say.
    assert resolve_max_tokens(config, World(), model, pipeline, 0, bf16=False, sharded=False,
                              memory=(16 * GIB, 24 * GIB)) == (CPU_MAX_TOKENS, None)  # fmt: skip
    told = apply_overrides(preset("test"), ["data.max_tokens=4096"])
    assert resolve_max_tokens(told, gpu, model, pipeline, 0, bf16=True, sharded=False) == (4096, None)


def test_the_budget_is_an_execution_choice_a_run_records_and_may_change_when_resumed(built_store, tmp_path):
    run = tmp_path / "run"
    unset = apply_overrides(preset("test"), ["data.max_tokens=null", "optim.max_steps=4", "run.save_every=2"])
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        with pytest.raises(RunStopped):
            pretrain(unset, built_store, run, progress=False, stop_at=2)
        assert json.loads((run / "config.json").read_text())["data"]["max_tokens"] == CPU_MAX_TOKENS
        pretrain(apply_overrides(unset, ["data.max_tokens=512"]), built_store, run, progress=False)  # no --allow-config-change
    assert json.loads((run / "config.json").read_text())["data"]["max_tokens"] == 512


def test_a_pipeline_cut_to_another_budget_draws_the_same_examples(built_store):
    pipeline = DataPipeline(TokenStore.open(built_store), PipelineConfig(mmlm_batch_size=16, tlm_batch_size=16,
                                                                   xlco_batch_size=16, block_size=64,
                                                                   tlm_max_length=64, xlco_max_length=32))  # fmt: skip
    assert pipeline.config.effective_max_tokens == 16_384
    cut = pipeline.with_max_tokens(128)
    assert cut.builder is pipeline.builder and pipeline.config.max_tokens is None
    wide, narrow = pipeline.step(3), cut.step(3)
    assert len(narrow.mmlm) > len(wide.mmlm) == 1
    for objective in ("mmlm", "tlm", "xlco"):
        assert narrow.stats[objective].num_tokens == wide.stats[objective].num_tokens
        assert narrow.stats[objective].num_masked == wide.stats[objective].num_masked


def _cpu_run(built_store, *overrides):
    """A CPU run of the test preset with 64 examples per objective and dropout 0.1 (the
    paper's): (config, model, pipeline, its estimate)."""
    batches = [f"data.{o}_batch_size=64" for o in ("mmlm", "tlm", "xlco")]
    config = apply_overrides(preset("test"), ["data.max_tokens=auto", "model.dropout=0.1", *batches, *overrides])
    model = joint_model("tiny", 200, config.contrast.layer, config.contrast.queue_size)
    model.encoder.config.attention_probs_dropout_prob = config.model.dropout
    pipeline = DataPipeline(TokenStore.open(built_store), config.data)
    return config, model, pipeline, peak_estimate(config, World(), model, pipeline, 0, bf16=False, sharded=False)


def test_a_cpu_with_attention_dropout_counts_the_scores_its_kernel_keeps(built_store):
    config, model, pipeline, cpu = _cpu_run(built_store)
    heads, longest = model.encoder.config.num_attention_heads, longest_example(config.data)
    assert cpu.cost.score_bytes == 9 and cpu.cost.layer_bytes_per_trained_token == cpu.cost.layer_bytes_per_token + 9 * heads * longest
    gpu = peak_estimate(config, World(device=torch.device("cuda")), model, pipeline, 0, bf16=True, sharded=False)
    assert gpu.cost.score_bytes == 0  # flash and memory-efficient kernels keep no scores
    _, _, _, without_dropout = _cpu_run(built_store, "model.dropout=0")
    assert without_dropout.cost.score_bytes == 0 and without_dropout(4096) < cpu(4096)


def test_a_cpu_run_takes_a_smaller_budget_where_16384_does_not_fit_and_says_so(built_store):
    config, model, pipeline, peak = _cpu_run(built_store)
    margin = 2 * GIB  # the smallest margin; total memory small enough that 5 % stays under it
    fits_1024 = peak(1024) + margin + 1  # the test store's shares exceed 1,024 tokens, not 2,048 by much
    assert peak(CPU_MAX_TOKENS) >= peak(2048) > fits_1024 - margin >= peak(1024)
    tokens, message = resolve_max_tokens(config, World(), model, pipeline, 0, bf16=False, sharded=False,
                                         memory=(fits_1024, 8 * GIB))  # fmt: skip
    assert tokens == CPU_LADDER[0] == 1024
    assert "1,024 tokens per objective" in message and "16,384 needs an estimated" in message


def test_a_cpu_run_that_fits_no_budget_is_refused_before_anything_is_written(built_store, tmp_path, monkeypatch, capsys):
    import infoxlm.train.token_budget as token_budget
    from infoxlm.cli import main

    config, model, pipeline, peak = _cpu_run(built_store)
    with pytest.raises(TrainingError, match=r"needs an estimated .* GiB of memory even at 1,024 tokens.*--preset demo"):
        resolve_max_tokens(config, World(), model, pipeline, 0, bf16=False, sharded=False, memory=(2 * GIB, 8 * GIB))
    # Through the command: one line, exit 1, no run directory.
    monkeypatch.setattr(token_budget, "host_memory", lambda: (2 * GIB, 8 * GIB))
    run = tmp_path / "run"
    command = ["pretrain", "--preset", "test", "--set", "data.max_tokens=auto", "--data", str(built_store), "--output", str(run)]
    assert main([*command, "--max-steps", "1"]) == 1
    err = capsys.readouterr().err
    assert "it would be killed for want of memory" in err and "Traceback" not in err
    assert not run.exists() or not any(run.iterdir())


def test_a_cpu_whose_memory_cannot_be_read_keeps_16384(built_store, monkeypatch):
    import infoxlm.train.token_budget as token_budget

    config, model, pipeline, _ = _cpu_run(built_store)
    monkeypatch.setattr(token_budget, "host_memory", lambda: None)
    assert resolve_max_tokens(config, World(), model, pipeline, 0, bf16=False, sharded=False) == (CPU_MAX_TOKENS, None)


def test_a_rank_whose_memory_cannot_be_read_still_joins_the_budget_agreement(built_store, monkeypatch):
    """Its peers wait in the all-reduce: it joins with 16,384, takes their smaller budget, and
    stops with them where one of them fits none."""
    import infoxlm.train.token_budget as token_budget

    config, model, pipeline, _ = _cpu_run(built_store)
    monkeypatch.setattr(token_budget, "host_memory", lambda: None)
    joined = []
    monkeypatch.setattr(World, "distributed", property(lambda self: True))
    for peers in (4096, 0):
        monkeypatch.setattr(token_budget, "all_reduce_min", lambda value, world, p=peers: joined.append(int(value)) or torch.tensor(min(int(value), p)))
        if peers:
            assert resolve_max_tokens(config, World(), model, pipeline, 0, bf16=False, sharded=False) == (4096, None)
        else:
            with pytest.raises(TrainingError, match="another process of this run found no micro-batch budget"):
                resolve_max_tokens(config, World(), model, pipeline, 0, bf16=False, sharded=False)
    assert joined == [CPU_MAX_TOKENS, CPU_MAX_TOKENS]
