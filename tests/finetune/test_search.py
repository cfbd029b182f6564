"""The paper's fine-tuning defaults by model size and its hyperparameter search (#M=1, joint dev)."""

from __future__ import annotations

import json
import shutil

import pytest

from infoxlm.cli import main
from infoxlm.finetune import defaults
from infoxlm.finetune.search import run_search

from finetune_formats import toy_squad, write_mlqa, write_xnli


def test_grids_are_the_appendix_tables():
    def values(task, size):
        return {k: sorted({s[k] for s in defaults.grid(task, size)}) for k in defaults.GRID_KEYS}

    assert values("xnli", "base") == dict(lr=[5e-6, 7e-6, 1e-5], batch_size=[32], epochs=[10.0], warmup=["12500"], weight_decay=[0.0])
    assert values("xnli", "large") == dict(lr=[4e-6, 5e-6, 6e-6], batch_size=[32], epochs=[10.0], warmup=["5000"], weight_decay=[0.0, 0.01])
    assert values("mlqa", "base") == dict(lr=[2e-5, 3e-5, 5e-5], batch_size=[16, 32], epochs=[2.0, 3.0, 4.0], warmup=["10%"], weight_decay=[0.0])
    assert values("mlqa", "large") == dict(lr=[2e-5, 3e-5, 5e-5], batch_size=[32], epochs=[2.0, 3.0, 4.0], warmup=["10%"], weight_decay=[0.0])
    sizes = {(t, s): len(defaults.grid(t, s)) for t in defaults.TASKS for s in defaults.SIZES}
    assert sizes == {("xnli", "base"): 3, ("xnli", "large"): 6, ("mlqa", "base"): 18, ("mlqa", "large"): 9,
                     ("xnli", "small"): 3, ("mlqa", "small"): 18}  # small: infoxlm's, not the paper's
    for key, grid in defaults.GRIDS.items():  # every default is a value of its grid
        assert all(defaults.DEFAULTS[key][k] in grid[k] for k in defaults.GRID_KEYS)
    # an explicit flag fixes its dimension of the grid
    narrowed = defaults.grid("xnli", "large", {"lr": 5e-6, "epochs": None})
    assert [(s["lr"], s["weight_decay"]) for s in narrowed] == [(5e-6, 0.0), (5e-6, 0.01)]


def test_defaults_follow_the_model_size():
    assert defaults.model_size(hidden_size=1024, num_layers=24) == "large"
    assert defaults.model_size(hidden_size=768, num_layers=12) == "base"
    assert defaults.model_size(hidden_size=64, num_layers=2) == "small"  # the tests' tiny model
    assert defaults.model_size(hidden_size=256, num_layers=4) == "small"  # the demo's
    assert defaults.model_size(hidden_size=768, num_layers=6) == "small"  # a distilled base
    small = defaults.settings_for("xnli", "small")
    assert (small["lr"], small["warmup"], small["epochs"], small["batch_size"]) == (3e-4, "10%", 5.0, 32)
    large = defaults.settings_for("xnli", "large")
    assert (large["lr"], large["warmup"], large["weight_decay"], large["batch_size"]) == (5e-6, "5000", 0.0, 32)
    assert defaults.settings_for("xnli", "base", {"lr": 1e-3, "warmup": None})["lr"] == 1e-3
    assert defaults.settings_for("xnli", "base")["warmup"] == "12500"


def test_search_keeps_the_best_joint_dev_setting(tmp_path):
    """A stub per-setting run with fixed scores: the best dev wins, test is shown but not used."""
    settings = defaults.grid("xnli", "large")
    dev = [70.0, 71.0, 74.0, 72.0, 74.0, 69.0]  # settings 2 and 4 tie: the first is kept
    test = [90.0, 90.0, 60.0, 90.0, 95.0, 99.0]  # the best test average must not matter

    def run_setting(setting, directory):
        i = settings.index(setting)
        directory.mkdir(parents=True)
        (directory / "results.md").write_text(f"# setting {i}\n")
        return {"task": "xnli", "setting": "cross-lingual-transfer", "seeds": [0, 1], "config": setting,
                "mean": {"dev_average": dev[i], "test_average": test[i], "test": {"en": test[i]}, "transfer_gap": 1.0}}

    results = run_search("xnli", settings, run_setting, tmp_path / "run", size="large", log=lambda _: None)
    assert results["search"]["chosen"] == 2 and results["config"] == settings[2]
    assert [r["dev"] for r in results["search"]["settings"]] == dev
    assert json.loads((tmp_path / "run" / "results.json").read_text())["search"]["chosen"] == 2
    md = (tmp_path / "run" / "results.md").read_text()
    assert "| 2 | 5e-06 | 32 | 10 | 5000 | 0 | 74.0 | 60.0 | **chosen** |" in md
    assert md.count("**chosen**") == 1 and "# setting 2" in md and "large-size grid: the paper's appendix, large models" in md
    assert (tmp_path / "run" / "grid").is_dir()
    # `infoxlm report` reads a search directory as one run: the chosen setting's results
    assert main(["report", str(tmp_path / "run"), "--output", str(tmp_path / "report")]) == 0
    assert "| run (2 seeds) | 60.0 |" in (tmp_path / "report" / "report.md").read_text()


def test_explicit_flags_override_the_size_defaults(tiny_model_dir, tmp_path, capsys):
    data = write_xnli(tmp_path / "data", n_train=4, n_eval=2)
    assert main(["finetune", "xnli", "--model", str(tiny_model_dir), "--data", str(data), "--output", str(tmp_path / "run"),
                 "--setting", "cross-lingual-transfer", "--languages", "en", "de", "--lr", "1e-3", "--max-steps", "1",
                 "--no-save-model", "--no-progress"]) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    config = results["config"]
    assert (config["lr"], config["warmup"], config["weight_decay"], config["batch_size"]) == (1e-3, "10%", 0.0, 32)
    assert results["settings_chosen"] == {
        "model_size": "small", "from": defaults.ORIGINS["small"], "given": ["lr"], "defaults": defaults.DEFAULTS["xnli", "small"],
    }
    out = capsys.readouterr().out
    assert "[xnli] small-size settings (2 layers × 64; infoxlm's for models below base's 12 layers × 768" in out
    assert "lr 0.001, batch_size 32, epochs 5.0, warmup 10%, weight_decay 0.0" in out


def test_mlqa_search_end_to_end_on_a_two_setting_grid(tiny_model_dir, tmp_path, capsys):
    train = tmp_path / "train-v1.1.json"
    train.write_text(json.dumps(toy_squad(8, seed=0)), encoding="utf-8")
    mlqa = write_mlqa(tmp_path / "MLQA_V1", languages=("en", "de"), n=2)
    args = ["finetune", "mlqa", "--model", str(tiny_model_dir), "--train", str(train), "--data", str(mlqa),
            "--languages", "en", "de", "--max-length", "96", "--doc-stride", "48", "--max-steps", "2",
            "--no-save-model", "--no-progress", "--search", "--lr", "3e-5", "--epochs", "2"]
    assert main([*args, "--output", str(tmp_path / "run")]) == 0
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    rows = results["search"]["settings"]
    assert [r["setting"]["batch_size"] for r in rows] == [16, 32]  # the small grid's batches, lr and epochs fixed
    assert all(r["setting"]["lr"] == 3e-5 and r["setting"]["epochs"] == 2.0 for r in rows)
    best = max(range(2), key=lambda i: (rows[i]["dev"], -i))
    assert results["search"]["chosen"] == best and results["config"]["batch_size"] == rows[best]["setting"]["batch_size"]
    for row in rows:  # each row's dev score is its run's mean dev F1 of the final model
        run = json.loads((tmp_path / "run" / "grid" / row["directory"].split("/")[-1] / "results.json").read_text())
        assert run["mean"]["dev_f1_average"] == row["dev"] and run["runs"][0]["dev_f1"].keys() == {"en", "de"}
    assert "MLQA dev files" in (tmp_path / "run" / "results.md").read_text()
    shutil.rmtree(mlqa / "dev")  # without dev files the search refuses rather than select on test
    capsys.readouterr()
    assert main([*args, "--output", str(tmp_path / "run2")]) == 1
    err = capsys.readouterr().err
    assert "no dev-context-en-question-en.json" in err and "needs the MLQA dev files, never test" in err


def test_xnli_search_runs_the_whole_grid_of_the_models_size(tiny_model_dir, tmp_path):
    data = write_xnli(tmp_path / "data", n_train=4, n_eval=2)
    assert main(["finetune", "xnli", "--model", str(tiny_model_dir), "--data", str(data), "--output", str(tmp_path / "run"),
                 "--setting", "cross-lingual-transfer", "--languages", "en", "de", "--search", "--max-steps", "1",
                 "--no-save-model", "--no-progress"]) == 0
    search = json.loads((tmp_path / "run" / "results.json").read_text())["search"]
    assert [r["setting"]["lr"] for r in search["settings"]] == [1e-4, 3e-4, 1e-3] and search["size"] == "small"
    assert len(list((tmp_path / "run" / "grid").iterdir())) == 3
    assert search["chosen"] == max(range(3), key=lambda i: (search["settings"][i]["dev"], -i))
