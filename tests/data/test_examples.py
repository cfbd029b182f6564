"""Tests for infoxlm.data.examples: MMLM blocks, TLM pairs and XLCO views from a token store."""

from __future__ import annotations

import numpy as np
import pytest
from training_stores import random_documents, write_mono, write_parallel, write_store

from infoxlm.data.examples import ExampleBuilder, fair_truncation
from infoxlm.data.keyed_random import KeyedRandom
from infoxlm.data.schedule import BlockPlan, PairPlan, plan_mixup
from infoxlm.data.store import TokenStore

PAIRS_PER_CORPUS = 40


def _code(corpus: int, index: int, side: int) -> int:
    """A token id that names the sentence it belongs to."""
    return 4 + (corpus * PAIRS_PER_CORPUS + index) * 2 + side


def _decode(token: int) -> tuple[int, int, int]:
    sentence, side = divmod(token - 4, 2)
    return (*divmod(sentence, PAIRS_PER_CORPUS), side)


@pytest.fixture(scope="module")
def mono_store(tmp_path_factory):
    root = write_store(tmp_path_factory.mktemp("mono"))
    rng = np.random.default_rng(1)
    docs = {"de": random_documents(rng, 30, max_len=9), "en": random_documents(rng, 5, max_len=4)}
    docs["de"].insert(4, [])  # an empty document adds nothing, not even a separator
    docs["empty"] = []
    for language, documents in docs.items():
        write_mono(root, language, documents)
    return TokenStore.open(root), docs


@pytest.fixture(scope="module")
def pair_store(tmp_path_factory):
    """Three parallel corpora whose every sentence is one repeated, decodable token."""
    root = write_store(tmp_path_factory.mktemp("pairs"), vocab_size=4 + 3 * PAIRS_PER_CORPUS * 2 + 1)
    rng = np.random.default_rng(2)
    for c, pair in enumerate(["en-de", "en-fr", "en-sw"]):
        sentences = [
            ([_code(c, i, 0)] * int(rng.integers(1, 12)), [_code(c, i, 1)] * int(rng.integers(1, 12)))
            for i in range(PAIRS_PER_CORPUS)
        ]
        write_parallel(root, pair, sentences)
    return TokenStore.open(root)


def _stream(documents) -> list[int]:
    stream: list[int] = []
    for doc in (d for d in documents if any(d)):
        if stream:
            stream.append(2)
        stream += [t for line in doc for t in line]
    return stream


@pytest.mark.parametrize("block_size", [3, 4, 7, 16, 512])
def test_mmlm_blocks_are_consecutive_windows_of_the_stream(mono_store, block_size):
    store, docs = mono_store
    builder = ExampleBuilder(store, block_size=block_size)
    for i, language in enumerate(builder.languages):
        stream, window = _stream(docs[language]), block_size - 2
        mono = builder.mono[i]
        assert mono.stream_length == len(stream)
        assert mono.num_blocks == -(-len(stream) // window)
        blocks = np.arange(mono.num_blocks)[::-1].copy()  # any order
        plan = BlockPlan(blocks, np.full(len(blocks), i), blocks)
        built = builder.mmlm(plan)
        for row, k in enumerate(blocks):
            expected = [0] + stream[k * window : (k + 1) * window] + [2]
            assert built[row].tolist() == expected
            if k < mono.num_blocks - 1:
                assert len(built[row]) == block_size  # only the stream's tail is shorter


def test_mmlm_separators_mark_document_boundaries(mono_store):
    store, docs = mono_store
    builder = ExampleBuilder(store, block_size=10_000)
    block = builder.mmlm(BlockPlan(np.array([0]), np.array([0]), np.array([0])))[0]
    non_empty = [d for d in docs["de"] if d]
    assert np.count_nonzero(block == 2) == len(non_empty)  # between documents + the final </s>
    assert block[0] == 0 and block[-1] == 2 and 0 not in block[1:].tolist()


def test_empty_language_has_no_blocks(mono_store):
    store, _ = mono_store
    builder = ExampleBuilder(store)
    assert builder.mono[builder.languages.index("empty")].num_blocks == 0


@pytest.mark.parametrize(
    "first,second,budget,expected",
    [(3, 4, 10, (3, 4)), (2, 20, 10, (2, 8)), (20, 2, 10, (8, 2)), (9, 9, 10, (5, 5)), (9, 8, 9, (5, 4)), (0, 30, 5, (0, 5))],
)
def test_fair_truncation(first, second, budget, expected):
    a, b = fair_truncation(np.array([first]), np.array([second]), budget)
    assert (int(a[0]), int(b[0])) == expected


def test_tlm_layout_direction_and_truncation(pair_store):
    builder = ExampleBuilder(pair_store, tlm_max_length=12)
    n = 3 * PAIRS_PER_CORPUS
    corpus, index = np.repeat(np.arange(3), PAIRS_PER_CORPUS), np.tile(np.arange(PAIRS_PER_CORPUS), 3)
    swap = np.arange(n) % 2 == 1
    built = builder.tlm(PairPlan(np.arange(n), corpus, index, swap))
    for row in range(n):
        seq = built[row].tolist()
        assert seq[0] == 0 and seq[-1] == 2 and seq.count(2) == 2 and len(seq) <= 12
        cut = seq.index(2)
        a, b = seq[1:cut], seq[cut + 1 : -1]
        first_side = int(swap[row])
        assert set(a) == {_code(corpus[row], index[row], first_side)}
        assert set(b) == {_code(corpus[row], index[row], 1 - first_side)}
        src, tgt = pair_store.parallel[builder.pairs[corpus[row]]][index[row]]
        la, lb = (len(tgt), len(src)) if swap[row] else (len(src), len(tgt))
        assert (len(a), len(b)) == tuple(int(x[0]) for x in fair_truncation(np.array([la]), np.array([lb]), 9))


def _parts(view: list[int]) -> list[tuple[int, int, int]]:
    """The (corpus, index, side) of each part of ``<s> p </s> [q </s>]``."""
    assert view[0] == 0 and view[-1] == 2
    body, parts, current = view[1:], [], []
    for t in body:
        if t == 2:
            assert len(set(current)) == 1
            parts.append(_decode(current[0]))
            current = []
        else:
            current.append(t)
    return parts


def test_xlco_mixup_views_hold_one_side_of_each_pair(pair_store):
    builder = ExampleBuilder(pair_store, xlco_max_length=256)
    probabilities = np.array([0.5, 0.3, 0.2])
    plan = plan_mixup(KeyedRandom(0, 3, 0, np.arange(400)), probabilities, builder.num_pairs, mixup=True)
    query, key = builder.xlco(plan)
    orders = set()
    for row in range(400):
        q, k = _parts(query[row].tolist()), _parts(key[row].tolist())
        assert len(q) == len(k) == 2
        pair = (plan.pair.corpus[row], plan.pair.index[row])
        partner = (plan.partner.corpus[row], plan.partner.index[row])
        assert partner[0] != pair[0]  # another corpus
        for view in (q, k):
            assert sorted(p[:2] for p in view) == sorted([pair, partner])  # one part of each pair
        for who in (pair, partner):
            sides = {p[2] for p in q + k if p[:2] == who}
            assert sides == {0, 1}  # the two views split each pair's sides
        query_side = next(p[2] for p in q if p[:2] == pair)
        assert query_side == int(plan.pair.swap[row])
        orders.add((q[0][:2] == partner, k[0][:2] == partner))
    assert orders == {(False, False), (False, True), (True, False), (True, True)}


def test_xlco_plain_views(pair_store):
    builder = ExampleBuilder(pair_store)
    plan = plan_mixup(KeyedRandom(0, 3, 1, np.arange(50)), np.array([1.0, 1.0, 1.0]) / 3, builder.num_pairs, mixup=False)
    query, key = builder.xlco(plan)
    for row in range(50):
        (q,), (k,) = _parts(query[row].tolist()), _parts(key[row].tolist())
        assert q[:2] == k[:2] == (plan.pair.corpus[row], plan.pair.index[row])
        assert (q[2], k[2]) == (int(plan.pair.swap[row]), 1 - int(plan.pair.swap[row]))


def test_xlco_views_are_truncated(pair_store):
    builder = ExampleBuilder(pair_store, xlco_max_length=8)
    plan = plan_mixup(KeyedRandom(0, 3, 2, np.arange(200)), np.array([0.2, 0.3, 0.5]), builder.num_pairs, mixup=True)
    query, key = builder.xlco(plan)
    assert query.lengths.max() <= 8 and key.lengths.max() <= 8
    assert all(len(_parts(v.tolist())) == 2 for v in query)  # both parts keep >= 1 token


def test_bad_lengths(pair_store):
    with pytest.raises(ValueError, match="block_size"):
        ExampleBuilder(pair_store, block_size=2)
    with pytest.raises(ValueError, match="tlm_max_length"):
        ExampleBuilder(pair_store, tlm_max_length=4)
    with pytest.raises(ValueError, match="xlco_max_length"):
        ExampleBuilder(pair_store, xlco_max_length=4)
