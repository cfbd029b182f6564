"""PAWS-X: paraphrase identification, XTREME's sentence-pair classification with 2 labels.

Protocol (XTREME, ``scripts/train_pawsx.sh``; settings in ``xtreme_defaults.py``):

* cross-lingual transfer: train on English ``en/train.tsv``, test on ``test_2k.tsv`` of de en
  es fr ja ko zh; translate-train-all: also every language's ``translated_train.tsv``;
* input ``<s> sentence1 </s></s> sentence2 </s>``, longest-first truncation to 128 tokens, a
  head on ``<s>`` (the XNLI code: ``classification.py``), lr 2e-5, batch 32, 5 epochs, no
  warm-up, no weight decay;
* the kept model: the best English dev accuracy (``en/dev_2k.tsv``), checked after each epoch
  (``--selection en-dev``), or the joint dev set of every tested language (``all-dev``), or the
  final model (``last``); accuracy per language, the average and the transfer gap.

Test predictions go to ``seed-S/predictions/pawsx/test-{lang}.tsv`` (one label 0/1 a line, the
layout XTREME's ``evaluate.py`` reads) and the first seed's also to RUN/predictions/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from ..eval.pawsx_data import LABELS, PAWSX_LANGUAGES, PAWSXDataError, check_pawsx_languages, read_pawsx_split
from ..tokenizer import Tokenizer
from .classification import encode_pairs, finetune_pairs_once, format_pair_results, kept_model
from .seeds import SeedRuns
from .training import FinetuneConfig

SETTINGS = ("cross-lingual-transfer", "translate-train-all")


def run_pawsx(
    model_dir: str | Path,
    data: str | Path,
    output: str | Path,
    config: FinetuneConfig,
    *,
    setting: str = "cross-lingual-transfer",
    seeds: int = 1,
    languages: Sequence[str] | None = None,
    dev_languages: Sequence[str] = ("en",),
    max_length: int = 128,
    max_train_examples: int | None = None,
    device: torch.device | str = "cpu",
    progress: bool = True,
    save_models: bool = True,
    log: Callable[[str], None] = print,
    model_name: str | None = None,
) -> dict[str, Any]:
    """Fine-tune ``seeds`` times on PAWS-X in ``data`` (``DIR/{lang}/*.tsv``, or ``DIR/x-final/…``);
    write OUTPUT/results.json, results.md, seed-S/predictions/pawsx/ and seed-S/model/; return
    the results. ``dev_languages``: the dev sets selection averages (``["en"]``: XTREME's rule;
    empty with ``config.selection == "last"``)."""
    if setting not in SETTINGS:
        raise PAWSXDataError(f"PAWS-X setting {setting!r}: expected one of {', '.join(SETTINGS)}")
    runs = SeedRuns("pawsx", config, seeds, output, log)
    tokenizer = Tokenizer.from_pretrained(model_dir)
    root = Path(data) / "x-final" if (Path(data) / "x-final").is_dir() else Path(data)
    if not root.is_dir():
        raise PAWSXDataError(f"{root}: no such directory; expected PAWS-X's x-final/ with one folder per language")
    languages = check_pawsx_languages(languages)
    train_languages = ["en"] if setting == "cross-lingual-transfer" else list(dict.fromkeys(["en", *languages]))
    train = [x for pairs in read_pawsx_split(root, "train", train_languages).values() for x in pairs[:max_train_examples]]
    test = read_pawsx_split(root, "test", languages)
    dev = read_pawsx_split(root, "dev", list(dev_languages)) if config.selection == "best" else {}
    log(f"[pawsx] {setting}: {len(train)} training pairs, dev {sum(map(len, dev.values()))}, "
        f"test {sum(map(len, test.values()))} pairs in {len(test)} languages")
    train_features = encode_pairs(tokenizer, train, max_length)
    dev_features = {lang: encode_pairs(tokenizer, x, max_length) for lang, x in dev.items()}
    test_features = {lang: encode_pairs(tokenizer, x, max_length) for lang, x in test.items()}
    runs.run(lambda seed_config, seed_dir: finetune_pairs_once(
        model_dir, tokenizer, train_features, dev_features, test_features, seed_config, labels=LABELS,
        device=device, progress=progress, save_to=seed_dir / "model" if save_models else None,
        predictions_to=seed_dir / "predictions" / "pawsx", log=log,
    ))
    described = {
        "setting": setting,
        "model": model_name or str(model_dir),
        "data": {"root": str(root), "train": " ".join(train_languages)},
        "languages": languages,
        "train_examples": len(train),
        "max_length": max_length,
        "selected_on": kept_model(config, dev_features, "accuracy"),
    }
    return runs.finish(described, mean_keys=["test", "test_average", "transfer_gap", "dev_average"],
                       std_keys=["test_average"], predictions=True,
                       markdown=lambda r: format_pair_results(r, f"PAWS-X, {setting}", PAWSX_LANGUAGES))


__all__ = ["SETTINGS", "run_pawsx"]
