"""Task heads: shapes, and saved directories that transformers' task classes load with no missing keys."""

from __future__ import annotations

import torch

from infoxlm import Encoder
from infoxlm.finetune.heads import SequenceClassifier, SpanExtractor, TokenClassifier, save_task_model


def test_classifier_and_span_extractor_shapes(tiny_model_dir):
    ids = torch.tensor([[0, 5, 6, 2, 2, 7, 2], [0, 8, 2, 2, 9, 2, 1]])
    mask = ids.ne(1).long()
    clf = SequenceClassifier(Encoder.from_pretrained(tiny_model_dir), num_labels=3)
    assert clf(ids, mask).shape == (2, 3)
    start, end = SpanExtractor(Encoder.from_pretrained(tiny_model_dir))(ids, mask)
    assert start.shape == end.shape == (2, 7)
    names = {n for n, _ in clf.named_parameters()}
    trainable = {id(p) for p in clf.trainable_parameters()}
    assert {"classifier.dense.weight", "classifier.out_proj.bias"} <= names
    assert id(clf.roberta.lm_head.dense.weight) not in trainable
    assert id(clf.roberta.embeddings.word_embeddings.weight) in trainable


def test_saved_models_load_in_transformers_with_no_missing_keys(tiny_model_dir, tmp_path, transformers):
    ids = torch.tensor([[0, 5, 6, 2, 2, 7, 2], [0, 8, 2, 2, 9, 2, 1]])
    mask = ids.ne(1).long()
    clf = SequenceClassifier(Encoder.from_pretrained(tiny_model_dir), num_labels=3).eval()
    save_task_model(clf, tmp_path / "clf", labels=["entailment", "neutral", "contradiction"])
    hf, info = transformers.XLMRobertaForSequenceClassification.from_pretrained(tmp_path / "clf", output_loading_info=True)
    assert info["missing_keys"] == set() or not info["missing_keys"]
    assert not info["unexpected_keys"]
    assert hf.config.id2label[2] == "contradiction"
    torch.testing.assert_close(hf.eval()(input_ids=ids, attention_mask=mask).logits, clf(ids, mask), atol=1e-5, rtol=1e-4)

    qa = SpanExtractor(Encoder.from_pretrained(tiny_model_dir)).eval()
    save_task_model(qa, tmp_path / "qa")
    hf, info = transformers.XLMRobertaForQuestionAnswering.from_pretrained(tmp_path / "qa", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    out = hf.eval()(input_ids=ids, attention_mask=mask)
    start, end = qa(ids, mask)
    torch.testing.assert_close(out.start_logits, start, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(out.end_logits, end, atol=1e-5, rtol=1e-4)


def test_token_classifier_loads_in_transformers_and_gives_its_logits(tiny_model_dir, tmp_path, transformers):
    ids = torch.tensor([[0, 5, 6, 2, 1], [0, 8, 9, 7, 2]])
    mask = ids.ne(1).long()
    tagger = TokenClassifier(Encoder.from_pretrained(tiny_model_dir), num_labels=7).eval()
    assert tagger(ids, mask).shape == (2, 5, 7)
    save_task_model(tagger, tmp_path / "tag", labels=["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"])
    hf, info = transformers.XLMRobertaForTokenClassification.from_pretrained(tmp_path / "tag", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert hf.config.id2label[1] == "B-PER"
    torch.testing.assert_close(hf.eval()(input_ids=ids, attention_mask=mask).logits, tagger(ids, mask), atol=1e-5, rtol=1e-4)
