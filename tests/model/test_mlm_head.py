"""The MLM head: logits only where asked, tied to the word embeddings."""

import torch

from infoxlm import Encoder, EncoderConfig


def test_masked_positions_give_the_same_logits_as_the_full_head(mixed_batch):
    torch.manual_seed(0)
    enc = Encoder(EncoderConfig.preset("tiny", vocab_size=120)).eval()
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
    enc = Encoder(EncoderConfig.preset("tiny", vocab_size=50))
    assert enc.lm_head.decoder.weight is enc.embeddings.word_embeddings.weight
    names = [n for n, _ in enc.named_parameters()]
    assert "lm_head.decoder.weight" not in names  # counted once, as the embedding
