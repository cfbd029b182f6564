"""The paper's hyperparameter search: every setting of a grid, each fine-tuned with every seed,
one model for all languages (#M=1) selected on the joint dev set of all languages.

Each setting is a complete run directory ``RUN/grid/NN-…/`` (its own results.json and
results.md); ``RUN/results.json`` is the chosen setting's results with a ``"search"`` table of
all of them added, so ``infoxlm report`` reads a search directory as it reads a single run.

    >>> setting_name(3, {"lr": 5e-06, "batch_size": 32, "epochs": 10.0, "warmup": "12500", "weight_decay": 0.01})
    '03-lr5e-06-bs32-ep10-wu12500-wd0.01'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from ..model.config import EncoderConfig
from . import defaults, xtreme_defaults
from ..eval.results import markdown_table, write_results
from .training import FinetuneError

# What each task's search selects on: a key of results["mean"], and the words for the tables.
DEV_SCORES = {
    "xnli": ("dev_average", "mean dev accuracy over all XNLI languages of the model kept (best evaluation)"),
    "mlqa": ("dev_f1_average", "mean F1 on the MLQA dev files dev-context-xx-question-xx.json of all languages, final model"),
}
TEST_AVERAGES = {"xnli": "test_average", "mlqa": "average_f1"}


def plan(
    model_dir: str | Path, task: str, explicit: dict[str, Any], *, search: bool, log: Callable[[str], None] = print
) -> tuple[str, list[dict[str, Any]]]:
    """(model size, the settings to run): the size's defaults under the explicitly given values,
    or with ``search`` the size's grid with the explicit values fixing their dimensions."""
    config = EncoderConfig.load(model_dir)
    size = defaults.model_size(config.hidden_size, config.num_hidden_layers)
    if task not in defaults.TASKS:  # XTREME's other tasks: its published settings, no grid
        settings = [xtreme_defaults.settings_for(task, size, explicit)]
    else:
        settings = defaults.grid(task, size, explicit) if search else [defaults.settings_for(task, size, explicit)]
    log(f"[{task}] {size}-size settings ({config.num_hidden_layers} layers × {config.hidden_size}): "
        + (f"a search over {len(settings)} settings" if search else ", ".join(f"{k} {v}" for k, v in settings[0].items())))
    return size, settings


def setting_name(index: int, setting: dict[str, Any]) -> str:
    """The run directory name of a setting: its place in the grid and its values."""
    warmup = str(setting["warmup"]).replace("%", "pct")
    return (f"{index:02d}-lr{setting['lr']:g}-bs{setting['batch_size']}-ep{setting['epochs']:g}"
            f"-wu{warmup}-wd{setting['weight_decay']:g}")


def run_search(
    task: str,
    settings: Sequence[dict[str, Any]],
    run_setting: Callable[[dict[str, Any], Path], dict[str, Any]],
    output: str | Path,
    *,
    size: str,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run ``run_setting(setting, RUN/grid/NN-…)`` (all seeds of one setting; it returns that
    run's results) for every setting; keep the one with the best joint dev score (the first
    among equals); write RUN/results.json and RUN/results.md; return the results."""
    key, selected_on = DEV_SCORES[task]
    output = Path(output)
    rows, runs = [], []
    for i, setting in enumerate(settings):
        directory = output / "grid" / setting_name(i, setting)
        log(f"[search] {task} setting {i + 1}/{len(settings)}: {_describe(setting)}")
        results = run_setting(setting, directory)
        dev = results["mean"].get(key)
        if dev is None:
            raise FinetuneError(f"{directory}: the run has no {key}; the search selects on it ({selected_on})")
        rows.append({"setting": dict(setting), "dev": dev, "test_average": results["mean"].get(TEST_AVERAGES[task]),
                     "seeds": results["seeds"], "directory": str(directory)})
        runs.append(results)
    chosen = max(range(len(rows)), key=lambda i: (rows[i]["dev"], -i))
    search = {"size": size, "selected_on": selected_on, "chosen": chosen, "settings": rows}
    results = {**runs[chosen], "search": search}
    chosen_md = (Path(rows[chosen]["directory"]) / "results.md").read_text(encoding="utf-8")
    write_results(output, results, format_search(task, search) + "\n" + chosen_md, log)
    return results


def _describe(setting: dict[str, Any]) -> str:
    return (f"lr {setting['lr']:g}, batch {setting['batch_size']}, {setting['epochs']:g} epochs, "
            f"warm-up {setting['warmup']}, weight decay {setting['weight_decay']:g}")


def format_search(task: str, search: dict[str, Any]) -> str:
    """One row per setting: its values, the joint dev score it was selected on, the test average."""
    header = ["#", "lr", "batch", "epochs", "warm-up", "weight decay", "dev (selection)", "test Avg", ""]
    rows = []
    for i, row in enumerate(search["settings"]):
        s = row["setting"]
        rows.append([i, f"{s['lr']:g}", s["batch_size"], f"{s['epochs']:g}", s["warmup"], f"{s['weight_decay']:g}",
                     row["dev"], row["test_average"], "**chosen**" if i == search["chosen"] else ""])
    seeds = len(search["settings"][0]["seeds"]) if search["settings"] else 0
    return "\n".join([
        f"# {task.upper()} hyperparameter search ({search['size']}-size grid of the paper's appendix)", "",
        f"Every setting × {seeds} seed{'s' if seeds != 1 else ''}; selected on the {search['selected_on']} "
        f"(mean over seeds; #M=1). The test average is shown, never used.", "",
        markdown_table(header, rows), "",
    ])
