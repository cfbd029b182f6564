"""Gather evaluation outputs into Markdown tables shaped like the paper's, with its rows beside.

Inputs, recognised by their JSON content:

* ``infoxlm finetune xnli`` / ``finetune mlqa`` run directories (``RUN/results.json`` with
  ``"task"``): the mean over seeds per language, Avg and transfer gap;
* ``infoxlm eval tatoeba`` outputs (one layer: ``{"layer", "languages", "average"}``; all
  layers: ``{"layer", "layer_rule", "layers": {k: …}}``, reported at the fixed layer the file
  names, the protocol's default layer; files without one at ``default_layer``'s rule for their
  depth). A layer is never chosen by its score on the test data. All-layer files are also
  overlaid in one figure, each one's layer marked (``layer_overlay.py``);
* ``infoxlm eval bucc`` and ``eval xsim`` outputs with ``--layer all``: their curves overlaid
  per command, with the layer each reports at (``layer_overlay.py``);
* ``infoxlm finetune`` runs of XTREME's other tasks (pawsx, xquad, tydiqa, wikiann, udpos): with
  XNLI and MLQA, the XTREME table of ``xtreme_table.py``;
* ``infoxlm demo`` directories (``results.json`` with ``"models"``): their ``results.md``,
  included as it is;
* ``infoxlm pretrain`` run directories (``metrics.jsonl`` and ``config.json``): the losses and,
  with ``--validation``, the held-out numbers by step (``pretrain_report.py``).

The paper's published rows (``paper_results.py``) are listed first in each table, in italics.
A table's columns are the languages its runs have, and each average says how many languages it
is over, the paper's own average beside it when those are not the paper's (``language_columns.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..errors import EvalDataError
from ..json_files import RECORD_BYTES, read_json
from .results import markdown_table
from ..outputs import write_text_atomically
from . import paper_results as paper
from .language_columns import LanguageColumns, Mean
from .layer_overlay import KINDS, LayerCurve, kind_of, plot_layer_overlay, read_curve
from .plots import plot_bars
from .result_shape import check_shape, shown_layer
from .pretrain_report import is_pretrain_run, plot_pretrain, pretrain_section, read_metrics
from .tatoeba import TATOEBA_CODES
from .xtreme_table import XTREME_ONLY, plot_xtreme, xtreme_markdown

_ISO = {three: two for two, three in TATOEBA_CODES.items()}


@dataclass
class Gathered:
    xnli: dict[str, list[tuple[str, dict]]] = field(default_factory=dict)  # setting → [(name, results)]
    mlqa: list[tuple[str, dict]] = field(default_factory=list)
    tatoeba: list[tuple[str, dict]] = field(default_factory=list)  # (name, one-layer block)
    demo: list[tuple[str, str]] = field(default_factory=list)  # (name, results.md text)
    xtreme: list[tuple[str, str, dict]] = field(default_factory=list)  # (name, task, results) of XTREME_ONLY tasks
    pretrain: list[tuple[str, list[dict]]] = field(default_factory=list)  # (name, metrics.jsonl records)
    layers: dict[str, list[LayerCurve]] = field(default_factory=dict)  # layer_overlay.KINDS key → --layer all files

    def xtreme_runs(self) -> list[tuple[str, str, dict]]:
        """(name, task, results) of every run the XTREME table has a column for."""
        xnli = [(n, "xnli", r) for runs in self.xnli.values() for n, r in runs]
        return [*xnli, *((n, "mlqa", r) for n, r in self.mlqa), *self.xtreme]


def _load(path: Path) -> Any:
    expected = "the results of infoxlm finetune, eval tatoeba, bucc or xsim, or demo (JSON)"
    return read_json(path, what=expected, max_bytes=RECORD_BYTES, error=EvalDataError)


def _tatoeba_block(obj: Any, file: Path, keys: tuple[str, ...] = ()) -> dict | None:
    """The one-layer block (checked) of an ``eval tatoeba`` output, or None for another kind of
    file; ``keys`` lead to ``obj`` in the file."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("languages"), dict) and isinstance(obj.get("average"), dict) and "xx2en" in obj["average"]:
        check_shape(obj, _TATOEBA_SHAPE, file, "tatoeba", keys)
        return obj
    if isinstance(obj.get("layers"), dict) and obj["layers"]:
        layer, rule = shown_layer(obj, file, "tatoeba")
        block = _tatoeba_block(obj["layers"][str(layer)], file, ("layers", str(layer)))
        return {**block, "layer": layer, "layer_rule": rule} if block else None
    return None


# What a table reads from each kind of result: a key's shape is a mapping of keys (a key
# ending in "?" may be absent; "*" stands for every key), or a kind of value (result_shape.KINDS).
_XNLI_SHAPE = {"setting?": "name", "seeds?": "list",
               "mean": {"test": {"*": "number"}, "test_average": "number", "transfer_gap?": "number or null"}}
_MLQA_SHAPE = {"seeds?": "list", "mean": {
    "test": {"*": {"f1": "number", "exact_match": "number"}}, "average_f1": "number",
    "average_exact_match": "number", "transfer_gap_f1?": "number or null", "transfer_gap_exact_match?": "number or null",
}}
_XTREME_SHAPE = {"seeds?": "list", "protocol?": "name or words",
                 "mean": {"test_average?": "number", "average_f1?": "number"}}
_TATOEBA_SHAPE = {"layer?": "integer", "languages": {"*": {"xx2en": "number", "en2xx": "number"}}}


def gather(paths: list[str | Path]) -> Gathered:
    """Classify every input; a path that is none of the known outputs is an error naming it."""
    out = Gathered()
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and is_pretrain_run(path):
            out.pretrain.append((path.name, read_metrics(path)))
            continue
        if path.is_dir():
            files = [path / "results.json"] if (path / "results.json").is_file() else sorted(path.glob("*.json"))
        elif path.is_file():
            files = [path]
        else:
            raise EvalDataError(f"{path}: no such run directory or JSON file")
        found = False
        for file in files:
            obj = _load(file)
            name = path.name if path.is_dir() else path.stem
            label = name if path.is_file() else f"{name}/{file.stem}"
            if isinstance(obj, dict) and obj.get("task") == "xnli":
                check_shape(obj, _XNLI_SHAPE, file, "xnli")
                out.xnli.setdefault(obj.get("setting", "cross-lingual-transfer"), []).append((name, obj))
            elif isinstance(obj, dict) and obj.get("task") == "mlqa":
                check_shape(obj, _MLQA_SHAPE, file, "mlqa")
                out.mlqa.append((name, obj))
            elif isinstance(obj, dict) and obj.get("task") in XTREME_ONLY:
                check_shape(obj, _XTREME_SHAPE, file, obj["task"])
                if not any(k in obj["mean"] for k in ("test_average", "average_f1")):
                    raise EvalDataError(f"{file}: no key mean.test_average or mean.average_f1; expected one in {obj['task']} results")
                out.xtreme.append((name, obj["task"], obj))
            elif (block := _tatoeba_block(obj, file)) is not None:
                out.tatoeba.append((label, block))
                if "layers" in obj:
                    out.layers.setdefault("tatoeba", []).append(read_curve(label, obj, file, "tatoeba"))
            elif (kind := kind_of(obj)) is not None:  # eval bucc / xsim --layer all: their curves
                out.layers.setdefault(kind, []).append(read_curve(label, obj, file, kind))
            elif isinstance(obj, dict) and "models" in obj and "summary" in obj:
                md = file.with_name("results.md")
                out.demo.append((name, md.read_text(encoding="utf-8") if md.is_file() else "(no results.md)"))
            else:
                continue
            found = True
        if not found:
            raise EvalDataError(
                f"{path}: no finetune (results.json with \"task\"), eval tatoeba, eval bucc or xsim --layer all, demo "
                "or pretrain results found"
            )
    return out


def _italic(name: str) -> str:
    return f"*{name} (paper)*"


def _seeds(name: str, r: dict) -> str:
    n = len(r.get("seeds", [])) or 1
    return f"{name} ({n} seed{'s' if n > 1 else ''})"


def xnli_columns(runs: list[tuple[str, dict]]) -> LanguageColumns:
    return LanguageColumns.of(paper.XNLI_LANGS, (r["mean"]["test"] for _, r in runs))


def xnli_table(setting: str, runs: list[tuple[str, dict]]) -> str:
    """The paper's rows and each run's, on the languages the runs have (``language_columns.py``)."""
    cols = xnli_columns(runs)
    rows = []
    for model, values in paper.XNLI.get(setting, {}).items():
        scores = dict(zip(paper.XNLI_LANGS, values[:-1]))
        rows.append([_italic(model), *cols.values(scores), *map(cols.cell, cols.averages(scores, values[-1])),
                     cols.cell(cols.gap(scores))])
    for name, r in runs:
        test = r["mean"]["test"]
        rows.append([_seeds(name, r), *cols.values(test), *map(cols.cell, cols.averages(test)), cols.cell(cols.gap(test))])
    return markdown_table(["Model", *cols.header(gap=True)], rows)


def _pair(f1: Mean, em: Mean) -> str:
    """An F1 / EM cell, with the languages it is over when fewer than its column's."""
    if f1.value is None or em.value is None:
        return "–"
    return f"{f1.value:.1f} / {em.value:.1f}" + ("" if f1.count == f1.of else f" ({f1.count})")


def mlqa_columns(runs: list[tuple[str, dict]]) -> LanguageColumns:
    return LanguageColumns.of(paper.MLQA_LANGS, (r["mean"]["test"] for _, r in runs))


def mlqa_table(runs: list[tuple[str, dict]]) -> str:
    cols = mlqa_columns(runs)
    rows = []
    scored: list[tuple[str, dict, dict, tuple[float | None, float | None]]] = []  # (name, F1s, EMs, published Avg)
    for model, values in paper.MLQA.items():
        scored.append((_italic(model), dict(zip(paper.MLQA_LANGS, (v[0] for v in values[:-1]))),
                       dict(zip(paper.MLQA_LANGS, (v[1] for v in values[:-1]))), values[-1]))
    for name, r in runs:
        test = r["mean"]["test"]
        scored.append((_seeds(name, r), {l: s["f1"] for l, s in test.items()}, {l: s["exact_match"] for l, s in test.items()},
                       (None, None)))
    for name, f1, em, (avg_f1, avg_em) in scored:
        cells = [_pair(Mean(f1.get(l), 1, 1), Mean(em.get(l), 1, 1)) for l in cols.languages]
        averages = zip(cols.averages(f1, avg_f1), cols.averages(em, avg_em))
        rows.append([name, *cells, *(_pair(a, b) for a, b in averages), _pair(cols.gap(f1), cols.gap(em))])
    return markdown_table(["Model", *cols.header(gap=True)], rows)


def tatoeba_scores(block: dict, direction: str) -> dict[str, float]:
    """{ISO 639-1 code (the paper's columns) or the file's own code: top-1 in ``direction``}."""
    return {_ISO.get(code, code): s[direction] for code, s in block["languages"].items()}


def tatoeba_columns(runs: list[tuple[str, dict]]) -> LanguageColumns:
    return LanguageColumns.of(paper.TATOEBA_LANGS, (tatoeba_scores(block, "xx2en") for _, block in runs))


def tatoeba_table(runs: list[tuple[str, dict]]) -> str:
    """Both directions, the paper's rows and each run's (at the layer its file names)."""
    cols = tatoeba_columns(runs)
    rows = []
    for direction, arrow in (("xx2en", "xx→en"), ("en2xx", "en→xx")):
        for model, values in paper.TATOEBA[direction].items():
            scores = dict(zip(paper.TATOEBA_LANGS, values[:-1]))
            rows.append([_italic(model), arrow, *cols.values(scores), *map(cols.cell, cols.averages(scores, values[-1]))])
        for name, block in runs:
            scores = tatoeba_scores(block, direction)
            rule = f", {block['layer_rule']}" if block.get("layer_rule") else ""
            label = f"{name} (layer {block.get('layer', '?')}{rule})"
            rows.append([label, arrow, *cols.values(scores), *map(cols.cell, cols.averages(scores))])
    return markdown_table(["Model", "Direction", *cols.header()], rows)


def gap_table(g: Gathered) -> str:
    """The paper's Table "gap" (over all 7 MLQA and 15 XNLI languages) and each run's gap, which
    says over how many languages it is when fewer."""
    header = ["Model", f"MLQA (F1, {len(paper.MLQA_LANGS)})", f"XNLI ({len(paper.XNLI_LANGS)})", "Average"]
    rows = [[_italic(m), mlqa, xnli, (mlqa + xnli) / 2] for m, (mlqa, xnli) in paper.TRANSFER_GAP.items()]
    names = list(dict.fromkeys([n for n, _ in g.mlqa] + [n for n, _ in g.xnli.get("cross-lingual-transfer", [])]))
    mlqa = {n: _run_gap(r, "transfer_gap_f1", paper.MLQA_LANGS) for n, r in g.mlqa}
    xnli = {n: _run_gap(r, "transfer_gap", paper.XNLI_LANGS) for n, r in g.xnli.get("cross-lingual-transfer", [])}
    for n in names:
        a, b = mlqa.get(n, Mean(None, 0, 0)), xnli.get(n, Mean(None, 0, 0))
        both = (a.value + b.value) / 2 if a.value is not None and b.value is not None else None
        partial = both is not None and (a.count < a.of or b.count < b.of)
        rows.append([n, LanguageColumns.cell(a), LanguageColumns.cell(b), f"{both:.1f} ({a.count}, {b.count})" if partial else both])
    return markdown_table(header, rows)


def _run_gap(results: dict, key: str, paper_langs: Sequence[str]) -> Mean:
    """A run's transfer gap, over its own languages (out of the paper's ``paper_langs``)."""
    mean = results["mean"]
    n = len(mean["test"])
    return Mean(mean.get(key), n, n if set(mean["test"]) >= set(paper_langs) else len(paper_langs))


def build_report(g: Gathered) -> str:
    """The whole report.md text."""
    parts = ["# InfoXLM evaluation report", "",
             "Rows in italics are the paper's published numbers (base size; InfoXLM and XLM-R (reimpl) are means of "
             "five seeds). Columns are the languages of the runs reported. Avg (n): each row's mean over the "
             "table's n languages, the paper's rows included; a cell over fewer says how many, 71.2 (2). "
             "paper Avg (N), where the table has other languages than the paper's: the paper's published "
             "average over all N of its languages. gap (n) = English − mean of the table's other languages "
             "(cross-lingual transfer gap, XTREME).", ""]
    titles = {"cross-lingual-transfer": "cross-lingual transfer (English training data)",
              "translate-train-all": "translate-train-all"}
    for setting, runs in g.xnli.items():
        parts += [f"## XNLI, {titles.get(setting, setting)}: test accuracy (%)", "", xnli_table(setting, runs), ""]
    if g.mlqa:
        parts += ["## MLQA: F1 / EM (%)", "", mlqa_table(g.mlqa), ""]
    if g.tatoeba:
        parts += ["## Tatoeba: top-1 accuracy (%)", "",
                  "Each row names its layer (a Hugging Face hidden_states index) and the rule that fixed it; "
                  "no layer is chosen on the test data. The paper's rows are its 14 languages with parallel data.", "",
                  tatoeba_table(g.tatoeba), ""]
    for kind, curves in g.layers.items():
        parts += layers_section(kind, curves)
    if g.mlqa or g.xnli.get("cross-lingual-transfer"):
        parts += ["## Cross-lingual transfer gap (lower is better)", "",
                  "The paper's gaps are over all its languages; a run's over fewer says over how many, 9.0 (3). "
                  "The paper's XNLI gaps (Table 'gap') differ slightly from those its XNLI table implies "
                  "(the gap (15) column of an XNLI table above with all 15 languages).", "", gap_table(g), ""]
    if g.xtreme:
        parts += ["## XTREME", "", xtreme_markdown(g.xtreme_runs()), ""]
    for name, md in g.demo:
        parts += [f"## Demo: {name}", "", nest_headings(md.strip(), under=2), ""]
    for name, rows in g.pretrain:
        parts += [pretrain_section(name, rows), f"![{name}](pretrain-{name}.png)", ""]
    return "\n".join(parts)


def layers_section(kind: str, curves: list[LayerCurve]) -> list[str]:
    """Markdown lines: the figure of the ``--layer all`` files of one eval command, and a table
    of the layer each file reports at, with its rule and its score there."""
    what = KINDS[kind]
    lines = list(dict.fromkeys(line for c in curves for line in c.by_layer[c.layer]))
    rows = [[c.name, c.layer, c.rule, c.languages, *(c.by_layer[c.layer].get(line) for line in lines)] for c in curves]
    said = ("Tatoeba's rows above are read at these layers. " if kind == "tatoeba" else "")
    return [f"## {what.title}", "",
            f"The average score at every layer of each `{what.command} --layer all` file, one colour per file "
            f"(each line style one {'split' if kind == 'bucc' else 'direction'}); the dotted line in its colour marks "
            f"the layer the file reports at (its contrast layer, or the rule named). {said}No layer is chosen "
            "on the test data.", "",
            markdown_table(["File", "layer", "rule", what.unit, *lines], rows), "",
            f"![{what.title}]({what.png})", ""]


def nest_headings(markdown: str, under: int) -> str:
    """An included report's headings moved below a level-``under`` section: its top level
    becomes ``under`` + 1 and the others keep their distance from it (fenced code is left
    alone), so that its title no longer sits beside the report's own.

    >>> print(nest_headings("# infoxlm demo\\n\\ntext\\n## Tables\\n```\\n# not a heading\\n```", under=2))
    ### infoxlm demo
    <BLANKLINE>
    text
    #### Tables
    ```
    # not a heading
    ```
    """
    lines = markdown.split("\n")
    fenced, headings = False, []
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (found := re.match(r"(#{1,6}) ", line)):
            headings.append((i, len(found.group(1))))
    if not headings:
        return markdown
    shift = under + 1 - min(level for _, level in headings)
    for i, level in headings:
        lines[i] = "#" * min(6, level + shift) + lines[i][level:]
    return "\n".join(lines)


def write_plots(g: Gathered, out: Path) -> list[Path]:
    """The report's figures: per benchmark, each run's bars beside the paper's rows on the runs'
    languages and their Avg (drawn by eval/plots.py, as wide as those languages need), the
    layer-wise curves of --layer all files overlaid; returns the PNGs written into ``out``."""
    written = []
    for setting, runs in g.xnli.items():
        cols = xnli_columns(runs)
        series = {f"{m} (paper)": dict(zip(paper.XNLI_LANGS, v[:-1])) for m, v in paper.XNLI.get(setting, {}).items()}
        series |= {name: r["mean"]["test"] for name, r in runs}
        written.append(plot_bars(_bar_columns(cols), {f"XNLI, {setting}": _bars(cols, series)},
                                 out / f"xnli-{setting}.png", "accuracy (%)"))
    if g.mlqa:
        cols = mlqa_columns(g.mlqa)
        series = {f"{m} (paper)": dict(zip(paper.MLQA_LANGS, (f1 for f1, _ in v[:-1]))) for m, v in paper.MLQA.items()}
        series |= {name: {l: s["f1"] for l, s in r["mean"]["test"].items()} for name, r in g.mlqa}
        written.append(plot_bars(_bar_columns(cols), {"MLQA": _bars(cols, series)}, out / "mlqa.png", "F1 (%)"))
    if g.tatoeba:
        cols = tatoeba_columns(g.tatoeba)
        panels = {}
        for direction, arrow in (("xx2en", "xx→en"), ("en2xx", "en→xx")):
            series = {f"{m} (paper)": dict(zip(paper.TATOEBA_LANGS, v[:-1])) for m, v in paper.TATOEBA[direction].items()}
            series |= {name: tatoeba_scores(block, direction) for name, block in g.tatoeba}
            panels[f"Tatoeba {arrow}"] = _bars(cols, series)
        written.append(plot_bars(_bar_columns(cols), panels, out / "tatoeba.png", "top-1 accuracy (%)"))
    for kind, curves in g.layers.items():
        what = KINDS[kind]
        written.append(plot_layer_overlay(curves, out / what.png, what.title, ylabel=what.ylabel, unit=what.unit))
    if g.xtreme:
        written.append(plot_xtreme(g.xtreme_runs(), out / "xtreme.png"))
    for name, rows in g.pretrain:
        written.append(plot_pretrain(rows, out / f"pretrain-{name}.png"))
    return written


def _bar_columns(cols: LanguageColumns) -> list[str]:
    return [*cols.languages, cols.avg_label]


def _bars(cols: LanguageColumns, series: dict[str, dict[str, float]]) -> dict[str, list[float | None]]:
    """Each series' values on the table's languages and its mean over them (the paper's rows
    on the same languages: every Avg bar is over the same set)."""
    return {name: [*cols.values(scores), cols.mean(scores).value] for name, scores in series.items()}


def write_report(paths: list[str | Path], output: str | Path) -> tuple[str, list[Path]]:
    """Gather and write the report: OUTPUT/report.md and OUTPUT/*.png for a directory, or
    OUTPUT itself (a ``.md`` file) with its PNGs beside it; return the markdown and the PNGs."""
    g = gather(paths)
    out = Path(output)
    markdown_path = out if out.suffix == ".md" else out / "report.md"
    markdown_path.parent.mkdir(parents=True, exist_ok=True)
    markdown = build_report(g)
    write_text_atomically(markdown_path, markdown)
    return markdown, write_plots(g, markdown_path.parent)
