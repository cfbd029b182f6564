"""Tests for infoxlm.corpus.show: a step's examples decoded, masks and specials visible."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TINY_TEXT

from infoxlm.data.pipeline import DataPipeline, PipelineConfig
from infoxlm.corpus.prepare import prepare_monolingual, prepare_parallel
from infoxlm.corpus.show import render_sequence, render_step
from infoxlm.data.store import TokenStore
from infoxlm.errors import DataError
from infoxlm.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def store(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("show")
    (root / "de.txt").write_text("\n".join(TINY_TEXT["de"] * 4) + "\n", encoding="utf-8")
    (root / "en.txt").write_text("\n".join(TINY_TEXT["en"]) + "\n", encoding="utf-8")
    (root / "ru.txt").write_text("\n".join(TINY_TEXT["ru"]) + "\n", encoding="utf-8")
    prepare_monolingual("de", [root / "de.txt"], tiny_model_dir, root / "store", show_progress=False)
    prepare_parallel("en-ru", tiny_model_dir, root / "store", src=root / "en.txt", tgt=root / "ru.txt", show_progress=False)
    return TokenStore.open(root / "store")


def test_masked_positions_show_input_and_original(tiny_model_dir):
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    ids = tokenizer.encode("Die Katze schläft.")  # <s> … </s>
    inputs = np.array(ids)
    inputs[2] = tokenizer.mask_id
    masked = np.zeros(len(ids), dtype=bool)
    masked[2] = True
    text = render_sequence(tokenizer, inputs, np.array(ids), masked)
    original = tokenizer.decode([ids[2]], skip_special_tokens=False).strip() or "▁"
    assert f"[<mask>→{original}]" in text
    assert text.startswith("<s>") and text.endswith("</s>")


def test_unmasked_examples_read_back_as_the_corpus_lines(store, tiny_model_dir):
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    config = PipelineConfig(mmlm_batch_size=4, tlm_batch_size=0, xlco_batch_size=0, mask_prob=0.0)
    text = render_step(DataPipeline(store, config), tokenizer, "mmlm", step=0, count=1)
    header, counts, body = text.split("\n")
    assert header.startswith("mmlm, step 0, example 0 (slot 0): de block 0") and counts.endswith("0 predicted")
    # One block holds the whole small corpus: every line closed by </s>, the document by one more.
    assert body == "<s>" + "".join(f" {line}</s>" for line in TINY_TEXT["de"] * 4) + "</s>"


def test_xlco_shows_both_views_and_where_they_come_from(store, tiny_model_dir):
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    config = PipelineConfig(mmlm_batch_size=0, tlm_batch_size=0, xlco_batch_size=4)
    text = render_step(DataPipeline(store, config), tokenizer, "xlco", step=3, count=2)
    examples = text.split("\n\n")
    assert len(examples) == 2
    for example in examples:
        lines = example.split("\n")
        assert "en-ru pair" in lines[0] and "mixed with en-ru pair" in lines[0]
        assert lines[1].startswith("query view: ") and lines[3].startswith("key view: ")


@pytest.mark.parametrize(
    "objective, step, count, message",
    [
        ("nsp", 0, 1, "objective 'nsp' is unknown; expected one of mmlm, tlm, xlco"),
        ("tlm", 0, 1, r"tlm is disabled in this config \(data.tlm_batch_size=0\)"),
        ("mmlm", -1, 1, "step -1 is invalid; expected an integer >= 0"),
        ("mmlm", 0, 9, r"--examples 9 is invalid; expected 1 … 4 \(data.mmlm_batch_size\)"),
    ],
)
def test_bad_requests_are_one_line_errors(store, tiny_model_dir, objective, step, count, message):
    tokenizer = Tokenizer.from_pretrained(tiny_model_dir)
    pipeline = DataPipeline(store, PipelineConfig(mmlm_batch_size=4, tlm_batch_size=0, xlco_batch_size=0))
    with pytest.raises(DataError, match=message):
        render_step(pipeline, tokenizer, objective, step, count)
