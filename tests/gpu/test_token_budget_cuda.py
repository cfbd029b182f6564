"""On a GPU: a run with data.max_tokens unset picks its budget from the device's memory, and
the real peak of its steps stays under the estimate it chose by. Skipped without CUDA; run
on a GPU machine with ``pytest tests/gpu``."""

import contextlib
import io

import pytest
import torch

from infoxlm.train.config import apply_overrides
from infoxlm.train.loop import Trainer
from infoxlm.train.joint_step import computes_in_bf16
from infoxlm.train.parallelism import is_sharded
from infoxlm.train.presets import preset
from infoxlm.train.token_budget import LADDER, peak_estimate

from training_stores import build_store

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_an_unset_budget_is_chosen_on_the_gpu_and_its_estimate_covers_the_real_peak(tmp_path):
    build_store(tmp_path / "store")
    config = apply_overrides(preset("base"), [
        "data.mmlm_batch_size=96", "data.tlm_batch_size=96", "data.xlco_batch_size=96", "data.block_size=256",
        "contrast.queue_size=1024", "optim.max_steps=3", "run.device=cuda",
    ])  # fmt: skip
    assert config.data.max_tokens is None
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        trainer = Trainer(config, tmp_path / "store", tmp_path / "run", progress=False)
    tokens = trainer.config.data.max_tokens
    assert tokens in LADDER and f"micro-batch token budget: {tokens:,}" in printed.getvalue()

    device = trainer.world.device
    bf16 = computes_in_bf16(trainer.config, trainer.world)
    peak = peak_estimate(trainer.config, trainer.world, trainer.model, trainer.pipeline, 0, bf16=bf16,
                         sharded=is_sharded(trainer.model))  # fmt: skip
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(3):
            trainer.train_step()
            trainer.step += 1
    torch.cuda.synchronize(device)
    growth = torch.cuda.max_memory_allocated(device) - before
    assert growth <= peak(tokens), (growth, peak(tokens))
