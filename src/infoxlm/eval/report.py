"""Gather evaluation outputs into Markdown tables shaped like the paper's, with its rows beside.

Inputs, recognised by their JSON content:

* ``infoxlm finetune xnli`` / ``finetune mlqa`` run directories (``RUN/results.json`` with
  ``"task"``): the mean over seeds per language, Avg and transfer gap;
* ``infoxlm eval tatoeba`` outputs (one layer: ``{"layer", "languages", "average"}``; all
  layers: ``{"layer", "layer_rule", "layers": {k: …}}``, reported at the fixed layer the file
  names, the protocol's default layer; files without one at ``default_layer``'s rule for their
  depth). A layer is never chosen by its score on the test data;
* ``infoxlm finetune`` runs of XTREME's other tasks (pawsx, xquad, tydiqa, wikiann, udpos): with
  XNLI and MLQA, the XTREME table of ``xtreme_table.py``;
* ``infoxlm demo`` directories (``results.json`` with ``"models"``): their ``results.md``,
  included as it is.

The paper's published rows (``paper_results.py``) are listed first in each table, in italics.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EvalDataError
from ..json_files import RECORD_BYTES, read_json
from .results import average, markdown_table, transfer_gap
from ..outputs import write_text_atomically
from . import paper_results as paper
from .plots import plot_bars
from ..model.sentence_layer import default_layer
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

    def xtreme_runs(self) -> list[tuple[str, str, dict]]:
        """(name, task, results) of every run the XTREME table has a column for."""
        xnli = [(n, "xnli", r) for runs in self.xnli.values() for n, r in runs]
        return [*xnli, *((n, "mlqa", r) for n, r in self.mlqa), *self.xtreme]


def _load(path: Path) -> Any:
    expected = "the results of infoxlm finetune, eval tatoeba or demo (JSON)"
    return read_json(path, what=expected, max_bytes=RECORD_BYTES, error=EvalDataError)


def _tatoeba_block(obj: Any, file: Path, keys: tuple[str, ...] = ()) -> dict | None:
    """The one-layer block (checked) of an ``eval tatoeba`` output, or None for another kind of
    file; ``keys`` lead to ``obj`` in the file."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("languages"), dict) and isinstance(obj.get("average"), dict) and "xx2en" in obj["average"]:
        _check_shape(obj, _TATOEBA_SHAPE, file, "tatoeba", keys)
        return obj
    if isinstance(obj.get("layers"), dict) and obj["layers"]:
        # The fixed layer of the protocol, never the layer that scores best on this (test) data.
        if "layer" in obj:
            _check_shape(obj, {"layer": "integer"}, file, "tatoeba")
            layer, rule = obj["layer"], obj.get("layer_rule", "fixed")
        else:
            layer, rule = default_layer(len(obj["layers"]) - 1)
        if str(layer) not in obj["layers"]:
            raise EvalDataError(
                f"{file}: layers has no key {layer} (the layer that layer names); its keys are "
                + ", ".join(obj["layers"])
            )
        block = _tatoeba_block(obj["layers"][str(layer)], file, ("layers", str(layer)))
        return {**block, "layer_rule": rule} if block else None
    return None


# What a table reads from each kind of result: a key's shape is a mapping of keys (a key
# ending in "?" may be absent; "*" stands for every key), or a kind of value (_KINDS).
_XNLI_SHAPE = {"setting?": "name", "seeds?": "list",
               "mean": {"test": {"*": "number"}, "test_average": "number", "transfer_gap?": "number or null"}}
_MLQA_SHAPE = {"seeds?": "list", "mean": {
    "test": {"*": {"f1": "number", "exact_match": "number"}}, "average_f1": "number",
    "average_exact_match": "number", "transfer_gap_f1?": "number or null", "transfer_gap_exact_match?": "number or null",
}}
_XTREME_SHAPE = {"seeds?": "list", "protocol?": "name or words",
                 "mean": {"test_average?": "number", "average_f1?": "number"}}
_TATOEBA_SHAPE = {"layer?": "integer", "languages": {"*": {"xx2en": "number", "en2xx": "number"}}}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


_KINDS = {
    "number": _is_number,
    "number or null": lambda v: v is None or _is_number(v),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
    # The XNLI setting names a PNG file: no path separators.
    "name": lambda v: isinstance(v, str) and re.fullmatch(r"[\w-]+", v, re.ASCII) is not None,
    "name or words": lambda v: isinstance(v, str),
}
_EXPECTED = {"number": "a number", "number or null": "a number or null", "integer": "an integer", "list": "a list",
             "name": "a name of letters, digits, - and _",
             "name or words": "a string"}


def _check_shape(value: Any, shape: Any, file: Path, task: str, keys: tuple[str, ...] = ()) -> None:
    """Refuse a result the tables cannot read, naming the file and the key (``mean.test.de``)."""
    where = f"{file}: " + ".".join(keys)
    if not isinstance(shape, dict):
        if not _KINDS[shape](value):
            shown = json.dumps(value, ensure_ascii=False)
            raise EvalDataError(f"{where} is {shown if len(shown) <= 40 else shown[:37] + '...'}; expected {_EXPECTED[shape]}")
        return
    if not isinstance(value, dict):
        raise EvalDataError(f"{where} is {json.dumps(value)[:40]}; expected an object")
    for key, inner in shape.items():
        if key == "*":
            for name, item in value.items():
                _check_shape(item, inner, file, task, (*keys, name))
            continue
        name = key.rstrip("?")
        if name in value:
            _check_shape(value[name], inner, file, task, (*keys, name))
        elif not key.endswith("?"):
            raise EvalDataError(f"{file}: no key {'.'.join((*keys, name))}; expected it in {task} results")


def gather(paths: list[str | Path]) -> Gathered:
    """Classify every input; a path that is none of the known outputs is an error naming it."""
    out = Gathered()
    for raw in paths:
        path = Path(raw)
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
            if isinstance(obj, dict) and obj.get("task") == "xnli":
                _check_shape(obj, _XNLI_SHAPE, file, "xnli")
                out.xnli.setdefault(obj.get("setting", "cross-lingual-transfer"), []).append((name, obj))
            elif isinstance(obj, dict) and obj.get("task") == "mlqa":
                _check_shape(obj, _MLQA_SHAPE, file, "mlqa")
                out.mlqa.append((name, obj))
            elif isinstance(obj, dict) and obj.get("task") in XTREME_ONLY:
                _check_shape(obj, _XTREME_SHAPE, file, obj["task"])
                if not any(k in obj["mean"] for k in ("test_average", "average_f1")):
                    raise EvalDataError(f"{file}: no key mean.test_average or mean.average_f1; expected one in {obj['task']} results")
                out.xtreme.append((name, obj["task"], obj))
            elif (block := _tatoeba_block(obj, file)) is not None:
                out.tatoeba.append((name if path.is_file() else f"{name}/{file.stem}", block))
            elif isinstance(obj, dict) and "models" in obj and "summary" in obj:
                md = file.with_name("results.md")
                out.demo.append((name, md.read_text(encoding="utf-8") if md.is_file() else "(no results.md)"))
            else:
                continue
            found = True
        if not found:
            raise EvalDataError(
                f"{path}: no finetune (results.json with \"task\"), eval tatoeba or demo results found"
            )
    return out


def _italic(name: str) -> str:
    return f"*{name} (paper)*"


def xnli_table(setting: str, runs: list[tuple[str, dict]]) -> str:
    langs = paper.XNLI_LANGS
    header = ["Model", *langs, "Avg", "gap"]
    rows = []
    for model, values in paper.XNLI.get(setting, {}).items():
        scores = dict(zip(langs, values[:-1]))
        rows.append([_italic(model), *values[:-1], values[-1], transfer_gap(scores)])
    for name, r in runs:
        test = r["mean"]["test"]
        n = len(r.get("seeds", [])) or 1
        rows.append([f"{name} ({n} seed{'s' if n > 1 else ''})", *(test.get(l) for l in langs),
                     r["mean"]["test_average"], r["mean"].get("transfer_gap")])
    return markdown_table(header, rows)


def _pair(f1: float | None, em: float | None) -> str:
    return "–" if f1 is None else f"{f1:.1f} / {em:.1f}"


def mlqa_table(runs: list[tuple[str, dict]]) -> str:
    langs = paper.MLQA_LANGS
    header = ["Model", *langs, "Avg", "gap"]
    rows = []
    for model, values in paper.MLQA.items():
        f1 = dict(zip(langs, (v[0] for v in values[:-1])))
        em = dict(zip(langs, (v[1] for v in values[:-1])))
        rows.append([_italic(model), *(_pair(*v) for v in values), _pair(transfer_gap(f1), transfer_gap(em))])
    for name, r in runs:
        m = r["mean"]
        n = len(r.get("seeds", [])) or 1
        cells = [_pair(m["test"][l]["f1"], m["test"][l]["exact_match"]) if l in m["test"] else "–" for l in langs]
        rows.append([f"{name} ({n} seed{'s' if n > 1 else ''})", *cells,
                     _pair(m["average_f1"], m["average_exact_match"]),
                     _pair(m.get("transfer_gap_f1"), m.get("transfer_gap_exact_match"))])
    return markdown_table(header, rows)


def tatoeba_table(runs: list[tuple[str, dict]]) -> str:
    """The paper's 14 columns; a run's Avg is over those of the 14 it has (noted when fewer)."""
    langs = paper.TATOEBA_LANGS
    header = ["Model", "Direction", *langs, "Avg"]
    rows = []
    for direction, arrow in (("xx2en", "xx→en"), ("en2xx", "en→xx")):
        for model, values in paper.TATOEBA[direction].items():
            rows.append([_italic(model), arrow, *values])
        for name, block in runs:
            by_lang = {_ISO.get(code, code): s[direction] for code, s in block["languages"].items()}
            present = {l: by_lang[l] for l in langs if l in by_lang}
            avg = average(present) if present else None
            rule = f", {block['layer_rule']}" if block.get("layer_rule") else ""
            label = f"{name} (layer {block.get('layer', '?')}{rule}" + ("" if len(present) == len(langs) else f", {len(present)} of 14") + ")"
            rows.append([label, arrow, *(by_lang.get(l) for l in langs), avg])
    return markdown_table(header, rows)


def gap_table(g: Gathered) -> str:
    header = ["Model", "MLQA (F1)", "XNLI", "Average"]
    rows = [[_italic(m), mlqa, xnli, (mlqa + xnli) / 2] for m, (mlqa, xnli) in paper.TRANSFER_GAP.items()]
    names = list(dict.fromkeys([n for n, _ in g.mlqa] + [n for n, _ in g.xnli.get("cross-lingual-transfer", [])]))
    mlqa = {n: r["mean"].get("transfer_gap_f1") for n, r in g.mlqa}
    xnli = {n: r["mean"].get("transfer_gap") for n, r in g.xnli.get("cross-lingual-transfer", [])}
    for n in names:
        a, b = mlqa.get(n), xnli.get(n)
        rows.append([n, a, b, (a + b) / 2 if a is not None and b is not None else None])
    return markdown_table(header, rows)


def build_report(g: Gathered) -> str:
    """The whole report.md text."""
    parts = ["# InfoXLM evaluation report", "",
             "Rows in italics are the paper's published numbers (base size; InfoXLM and XLM-R (reimpl) are means of "
             "five seeds). gap = English − mean of the other languages (cross-lingual transfer gap, XTREME).", ""]
    titles = {"cross-lingual-transfer": "cross-lingual transfer (English training data)",
              "translate-train-all": "translate-train-all"}
    for setting, runs in g.xnli.items():
        parts += [f"## XNLI, {titles.get(setting, setting)}: test accuracy (%)", "", xnli_table(setting, runs), ""]
    if g.mlqa:
        parts += ["## MLQA: F1 / EM (%)", "", mlqa_table(g.mlqa), ""]
    if g.tatoeba:
        parts += ["## Tatoeba, 14 languages with parallel data: top-1 accuracy (%)", "",
                  "Each row names its layer (a Hugging Face hidden_states index) and the rule that fixed it; "
                  "no layer is chosen on the test data.", "", tatoeba_table(g.tatoeba), ""]
    if g.mlqa or g.xnli.get("cross-lingual-transfer"):
        parts += ["## Cross-lingual transfer gap (lower is better)", "",
                  "The paper's XNLI gaps (Table 'gap') differ slightly from those its XNLI table implies "
                  "(the gap column of the XNLI table above).", "", gap_table(g), ""]
    if g.xtreme:
        parts += ["## XTREME", "", xtreme_markdown(g.xtreme_runs()), ""]
    for name, md in g.demo:
        parts += [f"## Demo: {name}", "", nest_headings(md.strip(), under=2), ""]
    return "\n".join(parts)


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
    """The report's figures: per benchmark, each run's bars beside the paper's rows (drawn by
    eval/plots.py); returns the PNGs written into ``out``."""
    written = []
    for setting, runs in g.xnli.items():
        cols = [*paper.XNLI_LANGS, "Avg"]
        series = {f"{m} (paper)": list(v) for m, v in paper.XNLI.get(setting, {}).items()}
        for name, r in runs:
            series[name] = [r["mean"]["test"].get(l) for l in paper.XNLI_LANGS] + [r["mean"]["test_average"]]
        written.append(plot_bars(cols, series, out / f"xnli-{setting}.png", "accuracy (%)", f"XNLI, {setting}"))
    if g.mlqa:
        cols = [*paper.MLQA_LANGS, "Avg"]
        series = {f"{m} (paper)": [v[0] for v in values] for m, values in paper.MLQA.items()}
        for name, r in g.mlqa:
            m = r["mean"]
            series[name] = [m["test"][l]["f1"] if l in m["test"] else None for l in paper.MLQA_LANGS] + [m["average_f1"]]
        written.append(plot_bars(cols, series, out / "mlqa.png", "F1 (%)", "MLQA"))
    if g.tatoeba:
        cols = [*paper.TATOEBA_LANGS, "Avg"]
        series = {f"{m} (paper)": list(v) for m, v in paper.TATOEBA["xx2en"].items()}
        for name, block in g.tatoeba:
            by_lang = {_ISO.get(code, code): s["xx2en"] for code, s in block["languages"].items()}
            present = [by_lang[l] for l in paper.TATOEBA_LANGS if l in by_lang]
            series[name] = [by_lang.get(l) for l in paper.TATOEBA_LANGS] + [sum(present) / len(present) if present else None]
        written.append(plot_bars(cols, series, out / "tatoeba.png", "top-1 accuracy (%)", "Tatoeba xx→en"))
    if g.xtreme:
        written.append(plot_xtreme(g.xtreme_runs(), out / "xtreme.png"))
    return written


def write_report(paths: list[str | Path], output: str | Path) -> tuple[str, list[Path]]:
    """Gather, write OUTPUT/report.md and OUTPUT/*.png; return the markdown and the PNG paths."""
    g = gather(paths)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    markdown = build_report(g)
    write_text_atomically(out / "report.md", markdown)
    return markdown, write_plots(g, out)


def write_xtreme_report(paths: list[str | Path], markdown_path: str | Path) -> tuple[str, Path]:
    """The XTREME table of the runs among ``paths``: MARKDOWN_PATH and its PNG beside it (same
    name, .png); returns the Markdown and the PNG's path."""
    runs = gather(paths).xtreme_runs()
    if not runs:
        raise EvalDataError("no finetune results of an XTREME task (xnli, pawsx, xquad, mlqa, tydiqa, wikiann, udpos) "
                            "among the inputs; expected at least one results.json of such a run")
    markdown = "# XTREME\n\n" + xtreme_markdown(runs)
    md = Path(markdown_path)
    write_text_atomically(md, markdown)
    return markdown, plot_xtreme(runs, md.with_suffix(".png"))
