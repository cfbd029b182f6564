"""LASER's mining written out plainly, for tests of `infoxlm mine` (eval/mining.py) to compare with."""

from __future__ import annotations

import numpy as np


def laser_mine_lines(x: np.ndarray, y: np.ndarray, src: list[str], trg: list[str], threshold: float, k: int = 4) -> list[str]:
    """mine_bitexts.py --mode mine --retrieval max --margin ratio --unify, step by step in numpy
    (float32 vectors as LASER loads them, exact k-NN, float64 score arrays, print's formatting)."""
    x = x.astype(np.float32) / np.linalg.norm(x.astype(np.float32), axis=1, keepdims=True)
    y = y.astype(np.float32) / np.linalg.norm(y.astype(np.float32), axis=1, keepdims=True)

    def knn(queries, keys, kk):
        sims = queries @ keys.T
        ind = np.argsort(-sims, axis=1, kind="stable")[:, :kk]
        return np.take_along_axis(sims, ind, 1), ind

    x2y_sim, x2y_ind = knn(x, y, min(len(y), k))
    y2x_sim, y2x_ind = knn(y, x, min(len(x), k))
    x2y_mean, y2x_mean = x2y_sim.mean(axis=1), y2x_sim.mean(axis=1)

    def score_candidates(a, b, ind, fwd_mean, bwd_mean):
        scores = np.zeros(ind.shape)  # float64, as LASER's
        for i in range(ind.shape[0]):
            for j in range(ind.shape[1]):
                c = ind[i, j]
                scores[i, j] = a[i].dot(b[c]) / ((fwd_mean[i] + bwd_mean[c]) / 2)
        return scores

    fwd_scores = score_candidates(x, y, x2y_ind, x2y_mean, y2x_mean)
    bwd_scores = score_candidates(y, x, y2x_ind, y2x_mean, x2y_mean)
    fwd_best = x2y_ind[np.arange(len(x)), fwd_scores.argmax(axis=1)]
    bwd_best = y2x_ind[np.arange(len(y)), bwd_scores.argmax(axis=1)]
    indices = np.stack((np.concatenate((np.arange(len(x)), bwd_best)), np.concatenate((fwd_best, np.arange(len(y))))), axis=1)
    scores = np.concatenate((fwd_scores.max(axis=1), bwd_scores.max(axis=1)))
    seen_src, seen_trg, lines = set(), set(), []
    for i in np.argsort(-scores, kind="stable"):
        s, t = indices[i]
        if s not in seen_src and t not in seen_trg:
            seen_src.add(s)
            seen_trg.add(t)
            if scores[i] > threshold:
                lines.append(f"{scores[i]}\t{src[s]}\t{trg[t]}")
    return lines
