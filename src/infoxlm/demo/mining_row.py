"""The demo's mining row: BUCC's construction built from the shipped corpus, mined with each model.

For each language, a split's translation pairs are hidden among monolingual sentences of the
same languages that are not their translations, as BUCC 2018 hid its gold pairs in monolingual
corpora: the xx side is the split's xx sentences and as many lines of ``mono.xx`` as the
held-out split has pairs; the English side is the split's English sentences and twice that many
lines of ``mono.en`` (one pool for every language). The monolingual text is LibreOffice and
Django text, which the corpus builder keeps apart from every retrieval sentence, so no added
sentence translates a pair's; the held-out pairs are Firefox strings. Lines are spread evenly
over each file (many documents, no seed).

Each set is mined as ``infoxlm mine`` and LASER's BUCC mining do (:mod:`~infoxlm.eval.margin`:
ratio margin, k = 4, the better direction wins, each sentence used once). The threshold of
each language is the one that maximises F1 on the tuning split's set (``dev``, else ``test``:
LASER's ``BuccOptimize``, the midpoint between the best prefix's last score and the next) and
the figure is F1 on the held-out set at that threshold: BUCC's protocol (tune on one split,
report on another), at the layer the demo chose for the model.

The splits' vectors are the ones the retrieval evaluation made (``evaluate_tatoeba``'s
``vectors``); only the monolingual sentences are embedded here, once per model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..embedding import embed_layers
from ..eval.bucc import best_f1_threshold
from ..eval.margin import MarginOptions, margin_pairs, unique_texts
from ..model.encoder import Encoder
from ..tokenizer import Tokenizer
from . import corpus

__all__ = ["MINING", "MiningSet", "distractors", "evaluate_mining", "mining_set", "scores_at"]

MINING = MarginOptions(k=4, margin="ratio", strategy="max", backend="torch")
# Monolingual sentences added per held-out pair: xx ones per language, English ones in the one
# pool. They are what the row embeds (6,935 sentences, 141 k tokens a model at the full sizes).
XX_PER_PAIR, EN_PER_PAIR = 1, 2

# {code: (xx sentences, English sentences, xx vectors (n, d), English vectors (n, d))}
SplitVectors = dict[str, tuple[list[str], list[str], np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class MiningSet:
    """One language's mining problem: distinct source and target rows, and the gold pairs among them."""

    src: np.ndarray  # (n_src, d) vectors of the distinct xx sentences
    trg: np.ndarray  # (n_trg, d) vectors of the distinct English sentences
    gold: frozenset[tuple[int, int]]  # (src row, trg row) of each translation pair


def distractors(lang: str, count: int) -> list[str]:
    """``count`` distinct non-blank lines of the corpus's monolingual text of ``lang`` (``en``
    too), evenly spread over the file; all of them where it has fewer."""
    lines = [line for line in dict.fromkeys(corpus.load_monolingual(lang)) if line.strip()]
    if len(lines) <= count:
        return lines
    return [lines[i] for i in np.linspace(0, len(lines) - 1, count).round().astype(int)]


def mining_set(xx: Sequence[str], en: Sequence[str], xx_vectors: np.ndarray, en_vectors: np.ndarray,
               xx_extra: Sequence[str], xx_extra_vectors: np.ndarray,
               en_extra: Sequence[str], en_extra_vectors: np.ndarray) -> MiningSet:
    """Pairs (xx[i], en[i]) among the extra sentences; each distinct sentence is one row (its
    first vector), as LASER's ``--unify``, and an extra sentence that is a pair's is left out."""
    def rows(texts: Sequence[str], vectors: np.ndarray, extra: Sequence[str], extra_vectors: np.ndarray):
        own = set(texts)
        kept = [i for i, text in enumerate(extra) if text not in own]
        all_texts = list(texts) + [extra[i] for i in kept]
        unique, index = unique_texts(all_texts)
        first = np.unique(index, return_index=True)[1]  # the first line of each distinct text
        stacked = np.concatenate([vectors, extra_vectors[kept]]) if kept else vectors
        return stacked[first], index

    src, src_index = rows(xx, xx_vectors, xx_extra, xx_extra_vectors)
    trg, trg_index = rows(en, en_vectors, en_extra, en_extra_vectors)
    gold = frozenset((int(src_index[i]), int(trg_index[i])) for i in range(len(xx)))
    return MiningSet(src, trg, gold)


def candidates(mset: MiningSet) -> tuple[np.ndarray, np.ndarray]:
    """The mined candidates' scores, best first, and whether each is a gold pair: (m,), (m,)."""
    pairs = margin_pairs(mset.src, mset.trg, MINING)
    is_gold = np.fromiter(((s, t) in mset.gold for s, t in zip(pairs.src.tolist(), pairs.trg.tolist())),
                          dtype=bool, count=len(pairs))
    return pairs.score.astype(np.float64), is_gold


def scores_at(scores: np.ndarray, is_gold: np.ndarray, n_gold: int, threshold: float) -> dict:
    """Precision, recall and F1 (%) of the candidates scoring at least ``threshold``.

    >>> scores_at(np.array([3.0, 2.0, 1.0]), np.array([True, False, True]), 4, 1.5)
    {'precision': 50.0, 'recall': 25.0, 'f1': 33.33333333333333, 'n': {'gold': 4, 'mined': 2}}
    """
    kept = scores >= threshold
    correct, mined = int(is_gold[kept].sum()), int(kept.sum())
    precision = correct / mined if mined else 0.0
    recall = correct / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if correct else 0.0
    return {"precision": 100 * precision, "recall": 100 * recall, "f1": 100 * f1, "n": {"gold": n_gold, "mined": mined}}


def evaluate_mining(encoder: Encoder, tokenizer: Tokenizer, layer: int, tune: SplitVectors, heldout: SplitVectors,
                    tune_split: str) -> dict:
    """F1 on each language's held-out set at the threshold tuned on its ``tune`` set, at ``layer``.

    ``tune`` and ``heldout``: each split's sentences and their vectors at ``layer`` by language
    code (Tatoeba's three letters). Returns {"layer", "tuned_on", "languages": {code:
    {"threshold", "precision", "recall", "f1", "n"}}, "average": {"precision", "recall", "f1"}}.
    """
    def vectors(texts: list[str]) -> np.ndarray:
        return embed_layers(encoder, tokenizer, texts, [layer])[layer] if texts else np.zeros((0, encoder.config.hidden_size))

    by_code = {corpus.tatoeba_code(lang): lang for lang in corpus.languages()}
    count = {code: XX_PER_PAIR * len(sides[0]) for code, sides in heldout.items()}  # added xx sentences
    en_extra = distractors("en", EN_PER_PAIR * max(len(sides[0]) for sides in heldout.values()))
    en_extra_vectors = vectors(en_extra)
    languages = {}
    for code, (xx, en, xx_v, en_v) in heldout.items():
        xx_extra = distractors(by_code[code], count[code])
        xx_extra_vectors = vectors(xx_extra)
        sets = {}
        for name, split in (("tune", tune), ("heldout", heldout)):
            if code in split:
                s_xx, s_en, s_xx_v, s_en_v = split[code]
                sets[name] = mining_set(s_xx, s_en, s_xx_v, s_en_v, xx_extra, xx_extra_vectors, en_extra, en_extra_vectors)
        tuned = candidates(sets["tune"]) if "tune" in sets else None
        threshold = best_f1_threshold(*tuned, len(sets["tune"].gold)) if tuned else 0.0
        languages[code] = {"threshold": threshold, **scores_at(*candidates(sets["heldout"]), len(sets["heldout"].gold), threshold)}
    average = {key: float(np.mean([s[key] for s in languages.values()])) for key in ("precision", "recall", "f1")}
    return {"layer": layer, "tuned_on": tune_split, "languages": languages, "average": average}
