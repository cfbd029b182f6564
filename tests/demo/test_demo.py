"""The demo end to end on its quick settings: every stage runs and its outputs are well formed.

This checks the pipeline, not the quality (the quick model trains for a dozen steps).
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time

import pytest

from infoxlm.demo.run import FULL, MODELS, QUICK, DemoError, run_demo, train_config
from infoxlm.train.checkpoint import list_checkpoints

QUICK_STEPS = train_config(QUICK, 0).optim.max_steps

pytestmark = pytest.mark.slow  # end-to-end runs and subprocesses


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    results = run_demo(out, quick=True, seed=0, progress=False, log=lambda _: None)
    return out, results


def _percentages(tree):
    """Every accuracy-like number in the retrieval and classification results."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key in ("xx2en", "en2xx") or key in ("accuracy",):
                yield from (_percentages(value) if isinstance(value, dict) else [value])
            elif key not in ("n", "layer", "transfer_gap"):
                yield from _percentages(value)
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        yield tree


def test_results_json_is_complete(demo):
    out, results = demo
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert set(saved) >= {"settings", "models", "summary", "plots", "seconds"}
    assert set(saved["models"]) == set(MODELS)
    assert saved["settings"]["name"] == QUICK.name and saved["settings"]["seed"] == 0
    for name, model in saved["models"].items():
        assert set(model) >= {"label", "path", "layer", "retrieval", "classification"}
        assert set(model["retrieval"]) == {"dev", "test", "heldout"}
        layers = model["retrieval"]["test"]
        assert sorted(int(k) for k in layers) == list(range(len(layers)))  # every layer, 0 … L
        assert str(model["layer"]) in layers
        for split in model["retrieval"].values():
            for scores in split.values():
                assert set(scores["languages"]) == {"deu", "fra", "cmn"}
        accuracy = model["classification"]["accuracy"]
        assert set(accuracy) == {"en", "de", "fr", "zh"}
        others = [v for k, v in accuracy.items() if k != "en"]
        assert math.isclose(model["classification"]["transfer_gap"], accuracy["en"] - sum(others) / len(others))
    numbers = list(_percentages(saved["models"])) + list(_percentages(saved["summary"]))
    assert numbers and all(0.0 <= x <= 100.0 for x in numbers)


def test_tables_and_plots(demo):
    out, results = demo
    markdown = (out / "results.md").read_text(encoding="utf-8")
    assert "InfoXLM" in markdown and "−XLCO" in markdown and "| **average** |" in markdown
    for name in ("retrieval_test.png", "retrieval_heldout.png", "loss.png"):
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000


def test_models_load_with_transformers(demo, transformers):
    import torch

    out, _ = demo
    for name in MODELS:
        model = transformers.AutoModel.from_pretrained(out / name)
        tokenizer = transformers.AutoTokenizer.from_pretrained(out / name)
        batch = tokenizer(["Open the file.", "Öffnen Sie die Datei."], return_tensors="pt", padding=True)
        with torch.no_grad():
            hidden = model(**batch).last_hidden_state
        assert hidden.shape[0] == 2 and torch.isfinite(hidden).all()


def test_rerun_reuses_the_work_and_gives_the_same_table(demo):
    out, results = demo
    again = run_demo(out, quick=True, seed=0, progress=False, log=lambda _: None)
    assert json.dumps(again["summary"], sort_keys=True) == json.dumps(
        json.loads(json.dumps(results["summary"])), sort_keys=True
    )


def _scores(results: dict) -> dict:
    """What results.json measured (not where it was written nor how long it took)."""
    models = {name: {k: v for k, v in m.items() if k not in ("path", "run")} for name, m in results["models"].items()}
    return json.loads(json.dumps({k: results[k] for k in ("settings", "recipe", "summary")} | {"models": models}))


def test_a_stop_signal_ends_the_demo_and_the_same_command_finishes_it_as_if_never_stopped(demo, tmp_path):
    """SIGTERM during the first pre-training run, once a step has run: that run keeps its checkpoint and the demo
    ends there (no second model, no results); the same command then gives the results of a
    demo never stopped."""
    out = tmp_path / "demo"
    command = [sys.executable, "-m", "infoxlm", "demo", "--quick", "--output", str(out), "--no-progress"]
    first_run = out / "work" / "runs" / "infoxlm"
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    metrics = first_run / "metrics.jsonl"
    while proc.poll() is None and time.monotonic() < deadline and not (metrics.is_file() and metrics.stat().st_size):
        time.sleep(0.02)  # its first line is written at the first logged step, so a step has run
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert "(SIGTERM received)" in err.decode()
    steps = [step for step, _ in list_checkpoints(first_run)]
    assert len(steps) == 1 and steps[0] < QUICK_STEPS
    assert not (out / "work" / "runs" / "no-xlco").exists() and not (out / "infoxlm").exists()
    assert not (out / "results.json").exists()

    again = subprocess.run(command, capture_output=True, timeout=600)
    assert again.returncode == 0, again.stderr.decode()[-2000:]
    finished = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert _scores(finished) == _scores(demo[1])


def test_other_seed_in_the_same_directory_is_refused(demo):
    out, _ = demo
    with pytest.raises(DemoError, match="other settings"):
        run_demo(out, quick=True, seed=1, progress=False, log=lambda _: None)


def test_cli_help_names_the_options():
    import argparse

    from infoxlm.commands.demo import add_demo_command

    parser = argparse.ArgumentParser(prog="infoxlm")
    add_demo_command(parser.add_subparsers())
    text = parser._subparsers._group_actions[0].choices["demo"].format_help()
    for option in ("--output", "--quick", "--seed"):
        assert option in text


@pytest.mark.parametrize("settings", [FULL, QUICK], ids=["full", "quick"])
def test_the_two_models_differ_only_in_xlco(settings):
    """The −XLCO ablation: same data, steps, seed and MLM batches; no XLCO batch."""
    configs = {name: train_config(settings, 0, changes).to_dict() for name, (_, changes) in MODELS.items()}
    with_xlco, without = configs["infoxlm"], configs["no-xlco"]
    assert with_xlco["data"].pop("xlco_batch_size") > 0 and without["data"].pop("xlco_batch_size") == 0
    assert with_xlco == without
