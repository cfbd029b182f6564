"""Margin-scored k-NN: the chunked search against a plain n × n reference, for every margin and strategy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from infoxlm.eval import margin as margin_module
from infoxlm.eval.margin import (MARGINS, STRATEGIES, MarginOptions, cosine_knn, margin_pairs, neighbourhood, unique_texts,
                                 unit_rows)


def reference_pairs(x: np.ndarray, y: np.ndarray, k: int, kind: str, strategy: str):
    """LASER's mining written plainly: the full similarity matrix in float64, one loop per rule."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    y = y / np.linalg.norm(y, axis=1, keepdims=True)
    sim = x @ y.T  # (n_x, n_y)
    kf, kb = min(k, len(y)), min(k, len(x))
    fwd_ids = np.argsort(-sim, axis=1)[:, :kf]
    bwd_ids = np.argsort(-sim.T, axis=1)[:, :kb]
    fwd_mean = np.take_along_axis(sim, fwd_ids, 1).mean(1)
    bwd_mean = np.take_along_axis(sim.T, bwd_ids, 1).mean(1)

    def score(i, j):
        mean = (fwd_mean[i] + bwd_mean[j]) / 2
        return {"ratio": sim[i, j] / mean, "distance": sim[i, j] - mean, "absolute": sim[i, j]}[kind]

    fwd = [max(((score(i, j), j) for j in fwd_ids[i]), key=lambda p: p[0]) for i in range(len(x))]
    bwd = [max(((score(i, j), i) for i in bwd_ids[j]), key=lambda p: p[0]) for j in range(len(y))]
    if strategy == "fwd":
        return [(i, j, s) for i, (s, j) in enumerate(fwd)]
    if strategy == "bwd":
        return [(i, j, s) for j, (s, i) in enumerate(bwd)]
    if strategy == "intersect":
        return [(i, j, s) for i, (s, j) in enumerate(fwd) if bwd[j][1] == i]
    pool = [(s, i, j) for i, (s, j) in enumerate(fwd)] + [(s, i, j) for j, (s, i) in enumerate(bwd)]
    seen_x, seen_y, kept = set(), set(), []
    for s, i, j in sorted(pool, key=lambda p: -p[0]):
        if i not in seen_x and j not in seen_y:
            seen_x.add(i)
            seen_y.add(j)
            kept.append((i, j, s))
    return kept


def noisy_bitext(n_x: int, n_y: int, d: int = 16, seed: int = 0):
    """Targets, and sources of which the first min(n) translate targets (with noise), the rest unrelated."""
    rng = np.random.default_rng(seed)
    y = rng.standard_normal((n_y, d))
    x = rng.standard_normal((n_x, d))
    shared = min(n_x, n_y)
    x[:shared] = y[:shared] + 0.8 * rng.standard_normal((shared, d))
    return x, y


def assert_same(pairs, expected):
    got = list(zip(pairs.src.tolist(), pairs.trg.tolist()))
    assert got == [(i, j) for i, j, _ in expected]
    # float32 against float64: a ratio whose neighbourhood mean is near 0 (k covering a whole
    # random set) is large, so its error is relative, not absolute.
    np.testing.assert_allclose(pairs.score, [s for _, _, s in expected], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("kind", MARGINS)
def test_chunked_search_equals_the_full_matrix(kind, strategy):
    x, y = noisy_bitext(37, 29)
    for k, chunk in ((4, 5), (3, 7), (4, 2), (1, 1000)):  # chunks that do not divide 37 or 29, below k, above n
        options = MarginOptions(k=k, margin=kind, strategy=strategy, chunk=chunk, backend="torch")
        assert_same(margin_pairs(x, y, options), reference_pairs(x, y, k, kind, strategy))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_k_larger_than_one_side_is_clamped_to_its_size(strategy):
    x, y = noisy_bitext(3, 11)
    options = MarginOptions(k=8, strategy=strategy, chunk=2, backend="torch")
    pairs = margin_pairs(x, y, options)
    assert_same(pairs, reference_pairs(x, y, 8, "ratio", strategy))


def test_translations_are_found_and_each_side_is_used_once():
    x, y = noisy_bitext(40, 40, d=64)
    pairs = margin_pairs(x, y, MarginOptions(chunk=9))
    assert pairs.src.tolist() == pairs.trg.tolist()
    assert len(set(pairs.src.tolist())) == len(pairs) == 40
    assert np.all(np.diff(pairs.score) <= 0)  # max: best score first


def test_identical_texts_are_embedded_once_and_map_back():
    texts = ["a", "b", "a", "c", "b", "a"]
    unique, index = unique_texts(texts)
    assert unique == ["a", "b", "c"]
    assert [unique[i] for i in index] == texts
    unique, index = unique_texts([])
    assert unique == [] and index.shape == (0,)


def test_duplicate_vectors_score_like_their_single_copy():
    # A duplicated target ties with itself; after unify the ids are the reference's, and the
    # scores of the duplicated set equal those of the unique one up to which copy is named.
    x, y = noisy_bitext(12, 10)
    y_dup = np.concatenate([y, y[:3]])
    unique, index = unique_texts([f"t{i % 10}" for i in range(13)])
    assert len(unique) == 10 and index.tolist() == list(range(10)) + [0, 1, 2]
    fwd = margin_pairs(x, y_dup, MarginOptions(k=1, strategy="fwd", backend="torch"))
    plain = margin_pairs(x, y, MarginOptions(k=1, strategy="fwd", backend="torch"))
    assert (fwd.trg % 10).tolist() == plain.trg.tolist()
    np.testing.assert_allclose(fwd.score, plain.score, atol=1e-6)


def test_the_neighbours_are_the_nearest_by_cosine():
    rng = np.random.default_rng(1)
    q, keys = unit_rows(rng.standard_normal((23, 8))), unit_rows(rng.standard_normal((31, 8)))
    found = cosine_knn(q, keys, 5, chunk=4, backend="torch")
    full = (q @ keys.T).topk(5, dim=1)
    assert torch.equal(found.ids, full.indices)
    torch.testing.assert_close(found.sims, full.values)
    assert found.sims.shape == (23, 5) and torch.all(found.sims[:, :-1] >= found.sims[:, 1:])


def test_one_pass_gives_both_directions_of_the_separate_searches():
    # The torch path reads backward neighbours off the forward blocks' columns.
    rng = np.random.default_rng(2)
    src, trg = unit_rows(rng.standard_normal((26, 8))), unit_rows(rng.standard_normal((19, 8)))
    fwd, bwd = neighbourhood(src, trg, MarginOptions(k=6, chunk=4, backend="torch"))
    for got, (queries, keys) in ((fwd, (src, trg)), (bwd, (trg, src))):
        alone = cosine_knn(queries, keys, 6, chunk=5, backend="torch")
        assert torch.equal(got.ids, alone.ids)
        torch.testing.assert_close(got.sims, alone.sims)


@pytest.mark.parametrize("backend", ["torch"] + (["faiss"] if margin_module.faiss is not None else []))
def test_the_search_reports_its_progress_up_to_all_of_it(backend):
    rng = np.random.default_rng(3)
    src, trg = unit_rows(rng.standard_normal((26, 8))), unit_rows(rng.standard_normal((19, 8)))
    seen: list[float] = []
    with_bar = neighbourhood(src, trg, MarginOptions(chunk=4, backend=backend), progress=seen.append)
    without = neighbourhood(src, trg, MarginOptions(chunk=4, backend=backend))
    assert seen == sorted(seen) and seen[-1] == pytest.approx(1.0) and len(seen) > 2
    assert all(torch.equal(a.ids, b.ids) for a, b in zip(with_bar, without))


@pytest.mark.skipif(margin_module.faiss is None, reason="faiss is not installed (the optional faiss extra)")
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_faiss_gives_the_torch_pairs(strategy):
    x, y = noisy_bitext(37, 29)
    by_torch = margin_pairs(x, y, MarginOptions(strategy=strategy, chunk=6, backend="torch"))
    by_faiss = margin_pairs(x, y, MarginOptions(strategy=strategy, chunk=6, backend="faiss"))
    assert by_faiss.src.tolist() == by_torch.src.tolist() and by_faiss.trg.tolist() == by_torch.trg.tolist()
    np.testing.assert_allclose(by_faiss.score, by_torch.score, atol=1e-5)


@pytest.mark.parametrize(
    ("src", "trg", "message"),
    [
        (np.zeros((0, 4)), np.ones((3, 4)), "non-empty"),
        (np.ones((3, 4)), np.zeros((0, 4)), "non-empty"),
        (np.ones(4), np.ones((3, 4)), "non-empty"),
        (np.ones((2, 4)), np.ones((3, 5)), "one width"),
    ],
)
def test_bad_inputs_are_refused(src, trg, message):
    with pytest.raises(ValueError, match=message):
        margin_pairs(src, trg)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(k=0), "k must be at least 1"),
        (dict(chunk=0), "chunk must be at least 1"),
        (dict(margin="cosine"), "margin must be one of ratio, distance, absolute"),
        (dict(strategy="both"), "strategy must be one of max, fwd, bwd, intersect"),
        (dict(backend="annoy"), "backend must be one of"),
    ],
)
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        MarginOptions(**options)


def test_faiss_asked_for_without_faiss_is_refused(monkeypatch):
    monkeypatch.setattr(margin_module, "faiss", None)
    with pytest.raises(ValueError, match="pip install faiss-cpu"):
        MarginOptions(backend="faiss")
