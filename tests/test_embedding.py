"""Sentence embeddings: order, pooling, layers, and agreement with transformers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from infoxlm import Encoder, Tokenizer, embed, embed_layers
from infoxlm.model.fast_paths import FastPaths

from conftest import TINY_TEXT

SENTENCES = [s for lines in TINY_TEXT.values() for s in lines] + ["Kurz.", "A much longer sentence than the others, with many words in it."]


@pytest.fixture(scope="module")
def loaded(tiny_model_dir):
    return Encoder.from_pretrained(tiny_model_dir), Tokenizer.from_pretrained(tiny_model_dir)


def test_rows_come_back_in_input_order_whatever_the_batching(tiny_model_dir):
    batched = embed(tiny_model_dir, SENTENCES, layer=2, batch_size=4)
    alone = np.stack([embed(tiny_model_dir, [s], layer=2, batch_size=1)[0] for s in SENTENCES])
    assert batched.dtype == np.float32 and batched.shape == (len(SENTENCES), 64)
    np.testing.assert_allclose(batched, alone, atol=1e-5)


def test_mean_pooling_covers_every_non_padding_token_specials_included(loaded):
    encoder, tokenizer = loaded
    ids = tokenizer.encode(SENTENCES[0])
    with torch.no_grad():
        hidden = encoder.eval()(torch.tensor([ids])).hidden_states[1][0]  # (T, d)
    got = embed_layers(encoder, tokenizer, SENTENCES[:1], [1])[1][0]
    np.testing.assert_allclose(got, hidden.mean(0).numpy(), atol=1e-6)
    cls = embed_layers(encoder, tokenizer, SENTENCES[:1], [1], pooling="cls")[1][0]
    np.testing.assert_allclose(cls, hidden[0].numpy(), atol=1e-6)


def test_several_layers_at_once_equal_one_layer_at_a_time(loaded, tiny_model_dir):
    encoder, tokenizer = loaded
    all_layers = embed_layers(encoder, tokenizer, SENTENCES, [0, 1, 2], batch_size=5)
    for layer in (0, 1, 2):
        np.testing.assert_allclose(all_layers[layer], embed(tiny_model_dir, SENTENCES, layer=layer), atol=1e-5)
    assert not np.allclose(all_layers[0], all_layers[2])
    # Default: the one rule's layer; this model records no contrast layer: the middle of 2.
    np.testing.assert_allclose(embed(tiny_model_dir, SENTENCES), all_layers[1], atol=1e-5)


def test_agrees_with_transformers_hidden_states(transformers, tiny_model_dir):
    model = transformers.XLMRobertaModel.from_pretrained(tiny_model_dir).eval()
    hf_tok = transformers.AutoTokenizer.from_pretrained(tiny_model_dir)
    batch = hf_tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch, output_hidden_states=True).hidden_states[1]
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
    np.testing.assert_allclose(embed(tiny_model_dir, SENTENCES, layer=1), expected, atol=1e-5)


def test_edge_cases_and_errors(loaded, tiny_model_dir):
    encoder, tokenizer = loaded
    assert embed(tiny_model_dir, [], layer=1).shape == (0, 64)
    with pytest.raises(ValueError, match="layer=3"):
        embed_layers(encoder, tokenizer, SENTENCES, [3])
    with pytest.raises(ValueError, match="pooling='max'"):
        embed_layers(encoder, tokenizer, SENTENCES, [1], pooling="max")
    encoder.train()  # embedding runs in eval mode and then restores the caller's mode
    embed_layers(encoder, tokenizer, SENTENCES[:2], [1])
    assert encoder.training
    encoder.eval()


def test_real_tokens_only_gives_the_padded_runs_vectors(loaded):
    """Loaded for embedding (``FastPaths.inference()``), the encoder runs position-wise parts on
    real tokens only; a batch with padding must pool the same vectors as the plain padded pass."""
    plain, tokenizer = loaded
    encoder = plain.with_fast_paths(FastPaths.inference())
    input_ids, attention_mask = tokenizer.pad([tokenizer.encode(s) for s in SENTENCES])
    assert not bool(attention_mask.all())  # the batch really has padding
    with torch.no_grad():
        hidden = plain.eval()(input_ids, attention_mask).hidden_states[2]
    mask = attention_mask.unsqueeze(-1).float()
    padded_run = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
    got = embed_layers(encoder, tokenizer, SENTENCES, [2], batch_size=len(SENTENCES))[2]
    np.testing.assert_allclose(got, padded_run, atol=1e-5)


# --- lines longer than can be embedded ------------------------------------------------------


def test_a_long_line_is_cut_before_it_is_tokenized_and_embeds_as_its_start(loaded, monkeypatch):
    encoder, tokenizer = loaded
    seen = []
    original = Tokenizer.encode_batch
    monkeypatch.setattr(Tokenizer, "encode_batch", lambda self, texts, **kw: seen.extend(texts) or original(self, texts, **kw))
    long = " ".join(SENTENCES) * 2000  # ~300k characters, far past 128 tokens
    start = long[: 64 * 128]  # what the bound keeps at max_length=128
    vectors = embed_layers(encoder, tokenizer, [long, start, SENTENCES[0]], [1, 2], max_length=128)
    assert max(map(len, seen)) == 64 * 128
    for layer in (1, 2):
        np.testing.assert_array_equal(vectors[layer][0], vectors[layer][1])
    # The cut lies past the tokens kept: the whole line, tokenized in full, gives the same ids.
    assert tokenizer.encode(long, max_length=128) == tokenizer.encode(start, max_length=128)


def test_read_sentences_cuts_long_lines_while_reading_and_counts_them(tmp_path, monkeypatch):
    import io
    import sys

    from infoxlm.embedding import read_sentences
    from infoxlm.errors import DataError

    text = "eins\n\n" + "zwei " * 20_000 + "\ndrei\r\n"
    path = tmp_path / "in.txt"
    path.write_text(text, encoding="utf-8")
    sentences, cut = read_sentences(path, max_length=16)
    assert sentences == ["eins", "", ("zwei " * 20_000)[: 64 * 16], "drei"] and cut == 1
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert read_sentences(None, max_length=16) == (sentences, 1)
    path.write_bytes(b"fine\nbroken \xff here\n")
    with pytest.raises(DataError, match=r"in\.txt:2: invalid UTF-8 at byte 8 \(0xff\)"):
        read_sentences(path)
