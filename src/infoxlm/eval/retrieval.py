"""Bitext retrieval: for each sentence, is its translation the nearest neighbour?

Top-1 accuracy of cosine nearest-neighbour search in both directions, as XTREME scores
Tatoeba: xx→en searches the English side for each xx sentence, en→xx the other way.
"""

from __future__ import annotations

import numpy as np


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def nearest_neighbours(queries: np.ndarray, candidates: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Index of the most cosine-similar candidate for each query: (Nq, d), (Nc, d) → (Nq,)."""
    q, c = _unit_rows(queries.astype(np.float32)), _unit_rows(candidates.astype(np.float32))
    best = np.empty(len(q), dtype=np.int64)
    for start in range(0, len(q), chunk):  # bounded memory for large sets
        best[start : start + chunk] = (q[start : start + chunk] @ c.T).argmax(axis=1)
    return best


def retrieval_accuracy(xx: np.ndarray, en: np.ndarray) -> dict[str, float]:
    """Top-1 accuracy (percent) both ways for aligned embeddings: row i of xx translates row i of en."""
    if xx.shape != en.shape:
        raise ValueError(f"aligned embeddings expected, got shapes {xx.shape} and {en.shape}")
    gold = np.arange(len(xx))
    return {
        "xx2en": float(100.0 * (nearest_neighbours(xx, en) == gold).mean()),
        "en2xx": float(100.0 * (nearest_neighbours(en, xx) == gold).mean()),
    }
