"""Checks on the shipped demo corpus: it loads, it is NFC, its splits are apart, the manifest is true."""

from __future__ import annotations

import gzip
import hashlib
import unicodedata
from collections import Counter

import pytest

from infoxlm.demo import corpus
from infoxlm.errors import DataError

LANGUAGES = ["ar", "bg", "de", "el", "es", "fr", "hi", "ru", "sw", "th", "tr", "ur", "vi", "zh"]
# Firefox, the held-out source, has no Swahili; every language has a test set (Swahili and
# Urdu small ones, from Django).
NO_HELDOUT = {"sw"}
# Help translated well enough for a balanced classification test set.
CLASSIFICATION_TEST = {"en", "de", "el", "es", "fr", "ru", "tr", "vi", "zh"}
SPLITS = ("dev", "test", "heldout")


@pytest.fixture(scope="module")
def lines() -> dict[str, list[str]]:
    """Every data file of the corpus, read once: file name -> lines."""
    out = {}
    for path in sorted(corpus.corpus_dir().glob("*.gz")):
        with gzip.open(path, "rt", encoding="utf-8", newline="\n") as f:
            out[path.name] = f.read().split("\n")[:-1]
    return out


@pytest.fixture(scope="module")
def keys(lines) -> dict[str, dict[str, set[str]]]:
    """Normalised text per language and role: train / dev / test / heldout / cls."""
    k: dict[str, dict[str, set[str]]] = {lang: {r: set() for r in ("train", *SPLITS, "cls")} for lang in ["en", *LANGUAGES]}
    for lang in LANGUAGES:
        for en, xx in corpus.load_parallel(lang):
            k["en"]["train"].add(corpus.overlap_key(en))
            k[lang]["train"].add(corpus.overlap_key(xx))
        for split in SPLITS:
            if lang in corpus.retrieval_languages(split):
                xx, en = corpus.retrieval_pairs(lang, split)
                k[lang][split] |= set(map(corpus.overlap_key, xx))
                k["en"][split] |= set(map(corpus.overlap_key, en))
    for lang in ["en", *LANGUAGES]:
        k[lang]["train"] |= {corpus.overlap_key(t) for t in corpus.load_monolingual(lang) if t}
    for name, rows in lines.items():
        if name.startswith("classification."):
            lang = name.split(".")[1]
            k[lang]["cls"] |= {corpus.overlap_key(r.split("\t", 1)[1]) for r in rows}
    return k


def test_manifest_lists_exactly_the_files_with_their_sizes_and_hashes(lines):
    files = corpus.manifest()["files"]
    assert set(files) == set(lines)
    for name, meta in files.items():
        data = (corpus.corpus_dir() / name).read_bytes()
        assert meta["bytes"] == len(data), name
        assert meta["sha256"] == hashlib.sha256(data).hexdigest(), name
        assert meta["lines"] == len(lines[name]), name
        assert meta["licence"] in ("MPL-2.0", "BSD-3-Clause", "BSD-3-Clause AND MPL-2.0"), name
    assert corpus.manifest()["total_bytes"] == sum(f["bytes"] for f in files.values())
    for doc in ("README.md", "LICENSES.md", "LICENSE.MPL-2.0.txt", "LICENSE.Django-BSD-3-Clause.txt"):
        assert (corpus.corpus_dir() / doc).is_file(), doc


def test_shipped_size_stays_small():
    total = sum(p.stat().st_size for p in corpus.corpus_dir().iterdir() if p.is_file())
    assert total <= 4.2e6


def test_every_line_is_nfc_clean_text(lines):
    for name, rows in lines.items():
        for number, row in enumerate(rows, start=1):
            assert unicodedata.is_normalized("NFC", row), f"{name}:{number} is not NFC"
            assert "\r" not in row and row == row.strip(), f"{name}:{number} has stray whitespace"
            if not name.startswith("mono."):  # blank lines separate documents only there
                assert row, f"{name}:{number} is empty"
            tabs = 1 if name.endswith(".tsv.gz") else 0
            assert row.count("\t") == tabs, f"{name}:{number}: expected {tabs} tab(s)"


def test_manifest_counts_match_the_files():
    counts = corpus.manifest()["counts"]
    for lang in LANGUAGES:
        assert counts[lang]["parallel"]["pairs"] == len(corpus.load_parallel(lang))
        for split in SPLITS:
            n = counts[lang][split]
            if n:
                xx, en = corpus.retrieval_pairs(lang, split)
                assert len(xx) == len(en) == n, (lang, split)
    for lang in ["en", *LANGUAGES]:
        mono = corpus.load_monolingual(lang)
        assert counts[lang]["monolingual"]["lines"] == sum(1 for t in mono if t)
        assert counts[lang]["monolingual"]["documents"] == mono.count("") + 1
        for split in ("train", "test"):
            if f"classification_{split}" in counts[lang] and counts[lang][f"classification_{split}"]:
                labels = Counter(label for label, _ in corpus.classification(lang, split))
                assert dict(labels) == counts[lang][f"classification_{split}"]


def test_tatoeba_files_are_line_aligned_and_small(lines):
    limits = {"tatoeba-dev": 300, "tatoeba": 1000, "tatoeba-heldout": 1000}
    for lang in LANGUAGES:
        code = corpus.tatoeba_code(lang)
        for prefix in limits:
            xx, en = f"{prefix}.{code}-eng.{code}.gz", f"{prefix}.{code}-eng.eng.gz"
            if xx in lines or en in lines:
                assert len(lines[xx]) == len(lines[en]) <= limits[prefix], xx
                assert all(e[-1] in ".?!" and 4 <= len(e.split()) <= 40 for e in lines[en]), en


def test_languages_present_where_the_sources_have_them():
    assert corpus.languages() == LANGUAGES
    assert corpus.retrieval_languages("test") == LANGUAGES
    assert corpus.retrieval_languages("dev") == LANGUAGES
    assert set(LANGUAGES) - set(corpus.retrieval_languages("heldout")) == NO_HELDOUT
    big = [lang for lang in LANGUAGES if lang not in ("sw", "ur")]
    assert all(len(corpus.retrieval_pairs(lang, "test")[0]) >= 900 for lang in big)
    assert all(len(corpus.load_parallel(lang)) >= 2000 for lang in big)
    with pytest.raises(DataError, match="no heldout retrieval set for sw"):
        corpus.retrieval_pairs("sw", "heldout")
    assert corpus.retrieval_pairs("deu", "dev") == corpus.retrieval_pairs("de", "dev")


def test_no_sentence_is_in_two_splits_on_either_side(keys):
    roles = ("train", *SPLITS, "cls")
    for lang, by_role in keys.items():
        for i, a in enumerate(roles):
            for b in roles[i + 1 :]:
                shared = by_role[a] & by_role[b]
                assert not shared, f"{lang}: {len(shared)} texts in both {a} and {b}, e.g. {sorted(shared)[:3]}"


def test_no_eval_sentence_hides_inside_a_training_paragraph(keys):
    for lang, by_role in keys.items():
        if lang == "en":
            continue  # English training text is large; its lines are checked exactly above
        train = "\n".join(sorted(by_role["train"]))
        for split in SPLITS:
            inside = [s for s in by_role[split] if s in train]
            assert not inside, f"{lang} {split}: {len(inside)} sentences inside training text, e.g. {inside[:3]}"


def test_classification_sets_are_balanced_over_the_labels():
    labels = corpus.manifest()["classification_labels"]
    assert set(labels) >= {"writer", "calc", "impress", "draw", "math"}
    have = {p.name.split(".")[1] for p in corpus.corpus_dir().glob("classification.*.test.tsv.gz")}
    assert have == CLASSIFICATION_TEST
    train_texts = {corpus.overlap_key(t) for _, t in corpus.classification("en", "train")}
    assert not train_texts & {corpus.overlap_key(t) for _, t in corpus.classification("en", "test")}
    train = Counter(label for label, _ in corpus.classification("en"))
    assert set(train) == set(labels) and len(set(train.values())) == 1 and min(train.values()) >= 100
    for lang in sorted(CLASSIFICATION_TEST):
        test = Counter(label for label, _ in corpus.classification(lang, "test"))
        assert set(test) == set(labels) and len(set(test.values())) == 1, (lang, test)


def test_export_writes_plain_files_for_prepare(tmp_path):
    paths = corpus.export_training_text(tmp_path)
    assert set(paths["mono"]) == {"en", *LANGUAGES}
    assert set(paths["parallel"]) == {f"en-{lang}" for lang in LANGUAGES}
    first = paths["parallel"]["en-de"].read_text(encoding="utf-8").split("\n")[0]
    assert first == "\t".join(corpus.load_parallel("de")[0])
    assert paths["mono"]["fr"].read_text(encoding="utf-8").split("\n")[:-1] == corpus.load_monolingual("fr")
    written = corpus.export_retrieval(tmp_path / "heldout", "heldout")
    xx_path, en_path = written["de"]
    assert xx_path.name == "tatoeba.deu-eng.deu" and en_path.name == "tatoeba.deu-eng.eng"
    assert len(xx_path.read_text(encoding="utf-8").splitlines()) == len(en_path.read_text(encoding="utf-8").splitlines())


def test_unknown_language_and_split_are_explained():
    with pytest.raises(DataError, match="no language 'xx'"):
        corpus.load_parallel("xx")
    with pytest.raises(DataError, match="expected one of dev, test, heldout"):
        corpus.retrieval_pairs("de", "train")
