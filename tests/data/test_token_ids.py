"""Tests for infoxlm.data.token_ids: the recorded largest ids checked at open, batches checked as gathered."""

from __future__ import annotations

import json

import numpy as np
import pytest
from training_stores import write_mono, write_parallel, write_store

from infoxlm.data.store import TOKEN_DTYPE, StoreError, TokenStore
from infoxlm.data.token_ids import check_recorded_token_ids, gather_checked, recorded_max_id


def _damage(path, position: int, value: int) -> None:
    """Change one id of a tokens file after it was written (its meta.json record kept)."""
    ids = np.fromfile(path, dtype=TOKEN_DTYPE)
    ids[position] = value
    ids.tofile(path)


def _edit_meta(corpus, edit) -> None:
    meta = json.loads((corpus / "meta.json").read_text())
    edit(meta)
    (corpus / "meta.json").write_text(json.dumps(meta))


@pytest.fixture
def store(tmp_path):
    root = write_store(tmp_path / "store", vocab_size=50)
    write_mono(root, "de", [[[5, 6, 49]], [[7]]])
    write_parallel(root, "en-de", [([5], [49]), ([8, 9], [10])])
    return root


def test_a_recorded_largest_id_inside_the_vocabulary_is_trusted_without_reading_a_token(store):
    assert json.loads((store / "mono/de/meta.json").read_text())["max_token_id"] == {"tokens.u32": 49}
    check_recorded_token_ids(TokenStore.open(store))
    # A file changed after it was written is not read at open: its batches are checked instead.
    _damage(store / "mono/de/tokens.u32", 1, 50)
    check_recorded_token_ids(TokenStore.open(store))


def test_a_recorded_id_outside_the_vocabulary_is_refused_naming_its_file_and_position(store):
    write_parallel(store, "en-fr", [([5, 7], [6, 50])])  # a foreign tokenizer's id, recorded as written
    with pytest.raises(StoreError, match=r"en-fr/tgt\.tokens\.u32: token id 50 at position 1 is outside the "
                       r"vocabulary \(size 50\); the corpus is damaged$"):  # fmt: skip
        check_recorded_token_ids(TokenStore.open(store))


def test_a_corpus_written_before_the_record_existed_is_read_whole(store):
    corpus = store / "parallel/en-de"
    _edit_meta(corpus, lambda meta: meta.pop("max_token_id"))
    assert recorded_max_id(TokenStore.open(store).parallel["en-de"].meta, corpus / "src.tokens.u32") is None
    check_recorded_token_ids(TokenStore.open(store))
    _damage(corpus / "src.tokens.u32", 2, 77)
    with pytest.raises(StoreError, match=r"en-de/src\.tokens\.u32: token id 77 at position 2 is outside"):
        check_recorded_token_ids(TokenStore.open(store))


def test_a_record_outside_the_vocabulary_of_a_file_without_such_an_id_is_refused(store):
    _edit_meta(store / "mono/de", lambda meta: meta["max_token_id"].update({"tokens.u32": 60}))
    with pytest.raises(StoreError, match=r"de/meta\.json: records 60 as the largest id of tokens\.u32, which "
                       r"holds none >= 50; the corpus is damaged"):  # fmt: skip
        check_recorded_token_ids(TokenStore.open(store))


@pytest.mark.parametrize(
    "record, message",
    [
        (7, r"de/meta\.json: max_token_id is 7; expected \{tokens file: largest id or null\}"),
        ({"tokens.u32": "49"}, r"de/meta\.json: max_token_id\['tokens\.u32'\] is '49'; expected a token id"),
        ({"tokens.u32": -1}, r"max_token_id\['tokens\.u32'\] is -1; expected a token id \(an integer >= 0\) or null"),
        ({"tokens.u32": True}, r"max_token_id\['tokens\.u32'\] is True"),
    ],
)
def test_a_malformed_record_is_refused_naming_meta_json(store, record, message):
    _edit_meta(store / "mono/de", lambda meta: meta.update(max_token_id=record))
    with pytest.raises(StoreError, match=message):
        check_recorded_token_ids(TokenStore.open(store))


def test_an_empty_file_records_null(tmp_path):
    root = write_store(tmp_path / "store", vocab_size=50)
    write_mono(root, "de", [])
    meta = TokenStore.open(root).mono["de"].meta
    assert meta["max_token_id"] == {"tokens.u32": None}
    assert recorded_max_id(meta, root / "mono/de/tokens.u32") == -1
    check_recorded_token_ids(TokenStore.open(root))


def test_gather_checked_names_the_first_id_outside_by_its_position_in_the_file(tmp_path):
    tokens = np.arange(20, dtype=np.uint32)
    tokens[13] = 90
    starts, lengths = np.array([0, 11, 2]), np.array([3, 4, 2])  # run 1 covers 11…14
    assert gather_checked(tokens, starts[[0, 2]], lengths[[0, 2]], 50, tmp_path / "t.u32").tolist() == [0, 1, 2, 2, 3]
    with pytest.raises(StoreError, match=r"t\.u32: token id 90 at position 13 is outside the vocabulary \(size 50\)"):
        gather_checked(tokens, starts, lengths, 50, tmp_path / "t.u32")
    # Runs long enough for gather_runs to copy slice by slice: the position is found the same way.
    tokens = (np.arange(1000) % 40).astype(np.uint32)
    tokens[713] = 90
    with pytest.raises(StoreError, match="token id 90 at position 713 "):
        gather_checked(tokens, np.array([0, 600]), np.array([300, 300]), 50, tmp_path / "t.u32")
