"""``infoxlm demo --setting paper`` end to end on its quick settings, and how its models differ.

The quick run checks that every stage works together and that the outputs are what the
acceptance names (models that `infoxlm eval tatoeba` loads, results.json with the recipe,
paper-shaped tables, the layer-wise figure); it does not check the quality.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from infoxlm.demo.checkpoint import checkpoint_dir
from infoxlm.demo.run import run_demo, train_config
from infoxlm.demo.settings import PAPER, PAPER_QUICK
from infoxlm.eval.paper_results import ABLATIONS
from infoxlm.model.hub import read_contrast_layer

NAMES = ("infoxlm", "no-xlco", "no-tlm", "no-mixup", "no-momentum", "last-layer")


def _configs(settings):
    return {name: train_config(settings, 0, changes).to_dict() for name, _, changes in settings.models}


def test_the_paper_setting_trains_the_issue_s_six_models_from_the_checkpoint():
    configs = _configs(PAPER)
    assert tuple(configs) == NAMES
    universal = read_contrast_layer(checkpoint_dir())
    for name, config in configs.items():
        assert config["model"]["init"] == str(checkpoint_dir())
        assert config["contrast"]["layer"] == (4 if name == "last-layer" else universal)


def test_the_paper_setting_departs_from_the_base_preset_only_where_it_says():
    """The base preset is the paper's recipe; PAPER changes its scale and, documented, the
    contrast's vector, negatives, key-encoder momentum and the learning rate. Nothing else."""
    from infoxlm.train.presets import preset

    recipe, paper = _configs(PAPER)["infoxlm"], preset("base").to_dict()
    changed = {
        (section, field)
        for section in paper
        for field in paper[section]
        if recipe[section][field] != paper[section][field] and section != "run"
    }
    scale = {("data", f) for f in ("mmlm_batch_size", "tlm_batch_size", "xlco_batch_size", "block_size",
                                   "tlm_max_length", "xlco_max_length", "max_tokens")}
    scale |= {("optim", "warmup_steps"), ("optim", "max_steps"), ("contrast", "queue_size"), ("contrast", "layer"), ("model", "init")}
    contrast = {("contrast", f) for f in ("pooling", "normalize", "temperature", "in_batch_negatives", "momentum")}
    assert changed == scale | contrast | {("optim", "lr")}
    assert recipe["data"]["mixup"] and recipe["data"]["mask_xlco"] and recipe["contrast"]["use_momentum"]
    weights = recipe["objectives"]
    assert weights["mmlm_weight"] == weights["tlm_weight"] == weights["xlco_weight"] == 1.0


@pytest.mark.parametrize(
    "name, changed",
    [
        ("no-xlco", {("data", "xlco_batch_size"): 0}),
        ("no-tlm", {("data", "tlm_batch_size"): 0}),
        ("no-mixup", {("data", "tlm_batch_size"): 0, ("data", "mixup"): False}),
        ("no-momentum", {("data", "tlm_batch_size"): 0, ("contrast", "use_momentum"): False}),
        ("last-layer", {("contrast", "layer"): 4}),
    ],
)
def test_each_ablation_changes_only_what_it_names(name, changed):
    configs = _configs(PAPER)
    full, ablation = configs["infoxlm"], configs[name]
    for (section, field), value in changed.items():
        assert ablation[section][field] == value != full[section][field]
        ablation[section][field] = full[section][field]
    assert ablation == full


def test_the_shipped_checkpoint_is_a_small_masked_lm_with_its_card():
    from safetensors import safe_open

    from infoxlm.model.encoder import Encoder

    directory = checkpoint_dir()
    with safe_open(directory / "model.safetensors", "pt") as f:
        names = list(f.keys())
        assert any(n.startswith("lm_head.") for n in names)  # the MLM head comes with it
        assert all(str(f.get_slice(n).get_dtype()) == "F16" for n in names)
    encoder = Encoder.from_pretrained(directory)
    assert next(encoder.parameters()).dtype.is_floating_point and encoder.num_layers == 4
    assert "lm_head" in encoder.loaded_parts
    card = (directory / "README.md").read_text(encoding="utf-8")
    for licence in ("MPL-2.0", "BSD-3-Clause", "masked language modelling only"):
        assert licence in card
    assert (directory / "LICENSE.MPL-2.0.txt").is_file() and (directory / "tokenizer.json").is_file()


@pytest.mark.slow
def test_the_paper_setting_end_to_end(tmp_path):
    out = tmp_path / "D"
    results = run_demo(out, seed=0, settings=PAPER_QUICK, progress=False, log=lambda _: None)
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert set(saved["models"]) == {*NAMES, "start"}
    assert saved["recipe"]["contrast"]["pooling"] == "mean" and saved["recipe"]["model"]["init"] == str(checkpoint_dir())
    for name in NAMES:
        model = saved["models"][name]
        assert set(model["retrieval"]) == {"test", "heldout"}
        assert model["layer"] == (4 if name == "last-layer" else read_contrast_layer(checkpoint_dir()))
    markdown = (out / "results.md").read_text(encoding="utf-8")
    assert "--setting paper --quick" in markdown
    assert f"{ABLATIONS['−TLM −Momentum'][0]:.2f}" in markdown and "Contrast layer" in markdown
    for name in ("retrieval_test.png", "retrieval_heldout.png", "loss.png"):
        assert (out / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert results["summary"]["heldout"]["infoxlm"]["layer"] == saved["models"]["infoxlm"]["layer"]

    # Each model loads where the acceptance reads it: `infoxlm eval tatoeba --model D/NAME`.
    data = out / "work" / "retrieval" / "heldout"
    for name in NAMES:
        report = tmp_path / f"{name}.json"
        done = subprocess.run(
            [sys.executable, "-m", "infoxlm", "eval", "tatoeba", "--model", str(out / name), "--data", str(data),
             "--langs", "deu", "--output", str(report)],
            capture_output=True, text=True,
        )
        assert done.returncode == 0, done.stderr
        written = json.loads(report.read_text(encoding="utf-8"))
        assert written["layer"] == saved["models"][name]["layer"]
