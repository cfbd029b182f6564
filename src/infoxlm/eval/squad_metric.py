"""The SQuAD v1.1 metric XTREME scores XQuAD and TyDiQA-GoldP with (``third_party/evaluate_squad.py``).

An answer is normalised in this order, then split on whitespace::

    lowercase → drop ASCII punctuation (string.punctuation only) → drop the English
    articles "a", "an", "the" (whole words, ``\\b…\\b``) → collapse whitespace

for every language: unlike MLQA's metric (``mlqa_metric.py``) there is no Unicode punctuation
(a Chinese "。" or a Spanish "¿" stays part of its token) and no per-language article or
segmentation rule. EM compares the normalised strings, F1 the bags of tokens (0 when nothing is
shared, also when both sides normalise to nothing); a question takes the best score over its
gold answers, an unanswered question scores 0, and the totals are 100 × the mean over every
question of the file, summed in file order and divided at the end so the floats match the
official script's. XTREME's ``evaluate.py`` calls this metric on the ``data`` list without a
version check.

    >>> squad = [{"paragraphs": [{"context": "…", "qas": [{"id": "q1", "question": "?",
    ...     "answers": [{"text": "the Moon", "answer_start": 0}]}]}]}]
    >>> score_squad(squad, {"q1": "Moon."}).as_dict()
    {'exact_match': 100.0, 'f1': 100.0}
    >>> normalize_answer("¿El Año?"), normalize_answer("An apple, the pie")
    ('¿el año', 'apple pie')
"""

from __future__ import annotations

import re
import string
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..errors import EvalDataError

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


class SquadScoreError(EvalDataError):
    """A SQuAD-format data file or prediction file the metric cannot score."""


def normalize_answer(text: str) -> str:
    """Lowercase, drop ASCII punctuation and English articles, single spaces."""
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match_score(prediction: str, gold: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(gold)


def f1_score(prediction: str, gold: str) -> float:
    """Bag-of-tokens F1 of the normalised answers."""
    return token_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def token_f1(predicted: list[str], expected: list[str]) -> float:
    """F1 of two bags of tokens; 0 when they share none (the SQuAD and MLQA scripts' rule)."""
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


@dataclass
class QAScore:
    """Totals as the official scripts return them, plus what they print on stderr."""

    exact_match: float
    f1: float
    total: int  # questions in the data file
    unanswered: list[str] = field(default_factory=list)  # ids with no prediction (scored 0)
    version_warning: str | None = None  # MLQA's "Evaluation expects v-1.0 …" line

    def as_dict(self) -> dict[str, float]:
        return {"exact_match": self.exact_match, "f1": self.f1}


def score_squad(
    dataset_json: Mapping[str, Any] | list,
    predictions: Mapping[str, str],
    *,
    data_name: str = "dataset",
    predictions_name: str = "predictions",
) -> QAScore:
    """SQuAD v1.1 EM / F1 (%) of ``predictions`` ({question id: answer text}) on a SQuAD-format
    file's JSON (the whole object or its ``data`` list); the names are what errors call the inputs."""
    return score_answers(articles_of(dataset_json, data_name), predictions, exact_match_score, f1_score,
                         data_name=data_name, predictions_name=predictions_name)


def articles_of(dataset_json: Mapping[str, Any] | list, data_name: str) -> list:
    """The ``data`` list of a SQuAD-format object (or the list itself)."""
    if isinstance(dataset_json, Mapping):
        if not isinstance(dataset_json.get("data"), list):
            raise SquadScoreError(f'{data_name}: expected a SQuAD v1.1 object {{"version": …, "data": [articles]}}')
        return dataset_json["data"]
    if isinstance(dataset_json, list):
        return dataset_json
    raise SquadScoreError(f"{data_name}: expected a SQuAD v1.1 JSON object, found {type(dataset_json).__name__}")


def score_answers(
    articles: list,
    predictions: Mapping[str, str],
    exact_match: Callable[[str, str], bool],
    f1: Callable[[str, str], float],
    *,
    data_name: str,
    predictions_name: str,
    error: type[EvalDataError] = SquadScoreError,
) -> QAScore:
    """The loop the SQuAD and MLQA scripts share: every question of ``articles`` in file order,
    the best ``exact_match`` / ``f1`` over its gold answers, 0 for an unanswered one; bad input
    raises ``error``."""
    if not isinstance(predictions, Mapping):
        found = type(predictions).__name__
        raise error(f'{predictions_name}: expected a JSON object {{"id": "answer"}}, found {found}')
    em_sum = f1_sum = 0.0
    total = 0
    unanswered: list[str] = []
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(_field(article, "paragraphs", list, f"{data_name}: data[{a}]", error)):
            for q, qa in enumerate(_field(paragraph, "qas", list, f"{data_name}: data[{a}].paragraphs[{p}]", error)):
                where = f"{data_name}: data[{a}].paragraphs[{p}].qas[{q}]"
                qid = _field(qa, "id", str, where, error)
                total += 1
                if qid not in predictions:
                    unanswered.append(qid)
                    continue
                prediction = predictions[qid]
                if not isinstance(prediction, str):
                    found = type(prediction).__name__
                    raise error(f"{predictions_name}: id {qid!r}: expected an answer string, found {found}")
                golds = [_field(answer, "text", str, f"{where}.answers[{i}]", error)
                         for i, answer in enumerate(_field(qa, "answers", list, where, error))]
                if not golds:
                    raise error(f"{where} (id {qid}): no gold answers to score against")
                em_sum += max(exact_match(prediction, gold) for gold in golds)
                f1_sum += max(f1(prediction, gold) for gold in golds)
    if total == 0:
        raise error(f"{data_name}: no questions to score")
    return QAScore(100.0 * em_sum / total, 100.0 * f1_sum / total, total, unanswered)


def _field(obj: Any, key: str, kind: type, where: str, error: type[EvalDataError]) -> Any:
    if not isinstance(obj, Mapping) or not isinstance(obj.get(key), kind):
        raise error(f"{where}: expected a {key!r} {kind.__name__} (SQuAD v1.1 format)")
    return obj[key]
