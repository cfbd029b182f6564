"""Tests for infoxlm.data.store: layout, atomic corpora, leftovers, damage detection."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from infoxlm.data.store import (
    OFFSET_DTYPE,
    PARTIAL_PREFIX,
    TOKEN_DTYPE,
    mono_stream,
    CorpusWriter,
    StoreError,
    TokenStore,
    partial_corpus_dirs,
)
from infoxlm.outputs import OutputError

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
    TokenStore.create_or_open(root, IDENTITY)
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


def test_tokenizer_identity_is_enforced(store_root):
    with pytest.raises(StoreError, match=r"written with tokenizer aaaaaaaaaaaa…, but this tokenizer is bbbbbbbbbbbb…"):
        TokenStore.create_or_open(store_root, OTHER)
    assert TokenStore.ensure(store_root, IDENTITY) is False
    assert TokenStore.ensure(store_root.parent / "new", IDENTITY) is True
    with pytest.raises(StoreError, match="not a token store"):
        TokenStore.open(store_root.parent / "nowhere")
    (store_root.parent / "file").write_text("x")
    with pytest.raises(OutputError, match="file: is a file; expected a directory"):
        TokenStore.ensure(store_root.parent / "file", IDENTITY)


def test_a_store_is_made_neither_inside_a_store_or_run_nor_beside_foreign_files(store_root, tmp_path):
    for inside in (store_root / "mono" / "x", store_root / "a" / "b"):
        with pytest.raises(OutputError, match=f"is inside the token store {store_root}"):
            TokenStore.ensure(inside, IDENTITY)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text('{"optim": {}, "run": {}}')
    with pytest.raises(OutputError, match=f"is inside the run directory {run}"):
        TokenStore.ensure(run / "store", IDENTITY)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("x")
    with pytest.raises(OutputError, match="exists and is not empty, and infoxlm did not write it"):
        TokenStore.ensure(mine, IDENTITY)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and not (store_root / "mono").exists()
    # What a store's creation left before its store.json is completed, not refused.
    half = tmp_path / "half"
    (half / "tokenizer").mkdir(parents=True)
    assert TokenStore.ensure(half, IDENTITY) is True


def test_writer_leaves_nothing_when_the_block_fails(store_root):
    write_mono(store_root, lines=((1, 2),), docs=(0, 1))
    with pytest.raises(RuntimeError):
        with CorpusWriter(store_root, "mono", "de") as writer:
            writer.append("tokens.u32", np.arange(5), TOKEN_DTYPE)
            raise RuntimeError("interrupted")
    assert partial_corpus_dirs(store_root) == []
    assert TokenStore.open(store_root).mono["de"].text(0).tolist() == [1, 2]  # the old corpus is intact


def test_writer_records_the_largest_id_of_each_token_file_in_meta_json(store_root):
    write_mono(store_root, lines=((5, 6, 7), (99,), (9, 10)))
    write_pair(store_root, src=((5, 6), (7,)), tgt=((8,), (9, 10, 11)))
    with CorpusWriter(store_root.parent / "loose", "parallel", "en-fr") as writer:  # not a whole corpus
        for values in ([3, 4], [], [12, 1]):  # the max over every append
            writer.append("src.tokens.u32", np.asarray(values), TOKEN_DTYPE)
        writer.append("tgt.tokens.u32", np.zeros(0), TOKEN_DTYPE)  # an empty file: no id
        writer.append("src.lines.i64", np.asarray([0, 2**40]), OFFSET_DTYPE)  # offsets are not ids
        meta = {"counts": {}}
        path = writer.commit(meta)
    store = TokenStore.open(store_root)
    assert store.mono["de"].meta["max_token_id"] == {"tokens.u32": 99}
    assert store.parallel["en-de"].meta["max_token_id"] == {"src.tokens.u32": 7, "tgt.tokens.u32": 11}
    recorded = json.loads((path / "meta.json").read_text())["max_token_id"]
    assert recorded == {"src.tokens.u32": 12, "tgt.tokens.u32": None} == meta["max_token_id"]  # the caller's too


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda c: (c / "tokens.u32").write_bytes((c / "tokens.u32").read_bytes()[:-4]), "offsets do not cover"),
        (lambda c: (c / "tokens.u32").write_bytes((c / "tokens.u32").read_bytes()[:-1]), "not a whole number"),
        (lambda c: (c / "lines.i64").unlink(), r"lines\.i64: missing"),
        (lambda c: (c / "meta.json").unlink(), r"meta\.json: missing"),
        (lambda c: (c / "meta.json").write_text("{"), "not valid JSON"),
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
