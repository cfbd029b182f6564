"""From start/end logits to answer text: n-best span search, best across windows.

Protocol (BERT's ``run_squad.py`` / Hugging Face ``compute_predictions_logits``, used by XTREME
for MLQA): per window, the 20 highest start logits × the 20 highest end logits; a pair is a
candidate when both tokens lie in the context, start ≤ end, the span has at most 30 tokens and
the start token is "max context" in that window; its score is start + end logit. The question's
answer is the best-scoring candidate over all its windows, cut from the context by the tokens'
character offsets (so the text is the original's, not a detokenised guess). A question without
any valid candidate gets the empty answer.

    >>> import numpy as np
    >>> start = np.array([0., 0., 5., 1.]); end = np.array([0., 0., 1., 6.])
    >>> offsets = [None, (0, 3), (4, 9), (10, 12)]
    >>> best_span(start, end, offsets, [False, True, True, True])
    Span(score=11.0, start_char=4, end_char=12)
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from ..eval.mlqa_data import QAExample
from .qa_windows import QAFeature

from .defaults import MAX_ANSWER_LENGTH, N_BEST



class Span(NamedTuple):
    score: float
    start_char: int
    end_char: int


def candidate_spans(
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    offsets: Sequence[tuple[int, int] | None],
    max_context: Sequence[bool],
    *,
    n_best: int = N_BEST,
    max_answer_length: int = MAX_ANSWER_LENGTH,
) -> list[Span]:
    """Valid spans of one window from its logits (T,), best first (at most n_best²)."""
    n = min(len(offsets), len(start_logits))  # logits may run on over padding
    start_logits, end_logits = np.asarray(start_logits[:n], dtype=np.float64), np.asarray(end_logits[:n], dtype=np.float64)
    starts = np.argsort(-start_logits, kind="stable")[:n_best]
    ends = np.argsort(-end_logits, kind="stable")[:n_best]
    spans = []
    for s in starts:
        if offsets[s] is None or not max_context[s]:
            continue
        for e in ends:
            if offsets[e] is None or e < s or e - s + 1 > max_answer_length:
                continue
            spans.append(Span(float(start_logits[s] + end_logits[e]), offsets[s][0], offsets[e][1]))
    spans.sort(key=lambda span: -span.score)
    return spans


def best_span(start_logits, end_logits, offsets, max_context, **kwargs) -> Span | None:
    spans = candidate_spans(start_logits, end_logits, offsets, max_context, **kwargs)
    return spans[0] if spans else None


def decode_answers(
    examples: Sequence[QAExample],
    features: Sequence[QAFeature],
    start_logits: Sequence[np.ndarray],
    end_logits: Sequence[np.ndarray],
    *,
    n_best: int = N_BEST,
    max_answer_length: int = MAX_ANSWER_LENGTH,
) -> dict[str, str]:
    """{question id: answer text}: the best span over each question's windows."""
    best: dict[int, Span] = {}
    for feature, s, e in zip(features, start_logits, end_logits):
        span = best_span(s, e, feature.offsets, feature.max_context, n_best=n_best, max_answer_length=max_answer_length)
        if span is not None and (feature.example_index not in best or span.score > best[feature.example_index].score):
            best[feature.example_index] = span
    answers = {}
    for index, example in enumerate(examples):
        span = best.get(index)
        answers[example.id] = example.context[span.start_char:span.end_char].strip() if span else ""
    return answers
