"""A store's identity: equal for the same text prepared again, different for other data."""

from __future__ import annotations

import shutil

import pytest

from infoxlm.data.store import TokenStore
from infoxlm.errors import TokenizerError
from infoxlm.train.store_identity import corpus_changes, store_identity, tokenizer_change, tokenizer_file_fingerprints

from training_stores import write_mono, write_parallel, write_store


def _store(root, docs, pairs):
    write_store(root)
    write_mono(root, "de", docs)
    write_parallel(root, "en-de", pairs)
    return store_identity(TokenStore.open(root))


def test_same_text_same_identity_other_text_named(tmp_path):
    docs = [[[5, 6, 7], [8, 9]], [[10, 11, 12, 13]]]
    pairs = [([5, 6], [7, 8, 9]), ([10], [11, 12])]
    a = _store(tmp_path / "a", docs, pairs)
    assert _store(tmp_path / "b", docs, pairs) == a  # prepared again elsewhere: the same data
    other = _store(tmp_path / "c", [[[5, 6, 7], [8, 99]], [[10, 11, 12, 13]]], pairs)  # one token differs
    assert corpus_changes(a, other) == ["mono/de changed (other tokens, same counts)"]
    shutil.rmtree(tmp_path / "b" / "parallel")
    write_mono(tmp_path / "b", "fr", docs)
    assert corpus_changes(a, store_identity(TokenStore.open(tmp_path / "b"))) == ["added mono/fr", "removed parallel/en-de"]
    assert tokenizer_change(a, a) is None


def test_a_tokenizer_file_that_is_not_its_format_is_damaged_not_another_tokenizer(tmp_path):
    (tmp_path / "sentencepiece.bpe.model").write_bytes(b"\x00garbage")
    with pytest.raises(TokenizerError, match=r"sentencepiece.bpe.model: damaged: not a SentencePiece model \("):
        tokenizer_file_fingerprints(tmp_path)
    (tmp_path / "sentencepiece.bpe.model").unlink()
    (tmp_path / "tokenizer.json").write_text('{"model": {"vocab": [["<s>", 0.0]')
    with pytest.raises(TokenizerError, match=r"tokenizer.json:1:34: damaged: invalid JSON \(.*\); expected a complete tokenizer.json$"):
        tokenizer_file_fingerprints(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"not": "a tokenizer"}')  # JSON: another tokenizer file
    assert list(tokenizer_file_fingerprints(tmp_path)) == ["tokenizer.json"]
