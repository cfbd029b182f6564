"""Tests for infoxlm.data.multiway: xx–yy pairs drawn through a shared pivot sentence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from training_stores import write_parallel, write_store

from infoxlm.data.pipeline import DataPipeline, PipelineConfig
from infoxlm.data.store import TokenStore

# English sentence k is [10 + k, 50, 51]; its German [100 + k, 60], French [140 + k, 70].
# en-de holds k = 0…19 and en-fr k = 10…29: k = 10…19 are multi-parallel. en-sw shares none.
ENGLISH = {k: [10 + k, 50, 51] for k in range(40)}
LANGUAGE_OF = {60: "de", 70: "fr", 80: "sw"}
CONFIG = dict(mmlm_batch_size=0, tlm_batch_size=64, xlco_batch_size=32, tlm_max_length=32, xlco_max_length=32,
              max_tokens=512, mask_prob=0.0, seed=3)  # fmt: skip


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> TokenStore:
    root = write_store(tmp_path_factory.mktemp("multiway") / "store", vocab_size=250)
    write_parallel(root, "en-de", [(ENGLISH[k], [100 + k, 60]) for k in range(20)])
    write_parallel(root, "en-fr", [(ENGLISH[k], [140 + k, 70]) for k in range(10, 30)])
    write_parallel(root, "en-sw", [(ENGLISH[k], [200 + k - 30, 80]) for k in range(30, 40)])
    return TokenStore.open(root)


def sentences(row: list[int]) -> list[tuple[str, int]]:
    """A TLM row <s> a </s> b </s> → [(language, k)] of its two sentences."""
    out = []
    for sentence in np.split(np.array(row[1:-1]), np.flatnonzero(np.array(row[1:-1]) == 2)):
        s = [t for t in sentence.tolist() if t != 2]
        if s[-1] == 51:
            out.append(("en", s[0] - 10))
        else:
            language = LANGUAGE_OF[s[-1]]
            out.append((language, s[0] - {"de": 100, "fr": 140, "sw": 170}[language]))
    return out


def rows(pipeline: DataPipeline, step: int) -> list[list[tuple[str, int]]]:
    seqs = pipeline.examples("tlm", step, np.arange(64))[0].inputs
    return [sentences(seqs.values[a:b].tolist()) for a, b in zip(seqs.offsets[:-1], seqs.offsets[1:])]


def test_every_pair_whose_pivot_another_corpus_holds_becomes_a_translation_pair_of_its_two_languages(store):
    english = DataPipeline(store, PipelineConfig(**CONFIG))
    multiway = DataPipeline(store, PipelineConfig(**CONFIG, pairs="multiway", multiway_share=1.0))
    assert multiway.pivot_groups.shared == 20  # k = 10…19, in en-de and in en-fr
    seen = set()
    for step in range(4):
        for stored, drawn in zip(rows(english, step), rows(multiway, step)):
            (_, k) = stored[0]
            assert {k for _, k in drawn} == {k}  # still translations of one sentence
            if 10 <= k <= 19:  # shared: always xx–yy, German and French, in either order
                assert sorted(language for language, _ in drawn) == ["de", "fr"]
                seen.add(tuple(language for language, _ in drawn))
            else:
                assert drawn == stored
    assert seen == {("de", "fr"), ("fr", "de")}


def test_a_share_of_the_pairs_goes_through_the_pivot_and_none_by_default(store):
    english = DataPipeline(store, PipelineConfig(**CONFIG))
    assert english.pivot_groups is None
    none = DataPipeline(store, PipelineConfig(**CONFIG, pairs="multiway", multiway_share=0.0))
    assert all(rows(none, t) == rows(english, t) for t in range(3))
    half = DataPipeline(store, PipelineConfig(**CONFIG, pairs="multiway", multiway_share=0.5))
    drawn = [r for t in range(20) for r in rows(half, t) if 10 <= r[0][1] <= 19]
    through = sum("en" not in {language for language, _ in r} for r in drawn) / len(drawn)
    assert 0.4 < through < 0.6, through
    assert rows(half, 7) == rows(DataPipeline(store, PipelineConfig(**CONFIG, pairs="multiway", multiway_share=0.5)), 7)


def test_the_contrast_views_go_through_the_pivot_too_and_the_sources_say_so(store):
    multiway = DataPipeline(store, PipelineConfig(**CONFIG, pairs="multiway", multiway_share=1.0, mixup=False))
    names = multiway.sources("xlco", 0, np.arange(32))
    via = [n for n in names if " via en to " in n]
    assert via and all(n.endswith(("(de→fr)", "(fr→de)")) for n in via)
    query, key, _ = multiway.examples("xlco", 0, np.arange(32))
    firsts = lambda seqs: [seqs.inputs.values[a + 2] for a in seqs.inputs.offsets[:-1]]  # noqa: E731 (the language mark)
    pairs = {(LANGUAGE_OF.get(q), LANGUAGE_OF.get(k)) for q, k in zip(firsts(query), firsts(key))}
    assert ("de", "fr") in pairs or ("fr", "de") in pairs


@pytest.mark.parametrize("change,message", [(dict(pairs="all"), "pairs must be one of english, multiway"),
                                            (dict(multiway_share=1.5), "multiway_share"), (dict(pivot=""), "pivot")])
def test_bad_multiway_settings(change, message):
    with pytest.raises(ValueError, match=message):
        PipelineConfig(**change)
