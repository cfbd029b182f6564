"""BUCC 2018 bitext mining as LASER scores it, at one layer or all of them.

For each split of a pair, the distinct sentences of each side are embedded once (LASER's
``--unify``) and the candidates mined with the ratio margin, k = 4, strategy ``max``
(:mod:`~infoxlm.eval.margin`; LASER's ``mine_bitexts.py --mode mine --retrieval max --margin
ratio -k 4``): each source's and each target's best candidate, merged best score first, each
sentence used once, kept when its score is above 0. Then LASER's ``tasks/bucc/bucc.py`` (XTREME's ``utils_retrieve.py`` is the
same):

* candidates are mapped back to ids by their text (stripped of surrounding space); a text that
  occurs twice in a side has no id and its candidates are dropped (its gold pairs stay, unfound);
  of two candidates with the same ids the better score is kept;
* on the tuning split, the candidates sorted by score are swept and the threshold is the midpoint
  between the score at which F1 is highest (first reached) and the next one (``BuccOptimize``);
* on every split, the candidates scoring at least the threshold are the mined pairs: precision,
  recall and F1 against the gold pairs, or, for a split without gold, the pairs written as
  XTREME's prediction file ``{split}-{xx}.tsv`` (``xx-id<TAB>en-id``).

F1 on the tuning split is the figure LASER's README gives (92–96 F1 on ``training``); the
official test scores came from the organisers, as XTREME's do from its server.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np
import torch

from ..embedding import embed_layers
from ..model.encoder import Encoder
from ..tokenizer import Tokenizer
from .bucc_data import BuccSide, BuccSplit
from .margin import MarginOptions, MinedPairs, margin_pairs, unique_texts

# LASER's mining of BUCC: ratio margin, k = 4, the better direction wins.
BUCC_MARGIN = MarginOptions(k=4, margin="ratio", strategy="max")
# Rows of a similarity block: (rows × the other side) float32 values stay within 256 MB.
_BLOCK_VALUES = 1 << 26

Candidates = dict[tuple[str, str], float]  # (xx id, en id) → margin score


def text_ids(side: BuccSide) -> dict[str, str]:
    """Stripped text → id, without the texts that occur twice in the side (they have no one id).

    >>> from pathlib import Path
    >>> text_ids(BuccSide(Path("x"), ["a1", "a2", "a3"], ["Hi ", "Yo", "Hi"]))
    {'Yo': 'a2'}
    """
    ids: dict[str, str] = {}
    repeated = set()
    for id_, text in zip(side.ids, side.texts):
        key = text.strip()
        if key in ids:
            repeated.add(key)
        else:
            ids[key] = id_
    return {text: id_ for text, id_ in ids.items() if text not in repeated}


def id_candidates(split: BuccSplit, mined: MinedPairs, src_texts: Sequence[str], trg_texts: Sequence[str]) -> Candidates:
    """Mined rows (of ``src_texts`` / ``trg_texts``, the distinct texts) → {(xx id, en id): score},
    in the order mined; candidates without ids dropped, the best of repeated ones kept."""
    src_ids, trg_ids = text_ids(split.src), text_ids(split.trg)
    out: Candidates = {}
    for s, t, score in zip(mined.src.tolist(), mined.trg.tolist(), mined.score.tolist()):
        src_id, trg_id = src_ids.get(src_texts[s].strip()), trg_ids.get(trg_texts[t].strip())
        if src_id is not None and trg_id is not None:
            key = (src_id, trg_id)
            out[key] = max(score, out.get(key, score))
    return out


def tune_threshold(candidates: Candidates, gold: frozenset[tuple[str, str]]) -> float:
    """The score threshold that maximises F1 of ``candidates`` against ``gold`` (LASER's
    ``BuccOptimize``, :func:`best_f1_threshold`)."""
    keys = list(candidates)
    scores = np.fromiter((candidates[k] for k in keys), dtype=np.float64, count=len(keys))
    is_gold = np.fromiter((k in gold for k in keys), dtype=bool, count=len(keys))
    return best_f1_threshold(scores, is_gold, len(gold))


def best_f1_threshold(scores: np.ndarray, is_gold: np.ndarray, n_gold: int) -> float:
    """LASER's ``BuccOptimize`` on candidates' scores (m,) and whether each is gold (m,): best
    score first, F1 of each prefix against ``n_gold`` pairs; at the first highest, the midpoint
    of its score and the next one's (its own when it is the last). 0 when none is gold.

    >>> best_f1_threshold(np.array([3.0, 2.0, 1.0]), np.array([True, True, False]), 2)
    1.5
    """
    order = np.argsort(-scores, kind="stable")
    correct = np.cumsum(is_gold[order])  # (m,) gold pairs among the first i+1
    if len(correct) == 0 or correct[-1] == 0:
        return 0.0
    precision, recall = correct / np.arange(1, len(order) + 1), correct / n_gold
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(correct > 0, 2 * precision * recall / (precision + recall), 0.0)
    best = int(np.argmax(f1))  # the first prefix with the highest F1, as LASER's strict ">"
    following = scores[order[min(best + 1, len(order) - 1)]]
    return float((scores[order[best]] + following) / 2)


def extract(candidates: Candidates, threshold: float) -> list[tuple[str, str]]:
    """The pairs scoring at least ``threshold``, best first."""
    kept = [(score, key) for key, score in candidates.items() if score >= threshold]
    return [key for _, key in sorted(kept, key=lambda item: -item[0])]


def score_pairs(extracted: Sequence[tuple[str, str]], gold: frozenset[tuple[str, str]]) -> dict[str, float]:
    """Precision, recall and F1 (percent) of mined pairs against the gold pairs."""
    correct = len(gold.intersection(extracted))
    if correct == 0:
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    precision, recall = correct / len(extracted), correct / len(gold)
    return {"precision": 100 * precision, "recall": 100 * recall, "f1": 100 * 2 * precision * recall / (precision + recall)}


def mine_candidates(src: np.ndarray, trg: np.ndarray, device: torch.device | str = "cpu") -> MinedPairs:
    """Margin-mined candidates between the distinct texts' vectors (n_src, d) and (n_trg, d)."""
    rows = max(1, min(BUCC_MARGIN.chunk, _BLOCK_VALUES // max(len(src), len(trg))))
    mined = margin_pairs(torch.as_tensor(src).to(device), torch.as_tensor(trg).to(device), replace(BUCC_MARGIN, chunk=rows))
    positive = mined.score > 0  # what LASER's mine mode writes at its default threshold, 0
    return MinedPairs(mined.src[positive], mined.trg[positive], mined.score[positive])


def split_result(split: BuccSplit, candidates: Candidates, threshold: float, tuned: bool) -> tuple[dict, list[tuple[str, str]]]:
    """One split's entry of the results (threshold, counts, P/R/F1 when it has gold) and its mined pairs."""
    mined = extract(candidates, threshold)
    entry = {"threshold": threshold, "tuned_here": tuned, "candidates": len(candidates), "mined": len(mined),
             "src_sentences": len(split.src.ids), "trg_sentences": len(split.trg.ids)}
    if split.gold is not None:
        entry.update(gold=len(split.gold), **score_pairs(mined, split.gold))
    return entry, mined


def evaluate_bucc(
    encoder: Encoder,
    tokenizer: Tokenizer,
    splits: Sequence[BuccSplit],
    layers: Sequence[int],
    tune_on: str,
    *,
    pooling: str = "mean",
    batch_size: int = 64,
    progress: bool = False,
) -> tuple[dict[int, dict], dict[int, dict[tuple[str, str], list[tuple[str, str]]]]]:
    """Every split of every pair at each layer, the threshold of each (pair, layer) tuned on
    ``tune_on``. Mining runs on the encoder's device.

    Returns ({layer: {"layer", "pooling", "tune_on", "pairs": {pair: {split: entry}},
    "average": {split: {"precision", "recall", "f1"}}}}, {layer: {(pair, split): mined id pairs}}
    for the splits without gold).
    """
    device = next(encoder.parameters()).device
    kwargs = dict(pooling=pooling, batch_size=batch_size, progress=progress)
    candidates: dict[int, dict[tuple[str, str], Candidates]] = {k: {} for k in layers}
    for i, split in enumerate(splits, start=1):
        src_texts, _ = unique_texts(split.src.texts)
        trg_texts, _ = unique_texts(split.trg.texts)
        label = f"{split.pair} {split.name} ({i}/{len(splits)})"  # "de-en training (2/6): de"
        src = embed_layers(encoder, tokenizer, src_texts, layers, desc=f"{label}: {split.language}", **kwargs)
        trg = embed_layers(encoder, tokenizer, trg_texts, layers, desc=f"{label}: en", **kwargs)
        for k in layers:
            mined = mine_candidates(src[k], trg[k], device)
            candidates[k][(split.pair, split.name)] = id_candidates(split, mined, src_texts, trg_texts)
    blocks, predictions = {}, {}
    for k in layers:
        block, predictions[k] = _layer_block(splits, candidates[k], tune_on)
        blocks[k] = {"layer": k, "pooling": pooling, **block}
    return blocks, predictions


def _layer_block(splits: Sequence[BuccSplit], candidates: dict[tuple[str, str], Candidates],
                 tune_on: str) -> tuple[dict, dict[tuple[str, str], list[tuple[str, str]]]]:
    """One layer's results: each pair's threshold tuned on ``tune_on``, applied to its splits."""
    thresholds = {s.pair: tune_threshold(candidates[(s.pair, s.name)], s.gold) for s in splits if s.name == tune_on}
    pairs: dict[str, dict[str, dict]] = {}
    predictions = {}
    for split in splits:
        threshold = thresholds[split.pair]
        entry, mined = split_result(split, candidates[(split.pair, split.name)], threshold, split.name == tune_on)
        pairs.setdefault(split.pair, {})[split.name] = entry
        if split.gold is None:
            predictions[(split.pair, split.name)] = mined
    scored = sorted({s.name for s in splits if s.gold is not None}, key=[s.name for s in splits].index)
    average = {
        name: {m: float(np.mean([p[name][m] for p in pairs.values() if name in p])) for m in ("precision", "recall", "f1")}
        for name in scored
    }
    return {"tune_on": tune_on, "pairs": pairs, "average": average}, predictions
