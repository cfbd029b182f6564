"""Token sequences of the three objectives, built from a token store for a step's plans.

MMLM block: a language's documents form one stream, ``doc₀ </s> doc₁ </s> doc₂ …`` (lines
of a document joined directly, one ``</s>`` *between* documents as RoBERTa's
full-sentences packing does, so a block may cross a document boundary but the model sees
where it is). The stream is cut into consecutive windows of ``block_size - 2`` tokens and
block k is ``<s> window_k </s>``: every block is exactly ``block_size`` long except the
stream's last one. Finding a window is a binary search over the document starts, O(log D).

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

import numpy as np

from .ragged import Ragged, flat_ranges, frame, gather_runs, scatter_runs
from .schedule import BlockPlan, MixupPlan, PairPlan
from .store import MonoCorpus, ParallelCorpus, StoreError, TokenStore

__all__ = ["ExampleBuilder", "MonoBlocks", "fair_truncation", "BOS_ID", "EOS_ID"]

BOS_ID, EOS_ID = 0, 2


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


class MonoBlocks:
    """One language's monolingual corpus as a stream of documents cut into fixed-size blocks."""

    def __init__(self, corpus: MonoCorpus, block_size: int):
        if block_size < 3:
            raise ValueError(f"block_size must be >= 3 (<s>, a token, </s>), got {block_size}")
        self.language = corpus.language
        self.window = block_size - 2  # stream tokens per block, between <s> and </s>
        self.tokens = np.asarray(corpus.lines.tokens)  # (T,) uint32, still memory-mapped
        line_offsets = np.asarray(corpus.lines.offsets)  # (N + 1,)
        docs = np.asarray(corpus.doc_offsets, dtype=np.int64)  # (D + 1,) offsets into lines
        num_tokens = len(self.tokens)
        if len(docs) < 2 or docs[0] != 0 or docs[-1] != corpus.num_lines or np.any(np.diff(docs) < 0):
            if num_tokens:
                raise StoreError(
                    f"{corpus.path}/docs.i64: document offsets must rise from 0 to the {corpus.num_lines} lines; "
                    "the corpus is damaged, prepare it again"
                )
            docs = np.zeros(2, dtype=np.int64)
        doc_tokens = line_offsets[docs]  # (D + 1,) token offset of each document start
        starts = doc_tokens[:-1][np.diff(doc_tokens) > 0]  # empty documents add nothing
        # Stream position of document j's first token: its token offset plus the j
        # separators in front of it. (D',) int64, strictly increasing.
        self.doc_starts = starts + np.arange(len(starts), dtype=np.int64)
        self.stream_length = num_tokens + max(len(starts) - 1, 0)
        self.num_blocks = -(-self.stream_length // self.window)

    @property
    def num_tokens(self) -> int:
        return len(self.tokens)

    def lengths(self, blocks: np.ndarray) -> np.ndarray:
        """(m,) stream tokens in each block (``window`` except for the stream's last block)."""
        begin = blocks * self.window
        return np.minimum(begin + self.window, self.stream_length) - begin

    def fill(self, out: Ragged, rows: np.ndarray, blocks: np.ndarray, shift: int = 0) -> None:
        """Write block ``blocks[k]``'s window into sequence ``rows[k]`` of ``out``, from its position ``shift``."""
        if len(rows) == 0:
            return
        lengths = self.lengths(blocks)  # (m,)
        begin = blocks * self.window  # (m,) stream position of each window
        end = begin + lengths
        # Separators inside window [begin, end) sit just before the documents starting in
        # (begin, end]; the documents before begin contribute first_doc separators in front.
        first_doc = np.searchsorted(self.doc_starts, begin, side="right") - 1  # (m,)
        last_doc = np.searchsorted(self.doc_starts, end, side="right") - 1  # (m,)
        separators = last_doc - first_doc  # (m,)
        # Without its separators a window is one contiguous run of the token array.
        run = lengths - separators  # (m,)
        tokens = gather_runs(self.tokens, begin - first_doc, run)  # (Σ run,) int64
        # Insertion points: the k-th separator of window e, at window position q, goes
        # after q - k of the window's tokens.
        doc = flat_ranges(first_doc + 1, separators)  # (K,) documents that start inside a window
        window = np.repeat(np.arange(len(rows)), separators)  # (K,) their window
        k = np.arange(len(doc)) - np.repeat(np.cumsum(separators) - separators, separators)
        run_start = np.cumsum(run) - run  # (m,) where each window's tokens start in `tokens`
        where = run_start[window] + (self.doc_starts[doc] - 1 - begin[window]) - k
        values = np.insert(tokens, where, EOS_ID)  # (Σ lengths,)
        scatter_runs(out.values, out.offsets[rows] + shift, values, lengths)


class _ParallelSides:
    """A parallel corpus's two sides as plain arrays: side 0 = src, side 1 = tgt."""

    def __init__(self, corpus: ParallelCorpus):
        self.pair = corpus.pair
        self.tokens = (np.asarray(corpus.src.tokens), np.asarray(corpus.tgt.tokens))
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
    """

    def __init__(self, store: TokenStore, block_size: int = 512, tlm_max_length: int = 512, xlco_max_length: int = 512):
        if block_size < 3:
            raise ValueError(f"block_size must be >= 3 (<s>, a token, </s>), got {block_size}")
        if tlm_max_length < 5:
            raise ValueError(f"tlm_max_length must be >= 5 (<s> a </s> b </s>), got {tlm_max_length}")
        if xlco_max_length < 5:
            raise ValueError(f"xlco_max_length must be >= 5 (<s> c </s> d </s>), got {xlco_max_length}")
        self.languages = list(store.mono)
        self.mono = [MonoBlocks(store.mono[lang], block_size) for lang in self.languages]
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
        """``<s> window </s>`` for every slot of the plan."""
        lengths = np.zeros(len(plan.slots), dtype=np.int64)
        groups = [(m, np.flatnonzero(plan.language == i)) for i, m in enumerate(self.mono)]
        for m, rows in groups:
            lengths[rows] = m.lengths(plan.block[rows])
        blocks = Ragged.from_lengths(lengths + 2)
        for m, rows in groups:
            m.fill(blocks, rows, plan.block[rows], shift=1)  # the window between <s> and </s>
        blocks.values[blocks.offsets[:-1]] = BOS_ID
        blocks.values[blocks.offsets[1:] - 1] = EOS_ID
        return blocks

    def tlm(self, plan: PairPlan) -> Ragged:
        """``<s> a </s> b </s>``: a = src unless ``plan.swap``; truncated to ``tlm_max_length``."""
        swap = plan.swap.astype(np.int64)
        first = (plan.corpus, plan.index, swap)
        second = (plan.corpus, plan.index, 1 - swap)
        return self._framed(first, second, self.tlm_max_length)

    def xlco(self, plan: MixupPlan) -> tuple[Ragged, Ragged]:
        """(query views, key views), one of each per slot, row i of both from slot i."""
        pair = plan.pair
        n = len(pair.slots)
        query_side = pair.swap.astype(np.int64)  # 1: the tgt language is the query
        c1 = (pair.corpus, pair.index, query_side)
        c2 = (pair.corpus, pair.index, 1 - query_side)
        if plan.partner is None:
            # Both views in one pass: rows 0…n-1 are the query views, n…2n-1 the keys.
            views = self._framed(_concat(c1, c2), None, self.xlco_max_length)
        else:
            partner = plan.partner
            d_query_side = partner.swap.astype(np.int64)
            dq = (partner.corpus, partner.index, d_query_side)
            dk = (partner.corpus, partner.index, 1 - d_query_side)
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
            out.fill(self.parallel[c].tokens[s], rows, starts[rows])
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
