"""The benchmark's sizes (bench/sizes.py): each read off the training preset of its name, and
the config the benchmark trains with validated as the trainer's is."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
import torch

from infoxlm.bench.sizes import SIZES, bench_size
from infoxlm.bench.step_benchmark import train_config
from infoxlm.train.config import ConfigError, resolve_config
from infoxlm.train.presets import preset


@pytest.mark.parametrize("name", ["test", "demo", "base", "large"])
def test_a_benchmark_size_is_read_off_its_preset(name):
    """`infoxlm bench --size NAME` times the step preset NAME trains: shape, lengths, contrast
    (base and large: XLCO views of 256 tokens, the benchmark's own choice)."""
    size, config = bench_size(name), preset(name)
    data = config.data
    assert (size.encoder, size.block_size, size.tlm_max_length) == (config.model.size, data.block_size, data.tlm_max_length)
    assert size.xlco_max_length == (256 if name in ("base", "large") else data.xlco_max_length)
    assert size.contrast == json.loads(json.dumps(resolve_config(config).to_dict()["contrast"]))
    if name in ("test", "demo"):  # on a CPU, the preset's own batches
        assert (size.cpu.mmlm, size.cpu.tlm, size.cpu.xlco, size.cpu.max_tokens) == (
            data.mmlm_batch_size, data.tlm_batch_size, data.xlco_batch_size, data.max_tokens
        )


def test_the_benchmark_s_config_goes_through_the_config_s_validation():
    """The benchmark set config fields by hand: a contrast the trainer refuses (no queue and no
    in-batch negatives: no negatives at all) and a switch that is not one were taken."""
    cpu, size = torch.device("cpu"), SIZES["test"]
    no_negatives = dataclasses.replace(size, contrast={**size.contrast, "queue_size": 0})
    with pytest.raises(ConfigError, match=re.escape("contrast.queue_size=0: expected a positive number of negative keys")):
        train_config(no_negatives, cpu, False)
    with pytest.raises(ConfigError, match=re.escape("run.bf16='yes': expected true or false")):
        train_config(size, cpu, "yes")
    config = train_config(size, cpu, False)
    assert (config.model.dropout, config.run.device, config.run.bf16) == (0.0, "cpu", False)
    assert dataclasses.asdict(config.contrast) == size.contrast


def test_the_gpu_sizes_are_the_batches_whose_memory_peaks_the_budget_test_holds():
    """tests/train/test_token_budget.py checks the micro-batch budget's memory estimate against
    the peaks BENCHMARKS.md measured with these batches: a change here needs those peaks measured
    again (and the batches there changed with them)."""
    assert (SIZES["base"].vocab_size, SIZES["large"].vocab_size) == (250_002, 250_002)
    assert [(s.cuda.mmlm, s.cuda.tlm, s.cuda.xlco, s.cuda.max_tokens) for s in (SIZES["base"], SIZES["large"])] == [
        (256, 256, 256, 98_304), (256, 256, 256, 16_384)
    ]
