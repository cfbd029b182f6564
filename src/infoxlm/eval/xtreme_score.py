"""XTREME's scores, as its ``evaluate.py`` computes them, on its label and prediction files.

The per-task metric table of ``evaluate.py`` (google-research/xtreme):

==================  ==========================================  ============================
task                files (labels / predictions)                 metric, keys
==================  ==========================================  ============================
panx, udpos         one label per line, blank between sentences  seqeval, entity level:
                                                                 ``f1``, ``precision``, ``recall``
pawsx, xnli         one label per line                           ``accuracy``
xquad, tydiqa       SQuAD v1.1 JSON / ``{id: answer}`` JSON      SQuAD v1.1: ``exact_match``, ``f1``
mlqa                SQuAD v1.1 JSON / ``{id: answer}`` JSON      MLQA's (by language): same keys
==================  ==========================================  ============================

All in %. UD-POS is scored with seqeval too (a run of equal tags is one "entity", so its F1 is
not token accuracy; :func:`token_accuracy` gives that beside it). seqeval's default (lenient)
mode is XTREME's: an ``I-`` with no ``B-`` before it opens an entity, as conlleval does.

Beyond ``evaluate.py``, which asserts: files of different lengths, or a sentence whose
prediction has another number of labels, are errors naming both files and the place; a label
file may also be the task's own ``word<TAB>label`` file (the last column is read). Empty
sentences (a doubled blank line) are dropped from both sides: they change no score.

    >>> tagging_scores([["B-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]])["f1"]
    100.0
    >>> tagging_scores([["B-PER", "I-PER", "O"]], [["I-PER", "I-PER", "O"]])["f1"]  # I- opens an entity
    100.0
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Sequence

from ..errors import EvalDataError, InfoXLMError, file_error
from ..json_files import DATA_BYTES, read_json

TAGGING = ("panx", "udpos")
CLASSIFICATION = ("pawsx", "xnli")
QA = ("xquad", "mlqa", "tydiqa")
TASKS = (*TAGGING, *CLASSIFICATION, *QA)


def require_seqeval() -> None:
    """seqeval is an optional dependency (it brings scikit-learn): say which extra installs it."""
    try:
        import seqeval.metrics  # noqa: F401
    except ImportError:
        raise InfoXLMError("scoring PAN-X and UD-POS needs the seqeval package: pip install 'infoxlm[xtreme]'") from None


def tagging_scores(labels: Sequence[Sequence[str]], predictions: Sequence[Sequence[str]]) -> dict[str, float]:
    """seqeval's entity-level F1, precision and recall (%) over sentences of labels."""
    require_seqeval()
    from seqeval.metrics import f1_score, precision_score, recall_score

    labels, predictions = [list(s) for s in labels], [list(s) for s in predictions]
    with warnings.catch_warnings():  # "NOUN seems not to be NE tag", no predicted entity: expected here
        warnings.simplefilter("ignore")
        return {"f1": 100 * float(f1_score(labels, predictions)),
                "precision": 100 * float(precision_score(labels, predictions)),
                "recall": 100 * float(recall_score(labels, predictions))}


def token_accuracy(labels: Sequence[Sequence[str]], predictions: Sequence[Sequence[str]]) -> float:
    """Share (%) of words whose predicted label is the gold one."""
    pairs = [(g, p) for gold, pred in zip(labels, predictions) for g, p in zip(gold, pred)]
    if not pairs:
        raise EvalDataError("token accuracy of no words")
    return 100.0 * sum(g == p for g, p in pairs) / len(pairs)


def accuracy_scores(labels: Sequence[str], predictions: Sequence[str]) -> dict[str, float]:
    """``evaluate.py``'s accuracy: the share (%) of lines equal after stripping."""
    return {"accuracy": 100.0 * sum(p == g for p, g in zip(predictions, labels)) / len(predictions)}


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise file_error(path, exc, "a UTF-8 file of one label per line", EvalDataError) from None


def read_tag_file(path: str | Path, *, word_column: bool) -> list[tuple[int, list[str]]]:
    """(first line, labels) per sentence; ``word_column``: a ``word<TAB>label`` line is allowed
    (its last field read), else a line is one label."""
    path = Path(path)
    sentences: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate(_read_lines(path), 1):
        line = line.strip()
        if not line:
            if current:
                sentences.append((start, current))
            current = []
            continue
        fields = line.split("\t")
        if len(fields) > (2 if word_column else 1):
            expected = "a label, or word<TAB>label" if word_column else "one label"
            raise EvalDataError(f"{path}:{number}: {len(fields)} tab-separated fields in {line[:60]!r}; expected {expected}")
        if not current:
            start = number
        current.append(fields[-1].strip())
    if current:
        sentences.append((start, current))
    if not sentences:
        raise EvalDataError(f"{path}: no labels; expected one label per line, a blank line between sentences")
    return sentences


def _aligned_sentences(labels_path: Path, predictions_path: Path) -> tuple[list[list[str]], list[list[str]]]:
    gold = read_tag_file(labels_path, word_column=True)
    pred = read_tag_file(predictions_path, word_column=False)
    if len(gold) != len(pred):
        raise EvalDataError(f"{predictions_path}: {len(pred)} sentences, {labels_path} has {len(gold)}; "
                            "expected one predicted sentence per labelled one")
    for k, ((g_line, g), (p_line, p)) in enumerate(zip(gold, pred), 1):
        if len(g) != len(p):
            raise EvalDataError(f"{predictions_path}:{p_line}: sentence {k} has {len(p)} labels, "
                                f"{labels_path}:{g_line} has {len(g)}; expected one label per word")
    return [g for _, g in gold], [p for _, p in pred]


def _label_lines(labels_path: Path, predictions_path: Path) -> tuple[list[str], list[str]]:
    gold = [line.strip() for line in _read_lines(labels_path)]
    pred = [line.strip() for line in _read_lines(predictions_path)]
    if not pred:
        raise EvalDataError(f"{predictions_path}: no predictions; expected one label per line")
    if len(gold) != len(pred):
        raise EvalDataError(f"{predictions_path}: {len(pred)} lines, {labels_path} has {len(gold)}; "
                            "expected one predicted label per line of labels")
    return gold, pred


def _qa_scores(task: str, labels_path: Path, predictions_path: Path, lang: str | None) -> dict[str, float]:
    dataset = read_json(labels_path, what="a SQuAD v1.1-format JSON file", max_bytes=DATA_BYTES, error=EvalDataError)
    predictions = read_json(predictions_path, what='a JSON object {"question id": "answer text"}',
                            max_bytes=DATA_BYTES, error=EvalDataError)
    if not isinstance(predictions, dict):
        raise EvalDataError(f"{predictions_path}: a JSON {type(predictions).__name__}; expected an object {{\"question id\": \"answer\"}}")
    if task == "mlqa":
        from .mlqa_metric import score_mlqa

        if lang is None:
            raise EvalDataError("--task mlqa needs --lang (MLQA's metric strips that language's articles)")
        score = score_mlqa(dataset, predictions, lang, data_name=str(labels_path), predictions_name=str(predictions_path))
        return {"exact_match": score.exact_match, "f1": score.f1}
    # XTREME scores XQuAD and TyDiQA-GoldP with SQuAD v1.1's evaluate script (squad_metric.py,
    # shared with `finetune xquad` and `finetune tydiqa`).
    from .squad_metric import score_squad

    return score_squad(dataset, predictions, data_name=str(labels_path), predictions_name=str(predictions_path)).as_dict()


def xtreme_score(task: str, labels: str | Path, predictions: str | Path, lang: str | None = None) -> dict[str, float]:
    """The scores ``evaluate.py`` gives ``predictions`` against ``labels`` for ``task``, its keys."""
    labels, predictions = Path(labels), Path(predictions)
    if task in TAGGING:
        gold, pred = _aligned_sentences(labels, predictions)
        return tagging_scores(gold, pred)
    if task in CLASSIFICATION:
        return accuracy_scores(*_label_lines(labels, predictions))
    if task in QA:
        return _qa_scores(task, labels, predictions, lang)
    raise EvalDataError(f"task {task!r}: expected one of {', '.join(TASKS)}")


def format_tag_file(sentences: Sequence[Sequence[str]]) -> str:
    """XTREME's prediction layout of a tagging task: a label a line, a blank line after each sentence."""
    return "".join("".join(f"{label}\n" for label in s) + "\n" for s in sentences)
