"""XNLI: fine-tune a sentence-pair classifier, pick one model on the joint dev set, test 15 languages.

Protocol (paper §4 and appendix "Hyperparameters for Fine-Tuning"):

* cross-lingual transfer: train on English MultiNLI (``XNLI-MT-1.0/multinli/multinli.train.en.tsv``)
  and test on all 15 XNLI languages; translate-train-all: train on the 15 translated training
  files together;
* one model for every language (#M=1), chosen by the average dev accuracy over all languages,
  evaluated every 5,000 steps (and here also at each epoch end);
* base-size hyperparameters: batch 32, learning rate from {5e-6, 7e-6, 1e-5} (7e-6 by default
  here, the middle; the paper does not say which won), 12,500 warm-up steps then linear decay,
  weight decay 0, 10 epochs; scores are means over five seeds.

Not in the paper: the input is XLM-R's pair format ``<s> premise </s></s> hypothesis </s>``
with longest-first truncation to 128 tokens (XTREME's XNLI default).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ..eval.xnli_data import (
    LABELS,
    NLIExample,
    XNLI_LANGUAGES,
    XNLIDataError,
    check_languages,
    load_xnli_hf,
    read_xnli_mt_train,
    read_xnli_tsv,
    xnli_mt_train_path,
)
from ..outputs import write_text_atomically
from ..tokenizer import Tokenizer
from . import defaults
from .heads import SequenceClassifier, save_task_model
from ..eval.results import average, markdown_table, transfer_gap
from .seeds import SeedRuns
from .training import Evaluation, FinetuneConfig, FinetuneError, seed_everything, train

SETTINGS = defaults.XNLI_SETTINGS
# Column order of the paper's XNLI table.
PAPER_ORDER = ("en", "fr", "es", "de", "el", "bg", "ru", "tr", "ar", "vi", "th", "zh", "hi", "sw", "ur")
DEFAULTS = defaults.XNLI
MAX_LENGTH = defaults.XNLI_MAX_LENGTH


@dataclass
class XNLIData:
    train: list[NLIExample]
    dev: dict[str, list[NLIExample]]
    test: dict[str, list[NLIExample]]
    sources: dict[str, str]  # what was read, for results.json


def _find(root: Path, names: Sequence[str], what: str) -> Path:
    for name in names:
        if (root / name).exists():
            return root / name
    raise XNLIDataError(f"{root}: no {what} (looked for {', '.join(str(root / n) for n in names)})")


def load_xnli_data(
    data: str | Path,
    setting: str,
    languages: Sequence[str] | None = None,
    *,
    train_data: str | Path | None = None,
    max_train_examples: int | None = None,
    max_dev_examples: int | None = None,
) -> XNLIData:
    """Training, dev and test examples for ``setting``.

    ``data`` is a directory holding ``XNLI-1.0/`` (dev/test) and ``XNLI-MT-1.0/`` (training), or
    the XNLI-1.0 directory itself with ``train_data`` pointing at XNLI-MT-1.0; or ``hf:xnli``
    for the Hugging Face dataset. ``max_train_examples`` keeps the first N of every training
    file, ``max_dev_examples`` the first N dev pairs of every language (smoke runs)."""
    if setting not in SETTINGS:
        raise FinetuneError(f"XNLI setting {setting!r}: expected one of {', '.join(SETTINGS)}")
    languages = check_languages(languages)
    train_languages = ["en"] if setting == "cross-lingual-transfer" else list(dict.fromkeys(["en", *languages]))
    data = str(data)
    if data.startswith("hf:"):
        name = data[3:] or "xnli"
        train_sets = load_xnli_hf("train", train_languages, name)
        dev, test = load_xnli_hf("dev", languages, name), load_xnli_hf("test", languages, name)
        sources = {"dev": data, "test": data, "train": data}
    else:
        root = Path(data)
        if not root.is_dir():
            raise XNLIDataError(f"{root}: no such directory; expected one holding XNLI-1.0/ and XNLI-MT-1.0/")
        dev_path = _find(root, ["xnli.dev.tsv", "XNLI-1.0/xnli.dev.tsv"], "XNLI-1.0 dev file xnli.dev.tsv")
        test_path = _find(root, ["xnli.test.tsv", "XNLI-1.0/xnli.test.tsv"], "XNLI-1.0 test file xnli.test.tsv")
        mt_root = Path(train_data) if train_data is not None else (
            root / "XNLI-MT-1.0" if (root / "XNLI-MT-1.0").is_dir() else root
        )
        paths = {lang: xnli_mt_train_path(mt_root, lang) for lang in train_languages}
        for lang, path in paths.items():
            if not path.is_file():
                raise XNLIDataError(
                    f"{path}: missing XNLI-MT-1.0 training file for {lang} (setting {setting}); "
                    "a set of some languages: name them with --languages"
                )
        dev, test = read_xnli_tsv(dev_path, languages), read_xnli_tsv(test_path, languages)
        train_sets = {lang: read_xnli_mt_train(path) for lang, path in paths.items()}
        sources = {"dev": str(dev_path), "test": str(test_path), "train": " ".join(str(p) for p in paths.values())}
    train_examples = [x for lang in train_languages for x in train_sets[lang][:max_train_examples]]
    if max_dev_examples is not None:
        dev = {lang: examples[:max_dev_examples] for lang, examples in dev.items()}
    return XNLIData(train_examples, dev, test, sources)


def encode_pairs(tokenizer: Tokenizer, examples: Sequence[NLIExample], max_length: int = MAX_LENGTH) -> list[tuple[list[int], int]]:
    """(token ids, label) per pair: ``<s> premise </s></s> hypothesis </s>``, at most ``max_length``.

    Longest-first truncation: a token is cut from the end of whichever side is longer (the
    hypothesis on ties), as Hugging Face's ``truncation="longest_first"`` does.
    """
    if max_length < 6:
        raise FinetuneError(f"max length {max_length}: expected >= 6 (4 special tokens + one token per side)")
    premises = tokenizer.encode_batch([x.premise for x in examples], add_special_tokens=False)
    hypotheses = tokenizer.encode_batch([x.hypothesis for x in examples], add_special_tokens=False)
    bos, eos = tokenizer.bos_id, tokenizer.eos_id
    room = max_length - 4
    out = []
    for a, b, x in zip(premises, hypotheses, examples):
        la, lb = len(a), len(b)
        while la + lb > room:  # closed-form would do; pairs are short, this stays readable
            if la > lb:
                la -= 1
            else:
                lb -= 1
        out.append(([bos, *a[:la], eos, eos, *b[:lb], eos], x.label))
    return out


def make_collate(tokenizer: Tokenizer) -> Callable[[list[tuple[list[int], int]]], dict[str, torch.Tensor]]:
    def collate(items: list[tuple[list[int], int]]) -> dict[str, torch.Tensor]:
        input_ids, attention_mask = tokenizer.pad([ids for ids, _ in items])  # (B, T) each
        return {"input_ids": input_ids, "attention_mask": attention_mask,
                "labels": torch.tensor([label for _, label in items])}  # (B,)
    return collate


def classification_loss(model: SequenceClassifier, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    logits = model(batch["input_ids"], batch["attention_mask"])  # (B, labels)
    return F.cross_entropy(logits.float(), batch["labels"])


@torch.no_grad()
def predict_labels(
    model: SequenceClassifier,
    features: dict[str, list[tuple[list[int], int]]],
    collate: Callable,
    *,
    batch_size: int = 128,
    device: torch.device | str = "cpu",
    progress: bool = True,
    desc: str = "evaluating",
) -> dict[str, list[int]]:
    """The predicted label id of every pair, per language, in input order; pairs are batched by
    length so little padding is computed."""
    was_training = model.training
    model.eval()
    device = torch.device(device)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    out = {}
    total = sum(len(v) for v in features.values())
    with tqdm(total=total, desc=desc, unit="pair", disable=not progress, leave=False) as bar:
        for lang, items in features.items():
            order = sorted(range(len(items)), key=lambda i: len(items[i][0]))
            predicted = [0] * len(items)
            for start in range(0, len(order), batch_size):
                rows = order[start:start + batch_size]
                batch = collate([items[i] for i in rows])
                with autocast:
                    logits = model(batch["input_ids"].to(device), batch["attention_mask"].to(device))  # (B, labels)
                for i, label in zip(rows, logits.argmax(-1).tolist()):
                    predicted[i] = label
                bar.update(len(rows))
            out[lang] = predicted
    model.train(was_training)
    return out


def accuracy_of(predicted: dict[str, list[int]], features: dict[str, list[tuple[list[int], int]]]) -> dict[str, float]:
    """Accuracy (%) per language of predicted label ids against the features' gold labels."""
    return {lang: 100.0 * sum(p == label for p, (_, label) in zip(predicted[lang], items)) / len(items)
            for lang, items in features.items()}


def accuracy(model: SequenceClassifier, features: dict[str, list[tuple[list[int], int]]], collate: Callable,
             **kwargs: Any) -> dict[str, float]:
    """Accuracy (%) per language (``kwargs`` as :func:`predict_labels`)."""
    return accuracy_of(predict_labels(model, features, collate, **kwargs), features)


def write_label_predictions(directory: Path, predicted: dict[str, list[int]], labels: Sequence[str]) -> None:
    """XTREME's prediction layout for classification: ``test-{lang}.tsv``, one label a line."""
    for lang, ids in predicted.items():
        write_text_atomically(directory / f"test-{lang}.tsv", "".join(f"{labels[i]}\n" for i in ids))


def finetune_pairs_once(
    model_dir: str | Path,
    tokenizer: Tokenizer,
    train_features: list,
    dev_features: dict[str, list],
    test_features: dict[str, list],
    config: FinetuneConfig,
    *,
    labels: Sequence[str] = LABELS,
    device: torch.device | str = "cpu",
    progress: bool = True,
    save_to: Path | None = None,
    predictions_to: Path | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """One seed of sentence-pair classification (XNLI, PAWS-X): train, keep the model with the
    best mean dev accuracy over the languages of ``dev_features`` (all of them: #M=1; only en:
    XTREME's rule), test every language; with ``predictions_to``, write its test-{lang}.tsv."""
    from ..model.encoder import Encoder

    seed_everything(config.seed)
    model = SequenceClassifier(Encoder.from_pretrained(model_dir), num_labels=len(labels))
    collate = make_collate(tokenizer)
    eval_kwargs = dict(device=device, progress=progress, batch_size=max(config.batch_size, 64))

    def evaluate(m: SequenceClassifier) -> Evaluation:
        dev = accuracy(m, dev_features, collate, desc="dev", **eval_kwargs)
        return Evaluation(0, 0.0, average(dev), {"dev": dev})

    result = train(model, train_features, collate, classification_loss, config,
                   evaluate=evaluate if dev_features else None, device=device, progress=progress, log=log)
    predicted = predict_labels(model, test_features, collate, desc="test", **eval_kwargs)
    test = accuracy_of(predicted, test_features)
    if predictions_to is not None:
        write_label_predictions(predictions_to, predicted, labels)
    if save_to is not None:
        save_task_model(model, save_to, tokenizer, labels=labels, source=model_dir)
    selected = result.selected
    return {
        "seed": config.seed,
        "selected_step": result.selected_step,
        "selected_epoch": round(selected.epoch, 4) if selected else None,
        "total_steps": result.total_steps,
        "warmup_steps": result.warmup_steps,
        "dev": selected.details["dev"] if selected else None,
        "dev_average": selected.score if selected else None,
        "test": test,
        "test_average": average(test),
        "transfer_gap": transfer_gap(test),
        "train_loss": result.loss_summary(),
        "evaluations": [{"step": e.step, "epoch": round(e.epoch, 4), "dev_average": e.score} for e in result.evaluations],
        "model": str(save_to) if save_to is not None else None,
        "predictions": str(predictions_to) if predictions_to is not None else None,
    }


def kept_model(config: FinetuneConfig, dev: dict[str, Any], metric: str) -> str:
    """How the kept model was chosen, in words (results.json's ``selected_on``)."""
    if config.selection == "last" or not dev:
        return "the final model"
    return f"the best dev {metric} (mean over {' '.join(dev)}), checked after each epoch" + (
        f" and every {config.eval_every} steps" if config.eval_every else "")


def selection_dev(dev: dict[str, list], dev_languages: Sequence[str] | None, task: str) -> dict[str, list]:
    """The dev sets the selection reads: ``dev_languages`` (None: all of ``dev``)."""
    if dev_languages is None:
        return dev
    missing = [lang for lang in dev_languages if lang not in dev]
    if missing:
        raise FinetuneError(f"{task}: selection on the {' '.join(missing)} dev set, but no {' '.join(missing)} dev "
                            f"data was read (languages read: {' '.join(dev)}); add {' '.join(missing)} to --languages")
    return {lang: dev[lang] for lang in dev_languages}


def run_xnli(
    model_dir: str | Path,
    data: str | Path,
    setting: str,
    output: str | Path,
    config: FinetuneConfig,
    *,
    seeds: int = 1,
    languages: Sequence[str] | None = None,
    train_data: str | Path | None = None,
    max_length: int = MAX_LENGTH,
    max_train_examples: int | None = None,
    max_dev_examples: int | None = None,
    device: torch.device | str = "cpu",
    progress: bool = True,
    save_models: bool = True,
    dev_languages: Sequence[str] | None = None,
    log: Callable[[str], None] = print,
    model_name: str | None = None,
    settings_chosen: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fine-tune ``seeds`` times (seeds config.seed, config.seed + 1, …); write OUTPUT/results.json,
    OUTPUT/results.md and OUTPUT/seed-{s}/model/ (a ``XLMRobertaForSequenceClassification``
    directory); return the results. ``dev_languages``: the dev sets selection averages (default:
    every language, the paper's #M=1; ``["en"]``: XTREME's). ``model_name``: the model as
    results.json names it (default: ``model_dir``)."""
    runs = SeedRuns("xnli", config, seeds, output, log)
    tokenizer = Tokenizer.from_pretrained(model_dir)  # fails fast on a directory without one
    xnli = load_xnli_data(data, setting, languages, train_data=train_data,
                          max_train_examples=max_train_examples, max_dev_examples=max_dev_examples)
    log(f"[xnli] {setting}: {len(xnli.train)} training pairs, dev {sum(map(len, xnli.dev.values()))}, "
        f"test {sum(map(len, xnli.test.values()))} pairs in {len(xnli.test)} languages")
    train_features = encode_pairs(tokenizer, xnli.train, max_length)
    dev = selection_dev(xnli.dev, dev_languages, "xnli")
    dev_features = {lang: encode_pairs(tokenizer, x, max_length) for lang, x in dev.items()}
    test_features = {lang: encode_pairs(tokenizer, x, max_length) for lang, x in xnli.test.items()}
    runs.run(lambda seed_config, seed_dir: finetune_pairs_once(
        model_dir, tokenizer, train_features, dev_features, test_features, seed_config,
        device=device, progress=progress, save_to=seed_dir / "model" if save_models else None,
        predictions_to=seed_dir / "predictions" / "xnli", log=log,
    ))
    described = {
        "setting": setting,
        "model": model_name or str(model_dir),
        "data": xnli.sources,
        "languages": list(xnli.test),
        "train_examples": len(xnli.train),
        "max_length": max_length,
        "selected_on": kept_model(config, dev_features, "accuracy"),
        **({"settings_chosen": settings_chosen} if settings_chosen is not None else {}),
    }
    return runs.finish(described, mean_keys=["test", "test_average", "transfer_gap", "dev_average"],
                       std_keys=["test_average"], markdown=format_xnli_results, predictions=True)


def format_xnli_results(results: dict[str, Any]) -> str:
    """The paper's XNLI table shape: one row per seed and the mean; languages, Avg, gap."""
    return format_pair_results(results, f"XNLI, {results['setting']}", PAPER_ORDER)


def format_pair_results(results: dict[str, Any], title: str, order: Sequence[str]) -> str:
    """One row per seed and the mean: accuracy per language (in ``order``), Avg, gap."""
    langs = [lang for lang in order if lang in results["languages"]]
    header = ["run", *langs, "Avg", "gap"]

    def row(name: str, r: dict) -> list:
        return [name, *(r["test"][lang] for lang in langs), r["test_average"], r["transfer_gap"]]

    rows = [row(f"seed {r['seed']}", r) for r in results["runs"]]
    if len(results["runs"]) > 1:
        rows.append(row(f"**mean of {len(results['runs'])}**", results["mean"]))
        rows.append(["std over seeds", *([""] * len(langs)), results["std"]["test_average"], ""])
    lines = [
        f"# {title}",
        "",
        f"Model `{results['model']}`; test accuracy (%), one model for all languages (#M=1), kept: "
        f"{results.get('selected_on') or 'the best average dev accuracy'}; gap = en − mean of the other languages.",
        "",
        markdown_table(header, rows),
        "",
    ]
    return "\n".join(lines)


__all__ = ["SETTINGS", "DEFAULTS", "PAPER_ORDER", "load_xnli_data", "encode_pairs", "finetune_pairs_once", "run_xnli",
           "XNLI_LANGUAGES"]
