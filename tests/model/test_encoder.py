"""The encoder computes exactly what transformers' XLM-R computes."""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

from infoxlm import Encoder, EncoderConfig
from infoxlm.model.encoder import xlmr_position_ids
from infoxlm.model.fast_paths import FastPaths

TOL = 1e-5


def test_hidden_states_and_logits_match_transformers(hf_mlm, hf_mlm_dir, mixed_batch):
    ids, mask = mixed_batch
    ours = Encoder.from_pretrained(hf_mlm_dir).eval()
    with torch.no_grad():
        ref = hf_mlm(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        out = ours(ids, mask)
        logits = ours.lm_head(out.last_hidden_state)
    real = mask.bool()
    assert len(out.hidden_states) == len(ref.hidden_states) == 4
    for k, (theirs, mine) in enumerate(zip(ref.hidden_states, out.hidden_states)):
        assert (theirs - mine)[real].abs().max() <= TOL, f"hidden_states[{k}]"
    assert torch.equal(out.last_hidden_state, out.hidden_states[-1])
    assert (ref.logits - logits)[real].abs().max() <= TOL


def test_output_does_not_depend_on_padding(mixed_batch):
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120)).eval()
    ids, mask = mixed_batch
    with torch.no_grad():
        batched = enc(ids, mask).hidden_states
        for row, length in enumerate(mask.sum(1).tolist()):
            alone = enc(ids[row : row + 1, :length]).hidden_states
            for k in range(len(alone)):
                assert (batched[k][row, :length] - alone[k][0]).abs().max() <= TOL


def test_stops_after_layer_k_without_running_the_rest(mixed_batch):
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120, num_hidden_layers=4)).eval()
    ran = []
    for i, layer in enumerate(enc.encoder.layer):
        layer.register_forward_hook(lambda *_, i=i: ran.append(i))
    ids, mask = mixed_batch
    with torch.no_grad():
        full = enc(ids, mask).hidden_states
        ran.clear()
        partial = enc(ids, mask, num_layers=2)
    assert ran == [0, 1]
    assert len(partial.hidden_states) == 3
    assert torch.equal(partial.last_hidden_state, full[2])
    assert len(enc(ids, mask, num_layers=0).hidden_states) == 1
    with pytest.raises(ValueError, match="num_layers=5"):
        enc(ids, mask, num_layers=5)


def test_a_given_packing_computes_what_the_mask_gives(mixed_batch):
    """The trainer's batches bring a packing made on the host; the encoder then computes
    exactly what it computes from the mask, packed (real tokens only) or not."""
    from infoxlm.model.packing import Packing

    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120)).eval()
    ids, mask = mixed_batch
    packing = Packing.of(mask)
    real = mask.bool()
    with torch.no_grad():
        for skip_padding in (False, True):
            enc = enc.with_fast_paths(FastPaths(skip_padding=skip_padding))
            reference = enc(ids, mask)
            given = enc(ids, mask, packing=packing)
            assert given.packed == skip_padding
            for k, (a, b) in enumerate(zip(reference.hidden_states, given.hidden_states)):
                assert torch.equal(a, b), f"hidden_states[{k}]"
                # token_states: the real tokens' states, row-major, whichever way the pass ran
                assert torch.equal(given.token_states(k), b[real])
            if skip_padding:  # padded lazily, with zeros at the padding
                assert given.last_hidden_state[~real].abs().sum() == 0
    # A batch without padding: token_states is every position, no packing needed to run.
    full = ids[:1]
    with torch.no_grad():
        out = enc(full, packing=Packing.of(torch.ones_like(full)))
    assert not out.packed and torch.equal(out.token_states(), out.last_hidden_state[0])


def test_states_at_chosen_tokens_match_the_full_pass_values_and_gradients(mixed_batch):
    """``states_at`` runs the top layer's row-wise part on the chosen real tokens only; the
    states there, and every parameter's gradient through them, are the full pass's."""
    from infoxlm.model.packing import Packing

    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120, num_hidden_layers=3)).eval()
    ids, mask = mixed_batch
    packing = Packing.of(mask)
    rows = torch.tensor([0, 3, 4, packing.num_tokens - 1])  # among the real tokens, row-major
    weights = torch.randn(len(rows), enc.config.hidden_size)
    ran_rows = []
    for skip_padding, top_rows_only in ((False, True), (True, True), (True, False)):
        enc = enc.with_fast_paths(FastPaths(skip_padding=skip_padding, top_rows_only=top_rows_only))
        top = enc.encoder.layer[-1]
        top.output.dense.register_forward_hook(lambda _m, inputs, _o: ran_rows.append(inputs[0].shape[0]))
        for num_layers in (0, 1, 3):
            enc.zero_grad()
            full = enc(ids, mask, num_layers=num_layers).token_states()[rows]
            (full * weights).sum().backward()
            expected = {name: p.grad.clone() for name, p in enc.named_parameters() if p.grad is not None}
            enc.zero_grad()
            ran_rows.clear()
            chosen = enc.states_at(ids, rows, mask, num_layers=num_layers, packing=packing)
            (chosen * weights).sum().backward()
            assert chosen.shape == (len(rows), enc.config.hidden_size)
            assert torch.allclose(chosen, full, atol=TOL), (skip_padding, num_layers)
            got = {name: p.grad for name, p in enc.named_parameters() if p.grad is not None}
            assert got.keys() == expected.keys()
            for name, grad in got.items():
                assert torch.allclose(grad, expected[name], atol=TOL), (skip_padding, num_layers, name)
            if num_layers == 3:  # the top feed-forward saw the chosen rows only, or every real token
                assert ran_rows == [len(rows) if top_rows_only else packing.num_tokens]


def test_compiled_layers_compute_what_the_eager_ones_do(mixed_batch):
    """``compile_layers`` (the trainer's run.compile) wraps every layer in torch.compile with
    dynamic shapes; traced here with the eager backend (no code generation on a CPU)."""
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120)).eval()
    ids, mask = mixed_batch
    rows = torch.tensor([1, 12, 18])  # real tokens whose final states alone are asked for
    with torch.no_grad():
        eager = enc(ids, mask).hidden_states
        enc.compile_layers(backend="eager")
        assert all(layer._compiled_call_impl is not None for layer in enc.encoder.layer)
        compiled = enc(ids, mask).hidden_states
        chosen = enc.states_at(ids, rows, mask)  # the top layer's call with rows to keep
        shorter = enc(ids[:, :7], mask[:, :7]).last_hidden_state  # a new length: no error, no stale graph
    for a, b in zip(eager, compiled):
        assert torch.equal(a, b)
    assert torch.allclose(chosen, eager[-1][mask.bool()][rows], atol=TOL)
    assert shorter.shape == (3, 7, enc.config.hidden_size)


def test_compiling_the_layers_leaves_torch_process_wide_settings_alone():
    """The recompile limit is one setting for the whole process: the caller that decides to
    compile sets it (train.joint_step.compile_encoders), not the encoder."""
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120))
    with torch._dynamo.config.patch(recompile_limit=8):
        enc.compile_layers(backend="eager")
        assert torch._dynamo.config.recompile_limit == 8


def test_checkpointed_activations_give_the_same_gradients_by_recomputing(mixed_batch):
    """``activation_checkpointing`` (run.activation_checkpointing): each layer runs again in the
    backward pass (dropout replayed as it fell), and every gradient is what it is without."""
    ids, mask = mixed_batch
    torch.manual_seed(0)
    plain = Encoder(EncoderConfig.of_size("tiny", vocab_size=120, hidden_dropout_prob=0.2), FastPaths.training(True)).train()
    checkpointed = Encoder(plain.config, plain.fast_paths, activation_checkpointing=True).train()
    checkpointed.load_state_dict(plain.state_dict())
    calls = []
    checkpointed.encoder.layer[0].register_forward_pre_hook(lambda *_: calls.append(torch.is_grad_enabled()))
    gradients = []
    for enc in (plain, checkpointed):
        torch.manual_seed(1)  # the same dropout masks in both
        (enc(ids, mask).last_hidden_state.square().mean()).backward()
        gradients.append({name: p.grad for name, p in enc.named_parameters() if p.grad is not None})
    assert len(calls) == 2  # once forward, once recomputed in the backward pass
    assert gradients[0].keys() == gradients[1].keys()
    for name, grad in gradients[0].items():
        assert torch.allclose(grad, gradients[1][name], atol=1e-6), name
    with torch.no_grad():  # nothing to recompute for: a single pass
        calls.clear()
        checkpointed(ids, mask)
    assert len(calls) == 1


def test_positions_start_after_padding_index():
    ids = torch.tensor([[0, 9, 9, 2, 1, 1]])
    assert xlmr_position_ids(ids, pad_token_id=1).tolist() == [[2, 3, 4, 5, 1, 1]]


def test_default_attention_mask_ignores_padding(mixed_batch):
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120)).eval()
    ids, mask = mixed_batch
    with torch.no_grad():
        assert torch.equal(enc(ids).last_hidden_state, enc(ids, mask).last_hidden_state)


def test_runs_under_bf16_autocast(mixed_batch):
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120)).eval()
    ids, mask = mixed_batch
    with torch.no_grad():
        exact = enc(ids, mask).last_hidden_state
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = enc(ids, mask).last_hidden_state
            fp32_residual = enc.with_fast_paths(FastPaths(low_precision_residual=False))(ids, mask).last_hidden_state
    # The residual stream (LayerNorm outputs) stays in bf16 unless asked for fp32 as plain
    # autocast keeps it; the matmuls ran in bf16 either way, hence a small difference.
    assert low.dtype == torch.bfloat16 and fp32_residual.dtype == torch.float32
    for out in (low, fp32_residual):
        diff = (out.float() - exact)[mask.bool()].abs().max()
        assert 0 < diff < 0.1


def test_gradients_reach_every_trained_parameter(mixed_batch):
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120))
    ids, mask = mixed_batch
    masked = mask.bool() & (torch.rand(ids.shape) < 0.5)
    masked[0, 1] = True
    logits = enc.lm_head(enc(ids, mask).last_hidden_state, masked)
    torch.nn.functional.cross_entropy(logits, ids[masked]).backward()
    no_grad = [n for n, p in enc.named_parameters() if p.grad is None and not n.startswith("pooler.")]
    assert no_grad == []


def test_importing_the_encoder_leaves_torch_dynamo_unimported():
    """torch.nn.attention.varlen imports torch._dynamo (seconds); only a run that compiles or
    calls the kernel should pay for it."""
    import subprocess
    import sys

    probe = "import sys, infoxlm.model.encoder; print('torch._dynamo' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("size", ["base", "large"])
def test_parameter_count_matches_transformers(size, transformers):
    config = EncoderConfig.of_size(size)
    with torch.device("meta"):
        ours = Encoder(config)
        theirs = transformers.XLMRobertaModel(transformers.XLMRobertaConfig(**config.to_hf_dict()))
    ours_body = sum(p.numel() for n, p in ours.named_parameters() if not n.startswith("lm_head."))
    assert ours_body == sum(p.numel() for p in theirs.parameters())


def test_initialisation_schemes():
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=500))
    w = enc.encoder.layer[0].intermediate.dense.weight
    assert 0.015 < w.std() < 0.025 and w.abs().max() > 0.02  # N(0, 0.02²) has tails past 0.02
    enc.reset_parameters("uniform")
    assert w.abs().max() <= 0.02 and w.std().item() == pytest.approx(0.02 / 3**0.5, rel=0.05)
    assert torch.equal(enc.embeddings.word_embeddings.weight[1], torch.zeros(64))  # <pad> row stays 0
    assert torch.equal(enc.encoder.layer[0].intermediate.dense.bias, torch.zeros(128))
    with pytest.raises(ValueError, match="'xavier'"):
        enc.reset_parameters("xavier")
