"""BUCC mining and scoring: LASER's threshold optimisation and id mapping, and the command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from infoxlm import Encoder, Tokenizer
from infoxlm.eval.bucc import (
    extract, id_candidates, mine_candidates, score_pairs, split_result, text_ids, tune_threshold, evaluate_bucc,
)
from infoxlm.eval.bucc_data import BuccSide, BuccSplit, load_bucc
from infoxlm.eval.margin import MinedPairs, unique_texts

from mining_files import write_bucc, write_bucc_set


def test_the_threshold_is_the_midpoint_after_the_best_f1_by_hand():
    candidates = {("d1", "e1"): 1.3, ("d2", "e2"): 1.2, ("d3", "e9"): 1.1, ("d4", "e4"): 1.05, ("d5", "e8"): 1.0}
    gold = frozenset({("d1", "e1"), ("d2", "e2"), ("d4", "e4"), ("d6", "e6")})  # d6 was never mined
    # F1 of the prefixes: 2/5, 2/3, 4/7, 3/4 (best: the first four), 2/3.
    assert tune_threshold(candidates, gold) == pytest.approx((1.05 + 1.0) / 2)
    mined = extract(candidates, 1.025)
    assert mined == [("d1", "e1"), ("d2", "e2"), ("d3", "e9"), ("d4", "e4")]
    assert score_pairs(mined, gold) == pytest.approx({"precision": 75.0, "recall": 75.0, "f1": 75.0})
    assert tune_threshold(candidates, frozenset({("x", "y")})) == 0.0  # no gold pair among them
    assert tune_threshold({("d1", "e1"): 1.3}, gold) == 1.3  # the best is the last: its own score


def test_a_text_twice_in_a_side_has_no_id_and_the_best_duplicate_score_is_kept():
    side = BuccSide(Path("x"), ["a1", "a2", "a3", "a4"], ["Hi", "Yo ", "Hi ", "Ok"])
    assert text_ids(side) == {"Yo": "a2", "Ok": "a4"}
    trg = BuccSide(Path("y"), ["e1", "e2", "e3"], ["One", "Two", " Two"])  # "Two" twice, once stripped
    split = BuccSplit("de-en", "sample", side, trg, None, None)
    # rows of the distinct texts as mined (here every text is distinct before stripping)
    mined = MinedPairs(np.array([1, 3, 1, 0]), np.array([0, 1, 0, 0]), np.array([1.2, 1.1, 1.25, 1.3]))
    assert id_candidates(split, mined, side.texts, trg.texts) == {("a2", "e1"): 1.25}


def _laser_bucc(candidate_lines, src_ids, src_texts, trg_ids, trg_texts, gold):
    """LASER's tasks/bucc/bucc.py on (score, src text, trg text) lines, written out plainly."""
    def sent2id(ids, texts):
        out, repeated = {}, set()
        for i, t in zip(ids, texts):
            t = t.strip()
            if t in out:
                repeated.add(t)
            else:
                out[t] = i
        return {t: i for t, i in out.items() if t not in repeated}

    s2i, t2i = sent2id(src_ids, src_texts), sent2id(trg_ids, trg_texts)
    cand = {}
    for score, src, trg in candidate_lines:
        src, trg = src.strip(), trg.strip()
        if src in s2i and trg in t2i:
            key = (s2i[src], t2i[trg])
            cand[key] = max(score, cand.get(key, score))
    items = sorted(cand.items(), key=lambda x: -x[1])
    nextract = ncorrect = 0
    threshold = best = 0
    for i in range(len(items)):
        nextract += 1
        ncorrect += items[i][0] in gold
        if ncorrect > 0:
            p, r = ncorrect / nextract, ncorrect / len(gold)
            f1 = 2 * p * r / (p + r)
            if f1 > best:
                best, threshold = f1, (items[i][1] + items[i + 1][1]) / 2
    bitexts = [k for k, s in cand.items() if s >= threshold]
    c = len(gold.intersection(bitexts))
    p, r = c / len(bitexts), c / len(gold)
    return threshold, {"precision": 100 * p, "recall": 100 * r, "f1": 100 * 2 * p * r / (p + r)}


def test_random_vectors_score_as_lasers_bucc_py_scores_the_same_candidates():
    rng = np.random.default_rng(0)
    n, d, hidden = 300, 16, 80
    src_texts = [f"s{i}" for i in range(n)] + ["s3", " s7"]  # repeated texts: dropped by both
    trg_texts = [f"t{i}" for i in range(n)]
    en = rng.standard_normal((n, d))
    xx = rng.standard_normal((n, d))
    xx[:hidden] = en[:hidden] + 0.9 * rng.standard_normal((hidden, d))  # noisy translations
    src_ids, trg_ids = [f"de-{i}" for i in range(n + 2)], [f"en-{i}" for i in range(n)]
    gold = frozenset((f"de-{i}", f"en-{i}") for i in range(hidden))
    split = BuccSplit("de-en", "training", BuccSide(Path("x"), src_ids, src_texts), BuccSide(Path("y"), trg_ids, trg_texts),
                      gold, None)
    distinct, rows = unique_texts(src_texts)
    vectors = np.empty((len(distinct), d))
    vectors[rows] = np.concatenate([xx, xx[[3, 7]]])
    mined = mine_candidates(vectors, en)
    lines = [(s, distinct[i], trg_texts[j]) for i, j, s in zip(mined.src.tolist(), mined.trg.tolist(), mined.score.tolist())]
    threshold, scores = _laser_bucc(lines, src_ids, src_texts, trg_ids, trg_texts, gold)
    entry, _ = split_result(split, id_candidates(split, mined, distinct, trg_texts), tune_threshold(
        id_candidates(split, mined, distinct, trg_texts), gold), True)
    assert entry["threshold"] == pytest.approx(threshold, abs=1e-12)
    assert {m: entry[m] for m in scores} == pytest.approx(scores)
    assert 30 < scores["f1"] < 100  # a set where the threshold matters


def test_identical_hidden_pairs_are_mined_at_every_layer(tiny_model_dir, tmp_path):
    data = write_bucc_set(tmp_path / "bucc2018", languages=("de",), n=60, hidden=15)
    splits = load_bucc(data, None, None, "training")
    encoder, tokenizer = Encoder.from_pretrained(tiny_model_dir), Tokenizer.from_pretrained(tiny_model_dir)
    blocks, predictions = evaluate_bucc(encoder, tokenizer, splits, [0, 2], "training")
    for k in (0, 2):
        entries = blocks[k]["pairs"]["de-en"]
        assert list(entries) == ["sample", "training", "test"] and entries["training"]["tuned_here"]
        assert entries["sample"]["threshold"] == entries["training"]["threshold"]
        assert entries["training"]["recall"] == 100.0 and entries["sample"]["f1"] > 80
        assert "f1" not in entries["test"] and entries["test"]["mined"] == len(predictions[k][("de-en", "test")])
        assert blocks[k]["average"]["sample"]["f1"] == entries["sample"]["f1"]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "infoxlm", "eval", "bucc", *map(str, args), "--no-progress"],
                          capture_output=True, text=True, timeout=300)


def test_the_command_prints_each_pair_and_split_and_writes_xtremes_prediction_files(tiny_model_dir, tmp_path):
    data = write_bucc_set(tmp_path / "bucc2018", n=40, hidden=10)
    gold_test = write_bucc(tmp_path / "bucc2018", "de", "test", n=40, hidden=10, gold=False, seed=2)  # as written above
    out = tmp_path / "b.json"
    run = _run("--model", tiny_model_dir, "--data", data, "--pairs", "de-en,fr-en", "--tune-on", "training",
               "--output", out)
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert result["margin"] == {"margin": "ratio", "k": 4, "strategy": "max"} and result["tune_on"] == "training"
    for pair in ("de-en", "fr-en"):
        assert list(result["pairs"][pair]) == ["sample", "training", "test"]
        for split in ("sample", "training"):
            e = result["pairs"][pair][split]
            line = next(l for l in run.stdout.splitlines() if l.split()[:2] == [pair, split])
            assert f"{e['threshold']:.4f}" in line and f"{e['f1']:.2f}" in line and f"{e['precision']:.2f}" in line
    predicted = tmp_path / "b-predictions" / "test-de.tsv"
    assert result["pairs"]["de-en"]["test"]["predictions"] == str(predicted)
    pairs = {tuple(line.split("\t")) for line in predicted.read_text().splitlines()}
    assert len(pairs) == result["pairs"]["de-en"]["test"]["mined"] and gold_test <= pairs
    every = _run("--model", tiny_model_dir, "--data", data, "--pairs", "de", "--splits", "sample",
                 "--tune-on", "training", "--layer", "all", "--output", tmp_path / "all.json")
    assert every.returncode == 0, every.stderr
    assert set(json.loads((tmp_path / "all.json").read_text())["layers"]) == {"0", "1", "2"}
    assert (tmp_path / "all.png").read_bytes()[:4] == b"\x89PNG" and "by layer, average F1" in every.stdout
    assert not (tmp_path / "all-predictions").exists()  # every split mined had gold
