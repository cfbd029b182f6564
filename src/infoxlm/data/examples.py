"""Token sequences of the three objectives, built from a token store for a step's plans.

MMLM block: a language's corpus is one stream in which every line ends with ``</s>`` and a
document's last line with ``</s> </s>`` (the store's layout, that of XLM-R's fairseq data).
Blocks hold whole lines, as fairseq's ``complete`` mode packs them for RoBERTa and XLM-R and
as the authors' InfoXLM data does: a block takes lines while they fit ``block_size - 1``
tokens and is ``<s> line </s> line </s> …``, so it is at most ``block_size`` long and ends
with a line's ``</s>``. A line longer than a block can hold (prepare's 512-token lines are 513
with their ``</s>``, one more than a 512-token block holds after its ``<s>``) is cut, as
fairseq's ``none`` mode cuts its stream: to fill the block it comes to, then into full blocks,
its rest packed with the lines after it; a block begun inside such a line, or where one ends,
is not closed under half full, so long-line text gives no stub blocks (the authors truncate
such lines at 509 tokens instead). prepare splits a long input line into 512-token lines and a
shorter last one, so a block that begins at that last one begins inside the input line. Only
there does a block begin or end inside a line. The blocks are found once per corpus, greedily
from the stream's start (:func:`pack_whole_lines`).

TLM: ``<s> a </s> b </s>`` with (a, b) = (src, tgt) or (tgt, src) as the plan says, both
truncated to ``tlm_max_length`` by :func:`fair_truncation` (cut the longer side first; each
side keeps its beginning).

XLCO: a query view and a key view per example. Without mixup ``<s> c1 </s>`` and
``<s> c2 </s>`` (c1 the query-language side), each cut to ``xlco_max_length``. With mixup
(paper §3.3) the partner pair (d1, d2) is split over the views: query ``<s> c1 </s> dq </s>``
and key ``<s> c2 </s> dk </s>``, where {dq, dk} = {d1, d2} and the order inside each view is
random — e.g. ⟨c1 d1, c2 d2⟩ or ⟨c1 d2, d1 c2⟩ — each view cut to ``xlco_max_length`` fairly.
The default 512 (the model's longest input) is about what the authors' code allows a view
(about 511 tokens); 256 leaves each of a view's two sentences ≥ 126 tokens, far above typical
parallel-corpus sentences, at half the cost (``data.xlco_max_length``).

Example:
    >>> builder = ExampleBuilder(TokenStore.open("data/store"), block_size=512)   # doctest: +SKIP
    >>> rng = KeyedRandom(seed=0, objective=1, step=0, slots=np.arange(8))          # doctest: +SKIP
    >>> blocks = builder.mmlm(plan_blocks(rng, probs, builder.num_blocks))         # doctest: +SKIP
"""

from __future__ import annotations

import bisect

import numpy as np

from .ragged import Ragged, frame, gather_runs, scatter_runs
from .schedule import BlockPlan, MixupPlan, PairPlan
from ..special_tokens import BOS_ID, EOS_ID
from .store import MonoCorpus, ParallelCorpus, TokenStore
from .token_ids import check_recorded_token_ids, gather_checked

__all__ = ["ExampleBuilder", "MonoBlocks", "fair_truncation", "pack_whole_lines", "BOS_ID", "EOS_ID"]



def fair_truncation(first: np.ndarray, second: np.ndarray, budget: int) -> tuple[np.ndarray, np.ndarray]:
    """New lengths of two parts so that they fit ``budget`` tokens together, cutting the longer first.

    If both fit they are kept; otherwise the shorter part keeps min(its length, budget // 2)
    and the longer one gets the rest (on a tie the first part gets the odd token).
    first, second (n,) int lengths → two (n,) int64 arrays.
    """
    first, second = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    short = np.minimum(first, second)
    new_short = np.minimum(short, budget // 2)
    new_long = budget - new_short  # ≤ the longer length whenever the pair does not fit
    fits = first + second <= budget
    first_is_long = first >= second
    new_first = np.where(fits, first, np.where(first_is_long, new_long, new_short))
    new_second = np.where(fits, second, np.where(first_is_long, new_short, new_long))
    return new_first, new_second


def pack_whole_lines(line_ends: np.ndarray, capacity: int, chunk: int = 1 << 20) -> np.ndarray:
    """Greedy blocks of whole lines: (B + 1,) int64 stream offsets, block b = [starts[b], starts[b+1]).

    line_ends (N + 1,) int offsets of the line boundaries (0 first, the stream's length
    last), possibly memory-mapped; every line holds at least one token. A block takes the
    following lines while they fit ``capacity`` tokens. A line longer than ``capacity`` (one no
    block can hold) is cut to fill the block it comes to, then into full blocks, and its rest
    begins the next block, which goes on taking the lines after it; such a block, begun inside
    a line, is not closed while it holds less than half of ``capacity``: the line that does not
    fit is cut to fill it too. So is a block that begins where a line longer than ``capacity``
    ends (the rest of that line filled the block before): such a line is mostly a piece of an
    input line prepare split, and the lines after it its other pieces. So a block under half
    full is a stream's last, or one of whole lines that begins after a line no longer than a
    block; where no line is longer than a block, blocks are exactly those of whole lines.
    One binary search per block over a chunk of boundaries read as a Python list (about 10
    million lines a second on one core).

    >>> pack_whole_lines(np.array([0, 3, 6, 8, 20, 22]), capacity=8).tolist()
    [0, 8, 16, 22]
    """
    if capacity < 1:
        raise ValueError(f"capacity must be >= 1, got {capacity}")
    num_lines = len(line_ends) - 1
    found: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
    start, line = 0, 1  # the next block's first stream offset, and the first boundary after it
    while line <= num_lines:
        # Boundaries line - 2 … line + chunk (line - 2: the length of the line before a block
        # that begins at a boundary), plus the `capacity` lines a block from there can reach at
        # most (every line holds a token) and the one after.
        low = max(line - 2, 0)
        offsets = np.asarray(line_ends[low : min(num_lines, line + chunk + capacity + 1) + 1], dtype=np.int64).tolist()
        ends: list[int] = []
        first = j = line - low  # offsets[j]: the first boundary after `start`
        while j - first < chunk and low + j <= num_lines:
            if offsets[j] - start > capacity:  # the rest of this line overflows: full blocks of it
                ends.extend(range(start + capacity, offsets[j], capacity))
                start = ends[-1]
                continue
            # The last boundary the block reaches: lines j … reach fit it whole.
            reach = bisect.bisect_right(offsets, start + capacity, j, min(len(offsets), j + capacity + 1)) - 1
            end = offsets[reach]
            if low + reach < num_lines:
                overflows = offsets[reach + 1] - end > capacity
                begun_inside_a_line = offsets[j - 1] != start
                after_a_long_line = j >= 2 and offsets[j - 1] - offsets[j - 2] > capacity
                if overflows or ((begun_inside_a_line or after_a_long_line) and 2 * (end - start) < capacity):
                    end = start + capacity  # the next line is cut to fill this block
            ends.append(end)
            start, j = end, reach + 1
        line = low + j
        found.append(np.asarray(ends, dtype=np.int64))
    return np.concatenate(found)


class MonoBlocks:
    """One language's monolingual stream cut into blocks of whole lines (see the module doc).

    With ``vocab_size``, :meth:`fill` refuses a block holding an id at or past it (StoreError).
    """

    def __init__(self, corpus: MonoCorpus, block_size: int, vocab_size: int | None = None):
        if block_size < 3:
            raise ValueError(f"block_size must be >= 3 (<s>, a token, </s>), got {block_size}")
        self.language = corpus.language
        self.tokens = corpus.lines.tokens  # (T,) uint32 stream, memory-mapped
        self.tokens_path = corpus.lines.tokens_path
        self.vocab_size = vocab_size
        self.num_tokens = corpus.num_tokens  # text tokens, the separators not counted
        # (B + 1,) stream offsets; the block's <s> takes one of its block_size positions.
        self.block_starts = pack_whole_lines(corpus.lines.offsets, block_size - 1)
        self.num_blocks = len(self.block_starts) - 1

    def lengths(self, blocks: np.ndarray) -> np.ndarray:
        """(m,) stream tokens in each block (its ``<s>`` not counted)."""
        return self.block_starts[blocks + 1] - self.block_starts[blocks]

    def fill(self, out: Ragged, rows: np.ndarray, blocks: np.ndarray, shift: int = 0) -> None:
        """Write block ``blocks[k]`` into sequence ``rows[k]`` of ``out``, from its position ``shift``."""
        lengths = self.lengths(blocks)  # (m,)
        starts = self.block_starts[blocks]  # (m,)
        if self.vocab_size is None:
            tokens = gather_runs(self.tokens, starts, lengths)  # (Σ lengths,)
        else:
            tokens = gather_checked(self.tokens, starts, lengths, self.vocab_size, self.tokens_path)
        scatter_runs(out.values, out.offsets[rows] + shift, tokens, lengths)


class _ParallelSides:
    """A parallel corpus's two sides as plain arrays: side 0 = src, side 1 = tgt."""

    def __init__(self, corpus: ParallelCorpus):
        self.pair = corpus.pair
        self.tokens = (np.asarray(corpus.src.tokens), np.asarray(corpus.tgt.tokens))
        self.paths = (corpus.src.tokens_path, corpus.tgt.tokens_path)
        self.offsets = (np.asarray(corpus.src.offsets), np.asarray(corpus.tgt.offsets))
        self.num_pairs = corpus.num_pairs
        self.num_tokens = corpus.num_tokens


class ExampleBuilder:
    """Builds the token sequences (``Ragged``, before masking) that a step's plans describe.

    Args:
        store: the token store.
        block_size: MMLM block length, ``<s>`` and ``</s>`` included.
        tlm_max_length: longest TLM sequence, its three specials included.
        xlco_max_length: longest XLCO view, its specials included.

    Raises StoreError (naming the file, the id and the vocabulary size) for a store whose
    meta.json records an id outside the vocabulary, and from a batch that gathers one.
    """

    def __init__(self, store: TokenStore, block_size: int = 512, tlm_max_length: int = 512, xlco_max_length: int = 512):
        if block_size < 3:
            raise ValueError(f"block_size must be >= 3 (<s>, a token, </s>), got {block_size}")
        if tlm_max_length < 5:
            raise ValueError(f"tlm_max_length must be >= 5 (<s> a </s> b </s>), got {tlm_max_length}")
        if xlco_max_length < 5:
            raise ValueError(f"xlco_max_length must be >= 5 (<s> c </s> d </s>), got {xlco_max_length}")
        # An id at or past the vocabulary would crash the embedding lookup at some later step
        # (IndexError). The largest ids meta.json records refuse a foreign store now, reading
        # no token; the ids of every batch are checked as they are gathered (a changed file).
        check_recorded_token_ids(store)
        self.vocab_size = store.vocab_size
        self.languages = list(store.mono)
        self.mono = [MonoBlocks(store.mono[lang], block_size, self.vocab_size) for lang in self.languages]
        self.pairs = list(store.parallel)
        self.parallel = [_ParallelSides(store.parallel[p]) for p in self.pairs]
        self.tlm_max_length = tlm_max_length
        self.xlco_max_length = xlco_max_length

    # Sizes the schedule samples from -------------------------------------------------
    @property
    def mono_tokens(self) -> np.ndarray:
        return np.array([m.num_tokens for m in self.mono], dtype=np.int64)

    @property
    def num_blocks(self) -> np.ndarray:
        return np.array([m.num_blocks for m in self.mono], dtype=np.int64)

    @property
    def parallel_tokens(self) -> np.ndarray:
        return np.array([p.num_tokens for p in self.parallel], dtype=np.int64)

    @property
    def num_pairs(self) -> np.ndarray:
        return np.array([p.num_pairs for p in self.parallel], dtype=np.int64)

    # The three objectives -------------------------------------------------------------
    def mmlm(self, plan: BlockPlan) -> Ragged:
        """``<s> line </s> line </s> …`` (one block) for every slot of the plan."""
        lengths = np.zeros(len(plan.slots), dtype=np.int64)
        groups = [(m, np.flatnonzero(plan.language == i)) for i, m in enumerate(self.mono)]
        for m, rows in groups:
            lengths[rows] = m.lengths(plan.block[rows])
        blocks = Ragged.from_lengths(lengths + 1)
        for m, rows in groups:
            m.fill(blocks, rows, plan.block[rows], shift=1)  # the block's lines after its <s>
        blocks.values[blocks.offsets[:-1]] = BOS_ID
        return blocks

    def tlm(self, plan: PairPlan) -> Ragged:
        """``<s> a </s> b </s>``: a = src unless ``plan.swap``; truncated to ``tlm_max_length``."""
        first, second = plan.parts(plan.swap)
        return self._framed(first, second, self.tlm_max_length)

    def xlco(self, plan: MixupPlan) -> tuple[Ragged, Ragged]:
        """(query views, key views), one of each per slot, row i of both from slot i."""
        pair = plan.pair
        n = len(pair.slots)
        c1, c2 = pair.parts(pair.swap)  # swap: the tgt language is the query
        if plan.partner is None:
            # Both views in one pass: rows 0…n-1 are the query views, n…2n-1 the keys.
            views = self._framed(_concat(c1, c2), None, self.xlco_max_length)
        else:
            partner = plan.partner
            dq, dk = partner.parts(partner.swap)
            q_first, q_second = _ordered(c1, dq, plan.partner_first_in_query)
            k_first, k_second = _ordered(c2, dk, plan.partner_first_in_key)
            views = self._framed(_concat(q_first, k_first), _concat(q_second, k_second), self.xlco_max_length)
        return views.slice(0, n), views.slice(n, 2 * n)

    # Helpers: a "part" is (corpus (m,), pair index (m,), side (m,)): one sentence per row.
    def _framed(self, first, second, max_length: int) -> Ragged:
        """``<s> first </s>`` or ``<s> first </s> second </s>`` per row, cut to ``max_length``."""
        m = len(first[0])
        parts = first if second is None else _concat(first, second)  # part-major, (k·m,)
        starts, lengths = self._spans(parts)
        if second is None:
            lengths = np.minimum(lengths, max_length - 2)
        else:
            lengths = np.concatenate(fair_truncation(lengths[:m], lengths[m:], max_length - 3))
        return frame(self._gather(parts, starts, lengths), 1 if second is None else 2, BOS_ID, EOS_ID)

    def _spans(self, part) -> tuple[np.ndarray, np.ndarray]:
        """(m,) start and (m,) length of each row's sentence in its side's token array."""
        corpus, index, side = part
        starts = np.zeros(len(index), dtype=np.int64)
        lengths = np.zeros(len(index), dtype=np.int64)
        for (c, s), rows in self._groups(corpus, side):
            offsets = self.parallel[c].offsets[s]
            starts[rows] = offsets[index[rows]]
            lengths[rows] = offsets[index[rows] + 1] - starts[rows]
        return starts, lengths

    def _gather(self, part, starts: np.ndarray, lengths: np.ndarray) -> Ragged:
        """The (truncated) sentences: row i = tokens[starts[i] : starts[i] + lengths[i]]."""
        corpus, _, side = part
        out = Ragged.from_lengths(lengths)
        for (c, s), rows in self._groups(corpus, side):
            sides = self.parallel[c]
            ids = gather_checked(sides.tokens[s], starts[rows], lengths[rows], self.vocab_size, sides.paths[s])
            scatter_runs(out.values, out.offsets[rows], ids, lengths[rows])
        return out

    def _groups(self, corpus: np.ndarray, side: np.ndarray):
        """((corpus, side), rows) for every corpus side that some row reads."""
        key = corpus * 2 + side  # (m,)
        order = np.argsort(key, kind="stable")
        present, first = np.unique(key[order], return_index=True)
        for k, rows in zip(present.tolist(), np.split(order, first[1:])):
            yield divmod(k, 2), rows


def _concat(a, b):
    """Row-wise concatenation of two parts (corpus, index, side)."""
    return tuple(np.concatenate([x, y]) for x, y in zip(a, b))


def _ordered(own, partner, partner_first: np.ndarray):
    """(first part, second part) of a mixup view: the partner's text first where ``partner_first``."""
    first = tuple(np.where(partner_first, p, o) for o, p in zip(own, partner))
    second = tuple(np.where(partner_first, o, p) for o, p in zip(own, partner))
    return first, second
