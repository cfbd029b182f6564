"""SQuAD-style features: question + a window of the context, with token → character offsets.

Protocol (BERT's ``run_squad.py``, which the paper follows and XTREME runs for MLQA):

* the question is cut to 64 tokens; the input is XLM-R's pair format
  ``<s> question </s></s> context-window </s>`` of at most 384 tokens;
* a context longer than the room left is covered by overlapping windows whose starts are
  128 tokens apart (``doc_stride``: BERT advances the window start by ``min(length, stride)``);
* a training window that holds the whole answer points its start/end targets at the answer's
  first and last token; one that does not points both at ``<s>`` (index 0);
* a token seen by several windows is "max context" in the one where it has the most tokens on
  its shorter side (BERT's ``_check_is_max_context``); decoding only starts answers there.

Offsets come from the ``tokenizers`` library (``Encoding.offsets``) on the same pipeline that
makes the ids, so they are exact character positions in the original context, whatever the
normaliser did. Example::

    >>> features = build_features(tokenizer, examples, train=True)      # doctest: +SKIP
    >>> f = features[0]; f.input_ids[f.start_position:f.end_position + 1]  # the answer's tokens  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..eval.mlqa_data import QAExample
from ..tokenizer import Tokenizer
from .training import FinetuneError

from .defaults import DOC_STRIDE, MAX_LENGTH, MAX_QUERY_LENGTH

_SPECIALS = 4  # <s> question </s></s> context </s>


@dataclass
class QAFeature:
    """One window: model input plus what decoding and training need to map back to text.

    ``offsets[i]`` is the (start, end) character span in the context of input token i, None
    for question and special tokens; ``max_context[i]`` marks context tokens whose best window
    this is. ``start_position``/``end_position`` are token indices in ``input_ids`` (0 = ``<s>``
    when the window lacks the answer; -1 when there is no training target).
    """

    example_index: int
    input_ids: list[int]
    offsets: list[tuple[int, int] | None]
    max_context: list[bool]
    start_position: int = -1
    end_position: int = -1


def context_tokens(tokenizer: Tokenizer, text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """Ids (no specials) and the character span of each, exactly the ids ``tokenizer.encode`` gives."""
    return tokenizer.encode_with_offsets(text)


def window_spans(n_tokens: int, window: int, stride: int) -> list[tuple[int, int]]:
    """(start, length) of each window over ``n_tokens`` context tokens (at least one window)."""
    if window < 1:
        raise FinetuneError(f"no room for context tokens in a window ({window}); raise --max-length")
    spans, start = [], 0
    while True:
        length = min(n_tokens - start, window)
        spans.append((start, length))
        if start + length >= n_tokens:
            return spans
        start += min(length, stride)


def is_max_context(spans: Sequence[tuple[int, int]], index: int, position: int) -> bool:
    """Is window ``index`` the one where context token ``position`` has the most context?

    Score = min(tokens left, tokens right) + 0.01 × window length; ties go to the first window.
    """
    best, best_index = None, None
    for i, (start, length) in enumerate(spans):
        end = start + length - 1
        if not start <= position <= end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best is None or score > best:
            best, best_index = score, i
    return best_index == index


def answer_token_span(offsets: Sequence[tuple[int, int]], start_char: int, end_char: int) -> tuple[int, int] | None:
    """First and last context token overlapping characters [start_char, end_char), or None."""
    first = next((i for i, (a, b) in enumerate(offsets) if b > start_char and b > a), None)
    last = next((i for i in range(len(offsets) - 1, -1, -1) if offsets[i][0] < end_char and offsets[i][1] > offsets[i][0]), None)
    if first is None or last is None or last < first:
        return None
    return first, last


def build_features(
    tokenizer: Tokenizer,
    examples: Sequence[QAExample],
    *,
    max_length: int = MAX_LENGTH,
    doc_stride: int = DOC_STRIDE,
    max_query_length: int = MAX_QUERY_LENGTH,
    train: bool = False,
) -> tuple[list[QAFeature], int]:
    """Windows of every example, and (training only) how many examples were skipped.

    Training uses the first gold answer (SQuAD train has one per question) and skips examples
    whose ``answer_start`` does not locate the answer text in the context, as BERT's script does
    with answers it cannot find.
    """
    if doc_stride < 1:
        raise FinetuneError(f"document stride {doc_stride}: expected >= 1")
    questions = tokenizer.encode_batch([x.question for x in examples], add_special_tokens=False)
    bos, eos = tokenizer.bos_id, tokenizer.eos_id
    features: list[QAFeature] = []
    skipped = 0
    for index, (example, q_ids) in enumerate(zip(examples, questions)):
        q_ids = q_ids[:max_query_length]
        ids, offsets = context_tokens(tokenizer, example.context)
        target = None
        if train:
            if not example.answers:
                skipped += 1
                continue
            start_char, text = example.answer_starts[0], example.answers[0]
            end_char = start_char + len(text)
            target = answer_token_span(offsets, start_char, end_char)
            if example.context[start_char:end_char] != text or target is None:
                skipped += 1
                continue
        base = len(q_ids) + 3  # input index of the window's first context token
        spans = window_spans(len(ids), max_length - len(q_ids) - _SPECIALS, doc_stride)
        for w, (start, length) in enumerate(spans):
            input_ids = [bos, *q_ids, eos, eos, *ids[start:start + length], eos]
            token_offsets: list[tuple[int, int] | None] = [None] * base + list(offsets[start:start + length]) + [None]
            max_context = [False] * base + [is_max_context(spans, w, start + j) for j in range(length)] + [False]
            feature = QAFeature(index, input_ids, token_offsets, max_context)
            if target is not None:
                first, last = target
                if start <= first and last < start + length:
                    feature.start_position, feature.end_position = first - start + base, last - start + base
                else:
                    feature.start_position = feature.end_position = 0  # answer not in this window: <s>
            features.append(feature)
    return features, skipped
