"""XQuAD and TyDiQA-GoldP: XTREME's extractive QA tasks scored with the SQuAD v1.1 metric.

Protocol (XTREME ``scripts/train_qa.sh`` and ``evaluate.py``; settings in ``xtreme_defaults.py``):

* ``xquad``: train on SQuAD v1.1 ``train-v1.1.json`` (English), answer XQuAD's 11
  ``xquad.{lang}.json``; ``tydiqa``: train on TyDiQA-GoldP's English training questions only,
  answer the GoldP dev files of its 9 languages (XTREME's test set);
* the MLQA machinery (``qa.py``): windows of 384 tokens, stride 128, questions ≤ 64 tokens,
  20-best spans of ≤ 30 tokens; lr 3e-5, batch 32, 3 epochs, 500 warm-up steps, weight decay
  1e-4;
* EM / F1 per language with the SQuAD v1.1 metric (``eval/squad_metric.py``, not MLQA's),
  their averages and the transfer gap;
* the kept model: the final one (``--selection last``, XTREME's); ``en-dev`` keeps the best
  English dev F1 after each epoch, on ``--dev FILE`` (for xquad by default SQuAD's
  ``dev-v1.1.json`` beside the training file). Neither task has a dev file per language, so
  ``all-dev`` is refused.

Test predictions go to ``seed-S/predictions/{task}/test-{lang}.json`` (``{id: answer}``, the
layout XTREME's ``evaluate.py`` reads), the first seed's also to RUN/predictions/.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from ..eval.mlqa_data import QAExample, read_squad
from ..eval.squad_metric import score_squad
from ..eval.xtreme_qa_data import (
    TYDIQA_LANGUAGES, XQUAD_LANGUAGES, XtremeQADataError, check_qa_languages, read_tydiqa_english_train,
    tydiqa_test_file, xquad_file,
)
from ..outputs import write_text_atomically
from ..tokenizer import Tokenizer
from .heads import SpanExtractor, save_task_model
from .qa import QAData, collate_qa, predict, qa_table, span_loss, summarise, training_windows, warn_misplaced_answers
from .qa_windows import DOC_STRIDE, MAX_LENGTH, MAX_QUERY_LENGTH, QAFeature
from .seeds import SeedRuns
from .training import Evaluation, FinetuneConfig, FinetuneError, seed_everything, train

TASKS = {"xquad": XQUAD_LANGUAGES, "tydiqa": TYDIQA_LANGUAGES}
TITLES = {"xquad": "XQuAD (trained on SQuAD v1.1 English)", "tydiqa": "TyDiQA-GoldP (trained on its English questions)"}


def squad_scores(data: QAData, predictions: dict[str, str]) -> dict[str, float]:
    """SQuAD v1.1 EM / F1 (%) of ``predictions`` on one file."""
    return score_squad(data.json, predictions, data_name=str(data.path)).as_dict()


def finetune_qa_once(
    task: str,
    model_dir: str | Path,
    tokenizer: Tokenizer,
    train_features: list[QAFeature],
    tests: dict[str, QAData],
    dev: QAData | None,
    config: FinetuneConfig,
    output: Path,
    *,
    window: dict[str, int],
    device: torch.device | str = "cpu",
    progress: bool = True,
    save_model: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """One seed: train, keep the final model (or with ``dev`` the best English dev F1), answer and
    score every test file, write the predictions in XTREME's layout."""
    from ..model.encoder import Encoder

    seed_everything(config.seed)
    model = SpanExtractor(Encoder.from_pretrained(model_dir))
    kwargs = dict(device=device, progress=progress, batch_size=max(config.batch_size, 64), window=window)

    def evaluate(m: SpanExtractor) -> Evaluation:
        f1 = squad_scores(dev, predict(m, tokenizer, dev.examples, desc="dev en", **kwargs))["f1"]
        return Evaluation(0, 0.0, f1, {"dev_f1": {"en": f1}})

    result = train(model, train_features, collate_qa(tokenizer), span_loss, config,
                   evaluate=evaluate if dev is not None and config.selection == "best" else None,
                   device=device, progress=progress, log=log)
    predictions_dir = output / "predictions" / task
    scores = {}
    for lang, data in tests.items():
        predictions = predict(model, tokenizer, data.examples, desc=f"test {lang}", **kwargs)
        write_text_atomically(predictions_dir / f"test-{lang}.json", json.dumps(predictions, ensure_ascii=False, indent=1) + "\n")
        scores[lang] = squad_scores(data, predictions)
    if save_model:
        save_task_model(model, output / "model", tokenizer, source=model_dir)
    selected = result.selected
    return {
        "seed": config.seed, **summarise(scores),
        "selected_step": result.selected_step,
        "selected_epoch": round(selected.epoch, 4) if selected else None,
        "total_steps": result.total_steps,
        "warmup_steps": result.warmup_steps,
        "dev_f1_average": selected.score if selected else None,
        "train_loss": result.loss_summary(),
        "evaluations": [{"step": e.step, "epoch": round(e.epoch, 4), "dev_f1_average": e.score} for e in result.evaluations],
        "predictions": str(predictions_dir),
        "model": str(output / "model") if save_model else None,
    }


def run_xtreme_qa(
    task: str,
    model_dir: str | Path,
    data: str | Path,
    output: str | Path,
    config: FinetuneConfig,
    *,
    train_file: str | Path | None = None,
    dev_file: str | Path | None = None,
    seeds: int = 1,
    languages: Sequence[str] | None = None,
    max_length: int = MAX_LENGTH,
    doc_stride: int = DOC_STRIDE,
    max_query_length: int = MAX_QUERY_LENGTH,
    max_train_examples: int | None = None,
    device: torch.device | str = "cpu",
    progress: bool = True,
    save_models: bool = True,
    log: Callable[[str], None] = print,
    model_name: str | None = None,
) -> dict[str, Any]:
    """Fine-tune ``seeds`` times on ``task`` (xquad: ``train_file`` is SQuAD v1.1's training JSON;
    tydiqa: read from ``data``); write OUTPUT/results.json, results.md, seed-S/predictions/{task}/
    and seed-S/model/; return the results. ``config.selection == "best"`` keeps the best English
    dev F1 on ``dev_file`` (xquad default: ``dev-v1.1.json`` beside ``train_file``)."""
    if task not in TASKS:
        raise FinetuneError(f"QA task {task!r}: expected one of {' '.join(TASKS)}")
    runs = SeedRuns(task, config, seeds, output, log)
    tokenizer = Tokenizer.from_pretrained(model_dir)
    languages = check_qa_languages(task, list(languages or []), TASKS[task])
    train_file, train_examples = _training_questions(task, data, train_file)
    tests = {lang: QAData(xquad_file(data, lang) if task == "xquad" else tydiqa_test_file(data, lang)) for lang in languages}
    dev = _english_dev(task, train_file, dev_file) if config.selection == "best" else None
    for data in [*tests.values(), *([dev] if dev else [])]:
        if not data.examples:  # refused now, not after training
            raise XtremeQADataError(f"{data.path}: no questions; expected a SQuAD v1.1 file with at least one")
    train_examples = train_examples[:max_train_examples]
    warn_misplaced_answers(train_file, train_examples)
    window = dict(max_length=max_length, doc_stride=doc_stride, max_query_length=max_query_length)
    train_features = training_windows(tokenizer, train_file, train_examples, window, log, task)
    runs.run(lambda seed_config, seed_dir: finetune_qa_once(
        task, model_dir, tokenizer, train_features, tests, dev, seed_config, seed_dir,
        window=window, device=device, progress=progress, save_model=save_models, log=log,
    ))
    described = {
        "setting": "cross-lingual-transfer",
        "model": model_name or str(model_dir),
        "data": {"train": str(train_file), "test": str(data), "dev": str(dev.path) if dev else None},
        "languages": languages,
        "train_examples": len(train_examples),
        "train_windows": len(train_features),
        "window": window,
        "metric": "SQuAD v1.1 (XTREME third_party/evaluate_squad.py)",
        "selected_on": "the best English dev F1, checked after each epoch" if dev else "the final model",
    }
    mean_keys = ["test", "average_f1", "average_exact_match", "transfer_gap_f1", "transfer_gap_exact_match", "dev_f1_average"]
    return runs.finish(described, mean_keys=mean_keys, std_keys=["average_f1", "average_exact_match"], predictions=True,
                       markdown=format_xtreme_qa_results)


def _training_questions(task: str, data: str | Path, train_file: str | Path | None) -> tuple[Path, list[QAExample]]:
    if task == "tydiqa":
        return read_tydiqa_english_train(data) if train_file is None else (Path(train_file), read_squad(train_file))
    if train_file is None:
        raise XtremeQADataError("xquad: no training file; give --train squad/train-v1.1.json (SQuAD v1.1)")
    return Path(train_file), read_squad(train_file)


def _english_dev(task: str, train_file: Path, dev_file: str | Path | None) -> QAData:
    """The English dev file selection reads: ``dev_file``, or SQuAD's dev-v1.1.json beside the
    training file (xquad). TyDiQA-GoldP's English dev file is XTREME's English test set."""
    if dev_file is not None:
        return QAData(Path(dev_file))
    if task == "xquad" and (train_file.parent / "dev-v1.1.json").is_file():
        return QAData(train_file.parent / "dev-v1.1.json")
    if task == "xquad":
        raise XtremeQADataError(f"{train_file.parent}: no dev-v1.1.json; selection on the English dev set (en-dev) "
                                "needs SQuAD v1.1's dev file there or --dev FILE")
    raise XtremeQADataError("tydiqa: TyDiQA-GoldP's English dev file is XTREME's English test set, so it never selects "
                            "a model; en-dev needs --dev FILE with held-out English questions (or use --selection last)")


def format_xtreme_qa_results(results: dict[str, Any]) -> str:
    """F1 / EM per language, Avg and the gap; one row per seed, the mean and the spread."""
    return "\n".join([
        f"# {TITLES[results['task']]}", "",
        f"Model `{results['model']}`; F1 / EM (%), SQuAD v1.1 metric (XTREME's); kept: {results['selected_on']}; "
        "gap = en − mean of the other languages.", "",
        qa_table(results, list(results["languages"]), std=True), "",
    ])


__all__ = ["TASKS", "run_xtreme_qa", "finetune_qa_once"]
