"""The next step's data built in the background (``run.prefetch_data``): the same data, for
the steps asked, whatever order they come in; errors reach the caller; a run computes the
same with it on or off."""

from __future__ import annotations

import contextlib
import io
import json
import threading

import numpy as np
import pytest
import torch

from infoxlm.data.pipeline import DataPipeline, PipelineConfig
from infoxlm.data.store import TokenStore
from infoxlm.train.config import apply_overrides
from infoxlm.train.distributed import World
from infoxlm.train.loop import pretrain
from infoxlm.train.step_prefetch import StepPrefetcher
from infoxlm.train.presets import preset



class Recording:
    """A pipeline that says which thread built which step."""

    def __init__(self, fail_at: int | None = None):
        self.built: list[tuple[int, str]] = []
        self.fail_at = fail_at

    def step(self, step, rank, world_size):
        if step == self.fail_at:
            raise ValueError(f"step {step}: broken")
        self.built.append((step, threading.current_thread().name))
        return (step, rank, world_size)


def test_the_next_step_is_built_in_the_background_and_handed_over():
    pipeline = Recording()
    with StepPrefetcher(pipeline, World(rank=1, size=2), last_step=3) as data:
        assert [data.step(s) for s in range(3)] == [(0, 1, 2), (1, 1, 2), (2, 1, 2)]
    assert [s for s, _ in pipeline.built] == [0, 1, 2]  # none built twice, none past the last
    assert {name for _, name in pipeline.built} == {"train-data"}


def test_a_step_other_than_the_next_one_starts_the_stream_over_from_there():
    pipeline = Recording()
    with StepPrefetcher(pipeline, World(), last_step=100) as data:
        assert data.step(5) == (5, 0, 1)
        assert data.step(9) == (9, 0, 1)  # step 6 was prepared; 9 is asked
        assert data.step(10) == (10, 0, 1)


def test_off_every_step_is_built_by_the_caller():
    pipeline = Recording()
    with StepPrefetcher(pipeline, World(), last_step=3, enabled=False) as data:
        [data.step(s) for s in range(3)]
    assert {name for _, name in pipeline.built} == {threading.current_thread().name}


def test_an_error_while_building_ahead_reaches_the_caller_at_its_step():
    with StepPrefetcher(Recording(fail_at=1), World(), last_step=3) as data:
        data.step(0)
        with pytest.raises(ValueError, match="step 1: broken"):
            data.step(1)


def test_prefetched_data_is_the_pipelines_own(built_store):
    config = PipelineConfig(
        mmlm_batch_size=8, tlm_batch_size=8, xlco_batch_size=4, block_size=64, tlm_max_length=64, xlco_max_length=64,
        max_tokens=256,
    )  # fmt: skip
    pipeline = DataPipeline(TokenStore.open(built_store), config)
    with StepPrefetcher(pipeline, World(), last_step=4) as data:
        for step in range(4):
            ours, theirs = data.step(step), pipeline.step(step)
            for name in ("mmlm", "tlm", "xlco"):
                for a, b in zip(getattr(ours, name), getattr(theirs, name)):
                    a, b = (a.query, b.query) if name == "xlco" else (a, b)
                    assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.packing.cu_seqlens, b.packing.cu_seqlens)


def test_a_run_computes_the_same_with_and_without_prefetching(built_store, tmp_path):
    rows = {}
    for flag in ("true", "false"):
        cfg = apply_overrides(preset("test"), ["optim.max_steps=4", f"run.prefetch_data={flag}"])
        with contextlib.redirect_stdout(io.StringIO()):
            run = pretrain(cfg, built_store, tmp_path / flag, progress=False)
        rows[flag] = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    keys = ("loss/mmlm", "loss/tlm", "loss/xlco", "grad_norm")
    np.testing.assert_array_equal(*([[r[k] for k in keys] for r in rows[f]] for f in ("true", "false")))
