"""The MLM head: logits only where asked, tied to the word embeddings."""

import torch

from infoxlm import Encoder, EncoderConfig


def test_masked_positions_give_the_same_logits_as_the_full_head(mixed_batch):
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120)).eval()
    ids, mask = mixed_batch
    masked = torch.zeros_like(mask, dtype=torch.bool)
    masked[0, 3], masked[1, 1], masked[1, 4], masked[2, 1] = True, True, True, True
    with torch.no_grad():
        hidden = enc(ids, mask).last_hidden_state
        full = enc.lm_head(hidden)  # (B, T, V)
        some = enc.lm_head(hidden, masked)  # (N, V)
    assert full.shape == (3, 10, 120)
    assert some.shape == (4, 120)
    assert torch.allclose(some, full[masked], atol=1e-6)


def test_decoder_is_tied_to_word_embeddings():
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=50))
    assert enc.lm_head.decoder.weight is enc.embeddings.word_embeddings.weight
    names = [n for n, _ in enc.named_parameters()]
    assert "lm_head.decoder.weight" not in names  # counted once, as the embedding


def test_padded_vocabulary_gives_the_same_loss_and_gradients(mixed_batch):
    """Padding V = 120 to a multiple of 64 (in the product only): extra columns are −inf,
    and the loss and every gradient are those of the unpadded head."""
    from infoxlm.objectives.vocab_loss import plain_token_cross_entropy

    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.of_size("tiny", vocab_size=120))
    enc.set_dropout(0.0)
    ids, mask = mixed_batch
    masked = mask.bool() & (torch.rand(ids.shape) < 0.5)
    targets = ids[masked]

    def run(vocab_multiple: int):
        enc.zero_grad(set_to_none=True)
        logits = enc.lm_head(enc(ids, mask).last_hidden_state, masked, vocab_multiple=vocab_multiple)
        loss = plain_token_cross_entropy(logits, targets).sum()
        loss.backward()
        return logits.detach(), loss.detach(), {n: p.grad.clone() for n, p in enc.named_parameters() if p.grad is not None}

    plain_logits, plain_loss, plain_grads = run(1)
    padded_logits, padded_loss, padded_grads = run(64)
    assert padded_logits.shape == (targets.numel(), 128)
    assert torch.equal(padded_logits[:, 120:], torch.full((targets.numel(), 8), float("-inf")))
    assert torch.allclose(padded_logits[:, :120], plain_logits, atol=1e-5)
    assert torch.equal(padded_logits.argmax(1), plain_logits.argmax(1))
    assert torch.allclose(padded_loss, plain_loss, rtol=1e-5)
    assert plain_grads.keys() == padded_grads.keys()
    for name, grad in plain_grads.items():
        assert padded_grads[name].shape == grad.shape  # the parameters keep V
        assert torch.allclose(padded_grads[name], grad, atol=1e-6), name
    assert enc.lm_head(enc(ids, mask).last_hidden_state, masked, vocab_multiple=8).shape[1] == 120  # 120 = 15 × 8
