"""Tests for infoxlm.data.examples: MMLM blocks, TLM pairs and XLCO views from a token store."""

from __future__ import annotations

import numpy as np
import pytest
from training_stores import random_documents, write_mono, write_parallel, write_store

from infoxlm.data.examples import ExampleBuilder, fair_truncation, pack_whole_lines
from infoxlm.data.keyed_random import KeyedRandom
from infoxlm.data.schedule import BlockPlan, MixupPlan, PairPlan, plan_mixup
from infoxlm.data.store import StoreError, TokenStore

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
    docs["de"].insert(4, [])  # an empty document adds nothing, not even a closing </s>
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


def _lines_of_stream(documents) -> list[list[int]]:
    """The stream's lines as the store lays them out: ids, </s>, and one more at a document's end."""
    out = []
    for doc in documents:
        for k, line in enumerate(doc):
            out.append(line + [2] + ([2] if k == len(doc) - 1 else []))
    return out


def _greedy_blocks(lines: list[list[int]], capacity: int) -> list[list[int]]:
    """Whole lines while they fit (the authors' layout). A line no block can hold is cut to fill
    the current block; its rest begins the next, which takes the lines after it and, being begun
    inside a line, is filled by cutting the next line while it holds less than half; so is a
    block that begins right after such a line."""
    blocks, current, inside_a_line, previous = [], [], False, []
    for line in lines:
        if len(current) + len(line) <= capacity:
            current += line
        elif len(line) <= capacity and not (inside_a_line and 2 * len(current) < capacity):
            blocks.append(current)
            current, inside_a_line = list(line), len(previous) > capacity
        else:
            rest = current + line
            while len(rest) > capacity:
                blocks.append(rest[:capacity])
                rest = rest[capacity:]
            current, inside_a_line = rest, True
        previous = line
    return blocks + ([current] if current else [])


@pytest.mark.parametrize("block_size", [3, 4, 7, 16, 512])
def test_mmlm_blocks_hold_whole_lines_each_ending_with_eos(mono_store, block_size):
    store, docs = mono_store
    builder = ExampleBuilder(store, block_size=block_size)
    for i, language in enumerate(builder.languages):
        expected = _greedy_blocks(_lines_of_stream(docs[language]), block_size - 1)
        mono = builder.mono[i]
        assert mono.num_blocks == len(expected)
        blocks = np.arange(mono.num_blocks)[::-1].copy()  # any order
        built = builder.mmlm(BlockPlan(blocks, np.full(len(blocks), i), blocks))
        for row, k in enumerate(blocks):
            assert built[row].tolist() == [0] + expected[k]
            assert len(built[row]) <= block_size


def test_mmlm_block_marks_every_line_and_document_end(mono_store):
    store, docs = mono_store
    builder = ExampleBuilder(store, block_size=10_000)
    block = builder.mmlm(BlockPlan(np.array([0]), np.array([0]), np.array([0])))[0].tolist()
    lines = sum(len(d) for d in docs["de"])
    documents = sum(1 for d in docs["de"] if d)
    assert block.count(2) == lines + documents  # </s> after each line, one more closing each document
    assert block[0] == 0 and block[-2:] == [2, 2] and 0 not in block[1:]
    assert block[1:] == [t for line in _lines_of_stream(docs["de"]) for t in line]


def test_pack_whole_lines_matches_a_plain_greedy_loop_and_chunks_agree():
    rng = np.random.default_rng(5)
    lengths = rng.integers(1, 40, 3000)
    lengths[rng.integers(0, 3000, 20)] = 200  # lines longer than a block
    ends = np.concatenate([[0], np.cumsum(lengths)])
    lines = [[0] * int(n) for n in lengths]
    expected = np.cumsum([0] + [len(b) for b in _greedy_blocks(lines, 64)])
    np.testing.assert_array_equal(pack_whole_lines(ends, 64), expected)
    np.testing.assert_array_equal(pack_whole_lines(ends, 64, chunk=7), expected)


def _whole_line_blocks(lengths, capacity: int) -> list[int]:
    """The authors' layout (fairseq's `complete`): each block's length in whole lines."""
    blocks, current = [], 0
    for n in lengths:
        if current + n > capacity:
            blocks.append(current)
            current = 0
        current += n
    return blocks + [current]


@pytest.mark.parametrize("capacity", [5, 64, 511])
def test_lines_that_fit_a_block_pack_exactly_as_whole_lines(capacity):
    rng = np.random.default_rng(capacity)
    lengths = rng.integers(1, capacity + 1, 5000)  # lines as long as a block, none longer
    ends = np.concatenate([[0], np.cumsum(lengths)])
    expected = np.cumsum([0] + _whole_line_blocks(lengths.tolist(), capacity))
    np.testing.assert_array_equal(pack_whole_lines(ends, capacity), expected)


@pytest.mark.parametrize("seed", range(4))
def test_long_lines_fill_blocks_and_their_rest_packs_with_the_lines_after(seed):
    """Lines beyond a block (513 with their </s>, as prepare's 512-token lines are) among short
    ones: the plain loop and the chunked search agree, and every block begun inside a line, or
    cut, holds at least half of a block."""
    rng = np.random.default_rng(seed)
    capacity = 511
    lengths = rng.choice([513, 514, 2, 40, 300, 510, 1500], size=3000, p=[0.3, 0.1, 0.1, 0.2, 0.1, 0.1, 0.1])
    ends = np.concatenate([[0], np.cumsum(lengths)])
    lines = [[0] * int(n) for n in lengths]
    starts = pack_whole_lines(ends, capacity)
    np.testing.assert_array_equal(starts, np.cumsum([0] + [len(b) for b in _greedy_blocks(lines, capacity)]))
    np.testing.assert_array_equal(pack_whole_lines(ends, capacity, chunk=7), starts)
    sizes = np.diff(starts)
    assert sizes.max() <= capacity and sizes.sum() == ends[-1]
    boundary = np.isin(starts, ends)
    cut_or_begun_inside = ~boundary[:-1] | ~boundary[1:]
    assert (sizes[:-1][cut_or_begun_inside[:-1]] * 2 >= capacity).all()
    line_before = np.searchsorted(ends, starts[:-1]) - 1  # of a block that begins at a boundary
    after_a_long_line = boundary[:-1] & (line_before >= 0) & (lengths[np.maximum(line_before, 0)] > capacity)
    assert after_a_long_line.any() and (sizes[:-1][after_a_long_line[:-1]] * 2 >= capacity).all()


def test_no_block_of_long_line_text_is_under_half_but_a_languages_last(tmp_path):
    """Long paragraphs as prepare stores them (512-token lines, 513 with </s>): before, 31.9 %
    of the blocks of such a corpus held at most 8 tokens; a 510-token last line of a document
    made a lone `<s> </s>` block."""
    rng = np.random.default_rng(0)
    root = write_store(tmp_path / "store")
    documents = []
    for _ in range(40):
        paragraphs = [rng.integers(4, 999, int(n)).tolist() for n in rng.integers(600, 2001, rng.integers(1, 5))]
        # each paragraph split as prepare splits it, into lines of at most 512 tokens
        documents.append([p[k : k + 512] for p in paragraphs for k in range(0, len(p), 512)])
    documents.append([rng.integers(4, 999, 510).tolist()])  # 512 with its two </s>
    documents.append([rng.integers(4, 999, 30).tolist()])
    write_mono(root, "de", documents)
    mono = ExampleBuilder(TokenStore.open(root), block_size=512).mono[0]
    lengths = mono.lengths(np.arange(mono.num_blocks)) + 1  # with the block's <s>
    assert lengths.max() <= 512 and (lengths[:-1] >= 256).all(), np.sort(lengths)[:5]


def test_no_block_begins_under_half_at_the_last_piece_of_a_split_line(tmp_path):
    """Input lines of 500-1,500 words, as prepare stores them: 512-token lines and a shorter last
    piece. Where the next line (a paragraph under 512 tokens) did not fit after that piece, the
    piece was a block alone: 2.0 % of such a corpus's blocks held 108-195 tokens."""
    rng = np.random.default_rng(0)
    root = write_store(tmp_path / "store")
    paragraphs = [rng.integers(4, 999, int(n)).tolist() for n in rng.integers(300, 1500, 120)]
    write_mono(root, "de", [[p[k : k + 512] for p in paragraphs for k in range(0, len(p), 512)]])
    mono = ExampleBuilder(TokenStore.open(root), block_size=512).mono[0]
    lengths = mono.lengths(np.arange(mono.num_blocks)) + 1  # with the block's <s>
    assert lengths.max() <= 512 and (lengths[:-1] >= 256).all(), np.sort(lengths)[:5]


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


def test_a_store_with_an_id_outside_the_vocabulary_is_refused_when_opened_for_training(tmp_path):
    """A damaged or foreign tokens.u32 would crash the embedding lookup at some later step."""
    root = write_store(tmp_path / "store", vocab_size=50)
    write_mono(root, "de", [[[5, 6, 49]]])
    write_parallel(root, "en-de", [([5], [49])])
    ExampleBuilder(TokenStore.open(root))  # the largest id, 49, is inside
    write_parallel(root, "en-fr", [([5, 7], [6, 50])])
    with pytest.raises(StoreError, match=r"en-fr/tgt\.tokens\.u32: token id 50 at position 1 is outside the "
                       r"vocabulary \(size 50\); the corpus is damaged"):  # fmt: skip
        ExampleBuilder(TokenStore.open(root))


def test_a_batch_that_gathers_an_id_outside_the_vocabulary_is_refused_naming_the_file_and_position(tmp_path):
    """A tokens file changed after it was written: its meta.json record, read at open, no longer holds."""
    root = write_store(tmp_path / "store", vocab_size=50)
    write_mono(root, "de", [[[5, 6, 7]], [[8, 9]]])  # stream 5 6 7 </s> </s> 8 9 </s> </s>
    write_parallel(root, "en-de", [([5], [6]), ([7, 8], [9, 10])])
    for path, position, value in (("mono/de/tokens.u32", 6, 50), ("parallel/en-de/tgt.tokens.u32", 2, 77)):
        ids = np.fromfile(root / path, dtype="<u4")
        ids[position] = value
        ids.tofile(root / path)
    builder = ExampleBuilder(TokenStore.open(root), block_size=6)  # the records (9, 10) are inside
    one = np.array([0])
    assert builder.mmlm(BlockPlan(one, np.array([0]), np.array([0])))[0].tolist() == [0, 5, 6, 7, 2, 2]
    with pytest.raises(StoreError, match=r"de/tokens\.u32: token id 50 at position 6 is outside the vocabulary "
                       r"\(size 50\); the corpus is damaged$"):  # fmt: skip
        builder.mmlm(BlockPlan(np.arange(2), np.array([0, 0]), np.array([0, 1])))
    tgt = r"en-de/tgt\.tokens\.u32: token id 77 at position 2 is outside the vocabulary \(size 50\)"
    assert builder.tlm(PairPlan(one, np.array([0]), np.array([0]), np.array([False])))[0].tolist() == [0, 5, 2, 6, 2]
    with pytest.raises(StoreError, match=tgt):
        builder.tlm(PairPlan(one, np.array([0]), np.array([1]), np.array([True])))
    pair = PairPlan(one, np.array([0]), np.array([1]), np.array([False]))
    with pytest.raises(StoreError, match=tgt):
        builder.xlco(MixupPlan(pair, None, None, None))
