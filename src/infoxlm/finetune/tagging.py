"""WikiANN (PAN-X) named entities and UD-POS part-of-speech tags: XTREME's token-classification
tasks, trained on English and tested in every language.

Protocol (XTREME, Hu et al. 2020; ``scripts/train_panx.sh``, ``train_udpos.sh``, ``run_tag.py``):

* a linear head on every token (``XLMRobertaForTokenClassification``), labels on each word's
  first sub-token (:mod:`.tagging_features`);
* train on the English training file; lr 2e-5, batch 32 (8 × 4 accumulated), 10 epochs, no
  warm-up, weight decay 0, 128 tokens (:mod:`.tagging_defaults`);
* the model kept is the one with the best English dev F1, evaluated after each epoch
  (``selection="en-dev"``); ``all-dev`` takes the average dev F1 of every tested language (the
  InfoXLM paper's #M=1 rule), ``last`` the final weights;
* scores: seqeval's entity-level F1 / precision / recall per language, exactly XTREME's
  ``evaluate.py`` (:mod:`..eval.xtreme_score`), for UD-POS with token accuracy beside it.

Test predictions are written in XTREME's layout, ``seed-S/predictions/{panx,udpos}/test-xx.tsv``
(and the first seed's beside results.json, ``RUN/predictions/…``), which ``infoxlm eval
xtreme-score`` and XTREME's own ``evaluate.py`` read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from ..errors import EvalDataError
from ..eval.results import average, markdown_table, transfer_gap
from ..eval.tagging_data import LABELS, TaggedSentence, find_split, read_split
from ..eval.xtreme_score import format_tag_file, tagging_scores, token_accuracy
from ..outputs import write_text_atomically
from ..tokenizer import Tokenizer
from .heads import TokenClassifier, save_task_model
from .seeds import SeedRuns
from .tagging_defaults import MAX_LENGTH, SELECTIONS, XTREME_NAMES
from .tagging_features import encode_sentences, make_collate, predict_labels, tagging_loss
from .training import Evaluation, FinetuneConfig, FinetuneError, seed_everything, train

SOURCE = "en"


@dataclass
class TaggingData:
    train: list[TaggedSentence]
    dev: dict[str, list[TaggedSentence]]
    test: dict[str, list[TaggedSentence]]
    sources: dict[str, str]


def _split(root: Path, task: str, lang: str, split: str, why: str) -> tuple[list[TaggedSentence], Path]:
    xtreme = XTREME_NAMES[task]
    path = find_split(root, lang, split, conllu=xtreme == "udpos")
    if path is None:
        layouts = f"{root / lang / split}, {root / lang / split}.*, {root / f'{split}-{lang}.tsv'}"
        if xtreme == "udpos":
            layouts += f", {root / lang}/{split}.conllu or *-ud-{split}.conllu"
        raise EvalDataError(f"{root}: no {split} file for {lang} ({why}); looked for {layouts}")
    return read_split(path, xtreme, lang), path


def load_tagging_data(
    task: str, data: str | Path, languages: Sequence[str], *, selection: str = "en-dev",
    max_train_examples: int | None = None,
) -> TaggingData:
    """English training sentences, the dev sets ``selection`` needs, a test set per language."""
    if selection not in SELECTIONS:
        raise FinetuneError(f"selection {selection!r}: expected one of {', '.join(SELECTIONS)}")
    root = Path(data)
    if not root.is_dir():
        raise EvalDataError(f"{root}: no such directory; expected one holding {{lang}}/{{train,dev,test}} files")
    languages = list(dict.fromkeys(languages))
    train, train_path = _split(root, task, SOURCE, "train", "training is on English, as XTREME trains")
    dev_languages = {"en-dev": [SOURCE], "all-dev": languages, "last": []}[selection]
    dev, sources = {}, {"train": str(train_path)}
    for lang in dev_languages:
        dev[lang], path = _split(root, task, lang, "dev", f"--selection {selection} needs it")
        sources[f"dev-{lang}"] = str(path)
    test = {}
    for lang in languages:
        test[lang], path = _split(root, task, lang, "test", "a tested language")
        sources[f"test-{lang}"] = str(path)
    return TaggingData(train[:max_train_examples], dev, test, sources)


def _scores(task: str, gold: list[TaggedSentence], predicted: list[list[str]]) -> dict[str, float]:
    labels = [list(s.labels) for s in gold]
    scores = tagging_scores(labels, predicted)
    if task == "udpos":
        scores["accuracy"] = token_accuracy(labels, predicted)
    return scores


def finetune_tagging_once(
    task: str,
    model_dir: str | Path,
    tokenizer: Tokenizer,
    data: TaggingData,
    config: FinetuneConfig,
    *,
    max_length: int = MAX_LENGTH,
    device: torch.device | str = "cpu",
    progress: bool = True,
    seed_dir: Path,
    save_model: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """One seed: train on English, keep the model the dev sets select, predict and score every test set."""
    from ..model.encoder import Encoder

    labels = LABELS[XTREME_NAMES[task]]
    label_ids = {label: i for i, label in enumerate(labels)}
    seed_everything(config.seed)
    model = TokenClassifier(Encoder.from_pretrained(model_dir), num_labels=len(labels))
    collate = make_collate(tokenizer)

    def encode(sentences: list[TaggedSentence]) -> list:
        return encode_sentences(tokenizer, sentences, label_ids, max_length)

    dev_features = {lang: encode(s) for lang, s in data.dev.items()}
    kwargs = dict(device=device, progress=progress, batch_size=max(config.batch_size, 64))

    def predict(m: torch.nn.Module, sentences: list[TaggedSentence], features: list, desc: str) -> list[list[str]]:
        return predict_labels(m, features, len(sentences), collate, labels, desc=desc, **kwargs)

    def evaluate(m: torch.nn.Module) -> Evaluation:
        dev = {lang: tagging_scores([list(s.labels) for s in data.dev[lang]],
                                    predict(m, data.dev[lang], f, f"dev {lang}"))["f1"]
               for lang, f in dev_features.items()}
        return Evaluation(0, 0.0, average(dev), {"dev": dev})

    result = train(model, encode(data.train), collate, tagging_loss, config,
                   evaluate=evaluate if dev_features else None, device=device, progress=progress, log=log)
    test, predictions = {}, {}
    for lang, sentences in data.test.items():
        predictions[lang] = predict(model, sentences, encode(sentences), f"test {lang}")
        test[lang] = _scores(task, sentences, predictions[lang])
    write_predictions(seed_dir / "predictions", XTREME_NAMES[task], predictions)
    if save_model:
        save_task_model(model, seed_dir / "model", tokenizer, labels=labels, source=model_dir)
    f1 = {lang: s["f1"] for lang, s in test.items()}
    selected = result.selected
    run = {
        "seed": config.seed, "selected_step": result.selected_step, "total_steps": result.total_steps,
        "dev": selected.details["dev"] if selected else None, "dev_average": selected.score if selected else None,
        "test": test, "test_average": average(f1), "transfer_gap": transfer_gap(f1),
        "train_loss": result.loss_summary(),
        "evaluations": [{"step": e.step, "epoch": round(e.epoch, 4), "dev_average": e.score} for e in result.evaluations],
        "model": str(seed_dir / "model") if save_model else None,
    }
    if task == "udpos":
        run["average_accuracy"] = average({lang: s["accuracy"] for lang, s in test.items()})
    return run


def write_predictions(folder: Path, xtreme_task: str, predictions: dict[str, list[list[str]]]) -> None:
    """FOLDER/{task}/test-{lang}.tsv in XTREME's layout (a label a line, blank between sentences)."""
    for lang, sentences in predictions.items():
        write_text_atomically(folder / xtreme_task / f"test-{lang}.tsv", format_tag_file(sentences))


def run_tagging(
    task: str,
    model_dir: str | Path,
    data: str | Path,
    output: str | Path,
    config: FinetuneConfig,
    *,
    languages: Sequence[str],
    selection: str = "en-dev",
    seeds: int = 1,
    max_length: int = MAX_LENGTH,
    max_train_examples: int | None = None,
    device: torch.device | str = "cpu",
    progress: bool = True,
    save_models: bool = True,
    log: Callable[[str], None] = print,
    model_name: str | None = None,
) -> dict[str, Any]:
    """Fine-tune ``seeds`` times; write RUN/results.json, results.md, seed-S/predictions/ and
    seed-S/model/, and RUN/predictions/ (the first seed's); return the results."""
    if task not in XTREME_NAMES:
        raise FinetuneError(f"task {task!r}: expected one of {', '.join(XTREME_NAMES)}")
    if max_length < 3:
        raise FinetuneError(f"max length {max_length}: expected >= 3 (<s>, one token, </s>)")
    runs = SeedRuns(task, config, seeds, output, log)
    tokenizer = Tokenizer.from_pretrained(model_dir)
    tagged = load_tagging_data(task, data, languages, selection=selection, max_train_examples=max_train_examples)
    log(f"[{task}] {len(tagged.train)} English training sentences; dev {', '.join(tagged.dev) or 'none'}; "
        f"test {sum(map(len, tagged.test.values()))} sentences in {len(tagged.test)} languages")
    runs.run(lambda seed_config, seed_dir: finetune_tagging_once(
        task, model_dir, tokenizer, tagged, seed_config, max_length=max_length, device=device,
        progress=progress, seed_dir=seed_dir, save_model=save_models, log=log,
    ))
    first = Path(output) / f"seed-{config.seed}" / "predictions"
    for path in sorted(first.rglob("*.tsv")):  # beside results.json, where XTREME's submissions sit
        write_text_atomically(Path(output) / "predictions" / path.relative_to(first), path.read_text(encoding="utf-8"))
    described = {
        "model": model_name or str(model_dir), "xtreme_task": XTREME_NAMES[task], "data": tagged.sources,
        "languages": list(tagged.test), "train_examples": len(tagged.train), "max_length": max_length,
        "selection": selection, "protocol": _protocol(selection),
    }
    mean_keys = ["test", "test_average", "transfer_gap", "dev_average", "average_accuracy"]
    return runs.finish(described, mean_keys=mean_keys, std_keys=["test_average"], markdown=format_tagging_results)


def _protocol(selection: str) -> str:
    return {"en-dev": "XTREME: en train, en dev each epoch", "all-dev": "en train, all-dev each epoch (#M=1)",
            "last": "en train, final model"}[selection]


def format_tagging_results(results: dict[str, Any]) -> str:
    """One row per seed and the mean: F1 per language, Avg, gap (and token accuracy for UD-POS)."""
    langs = results["languages"]
    pos = results["task"] == "udpos"
    header = ["run", *langs, "Avg", "gap", *(["token acc."] if pos else [])]

    def row(name: str, r: dict) -> list:
        return [name, *(r["test"][lang]["f1"] for lang in langs), r["test_average"], r["transfer_gap"],
                *([r.get("average_accuracy")] if pos else [])]

    rows = [row(f"seed {r['seed']}", r) for r in results["runs"]]
    if len(results["runs"]) > 1:
        rows.append(row(f"**mean of {len(results['runs'])}**", results["mean"]))
    title = "UD-POS" if pos else "WikiANN (PAN-X)"
    return "\n".join([
        f"# {title}", "",
        f"Model `{results['model']}`; test F1 (%, seqeval as XTREME's evaluate.py); {results['protocol']}; "
        "gap = en − mean of the other languages.", "",
        markdown_table(header, rows), "",
    ])
