"""n-best span decoding on hand-made logits with a known answer."""

from __future__ import annotations

import numpy as np

from infoxlm.eval.mlqa_data import QAExample
from infoxlm.finetune.qa_decoding import best_span, candidate_spans, decode_answers
from infoxlm.finetune.qa_windows import QAFeature

CONTEXT = "alpha beta gamma delta epsilon"
# input: <s> q </s> </s> alpha beta gamma delta epsilon </s>
OFFSETS = [None, None, None, None, (0, 5), (6, 10), (11, 16), (17, 22), (23, 30), None]


def logits(**peaks):
    x = np.zeros(len(OFFSETS))
    for index, value in peaks.items():
        x[int(index[1:])] = value
    return x


def test_best_span_is_the_highest_valid_sum():
    span = best_span(logits(i5=4.0), logits(i6=3.0), OFFSETS, [o is not None for o in OFFSETS])
    assert CONTEXT[span.start_char:span.end_char] == "beta gamma" and span.score == 7.0


def test_spans_stay_inside_the_context_and_start_before_end():
    everywhere = [True] * len(OFFSETS)
    # The question token 1 and the final </s> have the highest logits but are not context;
    # 7 → 5 scores more than 7 → 8 but ends before it starts.
    start = logits(i1=9.0, i7=2.0) - 5.0 * (logits(i1=1.0, i7=1.0) == 0)
    end = logits(i9=9.0, i1=8.0, i5=5.0, i8=1.0) - 5.0 * (logits(i9=1.0, i1=1.0, i5=1.0, i8=1.0) == 0)
    spans = candidate_spans(start, end, OFFSETS, everywhere)
    context_starts = {o[0] for o in OFFSETS if o}
    assert spans and all(s.start_char in context_starts and s.start_char < s.end_char for s in spans)
    best = spans[0]
    assert CONTEXT[best.start_char:best.end_char] == "delta epsilon" and best.score == 3.0


def test_max_answer_length_and_max_context():
    start, end = logits(i4=5.0, i6=1.0), logits(i8=5.0, i6=1.0)
    mask = [o is not None for o in OFFSETS]
    long = best_span(start, end, OFFSETS, mask, max_answer_length=2)
    assert CONTEXT[long.start_char:long.end_char] != "alpha beta gamma delta epsilon"
    assert best_span(start, end, OFFSETS, mask, max_answer_length=5).start_char == 0
    not_here = [m and i != 4 for i, m in enumerate(mask)]
    assert best_span(start, end, OFFSETS, not_here).start_char != 0
    assert best_span(logits(), logits(), OFFSETS, [False] * len(OFFSETS)) is None


def test_best_window_wins_and_empty_answer_without_candidates():
    examples = [QAExample("q1", "", CONTEXT, "?", ("gamma",), (11,)), QAExample("q2", "", CONTEXT, "?", ("x",), (0,))]
    mask = [o is not None for o in OFFSETS]
    features = [QAFeature(0, [], OFFSETS, mask), QAFeature(0, [], OFFSETS, mask), QAFeature(1, [], OFFSETS, [False] * 10)]
    starts = [logits(i4=1.0), logits(i6=3.0), logits(i4=9.0)]
    ends = [logits(i4=1.0), logits(i6=3.0), logits(i4=9.0)]
    assert decode_answers(examples, features, starts, ends) == {"q1": "gamma", "q2": ""}
