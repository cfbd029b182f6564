"""The ``README.md`` of an exported model, in the Hugging Face model-card format.

YAML front matter (``language`` from the token store the run trained on, ``license``,
``library_name``, ``pipeline_tag``, ``tags``, ``base_model`` when the run continued a model),
then what the run directory records: the training config, the data (corpora, tokens, sampling
probabilities), the steps, the last logged losses and any evaluation results found there
(``infoxlm eval tatoeba`` JSON files, ``infoxlm finetune`` results). A run writes
``RUN/data.json`` (``data_summary``) when it starts, so the card can name its data.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..version import __version__
from ..data.sampling import language_probabilities
from ..data.store import TokenStore
from ..errors import InfoXLMError
from ..json_files import RECORD_BYTES, parse_json, read_json
from ..model.hub import CONTRAST_LAYER_KEY, recorded_layer_rule
from ..model.sentence_layer import default_layer

CARD_NAME = "README.md"
DATA_SUMMARY_NAME = "data.json"

_KINDS = {
    # kind: (library_name, pipeline_tag, tags)
    "fill-mask": ("transformers", "fill-mask", ["xlm-roberta", "fill-mask", "infoxlm", "cross-lingual"]),
    "sentence-similarity": (
        "sentence-transformers",
        "sentence-similarity",
        ["sentence-transformers", "sentence-similarity", "feature-extraction", "xlm-roberta", "infoxlm", "cross-lingual"],
    ),
}


def data_summary(store: TokenStore, alpha: float, unit: str = "instances") -> dict[str, Any]:
    """What a run trains on: languages, pairs, their tokens and sampling probabilities
    (p ∝ (n/N)^alpha, n counted in ``unit`` as the run's ``data.sampling_unit``)."""
    summary: dict[str, Any] = {"store": str(store.root), "alpha": alpha, "sampling_unit": unit}
    corpora = {"mono": store.mono, "parallel": store.parallel}
    for name, sizes in zip(corpora, store.sampling_sizes(unit)):
        probabilities = language_probabilities(sizes, alpha) if any(sizes.values()) else {}
        summary[name] = {
            k: {"tokens": corpus.num_tokens, "probability": probabilities.get(k, 0.0)} for k, corpus in corpora[name].items()
        }
    for pair, corpus in store.parallel.items():
        summary["parallel"][pair]["languages"] = list(corpus.languages)
    return summary


def languages_of(summary: dict[str, Any]) -> list[str]:
    """The languages of the store's corpora, as ISO 639 codes (both sides of every pair)."""
    found = set(summary.get("mono", {}))
    for pair, entry in summary.get("parallel", {}).items():
        # The corpus's own (source, target); else the name, English-xx, cut at its first hyphen.
        found.update(entry.get("languages") or pair.split("-", 1))
    return sorted(found)


def write_model_card(
    directory: str | Path,
    *,
    kind: str = "fill-mask",
    run_dir: str | Path | None = None,
    source: str | Path | None = None,
    step: int | None = None,
    layer: int | None = None,
    pooling: str | None = None,
    license: str = "unknown",
    name: str | None = None,
) -> Path:
    """Write ``directory/README.md`` for a model exported from ``run_dir`` (a pretrain run) or
    converted from ``source`` (a model directory); ``layer`` and ``pooling`` for a
    sentence-transformers directory; ``name`` (default: the directory's) is the name the card
    loads the model by."""
    library, pipeline_tag, tags = _KINDS[kind]
    run = _read_run(Path(run_dir)) if run_dir is not None else {}
    config = run.get("config", {})
    data = run.get("data", {})
    languages = languages_of(data) if data else source_languages(source)
    base_model = hub_id((config.get("model") or {}).get("init") or (str(source) if source is not None else None))

    front = front_matter(languages, license, library, pipeline_tag, tags, base_model)

    name = name or Path(directory).name
    body = [f"# {name}", ""]
    what = "an XLM-R-style encoder" if kind == "fill-mask" else "sentence embeddings from an XLM-R-style encoder"
    body.append(f"{what[0].upper() + what[1:]}, written by infoxlm {__version__} (InfoXLM: multilingual masked LM, "
                "translation LM and cross-lingual contrast, Chi et al., NAACL 2021).")
    body.append("")
    if kind == "sentence-similarity":
        body += [
            "## Use",
            "",
            "```python",
            "from sentence_transformers import SentenceTransformer",
            f'model = SentenceTransformer("{name}")',
            'vectors = model.encode(["Hello world.", "Hallo Welt."])  # cosine similarity',
            "```",
            "",
            f"The directory keeps {_kept_layers(layer, _source_layers(directory))}, so its output is hidden state "
            f"{layer} (`infoxlm embed --layer {layer}`), pooled by {pooling}"
            + (" over every non-padding token, `<s>` and `</s>` included." if pooling == "mean" else " (the `<s>` state)."),
            "",
        ]
    else:
        body += _mlm_use(name, Path(directory))
    if run:
        written = _read_json(Path(directory) / "config.json")
        if _source_layers(directory):  # a sentence-transformers cut: the run's encoder had more
            written["num_hidden_layers"] = _source_layers(directory)
        body += _training_section(run, step, written)
    elif source is not None:
        body += ["## Source", "", f"Converted from `{source}`.", ""]
    text = "\n".join(front) + "\n\n" + "\n".join(body).rstrip() + "\n"
    path = Path(directory) / CARD_NAME
    path.write_text(text, encoding="utf-8")
    return path


def front_matter(languages: list[str], license: str, library: str, pipeline_tag: str, tags: list[str],
                 base_model: str | None) -> list[str]:
    """A model card's YAML front matter, ``---`` to ``---``, as lines."""
    front = ["---"]
    if languages:
        front += ["language:"] + [f"- {code}" for code in languages]
    front += [f"license: {license}", f"library_name: {library}", f"pipeline_tag: {pipeline_tag}", "tags:"]
    front += [f"- {tag}" for tag in tags]
    if base_model:
        front.append(f"base_model: {json.dumps(str(base_model))}")
    return front + ["---"]


def _mlm_use(name: str, directory: Path) -> list[str]:
    """The card's "Use" section of a masked-LM directory: the model as it is, and sentence vectors
    from the layer it records (the one rule of ``infoxlm embed``), with what the load says."""
    written = _read_json(directory / "config.json")
    layer, rule = default_layer(int(written.get("num_hidden_layers", 12)), written.get(CONTRAST_LAYER_KEY), recorded_layer_rule(directory))
    return [
        "## Use",
        "",
        "```python",
        "from transformers import AutoModelForMaskedLM, AutoTokenizer",
        f'model = AutoModelForMaskedLM.from_pretrained("{name}")',
        f'tokenizer = AutoTokenizer.from_pretrained("{name}")',
        "```",
        "",
        f"Sentence vectors: hidden state {layer} ({rule}), mean-pooled, as `infoxlm embed` makes them. "
        "`AutoModel` reports the masked-LM head's weights as unused: they are, and nothing here needs them; "
        "`add_pooling_layer=False` leaves out the pooler, which the directory does not hold.",
        "",
        "```python",
        "from transformers import AutoModel",
        f'encoder = AutoModel.from_pretrained("{name}", add_pooling_layer=False)',
        'batch = tokenizer(["Hello world.", "Hallo Welt."], padding=True, return_tensors="pt")',
        f"states = encoder(**batch, output_hidden_states=True).hidden_states[{layer}]",
        'mask = batch["attention_mask"].unsqueeze(-1)',
        "vectors = (states * mask).sum(1) / mask.sum(1)",
        "```",
        "",
    ]


def _kept_layers(layer: int, of: int | None) -> str:
    """The layers a sentence-transformers directory keeps, of the encoder's ``of``.

    >>> _kept_layers(1, 2), _kept_layers(8, 12), _kept_layers(8, None)
    ("the encoder's first layer of 2", "the encoder's first 8 layers of 12", "the encoder's first 8 layers")
    """
    kept = "layer" if layer == 1 else f"{layer} layers"
    return f"the encoder's first {kept}" + (f" of {of}" if of else "")


def _source_layers(directory: str | Path) -> int | None:
    """The depth of the encoder a sentence-transformers directory was cut from, as
    ``write_sentence_transformers`` records it (None for a directory written before it did)."""
    recorded = _read_json(Path(directory) / "config_sentence_transformers.json").get("infoxlm")
    value = recorded.get("source_layers") if isinstance(recorded, dict) else None
    return value if isinstance(value, int) else None


def _read_json(path: Path) -> dict[str, Any]:
    """The object in ``path``, or {} (a card says what it can read and leaves out the rest)."""
    try:
        value = read_json(path, what="a JSON object", max_bytes=RECORD_BYTES)
    except InfoXLMError:
        return {}
    return value if isinstance(value, dict) else {}


def _sampling_unit(data: dict[str, Any], config: dict[str, Any]) -> str:
    """How n of the sampling formula was counted: the run's data.sampling_unit (data.json
    records it; a run from before that, its config), in words."""
    unit = data.get("sampling_unit") or (config.get("data") or {}).get("sampling_unit")
    words = {"instances": "n in lines (monolingual) and pairs (parallel)", "tokens": "n in tokens"}
    return f", {words[unit]}" if unit in words else ""


def _read_run(run_dir: Path) -> dict[str, Any]:
    run: dict[str, Any] = {"dir": run_dir}
    for key, name in (("config", "config.json"), ("data", DATA_SUMMARY_NAME)):
        run[key] = _read_json(run_dir / name)
    rows = []
    path = run_dir / "metrics.jsonl"
    try:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                rows.append(parse_json(line, str(path), what="a metrics record", line=number))
            except InfoXLMError:
                continue  # a line cut by a crash
    except OSError:
        pass
    run["metrics"] = rows
    run["evaluations"] = _evaluations(run_dir)
    return run


def _evaluations(run_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """Results of `infoxlm eval tatoeba` and `infoxlm finetune` kept in the run directory."""
    found = []
    for path in sorted(run_dir.rglob("*.json")):
        if any(part in ("checkpoints", "exports", "tokenizer", "tensorboard", "wandb") for part in path.relative_to(run_dir).parts):
            continue
        value = _read_json(path)
        if "average" in value or "layers" in value or "task" in value:
            found.append((str(path.relative_to(run_dir)), value))
    return found


def _training_section(run: dict[str, Any], step: int | None, written: dict[str, Any]) -> list[str]:
    """What the run did; ``written``: the config.json of the directory the card describes."""
    config, data, metrics = run["config"], run["data"], run["metrics"]
    lines = ["## Training", ""]
    max_steps = (config.get("optim") or {}).get("max_steps")
    shown_step = step if step is not None else (metrics[-1]["step"] if metrics else None)
    if shown_step is not None:
        lines.append(f"Weights after step {shown_step}" + (f" of {max_steps}" if max_steps else "") + ".")
    enabled = (config.get("data") or {}).get("enabled")
    if enabled:
        lines.append(f"Objectives: {', '.join(o.upper() for o in enabled)}.")
    if (config.get("model") or {}).get("init"):
        lines.append(f"Continued from `{config['model']['init']}`.")
    layers, contrast = written.get("num_hidden_layers"), (config.get("contrast") or {}).get("layer")
    if isinstance(layers, int) and "model_type" in written:
        shape = f"Encoder: {layers} layer{'' if layers == 1 else 's'}, hidden size {written.get('hidden_size')}"
        xlco = enabled is None or "xlco" in enabled
        lines.append(shape + (f"; XLCO contrasted layer {contrast}." if contrast and xlco else "."))
    lines.append("")
    if data:
        lines += ["### Data", "", f"Token store `{data.get('store')}`; languages and pairs sampled with "
                  f"p ∝ (n/N)^{data.get('alpha')}{_sampling_unit(data, config)}.", "",
                  "| corpus | tokens | sampling probability |", "|---|---:|---:|"]
        for pool in ("mono", "parallel"):
            for name, entry in data.get(pool, {}).items():
                lines.append(f"| {name} | {entry['tokens']:,} | {entry['probability']:.3f} |")
        lines.append("")
    if metrics:
        last = [r for r in metrics if shown_step is None or r.get("step", 0) <= shown_step] or metrics
        row = last[-1]
        keys = [k for k in row if k.startswith(("loss/", "xlco/")) or k in ("lr", "momentum", "grad_norm", "tokens_per_s", "mfu")]
        lines += [f"### Last logged metrics (step {row.get('step')})", "", "| metric | value |", "|---|---:|"]
        lines += [f"| {k} | {row[k]:.4g} |" for k in keys if isinstance(row[k], (int, float))]
        lines.append("")
    for name, result in run["evaluations"]:
        lines += [f"### Evaluation: `{name}`", ""]
        lines += _evaluation_lines(result)
        lines.append("")
    if config:
        lines += ["### Config", "", "```json", json.dumps(config, indent=2, sort_keys=True), "```", ""]
    return lines


def _evaluation_lines(result: dict[str, Any]) -> list[str]:
    if "average" in result and isinstance(result.get("languages"), dict):  # one Tatoeba layer
        lines = [f"Tatoeba-style retrieval, layer {result.get('layer')}, {result.get('pooling')} pooling, top-1 %:", "",
                 "| language | xx→en | en→xx |", "|---|---:|---:|"]
        lines += [f"| {code} | {s['xx2en']:.1f} | {s['en2xx']:.1f} |" for code, s in result["languages"].items()]
        lines.append(f"| average | {result['average']['xx2en']:.1f} | {result['average']['en2xx']:.1f} |")
        return lines
    if "layers" in result:
        lines = ["Tatoeba-style retrieval by layer, average top-1 %:", "", "| layer | xx→en | en→xx |", "|---:|---:|---:|"]
        lines += [f"| {k} | {v['average']['xx2en']:.1f} | {v['average']['en2xx']:.1f} |" for k, v in result["layers"].items()]
        return lines
    return ["```json", json.dumps({k: result[k] for k in ("task", "setting", "mean") if k in result}, indent=2), "```"]


def hub_id(value: str | None) -> str | None:
    """``value`` if it can name a model on the Hugging Face Hub (``name`` or ``owner/name``), the
    form ``base_model`` takes; a local path (absolute, deeper, relative with ./) is left out."""
    if not value or not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", value) or value.startswith("."):
        return None
    if "/" in value and Path(value).exists():  # runs/base: a directory here, not owner/name
        return None
    return value


def source_languages(source: str | Path | None) -> list[str]:
    """``language:`` of the source directory's own card, if it has one."""
    if source is None:
        return []
    try:
        text = (Path(source) / CARD_NAME).read_text(encoding="utf-8")
    except OSError:
        return []
    if not text.startswith("---"):
        return []
    languages, inside = [], False
    for line in text.split("\n---", 1)[0].splitlines()[1:]:
        if line.startswith("language:"):
            inside = True
            value = line.partition(":")[2].strip()
            if value:
                return [value]
        elif inside and line.startswith("- "):
            languages.append(line[2:].strip())
        elif inside:
            break
    return languages
