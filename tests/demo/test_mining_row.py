"""The demo's mining row: the BUCC-style sets built from the corpus, LASER's threshold tuning, F1."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from infoxlm.demo import corpus
from infoxlm.demo.checkpoint import checkpoint_dir
from infoxlm.demo.mining_row import distractors, evaluate_mining, mining_set, scores_at
from infoxlm.eval.bucc import best_f1_threshold
from infoxlm.demo.tables import _mining_table
from infoxlm.embedding import embed_layers
from infoxlm.model.encoder import Encoder
from infoxlm.model.fast_paths import FastPaths
from infoxlm.tokenizer import Tokenizer


def test_distractors_are_distinct_lines_spread_over_the_file():
    lines = [line for line in dict.fromkeys(corpus.load_monolingual("de")) if line.strip()]
    picked = distractors("de", 50)
    assert len(picked) == len(set(picked)) == 50 and all(p.strip() for p in picked)
    assert picked[0] == lines[0] and picked[-1] == lines[-1]  # both ends: many documents, not the first few
    assert distractors("ur", 10_000) == [line for line in dict.fromkeys(corpus.load_monolingual("ur")) if line.strip()]


def test_the_corpus_keeps_every_retrieval_sentence_out_of_the_monolingual_text():
    # What makes the added sentences "not their translations": no pair's sentence is among them.
    for lang in ("de", "zh"):
        mono = set(corpus.load_monolingual(lang))
        english = set(corpus.load_monolingual("en"))
        for split in ("dev", "heldout"):
            xx, en = corpus.retrieval_pairs(lang, split)
            assert not mono & set(xx) and not english & set(en)


def test_a_set_has_one_row_per_distinct_sentence_and_the_pairs_as_gold():
    d = 3
    xx, en = ["a", "b", "c"], ["A", "B", "C"]
    vec = lambda n, start: np.arange(start, start + n * d, dtype=np.float32).reshape(n, d)  # noqa: E731
    mset = mining_set(xx, en, vec(3, 0), vec(3, 100), ["x", "b", "y", "x"], vec(4, 200), ["A", "Z"], vec(2, 300))
    # xx rows: a b c x y ("b" is a pair's own, the repeated "x" is one row); en rows: A B C Z.
    assert len(mset.src) == 5 and len(mset.trg) == 4
    assert mset.gold == frozenset({(0, 0), (1, 1), (2, 2)})
    np.testing.assert_array_equal(mset.src[3], vec(4, 200)[0]) and np.testing.assert_array_equal(mset.trg[3], vec(2, 300)[1])


def reference_threshold(scores, is_gold, n_gold):
    """Every prefix of the best-first candidates tried; the first with the highest F1."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    best, best_f1 = 0.0, 0.0
    for cut in range(1, len(order) + 1):
        correct = sum(is_gold[i] for i in order[:cut])
        if correct:
            p, r = correct / cut, correct / n_gold
            f1 = 2 * p * r / (p + r)
            if f1 > best_f1:
                nxt = scores[order[cut]] if cut < len(order) else scores[order[cut - 1]]
                best, best_f1 = (scores[order[cut - 1]] + nxt) / 2, f1
    return best


@pytest.mark.parametrize("seed", range(5))
def test_the_threshold_is_lasers_bucc_optimum(seed):
    rng = np.random.default_rng(seed)
    scores = rng.random(40) + 1.0
    is_gold = rng.random(40) < scores - 1.0  # better scores are more often gold
    threshold = best_f1_threshold(scores, is_gold, int(is_gold.sum()) + 3)  # three pairs never found
    assert threshold == pytest.approx(reference_threshold(scores, is_gold, int(is_gold.sum()) + 3))
    best = scores_at(scores, is_gold, int(is_gold.sum()) + 3, threshold)["f1"]
    for t in itertools.chain(scores, [0.0, 3.0]):  # no other threshold does better
        assert scores_at(scores, is_gold, int(is_gold.sum()) + 3, t)["f1"] <= best + 1e-9


def test_no_gold_candidate_gives_threshold_0_and_f1_0():
    scores, is_gold = np.array([1.2, 1.1]), np.array([False, False])
    assert best_f1_threshold(scores, is_gold, 5) == 0.0
    assert scores_at(scores, is_gold, 5, 0.0) == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "n": {"gold": 5, "mined": 2}}


@pytest.fixture(scope="module")
def shipped():
    model = checkpoint_dir()
    return Encoder.from_pretrained(model, fast_paths=FastPaths.inference()).eval(), Tokenizer.from_pretrained(model)


def split_vectors(encoder, tokenizer, split, n, layer, aligned=True):
    xx, en = (side[:n] for side in corpus.retrieval_pairs("de", split))
    en_v = embed_layers(encoder, tokenizer, en, [layer])[layer]
    # An oracle encoder: each German sentence lands on its translation (or, misaligned, on another's).
    xx_v = en_v.copy() if aligned else np.roll(en_v, 5, axis=0)
    return {"deu": (xx, en, xx_v, en_v)}


@pytest.mark.parametrize(("aligned", "low", "high"), [(True, 90.0, 100.0), (False, 0.0, 20.0)])
def test_an_aligned_encoder_mines_the_pairs_and_a_misaligned_one_does_not(shipped, aligned, low, high):
    encoder, tokenizer = shipped
    tune = split_vectors(encoder, tokenizer, "dev", 12, 3, aligned)
    heldout = split_vectors(encoder, tokenizer, "heldout", 12, 3, aligned)
    result = evaluate_mining(encoder, tokenizer, 3, tune, heldout, "dev")
    scores = result["languages"]["deu"]
    assert low <= scores["f1"] <= high and scores["n"]["gold"] == 12
    assert result["average"]["f1"] == scores["f1"] and result["layer"] == 3 and result["tuned_on"] == "dev"


def test_the_table_has_a_row_per_language_and_the_average():
    models = {name: {"label": label, "mining": {"layer": 2, "tuned_on": "dev", "average": {"f1": f1},
                                                "languages": {"deu": {"f1": f1}, "fra": {"f1": f1 / 2}}}}
              for name, label, f1 in (("infoxlm", "InfoXLM", 80.0), ("no-xlco", "−XLCO", 4.0))}
    lines = _mining_table(models, ["infoxlm", "no-xlco"])
    assert lines[0].startswith("Mining F1 (%), held-out pairs hidden among monolingual text") and "tuned on dev" in lines[1]
    assert "| deu | 80.0 | 4.0 |" in lines and "| fra | 40.0 | 2.0 |" in lines and "| **average** | 80.0 | 4.0 |" in lines
    assert _mining_table({**models, "no-xlco": {"label": "−XLCO", "mining": None}}, ["infoxlm", "no-xlco"]) == []
