"""JointModel's fast paths compute what the straightforward computation computes.

The fast paths: one MLM-head call for MMLM and TLM together, the tied word-embedding
gradient added straight into ``.grad`` (no dense V × d tensor per use), and only the
parameters a step's objectives miss touched in the graph (zero gradients), not every one.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io

import pytest
import torch
import torch.nn.functional as F

from infoxlm.data.synthetic_batches import SyntheticSpec, synthetic_step
from infoxlm.data.batching import filler_contrast_batch, filler_mlm_batch
from infoxlm.model.config import EncoderConfig
from infoxlm.model.encoder import Encoder
from infoxlm.model.fast_paths import FastPaths
from infoxlm.objectives import vocab_loss
from infoxlm.objectives.masked_lm import MaskedLM
from infoxlm.objectives.xlco import MomentumContrast
from infoxlm.train.config import ContrastConfig, apply_overrides
from infoxlm.train.joint_model import JointModel
from infoxlm.train.loop import Trainer
from infoxlm.train.presets import preset

from test_loop import structured_store


def _parts(seed: int = 0, fast_paths: FastPaths = FastPaths.training(single_process=True), checkpointing: bool = False):
    recipe, vocab_size = preset("test"), 1000  # the test preset's shapes, with a vocabulary of 1,000
    torch.manual_seed(seed)
    config = EncoderConfig.of_size(recipe.model.size, vocab_size=vocab_size)
    encoder = Encoder(config, fast_paths, activation_checkpointing=checkpointing)
    encoder.set_dropout(0.0)
    encoder.pooler.requires_grad_(False)
    with torch.no_grad():  # non-trivial LayerNorms, biases and a non-zero <pad> row
        for name, p in encoder.named_parameters():
            p.add_(0.05 * torch.randn_like(p))
    contrast = MomentumContrast(
        encoder, ContrastConfig(layer=recipe.contrast.layer, queue_size=recipe.contrast.queue_size, key_dropout=False)
    )
    data = recipe.data
    spec = SyntheticSpec(vocab_size, data.block_size, data.tlm_max_length, data.xlco_max_length, 8, 8, 8, 128)
    return encoder, contrast, [synthetic_step(spec, k) for k in range(2)]


def _micro_steps(steps):
    """(mmlm, tlm, xlco) micro-batch triples of two steps (several micro-steps, with padding)."""
    out = []
    for data in steps:
        n = max(len(data.mmlm), len(data.tlm), len(data.xlco))
        pick = lambda bs, i: bs[i] if i < len(bs) else None  # noqa: E731
        out += [(pick(data.mmlm, i), pick(data.tlm, i), pick(data.xlco, i)) for i in range(n)]
    return out


def _reference(encoder, contrast, micro_steps):
    """Loss sums and gradients the plain way: a head call per objective, autograd's own
    accumulation, every parameter touched in every micro-step."""
    sums = {"mmlm": 0.0, "tlm": 0.0, "xlco": 0.0}
    params = [p for p in encoder.parameters() if p.requires_grad] + [contrast.query_projection.weight]
    for mmlm, tlm, xlco in micro_steps:
        total = sum(p.view(-1)[0] for p in params) * 0.0
        for name, b in (("mmlm", mmlm), ("tlm", tlm)):
            if b is not None:
                hidden = encoder(b.input_ids, b.attention_mask).last_hidden_state
                loss = F.cross_entropy(encoder.lm_head(hidden, b.masked_positions), b.targets, reduction="sum")
                sums[name] += float(loss.detach())
                total = total + loss
        if xlco is not None:
            q = contrast.encode_queries(encoder, xlco.query.input_ids, xlco.query.attention_mask)
            k = contrast.encode_keys(xlco.key.input_ids, xlco.key.attention_mask)
            logits = contrast.contrast_logits(q, k)
            loss = F.cross_entropy(logits, torch.zeros(len(q), dtype=torch.long), reduction="sum")
            sums["xlco"] += float(loss.detach())
            total = total + loss
        total.backward()
    return sums, {name: p.grad.clone() for name, p in _named(encoder, contrast)}


def _named(encoder, contrast):
    return [(n, p) for n, p in encoder.named_parameters() if p.requires_grad] + [("query_projection", contrast.query_projection.weight)]


def _model(encoder, contrast) -> JointModel:
    """The joint model of the three objectives, as a run with all three builds it."""
    return JointModel(encoder, [MaskedLM("mmlm"), MaskedLM("tlm"), contrast])


def _batches(mmlm=None, tlm=None, xlco=None) -> dict:
    """A micro-step's batches by objective name, the missing ones left out (as the step does)."""
    return {name: b for name, b in (("mmlm", mmlm), ("tlm", tlm), ("xlco", xlco)) if b is not None}


def _joint(encoder, contrast, micro_steps):
    model = _model(encoder, contrast)
    sums = {"mmlm": 0.0, "tlm": 0.0, "xlco": 0.0}
    for i, triple in enumerate(micro_steps):
        out = model(_batches(*triple), touch_unreached=i == len(micro_steps) - 1)  # as the trainer
        total = out[""].loss_sum if "" in out else 0.0
        for name, term in out.items():
            if name:
                sums[name] += float(term.loss_sum.detach())
                total = total + term.loss_sum
        total.backward()
    return sums, {name: p.grad.clone() for name, p in _named(encoder, contrast)}


@pytest.mark.parametrize(
    "grad_in_place, skip_padding", [(True, True), (True, False), (False, True), (False, False)]
)
def test_fast_paths_give_the_reference_losses_and_gradients(grad_in_place, skip_padding):
    encoder, contrast, steps = _parts(fast_paths=FastPaths(skip_padding=skip_padding, word_grad_in_place=grad_in_place))
    micro = _micro_steps(steps)
    assert len(micro) > 2 and any(b.attention_mask.eq(0).any() for m in micro for b in m[:2] if b is not None)
    ref_sums, ref_grads = _reference(encoder.with_fast_paths(FastPaths.plain()), copy.deepcopy(contrast), micro)
    sums, grads = _joint(encoder, contrast, micro)
    for name in ref_sums:
        assert sums[name] == pytest.approx(ref_sums[name], rel=1e-6), name
    for name, g in ref_grads.items():
        torch.testing.assert_close(grads[name], g, rtol=1e-5, atol=1e-6, msg=name)
    assert grads["embeddings.word_embeddings.weight"][encoder.config.pad_token_id].abs().sum() > 0  # from the head


def test_checkpointed_activations_give_the_same_joint_losses_and_gradients():
    """run.activation_checkpointing: the whole joint step (MMLM, TLM, XLCO with its key
    encoder) with every layer recomputed in the backward pass computes what it computes without."""
    encoder, contrast, steps = _parts()
    checkpointed, same_contrast, _ = _parts(checkpointing=True)  # the same weights and queue
    micro = _micro_steps(steps)
    expected_sums, expected_grads = _joint(encoder, contrast, micro)
    sums, grads = _joint(checkpointed, same_contrast, micro)
    assert sums == pytest.approx(expected_sums, rel=1e-6)
    for name, g in expected_grads.items():
        torch.testing.assert_close(grads[name], g, rtol=1e-5, atol=1e-6, msg=name)


def _graph_nodes(node) -> set[str]:
    """Names of every backward node reachable from ``node``."""
    seen, stack = set(), [node]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(next_node for next_node, _ in node.next_functions)
    return {node.name() for node in seen}


def test_under_autocast_the_lookup_keeps_its_in_place_gradient():
    """Under bf16 autocast the head's product is bf16 and takes the ordinary path, but the
    lookup runs in fp32 and still adds its gradient into .grad (no dense V × d temporary per
    pass); the gradients equal those of the all-ordinary path up to fp32 summation order."""
    encoder, contrast, steps = _parts()
    micro = _micro_steps(steps)
    plain_encoder = encoder.with_fast_paths(dataclasses.replace(encoder.fast_paths, word_grad_in_place=False))
    plain_contrast = copy.deepcopy(contrast)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        sums, grads = _joint(encoder, contrast, micro)
        plain_sums, plain_grads = _joint(plain_encoder, plain_contrast, micro)
        words = encoder.embeddings(steps[0].mmlm[0].input_ids)
    assert "_LookupInPlaceGradBackward" in _graph_nodes(words.grad_fn)  # the in-place lookup ran
    assert sums == plain_sums
    for name, g in plain_grads.items():
        torch.testing.assert_close(grads[name], g, rtol=1e-5, atol=1e-6, msg=name)


def test_skipping_padding_leaves_real_positions_unchanged():
    encoder, contrast, steps = _parts(fast_paths=FastPaths())
    b = next(b for data in steps for b in data.tlm if b.input_ids.eq(encoder.config.pad_token_id).any())
    real = b.attention_mask.bool()
    padded = encoder(b.input_ids, b.attention_mask).hidden_states
    packed = encoder.with_fast_paths(FastPaths(skip_padding=True))(b.input_ids, b.attention_mask).hidden_states
    assert len(packed) == len(padded)
    for ours, theirs in zip(packed, padded):
        torch.testing.assert_close(ours[real], theirs[real], rtol=1e-5, atol=1e-6)
        assert ours[~real].abs().sum() == 0


def test_the_pad_row_gets_no_gradient_from_the_lookup():
    encoder, contrast, steps = _parts(fast_paths=FastPaths(word_grad_in_place=True))
    b = next(b for data in steps for b in data.tlm if b.input_ids.eq(encoder.config.pad_token_id).any())
    encoder(b.input_ids, b.attention_mask).last_hidden_state.sum().backward()
    grad = encoder.embeddings.word_embeddings.weight.grad
    assert grad[encoder.config.pad_token_id].abs().sum() == 0
    assert grad[b.input_ids[0, 1]].abs().sum() > 0


def test_an_xlco_only_micro_step_touches_exactly_what_it_misses():
    encoder, contrast, steps = _parts()
    model = _model(encoder, contrast)
    unreached = {id(p) for p in model.unreached_parameters(["xlco"])}
    names = {n for n, p in encoder.named_parameters() if id(p) in unreached}
    layer = contrast.layer
    assert names == {n for n, p in encoder.named_parameters() if p.requires_grad and (
        n.startswith("lm_head.") and n != "lm_head.decoder.weight" or
        any(n.startswith(f"encoder.layer.{i}.") for i in range(layer, encoder.num_layers)))}
    assert model.unreached_parameters(["mmlm", "tlm"]) == [contrast.query_projection.weight]
    assert model.unreached_parameters(["mmlm"]) == [contrast.query_projection.weight]
    assert model.unreached_parameters(["mmlm", "tlm", "xlco"]) == []

    xlco = steps[0].xlco[0]
    out = model({"xlco": xlco}, touch_unreached=True)
    (out["xlco"].loss_sum + out[""].loss_sum).backward()
    assert all(p.grad is not None for p in model.trainable_parameters())  # DDP sees every parameter
    assert all(float(p.grad.abs().sum()) == 0 for p in model.trainable_parameters() if id(p) in unreached)


def test_a_filler_runs_the_modules_but_counts_nothing_and_queues_no_key():
    encoder, contrast, _ = _parts()
    model = _model(encoder, contrast)
    out = model(_batches(filler_mlm_batch(), filler_mlm_batch(), filler_contrast_batch()))
    assert out["mmlm"].loss_sum.item() == out["tlm"].loss_sum.item() == out["xlco"].loss_sum.item() == 0
    assert all(not term.extras for term in out.values())  # a filler's queries are not counted as ranked
    keys, slots = contrast._step_keys[-1]  # what the step would enqueue after its update
    assert keys.shape == (0, encoder.config.hidden_size) and slots.shape == (0,)
    sum(term.loss_sum for term in out.values()).backward()
    # Every module a real micro-step uses ran backward (FSDP reduce-scatters each), with zeros.
    grads = [p.grad for p in model.trainable_parameters()]
    assert all(g is not None and float(g.abs().sum()) == 0 for g in grads)
    keys, _ = model(side_pass=("xlco", "encode_keys_of", (filler_contrast_batch(),)))
    assert keys.shape == (0, encoder.config.hidden_size)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return structured_store(tmp_path_factory.mktemp("fused-loss") / "store")


@pytest.mark.parametrize("fast_paths, fused_runs", [("false", False), ("true", True)])
def test_run_fast_paths_false_never_calls_the_fused_cross_entropy(store, tmp_path, monkeypatch, fast_paths, fused_runs):
    """The fused vocabulary cross-entropy is a fast path like the others: made to look as if
    its kernels ran here (a CPU has no Triton), a training step calls them for its masked-LM
    losses with the fast paths on, and never with run.fast_paths=false."""
    calls = []

    def spy(logits, targets):  # the fused kernels' result, computed plainly
        calls.append(tuple(logits.shape))
        return vocab_loss.plain_token_cross_entropy(logits, targets)

    monkeypatch.setattr(vocab_loss, "fused_kernels_run_on", lambda logits: True)
    monkeypatch.setattr(vocab_loss, "_fused_token_cross_entropy", lambda: spy)
    config = apply_overrides(preset("test"), [f"run.fast_paths={fast_paths}", "optim.max_steps=1"])
    with contextlib.redirect_stdout(io.StringIO()):
        trainer = Trainer(config, store, tmp_path / "run", progress=False)
    metrics = trainer.train_step()
    assert metrics["loss/mmlm"] > 0 and metrics["loss/tlm"] > 0  # the step computed masked-LM losses
    assert bool(calls) is fused_runs, calls


@pytest.mark.parametrize("bucket", [64, 1000])
def test_a_token_bucket_gives_the_same_joint_losses_and_gradients(bucket):
    """run.token_bucket: every packed pass (MMLM, TLM, XLCO's queries and keys) rounded up by
    spare rows gives the losses and gradients of the real rows alone."""
    encoder, contrast, steps = _parts(fast_paths=FastPaths.training(single_process=True))
    bucketed, same_contrast, _ = _parts(fast_paths=FastPaths.training(single_process=True, token_bucket=bucket))
    micro = _micro_steps(steps)
    assert any(b.packing.num_tokens % bucket for m in micro for b in m[:2] if b is not None)  # spare rows made
    expected_sums, expected_grads = _joint(encoder, contrast, micro)
    sums, grads = _joint(bucketed, same_contrast, micro)
    assert sums == pytest.approx(expected_sums, rel=1e-6)
    for name, g in expected_grads.items():
        torch.testing.assert_close(grads[name], g, rtol=1e-5, atol=1e-6, msg=name)
