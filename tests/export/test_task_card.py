"""A fine-tuned model's card: its task, labels, source and a "Use" snippet that loads it."""

from __future__ import annotations

import re

import pytest

from infoxlm.export.task_card import TASKS, write_task_card
from infoxlm.finetune.heads import SequenceClassifier, SpanExtractor, TokenClassifier, save_task_model
from infoxlm.model.encoder import Encoder
from infoxlm.tokenizer import Tokenizer


@pytest.mark.parametrize("head", [SequenceClassifier, TokenClassifier, SpanExtractor])
def test_every_task_model_finetune_saves_gets_a_card_naming_its_task(tiny_model_dir, tmp_path, head):
    encoder = Encoder.from_pretrained(tiny_model_dir)
    model = head(encoder) if head is SpanExtractor else head(encoder, num_labels=3)
    labels = ["entailment", "neutral", "contradiction"] if head is SequenceClassifier else None
    out = save_task_model(model, tmp_path / "xnli-model", Tokenizer.from_pretrained(tiny_model_dir), labels=labels,
                          source=tiny_model_dir)  # fmt: skip
    card = (out / "README.md").read_text(encoding="utf-8")
    pipeline_tag, auto_class, task = TASKS[model.architecture]
    assert f"pipeline_tag: {pipeline_tag}" in card and auto_class in card and task in card
    assert f"fine-tuned by infoxlm" in card and str(tiny_model_dir) in card
    assert "base_model" not in card  # a local directory is no Hub id
    assert ("`entailment`, `neutral`, `contradiction`" in card) is (labels is not None)


def test_without_a_source_no_card_is_written(tiny_model_dir, tmp_path):
    out = save_task_model(SequenceClassifier(Encoder.from_pretrained(tiny_model_dir), num_labels=2), tmp_path / "m")
    assert not (out / "README.md").exists()


def test_a_hub_source_is_the_base_model(tmp_path):
    card = write_task_card(tmp_path, "XLMRobertaForQuestionAnswering", "microsoft/infoxlm-base").read_text()
    assert 'base_model: "microsoft/infoxlm-base"' in card and "pipeline_tag: question-answering" in card


def test_the_card_s_snippet_loads_the_model_with_transformers(tiny_model_dir, tmp_path, transformers):
    model = SequenceClassifier(Encoder.from_pretrained(tiny_model_dir), num_labels=2)
    out = save_task_model(model, tmp_path / "cls", Tokenizer.from_pretrained(tiny_model_dir), labels=["no", "yes"],
                          source=tiny_model_dir)  # fmt: skip
    code = re.search(r"```python\n(.*?)```", (out / "README.md").read_text(), re.S).group(1)
    namespace: dict = {}
    exec(code.replace('"cls"', repr(str(out))), namespace)  # the card names the directory; here, its path
    assert namespace["predict"]("Hello world.")[0]["label"] in ("no", "yes")
