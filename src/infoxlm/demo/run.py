"""``infoxlm demo``: InfoXLM against its −XLCO ablation, from raw text to a results table.

One function, :func:`run_demo`, runs the whole experiment on the corpus shipped in
``infoxlm/demo/corpus`` (software documentation and UI strings in English and 14 languages):

1. export the training text, learn a vocabulary from it, tokenize it into a store;
2. pre-train a small encoder from scratch twice on the same data, budget and seed: with
   MMLM + TLM + XLCO (InfoXLM) and without XLCO (the paper's −XLCO ablation);
3. export both as Hugging Face directories (``DIR/infoxlm``, ``DIR/no-xlco``);
4. evaluate both: layer-wise Tatoeba-style retrieval (dev, test and the held-out Firefox
   split, both directions), mining (the held-out pairs hidden among monolingual text, BUCC's
   construction: demo/mining_row.py) and zero-shot transfer of an English-trained classifier;
5. write ``results.json``, ``results.md`` and PNG plots, and return the results.

With ``settings=PAPER`` (``infoxlm demo --setting paper``) step 1 uses the shipped
checkpoint's vocabulary, step 2 continues that checkpoint instead of starting from scratch
and trains the settings' six models (InfoXLM and the paper's ablations), and step 4 scores
every model (and the starting point) at its universal layer on the test and held-out splits.

Intermediate files live in ``DIR/work``; a second call with the same settings reuses the
tokenizer, the store and finished runs, so only evaluation is repeated.

Example::

    >>> from infoxlm.demo.run import run_demo
    >>> results = run_demo("out/demo-quick", quick=True)            # doctest: +SKIP
    >>> results["summary"]["test"]["infoxlm"]["xx2en"]               # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ..corpus.prepare import prepare_monolingual, prepare_parallel
from ..data.pipeline import OBJECTIVES
from ..embedding import embed_layers
from ..errors import InfoXLMError
from ..json_files import CONFIG_BYTES, read_json
from ..eval.layer_overlay import LayerCurve, plot_layer_overlay
from ..eval.plots import plot_losses
from ..eval.tatoeba import evaluate_tatoeba, load_pairs, resolve_languages
from ..model.encoder import Encoder
from ..model.fast_paths import FastPaths
from ..model.hub import read_contrast_layer
from ..model.sentence_layer import default_layer
from ..outputs import write_text_atomically
from ..tokenizer import Tokenizer
from ..tokenizer_training import train_tokenizer
from ..train.ablations import Changes
from ..train.config import TrainConfig, changed
from ..train.export import export
from ..train.loop import pretrain
from ..train.presets import preset
from . import corpus
from .checkpoint import checkpoint_dir
from .mining_row import evaluate_mining
from .settings import FULL, PAPER, PAPER_QUICK, QUICK, DemoSettings
from .tables import format_tables

__all__ = ["DemoSettings", "FULL", "QUICK", "PAPER", "MODELS", "run_demo", "format_tables"]

# The default demo's two pre-training runs: directory name → (table label, changes to the
# recipe). −XLCO keeps everything else (data, steps, seed, MMLM and TLM batches) identical.
MODELS: dict[str, tuple[str, Changes]] = {name: (label, changes) for name, label, changes in FULL.models}
# The starting point of a setting that continues the shipped checkpoint, evaluated beside the
# models (XLM-R's row in the paper's tables).
START = "start"


class DemoError(InfoXLMError):
    """The demo cannot run in the given directory or with the given settings."""


def run_demo(
    output: str | Path = "out/demo",
    quick: bool = False,
    seed: int = 0,
    *,
    settings: DemoSettings | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the demo into ``output`` and return what ``results.json`` holds.

    Args:
        output: directory for the models, results and plots (``DIR/work`` holds the rest).
        quick: the tiny settings (``QUICK``) used by the tests; otherwise ``FULL``.
        seed: one seed for the vocabulary sample, the data order, the weights and the
            classifier: the same seed gives the same table (the vocabulary is learned on one
            thread, which makes it repeatable).
        settings: explicit settings (overrides ``quick``).
        progress: show progress bars while pre-training.
        log: where stage messages go.

    Raises:
        DemoError: ``output`` holds a demo made with other settings or another seed.
        RunStopped: a stop signal (SIGTERM, SIGUSR1) ended a pre-training run before its last
            step; its checkpoint is in place and the same call continues the demo from it.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise DemoError(f"seed={seed!r}: expected a non-negative integer")
    settings = settings or (QUICK if quick else FULL)
    out = Path(output)
    work = out / "work"
    started = time.perf_counter()
    _claim_directory(work, settings, seed)
    timings: dict[str, float] = {}

    t = time.perf_counter()
    store = _prepare_data(work, settings, seed, log)
    timings["data"] = time.perf_counter() - t

    models: dict[str, dict[str, Any]] = {}
    for name, label, changes in settings.models:
        t = time.perf_counter()
        log(f"[demo] pre-training {label} ({name}) …")
        run_dir = _pretrain(work / "runs" / name, store, settings, seed, changes, progress)
        hf_dir = _export(run_dir, out / name)
        models[name] = {"label": label, "path": str(hf_dir), "run": str(run_dir), "pretrain_seconds": time.perf_counter() - t}

    t = time.perf_counter()
    log("[demo] evaluating retrieval, mining and transfer …")
    retrieval_dirs = {split: _retrieval_files(work / "retrieval" / split, split, settings) for split in settings.splits}
    for name, model in models.items():
        model.update(_evaluate(Path(model["path"]), retrieval_dirs, settings, seed))
    timings["pretrain"] = sum(m.pop("pretrain_seconds") for m in models.values())
    if settings.from_checkpoint:
        start = {"label": "Starting point (MMLM only)", "path": str(checkpoint_dir())}
        models[START] = start | _evaluate(checkpoint_dir(), retrieval_dirs, settings, seed)
    timings["evaluate"] = time.perf_counter() - t
    timings["mining"] = sum(m.pop("mining_seconds") for m in models.values())  # a part of evaluate

    results = {
        "settings": {**settings.fingerprint(), "seed": seed},
        "recipe": train_config(settings, seed).to_dict(),
        "models": models,
        "summary": _summary(models, settings.splits),
        "plots": _plots(out, models, settings.splits),
        "seconds": {**timings, "total": time.perf_counter() - started},
    }
    write_text_atomically(out / "results.json", json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    tables = format_tables(results)
    setting = " --setting paper" if settings.from_checkpoint else ""
    quick_flag = " --quick" if settings in (QUICK, PAPER_QUICK) else ""
    command = f"infoxlm demo{setting}{quick_flag} --seed {seed} --output {out}"
    write_text_atomically(out / "results.md", f"# infoxlm demo\n\n`{command}`\n\n{tables}\n")
    log(tables)
    written = ", ".join(f"{name}/" for name, _, _ in settings.models)
    log(f"[demo] {out}: results.json, results.md, *.png, {written} ({results['seconds']['total']:.0f} s)")
    return results


# --- 1. data ------------------------------------------------------------------------------


def _claim_directory(work: Path, settings: DemoSettings, seed: int) -> None:
    """Reusing intermediate files is only right for the same settings and seed: check."""
    stamp = work / "demo_settings.json"
    wanted = json.loads(json.dumps({**settings.fingerprint(), "seed": seed}))  # tuples → lists, as read back
    if os.path.lexists(stamp):
        found = read_json(stamp, what="the settings infoxlm demo records", max_bytes=CONFIG_BYTES, error=DemoError)
        if found != wanted:
            changed = sorted(k for k in wanted if not isinstance(found, dict) or found.get(k) != wanted[k])
            raise DemoError(
                f"{work.parent}: holds a demo made with other settings ({', '.join(changed)}); "
                "use another --output or delete that directory"
            )
    work.mkdir(parents=True, exist_ok=True)
    stamp.write_text(json.dumps(wanted, indent=2) + "\n", encoding="utf-8")


def _prepare_data(work: Path, settings: DemoSettings, seed: int, log) -> Path:
    """The demo's vocabulary (the checkpoint's, or learned once) and its token store:
    monolingual and parallel."""
    text = training_text(work, settings)
    if settings.from_checkpoint:
        tokenizer = Tokenizer.from_pretrained(checkpoint_dir())
    else:
        tokenizer = learn_vocabulary(text, work / "tokenizer", settings, seed, log)
    return tokenize_training_text(text, tokenizer, work / "store", log)


def training_text(work: Path, settings: DemoSettings) -> dict[str, dict[str, Path]]:
    """The corpus's training text as plain files under ``work/text``, for the settings' languages:
    ``{"mono": {lang: path}, "parallel": {"en-xx": path}, "sides": {lang: path}}``, where a
    side file holds one language's side of the training pairs, a sentence a line."""
    wanted = set(settings.languages or corpus.languages())
    text = corpus.export_training_text(work / "text")
    mono = {lang: p for lang, p in text["mono"].items() if lang == "en" or lang in wanted}
    parallel = {pair: p for pair, p in text["parallel"].items() if pair.split("-")[1] in wanted}
    sides: dict[str, list[str]] = {}
    for pair, path in parallel.items():
        en_lines, xx_lines = _split_tsv(path)
        sides.setdefault("en", []).extend(en_lines)
        sides.setdefault(pair.split("-")[1], []).extend(xx_lines)
    side_files = {lang: _write_lines(work / "text" / "sides" / f"{lang}.txt", lines) for lang, lines in sides.items()}
    return {"mono": mono, "parallel": parallel, "sides": side_files}


def learn_vocabulary(
    text: dict[str, dict[str, Path]], tokenizer_dir: Path, settings: DemoSettings, seed: int, log
) -> Tokenizer:
    """The settings' SentencePiece vocabulary, learned from ``text`` (``training_text``'s) into
    ``tokenizer_dir``, or read from there when it already is."""
    if (tokenizer_dir / "tokenizer.json").is_file():
        log(f"[demo] reusing the vocabulary in {tokenizer_dir}")
        return Tokenizer.from_pretrained(tokenizer_dir)
    # The vocabulary sees every language's text: monolingual and both sides of the pairs,
    # so that pieces of the parallel-only vocabulary (UI strings) are not left as <unk>.
    files: dict[str, list[Path]] = {lang: [p] for lang, p in text["mono"].items()}
    for lang, path in text["sides"].items():
        files.setdefault(lang, []).append(path)
    log(f"[demo] learning a {settings.vocab_size}-piece vocabulary …")
    # One trainer thread: the vocabulary (and so the whole table) is the same on any machine.
    return train_tokenizer(
        files, tokenizer_dir, vocab_size=settings.vocab_size, max_sentences=settings.tokenizer_sentences,
        seed=seed, threads=1,
    )


def tokenize_training_text(text: dict[str, dict[str, Path]], tokenizer: Tokenizer, store: Path, log) -> Path:
    """Monolingual and parallel corpora into one store (each call returns at once when its
    corpus is up to date there)."""
    log(f"[demo] tokenizing {len(text['mono'])} monolingual and {len(text['parallel'])} parallel corpora into {store} …")
    for lang, path in text["mono"].items():
        prepare_monolingual(lang, [path], tokenizer, store, show_progress=False)
    for pair, path in text["parallel"].items():
        prepare_parallel(pair, tokenizer, store, tsv=path, show_progress=False)
    return store


def _split_tsv(path: Path) -> tuple[list[str], list[str]]:
    en, xx = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        a, _, b = line.partition("\t")
        en.append(a)
        xx.append(b)
    return en, xx


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# --- 2. pre-training ----------------------------------------------------------------------


def train_config(settings: DemoSettings, seed: int, changes: Changes | None = None) -> TrainConfig:
    """What one of the settings' models trains: the settings' preset (what ``infoxlm pretrain
    --preset NAME`` trains; ``paper-demo`` continues the shipped checkpoint at the universal
    layer it records), the model's changes (−XLCO: no XLCO batch) and the demo's seed."""
    sections = {section: dict(fields) for section, fields in (changes or {}).items()}
    sections.setdefault("run", {})["seed"] = seed
    return changed(preset(settings.preset), **sections)


def _pretrain(run_dir: Path, store: Path, settings: DemoSettings, seed: int, changes: Changes, progress: bool) -> Path:

    # pretrain() resumes from the run's last checkpoint, so a finished run costs nothing; a
    # stopped one raises RunStopped, which ends the demo before anything uses its weights.
    return pretrain(train_config(settings, seed, changes), store, run_dir, progress=progress)


def _export(run_dir: Path, target: Path) -> Path:
    """The run's final checkpoint with its tokenizer (prepare keeps one in STORE/tokenizer)."""

    if target.exists():  # always the run's final checkpoint: replace a stale export
        shutil.rmtree(target)
    return export(run_dir, target)


# --- 3. evaluation ------------------------------------------------------------------------


def _retrieval_files(folder: Path, split: str, settings: DemoSettings) -> Path:
    """LASER files of one split (the languages of the settings, capped for the quick run)."""
    written = corpus.export_retrieval(folder, split)
    for lang, paths in written.items():
        if settings.languages is not None and lang not in settings.languages:
            for path in paths:
                path.unlink()
        elif settings.retrieval_limit is not None:
            for path in paths:
                lines = path.read_text(encoding="utf-8").splitlines()[: settings.retrieval_limit]
                _write_lines(path, lines)
    return folder


def _evaluate(model_dir: Path, retrieval_dirs: dict[str, Path], settings: DemoSettings, seed: int) -> dict[str, Any]:

    encoder = Encoder.from_pretrained(model_dir, fast_paths=FastPaths.inference()).eval()
    tokenizer = Tokenizer.from_pretrained(model_dir)
    layers = list(range(encoder.num_layers + 1))  # 0 = embeddings … L = last layer
    retrieval = {}
    # The vectors of the splits the mining row reuses: {split: {code: (xx, en by layer)}}.
    embedded: dict[str, dict] = {split: {} for split in (_tuning_split(settings), "heldout") if split in retrieval_dirs}
    for split, folder in retrieval_dirs.items():
        codes = resolve_languages(None, str(folder))
        retrieval[split] = evaluate_tatoeba(encoder, tokenizer, str(folder), codes, layers, vectors=embedded.get(split))["layers"]
    # The layer for the tables and the classifier: best on dev (both directions), never test;
    # without a dev split, the one `infoxlm eval tatoeba` reads by default (the universal layer).
    if "dev" in retrieval:
        dev = retrieval["dev"]
        layer = max(layers, key=lambda k: (sum(dev[k]["average"].values()), k))
    else:
        layer = default_layer(encoder.num_layers, read_contrast_layer(model_dir))[0]
    started = time.perf_counter()
    mining = _mining(encoder, tokenizer, layer, retrieval_dirs, embedded, settings) if len(embedded) == 2 else None
    return {
        "layer": layer,
        "retrieval": retrieval,
        "mining": mining,
        "mining_seconds": time.perf_counter() - started,
        "classification": _transfer(encoder, tokenizer, layer, settings, seed),
    }


def _tuning_split(settings: DemoSettings) -> str:
    """Where the mining row's thresholds are tuned: dev, else test (never the held-out split)."""
    return "dev" if "dev" in settings.splits else "test"


def _mining(encoder, tokenizer, layer: int, retrieval_dirs: dict[str, Path], embedded: dict[str, dict],
            settings: DemoSettings) -> dict[str, Any]:
    """The held-out pairs hidden among monolingual text, mined at ``layer`` (demo/mining_row.py)."""

    def at_layer(split: str) -> dict:
        return {code: (*load_pairs(str(retrieval_dirs[split]), code), xx[layer], en[layer])
                for code, (xx, en) in embedded[split].items()}

    tune = _tuning_split(settings)
    return evaluate_mining(encoder, tokenizer, layer, at_layer(tune), at_layer("heldout"), tune)


def _transfer(encoder, tokenizer, layer: int, settings: DemoSettings, seed: int) -> dict[str, Any]:
    """Zero-shot transfer: softmax regression on frozen English embeddings, tested everywhere."""

    def load(lang: str, split: str) -> tuple[list[str], list[str]]:
        rows = corpus.classification(lang, split)
        if settings.classification_limit is not None:
            # An even spread over the labels, not the first label's examples only.
            rows = [rows[i] for i in np.linspace(0, len(rows) - 1, settings.classification_limit).astype(int)]
        return [label for label, _ in rows], [text for _, text in rows]

    def vectors(texts: list[str]) -> torch.Tensor:
        return torch.from_numpy(embed_layers(encoder, tokenizer, texts, [layer], max_length=256)[layer])

    test_languages = ["en"] + [
        lang
        for lang in corpus.languages()
        if (settings.languages is None or lang in settings.languages)
        and (corpus.corpus_dir() / f"classification.{lang}.test.tsv.gz").is_file()
    ]
    train_labels, train_texts = load("en", "train")
    classes = sorted(set(train_labels))
    index = {c: i for i, c in enumerate(classes)}
    x = vectors(train_texts)
    # Standardise with English statistics only: the classifier must not see the test languages.
    mean, std = x.mean(0), x.std(0).clamp(min=1e-6)
    classifier = _fit_softmax((x - mean) / std, torch.tensor([index[c] for c in train_labels]), len(classes), seed, settings.classifier_epochs)

    accuracy = {}
    for lang in test_languages:
        labels, texts = load(lang, "test")
        with torch.no_grad():
            predicted = classifier((vectors(texts) - mean) / std).argmax(-1)
        gold = torch.tensor([index[c] for c in labels])
        accuracy[lang] = 100.0 * float((predicted == gold).float().mean())
    others = [a for lang, a in accuracy.items() if lang != "en"]
    return {
        "layer": layer,
        "classes": classes,
        "accuracy": accuracy,
        "average_others": float(np.mean(others)) if others else None,
        "transfer_gap": accuracy["en"] - float(np.mean(others)) if others else None,
    }


def _fit_softmax(x: torch.Tensor, y: torch.Tensor, num_classes: int, seed: int, epochs: int) -> torch.nn.Linear:
    """Full-batch softmax regression (Adam, L2 via weight decay); deterministic given the seed."""
    generator = torch.Generator().manual_seed(seed)
    linear = torch.nn.Linear(x.shape[1], num_classes)
    with torch.no_grad():
        linear.weight.normal_(0.0, 0.01, generator=generator)
        linear.bias.zero_()
    optimizer = torch.optim.AdamW(linear.parameters(), lr=1e-2, weight_decay=1e-2)
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(linear(x), y)  # x (N, d), y (N,)
        loss.backward()
        optimizer.step()
    return linear.eval()


# --- 4. output ----------------------------------------------------------------------------


def _summary(models: dict[str, dict[str, Any]], splits: Sequence[str]) -> dict[str, Any]:
    """Average top-1 per split and model at the model's chosen layer, and transfer accuracy."""
    summary: dict[str, Any] = {}
    for split in splits:
        summary[split] = {
            name: {"layer": m["layer"], **m["retrieval"][split][m["layer"]]["average"]} for name, m in models.items()
        }
    summary["mining"] = {
        name: {"layer": m["mining"]["layer"], "tuned_on": m["mining"]["tuned_on"], **m["mining"]["average"]}
        for name, m in models.items() if m.get("mining")
    }
    summary["classification"] = {
        name: {k: m["classification"][k] for k in ("layer", "average_others", "transfer_gap")}
        | {"en": m["classification"]["accuracy"]["en"]}
        for name, m in models.items()
    }
    return summary


def _plots(out: Path, models: dict[str, dict[str, Any]], splits: Sequence[str]) -> list[str]:
    """Layer-wise retrieval (InfoXLM against −XLCO, and the starting point where there is one)
    on the test and held-out splits, each model's table layer marked, and the training losses."""
    written = []
    shown = [models[name] for name in ("infoxlm", "no-xlco", START) if name in models]
    for split, title in (("test", "test split"), ("heldout", "held-out split (Firefox)")):
        curves = [LayerCurve(m["label"], {k: r["average"] for k, r in m["retrieval"][split].items()}, m["layer"],
                             "its tables' layer" + (" (best on dev)" if "dev" in m["retrieval"] else ""),
                             len(next(iter(m["retrieval"][split].values()))["languages"])) for m in shown]
        written.append(str(plot_layer_overlay(curves, out / f"retrieval_{split}.png", f"Retrieval by layer, {title}")))
    losses = {model["label"]: _loss_curves(Path(model["run"])) for model in models.values() if "run" in model}
    written.append(str(plot_losses(losses, [name.upper() for name in OBJECTIVES], out / "loss.png")))
    return written


def _loss_curves(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """{"MMLM": [(step, loss), …], …} from a run's metrics.jsonl (the starting point has none)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if line]
    return {name.upper(): [(r["step"], r[f"loss/{name}"]) for r in rows if f"loss/{name}" in r] for name in OBJECTIVES}
