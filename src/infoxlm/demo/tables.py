"""The demo's results as Markdown tables (they read as plain text on a terminal too).

``format_tables`` picks the layout from the results' settings: the default demo's per-language
retrieval and transfer tables, or, for ``--setting paper``, tables in the shape of the
paper's ablation tables (its Table 5 and Table 4) with the paper's own numbers beside ours.
"""

from __future__ import annotations

from typing import Any

from ..eval.paper_results import ABLATIONS, CONTRAST_LAYER

__all__ = ["format_tables"]


def format_tables(results: dict[str, Any]) -> str:
    """Markdown tables of ``results`` (what ``run_demo`` returns and writes to results.json)."""
    if results["settings"].get("from_checkpoint"):
        return _paper_tables(results)
    return _per_language_tables(results, list(results["models"]), ("test", "heldout"))


def _per_language_tables(results: dict[str, Any], names: list[str], splits: tuple[str, ...]) -> str:
    """Per-language retrieval at each model's layer, then the transfer table."""
    models = results["models"]
    labels = [models[n]["label"] for n in names]
    chosen = "layers chosen on dev" if "dev" in results["settings"]["splits"] else "each model's universal layer, the eval default"
    lines = []
    for split in splits:
        title = {"test": "test", "heldout": "held-out (Firefox, never trained on)"}[split]
        layers = ", ".join(f"{models[n]['label']} layer {models[n]['layer']}" for n in names)
        lines += [f"Retrieval top-1 (%), {title} split ({layers}; {chosen})", ""]
        header = ["lang"] + [f"{lab} {d}" for d in ("xx→en", "en→xx") for lab in labels]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        codes = list(models[names[0]]["retrieval"][split][models[names[0]]["layer"]]["languages"])
        for code in codes + ["average"]:
            cells = [f"**{code}**" if code == "average" else code]
            for direction in ("xx2en", "en2xx"):
                for n in names:
                    scores = models[n]["retrieval"][split][models[n]["layer"]]
                    value = scores["average"] if code == "average" else scores["languages"][code]
                    cells.append(f"{value[direction]:.1f}")
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += _mining_table(models, names)
    lines += _transfer_table(models, names)
    return "\n".join(lines) + "\n"


def _mining_table(models: dict[str, Any], names: list[str]) -> list[str]:
    """Mining F1 per language at each model's layer (demo/mining_row.py), where every model has it."""
    if not all(models[n].get("mining") for n in names):
        return []
    tuned_on = models[names[0]]["mining"]["tuned_on"]
    layers = ", ".join(f"{models[n]['label']} layer {models[n]['mining']['layer']}" for n in names)
    lines = [f"Mining F1 (%), held-out pairs hidden among monolingual text (BUCC's construction; ratio margin, k = 4,",
             f"threshold tuned on {tuned_on}; {layers})", ""]
    header = ["lang"] + [models[n]["label"] for n in names]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for code in models[names[0]]["mining"]["languages"]:
        lines.append("| " + " | ".join([code] + [f"{models[n]['mining']['languages'][code]['f1']:.1f}" for n in names]) + " |")
    lines.append("| " + " | ".join(["**average**"] + [f"{models[n]['mining']['average']['f1']:.1f}" for n in names]) + " |")
    return lines + [""]


def _transfer_table(models: dict[str, Any], names: list[str]) -> list[str]:
    lines = ["Transfer: LibreOffice module classification (%), classifier trained on English only", ""]
    langs = list(models[names[0]]["classification"]["accuracy"])
    header = ["model", "layer"] + langs + ["others avg", "gap (en − others)"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for n in names:
        c = models[n]["classification"]
        extra = [f"{c['average_others']:.1f}", f"{c['transfer_gap']:.1f}"] if c["transfer_gap"] is not None else ["–", "–"]
        lines.append("| " + " | ".join([models[n]["label"], str(c["layer"])] + [f"{c['accuracy'][l]:.1f}" for l in langs] + extra) + " |")
    return lines + [""]


def _paper_tables(results: dict[str, Any]) -> str:
    """The paper's Table 5 (ablations) and Table 4 (contrast layer), ours beside theirs, then
    InfoXLM against −XLCO per language."""
    models = results["models"]
    summary = results["summary"]

    def ours(name: str) -> list[str]:
        cells = [str(models[name]["layer"])]
        for split in ("test", "heldout"):
            average = summary[split][name]
            cells += [f"{average['xx2en']:.1f}", f"{average['en2xx']:.1f}"]
        c = summary["classification"][name]
        cells += [f"{c['average_others']:.1f}" if c["average_others"] is not None else "–"]
        cells += [f"{c['transfer_gap']:.1f}" if c["transfer_gap"] is not None else "–"]
        return cells

    def theirs(row: tuple[float, float, float] | None) -> list[str]:
        return [f"{row[0]:.2f}", f"{row[1]:.2f} / {row[2]:.2f}"] if row else ["–", "–"]

    head = ["model", "layer", "test xx→en", "test en→xx", "held-out xx→en", "held-out en→xx", "transfer others", "gap",
            "paper XNLI", "paper MLQA F1 / EM"]
    rule = "|" + "---|" * len(head)
    lines = [
        "Ablations (the paper's Table 5). Ours: retrieval top-1 (%) at each model's universal layer (the",
        "`infoxlm eval tatoeba` default) and transfer accuracy (%) of an English-trained classifier; the paper's",
        "columns are its InfoXLM15 fine-tuning results (XNLI accuracy, MLQA F1 / EM).",
        "",
        "| " + " | ".join(head) + " |",
        rule,
    ]
    if "start" in models:
        lines.append("| " + " | ".join([models["start"]["label"], *ours("start"), "–", "–"]) + " |")
    for name, model in models.items():  # a model's label is the paper's row it mirrors (Table 5's)
        if model["label"] in ABLATIONS:
            lines.append("| " + " | ".join([model["label"], *ours(name), *theirs(ABLATIONS[model["label"]])]) + " |")
    lines.append("")
    if "last-layer" in models:
        universal, last = models["infoxlm"]["layer"], models["last-layer"]["layer"]
        lines += [
            f"Contrast layer (the paper's Table 4): XLCO on the universal layer ({universal}) or the last ({last}); the",
            "paper's layers are 8 and 12 of 12. Ours are read at the layer each model contrasted.",
            "",
            "| " + " | ".join(head) + " |",
            rule,
            "| " + " | ".join([f"InfoXLM, XLCO on layer {universal}", *ours("infoxlm"), *theirs(CONTRAST_LAYER[("InfoXLM", 8)])]) + " |",
            "| " + " | ".join([f"InfoXLM, XLCO on layer {last}", *ours("last-layer"), *theirs(CONTRAST_LAYER[("InfoXLM", 12)])]) + " |",
            "",
        ]
    per_language = _per_language_tables(results, ["infoxlm", "no-xlco"], ("heldout", "test"))
    return "\n".join(lines) + "\n" + per_language
