"""Writers of tiny data files in the exact official formats (XNLI-1.0, XNLI-MT-1.0, SQuAD v1.1, MLQA)."""

from __future__ import annotations

import json
import random
import zlib
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


PAWSX_HEADER = "id\tsentence1\tsentence2\tlabel"


def write_pawsx(root: Path, languages=("en", "de"), n_train=32, n_eval=8) -> Path:
    """PAWS-X's x-final layout: root/{lang}/{dev_2k,test_2k}.tsv, en/train.tsv, the others'
    translated_train.tsv; header id sentence1 sentence2 label. The label: whether the pair is a
    sentence and itself (1) or two different sentences (0)."""
    def rows(n: int, seed: int) -> str:
        rng = random.Random(seed)
        lines = [PAWSX_HEADER]
        for i in range(n):
            a = rng.choice(SENTENCES + [ANSWER_SENTENCE])
            same = rng.random() < 0.5
            b = a if same else rng.choice([s for s in SENTENCES + [ANSWER_SENTENCE] if s != a])
            lines.append(f"{i + 1}\t{a}\t{b}\t{int(same)}")
        return "\n".join(lines) + "\n"

    for lang in languages:
        folder = root / lang
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "dev_2k.tsv").write_text(rows(n_eval, 1), encoding="utf-8")
        (folder / "test_2k.tsv").write_text(rows(n_eval, 2), encoding="utf-8")
        (folder / ("train.tsv" if lang == "en" else "translated_train.tsv")).write_text(rows(n_train, 3), encoding="utf-8")
    return root


def write_xquad(root: Path, languages=("en", "de"), n=4) -> Path:
    """root/xquad.{lang}.json (XQuAD's files, version "1.0")."""
    root.mkdir(parents=True, exist_ok=True)
    for lang in languages:
        data = toy_squad(n, seed=len(lang) + ord(lang[0]), prefix=f"xquad-{lang}-")
        data["version"] = "1.0"
        (root / f"xquad.{lang}.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return root


def write_squad(root: Path, n_train=16, n_dev=4) -> Path:
    """root/train-v1.1.json and root/dev-v1.1.json (SQuAD v1.1); returns the training file."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "train-v1.1.json").write_text(json.dumps(toy_squad(n_train, seed=0)), encoding="utf-8")
    (root / "dev-v1.1.json").write_text(json.dumps(toy_squad(n_dev, seed=9, prefix="dev")), encoding="utf-8")
    return root / "train-v1.1.json"


TYDIQA_NAMES = {"ar": "arabic", "bn": "bengali", "en": "english", "fi": "finnish", "id": "indonesian",
                "ko": "korean", "ru": "russian", "sw": "swahili", "te": "telugu"}
PAWSX_LANGUAGES = ("de", "en", "es", "fr", "ja", "ko", "zh")
XQUAD_LANGUAGES = ("ar", "de", "el", "en", "es", "hi", "ru", "th", "tr", "vi", "zh")


def write_tydiqa(root: Path, languages=("en", "fi"), n_train=12, n_dev=4) -> Path:
    """TyDiQA-GoldP v1.1 as released: root/tydiqa-goldp-v1.1-train.json (English questions and
    Finnish ones, ids "{language name}-{number}-{k}") and root/tydiqa-goldp-v1.1-dev/
    tydiqa-goldp-dev-{name}.json."""
    root.mkdir(parents=True, exist_ok=True)
    train = toy_squad(n_train, seed=0, prefix="english--1234-")
    finnish = toy_squad(n_train // 2, seed=1, prefix="finnish--5678-")
    train["data"][0]["paragraphs"] += finnish["data"][0]["paragraphs"]
    (root / "tydiqa-goldp-v1.1-train.json").write_text(json.dumps(train), encoding="utf-8")
    for lang in languages:
        name = TYDIQA_NAMES[lang]
        path = root / "tydiqa-goldp-v1.1-dev" / f"tydiqa-goldp-dev-{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(toy_squad(n_dev, seed=5, prefix=f"{name}--99-")), encoding="utf-8")
    return root


# Three LibreOffice modules of the demo's classification set stand for XNLI's three labels.
DEMO_LABELS = {"calc": "entailment", "math": "neutral", "writer": "contradiction"}


def write_demo_xnli(root: Path, languages=("en", "de", "fr", "es"), n_eval=60) -> Path:
    """An XNLI-format set built from the shipped demo corpus (real text, real translations): a
    pair is two help paragraphs of one LibreOffice module (calc, math or writer), labelled by
    the module. English training pairs (all of the English train split), dev and test pairs in
    ``languages`` (the translated test paragraphs; dev its first ``n_eval`` per language, test
    the rest). A topic task in XNLI's shape: it measures whether a fine-tuning schedule learns
    at all, not natural-language inference."""
    from infoxlm.demo import corpus

    def pairs(rows):
        by_label = {label: [text for module, text in rows if module == m] for m, label in DEMO_LABELS.items()}
        out = []
        for label, texts in by_label.items():
            out += [(a, b, label) for a, b in zip(texts, texts[1:] + texts[:1])]
        return sorted(out, key=lambda p: zlib.crc32(p[0].encode()))  # the labels interleaved, the same each run

    split_rows = {"dev": [XNLI_HEADER], "test": [XNLI_HEADER]}
    for lang in languages:
        examples = pairs(corpus.classification(lang, "test"))
        for split, part in (("dev", examples[:n_eval]), ("test", examples[n_eval:])):
            for premise, hypothesis, label in part:
                split_rows[split].append([lang, label, "", "", "", "", premise, hypothesis, "1", "2", "help",
                                          label, label, label, label, label, premise, hypothesis, "True"])
    for split, rows in split_rows.items():
        path = root / "XNLI-1.0" / f"xnli.{split}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    train = root / "XNLI-MT-1.0" / "multinli" / "multinli.train.en.tsv"
    train.parent.mkdir(parents=True, exist_ok=True)
    lines = ["premise\thypo\tlabel"] + [
        f"{p}\t{h}\t{'contradictory' if label == 'contradiction' else label}"
        for p, h, label in pairs(corpus.classification("en", "train"))
    ]
    train.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
