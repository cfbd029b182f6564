"""The multi-seed driver XNLI and MLQA share."""

from __future__ import annotations

import json

import pytest

from infoxlm.finetune.seeds import SeedRuns
from infoxlm.finetune.training import FinetuneConfig, FinetuneError

CONFIG = FinetuneConfig(lr=1e-5, batch_size=8, epochs=1, seed=7)


def test_zero_seeds_are_refused_before_anything_is_written(tmp_path):
    with pytest.raises(FinetuneError, match=r"--seeds 0: expected >= 1"):
        SeedRuns("xnli", CONFIG, 0, tmp_path / "out", log=print)
    assert not (tmp_path / "out").exists()


def test_each_run_gets_the_next_seed_and_its_own_directory(tmp_path):
    logs: list[str] = []
    runs = SeedRuns("mlqa", CONFIG, 3, tmp_path / "out", log=logs.append)
    seen = []

    def run_once(config, seed_dir):
        seen.append((config.seed, seed_dir.name))
        return {"seed": config.seed, "score": float(config.seed), "extra": 1.0}

    runs.run(run_once)
    assert seen == [(7, "seed-7"), (8, "seed-8"), (9, "seed-9")]
    assert CONFIG.seed == 7  # each run gets a copy
    assert logs == ["[mlqa] seed 7 (1/3)", "[mlqa] seed 8 (2/3)", "[mlqa] seed 9 (3/3)"]
    results = runs.finish({"setting": "s"}, mean_keys=["score", "absent"], std_keys=["score"], markdown=lambda r: "# table\n")
    assert list(results)[:3] == ["task", "setting", "config"]
    assert results["seeds"] == [7, 8, 9]
    assert results["mean"] == {"score": 8.0}
    assert results["std"] == {"score": pytest.approx(1.0)}
    written = json.loads((tmp_path / "out" / "results.json").read_text())
    assert written["runs"] == results["runs"] and written["seconds"] >= 0
    assert (tmp_path / "out" / "results.md").read_text() == "# table\n"
    assert logs[-1] == "# table\n"
