"""MLQA: fine-tune extractive QA on English SQuAD v1.1, answer in seven languages, score officially.

Protocol (paper §4 and appendix "Hyperparameters for Fine-Tuning"):

* train on SQuAD v1.1 (English) with BERT's question–passage input (``qa_windows.py``: windows
  of 384 tokens, stride 128, questions ≤ 64 tokens); decode n-best spans (``qa_decoding.py``:
  20 best starts × ends, answers ≤ 30 tokens);
* test on ``test-context-{l}-question-{l}.json`` for en es de ar hi vi zh with the official
  metric (``eval/mlqa_metric.py``, per-language normalisation); F1 / EM per language, their
  mean, and the transfer gap (en − mean of the other six);
* base-size hyperparameters: batch {16, 32}, learning rate {2e-5, 3e-5, 5e-5}, 10% warm-up,
  linear decay, weight decay 0, {2, 3, 4} epochs; defaults here take batch 32, 3e-5 and 3
  epochs (the paper does not say which won). "For MLQA, we directly use the final learned
  model": ``selection="last"`` by default; ``all-dev`` selects on the MLQA dev files' mean F1, ``en-dev`` on English's.
* ``cross_language``: also every context-language × question-language file (MLQA's G-XLT).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..eval.mlqa_data import (
    MLQA_LANGUAGES, MLQADataError, QAExample, find_mlqa_file, misplaced_answers, parse_squad, read_json, read_squad,
)
from ..eval.mlqa_metric import score_mlqa
from ..outputs import write_text_atomically
from ..tokenizer import Tokenizer
from . import defaults, xtreme_defaults
from .heads import SpanExtractor, save_task_model
from .qa_decoding import MAX_ANSWER_LENGTH, N_BEST, decode_answers
from .qa_windows import DOC_STRIDE, MAX_LENGTH, MAX_QUERY_LENGTH, QAFeature, build_features
from ..eval.results import average, markdown_table, transfer_gap
from .seeds import SeedRuns
from .training import Evaluation, FinetuneConfig, FinetuneError, seed_everything, train

DEFAULTS = defaults.MLQA
SELECTIONS = xtreme_defaults.SELECTIONS  # en-dev, all-dev, last: the same choices as every task


class QAData:
    """One SQuAD-format file: its raw JSON (for the official scorer) and its flat examples."""

    def __init__(self, path: Path):
        self.path = path
        self.json = read_json(path, "an MLQA file")
        self.examples: list[QAExample] = parse_squad(self.json, str(path))


def check_mlqa_languages(languages: Sequence[str] | None) -> list[str]:
    chosen = list(MLQA_LANGUAGES if not languages else languages)
    for lang in chosen:
        if lang not in MLQA_LANGUAGES:
            raise MLQADataError(f"MLQA language {lang!r}: expected one of {' '.join(MLQA_LANGUAGES)}")
    return chosen


def collate_qa(tokenizer: Tokenizer) -> Callable[[list[QAFeature]], dict[str, torch.Tensor]]:
    def collate(items: list[QAFeature]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = tokenizer.pad([f.input_ids for f in items])  # (B, T)
        return {"input_ids": input_ids, "attention_mask": attention_mask,
                "start_positions": torch.tensor([f.start_position for f in items]),  # (B,)
                "end_positions": torch.tensor([f.end_position for f in items])}
    return collate


def span_loss(model: SpanExtractor, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean of the start and end cross-entropies over token positions (BERT's QA loss)."""
    start, end = model(batch["input_ids"], batch["attention_mask"])  # (B, T) each
    return (F.cross_entropy(start.float(), batch["start_positions"]) + F.cross_entropy(end.float(), batch["end_positions"])) / 2


@torch.no_grad()
def predict(
    model: SpanExtractor,
    tokenizer: Tokenizer,
    examples: Sequence[QAExample],
    *,
    batch_size: int = 64,
    device: torch.device | str = "cpu",
    progress: bool = True,
    desc: str = "predicting",
    window: dict[str, int] | None = None,
) -> dict[str, str]:
    """{question id: answer text} for ``examples``."""
    was_training = model.training
    model.eval()
    device = torch.device(device)
    features, _ = build_features(tokenizer, examples, **(window or {}))
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    starts: list[np.ndarray] = [None] * len(features)  # type: ignore[list-item]
    ends: list[np.ndarray] = [None] * len(features)  # type: ignore[list-item]
    order = sorted(range(len(features)), key=lambda i: len(features[i].input_ids))
    for begin in tqdm(range(0, len(order), batch_size), desc=desc, unit="batch", disable=not progress, leave=False):
        rows = order[begin:begin + batch_size]
        input_ids, attention_mask = tokenizer.pad([features[i].input_ids for i in rows])
        with autocast:
            s, e = model(input_ids.to(device), attention_mask.to(device))
        s, e = s.float().cpu().numpy(), e.float().cpu().numpy()
        for k, i in enumerate(rows):
            starts[i], ends[i] = s[k], e[k]
    model.train(was_training)
    return decode_answers(examples, features, starts, ends, n_best=N_BEST, max_answer_length=MAX_ANSWER_LENGTH)


def score(data: QAData, predictions: dict[str, str], lang: str) -> dict[str, float]:
    """Official MLQA F1 / EM (%) of ``predictions`` on one file; ``lang`` = context language."""
    result = score_mlqa(data.json, predictions, lang, data_name=str(data.path))
    return {"f1": result.f1, "exact_match": result.exact_match}


def summarise(per_language: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Per-language scores → also mean and transfer gap of F1 and EM."""
    out: dict[str, Any] = {"test": per_language}
    for metric in ("f1", "exact_match"):
        values = {lang: s[metric] for lang, s in per_language.items()}
        out[f"average_{metric}"] = average(values)
        out[f"transfer_gap_{metric}"] = transfer_gap(values)
    return out


def finetune_mlqa_once(
    model_dir: str | Path,
    tokenizer: Tokenizer,
    train_features: list[QAFeature],
    tests: dict[tuple[str, str], QAData],
    devs: dict[str, QAData],
    config: FinetuneConfig,
    output: Path,
    *,
    window: dict[str, int],
    device: torch.device | str = "cpu",
    progress: bool = True,
    save_model: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """One seed: train, (optionally select on dev F1), predict and score every test file; with
    ``devs``, the kept model's mean dev F1 too (the hyperparameter search selects on it)."""
    from ..model.encoder import Encoder

    seed_everything(config.seed)
    model = SpanExtractor(Encoder.from_pretrained(model_dir))
    kwargs = dict(device=device, progress=progress, batch_size=max(config.batch_size, 64), window=window)

    def evaluate(m: SpanExtractor) -> Evaluation:
        f1 = {lang: score(d, predict(m, tokenizer, d.examples, desc=f"dev {lang}", **kwargs), lang)["f1"]
              for lang, d in devs.items()}
        return Evaluation(0, 0.0, average(f1), {"dev_f1": f1})

    result = train(model, train_features, collate_qa(tokenizer), span_loss, config,
                   evaluate=evaluate if devs and config.selection == "best" else None,
                   device=device, progress=progress, log=log)
    # The kept model's dev scores: from the selection, or (final model) measured now.
    dev = result.selected if result.selected else evaluate(model) if devs else None
    predictions_dir = output / "predictions"
    scores: dict[tuple[str, str], dict[str, float]] = {}
    for (c, q), data in tests.items():
        predictions = predict(model, tokenizer, data.examples, desc=f"test {c}/{q}", **kwargs)
        write_text_atomically(predictions_dir / data.path.name, json.dumps(predictions, ensure_ascii=False, indent=1) + "\n")
        scores[c, q] = score(data, predictions, c)
    if save_model:
        save_task_model(model, output / "model", tokenizer, source=model_dir)
    same = {c: s for (c, q), s in scores.items() if c == q}
    run = {"seed": config.seed, **summarise(same)}
    if any(c != q for c, q in scores):
        run["cross_language"] = {
            metric: {c: {q: s[metric] for (c2, q), s in scores.items() if c2 == c} for c in same}
            for metric in ("f1", "exact_match")
        }
    run.update({
        "selected_step": result.selected_step,
        "total_steps": result.total_steps,
        "warmup_steps": result.warmup_steps,
        "dev_f1": dev.details["dev_f1"] if dev else None,
        "dev_f1_average": dev.score if dev else None,
        "train_loss": result.loss_summary(),
        "evaluations": [{"step": e.step, "epoch": round(e.epoch, 4), "dev_f1_average": e.score} for e in result.evaluations],
        "predictions": str(predictions_dir),
        "model": str(output / "model") if save_model else None,
    })
    return run


def warn_misplaced_answers(train_file: str | Path, examples: list[QAExample], shown: int = 5) -> None:
    """One warning on stderr per training question whose answer_start disagrees with its answer
    text (the first ``shown``, then a count); build_features skips them, as BERT's script does."""
    misplaced = misplaced_answers(examples)
    for example, found in misplaced[:shown]:
        print(f"warning: {train_file}: question {example.id!r}: answer_start {example.answer_starts[0]} reads "
              f"{found!r}, but the answer text is {example.answers[0]!r}; the question is skipped", file=sys.stderr)
    if len(misplaced) > shown:
        print(f"warning: {train_file}: {len(misplaced) - shown} more questions whose answer_start disagrees "
              "with the answer text are skipped", file=sys.stderr)


def run_mlqa(
    model_dir: str | Path,
    train_file: str | Path,
    data: str | Path,
    output: str | Path,
    config: FinetuneConfig,
    *,
    seeds: int = 1,
    languages: Sequence[str] | None = None,
    cross_language: bool = False,
    max_length: int = MAX_LENGTH,
    doc_stride: int = DOC_STRIDE,
    max_query_length: int = MAX_QUERY_LENGTH,
    max_train_examples: int | None = None,
    device: torch.device | str = "cpu",
    progress: bool = True,
    save_models: bool = True,
    score_dev: bool = False,
    dev_languages: Sequence[str] | None = None,
    log: Callable[[str], None] = print,
    model_name: str | None = None,
    settings_chosen: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fine-tune ``seeds`` times; write OUTPUT/results.json, results.md, seed-{s}/predictions/*.json
    and seed-{s}/model/ (an ``XLMRobertaForQuestionAnswering`` directory); return the results.

    ``config.selection``: "last" (the paper) or "best" (mean F1 on the MLQA dev files, which
    must then exist in ``data``). ``score_dev``: also score the kept model on those dev files
    (``dev_f1_average``), which the hyperparameter search selects on. ``model_name``: the model
    as results.json names it (default: ``model_dir``). ``dev_languages``: the dev files selection
    averages (default: every language's; ``["en"]``: XTREME's rule); ``settings_chosen``: how the
    settings were chosen (``defaults.choice``), recorded as it is."""
    runs = SeedRuns("mlqa", config, seeds, output, log)
    tokenizer = Tokenizer.from_pretrained(model_dir)
    languages = check_mlqa_languages(languages)
    tests, devs = _evaluation_files(data, languages, cross_language, need_dev=config.selection == "best" or score_dev,
                                    dev_languages=dev_languages)
    train_examples = read_squad(train_file)[:max_train_examples]
    warn_misplaced_answers(train_file, train_examples)
    window = dict(max_length=max_length, doc_stride=doc_stride, max_query_length=max_query_length)
    train_features = training_windows(tokenizer, train_file, train_examples, window, log)
    runs.run(lambda seed_config, seed_dir: finetune_mlqa_once(
        model_dir, tokenizer, train_features, tests, devs, seed_config, seed_dir,
        window=window, device=device, progress=progress, save_model=save_models, log=log,
    ))
    described = {
        "setting": "cross-lingual-transfer",
        "model": model_name or str(model_dir),
        "data": {"train": str(train_file), "test": str(data)},
        "languages": languages,
        "train_examples": len(train_examples),
        "train_windows": len(train_features),
        "window": window,
        **({"settings_chosen": settings_chosen} if settings_chosen is not None else {}),
    }
    mean_keys = ["test", "average_f1", "average_exact_match", "transfer_gap_f1", "transfer_gap_exact_match",
                 "cross_language", "dev_f1_average"]
    return runs.finish(described, mean_keys=mean_keys, std_keys=["average_f1", "average_exact_match"],
                       markdown=format_mlqa_results)


def _evaluation_files(
    data: str | Path, languages: list[str], cross_language: bool, need_dev: bool,
    dev_languages: Sequence[str] | None = None,
) -> tuple[dict[tuple[str, str], QAData], dict[str, QAData]]:
    """The test files ({(context language, question language): file}) and, when ``need_dev``,
    the dev files ({language: file}) in ``data`` of ``dev_languages`` (default: ``languages``)."""
    pairs = [(c, q) for c in languages for q in (languages if cross_language else [c])]
    tests = {(c, q): QAData(find_mlqa_file(data, "test", c, q)) for c, q in pairs}
    devs = {}
    if need_dev:
        try:
            devs = {lang: QAData(find_mlqa_file(data, "dev", lang)) for lang in (dev_languages or languages)}
        except MLQADataError as err:  # say why dev files are needed: selection never uses test
            raise MLQADataError(f"{err}; selecting a model or a setting needs the MLQA dev files, never test") from None
    return tests, devs


def training_windows(
    tokenizer: Tokenizer, train_file: str | Path, examples: list[QAExample], window: dict[str, int],
    log: Callable[[str], None], task: str = "mlqa",
) -> list[QAFeature]:
    """The training windows of ``examples``; refused when no question's answer is where it says."""
    features, skipped = build_features(tokenizer, examples, train=True, **window)
    if not features:
        raise FinetuneError(
            f"{train_file}: none of its {len(examples)} training questions has an answer at its "
            "answer_start; expected SQuAD v1.1 training data"
        )
    log(f"[{task}] {len(examples)} training questions → {len(features)} windows"
        + (f" ({skipped} skipped: answer not found at answer_start)" if skipped else ""))
    return features


def f1_em(value: dict[str, float] | None) -> str:
    return "–" if value is None else f"{value['f1']:.1f} / {value['exact_match']:.1f}"


def qa_table(results: dict[str, Any], langs: Sequence[str], std: bool = False) -> str:
    """F1 / EM per language, Avg and the gap: one row per seed, the mean (and with ``std`` the
    spread of the averages) over several."""
    header = ["run", *langs, "Avg", "gap"]

    def row(name: str, r: dict) -> list:
        avg = {"f1": r["average_f1"], "exact_match": r["average_exact_match"]}
        gap = None if r["transfer_gap_f1"] is None else {"f1": r["transfer_gap_f1"], "exact_match": r["transfer_gap_exact_match"]}
        return [name, *(f1_em(r["test"][lang]) for lang in langs), f1_em(avg), f1_em(gap)]

    rows = [row(f"seed {r['seed']}", r) for r in results["runs"]]
    if len(results["runs"]) > 1:
        rows.append(row(f"**mean of {len(results['runs'])}**", results["mean"]))
        if std:
            spread = {"f1": results["std"]["average_f1"], "exact_match": results["std"]["average_exact_match"]}
            rows.append(["std over seeds", *([""] * len(langs)), f1_em(spread), ""])
    return markdown_table(header, rows)


def format_mlqa_results(results: dict[str, Any]) -> str:
    """The paper's MLQA table shape: F1 / EM per language, Avg, and the gap."""
    langs = [lang for lang in MLQA_LANGUAGES if lang in results["languages"]]
    lines = [f"# MLQA, cross-lingual transfer (trained on SQuAD v1.1 English)", "",
             f"Model `{results['model']}`; F1 / EM (%), official MLQA metric; gap = en − mean of the other languages.", "",
             qa_table(results, langs), ""]
    cross = results["mean"].get("cross_language")
    if cross:
        lines += ["F1 (%) per context language (rows) × question language (columns), mean over seeds:", "",
                  markdown_table(["context \\ question", *langs], [[c, *(cross["f1"][c][q] for q in langs)] for c in langs]), ""]
    return "\n".join(lines)
