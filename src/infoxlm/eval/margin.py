"""Margin-scored k-nearest neighbours between two sets of sentence vectors, as LASER mines bitexts.

Cosine k-NN both ways (source → target "forward", target → source "backward"); each sentence's
mean similarity to its k neighbours in the other set; a candidate pair (x, y) scored by
``margin(cos(x, y), (fwd_mean[x] + bwd_mean[y]) / 2)`` (Artetxe & Schwenk 2019, LASER's
``mine_bitexts.py``), and the pairs chosen by one of LASER's ``--retrieval`` strategies.
BUCC, xsim and mining all start from :func:`margin_pairs` (or :func:`neighbourhood` and
:func:`candidate_scores` below it).

Memory is bounded by a ``chunk × n`` block of similarities, never ``n × n``. faiss (the
``faiss`` extra) does the search when it is installed and the vectors are on the CPU; the torch
search is the reference path (``backend="torch"``) and returns the same neighbours. k larger than
the other set is clamped to its size, as LASER does, so every sentence has a full neighbourhood.
Exact ties between similarities (duplicate sentences) are broken in an unspecified order:
deduplicate first with :func:`unique_texts`, as LASER's ``--unify`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

try:  # optional: a faster exact inner-product search on the CPU
    import faiss
except ImportError:
    faiss = None

MARGINS = ("ratio", "distance", "absolute")
STRATEGIES = ("max", "fwd", "bwd", "intersect")
BACKENDS = ("auto", "torch", "faiss")
# Told the fraction of the search done, in (0, 1], after each block of rows (a progress bar).
Progress = Callable[[float], None]


@dataclass(frozen=True)
class MarginOptions:
    """How pairs are found: neighbourhood size, margin, strategy, similarity block rows, search backend."""

    k: int = 4
    margin: str = "ratio"
    strategy: str = "max"
    chunk: int = 4096
    backend: str = "auto"

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")
        if self.chunk < 1:
            raise ValueError(f"chunk must be at least 1, got {self.chunk}")
        for name, value, allowed in (("margin", self.margin, MARGINS), ("strategy", self.strategy, STRATEGIES),
                                     ("backend", self.backend, BACKENDS)):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        if self.backend == "faiss" and faiss is None:
            raise ValueError("backend 'faiss' needs the faiss package (pip install faiss-cpu); use 'torch' or 'auto'")


@dataclass(frozen=True)
class Neighbours:
    """Each query's k most cosine-similar keys, best first."""

    sims: torch.Tensor  # (n_queries, k) cosines, descending along each row
    ids: torch.Tensor  # (n_queries, k) int64 row indices into the keys

    @property
    def mean(self) -> torch.Tensor:
        """(n_queries,) mean cosine of each query's neighbourhood: the margin's denominator term."""
        return self.sims.mean(dim=1)


@dataclass(frozen=True)
class MinedPairs:
    """Chosen pairs: row ``src[i]`` of the source set with row ``trg[i]`` of the target set."""

    src: np.ndarray  # (m,) int64
    trg: np.ndarray  # (m,) int64
    score: np.ndarray  # (m,) float32 margin scores

    def __len__(self) -> int:
        return len(self.src)


def unique_texts(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Distinct texts in first-seen order, and for each input text its row among them.

    Embed ``unique`` once and mine on those rows; ``index[i]`` maps input line i back to its row.

    >>> unique_texts(["a", "b", "a"])
    (['a', 'b'], array([0, 1, 0]))
    """
    rows: dict[str, int] = {}
    index = np.fromiter((rows.setdefault(text, len(rows)) for text in texts), dtype=np.int64, count=len(texts))
    return list(rows), index


def unit_rows(x: np.ndarray | torch.Tensor) -> torch.Tensor:
    """L2-normalised float32 rows, on the tensor's device (numpy arrays go to the CPU): (n, d) → (n, d)."""
    x = torch.as_tensor(x).float()
    if x.dim() != 2 or len(x) == 0 or x.shape[1] == 0:
        raise ValueError(f"a non-empty (n, d) matrix of sentence vectors expected, got shape {tuple(x.shape)}")
    return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)


def _use_faiss(backend: str, keys: torch.Tensor) -> bool:
    return backend == "faiss" or (backend == "auto" and faiss is not None and keys.device.type == "cpu")


def _report(progress: Progress | None, done: int, total: int) -> None:
    if progress is not None:
        progress(done / total)


def _knn_torch(queries: torch.Tensor, keys: torch.Tensor, k: int, chunk: int, progress: Progress | None = None) -> Neighbours:
    sims, ids = [], []
    for start in range(0, len(queries), chunk):
        block = queries[start : start + chunk] @ keys.T  # (chunk, n_keys): the only large temporary
        top = block.topk(k, dim=1)
        sims.append(top.values)
        ids.append(top.indices)
        _report(progress, start + len(block), len(queries))
        del block  # before the next product, so that two blocks are never held at once
    return Neighbours(torch.cat(sims), torch.cat(ids))


def _knn_faiss(queries: torch.Tensor, keys: torch.Tensor, k: int, chunk: int, progress: Progress | None = None) -> Neighbours:
    index = faiss.IndexFlatIP(keys.shape[1])  # exact inner product = cosine on unit rows
    index.add(np.ascontiguousarray(keys.cpu().numpy()))
    sims, ids = [], []
    for start in range(0, len(queries), chunk):
        values, indices = index.search(np.ascontiguousarray(queries[start : start + chunk].cpu().numpy()), k)
        sims.append(torch.from_numpy(values))
        ids.append(torch.from_numpy(indices).long())
        _report(progress, start + len(values), len(queries))
    return Neighbours(torch.cat(sims).to(queries.device), torch.cat(ids).to(queries.device))


def cosine_knn(queries: torch.Tensor, keys: torch.Tensor, k: int, chunk: int = 4096, backend: str = "auto",
               progress: Progress | None = None) -> Neighbours:
    """The k nearest keys of each query by cosine, for unit rows (n_q, d), (n_k, d) → (n_q, k)."""
    if queries.shape[1] != keys.shape[1]:
        raise ValueError(f"vectors of one width expected, got {queries.shape[1]} and {keys.shape[1]}")
    if not 1 <= k <= len(keys):
        raise ValueError(f"k must be between 1 and the {len(keys)} keys, got {k}")
    search = _knn_faiss if _use_faiss(backend, keys) else _knn_torch
    return search(queries, keys, k, chunk, progress)


def _merge_best(best: tuple[torch.Tensor, torch.Tensor] | None, sims: torch.Tensor, ids: torch.Tensor,
                k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Running top-k per row: the best so far (n, <=k) joined with new candidates (n, c)."""
    if best is not None:
        sims, ids = torch.cat([best[0], sims], dim=1), torch.cat([best[1], ids], dim=1)
    top = sims.topk(min(k, sims.shape[1]), dim=1)
    return top.values, ids.gather(1, top.indices)


def _knn_both_torch(src: torch.Tensor, trg: torch.Tensor, k_fwd: int, k_bwd: int,
                    chunk: int, progress: Progress | None = None) -> tuple[Neighbours, Neighbours]:
    """Both directions from one pass over the similarities: each (chunk, n_trg) block gives its
    rows' forward neighbours and candidates for every target's backward ones, so the n²·d
    product is paid once, not twice."""
    fwd_sims, fwd_ids, bwd = [], [], None
    for start in range(0, len(src), chunk):
        block = src[start : start + chunk] @ trg.T  # (chunk, n_trg): the only large temporary
        rows = block.topk(k_fwd, dim=1)
        fwd_sims.append(rows.values)
        fwd_ids.append(rows.indices)
        columns = block.topk(min(k_bwd, len(block)), dim=0)  # (<=k_bwd, n_trg)
        bwd = _merge_best(bwd, columns.values.T, columns.indices.T + start, k_bwd)
        _report(progress, start + len(block), len(src))
        del block  # before the next product, so that two blocks are never held at once
    return Neighbours(torch.cat(fwd_sims), torch.cat(fwd_ids)), Neighbours(*bwd)


def neighbourhood(src: torch.Tensor, trg: torch.Tensor, options: MarginOptions,
                  progress: Progress | None = None) -> tuple[Neighbours, Neighbours]:
    """Forward (source → target) and backward (target → source) neighbours of unit rows.

    k is clamped to the size of the set searched, as LASER's ``min(n, k)``. ``progress`` is
    told the fraction of the search done after each block.
    """
    k_fwd, k_bwd = min(options.k, len(trg)), min(options.k, len(src))
    if not _use_faiss(options.backend, trg):
        return _knn_both_torch(src, trg, k_fwd, k_bwd, options.chunk, progress)
    # Two searches, each half of the work: the bar's first half is the forward one.
    n = len(src) + len(trg)
    fwd = cosine_knn(src, trg, k_fwd, options.chunk, options.backend,
                     None if progress is None else lambda f: progress(f * len(src) / n))
    bwd = cosine_knn(trg, src, k_bwd, options.chunk, options.backend,
                     None if progress is None else lambda f: progress((len(src) + f * len(trg)) / n))
    return fwd, bwd


def margin(cos: torch.Tensor, mean: torch.Tensor, kind: str) -> torch.Tensor:
    """A candidate's score from its cosine and its pair's average neighbourhood similarity."""
    if kind == "ratio":
        return cos / mean
    if kind == "distance":
        return cos - mean
    if kind == "absolute":
        return cos
    raise ValueError(f"margin must be one of {', '.join(MARGINS)}, got {kind!r}")


def candidate_scores(fwd: Neighbours, bwd: Neighbours, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Margin of every candidate: (n_src, k_fwd) for forward ones, (n_trg, k_bwd) for backward ones.

    The denominator of (x, y) is ``(fwd_mean[x] + bwd_mean[y]) / 2`` whichever side found the pair,
    so a pair found both ways gets one score.
    """
    fwd_mean, bwd_mean = fwd.mean, bwd.mean  # (n_src,), (n_trg,)
    fwd_scores = margin(fwd.sims, (fwd_mean[:, None] + bwd_mean[fwd.ids]) / 2, kind)
    bwd_scores = margin(bwd.sims, (bwd_mean[:, None] + fwd_mean[bwd.ids]) / 2, kind)
    return fwd_scores, bwd_scores


def _best(neighbours: Neighbours, scores: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Each query's best candidate by margin and its score: (n,), (n,)."""
    column = scores.argmax(dim=1, keepdim=True)  # (n, 1)
    best = neighbours.ids.gather(1, column).squeeze(1)
    return best.cpu().numpy(), scores.gather(1, column).squeeze(1).float().cpu().numpy()


def _greedy_one_to_one(src: np.ndarray, trg: np.ndarray, score: np.ndarray) -> MinedPairs:
    """Best score first, keep a pair only when neither side is taken yet (LASER's ``--retrieval max``)."""
    order = np.argsort(-score, kind="stable")  # ties: forward candidates, then lower rows, first
    src_taken, trg_taken, kept = set(), set(), []
    for i in order.tolist():
        s, t = int(src[i]), int(trg[i])
        if s not in src_taken and t not in trg_taken:
            src_taken.add(s)
            trg_taken.add(t)
            kept.append(i)
    kept = np.asarray(kept, dtype=np.int64)
    return MinedPairs(src[kept], trg[kept], score[kept])


def select_pairs(fwd: Neighbours, bwd: Neighbours, fwd_scores: torch.Tensor, bwd_scores: torch.Tensor,
                 strategy: str) -> MinedPairs:
    """Pairs by strategy: ``fwd`` each source's best target (in source order), ``bwd`` each target's
    best source (in target order), ``intersect`` the forward pairs the backward side agrees on,
    ``max`` both pools merged one-to-one from the best score down (in score order)."""
    fwd_best, fwd_score = _best(fwd, fwd_scores)  # (n_src,) target rows and scores
    bwd_best, bwd_score = _best(bwd, bwd_scores)  # (n_trg,) source rows and scores
    src_rows, trg_rows = np.arange(len(fwd_best)), np.arange(len(bwd_best))
    if strategy == "fwd":
        return MinedPairs(src_rows, fwd_best, fwd_score)
    if strategy == "bwd":
        return MinedPairs(bwd_best, trg_rows, bwd_score)
    if strategy == "intersect":
        agreed = bwd_best[fwd_best] == src_rows
        return MinedPairs(src_rows[agreed], fwd_best[agreed], fwd_score[agreed])
    if strategy == "max":
        return _greedy_one_to_one(np.concatenate([src_rows, bwd_best]), np.concatenate([fwd_best, trg_rows]),
                                  np.concatenate([fwd_score, bwd_score]))
    raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, got {strategy!r}")


def margin_pairs(src: np.ndarray | torch.Tensor, trg: np.ndarray | torch.Tensor,
                 options: MarginOptions = MarginOptions()) -> MinedPairs:
    """Mine pairs between source vectors (n_src, d) and target vectors (n_trg, d).

    >>> rng = np.random.default_rng(0)
    >>> en = rng.standard_normal((5, 8))
    >>> pairs = margin_pairs(en + 0.01 * rng.standard_normal((5, 8)), en)
    >>> pairs.src.tolist() == pairs.trg.tolist() and len(pairs) == 5
    True
    """
    src, trg = unit_rows(src), unit_rows(trg)
    if src.shape[1] != trg.shape[1]:
        raise ValueError(f"source and target vectors of one width expected, got {src.shape[1]} and {trg.shape[1]}")
    if src.device != trg.device:
        raise ValueError(f"source and target on one device expected, got {src.device} and {trg.device}")
    fwd, bwd = neighbourhood(src, trg, options)
    fwd_scores, bwd_scores = candidate_scores(fwd, bwd, options.margin)
    return select_pairs(fwd, bwd, fwd_scores, bwd_scores, options.strategy)
