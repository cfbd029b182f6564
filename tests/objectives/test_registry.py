"""Objectives as units: the run's objectives come from the registry, and a fourth one, defined
here and nowhere else, trains through ``pretrain`` with its own head, logged, checkpointed and
resumed like the built-in ones."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
import torch
from torch import nn

from infoxlm.model.config import EncoderConfig
from infoxlm.model.encoder import Encoder
from infoxlm.objectives.masked_lm import MaskedLM
from infoxlm.objectives.objective import LossTerm, Objective
from infoxlm.objectives.registry import BUILDERS, build_objectives, register, unregister
from infoxlm.objectives.translation_ranking import TranslationRanking
from infoxlm.objectives.xlco import MomentumContrast
from infoxlm.train import pretrain, preset
from infoxlm.train.checkpoint import list_checkpoints, load_checkpoint
from infoxlm.train.config import apply_overrides


class BlockLength(Objective):
    """A toy objective: predict each MMLM block's log length from the mean of its final token
    states, through a linear head of its own (squared error, summed over the blocks)."""

    name, stream = "length", "mmlm"

    def __init__(self, hidden_size: int, weight: float = 1.0):
        super().__init__(weight)
        self.head = nn.Linear(hidden_size, 1)

    def count(self, stats) -> int:
        return stats.num_examples  # blocks

    def loss(self, encoder, batch) -> LossTerm:
        tokens = encoder(batch.input_ids, batch.attention_mask, packing=batch.packing).token_states()  # (n, d)
        means = batch.packing.sequence_means(tokens)  # (B, d)
        target = batch.attention_mask.sum(dim=1).float().log()  # (B,)
        return LossTerm(((self.head(means).squeeze(-1).float() - target) ** 2).sum())


@pytest.fixture
def length_objective():
    register("length", lambda config, encoder: BlockLength(encoder.config.hidden_size))
    yield
    unregister("length")


def _quiet(function, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return function(*args, **kwargs)


def test_a_fourth_objective_defined_only_here_trains_through_pretrain(built_store, tmp_path, length_objective):
    config = apply_overrides(preset("test"), ["optim.max_steps=3", "run.log_every=1", "run.save_every=3"])
    run = _quiet(pretrain, config, built_store, tmp_path / "run", progress=False)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    for row in rows:  # logged beside the built-in ones, under its own name
        assert {"loss/mmlm", "loss/tlm", "loss/xlco", "loss/length"} <= set(row) and row["loss/length"] > 0
    head = load_checkpoint(list_checkpoints(run)[-1][1])["objective.length"]
    assert set(head) == {"head.weight", "head.bias"}  # its head, checkpointed under its name

    longer = apply_overrides(config, ["optim.max_steps=4", "run.save_every=1"])  # resumed: its head loaded
    _quiet(pretrain, longer, built_store, run, progress=False, allow_config_change=True)
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["step"] == 4
    after = load_checkpoint(list_checkpoints(run)[-1][1])["objective.length"]
    assert not torch.equal(after["head.bias"], head["head.bias"])  # the optimizer moves it


def test_the_built_in_objectives_follow_the_config_in_order():
    encoder = Encoder(EncoderConfig.of_size("tiny", vocab_size=60))
    config = lambda *more: apply_overrides(preset("test"), ["contrast.layer=1", *more])  # noqa: E731
    built = build_objectives(config(), encoder)
    assert [o.name for o in built] == ["mmlm", "tlm", "xlco"] == list(BUILDERS)
    assert isinstance(built[0], MaskedLM) and type(built[2]) is MomentumContrast
    built = build_objectives(config("contrast.in_batch_negatives=true", "data.tlm_batch_size=0"), encoder)
    assert [o.name for o in built] == ["mmlm", "xlco"] and type(built[1]) is TranslationRanking
    assert [o.weight for o in build_objectives(config("objectives.tlm_weight=0.5"), encoder)] == [1.0, 0.5, 1.0]


def test_names_are_unique_and_the_built_in_ones_stay():
    with pytest.raises(ValueError, match="'xlco' is registered already"):
        register("xlco", lambda config, encoder: None)
    with pytest.raises(ValueError, match="'mmlm' is a built-in objective"):
        unregister("mmlm")
