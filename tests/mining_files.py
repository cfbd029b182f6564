"""Small mining test sets in the official formats: BUCC 2018 and Flores-200.

Sentences are random strings of the words of ``TINY_TEXT`` (what the tiny test tokenizer
knows). A hidden "translation" is the same sentence, so a random encoder finds it: the protocol
is what these sets test, not a model.
"""

from __future__ import annotations

import random
from pathlib import Path

from conftest import TINY_TEXT

WORDS = sorted({w for lines in TINY_TEXT.values() for line in lines for w in line.rstrip(".。").split()})


def sentences(n: int, seed: int) -> list[str]:
    """``n`` distinct random sentences of 4 to 9 words."""
    rng, out = random.Random(seed), {}
    while len(out) < n:
        out.setdefault(" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) + ".", None)
    return list(out)


def write_side(path: Path, ids: list[str], texts: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{i}\t{t}\n" for i, t in zip(ids, texts)), encoding="utf-8")
    return path


def write_bucc(folder: Path, xx: str, split: str, n: int = 120, hidden: int = 30, gold: bool = True, seed: int = 0) -> set:
    """``{xx}-en.{split}.{xx,en[,gold]}``: n sentences a side, the first ``hidden`` of the xx side
    also on the English side (shuffled among the rest); returns the gold pairs (xx id, en id)."""
    rng = random.Random(seed)
    pool = sentences(2 * n, seed)
    src, trg = pool[:n], pool[:hidden] + pool[n : 2 * n - hidden]
    order = list(range(n))
    rng.shuffle(order)
    trg = [trg[i] for i in order]
    src_ids = [f"{xx}-{seed:02d}{i:06d}" for i in range(n)]
    trg_ids = [f"en-{seed:02d}{i:06d}" for i in range(n)]
    write_side(folder / f"{xx}-en.{split}.{xx}", src_ids, src)
    write_side(folder / f"{xx}-en.{split}.en", trg_ids, trg)
    pairs = {(src_ids[i], trg_ids[order.index(i)]) for i in range(hidden)}
    if gold:
        (folder / f"{xx}-en.{split}.gold").write_text("".join(f"{s}\t{t}\n" for s, t in sorted(pairs)), encoding="utf-8")
    return pairs


def write_bucc_set(folder: Path, languages=("de", "fr"), n: int = 120, hidden: int = 30) -> Path:
    """The shipped splits of each pair: sample and training with gold, test without."""
    for k, xx in enumerate(languages):
        for j, split in enumerate(("sample", "training", "test")):
            write_bucc(folder, xx, split, n=n, hidden=hidden, gold=split != "test", seed=10 * k + j)
    return folder


def write_flores(folder: Path, languages=("eng_Latn", "deu_Latn", "fra_Latn", "rus_Cyrl", "zho_Hans"), n: int = 60,
                 splits=("dev", "devtest")) -> Path:
    """``{split}/{lang}.{split}``: every language the same n lines, but for a few words a
    language of its own changes (so not every line is found)."""
    for s, split in enumerate(splits):
        base = sentences(n, 100 + s)
        for k, lang in enumerate(languages):
            rng = random.Random(k)
            lines = [line if k == 0 or rng.random() < 0.8 else " ".join(rng.sample(WORDS, 5)) + "." for line in base]
            (folder / split).mkdir(parents=True, exist_ok=True)
            (folder / split / f"{lang}.{split}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder
