"""Tests for infoxlm.data.pipeline: the per-step, per-rank entry point of the training engine."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from training_stores import build_store, random_pairs, write_mono, write_parallel, write_store

from infoxlm.data.pipeline import DataPipeline, PipelineConfig
from infoxlm.data.sampling import language_probabilities
from infoxlm.data.store import StoreError, TokenStore

SMALL = dict(mmlm_batch_size=24, tlm_batch_size=20, xlco_batch_size=16, block_size=32, tlm_max_length=48,
             xlco_max_length=40, max_tokens=256, seed=11)


@pytest.fixture(scope="module")
def store_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("store")
    build_store(root)
    return root


@pytest.fixture(scope="module")
def pipeline(store_root) -> DataPipeline:
    return DataPipeline(TokenStore.open(store_root), PipelineConfig(**SMALL))


def digest(data) -> str:
    """A fingerprint of every tensor a step returned, in order."""
    h = hashlib.sha256()
    for batch in data.mmlm + data.tlm + [v for b in data.xlco for v in (b.query, b.key)]:
        for t in (batch.input_ids, batch.attention_mask, batch.masked_positions, batch.targets, batch.slots):
            h.update(t.numpy().tobytes())
            h.update(str(tuple(t.shape)).encode())
    return h.hexdigest()


def rows_by_slot(steps) -> dict:
    """(objective, slot) → everything about that example, whatever micro-batch it sits in."""
    out = {}

    def rows(batch):
        counts = batch.masked_positions.sum(dim=1).tolist()
        targets = batch.targets.split(counts)
        for r, slot in enumerate(batch.slots.tolist()):
            n = int(batch.attention_mask[r].sum())
            yield slot, (
                tuple(batch.input_ids[r, :n].tolist()),
                tuple(batch.masked_positions[r, :n].tolist()),
                tuple(targets[r].tolist()),
            )

    for data in steps:
        for name in ("mmlm", "tlm"):
            for batch in getattr(data, name):
                for slot, row in rows(batch):
                    assert (name, slot) not in out
                    out[name, slot] = row
        for batch in data.xlco:
            for (slot, q), (_, k) in zip(rows(batch.query), rows(batch.key)):
                assert ("xlco", slot) not in out
                out["xlco", slot] = (q, k)
    return out


def test_step_returns_micro_batches_and_stats(pipeline):
    data = pipeline.step(0)
    for name, size in (("mmlm", 24), ("tlm", 20), ("xlco", 16)):
        stats = data.stats[name]
        batches = getattr(data, name)
        assert stats.num_examples == sum(b.num_examples for b in batches) == size
        assert stats.num_micro_batches == len(batches)
        assert all(b.num_positions <= 256 for b in batches)
        assert stats.num_padding == sum(b.num_padding for b in batches)
        assert 0 <= stats.padding_fraction < 1 and sum(stats.corpus_counts.values()) == size
    assert all(b.input_ids.shape[1] <= 32 for b in data.mmlm)
    assert all(b.input_ids.shape[1] <= 48 for b in data.tlm)
    assert all(b.query.input_ids.shape[1] <= 40 and b.key.input_ids.shape[1] <= 40 for b in data.xlco)
    assert all(b.num_masked >= b.num_examples for b in data.mmlm + data.tlm)  # ≥ 1 per example
    assert "mmlm 24 ex" in data.summary()


@pytest.mark.slow
def test_same_data_in_another_process(store_root, pipeline):
    """Nothing depends on Python's hash seed, process state or import order."""
    script = textwrap.dedent(
        f"""
        import sys; sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(Path(__file__).parents[1])!r}]
        from test_pipeline import digest, SMALL
        from infoxlm.data.pipeline import DataPipeline, PipelineConfig
        from infoxlm.data.store import TokenStore
        pipeline = DataPipeline(TokenStore.open({str(store_root)!r}), PipelineConfig(**SMALL))
        print(digest(pipeline.step(3, rank=1, world_size=2)))
        """
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.strip() == digest(pipeline.step(3, rank=1, world_size=2))


def test_resume_sees_exactly_the_same_step(store_root, pipeline):
    for step in range(5):
        pipeline.step(step)
    after_run = digest(pipeline.step(5))
    fresh = DataPipeline(TokenStore.open(store_root), PipelineConfig(**SMALL))
    assert digest(fresh.step(5)) == after_run
    assert digest(fresh.step(4)) != after_run


@pytest.mark.parametrize("world_size", [2, 3])
def test_one_rank_equals_the_union_of_ranks(pipeline, world_size):
    single = rows_by_slot([pipeline.step(7)])
    shards = [pipeline.step(7, rank=r, world_size=world_size) for r in range(world_size)]
    assert rows_by_slot(shards) == single
    assert len(single) == 24 + 20 + 16
    # Each rank holds a contiguous share of the slots.
    first = [min(b.slots.min().item() for b in s.mmlm) for s in shards]
    assert first == [24 * r // world_size for r in range(world_size)]


def test_seed_and_step_change_the_data(store_root, pipeline):
    other_seed = DataPipeline(TokenStore.open(store_root), PipelineConfig(**{**SMALL, "seed": 12}))
    assert digest(other_seed.step(0)) != digest(pipeline.step(0))
    assert digest(pipeline.step(1)) != digest(pipeline.step(0))


@pytest.mark.parametrize("unit", ["instances", "tokens"])
def test_sampling_follows_the_chosen_unit(store_root, unit):
    store = TokenStore.open(store_root)
    config = PipelineConfig(mmlm_batch_size=6000, tlm_batch_size=6000, xlco_batch_size=0, block_size=5,
                            tlm_max_length=5, max_tokens=4096, sampling_unit=unit)
    pipeline = DataPipeline(store, config)
    if unit == "instances":  # the paper: lines of a language, pairs of a parallel corpus
        mono = {lang: c.num_lines for lang, c in store.mono.items()}
        pairs = {p: c.num_pairs for p, c in store.parallel.items()}
    else:
        mono = {lang: c.num_tokens for lang, c in store.mono.items()}
        pairs = {p: c.num_tokens for p, c in store.parallel.items()}
    assert pipeline.language_probabilities == pytest.approx(language_probabilities(mono, 0.7))
    assert pipeline.pair_probabilities == pytest.approx(language_probabilities(pairs, 0.7))
    data = pipeline.step(0)
    for name, probabilities in (("mmlm", pipeline.language_probabilities), ("tlm", pipeline.pair_probabilities)):
        counts = data.stats[name].corpus_counts
        expected = {k: 6000 * p for k, p in probabilities.items()}
        chi2 = sum((counts.get(k, 0) - e) ** 2 / e for k, e in expected.items())
        assert chi2 < 20, (name, counts, expected)


def test_the_sampling_unit_is_validated_and_defaults_to_instances():
    assert PipelineConfig().sampling_unit == "instances"
    with pytest.raises(ValueError, match="sampling_unit must be one of instances, tokens, got 'words'"):
        PipelineConfig(sampling_unit="words")


def test_disabled_objectives(pipeline, store_root):
    config = PipelineConfig(**{**SMALL, "mmlm_batch_size": 0, "xlco_batch_size": 0})
    data = DataPipeline(TokenStore.open(store_root), config).step(0)
    assert data.mmlm == [] and data.xlco == [] and len(data.tlm) > 0
    assert data.stats["mmlm"].num_examples == 0 and config.enabled == ("tlm",)


def test_mask_xlco_switch(store_root):
    base = {**SMALL, "mmlm_batch_size": 0, "tlm_batch_size": 0, "xlco_batch_size": 200, "max_tokens": 4000}
    plain = DataPipeline(TokenStore.open(store_root), PipelineConfig(**base, mask_xlco=False)).step(0)
    assert plain.stats["xlco"].num_masked == 0
    masked = DataPipeline(TokenStore.open(store_root), PipelineConfig(**base)).step(0)
    rate = masked.stats["xlco"].num_masked / (masked.stats["xlco"].num_tokens - 2 * 200 * 3)  # minus specials
    assert 0.12 < rate < 0.18
    # Masking changes the inputs, never which sentences were chosen.
    assert plain.stats["xlco"].num_tokens == masked.stats["xlco"].num_tokens


def test_store_without_parallel_data(tmp_path):
    root = write_store(tmp_path / "mono-only")
    write_mono(root, "de", [[[5, 6, 7]], [[8, 9]]])
    store = TokenStore.open(root)
    data = DataPipeline(store, PipelineConfig(tlm_batch_size=0, xlco_batch_size=0, mmlm_batch_size=4)).step(0)
    assert data.stats["mmlm"].num_examples == 4
    with pytest.raises(StoreError, match="no parallel corpora.*tlm_batch_size=8"):
        DataPipeline(store, PipelineConfig(tlm_batch_size=8, xlco_batch_size=0))
    with pytest.raises(StoreError, match="xlco_batch_size=8 need them.*set xlco_batch_size=0$"):
        DataPipeline(store, PipelineConfig(tlm_batch_size=0, xlco_batch_size=8))


def test_store_without_monolingual_data(tmp_path):
    root = write_store(tmp_path / "pairs-only")
    write_parallel(root, "en-de", random_pairs(np.random.default_rng(0), 5))
    store = TokenStore.open(root)
    with pytest.raises(StoreError, match="no monolingual text.*mmlm_batch_size=0"):
        DataPipeline(store, PipelineConfig())
    assert DataPipeline(store, PipelineConfig(mmlm_batch_size=0, tlm_batch_size=2, xlco_batch_size=2)).step(0).xlco


def test_mixup_needs_a_second_pair(tmp_path):
    root = write_store(tmp_path / "one-pair")
    write_parallel(root, "en-de", [([5, 6], [7, 8])])
    store = TokenStore.open(root)
    config = dict(mmlm_batch_size=0, tlm_batch_size=0, xlco_batch_size=2)
    with pytest.raises(StoreError, match="mixup.*mixup=False"):
        DataPipeline(store, PipelineConfig(**config))
    data = DataPipeline(store, PipelineConfig(**config, mixup=False, mask_xlco=False)).step(0)
    (batch,) = data.xlco
    for q, k in zip(batch.query.input_ids.tolist(), batch.key.input_ids.tolist()):
        assert sorted([q, k]) == [[0, 5, 6, 2], [0, 7, 8, 2]]  # the two sides, either way round


@pytest.mark.parametrize(
    "change,message",
    [
        (dict(seed=-1), "seed"),
        (dict(alpha=0.0), "alpha"),
        (dict(alpha=1.5), "alpha"),
        (dict(mmlm_batch_size=-1), "mmlm_batch_size"),
        (dict(tlm_batch_size=2.5), "tlm_batch_size"),
        (dict(block_size=2), "block_size"),
        (dict(xlco_max_length=4), "xlco_max_length"),
        (dict(mask_prob=2.0), "mask_prob"),
        (dict(mask_token_prob=0.95, random_token_prob=0.1), "must be <= 1"),
        (dict(mixup="yes"), "mixup"),
        (dict(mask_schedule="0:0.3,100:1.5"), "mask_prob"),
        (dict(mask_schedule="10:0.3"), "must start at step 0"),
        (dict(alpha_schedule="0:0.7,50:0.0"), "alpha"),
        (dict(alpha_schedule="0:0.7,50"), r"'50' is not STEP:VALUE"),
        (dict(language_starts="sw=100"), "is not LANG:STEP"),
        (dict(max_tokens=511), "smaller than one mmlm example"),
        (dict(max_tokens=511, mmlm_batch_size=0, tlm_batch_size=0, xlco_max_length=256), r"one xlco example \(2 \* xlco_max_length = 512\)"),
    ],
)
def test_bad_config(change, message):
    with pytest.raises(ValueError, match=message):
        PipelineConfig(**change)


def test_disabled_objective_does_not_constrain_max_tokens():
    config = PipelineConfig(max_tokens=256, mmlm_batch_size=0, tlm_batch_size=0, xlco_max_length=128)
    assert config.enabled == ("xlco",) and config.to_dict()["max_tokens"] == 256


@pytest.mark.parametrize(
    "kwargs,message",
    [(dict(step=-1), "step"), (dict(step=0, rank=2, world_size=2), "rank"), (dict(step=0, world_size=0), "world_size"),
     (dict(step=True), "step")],
)
def test_bad_step_arguments(pipeline, kwargs, message):
    with pytest.raises(ValueError, match=message):
        pipeline.step(**kwargs)


def test_examples_rejects_unknown_objective(pipeline):
    with pytest.raises(ValueError, match="objective must be one of mmlm, tlm, xlco"):
        pipeline.examples("mlm", 0, np.arange(2))


# --- schedules over steps (data/step_schedules.py) ---------------------------------------------


def test_a_scheduled_mask_rate_gives_each_step_the_data_of_its_rate(store_root, pipeline):
    store = TokenStore.open(store_root)
    annealed = DataPipeline(store, PipelineConfig(**SMALL, mask_schedule="0:0.15,3:0.5"))
    half = DataPipeline(store, PipelineConfig(**{**SMALL, "mask_prob": 0.5}))
    assert digest(annealed.step(1)) == digest(pipeline.step(1))
    assert digest(annealed.step(5)) == digest(half.step(5)) != digest(pipeline.step(5))
    assert annealed.step(5).stats["mmlm"].num_masked > 2 * pipeline.step(5).stats["mmlm"].num_masked


def test_a_scheduled_alpha_gives_each_step_the_data_of_its_exponent(store_root, pipeline):
    store = TokenStore.open(store_root)
    annealed = DataPipeline(store, PipelineConfig(**SMALL, alpha_schedule="0:0.7,3:0.3"))
    flat = DataPipeline(store, PipelineConfig(**{**SMALL, "alpha": 0.3}))
    assert digest(annealed.step(2)) == digest(pipeline.step(2))
    assert digest(annealed.step(3)) == digest(flat.step(3)) != digest(pipeline.step(3))
    assert annealed.language_probabilities == pipeline.language_probabilities  # what step 0 samples


def test_a_late_language_and_its_pairs_are_drawn_only_from_their_step_on(store_root, pipeline):
    store = TokenStore.open(store_root)
    late = DataPipeline(store, PipelineConfig(**{**SMALL, "mmlm_batch_size": 200, "tlm_batch_size": 200}, language_starts="sw:4"))
    assert "sw" not in {k for k, p in late.language_probabilities.items() if p} and late.pair_probabilities["en-sw"] == 0
    for step in range(4):
        stats = late.step(step).stats
        assert "sw" not in stats["mmlm"].corpus_counts and "en-sw" not in stats["tlm"].corpus_counts
    later = late.step(4).stats
    assert later["mmlm"].corpus_counts["sw"] > 0 and later["tlm"].corpus_counts["en-sw"] > 0
    everyone = DataPipeline(store, PipelineConfig(**{**SMALL, "mmlm_batch_size": 200, "tlm_batch_size": 200}))
    assert digest(late.step(6)) == digest(everyone.step(6))


@pytest.mark.parametrize(
    "starts,message",
    [("yo:5", r"names yo, which the store does not hold \(it holds de, en, sw\)"),
     ("de:1,en:1,sw:1", "leaves no monolingual corpus to sample at step 0")],
)  # fmt: skip
def test_language_starts_the_store_cannot_follow_are_refused(store_root, starts, message):
    with pytest.raises(StoreError, match=message):
        DataPipeline(TokenStore.open(store_root), PipelineConfig(**SMALL, language_starts=starts))
