"""MLQA and SQuAD v1.1 files → flat question-answering examples.

Format (SQuAD v1.1, which MLQA and its English training set share)::

    {"version": "1.0", "data": [{"title": …, "paragraphs": [{"context": …,
        "qas": [{"id": …, "question": …, "answers": [{"text": …, "answer_start": 12}]}]}]}]}

``answer_start`` is a character offset into ``context``. MLQA's files are named
``{split}-context-{c}-question-{q}.json`` (split dev or test; c, q in en es de ar hi vi zh) and
sit in ``MLQA_V1/dev/`` and ``MLQA_V1/test/``; the paper's cross-lingual transfer setting uses
c = q. Example, on the downloaded data set::

    >>> examples = load_mlqa("MLQA_V1", "test", "de")  # doctest: +SKIP
    >>> examples[0].question, examples[0].answers, examples[0].answer_starts  # doctest: +SKIP

(the first call reads MLQA_V1/test/test-context-de-question-de.json).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EvalDataError
from ..json_files import DATA_BYTES
from ..json_files import read_json as read_json_file
from .mlqa_metric import MLQA_LANGUAGES

MLQA_SPLITS = ("dev", "test")


class MLQADataError(EvalDataError):
    """A question-answering data file that is missing or not in SQuAD v1.1 format."""


@dataclass(frozen=True)
class QAExample:
    """One question with its gold answers (texts and character offsets into ``context``)."""

    id: str
    title: str
    context: str
    question: str
    answers: tuple[str, ...]
    answer_starts: tuple[int, ...]


def read_json(path: str | Path, expected: str = "a JSON file") -> Any:
    """Parse a JSON file (SQuAD / MLQA data, predictions: up to ``DATA_BYTES``); a missing file,
    one that is not a regular file or bad JSON is an error naming the file (and line:column) and
    what was ``expected`` ("a prediction file")."""
    return read_json_file(path, what=expected, max_bytes=DATA_BYTES, error=MLQADataError)


def parse_squad(dataset_json: Any, source: str = "dataset") -> list[QAExample]:
    """A SQuAD v1.1 JSON object → one :class:`QAExample` per question, in file order."""
    if not isinstance(dataset_json, dict) or not isinstance(dataset_json.get("data"), list):
        raise MLQADataError(f'{source}: expected a SQuAD v1.1 object {{"version": …, "data": [articles]}}')
    examples = []
    for a, article in enumerate(dataset_json["data"]):
        where = f"data[{a}]"
        title = article.get("title", "") if isinstance(article, dict) else ""
        for p, paragraph in enumerate(_get(article, "paragraphs", list, source, where)):
            where = f"data[{a}].paragraphs[{p}]"
            context = _get(paragraph, "context", str, source, where)
            for q, qa in enumerate(_get(paragraph, "qas", list, source, where)):
                where = f"data[{a}].paragraphs[{p}].qas[{q}]"
                texts, starts = [], []
                for i, answer in enumerate(_get(qa, "answers", list, source, where)):
                    texts.append(_get(answer, "text", str, source, f"{where}.answers[{i}]"))
                    start = _get(answer, "answer_start", int, source, f"{where}.answers[{i}]")
                    if not 0 <= start <= len(context):
                        raise MLQADataError(
                            f"{source}: {where}.answers[{i}]: answer_start {start} is outside the context "
                            f"(0 … {len(context)} characters)"
                        )
                    starts.append(start)
                examples.append(QAExample(
                    id=_get(qa, "id", str, source, where), title=str(title), context=context,
                    question=_get(qa, "question", str, source, where),
                    answers=tuple(texts), answer_starts=tuple(starts),
                ))
    return examples


def read_squad(path: str | Path) -> list[QAExample]:
    """Examples of a SQuAD v1.1-format file (SQuAD train/dev, any MLQA file)."""
    return parse_squad(read_json(path, "a SQuAD/MLQA JSON file"), str(path))


def misplaced_answers(examples: list[QAExample]) -> list[tuple[QAExample, str]]:
    """The examples whose first answer is not at its ``answer_start``, each with the text found
    there instead. Training reads the answer at that offset, so BERT's SQuAD script (and
    ``finetune mlqa``) warns about such an example and skips it; scoring uses only the texts."""
    misplaced = []
    for example in examples:
        if example.answers:
            start, text = example.answer_starts[0], example.answers[0]
            found = example.context[start:start + len(text)]
            if found != text:
                misplaced.append((example, found))
    return misplaced


def mlqa_file_name(split: str, context_lang: str, question_lang: str | None = None) -> str:
    """``test-context-de-question-de.json``; ``question_lang`` defaults to ``context_lang``."""
    question_lang = question_lang or context_lang
    if split not in MLQA_SPLITS:
        raise MLQADataError(f"MLQA split {split!r}: expected one of {' '.join(MLQA_SPLITS)}")
    for role, lang in (("context", context_lang), ("question", question_lang)):
        if lang not in MLQA_LANGUAGES:
            raise MLQADataError(f"MLQA {role} language {lang!r}: expected one of {' '.join(MLQA_LANGUAGES)}")
    return f"{split}-context-{context_lang}-question-{question_lang}.json"


def find_mlqa_file(root: str | Path, split: str, context_lang: str, question_lang: str | None = None) -> Path:
    """The file in ``root`` or ``root/{split}/`` (the layout of the MLQA_V1 archive)."""
    name = mlqa_file_name(split, context_lang, question_lang)
    root = Path(root)
    for candidate in (root / name, root / split / name):
        if candidate.is_file():
            return candidate
    raise MLQADataError(f"{root}: no {name} here or in {root / split} (a set of some languages: name them with --languages)")


def load_mlqa(root: str | Path, split: str, context_lang: str, question_lang: str | None = None) -> list[QAExample]:
    """Examples of one MLQA file found under ``root`` (see :func:`find_mlqa_file`)."""
    return read_squad(find_mlqa_file(root, split, context_lang, question_lang))


def _get(obj: Any, key: str, kind: type, source: str, where: str) -> Any:
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        found = "nothing" if value is None else type(value).__name__
        raise MLQADataError(f"{source}: {where}: expected {key!r} to be a {kind.__name__}, found {found}")
    return value
