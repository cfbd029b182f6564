"""XLCO: momentum schedule, EMA, queue, gradients and the loss on a hand-computed case."""

from __future__ import annotations

import math

import pytest
import torch

from infoxlm import Encoder, EncoderConfig
from infoxlm.objectives.registry import contrast_objective
from infoxlm.objectives.translation_ranking import TranslationRanking
from infoxlm.objectives.xlco import MomentumContrast, momentum_at, positive_ranked_first
from infoxlm.train.config import ContrastConfig


@pytest.fixture
def encoder():
    torch.manual_seed(0)
    return Encoder(EncoderConfig.of_size("tiny", vocab_size=60, num_hidden_layers=3))


def contrast(encoder, **fields) -> MomentumContrast:
    """XLCO (the class its options pick) with ContrastConfig's options and these fields set by
    hand; keys without dropout unless asked, so that they compare with the queries."""
    settings = ContrastConfig(key_dropout=False)
    for name, value in fields.items():
        setattr(settings, name, value)
    return contrast_objective(encoder, settings)


@pytest.fixture
def views():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(4, 59, (4, 7), generator=g)
    ids[:, 0], ids[:, -1] = 0, 2
    ids[2, 4:] = 1
    ids[2, 3] = 2
    return ids, ids.ne(1).long()


def test_momentum_schedules():
    assert momentum_at(0, "constant", 0.9999) == momentum_at(10_000, "constant", 0.9999) == 0.9999
    assert momentum_at(5, "constant", base=0.999) == 0.999
    assert momentum_at(0, "inverse_sqrt", 0.9999) == 0.0
    assert momentum_at(99, "inverse_sqrt", 0.9999) == pytest.approx(1 - 100**-0.51)
    assert momentum_at(10**9, "inverse_sqrt", 0.9999) == 0.9995
    with pytest.raises(ValueError, match="'cosine'"):
        momentum_at(0, "cosine", 0.9999)


def test_key_encoder_starts_as_a_copy_and_stops_at_the_universal_layer(encoder, views):
    xlco = contrast(encoder, layer=2, queue_size=16)
    assert len(xlco.key_encoder.encoder.layer) == 2
    encoder.eval()
    with torch.no_grad():
        q = xlco.encode_queries(encoder, *views)
    assert torch.allclose(xlco.encode_keys(*views), q, atol=1e-6)


def test_momentum_update_matches_a_plain_reference(encoder):
    xlco = contrast(encoder, layer=2, queue_size=16)
    with torch.no_grad():
        for p in encoder.parameters():
            p.add_(torch.randn_like(p))
        encoder.lm_head.bias.add_(1.0)
    query = dict(encoder.named_parameters())
    before = {n: p.clone() for n, p in xlco.key_encoder.named_parameters()}
    proj_before = xlco.key_projection.weight.clone()
    xlco.momentum_update(encoder, momentum=0.9)
    for name, key_param in xlco.key_encoder.named_parameters():
        if name.startswith(("lm_head.", "pooler.")):
            continue
        expected = 0.9 * before[name] + 0.1 * query[name]
        assert torch.allclose(key_param, expected, atol=1e-6), name
    expected = 0.9 * proj_before + 0.1 * xlco.query_projection.weight
    assert torch.allclose(xlco.key_projection.weight, expected, atol=1e-6)


def test_only_the_query_side_gets_gradients(encoder, views):
    xlco = contrast(encoder, layer=2, queue_size=16)
    out = xlco(encoder, *views, *views)
    out.loss().backward()
    assert all(p.grad is None and not p.requires_grad for p in xlco.key_encoder.parameters())
    assert xlco.key_projection.weight.grad is None
    assert xlco.query_projection.weight.grad is not None
    assert encoder.encoder.layer[1].output.dense.weight.grad is not None
    assert encoder.encoder.layer[2].output.dense.weight.grad is None  # above the universal layer
    optimizer_params = {id(p) for p in list(encoder.parameters()) + list(xlco.parameters()) if p.requires_grad}
    assert not any(id(p) in optimizer_params for p in xlco.key_encoder.parameters())


def test_without_momentum_the_key_encoder_is_the_query_encoder(encoder, views):
    xlco = contrast(encoder, layer=2, queue_size=16, use_momentum=False)
    assert xlco.key_encoder is None and xlco.key_projection is None
    assert sum(p.numel() for p in xlco.parameters()) == 64 * 64  # the query projection only
    encoder.eval()
    keys = xlco.encode_keys(*views, encoder=encoder)
    assert not keys.requires_grad
    with torch.no_grad():
        assert torch.equal(keys, xlco.encode_queries(encoder, *views))
    xlco.momentum_update(encoder, 0.5)  # a no-op, not an error


def test_queue_wraps_around_and_counts_real_keys(encoder):
    xlco = contrast(encoder, layer=1, queue_size=5)
    batch = lambda start, n: torch.arange(start, start + n, dtype=torch.float).unsqueeze(1).repeat(1, 64)
    assert xlco.prefill_batches_needed(keys_per_batch=2) == 3
    xlco.enqueue(batch(0, 3))
    assert not xlco.is_full and int(xlco.queue_pointer) == 3
    xlco.enqueue(batch(3, 3))  # 3, 4 at the end; 5 wraps to the front
    assert xlco.is_full and int(xlco.queue_pointer) == 1
    assert xlco.queue[:, 0].tolist() == [5, 1, 2, 3, 4]
    xlco.enqueue(batch(10, 7))  # more than K: only the newest 5 stay
    assert xlco.queue[:, 0].tolist() == [16, 12, 13, 14, 15]
    assert int(xlco.queue_pointer) == 1  # points at the oldest key, 12
    assert xlco.prefill_batches_needed(keys_per_batch=2) == 0


def test_logits_and_loss_on_a_hand_computed_case(encoder):
    xlco = contrast(encoder, layer=1, queue_size=2, temperature=0.5)
    xlco.queue.zero_()
    xlco.queue[0, 0], xlco.queue[1, 1] = 1.0, -1.0  # negatives e0 and -e1
    q = torch.zeros(1, 64)
    q[0, 0], q[0, 1] = 1.0, 2.0
    k = torch.zeros(1, 64)
    k[0, 1] = 1.0
    logits = xlco.contrast_logits(q, k)
    assert logits.tolist() == [[4.0, 2.0, -4.0]]  # [q·k, q·n1, q·n2] / 0.5
    from infoxlm.objectives.xlco import ContrastOutput

    out = ContrastOutput(logits=logits, keys=k)
    expected = -4.0 + math.log(math.exp(4.0) + math.exp(2.0) + math.exp(-4.0))
    assert out.loss().item() == pytest.approx(expected, rel=1e-6)
    assert out.accuracy() == 1.0


def test_in_batch_negatives_on_a_hand_computed_case(encoder):
    xlco = contrast(encoder, layer=1, queue_size=1, temperature=1.0, in_batch_negatives=True)
    xlco.queue.zero_()
    xlco.queue[0, 2] = 1.0  # one queued negative: e2
    q = torch.zeros(2, 64)
    q[0, 0], q[1, 1], q[1, 2] = 1.0, 1.0, 3.0
    k = torch.zeros(2, 64)
    k[0, 0], k[0, 1], k[1, 1] = 2.0, 1.0, 1.0
    logits = xlco.contrast_logits(q, k)
    # columns: [q·own key | q·key_0, q·key_1 (own masked) | q·queue]
    inf = float("-inf")
    assert logits.tolist() == [[2.0, inf, 0.0, 0.0], [1.0, 1.0, inf, 3.0]]
    assert positive_ranked_first(logits).tolist() == [True, False]


def test_in_batch_negatives_alone_need_no_queue(encoder, views):
    ids, mask = views
    xlco = contrast(encoder, layer=2, queue_size=0, in_batch_negatives=True)
    assert xlco.is_full and xlco.prefill_batches_needed(keys_per_batch=4) == 0
    out = xlco(encoder, ids, mask, ids, mask)
    assert tuple(out.logits.shape) == (4, 5)  # positive + 4 in-batch columns (own one at −inf)
    assert torch.isfinite(out.loss())
    xlco.enqueue(out.keys)  # nothing to keep: a no-op
    assert xlco.queue.shape == (0, 64)


def test_mean_pooling_reads_the_real_tokens_of_the_universal_layer(encoder, views):
    ids, mask = views
    xlco = contrast(encoder, layer=2, queue_size=16, pooling="mean")
    encoder.eval()
    with torch.no_grad():
        q = xlco.encode_queries(encoder, ids, mask)  # (4, d)
        states = encoder(ids, mask, num_layers=2).last_hidden_state  # (4, 7, d)
    # Row 2 is padded after 4 tokens: its pads must not count.
    expected = torch.stack([states[i, mask[i].bool()].mean(dim=0) for i in range(4)]) @ xlco.query_projection.weight.t()
    assert torch.allclose(q, expected, atol=1e-5)
    assert torch.allclose(xlco.encode_keys(ids, mask), q, atol=1e-5)  # the key side pools alike


def test_cls_pooling_reads_the_first_token_of_the_universal_layer(encoder, views):
    """The paper's pooling: the <s> state, from a pass whose universal layer runs its
    row-wise part on the <s> rows only; values and gradients as from the full layer."""
    ids, mask = views
    xlco = contrast(encoder, layer=2, queue_size=16)  # pooling="cls"
    encoder.eval()
    weights = torch.randn(4, encoder.config.hidden_size)
    q = xlco.encode_queries(encoder, ids, mask)  # (4, d)
    (q * weights).sum().backward()
    got = {name: p.grad.clone() for name, p in encoder.named_parameters() if p.grad is not None}
    encoder.zero_grad()
    states = encoder(ids, mask, num_layers=2).last_hidden_state  # (4, 7, d)
    expected = states[:, 0] @ xlco.query_projection.weight.t()
    (expected * weights).sum().backward()
    assert torch.allclose(q, expected, atol=1e-5)
    for name, p in encoder.named_parameters():
        if p.grad is not None:
            assert torch.allclose(got[name], p.grad, atol=1e-5), name
    with torch.no_grad():
        assert torch.allclose(xlco.encode_keys(ids, mask), q, atol=1e-5)  # the key side pools alike


def test_accuracy_counts_ties_as_misses():
    collapsed = torch.full((3, 5), 7.0)  # every key scores the same: a collapsed encoder
    assert positive_ranked_first(collapsed).tolist() == [False, False, False]
    logits = torch.tensor([[3.0, 1.0, 2.9], [1.0, 1.0, 0.0]])
    assert positive_ranked_first(logits).tolist() == [True, False]


def test_its_options_are_the_config_s_defaults_included(encoder):
    """Built from a ContrastConfig alone: a field left at its default is the config's default
    (the key encoder with dropout, as the authors' code), not one of the module's own."""
    settings = ContrastConfig(layer=2, queue_size=16)
    xlco = MomentumContrast(encoder, settings)
    assert xlco.key_dropout is settings.key_dropout is True
    assert (xlco.temperature, xlco.normalize, xlco.pooling) == (settings.temperature, settings.normalize, settings.pooling)
    assert (xlco.start_step, xlco.key_warmup, xlco.momentum) == (0, "copy", settings.momentum)


def _key_params(xlco) -> list[torch.Tensor]:
    return [p.detach().clone() for n, p in xlco.key_encoder.named_parameters() if not n.startswith(("lm_head.", "pooler."))]


def _moved(encoder) -> None:
    with torch.no_grad():
        for p in encoder.parameters():
            p.add_(torch.randn_like(p))


def test_the_key_encoder_waits_frozen_then_copies_then_follows(encoder):
    """key_warmup=copy: m = 1 and nothing moves before start_step; at start_step the query
    encoder is copied in; after it, the schedule's m (here inverse_sqrt)."""
    xlco = contrast(encoder, layer=2, queue_size=4, start_step=2, key_warmup="copy", momentum_schedule="inverse_sqrt")
    start = _key_params(xlco)
    for step in (0, 1):
        assert not xlco.active_at(step)
        xlco.end_warm_up(encoder, step)
        _moved(encoder)
        assert xlco.follow(encoder, step) == 1.0
    assert all(torch.equal(a, b) for a, b in zip(_key_params(xlco), start))  # frozen
    assert xlco.active_at(2)
    xlco.end_warm_up(encoder, 2)
    query = dict(encoder.named_parameters())
    copied = [n for n, _ in xlco.key_encoder.named_parameters() if not n.startswith(("lm_head.", "pooler."))]
    assert all(torch.equal(k, query[n]) for k, n in zip(_key_params(xlco), copied))
    assert xlco.follow(encoder, 2) == pytest.approx(1 - 3**-0.51)


def test_with_key_warmup_momentum_the_key_encoder_follows_from_the_start(encoder):
    xlco = contrast(encoder, layer=2, queue_size=4, start_step=2, key_warmup="momentum", momentum=0.5)
    start = _key_params(xlco)
    xlco.end_warm_up(encoder, 2)  # nothing to copy: it followed all along
    _moved(encoder)
    assert xlco.follow(encoder, 0) == 0.5
    assert not any(torch.equal(a, b) for a, b in zip(_key_params(xlco), start))


def test_without_momentum_there_is_nothing_to_follow(encoder):
    xlco = contrast(encoder, layer=2, queue_size=4, use_momentum=False)
    assert xlco.follow(encoder, 0) is None


def test_prefill_enqueues_real_keys_until_the_queue_is_full(encoder):
    xlco = contrast(encoder, layer=1, queue_size=5)
    batches = [torch.full((2, 64), float(j)) for j in range(xlco.prefill_batches_needed(keys_per_batch=2))]
    xlco.prefill(batches)
    assert len(batches) == 3 and xlco.is_full
    assert xlco.queue[:, 0].tolist() == [2.0, 0.0, 1.0, 1.0, 2.0]  # the sixth key wrapped to the front


def test_a_layer_past_the_encoder_s_depth_is_refused(encoder):
    """The one check the config cannot make (it does not know the encoder); every other value
    is checked by ContrastConfig (tests/train/test_config.py)."""
    with pytest.raises(ValueError, match="layer=4: expected 1 … 3"):
        contrast(encoder, layer=4)


def test_the_options_pick_the_paper_s_contrast_or_its_translation_ranking_extension(encoder):
    assert type(contrast(encoder, layer=1)) is MomentumContrast
    for fields in ({"in_batch_negatives": True}, {"normalize": True, "margin": 0.2},
                   {"in_batch_negatives": True, "symmetric": True}):  # fmt: skip
        assert type(contrast(encoder, layer=1, **fields)) is TranslationRanking


@pytest.mark.parametrize("key_dropout", [True, False])
def test_key_dropout_runs_the_key_encoder_in_training_mode(encoder, views, key_dropout):
    """key_dropout=True (the authors' code): keys get the model's dropout, drawn from torch's
    RNG (so the same seed gives the same keys); False: eval mode, keys without dropout."""
    encoder.set_dropout(0.1)
    xlco = contrast(encoder, layer=2, queue_size=16, key_dropout=key_dropout)
    torch.manual_seed(1)
    a = xlco.encode_keys(*views)
    b = xlco.encode_keys(*views)
    torch.manual_seed(1)
    assert torch.equal(xlco.encode_keys(*views), a)  # seeded: reproducible either way
    assert xlco.key_encoder.training == key_dropout
    assert torch.equal(a, b) != key_dropout


# --- the translation-ranking family: margin, symmetric, in-step keys -------------------------


def _plain_ranking_loss_sum(q, k, queue, temperature, margin, symmetric):
    """The loss written out pair by pair: q_i ranks k_i among every key of the batch and the
    queue, k_i ranks q_i among every query of the batch (symmetric), the margin taken off each
    positive score, the two directions averaged."""
    total = 0.0
    for i in range(q.shape[0]):
        others = [j for j in range(q.shape[0]) if j != i]
        scores = torch.stack([q[i] @ k[i] - margin, *(q[i] @ k[j] for j in others), *(q[i] @ n for n in queue)])
        forward = torch.logsumexp(scores / temperature, 0) - scores[0] / temperature
        if not symmetric:
            total = total + forward
            continue
        scores = torch.stack([k[i] @ q[i] - margin, *(k[i] @ q[j] for j in others)])
        reverse = torch.logsumexp(scores / temperature, 0) - scores[0] / temperature
        total = total + 0.5 * (forward + reverse)
    return total


def _unit_vectors(n, seed, d=64):
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(n, d, generator=g), dim=-1)


@pytest.mark.parametrize("symmetric, margin", [(False, 0.3), (True, 0.0), (True, 0.3)])
def test_margin_and_symmetric_terms_match_a_plain_reference(encoder, symmetric, margin):
    xlco = contrast(encoder, layer=1, queue_size=3, temperature=0.05, normalize=True,
                            in_batch_negatives=True, symmetric=symmetric, margin=margin)  # fmt: skip
    xlco.queue.copy_(_unit_vectors(3, seed=1))
    q, k = _unit_vectors(5, seed=2).requires_grad_(), _unit_vectors(5, seed=3)
    ours = xlco.batch_contrast(q, k).loss_sum()
    (ours_grad,) = torch.autograd.grad(ours, q)
    expected = _plain_ranking_loss_sum(q, k, xlco.queue, 0.05, margin, symmetric)
    (expected_grad,) = torch.autograd.grad(expected, q)
    assert ours.item() == pytest.approx(expected.item(), rel=1e-5)
    torch.testing.assert_close(ours_grad, expected_grad, rtol=1e-5, atol=1e-5)


def test_the_margin_lowers_the_loss_s_positive_not_the_accuracy_s(encoder):
    xlco = contrast(encoder, layer=1, queue_size=1, temperature=0.5, normalize=True, margin=0.3)
    xlco.queue.zero_()
    q, k = torch.zeros(1, 64), torch.zeros(1, 64)
    q[0, 0], k[0, 0] = 1.0, 1.0
    out = xlco.batch_contrast(q, k)
    assert out.logits.tolist() == [[2.0, 0.0]]  # q·k / τ, q·queue / τ
    assert out.loss().item() == pytest.approx(-1.4 + math.log(math.exp(1.4) + 1.0), rel=1e-6)  # (1 − 0.3) / 0.5
    assert out.accuracy() == 1.0


@pytest.mark.parametrize("symmetric", [False, True])
def test_a_batch_cut_into_pieces_against_its_step_keys_is_the_whole_batch(encoder, symmetric):
    """In-step keys: each piece's queries meet every key of the step; summed over the pieces,
    loss and gradient are the whole batch's, however the pieces are cut and ordered."""
    xlco = contrast(encoder, layer=1, queue_size=4, temperature=0.1, normalize=True,
                            in_batch_negatives=True, symmetric=symmetric, margin=0.2 if symmetric else 0.0)  # fmt: skip
    xlco.queue.copy_(_unit_vectors(4, seed=1))
    q, k = _unit_vectors(6, seed=2).requires_grad_(), _unit_vectors(6, seed=3)
    whole = xlco.batch_contrast(q, k).loss_sum()
    (whole_grad,) = torch.autograd.grad(whole, q)

    slots = torch.tensor([3, 0, 5, 1, 4, 2])  # pair i's slot in the step: keys arrive in any order
    step = xlco.step_keys(k, slots, q.detach() if symmetric else None)
    assert step.slots.tolist() == list(range(6)) and torch.equal(step.keys, k[torch.argsort(slots)])
    total = 0.0
    for piece in ([0, 1], [2], [3, 4, 5]):
        out = xlco.step_contrast(q[piece], step, step.rows(slots[piece]))
        assert out.logits.shape == (len(piece), 1 + 6 + 4)  # positive, the step's keys, the queue
        total = total + out.loss_sum()
    (total_grad,) = torch.autograd.grad(total, q)
    assert total.item() == pytest.approx(whole.item(), rel=1e-5)
    torch.testing.assert_close(total_grad, whole_grad, rtol=1e-5, atol=1e-6)
