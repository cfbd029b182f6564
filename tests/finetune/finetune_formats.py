"""Writers of tiny data files in the exact official formats (XNLI-1.0, XNLI-MT-1.0, SQuAD v1.1, MLQA)."""

from __future__ import annotations

import json
import random
from pathlib import Path

# The 19 columns of XNLI-1.0's xnli.{dev,test}.tsv: sentence1 at index 6, sentence2 at 7.
XNLI_HEADER = [
    "language", "gold_label", "sentence1_binary_parse", "sentence2_binary_parse", "sentence1_parse",
    "sentence2_parse", "sentence1", "sentence2", "promptID", "pairID", "genre", "label1", "label2",
    "label3", "label4", "label5", "sentence1_tokenized", "sentence2_tokenized", "match",
]
LABELS = ["entailment", "neutral", "contradiction"]
# A learnable toy NLI task: the premise alone decides the label.
PREMISES = {
    "entailment": "The cat sleeps on the warm sofa.",
    "neutral": "Open the file and save it.",
    "contradiction": "We walked to the old bridge.",
}
HYPOTHESES = ["Die Katze schläft.", "Мы пошли к мосту.", "打开文件并保存。", "The dog ate the bone."]


def toy_pairs(n: int, seed: int) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    return [(PREMISES[label], rng.choice(HYPOTHESES), label) for label in (rng.choice(LABELS) for _ in range(n))]


def write_xnli(root: Path, languages=("en", "de"), n_train=48, n_eval=12) -> Path:
    """root/XNLI-1.0/xnli.{dev,test}.tsv and root/XNLI-MT-1.0/multinli/multinli.train.{lang}.tsv."""
    for split, seed in (("dev", 1), ("test", 2)):
        rows = [XNLI_HEADER]
        for lang in languages:
            for premise, hypothesis, label in toy_pairs(n_eval, seed):
                rows.append([lang, label, "( x )", "( y )", "(ROOT x)", "(ROOT y)", premise, hypothesis,
                             "1", "2", "fiction", label, label, label, label, label, premise, hypothesis, "True"])
        path = root / "XNLI-1.0" / f"xnli.{split}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    for lang in languages:
        path = root / "XNLI-MT-1.0" / "multinli" / f"multinli.train.{lang}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = ["premise\thypo\tlabel"] + [
            f"{p}\t{h}\t{'contradictory' if label == 'contradiction' else label}" for p, h, label in toy_pairs(n_train, 3)
        ]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


SENTENCES = ["The cat sleeps on the warm sofa.", "Open the file and save it.", "The dog ate the bone."]
ANSWER_SENTENCE = "We walked to the old bridge."


def toy_squad(n: int, seed: int, prefix: str = "q") -> dict:
    """SQuAD v1.1 JSON where the answer is always "old bridge", at a varying place in the context."""
    rng = random.Random(seed)
    paragraphs = []
    for i in range(n):
        sentences = list(SENTENCES)
        rng.shuffle(sentences)
        at = rng.randrange(len(sentences) + 1)
        sentences.insert(at, ANSWER_SENTENCE)
        context = " ".join(sentences)
        start = context.index("old bridge")
        paragraphs.append({"context": context, "qas": [{
            "id": f"{prefix}{i}", "question": "Where did we walk to?",
            "answers": [{"text": "old bridge", "answer_start": start}],
        }]})
    return {"version": "1.1", "data": [{"title": "Toy", "paragraphs": paragraphs}]}


def write_mlqa(root: Path, languages=("en", "de"), n=6) -> Path:
    """root/{dev,test}/{split}-context-{c}-question-{q}.json for every pair (version "1.0", as MLQA)."""
    for split in ("dev", "test"):
        for c in languages:
            for q in languages:
                data = toy_squad(n, seed=hash((split, c, q)) % 1000, prefix=f"{split}-{c}-{q}-")
                data["version"] = "1.0"
                path = root / split / f"{split}-context-{c}-question-{q}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return root
