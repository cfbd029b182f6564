"""Mining: the pairs, their order, scores and threshold of LASER's mine_bitexts.py --mode mine."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from infoxlm.eval.margin import MarginOptions
from infoxlm.eval.mining import DEFAULT_THRESHOLD, MineOptions, format_score, mine_vectors, write_pairs

from laser_mining import laser_mine_lines


def bitext(n_src: int, n_trg: int, shared: int, d: int = 32, seed: int = 0):
    """Vectors of which the first ``shared`` rows translate each other (with noise), as float16 on disk."""
    rng = np.random.default_rng(seed)
    y = rng.standard_normal((n_trg, d))
    x = rng.standard_normal((n_src, d))
    x[:shared] = y[:shared] + 0.7 * rng.standard_normal((shared, d))
    return x.astype(np.float16), y.astype(np.float16)


def mined_lines(x, y, src, trg, tmp_path, **options) -> list[str]:
    unit = [torch.nn.functional.normalize(torch.from_numpy(v.astype(np.float32)), dim=1) for v in (x, y)]
    pairs = mine_vectors(*unit, MineOptions(**options))
    write_pairs(tmp_path / "mined.tsv", pairs, src, trg)
    return (tmp_path / "mined.tsv").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("threshold", [0.0, DEFAULT_THRESHOLD, 1.2])
def test_the_lines_are_lasers_for_the_same_vectors(threshold, tmp_path):
    x, y = bitext(70, 55, shared=30)
    src, trg = [f"quelle {i}" for i in range(70)], [f"target {i}" for i in range(55)]
    ours = mined_lines(x, y, src, trg, tmp_path, threshold=threshold, margin=MarginOptions(chunk=16, backend="torch"))
    laser = laser_mine_lines(x, y, src, trg, threshold)
    assert len(ours) == len(laser) and len(ours) > 0
    assert [line.split("\t")[1:] for line in ours] == [line.split("\t")[1:] for line in laser]
    # One float32 product against another (BLAS sums in its own order): equal to float32 rounding.
    np.testing.assert_allclose([float(l.split("\t")[0]) for l in ours], [float(l.split("\t")[0]) for l in laser], rtol=2e-6)


def test_translations_come_first_and_the_default_threshold_drops_some_of_the_rest(tmp_path):
    x, y = bitext(200, 200, shared=60, d=64)
    src, trg = [f"s{i}" for i in range(200)], [f"t{i}" for i in range(200)]
    everything = mined_lines(x, y, src, trg, tmp_path, threshold=0.0)
    kept = mined_lines(x, y, src, trg, tmp_path)
    # Each sentence's best candidate, one-to-one: a sentence whose best is taken mines nothing.
    assert 60 < len(kept) < len(everything) <= 200
    translation = [line.split("\t")[1][1:] == line.split("\t")[2][1:] and int(line.split("\t")[2][1:]) < 60
                   for line in everything]
    assert translation[:60] == [True] * 60 and not any(translation[60:])
    assert kept == everything[: len(kept)]


def test_the_threshold_is_strict_and_compared_in_float64(tmp_path):
    x, y = bitext(20, 20, shared=20)
    src, trg = [f"s{i}" for i in range(20)], [f"t{i}" for i in range(20)]
    scores = [float(line.split("\t")[0]) for line in mined_lines(x, y, src, trg, tmp_path, threshold=0.0)]
    assert scores == sorted(scores, reverse=True)
    at = scores[5]  # a score itself as threshold: kept only above it, as LASER's ">"
    assert len(mined_lines(x, y, src, trg, tmp_path, threshold=at)) == 5
    below = float(np.nextafter(np.float64(at), -np.inf))  # float32(below) == at, yet at > below
    assert len(mined_lines(x, y, src, trg, tmp_path, threshold=below)) == 6


@pytest.mark.parametrize("strategy", ["fwd", "bwd", "intersect"])
def test_other_strategies_are_written_best_first_above_the_threshold(strategy, tmp_path):
    x, y = bitext(30, 25, shared=20)
    lines = mined_lines(x, y, [f"s{i}" for i in range(30)], [f"t{i}" for i in range(25)], tmp_path,
                        threshold=1.0, margin=MarginOptions(strategy=strategy))
    scores = [float(line.split("\t")[0]) for line in lines]
    assert scores and scores == sorted(scores, reverse=True) and min(scores) > 1.0


def test_a_score_is_printed_as_laser_prints_it():
    value = np.float32(1.0734198)
    assert format_score(value) == str(np.float64(value)) == repr(float(value))


def test_sentences_are_written_as_read(tmp_path):
    x, y = bitext(3, 3, shared=3)
    src, trg = ["Grüße, \u00a0Welt ", "b\u2028c", "tab"], ["x", "y", "z"]
    lines = (tmp_path / "m.tsv")
    pairs = mine_vectors(*(torch.nn.functional.normalize(torch.from_numpy(v.astype(np.float32)), dim=1) for v in (x, y)),
                         MineOptions(threshold=0))
    write_pairs(lines, pairs, src, trg)
    text = lines.read_text(encoding="utf-8")
    assert "Grüße, \u00a0Welt \t" in text and "b\u2028c\t" in text and text.count("\n") == len(pairs)


@pytest.mark.parametrize(("options", "message"), [(dict(threshold=float("nan")), "finite"), (dict(piece=0), "piece"),
                                                  (dict(batch_size=0), "batch_size")])
def test_bad_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        MineOptions(**options)
