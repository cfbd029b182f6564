"""Compiling the encoders for a run (``run.compile``): the process-wide recompile limit is
raised where the run decides to compile, enough for every form training calls the layers in."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from infoxlm.model.config import EncoderConfig
from infoxlm.model.encoder import Encoder
from infoxlm.model.fast_paths import FastPaths
from infoxlm.train.joint_step import LAYER_GRAPHS, compile_encoders


def test_compiling_for_a_run_raises_the_recompile_limit_and_never_lowers_it():
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120))
    with torch._dynamo.config.patch(recompile_limit=8):  # torch's default
        compile_encoders([enc], backend="eager")
        assert torch._dynamo.config.recompile_limit == LAYER_GRAPHS
        assert all(layer._compiled_call_impl is not None for layer in enc.encoder.layer)
    with torch._dynamo.config.patch(recompile_limit=64):  # set higher by the user: kept
        compile_encoders([enc], backend="eager")
        assert torch._dynamo.config.recompile_limit == 64


@pytest.mark.slow
def test_compiled_layers_get_a_graph_for_each_of_the_12_forms_training_calls_them_in():
    # Training calls the layers' one forward with grad and autocast (query encoder), without
    # grad under autocast (key encoder), without either (evaluation), with rows
    # kept or not (the top layer), on packed or padded states: more forms than torch's
    # default limit of 8 graphs per function, past which the rest would run uncompiled.
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120), FastPaths.training(single_process=True))
    torch._dynamo.reset()
    counters.clear()
    with torch._dynamo.config.patch(recompile_limit=8):  # torch's default, raised by compile_encoders
        compile_encoders([enc], backend="eager")
        full = torch.randint(4, 100, (2, 6))
        full[:, 0] = 0
        padded = full.clone()
        padded[1, 4:] = enc.config.pad_token_id  # packed states; full rows stay (B, T, d)
        for grad, autocast in ((True, True), (False, True), (False, False)):
            for ids in (padded, full):
                for rows in (None, torch.tensor([1, 3])):
                    with torch.set_grad_enabled(grad), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                        enc(ids) if rows is None else enc.states_at(ids, rows)
    assert counters["stats"]["unique_graphs"] == 12
    assert counters["frames"]["ok"] == counters["frames"]["total"] == 12
