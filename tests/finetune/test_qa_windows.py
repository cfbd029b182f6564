"""Window building: answer positions and character offsets across windows."""

from __future__ import annotations

import pytest

from infoxlm import Tokenizer
from infoxlm.eval.mlqa_data import QAExample
from infoxlm.finetune.qa_windows import answer_token_span, build_features, context_tokens, is_max_context, window_spans


def test_window_spans_step_by_stride_and_cover_everything():
    assert window_spans(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert window_spans(3, 4, 2) == [(0, 3)]
    assert window_spans(10, 5, 5) == [(0, 5), (5, 5)]
    spans = window_spans(100, 20, 7)
    covered = {p for s, n in spans for p in range(s, s + n)}
    assert covered == set(range(100)) and all(b[0] - a[0] == 7 for a, b in zip(spans, spans[1:]))


def test_max_context_prefers_the_window_where_the_token_is_central():
    spans = [(0, 4), (3, 4), (6, 4)]
    assert is_max_context(spans, 0, 1) and not is_max_context(spans, 1, 1)  # only in window 0
    assert is_max_context(spans, 1, 4)  # 1 left/2 right in window 1 beats 0 right in window 0
    assert [sum(is_max_context(spans, w, p) for w in range(3)) for p in range(10)] == [1] * 10


def test_answer_token_span_from_offsets():
    offsets = [(0, 3), (4, 7), (4, 5), (5, 9), (10, 12)]
    assert answer_token_span(offsets, 4, 9) == (1, 3)
    assert answer_token_span(offsets, 10, 12) == (4, 4)
    assert answer_token_span(offsets, 13, 15) is None


def test_long_context_answer_mapped_in_every_window_that_holds_it(tiny_model_dir):
    tok = Tokenizer.from_pretrained(tiny_model_dir)
    filler = " ".join(["The cat sleeps on the warm sofa.", "Open the file and save it."] * 3)
    context = f"{filler} We walked to the old bridge. {filler}"
    start = context.index("old bridge")
    example = QAExample("q", "t", context, "Where did we walk?", ("old bridge",), (start,))
    features, skipped = build_features(tok, [example], max_length=48, doc_stride=6, max_query_length=64, train=True)
    assert skipped == 0 and len(features) > 3
    question = tok.encode("Where did we walk?", add_special_tokens=False)
    with_answer = 0
    for f in features:
        assert len(f.input_ids) <= 48
        assert f.input_ids[:len(question) + 3] == [tok.bos_id, *question, tok.eos_id, tok.eos_id]
        assert f.input_ids[-1] == tok.eos_id and f.offsets[-1] is None
        for i, span in enumerate(f.offsets):  # offsets point at the very characters of the token
            if span is not None:
                assert tok.decode([f.input_ids[i]]).strip() in (context[span[0]:span[1]], "")
        if f.start_position == 0:
            assert f.end_position == 0
            continue
        with_answer += 1
        a, b = f.offsets[f.start_position][0], f.offsets[f.end_position][1]
        assert context[a:b] == "old bridge"
    assert with_answer >= 2  # the answer sits in several overlapping windows
    # every context token is max-context in exactly one window: in order, they spell the context
    chosen = [span for f in features for span, best in zip(f.offsets, f.max_context) if span is not None and best]
    assert chosen == context_tokens(tok, context)[1]


def test_questions_are_cut_to_max_query_length_and_bad_answers_skipped(tiny_model_dir):
    tok = Tokenizer.from_pretrained(tiny_model_dir)
    context = "We walked to the old bridge."
    good = QAExample("a", "", context, "Where " * 50, ("bridge",), (context.index("bridge"),))
    bad = QAExample("b", "", context, "Where?", ("bridge",), (0,))
    features, skipped = build_features(tok, [good, bad], max_length=64, doc_stride=16, max_query_length=5, train=True)
    assert skipped == 1 and len(features) == 1
    assert features[0].input_ids.index(tok.eos_id) == 6  # <s> + 5 question tokens
    with pytest.raises(Exception, match="no room for context"):
        build_features(tok, [good], max_length=8, max_query_length=64)
