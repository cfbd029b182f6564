"""Fine-tuning over several seeds, the driver XNLI and MLQA share.

The paper reports means over five seeds. A task loads and encodes its data once, then
:meth:`SeedRuns.run` fine-tunes with seeds ``config.seed``, ``config.seed + 1``, … (each run
in ``OUTPUT/seed-{s}/``) and :meth:`SeedRuns.finish` writes ``results.json`` and
``results.md``: the task's description, the config, every run, their mean and spread.

>>> from infoxlm.finetune.training import FinetuneConfig
>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp())
>>> runs = SeedRuns("toy", FinetuneConfig(lr=1e-5, batch_size=8, epochs=1, seed=3), 2, out, log=lambda _: None)
>>> [r["seed"] for r in runs.run(lambda config, seed_dir: {"seed": config.seed, "score": 10.0 * config.seed})]
[3, 4]
>>> results = runs.finish({"setting": "demo"}, mean_keys=["score"], std_keys=["score"], markdown=lambda r: "")
>>> results["task"], results["seeds"], results["mean"]["score"]
('toy', [3, 4], 35.0)
>>> import shutil; shutil.rmtree(out)
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ..outputs import atomic_dir
from ..eval.results import mean_over_seeds, std_over_seeds, write_results
from .training import FinetuneConfig, FinetuneError, copy_config

__all__ = ["SeedRuns"]


class SeedRuns:
    """``seeds`` fine-tuning runs of one task, timed from construction (data loading included).

    Made before the data are read, so that a bad ``seeds`` is refused at once."""

    def __init__(self, task: str, config: FinetuneConfig, seeds: int, output: str | Path, log: Callable[[str], None]):
        if seeds < 1:
            raise FinetuneError(f"--seeds {seeds}: expected >= 1")
        self.task, self.config, self.seeds, self.output, self.log = task, config, seeds, Path(output), log
        self.started = time.perf_counter()
        self.runs: list[dict[str, Any]] = []

    def run(self, run_once: Callable[[FinetuneConfig, Path], dict[str, Any]]) -> list[dict[str, Any]]:
        """``run_once(config with the run's seed, OUTPUT/seed-{s})`` for every seed, in order;
        each returns that run's results (a dict holding at least its ``seed``)."""
        self.output.mkdir(parents=True, exist_ok=True)
        for k in range(self.seeds):
            seed = self.config.seed + k
            self.log(f"[{self.task}] seed {seed} ({k + 1}/{self.seeds})")
            self.runs.append(run_once(copy_config(self.config, seed=seed), self.output / f"seed-{seed}"))
        return self.runs

    def finish(
        self,
        described: dict[str, Any],
        *,
        mean_keys: Sequence[str],
        std_keys: Sequence[str],
        markdown: Callable[[dict[str, Any]], str],
        predictions: bool = False,
    ) -> dict[str, Any]:
        """Write OUTPUT/results.json and results.md (``markdown(results)``) and return the results:
        ``task``, what ``described`` says (setting, model, data, …), the config, the seeds, the
        mean over seeds of ``mean_keys`` (those a run has), the spread of ``std_keys``, the runs
        and the seconds since construction. ``predictions``: also copy the first seed's
        ``seed-S/predictions/{task}/test-{lang}.*`` (XTREME's layout) to OUTPUT/predictions/, beside
        results.json, the one set of predictions XTREME's ``evaluate.py`` reads."""
        results = {
            "task": self.task,
            **described,
            "config": self.config.as_dict(),
            "seeds": [r["seed"] for r in self.runs],
            "mean": mean_over_seeds([{k: r[k] for k in mean_keys if k in r} for r in self.runs]),
            "std": std_over_seeds([{k: r[k] for k in std_keys} for r in self.runs]),
            "runs": self.runs,
            "seconds": time.perf_counter() - self.started,
        }
        if predictions and self.runs:
            self._publish_predictions(self.output / f"seed-{self.runs[0]['seed']}" / "predictions")
        write_results(self.output, results, markdown(results), self.log)
        return results

    def _publish_predictions(self, source: Path) -> None:
        for task_dir in sorted(p for p in source.iterdir() if p.is_dir()):
            # Replaced whole: a language an earlier run into RUN tested, and this one not, goes.
            with atomic_dir(self.output / "predictions" / task_dir.name, replace=True) as tmp:
                for file in task_dir.iterdir():
                    shutil.copyfile(file, tmp / file.name)
