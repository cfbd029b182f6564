"""The official MLQA metric (``mlqa_evaluation_v1.py``), reproduced to the last float.

An answer is normalised in this order, then split into tokens::

    lowercase → drop punctuation → drop articles (per language) → tokenise

* punctuation: every character whose Unicode category starts with ``P``, plus ASCII
  ``string.punctuation`` (which adds the symbols ``$ + < = > ^ ` | ~``);
* articles, replaced by a space: en ``a an the``; es ``un una unos unas el la los las``;
  de ``ein eine einen einem eines einer der die das den dem des``; vi ``của là cái chiếc
  những`` (all as whole words, ``\\b…\\b``); ar: the official regex ``\\sال^|ال``, whose first
  branch can never match, so *every* "ال" is replaced, inside words too ("فالكتاب" → "ف كتاب");
  hi, zh: none;
* tokens: whitespace, except zh ("mixed segmentation"): each character in U+4E00–U+9FA5 (and
  each punctuation character, already gone by then) is a token of its own, the runs between them
  are split on whitespace ("iphone12手机" → ``iphone12 手 机``).

EM compares the normalised strings, F1 the bags of tokens; each question takes the best score
over its gold answers, an unanswered question scores 0, and the totals are 100 × the mean over
every question of the data file. The text is not Unicode-normalised (the official script does
not), so NFD input scores as it would there.

Example::

    >>> evaluate_mlqa({"version": "1.0", "data": [{"title": "t", "paragraphs": [{"context": "…",
    ...     "qas": [{"id": "q1", "question": "?", "answers": [{"text": "the Moon", "answer_start": 0}]}]}]}]},
    ...     {"q1": "Moon."}, "en")
    {'exact_match': 100.0, 'f1': 100.0}
"""

from __future__ import annotations

import re
import string
import unicodedata
import warnings
from typing import Any, Mapping

from ..errors import EvalDataError
from .squad_metric import QAScore, score_answers, token_f1

MLQA_LANGUAGES = ("en", "es", "de", "ar", "hi", "vi", "zh")
# The official script's check: MLQA files carry version "1.0" (compared as a string).
EXPECTED_VERSION = "1.0"

_ARTICLES = {
    "en": re.compile(r"\b(a|an|the)\b"),
    "es": re.compile(r"\b(un|una|unos|unas|el|la|los|las)\b"),
    "de": re.compile(r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b"),
    "vi": re.compile(r"\b(của|là|cái|chiếc|những)\b"),
    # Kept as published: "\sال^" needs "^" after two characters and never matches.
    "ar": re.compile(r"\sال^|ال"),
    "hi": None,
    "zh": None,
}
_ASCII_PUNCTUATION = frozenset(string.punctuation)
_CJK = re.compile(r"[\u4e00-\u9fa5]")  # the official range: CJK Unified Ideographs up to U+9FA5


class MLQAScoreError(EvalDataError):
    """An MLQA data file, prediction file or language the metric cannot score."""


def is_punctuation(char: str) -> bool:
    """The official PUNCT set: Unicode categories P* plus ASCII string.punctuation."""
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P")


def check_language(lang: str) -> str:
    if lang not in _ARTICLES:
        raise MLQAScoreError(f"language {lang!r}: the MLQA metric knows {' '.join(MLQA_LANGUAGES)}")
    return lang


def _mixed_segmentation(text: str) -> list[str]:
    """zh tokens: one per CJK (or punctuation) character, whitespace-split runs in between."""
    tokens: list[str] = []
    run = ""
    for char in text:
        if _CJK.match(char) or is_punctuation(char):
            tokens.extend(run.split())
            run = ""
            tokens.append(char)
        else:
            run += char
    tokens.extend(run.split())
    return tokens


def normalize_answer(text: str, lang: str) -> str:
    """Lowercase, drop punctuation and articles, re-join the language's tokens with single spaces."""
    articles = _ARTICLES[check_language(lang)]
    text = text.lower()
    text = "".join(char for char in text if not is_punctuation(char))
    if articles is not None:
        text = articles.sub(" ", text)
    tokens = _mixed_segmentation(text) if lang == "zh" else text.split()
    return " ".join(token for token in tokens if token.strip() != "")


def answer_tokens(text: str, lang: str) -> list[str]:
    """The tokens F1 counts: the normalised answer split on whitespace."""
    return normalize_answer(text, lang).split()


def exact_match_score(prediction: str, gold: str, lang: str) -> bool:
    return normalize_answer(prediction, lang) == normalize_answer(gold, lang)


def f1_score(prediction: str, gold: str, lang: str) -> float:
    """Bag-of-tokens F1; 0 when nothing is shared (also when both sides normalise to nothing)."""
    return token_f1(answer_tokens(prediction, lang), answer_tokens(gold, lang))


# The SQuAD script's totals, with MLQA's version check filled in.
MLQAScore = QAScore


def score_mlqa(
    dataset_json: Mapping[str, Any] | list,
    predictions: Mapping[str, str],
    lang: str,
    *,
    data_name: str = "dataset",
    predictions_name: str = "predictions",
) -> QAScore:
    """Score ``predictions`` ({question id: answer text}) against a SQuAD-v1.1-format file's JSON
    (the whole object, or its ``data`` list); ``lang`` is the answer (context) language. The
    names are what error messages call the two inputs (e.g. their file paths)."""
    check_language(lang)
    version_warning = None
    if isinstance(dataset_json, Mapping):
        if "version" not in dataset_json:
            version_warning = f"Evaluation expects v-{EXPECTED_VERSION}, but the dataset has no version"
        elif str(dataset_json["version"]) != EXPECTED_VERSION:
            version_warning = f"Evaluation expects v-{EXPECTED_VERSION}, but got dataset with v-{dataset_json['version']}"
        if not isinstance(dataset_json.get("data"), list):
            raise MLQAScoreError(f'{data_name}: expected a SQuAD v1.1 object {{"version": …, "data": [articles]}}')
        articles = dataset_json["data"]
    elif isinstance(dataset_json, list):
        articles = dataset_json
    else:
        raise MLQAScoreError(f"{data_name}: expected a SQuAD v1.1 JSON object, found {type(dataset_json).__name__}")
    score = score_answers(articles, predictions, lambda p, g: exact_match_score(p, g, lang),
                          lambda p, g: f1_score(p, g, lang), data_name=data_name,
                          predictions_name=predictions_name, error=MLQAScoreError)
    score.version_warning = version_warning
    return score


def evaluate_mlqa(dataset_json: Mapping[str, Any] | list, predictions: Mapping[str, str], lang: str) -> dict[str, float]:
    """``{"exact_match": …, "f1": …}`` exactly as ``mlqa_evaluation_v1.py`` prints them. A version
    other than "1.0" is a ``UserWarning``; use :func:`score_mlqa` for the unanswered ids."""
    score = score_mlqa(dataset_json, predictions, lang)
    if score.version_warning:
        warnings.warn(score.version_warning, stacklevel=2)
    return score.as_dict()

