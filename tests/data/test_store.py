"""Tests for infoxlm.data.store: the layout read back, damage found on opening and by verify.

The stores are written with :mod:`infoxlm.corpus.store_writer`, whose own tests are in
tests/corpus/test_store_writer.py."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from infoxlm.corpus.store_writer import CorpusWriter, create_or_open_store, mono_stream
from infoxlm.data.store import OFFSET_DTYPE, TOKEN_DTYPE, StoreError, TokenStore

IDENTITY = {"fingerprint": "a" * 64, "file": "tokenizer.json", "backend": "tokenizers", "vocab_size": 100}
OTHER = {**IDENTITY, "fingerprint": "b" * 64}


def write_mono(root, language="de", lines=((5, 6, 7), (8,), (9, 10)), docs=(0, 2, 3)):
    """A small monolingual corpus written the way prepare writes one."""
    ends_document = [i + 1 in docs[1:] for i in range(len(lines))]
    stream, line_ends = mono_stream([list(line) for line in lines], ends_document)
    with CorpusWriter(root, "mono", language) as writer:
        writer.append("tokens.u32", stream, TOKEN_DTYPE)
        writer.append("lines.i64", np.concatenate([[0], line_ends]), OFFSET_DTYPE)
        writer.append("docs.i64", np.asarray(docs), OFFSET_DTYPE)
        counts = {"lines": len(lines), "documents": len(docs) - 1, "tokens": sum(map(len, lines))}
        return writer.commit({"counts": counts, "skipped": {}})


def write_pair(root, pair="en-de", src=((5, 6), (7,)), tgt=((8,), (9, 10, 11))):
    with CorpusWriter(root, "parallel", pair) as writer:
        for side, lines in (("src", src), ("tgt", tgt)):
            writer.append(f"{side}.tokens.u32", np.concatenate([np.asarray(x) for x in lines]), TOKEN_DTYPE)
            writer.append(f"{side}.lines.i64", np.concatenate([[0], np.cumsum([len(x) for x in lines])]), OFFSET_DTYPE)
        tokens = sum(map(len, src)) + sum(map(len, tgt))
        return writer.commit({"counts": {"pairs": len(src), "tokens": tokens}})


@pytest.fixture
def store_root(tmp_path):
    root = tmp_path / "store"
    create_or_open_store(root, IDENTITY)
    return root


def test_round_trip(store_root):
    write_mono(store_root)
    write_pair(store_root)
    store = TokenStore.open(store_root)
    corpus = store.mono["de"]
    assert (corpus.num_lines, corpus.num_documents, corpus.num_tokens) == (3, 2, 6)
    # Every line ends with </s>; a document's last line with one more.
    assert corpus.lines[0].tolist() == [5, 6, 7, 2] and corpus.lines[1].tolist() == [8, 2, 2]
    assert corpus.lines[2].tolist() == [9, 10, 2, 2] and corpus.text(2).tolist() == [9, 10]
    assert [corpus.text(i).tolist() for i in range(3)] == [[5, 6, 7], [8], [9, 10]]
    assert corpus.lines.tokens.dtype == np.dtype("<u4") and corpus.lines.lengths().tolist() == [4, 3, 4]
    pair = store.parallel["en-de"]
    assert pair.languages == ("en", "de") and pair.num_pairs == 2 and pair.num_tokens == 7
    assert [x.tolist() for x in pair[1]] == [[7], [9, 10, 11]]
    store.verify(check_token_ids=True)


def test_a_missing_store_is_refused_with_the_command_that_makes_one(tmp_path):
    with pytest.raises(StoreError, match="not a token store .*create one with `infoxlm prepare`"):
        TokenStore.open(tmp_path / "nowhere")



@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda c: (c / "tokens.u32").write_bytes((c / "tokens.u32").read_bytes()[:-4]), "offsets do not cover"),
        (lambda c: (c / "tokens.u32").write_bytes((c / "tokens.u32").read_bytes()[:-1]), "not a whole number"),
        (lambda c: (c / "lines.i64").unlink(), r"lines\.i64: missing"),
        (lambda c: (c / "meta.json").unlink(), r"meta\.json: missing"),
        (lambda c: (c / "meta.json").write_text("{"), r"meta\.json:1:2: invalid JSON \(Expecting property name"),
    ],
)
def test_damage_found_when_opening(store_root, damage, message):
    damage(write_mono(store_root))
    with pytest.raises(StoreError, match=message):
        TokenStore.open(store_root)


def test_damage_found_by_verify(store_root):
    corpus = write_mono(store_root)
    offsets = np.fromfile(corpus / "lines.i64", dtype=OFFSET_DTYPE)
    offsets[1], offsets[2] = offsets[2], offsets[1]  # still ends at the token count
    offsets.tofile(corpus / "lines.i64")
    with pytest.raises(StoreError, match=r"lines\.i64: offsets decrease at entry 2 \(\d+ → \d+\); the corpus is damaged"):
        TokenStore.open(store_root).verify()

    corpus = write_mono(store_root, "ru", docs=(0, 2, 5))  # a document past the last line
    with pytest.raises(StoreError, match=r"docs\.i64: offsets do not span"):
        TokenStore.open(store_root).mono["ru"].verify()

    corpus = write_mono(store_root, "it", lines=((5, 6), (7,)), docs=(0, 2))
    tokens = np.fromfile(corpus / "tokens.u32", dtype=TOKEN_DTYPE)
    tokens[2] = 9  # line 0 no longer ends with </s>
    tokens.tofile(corpus / "tokens.u32")
    with pytest.raises(StoreError, match=r"it/tokens\.u32: line 0 does not end with </s>"):
        TokenStore.open(store_root).mono["it"].verify()

    corpus = write_mono(store_root, "fr", lines=((5, 200),), docs=(0, 1))  # id 200 >= vocab 100
    fr = TokenStore.open(store_root).mono["fr"]
    fr.verify()  # offsets alone are fine
    with pytest.raises(StoreError, match=r"token id 200 at position 1 is outside the vocabulary \(size 100\)"):
        fr.verify(vocab_size=100)

    pair = write_pair(store_root)
    (pair / "meta.json").write_text('{"counts": {"pairs": 5}}')
    with pytest.raises(StoreError, match="records 5 pairs but the files hold 2"):
        TokenStore.open(store_root).parallel["en-de"].verify()


def test_a_store_of_format_version_1_is_refused_with_the_way_to_rebuild_it(store_root):
    info = json.loads((store_root / "store.json").read_text())
    (store_root / "store.json").write_text(json.dumps({**info, "version": 1}))
    with pytest.raises(StoreError, match=r"format version 1 \(monolingual lines without </s>\).*`infoxlm prepare`"):
        TokenStore.open(store_root)
