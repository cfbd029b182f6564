"""Tests for infoxlm.corpus.store_writer: a new store for one tokenizer, where a store may not
be made, and corpora written whole or not at all (with their largest ids in meta.json)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from infoxlm.corpus.store_writer import CorpusWriter, create_or_open_store, ensure_store
from infoxlm.data.corpus_lock import partial_corpus_dirs
from infoxlm.data.store import OFFSET_DTYPE, TOKEN_DTYPE, StoreError, TokenStore
from infoxlm.outputs import OutputError
from training_stores import write_mono, write_parallel

IDENTITY = {"fingerprint": "a" * 64, "file": "tokenizer.json", "backend": "tokenizers", "vocab_size": 100}
OTHER = {**IDENTITY, "fingerprint": "b" * 64}


@pytest.fixture
def store_root(tmp_path):
    root = tmp_path / "store"
    create_or_open_store(root, IDENTITY)
    return root


def test_tokenizer_identity_is_enforced(store_root):
    with pytest.raises(StoreError, match=r"written with tokenizer aaaaaaaaaaaa…, but this tokenizer is bbbbbbbbbbbb…"):
        create_or_open_store(store_root, OTHER)
    assert ensure_store(store_root, IDENTITY) is False
    assert ensure_store(store_root.parent / "new", IDENTITY) is True
    (store_root.parent / "file").write_text("x")
    with pytest.raises(OutputError, match="file: is a file; expected a directory"):
        ensure_store(store_root.parent / "file", IDENTITY)


def test_a_store_is_made_neither_inside_a_store_or_run_nor_beside_foreign_files(store_root, tmp_path):
    for inside in (store_root / "mono" / "x", store_root / "a" / "b"):
        with pytest.raises(OutputError, match=f"is inside the token store {store_root}"):
            ensure_store(inside, IDENTITY)
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text('{"optim": {}, "run": {}}')
    with pytest.raises(OutputError, match=f"is inside the run directory {run}"):
        ensure_store(run / "store", IDENTITY)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("x")
    with pytest.raises(OutputError, match="exists and is not empty, and infoxlm did not write it"):
        ensure_store(mine, IDENTITY)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"] and not (store_root / "mono").exists()
    # What a store's creation left before its store.json is completed, not refused.
    half = tmp_path / "half"
    (half / "tokenizer").mkdir(parents=True)
    assert ensure_store(half, IDENTITY) is True


def test_writer_leaves_nothing_when_the_block_fails(store_root):
    write_mono(store_root, "de", [[[1, 2]]])
    with pytest.raises(RuntimeError):
        with CorpusWriter(store_root, "mono", "de") as writer:
            writer.append("tokens.u32", np.arange(5), TOKEN_DTYPE)
            raise RuntimeError("interrupted")
    assert partial_corpus_dirs(store_root) == []
    assert TokenStore.open(store_root).mono["de"].text(0).tolist() == [1, 2]  # the old corpus is intact


def test_writer_records_the_largest_id_of_each_token_file_in_meta_json(store_root):
    write_mono(store_root, "de", [[[5, 6, 7], [99]], [[9, 10]]])
    write_parallel(store_root, "en-de", [([5, 6], [8]), ([7], [9, 10, 11])])
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
